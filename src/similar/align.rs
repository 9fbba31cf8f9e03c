//! Merging by alignment: functions that are equal but for a few straight-line
//! stretches of instructions.
//!
//! Two functions *align* when their walks (`identical/encode.rs`) visit the same
//! blocks in the same order with the same parameters and terminators, and every
//! block's instructions are equal (values compared by where they were defined) but
//! for at most one *differing stretch* per block: a run of instructions in the
//! middle of the block, possibly empty on one side, between a common prefix and a
//! common suffix that ends in the terminator. The merged body (`splice.rs`) is a
//! copy of the first function in which each stretch is a two-way branch on a
//! *selector* parameter: one arm runs the first function's stretch, the other a
//! copy of the second's, and both jump to the rest of the block. This is the
//! simplest case of function merging by sequence alignment (FMSA, SalSSA, HyFM):
//! a straight-line difference inside one block, in as many blocks as differ, with
//! SalSSA's phi for values that escape a difference (a parameter of the block
//! where the arms join).
//!
//! # Phases
//!
//! 1. **Spans.** Every function is walked once more, into a [`SpannedEncoding`]:
//!    the same token stream as the comparator's, plus where each block and
//!    instruction starts, where each value is defined and which tokens are value
//!    operands (a value operand is the serial of its definition, the token
//!    position of the definition plus one).
//! 2. **Buckets.** Functions are bucketed by their skeleton: signature, and per
//!    block (in walk order) the parameters and the terminator with its operands
//!    left out. Only functions of one bucket can align.
//! 3. **Alignment** (`Aligner`). Two functions are compared block by block. Tokens
//!    that are not value operands must be equal; a value operand must name, in
//!    both, definitions already *aligned* (a block parameter or a result of
//!    instructions matched earlier). In each block the longest common prefix is
//!    matched first; if instructions remain, the longest common suffix of equal
//!    shape is matched, shrunk past any instruction that fails (it used a value of
//!    the stretch). What is left between is the block's differing stretch.
//! 4. **Pairs.** In each bucket, functions are paired greedily (in order of size,
//!    each with the partner that aligns with the most instructions in common among
//!    the next [`PARTNERS`] of similar size). Whether a pair pays is decided like
//!    any group (`mod.rs`).
//!
//! # Why a merged pair computes what its members computed
//!
//! Outside the stretches the two functions are equal instruction by instruction,
//! by the comparator's own token grammar, with each operand naming the
//! corresponding definition; so their control-flow graphs are the same, and run
//! as either member the merged body executes, in the same order, the prefix,
//! exactly that member's stretch, and the suffix. A stretch is only allowed when
//! (checked here, not assumed):
//!
//! * its values are used after it only as *escapes*: an operand outside any
//!   stretch must name an aligned definition, and a stretch's own operands name
//!   aligned definitions or its own. A result of a stretch becomes aligned only as
//!   an escape ([`Stretch::escapes`]), with a result of the other function's
//!   stretch *of the same block* and of the same type, the first time an
//!   instruction outside the stretches (or in a later stretch's prefix or suffix)
//!   uses the two in the same place; from then on every use must pair them like
//!   any aligned definition. The merged body gives the join block one parameter
//!   per escape, each arm passes its own value, and every use outside the first
//!   arm reads the parameter: a use of the first function's value is dominated by
//!   its definition, so it lies after the stretch in its block or in a block that
//!   block dominates, which the join dominates in the merged body. Run as either
//!   member, the parameter holds that member's value. A value used after its
//!   stretch on one side only is accepted only when every such use is in a later
//!   stretch of its own function (a *one-sided escape*,
//!   [`Stretch::first_only`]): the join gets a parameter for it, the other arm
//!   passes a placeholder zero, and only arms of its own function read the
//!   parameter. Those run under the same selector value as the arm that defined
//!   it (the selector is constant for a call), so they read the real value, never
//!   the placeholder; `splice.rs` checks on the merged body that every use of the
//!   parameter is in such an arm, that the join dominates it, and that every
//!   definition of the body dominates its uses. Any other one-sided use (a terminator, which is never
//!   part of a stretch, using it where the other function uses a value from
//!   before the stretch) is refused. So each arm's operands are defined before
//!   the branch (an aligned definition of the same block is in the prefix; one of
//!   another block dominates this block in both functions, whose graphs are
//!   equal; an escape of an earlier block is its join's parameter);
//! * it names no entity the walk numbers by first appearance besides values
//!   (blocks, stack slots, dynamic stack slots, user stack maps), so that the
//!   numbering of the rest of the stream is the same in both functions and token
//!   equality still means equality;
//! * the second function's stretch names nothing [`splice`](super::splice) cannot
//!   copy into another function: a global value, a jump or exception table (its
//!   calls, signatures, memory flags, constants and immediates are copied by
//!   content).
//!
//! Block parameters and the terminator are never part of a stretch, so the
//! selector only ever chooses straight-line code.

mod anchors;
pub(crate) mod blocks;

use crate::identical::encode::{TokenSink, WalkOptions, walk, walk_in_parallel};
use crate::identical::tokens::UNDEFINED_VALUE;
use crate::ir::{FuncIndex, FunctionSet, blocks_by_number, parallel, reads_machine_state};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::instructions::InstructionMapper;
use cranelift_codegen::ir::{
    self, Block, BlockCall, FuncRef, Function, Inst, SigRef, StackSlot, Value, ValueList,
};
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};
use std::ops::Range;

/// How many partners of similar size each function is tried against in its
/// bucket. The nearest in size are the likely partners: on the corpus 8 merge
/// what 32 did (resvg 292 bytes more) in a tenth less of brotli's similar merge
/// (`docs/similar.md`, "Cost").
pub const PARTNERS: usize = 8;

/// At most this many differing stretches per pair (each costs a branch and two
/// jumps in the merged body, which the pricing weighs; the limit only bounds the
/// work on pairs that differ almost everywhere). On the corpus, 8 refused pairs
/// that pay once values may escape their stretches: 32 merges one more pair in
/// brotli (9.86% -> 10.03%) and one in resvg (3.56% -> 3.62%), `docs/similar.md`.
pub const MAX_STRETCHES: usize = 32;

/// Instructions each stretch adds to a merged body (the selector's branch and
/// the arms' jumps).
const STRETCH_COST: u32 = 3;

/// Where a block's tokens are in a [`SpannedEncoding`].
#[derive(Copy, Clone, Debug)]
struct BlockSpan {
    /// Position of the block's first token (its parameter count).
    start: u32,
    /// Index in [`SpannedEncoding::insts`] of its first instruction.
    first_inst: u32,
    /// The block itself (blocks are paired by walk position across CFGs).
    block: Block,
}

/// A function's comparator stream with where its blocks, instructions, definitions
/// and value operands are.
#[derive(Default, Debug)]
pub(crate) struct SpannedEncoding {
    tokens: Vec<u64>,
    is_operand: Vec<bool>,
    /// Each definition (block parameter or result) with the position its serial
    /// names, in stream order.
    definitions: Vec<(u32, Value)>,
    /// Each instruction with the position of its header token, in stream order.
    insts: Vec<(u32, Inst)>,
    blocks: Vec<BlockSpan>,
    /// For each instruction, in stream order, a hash of its *shape*: its tokens
    /// with value operands left out but their places kept, what
    /// [`Aligner::same_shape`] compares (equal shapes hash equal). Taken in the
    /// walk ([`ShapedSink`]).
    shapes: Vec<u64>,
}

impl SpannedEncoding {
    /// Tokens reserved per instruction: about what the walk writes for one.
    const TOKENS_PER_INSTRUCTION: usize = 6;

    /// An empty encoding with room for `func`'s walk, so that it does not grow
    /// its tables a doubling at a time.
    fn sized_for(func: &Function) -> Self {
        let insts = func.dfg.num_insts();
        let tokens = insts * Self::TOKENS_PER_INSTRUCTION;
        Self {
            tokens: Vec::with_capacity(tokens),
            is_operand: Vec::with_capacity(tokens),
            definitions: Vec::with_capacity(func.dfg.num_values()),
            insts: Vec::with_capacity(insts),
            blocks: Vec::with_capacity(func.dfg.num_blocks()),
            shapes: Vec::with_capacity(insts),
        }
    }
}

impl TokenSink for SpannedEncoding {
    fn push(&mut self, token: u64) {
        self.tokens.push(token);
        self.is_operand.push(false);
    }

    fn push_callee(&mut self, index: u64) {
        self.push(index);
    }

    fn position(&self) -> u32 {
        self.tokens.len() as u32
    }

    fn note_block(&mut self, block: Block) {
        self.blocks.push(BlockSpan {
            start: self.position(),
            first_inst: self.insts.len() as u32,
            block,
        });
    }

    fn note_inst(&mut self, inst: Inst) {
        self.insts.push((self.position(), inst));
    }

    fn note_definition(&mut self, value: Value) {
        self.definitions.push((self.position(), value));
    }

    fn push_operand(&mut self, serial: u64) {
        self.tokens.push(serial);
        self.is_operand.push(true);
    }
}

/// The sink of the spanned walk: the [`SpannedEncoding`], and the
/// instructions' shapes ([`SpannedEncoding::shapes`]) taken as its tokens are
/// written, while they are in cache.
/// An instruction's tokens run from its header to the next instruction's, or
/// to its block's `END_OF_BLOCK` token (the walk's last token of every block):
/// its shape is the hash before that token.
struct ShapedSink {
    encoding: SpannedEncoding,
    /// The shape of the instruction being written, and the same before its
    /// last token.
    shape: Option<(FxHasher, FxHasher)>,
}

impl ShapedSink {
    /// Writes `token` (an operand's place reads `u64::MAX`) into the shape.
    fn shape(&mut self, token: u64) {
        if let Some((shape, before)) = &mut self.shape {
            *before = shape.clone();
            shape.write_u64(token);
        }
    }

    /// Ends the shape of a block's last instruction, whose last token was its
    /// block's end.
    fn end_block(&mut self) {
        if let Some((_, before)) = self.shape.take() {
            self.encoding.shapes.push(before.finish());
        }
    }
}

impl TokenSink for ShapedSink {
    fn push(&mut self, token: u64) {
        self.encoding.push(token);
        self.shape(token);
    }

    fn push_callee(&mut self, index: u64) {
        self.push(index);
    }

    fn position(&self) -> u32 {
        self.encoding.position()
    }

    fn note_block(&mut self, block: Block) {
        self.end_block();
        self.encoding.note_block(block);
    }

    fn note_inst(&mut self, inst: Inst) {
        if let Some((shape, _)) = self.shape.take() {
            self.encoding.shapes.push(shape.finish());
        }
        self.shape = Some((FxHasher::default(), FxHasher::default()));
        self.encoding.note_inst(inst);
    }

    fn note_definition(&mut self, value: Value) {
        self.encoding.note_definition(value);
    }

    fn push_operand(&mut self, serial: u64) {
        self.encoding.push_operand(serial);
        self.shape(u64::MAX);
    }
}

/// One block's parts in a [`SpannedEncoding`].
struct BlockParts {
    /// Its parameter count and parameter types.
    header: Range<u32>,
    /// Its instructions, as indices of [`SpannedEncoding::insts`].
    insts: Range<usize>,
    /// Position of its `END_OF_BLOCK` token.
    end: u32,
}

