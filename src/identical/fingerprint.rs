//! The hashing walks: the cheap first looks at every function.
//!
//! Most functions of a module are equal to no other. For those the pass needs a
//! key that sets them apart and the functions whose address they take, and
//! nothing else; only functions whose key another function shares are encoded for
//! the comparator (`encode.rs`). Two walks here keep no per-value state and write
//! no token stream.
//!
//! **Prefix.** The first look ([`Fingerprint::first_look`]), the pass's look at
//! every function, hashes only the
//! beginning of its encoding: the signature, then the first
//! [`PREFIX_INSTRUCTIONS`] reachable instructions in the encoding's order (blocks
//! in order of discovery from the entry, each with its parameter count, its
//! instructions in layout order and its end), each instruction's word being the
//! walk's below. Equal encodings have equal prefixes, so equal prefix keys; and
//! most functions of real programs already differ in their first few dozen
//! instructions, so the pass walks whole ([`Fingerprint::walk`]) only the
//! functions whose prefix key another shares, and of those only the ones whose
//! [`table_key`] (a sum over the instruction table, read in index order without
//! the layout: about a nanosecond per instruction) another of them shares too
//! (docs/design.md has what each key saves on the corpus).
//! The hashes of the functions walked whole are then refined by their callees'
//! hashes ([`with_callees`]): functions of one class call functions of one class,
//! so a function equal to another but for callees that differ in their hash is
//! set apart before it is encoded, and the refinement is repeated so that a
//! difference is carried up chains of callers.
//! With the similar merge's fingerprints asked for, one look takes both prefix
//! keys ([`Fingerprint::first_look`] with [`Chains::Both`]: the hole-blind one is to
//! the hole-blind fingerprint ([`Chains::HoleBlind`]) what the prefix key is to the whole walk ([`Fingerprint::walk`])), and
//! one whole walk takes both fingerprints of a function whose key of either kind
//! another shares.
//! The functions whose address a function too long for its prefix takes are
//! looked for only when they matter, once the classes are known: such a function
//! is walked whole if it names a member of a class
//! (`EncodedFunctions::resolve_address_taken`).
//!
//! **The whole walk.** [`Fingerprint::walk`] computes a fingerprint of the whole
//! function, its reachable instruction count and the functions whose address it
//! takes, in one pass over the layout:
//!
//! 1. **Blocks.** Every block of the layout is hashed on its own: its parameter
//!    count, then each instruction in layout order, its opcode and the parts
//!    `instruction.rs` hands over that the encoding writes as they are
//!    (condition codes, trap codes, memory flags by content, offsets, lane
//!    indices, constants, the signatures of indirect calls by content, argument
//!    counts). Each instruction is one multiply in one chain per block: no value
//!    numbering, no types, no callees, no entity handles. The successors the
//!    encoding follows (`jump`, `brif`, `br_table`, the normal return and handlers
//!    of `try_call` and `try_call_indirect`, `exception_handler_address`) are noted
//!    per block, and so are the functions whose address an instruction takes.
//!    With [`Operands::Hashed`] (the pass's one walk in a module of short
//!    functions, where no prefix is taken), the first chain also reads how each
//!    fixed operand is defined: the opcode and result index of its defining
//!    instruction, or its index among a block's parameters and whether that
//!    block is the using one's. Still no numbering: one read of the value table
//!    per operand.
//! 2. **Reach.** The blocks reachable from the entry through those successors:
//!    exactly the blocks the encoding visits.
//! 3. **Combine.** The function's hash is its signature's, plus the *sum* of the
//!    reachable blocks' hashes: the encoding fixes the order of instructions
//!    within a block, but the order of blocks only up to the CFG walk, and a sum
//!    does not depend on it.
//!
//! **Holes.** The hole-blind fingerprint ([`Chains::HoleBlind`]) is the same walk for the similar-function
//! merge, whose functions are alike when their encodings are equal but for
//! *holes* (`encode.rs`): the immediates of `iconst`, `f32const` and `f64const`,
//! and the offsets of callee loads. It leaves those immediates out, and the offset
//! of every plain `load` from an entry-block parameter (every callee load is one;
//! whether such a load *is* one depends on the uses of its result, which this walk
//! does not look at, so it leaves out more than the holes, which can only put more
//! functions in a bucket). Everything else it hashes is written as is in the
//! encoding with holes too, so equal streams with the holes blanked have equal
//! hole-blind fingerprints (`tests/passes/corpus.rs` checks it on every corpus function).
//! [`Fingerprint::both`] takes both fingerprints in one walk,
//! in two chains that differ only in the words of possible holes, for the
//! identical merge to hand the similar merge that follows it (`tests/passes/parallel.rs`
//! checks the buckets they make against the walk on its own).
//!
//! **Agreement with the comparator.** `compare(f, g) == Equal` implies
//! `hash(f) == hash(g)`, and the same of prefix keys, because both are functions
//! of the encoding (the prefix key of its beginning, in its own order), by
//! construction: the walks here and the encoding read an instruction's parts
//! from one match (`instruction::visit`) and agree on which parts are holes
//! through `instruction::Immediate`. Equal
//! encodings visit the same number of blocks with, pairwise in visit order, the
//! same parameter counts and the same instructions with the same opcodes and the
//! same immediates, signatures and memory flags (all written by content), and the
//! hash reads nothing else. Two exceptions are deliberate and one-sided (they can
//! only lose a merge, never make one): an `iconst` immediate is hashed as stored,
//! which is the comparator's value masked to its type in any IR the verifier
//! accepts (`iconst_bounds`; cranelift-reader stores it so), and a reference to an
//! undeclared entity, which the comparator reports unsupported, is hashed as a
//! fixed token (so such a function is only found unsupported when it is a
//! candidate, as with a value used before its definition). The prefix walk adds a
//! third: a branch to a block the function does not have, which the encoding
//! cannot walk, ends the prefix with a fixed token. And a fourth: the prefix key
//! of a function longer than its prefix (not the hole-blind one) reads the
//! length of its instruction table, which counts what the encoding does not
//! (instructions of unreachable blocks, instructions removed from the layout):
//! equal functions share it when their tables hold only their reachable
//! instructions, as cranelift-reader and frontends build them. It sets apart
//! most of the long functions that share a prefix, so fewer are walked whole;
//! two functions equal but for unreachable code are no longer
//! merged. The table key makes the same assumption: it reads every entry of the
//! instruction table, so two functions equal but for different unreachable
//! instructions (even as many) are not merged either. The property tests and the
//! comparator fuzz target check `equal ⇒ same hash, prefix key and table key`
//! on generated functions (the keys where the tables allow); `tests/passes/corpus.rs`
//! checks that every corpus function merges with a respelled clone of itself
//! (which needs both), and `tests/passes/parallel.rs` checks the pass's hashes against
//! the whole walk's on every filetest.

use super::hash::{HashedFunction, StructuralHash};
use super::instruction::{self, FunctionUse, Immediate, InstructionVisitor};
use crate::ir::{FuncIndex, FunctionSet};
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::{
    self, AbiParam, ArgumentPurpose, Block, BlockCall, Constant, DynamicStackSlot, ExceptionTable,
    ExternalName, FuncRef, Function, GlobalValue, GlobalValueData, Inst, InstructionData,
    JumpTable, MemFlags, SigRef, Signature, StackSlot, Value, ValueDef, ValueListPool,
};
use std::convert::Infallible;
use std::hash::{Hash, Hasher};

/// Per-function tables of the hashing walk, kept between functions so that
/// hashing allocates nothing once they have grown.
#[derive(Default)]
pub struct FingerprintScratch {
    blocks: SecondaryMap<Block, BlockSummary>,
    /// With [`BOTH`] chains: each block's hash with the holes left out.
    hole_blind_blocks: SecondaryMap<Block, u64>,
    successors: Vec<Block>,
    reach: Vec<Block>,
    address_uses: Vec<(Block, FuncIndex)>,
    /// With calls recorded ([`Fingerprint::walk`] with [`Fingerprint::callees`]): each direct call's
    /// block and import.
    calls: Vec<(Block, FuncRef)>,
    /// Content hash per memory-flags handle.
    mem_flags: HandleHashes,
    /// Content hash per signature handle.
    signatures: HandleHashes,
}

/// Content hashes of one function's entities by handle index, each computed on
/// first use (0 until then: no content hash is 0).
#[derive(Default)]
struct HandleHashes(Vec<u64>);

impl HandleHashes {
    /// The hash of handle `index`, computed by `compute` on first use.
    #[inline]
    fn get_or_compute(&mut self, index: usize, compute: impl FnOnce() -> u64) -> u64 {
        match self.0.get(index) {
            Some(&known) if known != 0 => known,
            _ => {
                let hash = compute();
                if self.0.len() <= index {
                    self.0.resize(index + 1, 0);
                }
                self.0[index] = hash;
                hash
            }
        }
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// What phase 1 learns about one block.
#[derive(Copy, Clone, Default)]
struct BlockSummary {
    hash: u64,
    instructions: u32,
    /// `successors[first_successor..end_successor]`.
    first_successor: u32,
    end_successor: u32,
    reached: bool,
}

const K: u64 = 0x9e37_79b9_7f4a_7c15;
const K2: u64 = 0xc2b2_ae3d_27d4_eb4f;

/// One step of a chain: order-dependent.
#[inline(always)]
fn mix(state: u64, word: u64) -> u64 {
    (state.rotate_left(26) ^ word).wrapping_mul(K)
}

/// Two words of one instruction folded into one (independent of the chain, so it
/// overlaps with the previous instruction's multiply).
#[inline(always)]
fn pair(a: u64, b: u64) -> u64 {
    a ^ b.wrapping_mul(K2).rotate_left(31)
}

/// Murmur3's 64-bit finalizer.
#[inline(always)]
fn avalanche(mut x: u64) -> u64 {
    x ^= x >> 33;
    x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
    x ^= x >> 33;
    x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    x ^ (x >> 33)
}

/// The token of an undeclared entity (see the module docs).
const UNDECLARED: u64 = 0x5bd1_e995;

/// Marks an operand that is a block parameter ([`Operands::Hashed`]): no opcode
/// is this large.
const PARAMETER: u64 = 0x8000;

/// An operand that is a union of values (only in Cranelift's e-graph; the
/// encoding reports it undefined).
const UNION: u64 = 0x4000;

/// A deterministic [`Hasher`] for the `Hash` impls of Cranelift's small data types.
struct WordHasher(u64);

impl Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = mix(self.0, u64::from(b));
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.0 = mix(self.0, u64::from(i));
    }
    fn write_u16(&mut self, i: u16) {
        self.0 = mix(self.0, u64::from(i));
    }
    fn write_u32(&mut self, i: u32) {
        self.0 = mix(self.0, u64::from(i));
    }
    fn write_u64(&mut self, i: u64) {
        self.0 = mix(self.0, i);
    }
    fn write_usize(&mut self, i: usize) {
        self.0 = mix(self.0, i as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

/// What a hashing look or walk computes and reads: the one configuration of
/// every fingerprint of this file. Every look and walk is deterministic and
/// never fails on a function the comparator can encode.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fingerprint {
    /// Which fingerprints.
    pub chains: Chains,
    /// What the pass's fingerprint reads of operands (the hole-blind one never
    /// reads them).
    pub operands: Operands,
    /// Whether the walk also lists the module functions that the reachable
    /// direct calls (`call`, `return_call`, `try_call`) call, once per call,
    /// sorted: what `with_callees` refines the hash with.
    pub callees: bool,
}

/// Which fingerprints a [`Fingerprint`] look or walk computes.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Chains {
    /// The pass's fingerprint.
    Exact,
    /// The similar merge's bucket key alone: the pass's fingerprint with the
    /// immediates that may become parameters left out (see "Holes" in the
    /// module docs), and with `callee_load_offsets` (the walk's
    /// `WalkOptions::callee_load_holes`) the offset of every plain `load` from
    /// an entry-block parameter too.
    HoleBlind {
        /// Whether callee-load offsets are left out.
        callee_load_offsets: bool,
    },
    /// Both in one walk: for a pass that merges identical functions and then
    /// similar ones, the second pass's look at a function costs a second chain
    /// of multiplies in the first pass's walk instead of a walk of its own.
    Both {
        /// Whether callee-load offsets are left out of the hole-blind one.
        callee_load_offsets: bool,
    },
}

/// What a [`Fingerprint::walk`] finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fingerprinted {
    /// The fingerprint ([`Chains::HoleBlind`]: the hole-blind one), the module
    /// functions whose address the reachable code takes (sorted, without
    /// repeats) and the number of reachable instructions.
    pub hashed: HashedFunction,
    /// With [`Chains::Both`]: the hole-blind fingerprint.
    pub hole_blind: Option<StructuralHash>,
    /// With [`Fingerprint::callees`]: the callees of the direct calls.
    pub callees: Vec<FuncIndex>,
}