impl SpannedEncoding {
    /// The parts of the `k`-th block walked.
    fn block(&self, k: usize) -> BlockParts {
        let span = self.blocks[k];
        let next = self.blocks.get(k + 1);
        let end = next.map_or(self.tokens.len() as u32, |n| n.start) - 1;
        let insts =
            span.first_inst as usize..next.map_or(self.insts.len(), |n| n.first_inst as usize);
        let header_end = self.insts.get(insts.start).map_or(end, |i| i.0);
        let header_end = if insts.is_empty() { end } else { header_end };
        BlockParts {
            header: span.start..header_end,
            insts,
            end,
        }
    }

    /// The tokens of instruction `i` of a block whose `END_OF_BLOCK` is at `end`
    /// and whose instructions are `insts`.
    fn inst_span(&self, i: usize, parts: &BlockParts) -> Range<u32> {
        let start = self.insts[i].0;
        let end = if i + 1 < parts.insts.end {
            self.insts[i + 1].0
        } else {
            parts.end
        };
        start..end
    }

    /// The definition whose serial names position `position`.
    fn defined_at(&self, position: u32) -> Option<Value> {
        let i = self.definitions.partition_point(|d| d.0 < position);
        self.definitions
            .get(i)
            .filter(|d| d.0 == position)
            .map(|d| d.1)
    }

    /// The definitions written inside `range`, by binary search (what
    /// [`Self::definitions_near`] is checked against).
    fn definitions_in(&self, range: &Range<u32>) -> &[(u32, Value)] {
        let from = self.definitions.partition_point(|d| d.0 <= range.start);
        let to = self.definitions.partition_point(|d| d.0 <= range.end);
        &self.definitions[from..to]
    }

    /// The definitions written inside `range`. A definition's serial names the
    /// position right after the type token that precedes it, so the one written
    /// last in `range` names `range.end`. Searched from `cursor` (where the
    /// previous search ended): a walk forward through the stream finds them a step
    /// or two on, where a binary search takes a dozen. Moves `cursor` to the end
    /// of what it returns.
    fn definitions_near(&self, range: &Range<u32>, cursor: &mut usize) -> &[(u32, Value)] {
        let definitions = &self.definitions;
        let near = (*cursor).min(definitions.len());
        let from = if near == 0 || definitions[near - 1].0 <= range.start {
            first_after(definitions, near, range.start)
        } else {
            // The range is behind the cursor (a suffix is matched backwards).
            definitions.partition_point(|d| d.0 <= range.start)
        };
        let to = first_after(definitions, from, range.end);
        *cursor = to;
        &definitions[from..to]
    }

    /// The definition position a value operand token at `position` names.
    fn operand_target(&self, position: u32) -> Option<u32> {
        let serial = self.tokens[position as usize];
        if serial == 0 || serial == UNDEFINED_VALUE {
            return None;
        }
        u32::try_from(serial - 1).ok()
    }

    /// The skeleton key of phase 2: signature and, per block, its parameters and
    /// its terminator's tokens with value operands left out (with `cfg`, the
    /// terminators are left out: they may differ, [`Aligner::cfg`]).
    fn skeleton(&self, cfg: bool) -> u64 {
        let mut h = FxHasher::default();
        let Some(first) = self.blocks.first() else {
            return h.finish();
        };
        self.tokens[..first.start as usize].hash(&mut h);
        for k in 0..self.blocks.len() {
            let parts = self.block(k);
            h.write_u64(u64::MAX - 1);
            for p in parts.header.clone() {
                h.write_u64(self.tokens[p as usize]);
            }
            if let Some(last) = parts.insts.clone().last().filter(|_| !cfg) {
                for p in self.inst_span(last, &parts) {
                    if !self.is_operand[p as usize] {
                        h.write_u64(self.tokens[p as usize]);
                    }
                }
            }
        }
        h.finish()
    }
}

/// Walks `func` into a [`SpannedEncoding`], or `None` when the walk does not
/// support it.
fn encode_spanned(
    func: &Function,
    module: &FunctionSet,
    scratch: &mut crate::identical::encode::WalkScratch,
) -> Option<SpannedEncoding> {
    let options = WalkOptions {
        addresses_significant: true,
        ..WalkOptions::default()
    };
    let sink = ShapedSink {
        encoding: SpannedEncoding::sized_for(func),
        shape: None,
    };
    let (mut sink, _, _) = walk(func, module, options, scratch, sink).ok()?;
    sink.end_block();
    Some(sink.encoding)
}

/// One differing stretch: where it is in the first function, and the second
/// function's instructions that replace it when the selector is set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stretch {
    /// The first function's block holding it.
    pub(crate) block: Block,
    /// The first function's instructions of the stretch, in layout order (may be
    /// empty).
    pub(crate) first: Vec<Inst>,
    /// The first function's instruction right after the stretch (the common
    /// suffix starts there; it ends with the terminator), or `None` when the
    /// terminators differ and both stretches run to the end of the block, each
    /// ending in its own function's terminator (only across CFGs, [`Aligner::cfg`]).
    pub(crate) suffix: Option<Inst>,
    /// The second function's instructions of the stretch, in layout order (may be
    /// empty, not when `first` is).
    pub(crate) second: Vec<Inst>,
    /// The values of the stretch used after it: each a value the first function's
    /// stretch defines and the value the second's defines in its place (uses of
    /// the two correspond one to one). The merged body passes the chosen arm's
    /// value to a parameter of the block the arms join.
    pub(crate) escapes: Vec<(Value, Value)>,
    /// *One-sided escapes* of the first function: values its stretch defines that
    /// only its own later stretches use (the second function has no use in their
    /// place). The merged body passes each to a parameter of the join, with a
    /// placeholder constant from the second arm; only first arms read it, which
    /// run under the same selector as this stretch's first arm.
    pub(crate) first_only: Vec<Value>,
    /// The same for the second function's values (read only by second arms; the
    /// first arm passes the placeholder).
    pub(crate) second_only: Vec<Value>,
}

/// How a second function aligns with a first one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Alignment {
    /// The second function.
    pub(crate) second: FuncIndex,
    /// The differing stretches, in walk order.
    pub(crate) stretches: Vec<Stretch>,
    /// For each value the second function's stretches use but do not define, the
    /// first function's value defined at the same place.
    pub(crate) values: Vec<(Value, Value)>,
    /// Instructions of the first function outside the stretches.
    pub(crate) common: u32,
    /// When a stretch ends in the second function's terminator (`suffix` is
    /// `None`): each block of the second function with the first function's block
    /// at the same position of the walk, which its copied terminator branches to.
    /// Empty otherwise. With paired blocks (`blocks.rs`), each paired block.
    pub(crate) blocks: Vec<(Block, Block)>,
    /// With paired blocks (`blocks.rs`): the second function's blocks without a
    /// partner, in walk order, which the merged body copies. Empty otherwise.
    pub(crate) unpaired: Vec<Block>,
    /// With paired blocks: the first function's blocks without a partner (kept
    /// in the merged body as they are). Empty otherwise.
    pub(crate) first_unpaired: Vec<Block>,
    /// The same pair with its stretches cut at anchors (`anchors.rs`), when
    /// that duplicates fewer instructions: the planner prices both and keeps
    /// the one that saves more (cutting changes which values pair as escapes,
    /// and with them what the rest of the function costs).
    pub(crate) cut: Option<Box<Alignment>>,
}

impl Alignment {
    /// A copy of this way of aligning the pair alone, without the other way
    /// ([`Self::cut`]): what a merge made of it keeps.
    pub(crate) fn without_cut(&self) -> Alignment {
        Alignment {
            second: self.second,
            stretches: self.stretches.clone(),
            values: self.values.clone(),
            common: self.common,
            blocks: self.blocks.clone(),
            unpaired: self.unpaired.clone(),
            first_unpaired: self.first_unpaired.clone(),
            cut: None,
        }
    }

    /// Whether a stretch passes a one-sided escape ([`Stretch::first_only`]).
    pub(crate) fn has_one_sided_escapes(&self) -> bool {
        self.stretches
            .iter()
            .any(|s| !s.first_only.is_empty() || !s.second_only.is_empty())
    }

    /// Whether the merged body has edges of both functions' graphs: a stretch
    /// ends in the second's terminator, or blocks are paired (with or without
    /// unpaired ones).
    pub(crate) fn is_across_cfgs(&self) -> bool {
        !self.blocks.is_empty() || !self.unpaired.is_empty() || !self.first_unpaired.is_empty()
    }

    /// Whether the alignment is of the kind a group of three or more is made
    /// of: every stretch joins the rest of its block (none ends it), no
    /// one-sided escapes, no paired or unpaired blocks.
    pub(crate) fn is_simple(&self) -> bool {
        !self.is_across_cfgs()
            && !self.has_one_sided_escapes()
            && self.stretches.iter().all(|s| s.suffix.is_some())
    }

    /// Whether `self` (another function's alignment with the same first
    /// function) differs from the first exactly where `pair` does, both simple
    /// ([`Self::is_simple`]): the same stretches of the first (block,
    /// instructions and the instruction after), each with the same first's
    /// values escaping. Then one merged body can branch, at each stretch, to the
    /// first's instructions or either second's, and rejoin at the same place
    /// with the same join parameters.
    pub(crate) fn same_places(&self, pair: &Alignment) -> bool {
        self.is_simple()
            && pair.is_simple()
            && self.stretches.len() == pair.stretches.len()
            && self.stretches.iter().zip(&pair.stretches).all(|(c, b)| {
                // Each value escapes once: equal lengths and containment make
                // equal sets.
                c.block == b.block
                    && c.first == b.first
                    && c.suffix == b.suffix
                    && c.escapes.len() == b.escapes.len()
                    && b.escapes
                        .iter()
                        .all(|e| c.escapes.iter().any(|f| f.0 == e.0))
            })
    }
}

/// Why two functions of one bucket do not align: the first obstacle the aligner
/// met, for the census of missed merges ([`census`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Refusal {
    /// The signatures, the number of blocks or a block's parameters differ.
    Structure,
    /// More than [`MAX_STRETCHES`] blocks differ.
    TooManyStretches,
    /// A value defined in a differing stretch is used after it in a way no rule
    /// accepts ([`Escape`] says which).
    ValueEscapes(Escape),
    /// An instruction the stretch cannot absorb (the terminator) names
    /// different values that are each aligned with something else.
    OperandDiffers,
    /// The terminators differ in something other than their value operands.
    TerminatorDiffers,
    /// A stretch names a stack slot, a block, a table, a user stack map or a
    /// patchable call.
    StretchNamesEntity,
    /// The second function's stretch names a global value.
    SecondNamesGlobal,
    /// Across CFGs ([`Aligner::cfg`]): the terminators differ and the second's
    /// cannot be copied (not a `jump`, `brif`, `br_table`, `return` or `trap`, or a value a
    /// terminator's stretch defines is used by another block).
    TerminatorNotCopied,
}

/// How a value defined in a differing stretch is used after it when the
/// alignment refuses that use ([`Refusal::ValueEscapes`], for the census).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Escape {
    /// A terminator uses it where the other function uses a value defined before
    /// the stretches (aligned with something else).
    IntoTerminatorVsAligned,
    /// A terminator uses it where the other function uses another unaligned
    /// value (of another stretch, or not of a stretch with a join).
    IntoTerminatorOther,
    /// A later stretch of its own function uses it (one side only): accepted
    /// with one-sided escapes ([`Stretch::first_only`]) unless off.
    IntoLaterStretch,
    /// As [`Self::IntoLaterStretch`], but of a type without a placeholder
    /// constant (vectors, `i128`, references).
    IntoLaterStretchType,
    /// It is defined by a stretch that ends its block (across CFGs: no join).
    FromEndingStretch,
    /// Anything else (two values of different stretches paired, ...).
    Other,
}

/// A definition position not aligned with anything.
const UNALIGNED: u32 = u32::MAX;