impl Fingerprint {
    /// The pass's fingerprint alone, operands skipped, no callees.
    pub const EXACT: Self = Self {
        chains: Chains::Exact,
        operands: Operands::Skipped,
        callees: false,
    };

    /// The similar merge's bucket key alone ([`Chains::HoleBlind`]).
    pub fn hole_blind(callee_load_offsets: bool) -> Self {
        Self {
            chains: Chains::HoleBlind {
                callee_load_offsets,
            },
            ..Self::EXACT
        }
    }

    /// Both fingerprints in one walk ([`Chains::Both`]).
    pub fn both(callee_load_offsets: bool) -> Self {
        Self {
            chains: Chains::Both {
                callee_load_offsets,
            },
            ..Self::EXACT
        }
    }

    /// This configuration reading `operands`.
    pub fn with_operands(self, operands: Operands) -> Self {
        Self { operands, ..self }
    }

    /// This configuration listing the callees of direct calls.
    pub fn with_callees(self) -> Self {
        Self {
            callees: true,
            ..self
        }
    }

    /// Hashes the whole of `func` (see the module docs).
    pub fn walk(
        self,
        func: &Function,
        module: &FunctionSet,
        scratch: &mut FingerprintScratch,
    ) -> Fingerprinted {
        match self.chains {
            Chains::Exact => self.walk_with::<EXACT>(func, module, false, scratch),
            Chains::HoleBlind {
                callee_load_offsets,
            } => self.walk_with::<HOLE_BLIND>(func, module, callee_load_offsets, scratch),
            Chains::Both {
                callee_load_offsets,
            } => self.walk_with::<BOTH>(func, module, callee_load_offsets, scratch),
        }
    }

    /// [`Self::walk`] with the chains `CHAINS`.
    fn walk_with<const CHAINS: ChainSet>(
        self,
        func: &Function,
        module: &FunctionSet,
        callee_load_offsets: bool,
        scratch: &mut FingerprintScratch,
    ) -> Fingerprinted {
        let mut walk = HashWalk::<CHAINS>::new(func, module, callee_load_offsets, scratch);
        walk.record_calls = self.callees;
        walk.operands = self.operands;
        walk.walk();
        let hole_blind = (CHAINS == BOTH)
            .then(|| StructuralHash(walk.combined(|s, block| s.hole_blind_blocks[block])));
        let hashed = walk.combine();
        let callees = if self.callees {
            walk.callees()
        } else {
            Vec::new()
        };
        Fingerprinted {
            hashed,
            hole_blind,
            callees,
        }
    }

    /// The pass's first look at `func` (see "Prefix" in the module docs): a hash
    /// of the function's first `PREFIX_INSTRUCTIONS` reachable instructions in
    /// the encoding's order, its *prefix key*, and with [`Chains::Both`] the
    /// hole-blind prefix key, what the prefix key is for the hole-blind
    /// fingerprint. When the whole function fits in the prefix, the key is a hash
    /// of its whole encoding, and the address uses and the instruction count are
    /// exact. Otherwise the address uses are only the stack limit's (the others
    /// are found when they matter: `EncodedFunctions::resolve_address_taken`),
    /// and the count is the length of the function's instruction table, which is
    /// the same for a function whose every instruction is in a reachable block.
    ///
    /// Equal encodings have equal prefix keys, and either both fit in the prefix
    /// or neither does: only functions that do not, and whose prefix key another
    /// function shares, need a whole walk. Operands and callees are not read.
    pub fn first_look(
        self,
        func: &Function,
        module: &FunctionSet,
        scratch: &mut FingerprintScratch,
    ) -> (FirstLook, Option<StructuralHash>) {
        match self.chains {
            Chains::Exact => {
                let (look, _) = HashWalk::<EXACT>::new(func, module, false, scratch).first_look();
                (look, None)
            }
            Chains::HoleBlind { .. } => {
                unreachable!("the hole-blind prefix key is only taken beside the exact one")
            }
            Chains::Both {
                callee_load_offsets,
            } => {
                let (look, blind) =
                    HashWalk::<BOTH>::new(func, module, callee_load_offsets, scratch).first_look();
                (look, Some(blind))
            }
        }
    }
}

/// What the first chain of a whole walk reads of an instruction's operands.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Operands {
    /// Nothing: the walk reads only the instructions and the layout.
    Skipped,
    /// How each operand is defined: the opcode and result index of its defining
    /// instruction, or its index among its block's parameters and whether that
    /// block is the using instruction's. It costs a read of the value table per
    /// operand (about 10 ns more per instruction) and sets apart functions that
    /// differ only in which values they use: on the generated modules of 10k
    /// functions, the candidates fell from 62% to 36% (exact and near
    /// duplicates) and from 74% to 15% (mostly near duplicates).
    Hashed,
}

/// `hash` refined by the hashes of the module functions its function calls
/// (`callees`, once per call, from [`Fingerprint::walk`] with [`Fingerprint::callees`]), each read from
/// `hashes`, in which functions of one class must have equal hashes (the pass's
/// first round, prefix keys or whole walks, or a round of this refinement over
/// it: `EncodedFunctions::refine_by_callees`). Two functions in one class call,
/// call for call, functions of one class, which have equal such hashes, so they
/// keep equal refined hashes; functions equal but for callees that differ in
/// their hashes are set apart before any encoding (GCC's ipa-icf compares
/// callees the same way, by their hashes first).
pub fn with_callees(
    hash: StructuralHash,
    callees: &[FuncIndex],
    hashes: &SecondaryMap<FuncIndex, StructuralHash>,
) -> StructuralHash {
    if callees.is_empty() {
        return hash;
    }
    let sum = callees.iter().fold(0u64, |sum, &callee| {
        sum.wrapping_add(avalanche(hashes[callee].0 ^ CALLEE))
    });
    StructuralHash(avalanche(mix(hash.0, sum)))
}

/// Sets apart a callee's hash in [`with_callees`].
const CALLEE: u64 = 0xca11_ee00_ca11_ee00;

/// How many reachable instructions the first look ([`Fingerprint::first_look`]) reads: enough to set apart most
/// functions of real programs. On the corpus programs, 16, 24, 32 and 48 cost
/// about the same (fewer read, more walked whole); 8 walks 19–33% of the
/// instructions whole, and 128 reads 16–41% in prefixes.
pub const PREFIX_INSTRUCTIONS: u32 = 24;

/// What the first look ([`Fingerprint::first_look`]) finds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FirstLook {
    /// The prefix key, the address uses and the instruction count.
    pub hashed: HashedFunction,
    /// Whether the whole function fitted in the prefix (and so whether the
    /// address uses and the count are exact).
    pub whole: bool,
}

/// The chains a [`HashWalk`] computes, as a constant its code is specialized
/// for ([`Chains`] as a number: const generics take no enums on stable Rust).
type ChainSet = u8;
/// [`Chains::Exact`].
const EXACT: ChainSet = 0;
/// [`Chains::HoleBlind`] (in [`BlockSummary::hash`]).
const HOLE_BLIND: ChainSet = 1;
/// [`Chains::Both`], the hole-blind one in [`FingerprintScratch::hole_blind_blocks`].
const BOTH: ChainSet = 2;

/// The hashing walk over one function, computing the chains `CHAINS` says.
struct HashWalk<'a, const CHAINS: ChainSet> {
    func: &'a Function,
    module: &'a FunctionSet,
    scratch: &'a mut FingerprintScratch,
    /// With a hole-blind chain: whether the offsets of loads from entry-block
    /// parameters are left out.
    blank_load_offsets: bool,
    /// With a hole-blind chain: the entry block.
    entry: Option<Block>,
    /// Whether direct calls are noted ([`FingerprintScratch::calls`]).
    record_calls: bool,
    /// Whether the first chain reads operands.
    operands: Operands,
    /// The number of values of the function: an operand beyond them is undeclared.
    values: usize,
}

impl<'a, const CHAINS: ChainSet> HashWalk<'a, CHAINS> {
    /// A walk over `func`, not yet run (`blank_load_offsets` only matters with a
    /// hole-blind chain).
    fn new(
        func: &'a Function,
        module: &'a FunctionSet,
        blank_load_offsets: bool,
        scratch: &'a mut FingerprintScratch,
    ) -> Self {
        Self {
            func,
            module,
            scratch,
            blank_load_offsets,
            entry: if CHAINS == EXACT {
                None
            } else {
                func.layout.entry_block()
            },
            record_calls: false,
            operands: Operands::Skipped,
            values: func.dfg.num_values(),
        }
    }

    /// Phases 1 and 2 over the function, ready to combine.
    fn walk(&mut self) {
        self.reset();
        self.blocks();
        self.reach();
    }

    /// The prefix (see "Prefix" in the module docs): one chain over the signature
    /// and the first [`PREFIX_INSTRUCTIONS`] reachable instructions, blocks in
    /// the encoding's order of discovery from the entry and instructions in layout
    /// order, with each block's parameter count and end. Leaves the address uses
    /// of the instructions it read in the scratch.
    fn prefix(&mut self) -> Prefix {
        let func = self.func;
        let (layout, dfg) = (&func.layout, &func.dfg);
        self.reset();
        let mut hash = mix(
            signature_hash(&func.signature),
            u64::from(func.stack_limit.is_some()),
        );
        // With [`BOTH`] chains, the hole-blind one.
        let mut blind = hash;
        let mut budget = PREFIX_INSTRUCTIONS;
        if let Some(entry) = layout.entry_block() {
            self.scratch.blocks[entry].reached = true;
            self.scratch.reach.push(entry);
        }
        let mut next = 0;
        while next < self.scratch.reach.len() {
            let block = self.scratch.reach[next];
            next += 1;
            if block.index() >= dfg.num_blocks() {
                // Not a block of the function (the verifier rejects it).
                return Prefix::partial(mix(hash, UNDECLARED), mix(blind, UNDECLARED));
            }
            let params = dfg.block_params(block).len() as u64;
            hash = mix(hash, params);
            blind = mix(blind, params);
            let mut at = layout.first_inst(block);
            while let Some(inst) = at {
                if budget == 0 {
                    // The exact key of a function longer than its prefix also
                    // reads the length of its instruction table (see
                    // "Agreement with the comparator" in the module docs).
                    let length = dfg.num_insts() as u64;
                    return Prefix::partial(mix(hash, length), blind);
                }
                budget -= 1;
                let (word, blind_word) = self.words(block, &dfg.insts[inst]);
                hash = mix(hash, word);
                if CHAINS == BOTH {
                    blind = mix(blind, blind_word);
                }
                let s = &mut *self.scratch;
                for i in 0..s.successors.len() {
                    let successor = s.successors[i];
                    if !s.blocks[successor].reached {
                        s.blocks[successor].reached = true;
                        s.reach.push(successor);
                    }
                }
                s.successors.clear();
                at = layout.next_inst(inst);
            }
            hash = mix(hash, END_OF_BLOCK);
            blind = mix(blind, END_OF_BLOCK);
        }
        let instructions = PREFIX_INSTRUCTIONS - budget;
        Prefix {
            key: avalanche(mix(hash, u64::from(instructions))),
            blind_key: avalanche(mix(blind, u64::from(instructions))),
            whole: true,
            instructions,
        }
    }