/// Which definitions of two spanned encodings align, kept between attempts: every
/// entry is [`UNALIGNED`] between two attempts (an attempt undoes what it logged),
/// so that an attempt costs what it compares, not the length of the functions.
#[derive(Default)]
struct AlignScratch {
    /// For each position of `a`, the position of `b` whose definition aligns with
    /// the one there.
    a_to_b: Vec<u32>,
    /// The converse.
    b_to_a: Vec<u32>,
    /// The positions of `a` aligned so far, in order (to undo a failed suffix).
    log: Vec<u32>,
}

/// What an alignment allows: escapes, one-sided escapes, differing terminators
/// ([`Aligner`]'s fields of the same names), and cutting stretches at anchors
/// ([`Alignment::cut`]).
#[derive(Copy, Clone, Debug, Default)]
pub(crate) struct Rules {
    /// Values a stretch defines may be used after it ([`Aligner::escapes`]).
    pub(crate) escapes: bool,
    /// ... by later stretches of their own function only
    /// ([`Aligner::one_sided`]).
    pub(crate) one_sided: bool,
    /// Paired blocks may end in different terminators ([`Aligner::cfg`]).
    pub(crate) cfg: bool,
    /// Each pair is also aligned with its stretches cut at anchors
    /// (`anchors.rs`), offered to the planner as [`Alignment::cut`].
    pub(crate) anchors: bool,
}

/// Phase 3: compares two spanned encodings, recording which definitions align.
struct Aligner<'a> {
    a: &'a SpannedEncoding,
    b: &'a SpannedEncoding,
    fa: &'a Function,
    fb: &'a Function,
    scratch: &'a mut AlignScratch,
    /// Where the last search of `a`'s and `b`'s definitions ended.
    cursors: (usize, usize),
    /// Instructions matched so far by the current attempt (how far a refused
    /// attempt got, for the census).
    progress: u32,
    /// Whether a value a stretch defines may be used after it (an escape).
    escapes: bool,
    /// Whether a value a stretch defines may be used by a later stretch of its
    /// own function only (a one-sided escape, [`Stretch::first_only`]).
    one_sided: bool,
    /// Whether the two functions' terminators may differ (paired blocks with
    /// different successors): the rest of such a block after the common prefix,
    /// terminator included, is a stretch of its own, and the merged body branches
    /// on the selector to either function's rest ([`Stretch::suffix`] `None`).
    cfg: bool,
    /// The token ranges of the stretches found so far, in `a` and in `b`, and the
    /// one whose common suffix is being matched.
    spans: Vec<(Range<u32>, Range<u32>)>,
    /// For each of `spans`, whether it ends its block (no join: its values cannot
    /// escape).
    ends: Vec<bool>,
    open: Option<(Range<u32>, Range<u32>)>,
    /// Per block of the first function, at most how many instructions its
    /// common prefix and its common suffix may hold (the group round's
    /// [`FirstRound::widened`]): a block so bounded has a stretch covering at
    /// least the instructions between, even where the two are equal.
    bounds: Option<&'a SecondaryMap<Block, Option<(u32, u32)>>>,
    /// Whether each pair is also aligned with its stretches cut at anchors
    /// ([`Rules::anchors`]).
    anchors: bool,
    /// Whether the attempt under way cuts a block's differing middle at
    /// anchors into several stretches (`anchors.rs`).
    split: bool,
    /// With paired blocks (`blocks.rs`): the token ranges of each function's
    /// unpaired blocks (the first's, the second's), whose values its own
    /// stretches may use (the merged body reads them through block parameters
    /// where needed, `splice/repair.rs`).
    unpaired: [Vec<Range<u32>>; 2],
}

impl<'a> Aligner<'a> {
    fn new(
        a: &'a SpannedEncoding,
        fa: &'a Function,
        b: &'a SpannedEncoding,
        fb: &'a Function,
        scratch: &'a mut AlignScratch,
        Rules {
            escapes,
            one_sided,
            cfg,
            anchors,
        }: Rules,
    ) -> Self {
        debug_assert!(scratch.log.is_empty());
        if scratch.a_to_b.len() < a.tokens.len() {
            scratch.a_to_b.resize(a.tokens.len(), UNALIGNED);
        }
        if scratch.b_to_a.len() < b.tokens.len() {
            scratch.b_to_a.resize(b.tokens.len(), UNALIGNED);
        }
        Self {
            a,
            b,
            fa,
            fb,
            scratch,
            cursors: (0, 0),
            progress: 0,
            escapes,
            one_sided,
            cfg,
            spans: Vec::new(),
            ends: Vec::new(),
            open: None,
            bounds: None,
            anchors,
            split: false,
            unpaired: [Vec::new(), Vec::new()],
        }
    }

    /// Whether the tokens of `ra` and `rb` are equal once value operands are left
    /// out (operands at the same places).
    fn same_shape(&self, ra: &Range<u32>, rb: &Range<u32>) -> bool {
        ra.len() == rb.len()
            && ra.clone().zip(rb.clone()).all(|(pa, pb)| {
                let (pa, pb) = (pa as usize, pb as usize);
                let operand = self.a.is_operand[pa];
                operand == self.b.is_operand[pb]
                    && (operand || self.a.tokens[pa] == self.b.tokens[pb])
            })
    }

    /// Whether `ra` and `rb` are equal, each value operand naming aligned
    /// definitions; if so, their own definitions are aligned.
    fn matches(&mut self, ra: Range<u32>, rb: Range<u32>) -> bool {
        if !self.same_shape(&ra, &rb) {
            return false;
        }
        // Escapes this instruction would align: values of one stretch, unaligned
        // so far, used here in the same place.
        let mut escaping: Vec<(u32, u32)> = Vec::new();
        for (pa, pb) in ra.clone().zip(rb.clone()) {
            if !self.a.is_operand[pa as usize] {
                continue;
            }
            match (self.a.operand_target(pa), self.b.operand_target(pb)) {
                (Some(da), Some(db)) if self.scratch.a_to_b[da as usize] == db => {}
                (Some(da), Some(db)) if escaping.contains(&(da, db)) => {}
                (Some(da), Some(db)) if self.may_escape(da, db, &escaping) => {
                    escaping.push((da, db));
                }
                _ => return false,
            }
        }
        let da = self.a.definitions_near(&ra, &mut self.cursors.0);
        let db = self.b.definitions_near(&rb, &mut self.cursors.1);
        if da.len() != db.len() {
            return false;
        }
        let scratch = &mut *self.scratch;
        for &(pa, pb) in &escaping {
            scratch.a_to_b[pa as usize] = pb;
            scratch.b_to_a[pb as usize] = pa;
            scratch.log.push(pa);
        }
        for (&(pa, _), &(pb, _)) in da.iter().zip(db) {
            scratch.a_to_b[pa as usize] = pb;
            scratch.b_to_a[pb as usize] = pa;
            scratch.log.push(pa);
        }
        true
    }

    /// Whether the unaligned definitions at `da` (of `a`) and `db` (of `b`) may be
    /// aligned as an escape: both written by the same differing stretch (one found
    /// before, or the one whose suffix is being matched), results of the same
    /// type, neither aligned yet nor in `pending` (escapes the instruction being
    /// matched already takes).
    fn may_escape(&self, da: u32, db: u32, pending: &[(u32, u32)]) -> bool {
        if !self.escapes
            || self.scratch.a_to_b[da as usize] != UNALIGNED
            || self.scratch.b_to_a[db as usize] != UNALIGNED
            || pending.iter().any(|&(pa, pb)| pa == da || pb == db)
        {
            return false;
        }
        let same_stretch = self
            .spans
            .iter()
            .zip(&self.ends)
            .filter(|(_, ends)| !**ends)
            .map(|(span, _)| span)
            .chain(&self.open)
            .any(|(ra, rb)| written_in(ra, da) && written_in(rb, db));
        if !same_stretch {
            return false;
        }
        match (self.a.defined_at(da), self.b.defined_at(db)) {
            (Some(va), Some(vb)) => self.fa.dfg.value_type(va) == self.fb.dfg.value_type(vb),
            _ => false,
        }
    }

    /// Why `ra` and `rb` (instructions of equal position that [`Self::matches`]
    /// refused) differ.
    fn why_differ(&self, ra: &Range<u32>, rb: &Range<u32>) -> Refusal {
        if !self.same_shape(ra, rb) {
            return Refusal::TerminatorDiffers;
        }
        for (pa, pb) in ra.clone().zip(rb.clone()) {
            if !self.a.is_operand[pa as usize] {
                continue;
            }
            let (da, db) = (self.a.operand_target(pa), self.b.operand_target(pb));
            let (Some(da), Some(db)) = (da, db) else {
                return Refusal::OperandDiffers;
            };
            if self.scratch.a_to_b[da as usize] == db {
                continue;
            }
            let (ab, ba) = (
                self.scratch.a_to_b[da as usize],
                self.scratch.b_to_a[db as usize],
            );
            if ab == UNALIGNED || ba == UNALIGNED {
                return Refusal::ValueEscapes(if ab == UNALIGNED && ba == UNALIGNED {
                    Escape::IntoTerminatorOther
                } else {
                    Escape::IntoTerminatorVsAligned
                });
            }
            return Refusal::OperandDiffers;
        }
        Refusal::OperandDiffers
    }

    /// Forgets the alignments recorded after `mark`.
    fn undo(&mut self, mark: usize) {
        let scratch = &mut *self.scratch;
        for pa in scratch.log.drain(mark..) {
            let pb = scratch.a_to_b[pa as usize];
            scratch.a_to_b[pa as usize] = UNALIGNED;
            scratch.b_to_a[pb as usize] = UNALIGNED;
        }
    }

    /// The alignment of the two functions, or `None`; leaves the scratch as it
    /// found it.
    ///
    /// With [`Rules::anchors`], where a stretch is long enough to hold an anchor, the two functions are
    /// aligned again with stretches cut at anchors (`anchors.rs`), kept as
    /// [`Alignment::cut`] when it duplicates fewer instructions.
    fn align(mut self, second: FuncIndex) -> Result<Alignment, (Refusal, u32)> {
        let whole = self.checked_attempt(second);
        let progress = self.progress;
        let alignment = match whole {
            Ok(whole) if self.anchors && self.bounds.is_none() => {
                Ok(self.offer_cut(whole, |aligner| aligner.checked_attempt(second)))
            }
            whole => whole,
        };
        alignment.map_err(|refusal| (refusal, progress))
    }

    /// [`Self::attempt`] with the stack slots checked, leaving the scratch as it
    /// found it.
    fn checked_attempt(&mut self, second: FuncIndex) -> Result<Alignment, Refusal> {
        let alignment = self.attempt(second).and_then(|alignment| {
            // Equal slot tokens need not name corresponding slots (`blocks.rs`).
            blocks::same_cfg_slots_correspond(self.a, self.fa, self.b, self.fb, &alignment)
                .then_some(alignment)
                .ok_or(Refusal::StretchNamesEntity)
        });
        self.undo(0);
        alignment
    }