    /// the first look ([`Fingerprint::first_look`]) with the chains `CHAINS` says (the hole-blind prefix key is
    /// meaningful only with [`BOTH`]).
    fn first_look(&mut self) -> (FirstLook, StructuralHash) {
        let func = self.func;
        let prefix = self.prefix();
        let hashed = HashedFunction {
            hash: StructuralHash(prefix.key),
            address_taken: self.address_taken(|_| prefix.whole),
            instructions: if prefix.whole {
                prefix.instructions
            } else {
                func.dfg.num_insts() as u32
            },
        };
        let look = FirstLook {
            hashed,
            whole: prefix.whole,
        };
        (look, StructuralHash(prefix.blind_key))
    }

    /// After a walk with calls recorded: the module functions the reachable
    /// direct calls call, once per call, sorted.
    fn callees(&self) -> Vec<FuncIndex> {
        let (func, s) = (self.func, &*self.scratch);
        let mut calls: Vec<FuncRef> = s
            .calls
            .iter()
            .filter(|&&(block, _)| s.blocks[block].reached)
            .map(|&(_, func_ref)| func_ref)
            .collect();
        calls.sort_unstable();
        let mut callees = Vec::with_capacity(calls.len());
        for run in calls.chunk_by(|a, b| a == b) {
            let import = func.dfg.ext_funcs.get(run[0]);
            let callee = import.and_then(|data| self.module.lookup_external(func, &data.name));
            if let Some(callee) = callee {
                callees.extend(std::iter::repeat_n(callee, run.len()));
            }
        }
        callees.sort_unstable();
        callees
    }

    fn reset(&mut self) {
        let s = &mut *self.scratch;
        s.blocks.clear();
        // Sized once, so that recording a block never grows the map.
        s.blocks.resize(self.func.dfg.num_blocks());
        if CHAINS == BOTH {
            s.hole_blind_blocks.clear();
            s.hole_blind_blocks.resize(self.func.dfg.num_blocks());
        }
        s.successors.clear();
        s.reach.clear();
        s.address_uses.clear();
        s.calls.clear();
        s.mem_flags.clear();
        s.signatures.clear();
    }

    /// Phase 1: every block of the layout, on its own.
    fn blocks(&mut self) {
        let func = self.func;
        for block in func.layout.blocks() {
            let first_successor = self.scratch.successors.len() as u32;
            let mut hash = mix(K, func.dfg.block_params(block).len() as u64);
            let mut hole_blind = hash;
            let mut instructions = 0u32;
            // `next_inst` rather than `block_insts`: one call per instruction, not
            // an iterator that compares both ends (a block's list ends in `None`).
            let mut next = func.layout.first_inst(block);
            while let Some(inst) = next {
                let (word, blind_word) = self.words(block, &func.dfg.insts[inst]);
                hash = mix(hash, word);
                if CHAINS == BOTH {
                    hole_blind = mix(hole_blind, blind_word);
                }
                instructions += 1;
                next = func.layout.next_inst(inst);
            }
            if CHAINS == BOTH {
                self.scratch.hole_blind_blocks[block] =
                    avalanche(hole_blind ^ u64::from(instructions));
            }
            self.scratch.blocks[block] = BlockSummary {
                hash: avalanche(hash ^ u64::from(instructions)),
                instructions,
                first_successor,
                end_successor: self.scratch.successors.len() as u32,
                reached: false,
            };
        }
    }

    /// Phase 2: the blocks reachable from the entry, as the encoding's walk finds
    /// them (in another order, which does not matter).
    fn reach(&mut self) {
        let Some(entry) = self.func.layout.entry_block() else {
            return;
        };
        let s = &mut *self.scratch;
        s.blocks[entry].reached = true;
        s.reach.push(entry);
        let mut next = 0;
        while next < s.reach.len() {
            let block = s.reach[next];
            next += 1;
            let summary = s.blocks[block];
            for i in summary.first_successor..summary.end_successor {
                let successor = s.successors[i as usize];
                if !s.blocks[successor].reached {
                    s.blocks[successor].reached = true;
                    s.reach.push(successor);
                }
            }
        }
    }

    /// Phase 3: the signature, and the reachable blocks' hashes summed.
    fn combine(&mut self) -> HashedFunction {
        let hash = self.combined(|s, block| s.blocks[block].hash);
        let s = &*self.scratch;
        let instructions = s.reach.iter().map(|&b| s.blocks[b].instructions).sum();
        HashedFunction {
            hash: StructuralHash(hash),
            address_taken: self.address_taken(|block| s.blocks[block].reached),
            instructions,
        }
    }

    /// The signature and the reachable blocks' hashes (one of the chains, picked by
    /// `chain`) summed, with their instruction count.
    fn combined(&self, chain: impl Fn(&FingerprintScratch, Block) -> u64) -> u64 {
        let func = self.func;
        let s = &*self.scratch;
        let mut sum = 0u64;
        let mut instructions = 0u32;
        for &block in &s.reach {
            sum = sum.wrapping_add(chain(s, block));
            instructions += s.blocks[block].instructions;
        }
        let header = mix(
            mix(
                signature_hash(&func.signature),
                u64::from(func.stack_limit.is_some()),
            ),
            s.reach.len() as u64,
        );
        avalanche(mix(header, sum) ^ u64::from(instructions))
    }

    /// The module functions whose address the stack limit and the noted uses in
    /// blocks that `counts` take, sorted, without repeats.
    fn address_taken(&self, counts: impl Fn(Block) -> bool) -> Vec<FuncIndex> {
        let func = self.func;
        let mut address_taken: Vec<FuncIndex> = self
            .scratch
            .address_uses
            .iter()
            .filter(|(block, _)| counts(*block))
            .map(|&(_, f)| f)
            .collect();
        if let Some(gv) = func.stack_limit
            && let Some(f) = symbol_of_global(func, self.module, gv)
        {
            address_taken.push(f);
        }
        address_taken.sort_unstable();
        address_taken.dedup();
        address_taken
    }

    /// Whether `value` is a parameter of the entry block (`value_def` resolves
    /// aliases itself).
    fn is_entry_parameter(&self, value: Value) -> bool {
        let dfg = &self.func.dfg;
        matches!(dfg.value_def(value), ValueDef::Param(block, _) if Some(block) == self.entry)
    }

    fn successor(&mut self, call: &BlockCall) {
        let block = call.block(&self.func.dfg.value_lists);
        self.scratch.successors.push(block);
    }

    /// Content hash of a set of memory flags, computed once per handle.
    #[inline]
    fn mem_flags(&mut self, flags: MemFlags) -> u64 {
        let func = self.func;
        self.scratch
            .mem_flags
            .get_or_compute(flags.index(), || mem_flags_hash(func, flags))
    }

    /// Content hash of a signature, computed once per handle.
    #[inline]
    fn sig_ref(&mut self, sig: SigRef) -> u64 {
        let func = self.func;
        self.scratch
            .signatures
            .get_or_compute(sig.index(), || sig_ref_hash(func, sig))
    }

    /// Notes a module function whose address `block` takes through `name`.
    fn address_use(&mut self, block: Block, name: &ExternalName) {
        if let Some(f) = self.module.lookup_external(self.func, name) {
            self.scratch.address_uses.push((block, f));
        }
    }

    /// The words one instruction adds to the chains `CHAINS` says: the first
    /// chain's, and with [`BOTH`] the hole-blind one's (the two differ only in
    /// the words of possible holes), from one visit of its parts ([`Words`]).
    #[inline(always)]
    fn words(&mut self, block: Block, data: &InstructionData) -> (u64, u64) {
        let func = self.func;
        let opcode = data.opcode() as u64;
        let mut words = Words {
            walk: self,
            block,
            word: opcode,
            blind: opcode,
        };
        let Ok(()) = instruction::visit(data, &func.dfg.value_lists, &mut words);
        let (word, blind) = (words.word, words.blind);
        if CHAINS == HOLE_BLIND {
            // A hole-blind walk's one chain is the hole-blind one.
            return (blind, blind);
        }
        if self.operands == Operands::Hashed {
            return (word ^ self.operand_definitions(block, data), blind);
        }
        (word, blind)
    }

    /// The word of an instruction's fixed operands ([`Operands::Hashed`]): per
    /// operand, in order, the opcode and result index of the instruction defining
    /// it, or the index of the block parameter it is and whether that block is
    /// `block`. The encoding writes an operand as the position of its definition
    /// (aliases resolved, as `value_def` resolves them), so in equal encodings
    /// corresponding operands have corresponding definitions, and this word is
    /// equal.
    #[inline(always)]
    fn operand_definitions(&self, block: Block, data: &InstructionData) -> u64 {
        let dfg = &self.func.dfg;
        let mut word = 0u64;
        for &value in data.arguments(&dfg.value_lists) {
            let definition = if value.index() < self.values {
                match dfg.value_def(value) {
                    ValueDef::Result(inst, n) => dfg.insts[inst].opcode() as u64 | (n as u64) << 16,
                    ValueDef::Param(param_block, n) => {
                        PARAMETER | (n as u64) << 16 | u64::from(param_block == block) << 40
                    }
                    ValueDef::Union(..) => UNION,
                }
            } else {
                UNDECLARED
            };
            word = (word ^ definition).wrapping_mul(K2);
        }
        word.rotate_left(17)
    }
}

/// The words of one instruction in the chains of a [`HashWalk`]: the opcode, then
/// the instruction's parts as [`instruction::visit`] hands them over, the ones
/// the encoding writes as they are (immediates, memory flags and signatures by
/// content, argument counts). A possible hole (a constant, or the offset of a
/// plain `load` from an entry-block parameter when load offsets are blanked) is
/// left out of the hole-blind word. The successors the encoding follows and the
/// functions named are noted in the walk's scratch.
struct Words<'w, 'a, const CHAINS: ChainSet> {
    walk: &'w mut HashWalk<'a, CHAINS>,
    block: Block,
    /// The first chain's word (unused in a hole-blind walk).
    word: u64,
    /// The hole-blind chain's word (unused in an exact walk).
    blind: u64,
}

impl<const CHAINS: ChainSet> Words<'_, '_, CHAINS> {
    /// Adds a part that is never a hole to both words.
    #[inline(always)]
    fn add(&mut self, part: u64) {
        if CHAINS != HOLE_BLIND {
            self.word = fold(self.word, part);
        }
        if CHAINS != EXACT {
            self.blind = fold(self.blind, part);
        }
    }