    /// [`Self::align`] before the scratch is cleared.
    fn attempt(&mut self, second: FuncIndex) -> Result<Alignment, Refusal> {
        let (a, b) = (self.a, self.b);
        if a.blocks.len() != b.blocks.len() || a.blocks.is_empty() {
            return Err(Refusal::Structure);
        }
        if !self.matches(0..a.blocks[0].start, 0..b.blocks[0].start) {
            return Err(Refusal::Structure);
        }
        let mut stretches = Vec::new();
        // Stretches closed by anchors (`anchors.rs`), apart from one per
        // differing block.
        let mut anchors = 0;
        self.spans.clear();
        self.ends.clear();
        let mut common = 0;
        for k in 0..a.blocks.len() {
            let (pa, pb) = (a.block(k), b.block(k));
            if !self.matches(pa.header.clone(), pb.header.clone()) {
                return Err(Refusal::Structure);
            }
            let (na, nb) = (pa.insts.len(), pb.insts.len());
            let inst_a = |i: usize| a.inst_span(pa.insts.start + i, &pa);
            let inst_b = |i: usize| b.inst_span(pb.insts.start + i, &pb);
            let bound = self.bounds.and_then(|b| b[a.blocks[k].block]);
            let (max_prefix, max_suffix) =
                bound.map_or((usize::MAX, usize::MAX), |(p, s)| (p as usize, s as usize));
            let mut prefix = 0;
            while prefix < na.min(nb).min(max_prefix)
                && self.matches(inst_a(prefix), inst_b(prefix))
            {
                prefix += 1;
            }
            if prefix == na && prefix == nb {
                common += na as u32;
                self.progress = common;
                continue;
            }
            self.progress = common + prefix as u32;
            if stretches.len() - anchors == MAX_STRETCHES {
                return Err(Refusal::TooManyStretches);
            }
            let room = na.min(nb) - prefix;
            let mut suffix = 0;
            while suffix < room.min(max_suffix)
                && self.same_shape(&inst_a(na - 1 - suffix), &inst_b(nb - 1 - suffix))
            {
                suffix += 1;
            }
            if self.cfg
                && na > prefix
                && nb > prefix
                && !self.terminators_match(&inst_a, &inst_b, na, nb)
            {
                // The terminators differ: everything after the prefix is a stretch
                // ending the block (`Stretch::suffix` is `None`).
                let insts_a: Vec<Inst> = (prefix..na)
                    .map(|i| a.insts[pa.insts.start + i].1)
                    .collect();
                let insts_b: Vec<Inst> = (prefix..nb)
                    .map(|i| b.insts[pb.insts.start + i].1)
                    .collect();
                let (body_a, _) = insts_a.split_at(insts_a.len() - 1);
                let (body_b, term_b) = insts_b.split_at(insts_b.len() - 1);
                self.check_arms(body_a, body_b)?;
                if !copyable_terminator(self.fb, term_b[0]) {
                    return Err(Refusal::TerminatorNotCopied);
                }
                let block = self.fa.layout.inst_block(insts_a[0]);
                stretches.push(Stretch {
                    block: block.ok_or(Refusal::Structure)?,
                    first: insts_a,
                    suffix: None,
                    second: insts_b,
                    escapes: Vec::new(),
                    first_only: Vec::new(),
                    second_only: Vec::new(),
                });
                self.spans
                    .push((inst_a(prefix).start..pa.end, inst_b(prefix).start..pb.end));
                self.ends.push(true);
                common += prefix as u32;
                continue;
            }
            if suffix == 0 {
                // The terminator itself does not match.
                return Err(match (na, nb) {
                    (0, _) | (_, 0) => Refusal::TerminatorDiffers,
                    _ => self.why_differ(&inst_a(na - 1), &inst_b(nb - 1)),
                });
            }
            // One stretch from the prefix to the common suffix, or, where that
            // duplicates more instructions, stretches cut at anchors
            // (`anchors.rs`; a bounded block, the group round's widening,
            // keeps one stretch).
            let shaped = suffix;
            let before = self.before_cut(&stretches);
            let Some(mut suffix) = self.match_suffix(&pa, &pb, (prefix, prefix), shaped) else {
                return Err(self.why_differ(&inst_a(na - 1), &inst_b(nb - 1)));
            };
            let (mut start_a, mut start_b) = (prefix, prefix);
            if self.split && bound.is_none() {
                let one_stretch = (na + nb - 2 * (prefix + suffix)) as u32 + STRETCH_COST;
                self.take_back_cut(before, &mut stretches);
                let anchored = self.split_middle(
                    (&pa, &pb),
                    (prefix, prefix),
                    (na - shaped, nb - shaped),
                    &mut stretches,
                    None,
                    anchors::MAX_ANCHORS - anchors,
                )?;
                let (oa, ob) = anchored.open_from;
                let tail = self.match_suffix(&pa, &pb, (oa, ob), shaped);
                let cut = tail.filter(|_| anchored.closed > 0).map(|tail| {
                    let closed: usize = stretches[stretches.len() - anchored.closed..]
                        .iter()
                        .map(|s| s.first.len() + s.second.len())
                        .sum();
                    let open = na + nb - 2 * tail - oa - ob;
                    let count = anchored.closed + usize::from(open > 0);
                    (closed + open) as u32 + STRETCH_COST * count as u32
                });
                match (tail, cut) {
                    (Some(tail), Some(cost)) if cost < one_stretch => {
                        (start_a, start_b, suffix) = (oa, ob, tail);
                        anchors += anchored.closed;
                        common += anchored.common;
                    }
                    _ => {
                        self.take_back_cut(before, &mut stretches);
                        let again = self.match_suffix(&pa, &pb, (prefix, prefix), shaped);
                        debug_assert_eq!(again, Some(suffix));
                    }
                }
            }
            self.open = None;
            common += (prefix + suffix) as u32;
            let (ea, eb) = (na - suffix, nb - suffix);
            if ea == start_a && eb == start_b {
                // The last anchor runs into the common suffix.
                continue;
            }
            let tokens_a = inst_a(start_a).start..inst_a(ea).start;
            let tokens_b = inst_b(start_b).start..inst_b(eb).start;
            let insts_a: Vec<Inst> = (start_a..ea)
                .map(|i| a.insts[pa.insts.start + i].1)
                .collect();
            let insts_b: Vec<Inst> = (start_b..eb)
                .map(|i| b.insts[pb.insts.start + i].1)
                .collect();
            let suffix = a.insts[pa.insts.start + ea].1;
            let block = self
                .fa
                .layout
                .inst_block(suffix)
                .ok_or(Refusal::Structure)?;
            stretches.push(self.joined_stretch(block, insts_a, suffix, insts_b)?);
            self.spans.push((tokens_a, tokens_b));
            self.ends.push(false);
        }
        if stretches.is_empty() {
            // Equal functions the first pass left apart on purpose.
            return Err(Refusal::Structure);
        }
        let spans = std::mem::take(&mut self.spans);
        let values = self.escapes_and_values(&spans, &mut stretches)?;
        let blocks = if stretches.iter().any(|s| s.suffix.is_none()) {
            b.blocks
                .iter()
                .zip(&a.blocks)
                .map(|(sb, sa)| (sb.block, sa.block))
                .collect()
        } else {
            Vec::new()
        };
        Ok(Alignment {
            second,
            stretches,
            values,
            common,
            blocks,
            unpaired: Vec::new(),
            first_unpaired: Vec::new(),
            cut: None,
        })
    }

    /// The common suffix of a block pair (`pa`, `pb`) after a stretch open from
    /// `start` (in each block): its last `shaped` instructions (of equal shape),
    /// shrunk past any instruction that fails to match, aligned; `None` when
    /// the terminator itself fails.
    fn match_suffix(
        &mut self,
        pa: &BlockParts,
        pb: &BlockParts,
        start: (usize, usize),
        shaped: usize,
    ) -> Option<usize> {
        let (a, b) = (self.a, self.b);
        let (na, nb) = (pa.insts.len(), pb.insts.len());
        let inst_a = |i: usize| a.inst_span(pa.insts.start + i, pa);
        let inst_b = |i: usize| b.inst_span(pb.insts.start + i, pb);
        let mut suffix = shaped;
        let matched = loop {
            if suffix == 0 {
                break None;
            }
            let mark = self.scratch.log.len();
            self.open = Some((
                inst_a(start.0).start..inst_a(na - suffix).start,
                inst_b(start.1).start..inst_b(nb - suffix).start,
            ));
            let failed = (0..suffix)
                .position(|j| !self.matches(inst_a(na - suffix + j), inst_b(nb - suffix + j)));
            match failed {
                None => break Some(suffix),
                Some(j) => {
                    self.undo(mark);
                    suffix -= j + 1;
                }
            }
        };
        self.open = None;
        matched
    }

    /// Whether the last instructions of two blocks (`na` and `nb` long, both
    /// nonempty) match as they are; leaves nothing aligned (a terminator defines
    /// nothing the alignment records, and a failed match records nothing).
    fn terminators_match(
        &mut self,
        inst_a: &dyn Fn(usize) -> Range<u32>,
        inst_b: &dyn Fn(usize) -> Range<u32>,
        na: usize,
        nb: usize,
    ) -> bool {
        let (ra, rb) = (inst_a(na - 1), inst_b(nb - 1));
        if !self.same_shape(&ra, &rb) {
            return false;
        }
        // Operands: equal shape, so only the values can differ. They may name a
        // stretch's escape not aligned yet, which the suffix would align: leave
        // that to the suffix search (the terminator then matches there or not).
        ra.zip(rb).all(|(pa, pb)| {
            if !self.a.is_operand[pa as usize] {
                return true;
            }
            match (self.a.operand_target(pa), self.b.operand_target(pb)) {
                (Some(da), Some(db)) => {
                    let (ab, ba) = (
                        self.scratch.a_to_b[da as usize],
                        self.scratch.b_to_a[db as usize],
                    );
                    ab == db || (ab == UNALIGNED && ba == UNALIGNED)
                }
                _ => false,
            }
        })
    }

    /// The stretch (index in `spans`) that defines the unaligned definition at
    /// Whether the first's instructions `first` may stay where they are in an
    /// arm and the second's `second` be copied into the other: naming nothing the
    /// walk numbers and nothing `splice` cannot copy.
    fn check_arms(&self, first: &[Inst], second: &[Inst]) -> Result<(), Refusal> {
        if !first.iter().all(|&i| stays_in_place(self.fa, i)) {
            return Err(Refusal::StretchNamesEntity);
        }
        // Each of the second's instructions probed once: a numbered entity
        // anywhere is refused before a global value anywhere.
        let (mut numbered, mut global_value) = (false, false);
        for &i in second {
            let probe = probe(self.fb, i);
            numbered |= probe.numbered;
            global_value |= probe.global_value;
        }
        if numbered {
            return Err(Refusal::StretchNamesEntity);
        }
        if global_value {
            return Err(Refusal::SecondNamesGlobal);
        }
        Ok(())
    }

    /// The stretch of `block` whose arms run the first's `first` and the second's
    /// `second` and join before `suffix`, or why it cannot be one
    /// ([`Self::check_arms`]).
    fn joined_stretch(
        &self,
        block: Block,
        first: Vec<Inst>,
        suffix: Inst,
        second: Vec<Inst>,
    ) -> Result<Stretch, Refusal> {
        self.check_arms(&first, &second)?;
        Ok(Stretch {
            block,
            first,
            suffix: Some(suffix),
            second,
            escapes: Vec::new(),
            first_only: Vec::new(),
            second_only: Vec::new(),
        })
    }