    /// Adds a possible hole: to the first word only.
    #[inline(always)]
    fn add_hole(&mut self, part: u64) {
        if CHAINS != HOLE_BLIND {
            self.word = fold(self.word, part);
        }
    }
}

impl<const CHAINS: ChainSet> InstructionVisitor for Words<'_, '_, CHAINS> {
    type Error = Infallible;

    /// Not hashed: a fixed operand's definition is read by
    /// [`HashWalk::operand_definitions`], with [`Operands::Hashed`].
    #[inline(always)]
    fn value(&mut self, _value: Value) -> Result<(), Infallible> {
        Ok(())
    }

    /// The count, which only varies for calls and returns (the values are
    /// [`HashWalk::operand_definitions`]'s).
    #[inline(always)]
    fn values(&mut self, values: &[Value]) -> Result<(), Infallible> {
        let count = (values.len() as u64) << 16;
        self.word ^= count;
        self.blind ^= count;
        Ok(())
    }

    #[inline(always)]
    fn immediate(&mut self, immediate: Immediate) -> Result<(), Infallible> {
        let hole = immediate.is_constant()
            || matches!(immediate, Immediate::LoadOffset { address, .. }
                if CHAINS != EXACT
                    && self.walk.blank_load_offsets
                    && self.walk.is_entry_parameter(address));
        if hole {
            self.add_hole(immediate.word());
        } else {
            self.add(immediate.word());
        }
        Ok(())
    }

    #[inline(always)]
    fn mem_flags(&mut self, flags: MemFlags) -> Result<(), Infallible> {
        let word = self.walk.mem_flags(flags);
        self.add(word);
        Ok(())
    }

    /// Not hashed: the successor is noted, and its block is hashed on its own.
    #[inline(always)]
    fn block_call(&mut self, call: &BlockCall) -> Result<(), Infallible> {
        self.walk.successor(call);
        Ok(())
    }

    #[inline(always)]
    fn jump_table(&mut self, table: JumpTable) -> Result<(), Infallible> {
        let func = self.walk.func;
        let Some(table) = func.dfg.jump_tables.get(table) else {
            self.add(UNDECLARED);
            return Ok(());
        };
        let branches = table.all_branches();
        for call in branches {
            self.walk.successor(call);
        }
        self.add(branches.len() as u64);
        Ok(())
    }

    #[inline(always)]
    fn handler_block(&mut self, block: Block) -> Result<(), Infallible> {
        self.walk.scratch.successors.push(block);
        Ok(())
    }

    /// A callee by its flags (its name is what the refinement by callees reads);
    /// an address use noted.
    #[inline(always)]
    fn function(&mut self, func_ref: FuncRef, use_: FunctionUse) -> Result<(), Infallible> {
        let func = self.walk.func;
        let data = func.dfg.ext_funcs.get(func_ref);
        if use_ == FunctionUse::Address {
            if let Some(data) = data {
                self.walk.address_use(self.block, &data.name);
            }
            return Ok(());
        }
        if self.walk.record_calls {
            self.walk.scratch.calls.push((self.block, func_ref));
        }
        // The callee's signature is left out: its argument count says most of it,
        // and hashing it costs a lookup per import.
        let callee = match data {
            Some(data) => 2 | u64::from(data.colocated) | u64::from(data.patchable) << 2,
            None => UNDECLARED,
        };
        self.add(callee);
        Ok(())
    }

    #[inline(always)]
    fn signature(&mut self, sig: SigRef) -> Result<(), Infallible> {
        let word = self.walk.sig_ref(sig);
        self.add(word);
        Ok(())
    }

    #[inline(always)]
    fn exception_table(&mut self, table: ExceptionTable) -> Result<(), Infallible> {
        let func = self.walk.func;
        let Some(table) = func.dfg.exception_tables.get(table) else {
            self.add(UNDECLARED);
            return Ok(());
        };
        for call in table.all_branches() {
            self.walk.successor(call);
        }
        let word = self.walk.sig_ref(table.signature());
        self.add(word);
        Ok(())
    }

    /// Not hashed: slots are numbered by use in the encoding.
    #[inline(always)]
    fn stack_slot(&mut self, _slot: StackSlot) -> Result<(), Infallible> {
        Ok(())
    }

    /// Not hashed, as [`Self::stack_slot`].
    #[inline(always)]
    fn dynamic_stack_slot(&mut self, _slot: DynamicStackSlot) -> Result<(), Infallible> {
        Ok(())
    }

    /// Not hashed: a global value's chain is a lookup per use; the function whose
    /// address it takes is noted.
    #[inline(always)]
    fn global_value(&mut self, gv: GlobalValue) -> Result<(), Infallible> {
        let walk = &mut *self.walk;
        if let Some(f) = symbol_of_global(walk.func, walk.module, gv) {
            walk.scratch.address_uses.push((self.block, f));
        }
        Ok(())
    }

    /// Not hashed: a constant is a lookup in the pool.
    #[inline(always)]
    fn constant(&mut self, _constant: Constant) -> Result<(), Infallible> {
        Ok(())
    }

    /// Not hashed, as [`Self::constant`].
    #[inline(always)]
    fn shuffle_mask(&mut self, _mask: ir::Immediate) -> Result<(), Infallible> {
        Ok(())
    }
}

/// A part of an instruction folded into its word (order-dependent, and
/// independent of the chain, so it overlaps with the previous instruction's
/// multiply).
#[inline(always)]
fn fold(word: u64, part: u64) -> u64 {
    pair(word.rotate_left(7), part)
}

/// What the prefix walk finds.
struct Prefix {
    key: u64,
    /// With [`BOTH`] chains: the hole-blind key.
    blind_key: u64,
    /// Whether the whole function fitted in the prefix.
    whole: bool,
    /// Instructions read.
    instructions: u32,
}