    /// The escapes and one-sided escapes of `stretches` (at `spans`, first's and
    /// second's tokens), recorded in them, and the values the second's stretches
    /// use but do not define, each with the first's value defined at the same
    /// place, sorted: each stretch may use only aligned values, its own, and
    /// (one-sided escapes) values of other stretches of its own function.
    fn escapes_and_values(
        &mut self,
        spans: &[(Range<u32>, Range<u32>)],
        stretches: &mut [Stretch],
    ) -> Result<Vec<(Value, Value)>, Refusal> {
        let (a, b) = (self.a, self.b);
        let mut values = Vec::new();
        let other = Refusal::ValueEscapes(Escape::Other);
        let mut first_only: Vec<(usize, Value)> = Vec::new();
        let mut second_only: Vec<(usize, Value)> = Vec::new();
        for (i, ((ra, rb), stretch)) in spans.iter().zip(stretches.iter_mut()).enumerate() {
            // The escapes: the stretch's definitions aligned with the other's.
            for &(pa, va) in a.definitions_in(ra) {
                let pb = self.scratch.a_to_b[pa as usize];
                if pb != UNALIGNED {
                    if stretch.suffix.is_none() {
                        return Err(Refusal::ValueEscapes(Escape::FromEndingStretch));
                    }
                    if !written_in(rb, pb) {
                        return Err(other);
                    }
                    let vb = b.defined_at(pb).ok_or(other)?;
                    stretch.escapes.push((va, vb));
                }
            }
            for p in ra.clone().filter(|&p| a.is_operand[p as usize]) {
                let d = a.operand_target(p).ok_or(other)?;
                if self.scratch.a_to_b[d as usize] == UNALIGNED
                    && !written_in(ra, d)
                    && !self.of_unpaired(d, true)?
                {
                    first_only.push(self.one_sided_escape(spans, i, d, true)?);
                }
            }
            for p in rb.clone().filter(|&p| b.is_operand[p as usize]) {
                let d = b.operand_target(p).ok_or(other)?;
                if written_in(rb, d) {
                    continue;
                }
                let da = self.scratch.b_to_a[d as usize];
                if da == UNALIGNED && self.of_unpaired(d, false)? {
                    // Copied with the second's unpaired blocks.
                    continue;
                }
                if da == UNALIGNED {
                    second_only.push(self.one_sided_escape(spans, i, d, false)?);
                    continue;
                }
                let pair = b.defined_at(d).zip(a.defined_at(da));
                values.push(pair.ok_or(other)?);
            }
        }
        for (j, v) in first_only {
            if !stretches[j].first_only.contains(&v) {
                stretches[j].first_only.push(v);
            }
        }
        for (j, v) in second_only {
            if !stretches[j].second_only.contains(&v) {
                stretches[j].second_only.push(v);
            }
        }
        values.sort_unstable();
        values.dedup();
        Ok(values)
    }

    /// Whether definition `d` of the first function (`first`) or the second is
    /// a value of one of its unpaired blocks (merging by block pairing) that a
    /// stretch of the same function may use: of a type with a placeholder
    /// constant, escapes and one-sided escapes on. The merged body has the block
    /// and the stretch's arm of that function, and `splice/repair.rs` passes the
    /// value to each use its definition does not dominate there through block
    /// parameters (the other function's edges passing a placeholder that no
    /// code of this function reads).
    fn of_unpaired(&self, d: u32, first: bool) -> Result<bool, Refusal> {
        let ranges = &self.unpaired[usize::from(!first)];
        if !ranges.iter().any(|r| written_in(r, d)) {
            return Ok(false);
        }
        let (encoding, func) = if first {
            (self.a, self.fa)
        } else {
            (self.b, self.fb)
        };
        let value = encoding.defined_at(d);
        let value = value.ok_or(Refusal::ValueEscapes(Escape::Other))?;
        if !has_placeholder(func.dfg.value_type(value)) {
            return Err(Refusal::ValueEscapes(Escape::IntoLaterStretchType));
        }
        if !self.escapes || !self.one_sided {
            return Err(Refusal::ValueEscapes(Escape::IntoLaterStretch));
        }
        Ok(true)
    }

    /// `d` of the first function (`first`) or the second, and its value, when
    /// stretch `user` may use it as a one-sided escape: `d` is written by another
    /// stretch of the same function that has a join (it does not end its block),
    /// of a type with a placeholder constant. Whether the join dominates the use
    /// is checked on the merged body (`splice.rs`), as is that only arms of the
    /// same function read it.
    fn one_sided_escape(
        &self,
        spans: &[(Range<u32>, Range<u32>)],
        user: usize,
        d: u32,
        first: bool,
    ) -> Result<(usize, Value), Refusal> {
        let other = Refusal::ValueEscapes(Escape::Other);
        let (encoding, func) = if first {
            (self.a, self.fa)
        } else {
            (self.b, self.fb)
        };
        let j = spans
            .iter()
            .position(|(ra, rb)| written_in(if first { ra } else { rb }, d))
            .filter(|&j| j != user)
            .ok_or(other)?;
        if self.ends[j] {
            return Err(Refusal::ValueEscapes(Escape::FromEndingStretch));
        }
        let value = encoding.defined_at(d).ok_or(other)?;
        if !has_placeholder(func.dfg.value_type(value)) {
            return Err(Refusal::ValueEscapes(Escape::IntoLaterStretchType));
        }
        if !self.escapes || !self.one_sided {
            return Err(Refusal::ValueEscapes(Escape::IntoLaterStretch));
        }
        Ok((j, value))
    }
}

/// Whether values of type `ty` have a placeholder constant a one-sided escape's
/// other arm can pass (`iconst` of an integer of at most 64 bits, `f32const`,
/// `f64const`: zero).
pub(crate) fn has_placeholder(ty: ir::Type) -> bool {
    (ty.is_int() && ty.bits() <= 64) || ty == ir::types::F32 || ty == ir::types::F64
}

/// The first index at or after `start` of a definition positioned after `bound`,
/// given that none before `start` is: a few steps, then a binary search.
fn first_after(definitions: &[(u32, Value)], start: usize, bound: u32) -> usize {
    /// Steps taken one at a time before the binary search.
    const STEPS: usize = 4;
    let limit = (start + STEPS).min(definitions.len());
    match (start..limit).find(|&i| definitions[i].0 > bound) {
        Some(i) => i,
        None => limit + definitions[limit..].partition_point(|d| d.0 <= bound),
    }
}

/// Whether the definition whose serial names position `d` was written inside
/// `range` ([`SpannedEncoding::definitions_near`]).
fn written_in(range: &Range<u32>, d: u32) -> bool {
    d > range.start && d <= range.end
}

/// Records what an instruction names that the alignment does not allow in a
/// stretch, and the stack slots it names (`blocks.rs` checks they correspond),
/// leaving the instruction as it is.
#[derive(Default)]
struct Probe {
    /// A block, block call, jump or exception table, stack slot or dynamic stack
    /// slot (entities the walk numbers, or control flow), a user stack map, or a
    /// patchable call.
    numbered: bool,
    /// A global value: [`splice`](super::splice) does not copy those.
    global_value: bool,
    /// The sized stack slots it names, in operand order.
    stack_slots: Vec<StackSlot>,
    /// A dynamic stack slot.
    dynamic_stack_slot: bool,
}

impl InstructionMapper for Probe {
    fn map_value(&mut self, value: Value) -> Value {
        value
    }
    fn map_value_list(&mut self, value_list: ValueList) -> ValueList {
        value_list
    }
    fn map_global_value(&mut self, global_value: ir::GlobalValue) -> ir::GlobalValue {
        self.global_value = true;
        global_value
    }
    fn map_jump_table(&mut self, jump_table: ir::JumpTable) -> ir::JumpTable {
        self.numbered = true;
        jump_table
    }
    fn map_exception_table(&mut self, exception_table: ir::ExceptionTable) -> ir::ExceptionTable {
        self.numbered = true;
        exception_table
    }
    fn map_block_call(&mut self, block_call: BlockCall) -> BlockCall {
        self.numbered = true;
        block_call
    }
    fn map_block(&mut self, block: Block) -> Block {
        self.numbered = true;
        block
    }
    fn map_func_ref(&mut self, func_ref: FuncRef) -> FuncRef {
        func_ref
    }
    fn map_sig_ref(&mut self, sig_ref: SigRef) -> SigRef {
        sig_ref
    }
    fn map_stack_slot(&mut self, stack_slot: StackSlot) -> StackSlot {
        self.numbered = true;
        self.stack_slots.push(stack_slot);
        stack_slot
    }
    fn map_dynamic_stack_slot(&mut self, slot: ir::DynamicStackSlot) -> ir::DynamicStackSlot {
        self.numbered = true;
        self.dynamic_stack_slot = true;
        slot
    }
    fn map_constant(&mut self, constant: ir::Constant) -> ir::Constant {
        constant
    }
    fn map_immediate(&mut self, immediate: ir::Immediate) -> ir::Immediate {
        immediate
    }
}

/// What instruction `inst` of `func` names.
fn probe(func: &Function, inst: Inst) -> Probe {
    let mut probe = Probe::default();
    func.dfg.insts[inst].map(&mut probe);
    // A patchable call stays a call site the embedder knows in its own function,
    // as `similar` leaves patchable callees alone.
    let patchable = match func.dfg.insts[inst] {
        ir::InstructionData::Call { func_ref, .. } => {
            func.dfg.ext_funcs.get(func_ref).is_none_or(|d| d.patchable)
        }
        _ => false,
    };
    probe.numbered |= func.dfg.user_stack_map_entries(inst).is_some()
        || func.dfg.insts[inst].opcode().is_terminator()
        || patchable;
    probe
}

/// Whether the second function's terminator `inst` may end a stretch across
/// CFGs: copied into the merged body with its blocks mapped to the first
/// function's ([`Alignment::blocks`]). Only `jump`, `brif`, `br_table` (its
/// table copied), `return` and `trap` (no calls: a tail call stays where it is).
fn copyable_terminator(func: &Function, inst: Inst) -> bool {
    use ir::Opcode;
    matches!(
        func.dfg.insts[inst].opcode(),
        Opcode::Jump | Opcode::Brif | Opcode::BrTable | Opcode::Return | Opcode::Trap
    ) && !probe(func, inst).global_value
}

/// Whether `inst` may be part of the first function's stretch (it stays where it
/// is, moved to the stretch's arm).
fn stays_in_place(func: &Function, inst: Inst) -> bool {
    !probe(func, inst).numbered
}

/// Whether `inst` may be part of the second function's stretch (it is copied into
/// the merged body).
fn can_copy(func: &Function, inst: Inst) -> bool {
    let probe = probe(func, inst);
    !probe.numbered && !probe.global_value
}

/// The layout's skeleton, a necessary condition for aligning read without the
/// walk: the signature and, summed over the blocks in any order, each block's
/// parameter types and terminator opcode. Functions that align have the same
/// reachable blocks with the same parameters and terminators; an unreachable block
/// can only keep two functions apart that would align (a missed merge). With
/// `cfg`, the terminators are left out ([`Aligner::cfg`]).
fn layout_skeleton(func: &Function, cfg: bool) -> u64 {
    // The hashers are written inline rather than through a closure taking
    // `&dyn Fn`, so that the per-block hashing inlines: the key (the same calls
    // on the same hasher, in the same order) is unchanged.
    let mut blocks = 0u64;
    let mut sum = 0u64;
    for block in blocks_by_number(func) {
        blocks += 1;
        let terminator = func
            .layout
            .last_inst(block)
            .filter(|_| !cfg)
            .map(|i| func.dfg.insts[i].opcode());
        let mut h = FxHasher::default();
        for &p in func.dfg.block_params(block) {
            func.dfg.value_type(p).hash(&mut h);
        }
        terminator.hash(&mut h);
        sum = sum.wrapping_add(h.finish());
    }
    let mut h = FxHasher::default();
    func.signature.hash(&mut h);
    blocks.hash(&mut h);
    sum.hash(&mut h);
    h.finish()
}

/// A hash of `func`'s signature: functions that can align or pair blocks share
/// it, so the searches group by it before walking anything.
fn signature_key(func: &Function) -> u64 {
    let mut h = FxHasher::default();
    func.signature.hash(&mut h);
    h.finish()
}

/// Runs of at least two entries with equal keys in `keyed`, sorted by key, then
/// size, then function.
fn buckets<T>(keyed: &mut [(u64, usize, FuncIndex, T)]) -> Vec<&[(u64, usize, FuncIndex, T)]> {
    keyed.sort_unstable_by_key(|&(key, size, f, _)| (key, size, f));
    keyed
        .chunk_by(|x, y| x.0 == y.0)
        .filter(|run| run.len() > 1)
        .collect()
}

/// Phases 1 and 2: the functions of `functions` that share their layout's
/// skeleton with another (the only ones walked), and their spanned encodings
/// (`None` where the walk does not support the function).
fn spanned_candidates(
    module: &FunctionSet,
    functions: &[FuncIndex],
    cfg: bool,
) -> (Vec<FuncIndex>, Vec<Option<SpannedEncoding>>) {
    let (walked, encoded) = walk_candidates(module, functions, cfg);
    (walked.into_iter().map(|(f, _)| f).collect(), encoded)
}

/// [`spanned_candidates`], each function walked with its layout's skeleton.
fn walk_candidates(
    module: &FunctionSet,
    functions: &[FuncIndex],
    cfg: bool,
) -> (Vec<(FuncIndex, u64)>, Vec<Option<SpannedEncoding>>) {
    // The skeleton hashes the signature and the number of blocks with what the
    // blocks hold, so functions alone with their signature and number of blocks
    // have a skeleton of their own (but for a 64-bit collision): the skeleton,
    // which reads every block's parameters, is computed for the others only.
    let mut by_shape: Vec<(u64, usize, FuncIndex, ())> = functions
        .iter()
        .map(|&f| {
            let func = &module.get(f).func;
            (signature_key(func), blocks_by_number(func).count(), f, ())
        })
        .collect();
    by_shape.sort_unstable_by_key(|&(signature, blocks, f, _)| (signature, blocks, f));
    let mut by_skeleton: Vec<(u64, usize, FuncIndex, ())> = by_shape
        .chunk_by(|x, y| (x.0, x.1) == (y.0, y.1))
        .filter(|run| run.len() > 1)
        .flatten()
        .map(|&(_, _, f, ())| (layout_skeleton(&module.get(f).func, cfg), 0, f, ()))
        .collect();
    // A function that reads machine state is never merged. Whether one does
    // reads every instruction, so it is asked only of the functions that share
    // their skeleton with another (the skeleton's runs are within those of the
    // signature and number of blocks), and those that do are left out of
    // their runs: what is left is what leaving them out first leaves.
    let by_layout: Vec<(u64, usize, FuncIndex, ())> = buckets(&mut by_skeleton)
        .into_iter()
        .flat_map(|run| {
            let run: Vec<(u64, usize, FuncIndex, ())> = run
                .iter()
                .copied()
                .filter(|e| !reads_machine_state(&module.get(e.2).func))
                .collect();
            if run.len() > 1 { run } else { Vec::new() }
        })
        .collect();
    let walked: Vec<(FuncIndex, u64)> = by_layout.iter().map(|e| (e.2, e.0)).collect();
    let functions: Vec<FuncIndex> = walked.iter().map(|&(f, _)| f).collect();
    let encoded = walk_in_parallel(module, &functions, |func, scratch| {
        encode_spanned(func, module, scratch)
    });
    (walked, encoded)
}

/// The walked functions keyed by their walk's skeleton and size, for [`buckets`].
fn keyed<'a>(
    walked: &[FuncIndex],
    encoded: &'a [Option<SpannedEncoding>],
    cfg: bool,
) -> Vec<(u64, usize, FuncIndex, &'a SpannedEncoding)> {
    walked
        .iter()
        .zip(encoded)
        .filter_map(|(&f, e)| e.as_ref().map(|e| (e.skeleton(cfg), e.insts.len(), f, e)))
        .collect()
}

/// Phases 1, 2 and 4: pairs of `functions` (of `module`) that align, each once,
/// the first of a pair before the second in input order, ordered by first. Only
/// functions that share their layout's skeleton with another are walked. With
/// `cfg`, the skeletons leave the terminators out and paired blocks may end in
/// different terminators ([`Aligner::cfg`]).
pub(crate) fn find_aligned_pairs(
    module: &FunctionSet,
    functions: &[FuncIndex],
    rules: Rules,
) -> Vec<(FuncIndex, Alignment)> {
    AlignedSearch::new(module, functions, rules)
        .first_round(module)
        .0
}

/// What the first alignment round found on its functions, kept so that the
/// one-sided round ([`Self::one_sided_pairs`]), on the functions left, walks none
/// of them again and aligns again only what one-sided escapes can change.
pub(crate) struct AlignedSearch {
    rules: Rules,
    /// The functions walked (those sharing their layout's skeleton with another),
    /// with that skeleton.
    walked: Vec<(FuncIndex, u64)>,
    /// Their spanned encodings (`None` where the walk does not support one).
    encoded: Vec<Option<SpannedEncoding>>,
}

/// The outcome of every attempt of a round, by its two functions in input order:
/// the instructions they have in common, or the refusal.
type Tried = FxHashMap<(FuncIndex, FuncIndex), Result<u32, Refusal>>;

/// The alignments a round without one-sided escapes refused only for having
/// one, by their two functions in input order (what the one-sided round would
/// find aligning them again).
type OneSided = FxHashMap<(FuncIndex, FuncIndex), Alignment>;

impl AlignedSearch {
    /// Walks the functions of `functions` that share their layout's skeleton
    /// with another, to be aligned under `rules`.
    fn new(module: &FunctionSet, functions: &[FuncIndex], rules: Rules) -> Self {
        let (walked, encoded) = walk_candidates(module, functions, rules.cfg);
        Self {
            rules,
            walked,
            encoded,
        }
    }

    /// The functions of `walked` that `keep` marks and that share their walk's
    /// skeleton with another so marked, by bucket (what [`spanned_candidates`]
    /// and [`buckets`] give for those functions alone: a function shares its
    /// layout's skeleton with another of them or is not walked).
    fn buckets(&self, keep: impl Fn(FuncIndex) -> bool) -> Vec<Vec<BucketEntry<'_>>> {
        let mut by_layout: Vec<(u64, usize, FuncIndex, usize)> = self
            .walked
            .iter()
            .enumerate()
            .filter(|(_, (f, _))| keep(*f))
            .map(|(i, &(f, layout))| (layout, 0, f, i))
            .collect();
        let walked: Vec<(FuncIndex, &SpannedEncoding)> = buckets(&mut by_layout)
            .iter()
            .flat_map(|b| b.iter())
            .filter_map(|e| self.encoded[e.3].as_ref().map(|enc| (e.2, enc)))
            .collect();
        let mut keyed: Vec<BucketEntry<'_>> = walked
            .into_iter()
            .map(|(f, e)| (e.skeleton(self.rules.cfg), e.insts.len(), f, e))
            .collect();
        buckets(&mut keyed).into_iter().map(<[_]>::to_vec).collect()
    }

    /// The round's pairs (as [`find_aligned_pairs`]), the outcome of every
    /// attempt it made, and the alignments it refused only for a one-sided
    /// escape.
    ///
    /// Without one-sided escapes, each pair is aligned with them allowed all
    /// the same, and an alignment that has one is refused afterwards (kept for
    /// the one-sided round, which need not align the pair again): the rules
    /// differ only where a stretch's value is used by a later stretch of its own
    /// function (`Aligner::one_sided_escape`), so an alignment without one is
    /// what the stricter rules find, and one with one is what they refuse.
    fn first_round(&self, module: &FunctionSet) -> (Vec<(FuncIndex, Alignment)>, Tried, OneSided) {
        let buckets = self.buckets(|_| true);
        let rules = self.rules;
        let lenient = Rules {
            one_sided: rules.one_sided || rules.escapes,
            ..rules
        };
        let strict = |mut alignment: Alignment| {
            if rules.one_sided {
                return Ok(alignment);
            }
            if alignment.has_one_sided_escapes() {
                return Err(Box::new(alignment));
            }
            // The cut, aligned again under the same rules, would be refused too.
            if alignment
                .cut
                .as_ref()
                .is_some_and(|c| c.has_one_sided_escapes())
            {
                alignment.cut = None;
            }
            Ok(alignment)
        };
        let found = parallel::map(&buckets, 1, |bucket| {
            let mut scratch = AlignScratch::default();
            let mut tried = Vec::new();
            let mut one_sided = Vec::new();
            let pairs = pair_bucket(bucket, |x, y| {
                let key = (x.2.min(y.2), x.2.max(y.2));
                let aligned = match align_entries(module, x, y, &mut scratch, lenient) {
                    Ok(alignment) => strict(alignment).map_err(|refused| {
                        one_sided.push((key, *refused));
                        Refusal::ValueEscapes(Escape::IntoLaterStretch)
                    }),
                    Err((refusal, _)) => Err(refusal),
                };
                tried.push((key, aligned.as_ref().map(|a| a.common).map_err(|&e| e)));
                aligned.ok().map(|a| (a.common, Some(a)))
            });
            (pairs, tried, one_sided)
        });
        let mut tried = Tried::default();
        let mut one_sided = OneSided::default();
        let mut pairs = Vec::new();
        for (bucket_pairs, bucket_tried, bucket_one_sided) in found {
            pairs.extend(bucket_pairs);
            tried.extend(bucket_tried);
            one_sided.extend(bucket_one_sided);
        }
        pairs.sort_by_key(|(first, _)| *first);
        (pairs, tried, one_sided)
    }

    /// The first round (without one-sided escapes, same CFGs: `rules` with
    /// those off): its pairs, and what the one-sided round needs of it.
    pub(crate) fn without_one_sided(
        module: &FunctionSet,
        functions: &[FuncIndex],
        rules: Rules,
    ) -> (Vec<(FuncIndex, Alignment)>, FirstRound) {
        let rules = Rules {
            one_sided: false,
            cfg: false,
            ..rules
        };
        let search = Self::new(module, functions, rules);
        let (pairs, tried, one_sided) = search.first_round(module);
        let round = FirstRound {
            search,
            tried,
            one_sided,
        };
        (pairs, round)
    }
}

/// The first alignment round's walks and attempts ([`AlignedSearch::without_one_sided`]).
pub(crate) struct FirstRound {
    search: AlignedSearch,
    tried: Tried,
    /// The alignments it refused only for a one-sided escape.
    one_sided: OneSided,
}

impl FirstRound {
    /// The pairs of `functions` (some of the first round's, those it left) that
    /// align with one-sided escapes and are chosen when the round is run again on
    /// them with one-sided escapes allowed, as [`find_aligned_pairs`] would
    /// choose them, ordered by first; the pairs without one-sided escapes are
    /// left out (the first round priced what it could align). Reuses the first
    /// round's encodings and outcomes, and aligns only the pairs it did not
    /// try: the first round kept what it refused for a one-sided escape
    /// ([`AlignedSearch::first_round`]), and the rules differ only there, so
    /// every other attempt's outcome is the first round's.
    pub(crate) fn one_sided_pairs(
        &self,
        module: &FunctionSet,
        functions: &[FuncIndex],
    ) -> Vec<(FuncIndex, Alignment)> {
        let rules = Rules {
            one_sided: true,
            ..self.search.rules
        };
        if !rules.escapes {
            // One-sided escapes need escapes: this round finds nothing new.
            return Vec::new();
        }
        let mut left = SecondaryMap::<FuncIndex, bool>::new();
        for &f in functions {
            left[f] = true;
        }
        let buckets = self.search.buckets(|f| left[f]);
        let mut pairs: Vec<(FuncIndex, Alignment)> = parallel::map(&buckets, 1, |bucket| {
            let mut scratch = AlignScratch::default();
            pair_bucket(bucket, |x, y| {
                let key = (x.2.min(y.2), x.2.max(y.2));
                match self.tried.get(&key) {
                    Some(Ok(common)) => return Some((*common, None)),
                    Some(Err(r)) if *r != Refusal::ValueEscapes(Escape::IntoLaterStretch) => {
                        return None;
                    }
                    _ => {}
                }
                if let Some(a) = self.one_sided.get(&key) {
                    return Some((a.common, Some(a.clone())));
                }
                let a = align_entries(module, x, y, &mut scratch, rules).ok()?;
                Some((a.common, Some(a).filter(Alignment::has_one_sided_escapes)))
            })
        })
        .into_iter()
        .flatten()
        .collect();
        pairs.sort_by_key(|(first, _)| *first);
        pairs
    }
}