impl Prefix {
    /// A prefix that ended before the function did.
    fn partial(hash: u64, blind: u64) -> Self {
        Prefix {
            key: avalanche(hash),
            blind_key: avalanche(blind),
            whole: false,
            instructions: PREFIX_INSTRUCTIONS,
        }
    }
}

/// The word that ends a block in the prefix (no instruction's word is the same
/// but by chance).
const END_OF_BLOCK: u64 = 0xe0b0_e0b0_e0b0_e0b0;

/// The *table key* of a function longer than its prefix: the *sum* of a word
/// per entry of its instruction table (`table_word`: the opcode and the
/// immediates the entry holds itself), read in index order without the
/// layout, the values or any other table, about a nanosecond per instruction
/// against the tens a whole walk takes. The sum does not depend on the order
/// of the entries, so two functions with equal encodings share it when their
/// tables hold only their reachable instructions: the assumption the prefix
/// key of such a function already makes by reading the table's length (see
/// "Agreement with the comparator"). The pass walks whole only the functions
/// that share both keys with another: on the corpus, those that share a prefix
/// and differ in a constant further on are set apart here.
pub fn table_key(func: &Function) -> StructuralHash {
    let dfg = &func.dfg;
    let sum = (0..dfg.num_insts()).fold(0u64, |sum, index| {
        sum.wrapping_add(avalanche(table_word(
            &dfg.insts[Inst::new(index)],
            &dfg.value_lists,
        )))
    });
    StructuralHash(avalanche(sum))
}

/// An instruction's word in the table key: its opcode and the immediates the
/// entry holds itself (no handle is followed: memory flags, signatures,
/// constants and tables are left out).
#[inline(always)]
fn table_word(data: &InstructionData, pool: &ValueListPool) -> u64 {
    /// The immediates of one instruction, folded.
    struct Immediates(u64);
    impl InstructionVisitor for Immediates {
        type Error = Infallible;
        #[inline(always)]
        fn immediate(&mut self, immediate: Immediate) -> Result<(), Infallible> {
            self.0 = fold(self.0, immediate.word());
            Ok(())
        }
    }
    let mut word = Immediates(data.opcode() as u64);
    let Ok(()) = instruction::visit(data, pool, &mut word);
    word.0
}

/// Both keys of a function longer than its prefix in one: the first look ([`Fingerprint::first_look`])'s and
/// [`table_key`]'s.
pub fn prefix_and_table_key(prefix: StructuralHash, table: StructuralHash) -> StructuralHash {
    StructuralHash(avalanche(mix(prefix.0, table.0)))
}

/// Whether some instruction of `func`'s table, reachable or not, may take a
/// module function's address (`func_addr`, or a global-value instruction). Reads
/// only the table, in index order: about a nanosecond per instruction.
pub fn has_address_instructions(func: &Function) -> bool {
    let dfg = &func.dfg;
    (0..dfg.num_insts()).any(|index| {
        matches!(
            dfg.insts[Inst::new(index)],
            InstructionData::FuncAddr { .. } | InstructionData::UnaryGlobalValue { .. }
        )
    })
}

/// A set of memory flags by content: the flags, and the alias region by its user
/// id, as the encoding writes them (never 0).
#[inline(never)]
fn mem_flags_hash(func: &Function, flags: MemFlags) -> u64 {
    let dfg = &func.dfg;
    if !dfg.mem_flags.is_valid(flags) {
        return UNDECLARED;
    }
    let data = dfg.mem_flags[flags];
    let mut hasher = WordHasher(K);
    data.with_alias_region(None).hash(&mut hasher);
    let region = match data.alias_region() {
        None => 0,
        Some(region) if dfg.alias_regions.is_valid(region) => {
            1 + u64::from(dfg.alias_regions[region].user_id)
        }
        Some(_) => UNDECLARED,
    };
    avalanche(mix(hasher.finish(), region)) | 1
}

/// The module function a global value's chain of bases ends in a symbol naming,
/// if any: an address use.
fn symbol_of_global(
    func: &Function,
    module: &FunctionSet,
    mut gv: GlobalValue,
) -> Option<FuncIndex> {
    for _ in 0..=func.global_values.len() {
        match func.global_values.get(gv)? {
            GlobalValueData::Load { base, .. } | GlobalValueData::IAddImm { base, .. } => {
                gv = *base;
            }
            GlobalValueData::Symbol { name, .. } => {
                return module.lookup_external(func, name);
            }
            GlobalValueData::VMContext | GlobalValueData::DynScaleTargetConst { .. } => {
                return None;
            }
        }
    }
    None
}

fn abi_param_hash(state: u64, param: &AbiParam) -> u64 {
    let purpose = match param.purpose {
        ArgumentPurpose::Normal => 0,
        ArgumentPurpose::StructArgument(size) => 1 | u64::from(size) << 8,
        ArgumentPurpose::StructReturn => 2,
        ArgumentPurpose::VMContext => 3,
    };
    mix(
        state,
        pair(
            param.value_type.index() as u64 ^ (param.extension as u64) << 32,
            purpose,
        ),
    )
}

/// A signature handle by content ([`signature_hash`], never 0).
#[inline(never)]
fn sig_ref_hash(func: &Function, sig: SigRef) -> u64 {
    match func.dfg.signatures.get(sig) {
        Some(signature) => signature_hash(signature) | 1,
        None => UNDECLARED,
    }
}

/// A signature by content: calling convention, parameters and returns.
fn signature_hash(sig: &Signature) -> u64 {
    let mut state = mix(K, sig.call_conv as u64);
    state = mix(state, sig.params.len() as u64);
    for p in &sig.params {
        state = abi_param_hash(state, p);
    }
    state = mix(state, sig.returns.len() as u64);
    for r in &sig.returns {
        state = abi_param_hash(state, r);
    }
    avalanche(state)
}