/// What [`FirstRound::group_joiners`] offers a hub: a function left alone, or
/// another merged pair, with how each of its functions aligns with the hub.
pub(crate) struct Offer {
    /// Each function's alignment with the hub (the hub first): one for a
    /// function left alone; for a merged pair, its first member's, then its
    /// second's.
    pub(crate) alignments: Vec<Alignment>,
    /// For a merged pair, its index in the hubs.
    pub(crate) pair: Option<usize>,
    /// The hub's instructions outside the stretches.
    common: u32,
}

impl FirstRound {
    /// The round of groups ([`SimilarOptions::align_groups`](super::SimilarOptions::align_groups)):
    /// for each of `hubs` (the first member of a merged aligned pair, with the
    /// pair's alignment), what may join its pair: the functions of `left`, and
    /// the merged pairs of hubs after it in input order, that share its bucket
    /// (its walk's skeleton), lie within [`PARTNERS`] of it in the bucket's
    /// order of size, and align with it simply ([`Alignment::is_simple`]; both
    /// members of a pair), most instructions in common first, at most
    /// [`PARTNERS`]. A function or pair is offered to one hub only, the one it
    /// has the most in common with (the first in `hubs` among equals). Their
    /// stretches need not be where the pair's are: [`Self::widened`] aligns
    /// them again. Reuses the first round's encodings and refusals; the rules
    /// are the first round's (no one-sided escapes).
    pub(crate) fn group_joiners(
        &self,
        module: &FunctionSet,
        hubs: &[(FuncIndex, &Alignment)],
        left: &[FuncIndex],
    ) -> Vec<Vec<Offer>> {
        let mut hub_of = SecondaryMap::<FuncIndex, Option<usize>>::new();
        let mut second_of = SecondaryMap::<FuncIndex, Option<usize>>::new();
        for (i, &(hub, alignment)) in hubs.iter().enumerate() {
            hub_of[hub] = Some(i);
            second_of[alignment.second] = Some(i);
        }
        let mut is_left = SecondaryMap::<FuncIndex, bool>::new();
        for &f in left {
            is_left[f] = true;
        }
        let buckets = self
            .search
            .buckets(|f| is_left[f] || hub_of[f].is_some() || second_of[f].is_some());
        let rules = self.search.rules;
        let found: Vec<Vec<(usize, Offer)>> = parallel::map(&buckets, 1, |bucket| {
            let mut scratch = AlignScratch::default();
            let mut offers = Vec::new();
            if bucket.iter().all(|e| hub_of[e.2].is_none()) {
                return offers;
            }
            let entry = |f: FuncIndex| bucket.iter().find(|e| e.2 == f);
            // How `c` aligns with hub `h` (an entry of the bucket), the hub
            // first, when simply (`Alignment::is_simple`).
            let mut join = |h: &BucketEntry<'_>, c: &BucketEntry<'_>| {
                // The first round refused them already, the hub first: its
                // rules are these.
                if h.2 < c.2 && matches!(self.tried.get(&(h.2, c.2)), Some(Err(_))) {
                    return None;
                }
                let (fa, fc) = (&module.get(h.2).func, &module.get(c.2).func);
                Aligner::new(h.3, fa, c.3, fc, &mut scratch, rules)
                    .align(c.2)
                    .ok()
                    .filter(Alignment::is_simple)
            };
            for (j, c) in bucket.iter().enumerate() {
                // A function left alone, or the first member of a merged pair
                // (with its second, which must align too).
                let pair = match (is_left[c.2], hub_of[c.2]) {
                    (true, _) => None,
                    (false, Some(p)) => Some(p),
                    (false, None) => continue,
                };
                let second = match pair {
                    Some(p) => match entry(hubs[p].1.second) {
                        Some(e) => Some(e),
                        None => continue,
                    },
                    None => None,
                };
                let near = j.saturating_sub(PARTNERS)..(j + 1 + PARTNERS).min(bucket.len());
                // The hubs near, tried in order of an upper bound of what they
                // can have in common (`common_bound`), so that once one aligns,
                // those that cannot beat it are not tried at all.
                let mut near: Vec<(u32, usize, &BucketEntry<'_>)> = bucket[near]
                    .iter()
                    .filter_map(|h| Some((hub_of[h.2]?, h)))
                    .filter(|&(i, _)| pair.is_none_or(|p| hubs[i].0 < hubs[p].0))
                    .map(|(i, h)| (common_bound(h.3, shapes_of(h.3), c.3, shapes_of(c.3)), i, h))
                    .collect();
                near.sort_unstable_by_key(|&(bound, i, _)| (std::cmp::Reverse(bound), i));
                let mut best: Option<(usize, Offer)> = None;
                for (bound, i, h) in near {
                    if best.as_ref().is_some_and(|(_, offer)| bound < offer.common) {
                        break;
                    }
                    let Some(a) = join(h, c) else {
                        continue;
                    };
                    let better = best.as_ref().is_none_or(|(b, offer)| {
                        (a.common, std::cmp::Reverse(i)) > (offer.common, std::cmp::Reverse(*b))
                    });
                    if !better {
                        continue;
                    }
                    let common = a.common;
                    let mut alignments = vec![a];
                    if let Some(second) = second {
                        let Some(b) = join(h, second) else {
                            continue;
                        };
                        alignments.push(b);
                    }
                    best = Some((
                        i,
                        Offer {
                            alignments,
                            pair,
                            common,
                        },
                    ));
                }
                offers.extend(best);
            }
            offers
        });
        let mut offers: Vec<(usize, Offer)> = found.into_iter().flatten().collect();
        offers.sort_by_key(|(i, offer)| {
            (
                *i,
                std::cmp::Reverse(offer.common),
                offer.alignments[0].second,
            )
        });
        let mut joiners: Vec<Vec<Offer>> = hubs.iter().map(|_| Vec::new()).collect();
        for (i, offer) in offers {
            if joiners[i].len() < PARTNERS {
                joiners[i].push(offer);
            }
        }
        joiners
    }

    /// The alignments of the second functions of `alignments` (each with the
    /// same first function, `hub`) with `hub` once more, each stretch made to
    /// cover at least every span any of them has in the hub's block (the
    /// union: the fewest instructions before and after), so that all differ
    /// from the hub at the same places ([`Alignment::same_places`], checked);
    /// `None` when one does not align so. Where a function equals the hub in
    /// such a span, its arm holds its own (equal) instructions: run as it, the
    /// merged body still runs its instructions in its order.
    pub(crate) fn widened(
        &self,
        module: &FunctionSet,
        hub: FuncIndex,
        alignments: &[&Alignment],
    ) -> Option<Vec<Alignment>> {
        let fa = &module.get(hub).func;
        let mut bounds = SecondaryMap::<Block, Option<(u32, u32)>>::new();
        for stretch in alignments.iter().flat_map(|a| &a.stretches) {
            let (before, after) = span_in_block(fa, stretch)?;
            let bound = &mut bounds[stretch.block];
            *bound = Some(bound.map_or((before, after), |(b, a)| (b.min(before), a.min(after))));
        }
        let encoding = |f: FuncIndex| {
            let i = self.search.walked.iter().position(|w| w.0 == f)?;
            self.search.encoded[i].as_ref()
        };
        let ea = encoding(hub)?;
        let mut scratch = AlignScratch::default();
        // An alignment whose stretches are the bounds' spans already stays.
        let bounded_blocks = bounds.values().filter(|b| b.is_some()).count();
        let fits = |a: &Alignment| {
            a.stretches.len() == bounded_blocks
                && a.stretches
                    .iter()
                    .all(|s| span_in_block(fa, s).is_some_and(|span| bounds[s.block] == Some(span)))
        };
        let widened: Vec<Alignment> = alignments
            .iter()
            .map(|&a| {
                if fits(a) {
                    return Some(a.clone());
                }
                let fb = &module.get(a.second).func;
                let mut aligner = Aligner::new(
                    ea,
                    fa,
                    encoding(a.second)?,
                    fb,
                    &mut scratch,
                    self.search.rules,
                );
                aligner.bounds = Some(&bounds);
                aligner.align(a.second).ok().filter(Alignment::is_simple)
            })
            .collect::<Option<_>>()?;
        let first = widened.first()?;
        widened
            .iter()
            .all(|a| a.same_places(first))
            .then_some(widened)
    }
}

/// Where `stretch` is in its block of `func` (the first function): how many
/// instructions come before it and how many after it (the terminator
/// included); `None` for a stretch ending its block.
fn span_in_block(func: &Function, stretch: &Stretch) -> Option<(u32, u32)> {
    let suffix = stretch.suffix?;
    let insts = func.layout.block_insts(stretch.block);
    let (mut at, mut len) = (None, 0u32);
    for (i, inst) in insts.enumerate() {
        if inst == suffix {
            at = Some(i as u32);
        }
        len += 1;
    }
    let at = at?;
    let before = at.checked_sub(u32::try_from(stretch.first.len()).ok()?)?;
    Some((before, len - at))
}

/// What stands between a function that merging by alignment left alone and a
/// partner ([`census`]).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Missed {
    /// No other function considered shares its layout's skeleton (signature,
    /// blocks' parameters and terminators): the block structure differs.
    NoLayoutPartner,
    /// Others share its layout's skeleton but none its walk's (blocks in another
    /// order, terminators with other immediates), or the walk does not support it.
    NoWalkPartner,
    /// It aligns with a function already merged by alignment with another: only a
    /// group of three or more would take it.
    AlignsWithMerged,
    /// It aligns with another function left alone: the pricing rejected the pair.
    NotProfitable,
    /// It aligns with no partner: the obstacle met by the attempt that got
    /// furthest (matched the most instructions).
    Refused(Refusal),
    /// Its bucket's other functions were all counted already, with partners of
    /// their own.
    PartnersTaken,
}

/// A bucket's entry: hash, position, function, its spanned encoding.
type BucketEntry<'e> = (u64, usize, FuncIndex, &'e SpannedEncoding);

/// Aligns bucket entries `x` and `y` under `rules`, the one first in input order
/// as `a`: its body is the one a merge copies.
fn align_entries(
    module: &FunctionSet,
    x: &BucketEntry<'_>,
    y: &BucketEntry<'_>,
    scratch: &mut AlignScratch,
    rules: Rules,
) -> Result<Alignment, (Refusal, u32)> {
    let (first, second) = if x.2 < y.2 { (x, y) } else { (y, x) };
    let fa = &module.get(first.2).func;
    let fb = &module.get(second.2).func;
    Aligner::new(first.3, fa, second.3, fb, scratch, rules).align(second.2)
}

/// The census of missed merges by alignment: for each function of `considered`
/// that `merged` does not mark (the functions merging by alignment saw and left
/// alone), what stands between it and its nearest partner in its bucket, with
/// that partner; a function left alone is counted once, with its partner when the
/// partner was left alone too. Diagnostics only (`merge_bench similar-census`):
/// it tries every function against the nearest [`PARTNERS`] of its bucket either
/// side, merged or not. With `cfg`, across CFGs ([`Aligner::cfg`]).
pub(crate) fn census(
    module: &FunctionSet,
    considered: &[FuncIndex],
    merged: &SecondaryMap<FuncIndex, bool>,
    escapes: bool,
    one_sided: bool,
    cfg: bool,
) -> Vec<(FuncIndex, Option<FuncIndex>, Missed)> {
    let (walked, encoded) = spanned_candidates(module, considered, cfg);
    let mut keyed = keyed(&walked, &encoded, cfg);
    let mut missed = Vec::new();
    let mut counted = SecondaryMap::<FuncIndex, bool>::new();
    let mut in_bucket = SecondaryMap::<FuncIndex, bool>::new();
    let mut scratch = AlignScratch::default();
    let rules = Rules {
        escapes,
        one_sided,
        cfg,
        anchors: false,
    };
    for bucket in buckets(&mut keyed) {
        for i in 0..bucket.len() {
            let f = bucket[i].2;
            in_bucket[f] = true;
            if merged[f] || counted[f] {
                continue;
            }
            let near = i.saturating_sub(PARTNERS)..(i + 1 + PARTNERS).min(bucket.len());
            let mut best: Option<(u32, Option<FuncIndex>, Missed)> = None;
            for j in near.filter(|&j| j != i && !counted[bucket[j].2]) {
                let (x, y) = (&bucket[i], &bucket[j]);
                let (rank, partner, why) = match align_entries(module, x, y, &mut scratch, rules) {
                    // An unmerged partner first, then a merged one, then the
                    // refusal that got furthest.
                    Ok(_) if !merged[y.2] => (u32::MAX, Some(y.2), Missed::NotProfitable),
                    Ok(_) => (u32::MAX - 1, None, Missed::AlignsWithMerged),
                    Err((refusal, progress)) => {
                        let partner = (!merged[y.2]).then_some(y.2);
                        (progress, partner, Missed::Refused(refusal))
                    }
                };
                if best.as_ref().is_none_or(|b| rank > b.0) {
                    best = Some((rank, partner, why));
                }
            }
            let (partner, why) = best.map_or((None, Missed::PartnersTaken), |b| (b.1, b.2));
            counted[f] = true;
            if let Some(p) = partner {
                counted[p] = true;
            }
            missed.push((f, partner, why));
        }
    }
    let mut layout_partner = SecondaryMap::<FuncIndex, bool>::new();
    for &f in &walked {
        layout_partner[f] = true;
    }
    for &f in considered {
        if merged[f] || in_bucket[f] {
            continue;
        }
        let why = if layout_partner[f] {
            Missed::NoWalkPartner
        } else {
            Missed::NoLayoutPartner
        };
        missed.push((f, None, why));
    }
    missed
}

/// Phase 4 in one bucket (sorted by size): each function, in order, with the
/// unpaired partner among the next [`PARTNERS`] that aligns with the most common
/// instructions. `attempt` aligns two entries: the instructions they have in
/// common and the alignment to keep, or `None` when they do not align; a pair
/// whose alignment is not kept is paired all the same, but not returned.
fn pair_bucket(
    bucket: &[BucketEntry<'_>],
    mut attempt: impl FnMut(&BucketEntry<'_>, &BucketEntry<'_>) -> Option<(u32, Option<Alignment>)>,
) -> Vec<(FuncIndex, Alignment)> {
    let mut paired = vec![false; bucket.len()];
    let mut pairs = Vec::new();
    let shapes: Vec<&[u64]> = bucket.iter().map(|e| shapes_of(e.3)).collect();
    let mut partners: Vec<(u32, usize)> = Vec::with_capacity(PARTNERS);
    for i in 0..bucket.len() {
        if paired[i] {
            continue;
        }
        // The partner with the most common instructions, the first in bucket order
        // among equals, among the next `PARTNERS` unpaired. Tried in order of an
        // upper bound of what they can have in common (`common_bound`), so that
        // once one aligns, those that cannot beat it are not tried at all.
        partners.clear();
        partners.extend(
            (i + 1..bucket.len())
                .filter(|&j| !paired[j])
                .take(PARTNERS)
                .map(|j| {
                    (
                        common_bound(bucket[i].3, shapes[i], bucket[j].3, shapes[j]),
                        j,
                    )
                }),
        );
        partners.sort_unstable_by_key(|&(bound, j)| (std::cmp::Reverse(bound), j));
        let mut best: Option<(usize, u32, Option<Alignment>)> = None;
        for &(bound, j) in &partners {
            if let Some((k, common, _)) = &best
                && (bound < *common || (bound == *common && j > *k))
            {
                // Sorted by bound: none after this one can beat the best either.
                if bound < *common {
                    break;
                }
                continue;
            }
            let Some((common, alignment)) = attempt(&bucket[i], &bucket[j]) else {
                continue;
            };
            let better = best
                .as_ref()
                .is_none_or(|(k, c, _)| common > *c || (common == *c && j < *k));
            if better {
                best = Some((j, common, alignment));
            }
        }
        if let Some((j, _, alignment)) = best {
            paired[i] = true;
            paired[j] = true;
            if let Some(alignment) = alignment {
                let first = bucket[i].2.min(bucket[j].2);
                pairs.push((first, alignment));
            }
        }
    }
    pairs
}

/// `e`'s instructions' shapes ([`SpannedEncoding::shapes`]).
fn shapes_of(e: &SpannedEncoding) -> &[u64] {
    &e.shapes
}

/// The instructions two blocks' common prefix and suffix of equal shapes hold,
/// at most the shorter block's.
fn block_bound(a: &[u64], b: &[u64]) -> usize {
    let prefix = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let suffix = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count();
    (prefix + suffix).min(a.len().min(b.len()))
}

/// An upper bound of [`Alignment::common`] for `a` and `b` (with their
/// shapes), whichever is first: per block, the instructions of the
/// common prefix and suffix of equal shapes, at most the shorter block's
/// (an attempt matches a prefix of instructions, each of the same shape, and a
/// suffix of the same shape). 0 when the blocks do not correspond.
fn common_bound(a: &SpannedEncoding, sa: &[u64], b: &SpannedEncoding, sb: &[u64]) -> u32 {
    if a.blocks.len() != b.blocks.len() {
        return 0;
    }
    let mut bound = 0;
    for k in 0..a.blocks.len() {
        let (ia, ib) = (a.block(k).insts, b.block(k).insts);
        bound += block_bound(&sa[ia], &sb[ib]) as u32;
    }
    bound
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identical::encode::WalkScratch;
    use crate::ir::Linkage;
    use cranelift_codegen::entity::EntityRef;

    /// The one-sided round on the first round's walks and attempts finds the
    /// pairs a round of its own finds (less those without one-sided escapes), on
    /// every function or on those a merge of the first pair would leave.
    #[test]
    fn one_sided_round_reuses_the_first() {
        let mut one_sided = 0;
        for (path, module) in crate::similar::similar_filetests("aligned_") {
            let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
            let plain = Rules {
                escapes: true,
                ..Rules::default()
            };
            let (pairs, round) = AlignedSearch::without_one_sided(&module, &all, plain);
            assert_eq!(pairs, find_aligned_pairs(&module, &all, plain));
            let mut subsets = vec![all.clone()];
            if let Some((first, alignment)) = pairs.first() {
                let left = all.iter().copied();
                let left = left.filter(|f| f != first && *f != alignment.second);
                subsets.push(left.collect());
            }
            for functions in subsets {
                let rules = Rules {
                    one_sided: true,
                    ..plain
                };
                let mut expected = find_aligned_pairs(&module, &functions, rules);
                expected.retain(|(_, a)| a.has_one_sided_escapes());
                one_sided += expected.len();
                let found = round.one_sided_pairs(&module, &functions);
                assert_eq!(found, expected, "{}", path.display());
            }
        }
        assert!(one_sided > 0, "some filetest has a one-sided escape");
    }

    /// For each instruction of `e`, in stream order, a hash of its shape, read
    /// back from the encoding: what the walk's sink must take.
    fn shape_hashes(e: &SpannedEncoding) -> Vec<u64> {
        let mut hashes = Vec::with_capacity(e.insts.len());
        for k in 0..e.blocks.len() {
            let parts = e.block(k);
            for i in parts.insts.clone() {
                let mut h = FxHasher::default();
                for p in e.inst_span(i, &parts) {
                    let p = p as usize;
                    if e.is_operand[p] {
                        h.write_u64(u64::MAX);
                    } else {
                        h.write_u64(e.tokens[p]);
                    }
                }
                hashes.push(h.finish());
            }
        }
        hashes
    }

    /// The shapes the walk's sink takes are `shape_hashes` of the encoding it
    /// wrote, on every function of the similar filetests.
    #[test]
    fn walk_shapes_are_the_shape_hashes() {
        let mut instructions = 0;
        for (path, module) in crate::similar::similar_filetests("") {
            for (_, def) in module.iter() {
                let mut scratch = WalkScratch::default();
                let Some(encoding) = encode_spanned(&def.func, &module, &mut scratch) else {
                    continue;
                };
                assert_eq!(
                    encoding.shapes,
                    shape_hashes(&encoding),
                    "{}",
                    path.display()
                );
                instructions += encoding.shapes.len();
            }
        }
        assert!(instructions > 1000, "{instructions}");
    }

    /// The cursor search finds what the binary search finds, whatever order the
    /// ranges come in (forward as prefixes are matched, backward as suffixes are).
    #[test]
    fn definitions_near_agrees_with_binary_search() {
        let text = "function %f(i64, i32) -> i32 {
            block0(v0: i64, v1: i32):
                v2 = iconst.i32 7
                v3 = iadd v1, v2
                v4 = load.i32 v0+8
                v5 = imul v3, v4
                brif v5, block1(v5), block2
            block1(v6: i32):
                v7 = isub v6, v1
                v8 = iadd v7, v2
                return v8
            block2:
                v9 = iconst.i32 0
                return v9
            }";
        let func = cranelift_reader::parse_functions(text)
            .expect("parses")
            .remove(0);
        let mut module = FunctionSet::new();
        module.push(func, Linkage::Local).expect("one function");
        let func = &module.get(FuncIndex::new(0)).func;
        let encoding = encode_spanned(func, &module, &mut WalkScratch::default()).expect("encodes");
        let signature = 0..encoding.blocks[0].start;
        let mut ranges: Vec<Range<u32>> = Vec::new();
        ranges.push(signature);
        for k in 0..encoding.blocks.len() {
            let parts = encoding.block(k);
            ranges.push(parts.header.clone());
            ranges.extend(parts.insts.clone().map(|i| encoding.inst_span(i, &parts)));
        }
        assert!(
            ranges
                .iter()
                .filter(|r| !encoding.definitions_in(r).is_empty())
                .count()
                > 5,
            "the ranges define values"
        );
        let mut orders = vec![ranges.clone(), ranges.iter().rev().cloned().collect()];
        orders.push(ranges.iter().step_by(3).chain(&ranges).cloned().collect());
        for order in orders {
            let mut cursor = 0;
            for range in &order {
                assert_eq!(
                    encoding.definitions_near(range, &mut cursor),
                    encoding.definitions_in(range),
                    "{range:?}"
                );
            }
        }
    }
}
