//! The comparator's view of a CLIF function: one CFG-ordered walk.
//!
//! [`encode_function`] walks a function once, from the entry block, visiting blocks in
//! the order the terminators name them (`brif` then/else, `br_table` default then
//! entries, `try_call` normal return then exception targets), and writes everything
//! that decides the function's behaviour into a flat token stream, a
//! [`FunctionEncoding`]:
//!
//! * values, blocks and stack slots are numbered in order of first appearance, so
//!   the numbering and layout in the text do not matter but which value is used does;
//! * referenced entities (memory flags, global values, signatures, constants, jump
//!   tables, exception tables, external names) are written by *content*, never by
//!   their function-local handle;
//! * a reference to a function defined in the module (and not preemptible) is written
//!   as its [`FuncIndex`], and its position is remembered: the comparator reads it
//!   through the current equivalence classes, and the hash skips it. Whether a
//!   reference compares so is [`target_match`]'s to say, the rule the machine-code
//!   comparison asks too: calls always, *address* uses (`func_addr`, a symbol in a
//!   global value) only when addresses are not significant ([`WalkOptions`]): when
//!   they are, two equal functions may keep distinct addresses (one becomes a
//!   thunk), so an address is only known equal to the address of the same symbol;
//! * an instruction's controlling type is not written: it is the type of its first
//!   result or of an operand, and both are (an operand's at its definition, which
//!   each use names; a use before its definition makes the function unsupported);
//! * source locations, comments, value labels and debug tags are not written.
//!
//! A sink may write user names by reference instead of by content
//! ([`TokenSink::user_name_by_reference`]): compile-once in `module/compile_once.rs`
//! numbers them by first use, so that two functions that differ only in the names
//! their references point to have one stream, and the numbering pairs the names.
//!
//! The token grammar is deterministic (every variable-length part is preceded by its
//! length or ends with a marker no other token there can be, every choice starts
//! with a tag), so two functions have equal streams exactly when they have equal
//! structure. Every tag is named in [`super::tokens`], with that argument in full
//! and the list of what is deliberately not compared.
//!
//! The walk writes into a [`TokenSink`]: [`encode_function`] stores the stream for
//! the comparator, and merging by alignment (`similar/align.rs`) also notes where
//! blocks, instructions and definitions are. The first look at every function,
//! in both merges, is cheaper still: `fingerprint.rs` hashes a function without
//! this walk, reading only what the walk writes as is.

use super::callee_loads::CalleeLoads;
use super::instruction::{self, FunctionUse, Immediate, InstructionVisitor};
use super::tokens::*;
use crate::ir::{
    FuncIndex, FunctionSet, MergeMode, Reads, Reference, SymbolKey, TargetMatch, target_match,
};
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::entities::AnyEntity;
use cranelift_codegen::ir::{
    self, AbiParam, ArgumentPurpose, Block, BlockArg, BlockCall, Constant, DynamicStackSlot,
    ExceptionTable, ExceptionTableItem, FuncRef, Function, GlobalValue, GlobalValueData, Inst,
    InstructionData, JumpTable, MemFlags, SigRef, Signature, StackSlot, Type, Value,
};
use cranelift_codegen::ir::{Endianness, immediates::Offset32, types};
use std::fmt;

/// The comparator's view of one function: a token stream plus where it names
/// module-defined functions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FunctionEncoding {
    tokens: Vec<u64>,
    callee_positions: Vec<u32>,
    holes: Vec<Hole>,
    call_sites: Vec<CallSite>,
    address_taken: Vec<FuncIndex>,
    instructions: u32,
    /// Whether only the callee tokens are left ([`Self::callees_only`]).
    callees_only: bool,
}

impl FunctionEncoding {
    /// The token stream.
    pub fn tokens(&self) -> &[u64] {
        &self.tokens
    }

    /// Positions in [`Self::tokens`] that hold the [`FuncIndex`] of a module-defined
    /// function (a callee, a `func_addr` target, or a symbol naming one). Sorted.
    pub fn callee_positions(&self) -> &[u32] {
        &self.callee_positions
    }

    /// The constants the similar-function merge may turn into parameters, in walk
    /// order.
    pub fn holes(&self) -> &[Hole] {
        &self.holes
    }

    /// The direct calls (`call`) of module-defined functions, in walk order: the
    /// callees the similar-function merge may turn into parameters.
    pub fn call_sites(&self) -> &[CallSite] {
        &self.call_sites
    }

    /// The module-defined functions this function refers to, with repeats.
    pub fn callees(&self) -> impl Iterator<Item = FuncIndex> + '_ {
        self.callee_positions
            .iter()
            .map(|&p| FuncIndex::new(self.tokens[p as usize] as usize))
    }

    /// Module-defined functions whose address this function takes (`func_addr`, or
    /// a global value naming them), sorted and without repeats. Preemptible functions
    /// are included.
    pub fn address_taken(&self) -> &[FuncIndex] {
        &self.address_taken
    }

    /// Number of reachable instructions walked.
    pub fn instructions(&self) -> u32 {
        self.instructions
    }

    /// Whether this is a [`Self::callees_only`] copy, every token but the callees
    /// dropped.
    pub fn is_callees_only(&self) -> bool {
        self.callees_only
    }

    /// A copy of this encoding with every token but the callees dropped: its
    /// stream is the callee tokens in order, each at its own callee position,
    /// and it has no holes or call sites. What is left orders this function
    /// against another only where the rest of their streams is known to be
    /// equal: the refinement of a class whose members were found equal with
    /// callees read optimistically (the comparator refuses anything else:
    /// `FunctionComparator::compare`). Kept for a candidate once the tree has
    /// grouped it, instead of its whole stream.
    pub fn callees_only(&self) -> FunctionEncoding {
        FunctionEncoding {
            tokens: self
                .callee_positions
                .iter()
                .map(|&p| self.tokens[p as usize])
                .collect(),
            callee_positions: (0..self.callee_positions.len() as u32).collect(),
            holes: Vec::new(),
            call_sites: Vec::new(),
            address_taken: self.address_taken.clone(),
            instructions: self.instructions,
            callees_only: true,
        }
    }

    /// Empties the stream and its side tables, keeping their capacity: a buffer
    /// for the walk to write into.
    fn clear_streams(&mut self) {
        self.tokens.clear();
        self.callee_positions.clear();
        self.holes.clear();
        self.call_sites.clear();
    }

    /// An encoding read back from a summary: the token stream, the positions of its
    /// references to other functions (sorted, each holding the referenced
    /// function's [`FuncIndex`] in the caller's numbering), and its instruction
    /// count. It has no holes or call sites (those serve the similar merge).
    pub fn from_parts(tokens: Vec<u64>, callee_positions: Vec<u32>, instructions: u32) -> Self {
        debug_assert!(callee_positions.windows(2).all(|w| w[0] < w[1]));
        Self {
            tokens,
            callee_positions,
            instructions,
            ..Self::default()
        }
    }
}

/// An immediate that may become a parameter: where its token is, which
/// instruction holds it, its type and what kind of immediate it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Hole {
    /// Position of the immediate's token in [`FunctionEncoding::tokens`].
    pub position: u32,
    /// The `iconst`, `f32const` or `f64const` instruction, or the `load`.
    pub inst: Inst,
    /// The constant's type; for a load offset, the type of the address (`i64`).
    pub ty: Type,
    /// Which immediate it is.
    pub site: HoleSite,
}

/// Which immediate a [`Hole`] is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HoleSite {
    /// The immediate of an `iconst`, `f32const` or `f64const`.
    Constant,
    /// The `Offset32` of a `load` from an `i64` parameter of the entry block (in
    /// wasmtime's code, `vmctx`) whose result is used only as the callee of indirect
    /// calls, or only as a further argument of indirect calls whose callees are such
    /// loads: a call to an imported function, which loads the callee's code pointer
    /// and context from constant offsets of `vmctx`. Only when
    /// [`WalkOptions::callee_load_holes`] is set; the token is the offset
    /// sign-extended to 64 bits. See `CalleeLoads`.
    CalleeLoadOffset,
}

/// A direct call of a module-defined function: where its callee's token is, and
/// the `call` instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// Position of the callee's [`FuncIndex`] token in [`FunctionEncoding::tokens`].
    pub position: u32,
    /// The `call` instruction.
    pub inst: Inst,
}

/// Where the walk writes its tokens: a stored [`FunctionEncoding`], or a sink that
/// also notes where things are (merging by alignment). The walk is the same for
/// all.
pub trait TokenSink {
    /// Appends a token.
    fn push(&mut self, token: u64);
    /// Appends the [`FuncIndex`] of a module-defined function, read through the
    /// equivalence classes by the comparator and skipped by the hash.
    fn push_callee(&mut self, index: u64);
    /// Number of tokens written so far.
    fn position(&self) -> u32;
    /// Appends an immediate that the similar-function merge may turn into a
    /// parameter (an `iconst`, `f32const` or `f64const` immediate, or the offset of
    /// a callee load: [`HoleSite`]). Written like any token unless the sink says
    /// otherwise.
    fn push_hole(&mut self, token: u64, _hole: Hole) {
        self.push(token);
    }
    /// Number of [`Self::push_callee`] calls so far (0 if the sink does not count).
    fn callees_written(&self) -> usize {
        0
    }
    /// Notes that the callee written last is the direct callee of `call` `inst`.
    fn note_call_site(&mut self, _inst: Inst) {}
    /// Notes that the walk starts writing `block` (its parameter count comes next).
    fn note_block(&mut self, _block: Block) {}
    /// Notes that the walk starts writing `inst` (its header token comes next).
    fn note_inst(&mut self, _inst: Inst) {}
    /// Notes that `value` (a result or block parameter) is defined here: its
    /// serial is the current position plus one.
    fn note_definition(&mut self, _value: Value) {}
    /// Writes the user name `name` by reference instead of by content, if the sink
    /// does (the default does not): [`NAME_BY_REFERENCE`], then a token that
    /// stands for `name`. Returns whether it did. A sink that does must do so for
    /// every user name, so that the choice depends on nothing but the sink: for
    /// compile-once (`module/compiled.rs`), where two functions that differ only
    /// in the names their references point to share their compiled code.
    fn user_name_by_reference(&mut self, _name: ir::UserExternalNameRef) -> bool {
        false
    }
    /// Appends a value operand: the serial of its definition.
    fn push_operand(&mut self, serial: u64) {
        self.push(serial);
    }
    /// Whether the walk writes value operands and the types of results and block
    /// parameters. A sink that only hashes may leave them out (its walk then reads
    /// only the instructions themselves); two functions with equal encodings still
    /// get equal hashes, because the walk takes the same steps over both and
    /// writes a subset of the same tokens.
    const OPERANDS: bool = true;
}

impl TokenSink for FunctionEncoding {
    fn push(&mut self, token: u64) {
        self.tokens.push(token);
    }

    fn push_hole(&mut self, token: u64, hole: Hole) {
        self.holes.push(Hole {
            position: self.tokens.len() as u32,
            ..hole
        });
        self.tokens.push(token);
    }

    fn callees_written(&self) -> usize {
        self.callee_positions.len()
    }

    fn note_call_site(&mut self, inst: Inst) {
        if let Some(&position) = self.callee_positions.last() {
            self.call_sites.push(CallSite { position, inst });
        }
    }

    fn push_callee(&mut self, index: u64) {
        self.callee_positions.push(self.tokens.len() as u32);
        self.tokens.push(index);
    }

    fn position(&self) -> u32 {
        self.tokens.len() as u32
    }
}

/// Why a function was not encoded. Such a function is never merged with anything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unsupported {
    /// What the walk could not handle.
    pub reason: UnsupportedReason,
}

impl fmt::Display for Unsupported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.reason.fmt(f)
    }
}

impl std::error::Error for Unsupported {}

/// What the walk of a function could not handle ([`MergeStats::unsupported`]):
/// such a function is never merged with anything. Its `Display` is the message the
/// CLI prints.
///
/// ```
/// use clif_merge::{FunctionSet, Linkage, MergeOptions, merge_functions};
///
/// let clif = "
/// function %f(i32) -> i32 {
/// block0(v0: i32):
///     return v0
/// }
/// ";
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(clif)? {
///     module.push(func, Linkage::Export)?;
/// }
/// let outcome = merge_functions(&module, &MergeOptions::default());
/// for (function, reason) in &outcome.stats.unsupported {
///     println!("{}: {reason}", module.display_name(*function));
/// }
/// assert!(outcome.stats.unsupported.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// [`MergeStats::unsupported`]: crate::MergeStats::unsupported
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnsupportedReason {
    /// The value is used before the instruction or block that defines it, in
    /// the walk's order.
    UsedBeforeDefined(Value),
    /// The function refers to an entity it does not declare.
    Undeclared(AnyEntity),
    /// The function refers to a set of memory flags it does not declare.
    UndeclaredMemFlags,
    /// An external function's name is a user name the function does not declare.
    UndeclaredUserName,
    /// The function's global values are based on each other in a cycle.
    GlobalValueCycle,
    /// A shuffle's mask is not in the function's immediate pool.
    ShuffleMaskMissing,
}

impl fmt::Display for UnsupportedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UsedBeforeDefined(value) => write!(f, "{value} is used before it is defined"),
            Self::Undeclared(entity) => write!(f, "reference to undeclared {entity}"),
            Self::UndeclaredMemFlags => f.write_str("reference to undeclared memory flags"),
            Self::UndeclaredUserName => f.write_str("reference to an undeclared user name"),
            Self::GlobalValueCycle => f.write_str("global values form a cycle"),
            Self::ShuffleMaskMissing => f.write_str("shuffle mask missing from the immediate pool"),
        }
    }
}

fn unsupported<T>(reason: UnsupportedReason) -> Result<T, Unsupported> {
    Err(Unsupported { reason })
}

/// Per-walk numbering state, kept between functions so its maps are reused.
#[derive(Default)]
pub struct WalkScratch {
    values: SecondaryMap<Value, u32>,
    blocks: SecondaryMap<Block, u32>,
    slots: SecondaryMap<StackSlot, u32>,
    dynamic_slots: SecondaryMap<DynamicStackSlot, u32>,
    func_refs: SecondaryMap<FuncRef, Option<Option<FuncIndex>>>,
    mem_flags: SecondaryMap<MemFlags, Option<(u64, u64)>>,
    order: Vec<Block>,
    /// The buffers [`encode_function`] writes into.
    encoding: FunctionEncoding,
    callee_loads: CalleeLoads,
}

impl WalkScratch {
    fn clear(&mut self) {
        self.values.clear();
        self.blocks.clear();
        self.slots.clear();
        self.dynamic_slots.clear();
        self.func_refs.clear();
        self.mem_flags.clear();
        self.order.clear();
        self.callee_loads.clear();
    }
}

/// What the walk needs to know about the merge.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkOptions {
    /// Whether function addresses are significant (`--mode safe`). If so, an address
    /// use names its exact symbol instead of an equivalence class.
    pub addresses_significant: bool,
    /// For summaries of separately compiled modules: a reference the comparator
    /// must match by exact name (a significant address, a preemptible function) is
    /// written like a class reference, as the [`FuncIndex`] of the named function,
    /// after the tag `NAME_EXACT` instead of `NAME_MODULE` (`tokens.rs`). Every user and
    /// test-case name the functions mention must then be defined in the module
    /// (stubs for the undefined ones; see `summary.rs`), so that no name is written
    /// by its module-relative content.
    pub symbols_by_reference: bool,
    /// For the similar-function merge: the offsets of callee loads
    /// (`HoleSite::CalleeLoadOffset`) are written as `Hole`s (the walk first finds
    /// them: `CalleeLoads`). Otherwise every load offset is an ordinary token.
    pub callee_load_holes: bool,
}

impl WalkOptions {
    /// The merge mode [`Self::addresses_significant`] stands for.
    pub fn mode(&self) -> MergeMode {
        if self.addresses_significant {
            MergeMode::Safe
        } else {
            MergeMode::All
        }
    }
}

/// Runs `walk` over the given functions of `module` in parallel
/// ([`crate::ir::parallel`]), keeping their order, with one [`WalkScratch`] per
/// worker.
pub fn walk_in_parallel<T: Send>(
    module: &FunctionSet,
    functions: &[FuncIndex],
    walk: impl Fn(&Function, &mut WalkScratch) -> T + Sync,
) -> Vec<T> {
    module.map_walk(
        functions,
        Reads::Body,
        16,
        WalkScratch::default,
        |scratch, func| walk(func, scratch),
    )
}

/// Walks `func` and returns its encoding. `module` tells which names are defined in
/// the module.
pub fn encode_function(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
) -> Result<FunctionEncoding, Unsupported> {
    encode(func, module, options, scratch, true)
}

/// [`encode_function`] without the tables only the similar-function merge reads
/// ([`FunctionEncoding::holes`] and [`FunctionEncoding::call_sites`] are empty):
/// what the comparator needs, and all the identical merge keeps per candidate.
pub fn encode_for_comparison(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
) -> Result<FunctionEncoding, Unsupported> {
    encode(func, module, options, scratch, false)
}

/// [`encode_for_comparison`] written into `buffer`, whose vectors are cleared and
/// keep their capacity: for an encoding that lives only while it is compared,
/// whose buffer then serves the next function (no copy out, no allocation once
/// the buffer is large enough).
pub fn encode_for_comparison_into(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
    mut buffer: FunctionEncoding,
) -> Result<FunctionEncoding, Unsupported> {
    buffer.clear_streams();
    let (mut out, address_taken, instructions) = walk(func, module, options, scratch, buffer)?;
    out.address_taken = address_taken;
    out.instructions = instructions;
    out.callees_only = false;
    Ok(out)
}

fn encode(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
    similar_tables: bool,
) -> Result<FunctionEncoding, Unsupported> {
    // The stream and its side tables grow in buffers kept between walks and are
    // copied out at their exact sizes: no reallocation as they grow, no slack kept.
    let mut sink = std::mem::take(&mut scratch.encoding);
    sink.clear_streams();
    let (buffers, address_taken, instructions) = walk(func, module, options, scratch, sink)?;
    let out = FunctionEncoding {
        tokens: buffers.tokens.clone(),
        callee_positions: buffers.callee_positions.clone(),
        holes: if similar_tables {
            buffers.holes.clone()
        } else {
            Vec::new()
        },
        call_sites: if similar_tables {
            buffers.call_sites.clone()
        } else {
            Vec::new()
        },
        address_taken,
        instructions,
        callees_only: false,
    };
    scratch.encoding = buffers;
    Ok(out)
}

/// The one walk: writes `func` into `sink`, and returns it with the sorted, deduped
/// functions whose address `func` takes and its number of reachable instructions.
pub(crate) fn walk<S: TokenSink>(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
    sink: S,
) -> Result<(S, Vec<FuncIndex>, u32), Unsupported> {
    scratch.clear();
    // Sized once per function, so that numbering a value or block never grows them.
    scratch.values.resize(func.dfg.num_values());
    scratch.blocks.resize(func.dfg.num_blocks());
    if options.callee_load_holes {
        scratch.callee_loads.find(func);
    }
    let mut walker = Walker {
        func,
        module,
        options,
        scratch,
        out: sink,
        address_taken: Vec::new(),
        instructions: 0,
        used_before_defined: None,
    };
    walker.function()?;
    if let Some(value) = walker.used_before_defined {
        return unsupported(UnsupportedReason::UsedBeforeDefined(value));
    }
    let mut address_taken = walker.address_taken;
    address_taken.sort_unstable();
    address_taken.dedup();
    Ok((walker.out, address_taken, walker.instructions))
}

/// An injective code for a type: its representation, which `Type::index` returns.
pub fn type_code(ty: Type) -> u64 {
    ty.index() as u64
}

struct Walker<'a, S> {
    func: &'a Function,
    module: &'a FunctionSet,
    options: WalkOptions,
    scratch: &'a mut WalkScratch,
    out: S,
    address_taken: Vec<FuncIndex>,
    instructions: u32,
    used_before_defined: Option<Value>,
}

impl<S: TokenSink> Walker<'_, S> {
    fn push(&mut self, token: u64) {
        self.out.push(token);
    }

    fn push_len(&mut self, len: usize) {
        self.push(len as u64);
    }

    fn push_bool(&mut self, b: bool) {
        self.push(u64::from(b));
    }

    fn ty(&mut self, ty: Type) {
        self.push(type_code(ty));
    }

    fn function(&mut self) -> Result<(), Unsupported> {
        let func = self.func;
        self.signature(&func.signature);
        match func.stack_limit {
            None => self.push(ABSENT),
            Some(gv) => {
                self.push(PRESENT);
                self.global_value(gv)?;
            }
        }
        let Some(entry) = func.layout.entry_block() else {
            self.push(ABSENT);
            return Ok(());
        };
        self.push(PRESENT);
        self.block_ref(entry);
        // Blocks are visited in order of discovery, which is a breadth-first walk
        // from the entry in terminator order: every block after its dominators.
        let mut next = 0;
        while next < self.scratch.order.len() {
            let block = self.scratch.order[next];
            next += 1;
            self.block(block)?;
        }
        Ok(())
    }

    fn block(&mut self, block: Block) -> Result<(), Unsupported> {
        let func = self.func;
        let params = func.dfg.block_params(block);
        self.out.note_block(block);
        self.push_len(params.len());
        if S::OPERANDS {
            for &param in params {
                self.ty(func.dfg.value_type(param));
                self.define_value(param)?;
            }
        }
        // `next_inst` rather than `block_insts`: one call per instruction, not an
        // iterator that compares both ends (a block's list ends in `None`).
        let mut next = func.layout.first_inst(block);
        while let Some(inst) = next {
            self.inst(inst)?;
            self.instructions += 1;
            next = func.layout.next_inst(inst);
        }
        self.push(END_OF_BLOCK);
        Ok(())
    }

    /// Numbers a value at its definition.
    fn define_value(&mut self, value: Value) -> Result<(), Unsupported> {
        if self.scratch.values[value] != 0 {
            return unsupported(UnsupportedReason::UsedBeforeDefined(value));
        }
        self.out.note_definition(value);
        self.scratch.values[value] = self.out.position() + 1;
        Ok(())
    }

    /// Writes a use of a value: the serial number of its first appearance.
    ///
    /// The serial is the token position of its definition, which is fixed by the
    /// structure before it, so it is as good as a counter and needs no extra state.
    fn value(&mut self, value: Value) {
        if !S::OPERANDS {
            return;
        }
        // A value with a serial was defined as a result or block parameter, which
        // an alias never is (Cranelift detaches a value before making it an alias),
        // so only a value without one can need resolving.
        let mut serial = self.scratch.values[value];
        if serial == 0 {
            let value = self.func.dfg.resolve_aliases(value);
            serial = self.scratch.values[value];
        }
        if serial == 0 {
            // Used before defined: only in IR the verifier rejects. The walk goes on
            // and the function is reported unsupported at the end.
            self.used_before_defined = Some(value);
            self.out.push_operand(UNDEFINED_VALUE);
        } else {
            self.out.push_operand(u64::from(serial));
        }
    }

    fn values(&mut self, values: &[Value]) {
        self.push_len(values.len());
        if !S::OPERANDS {
            return;
        }
        for &v in values {
            self.value(v);
        }
    }

    /// Writes a reference to a block, discovering it on first sight.
    fn block_ref(&mut self, block: Block) {
        let mut serial = self.scratch.blocks[block];
        if serial == 0 {
            self.scratch.order.push(block);
            serial = self.scratch.order.len() as u32;
            self.scratch.blocks[block] = serial;
        }
        self.push(u64::from(serial));
    }

    fn block_call(&mut self, call: &BlockCall) {
        let pool = &self.func.dfg.value_lists;
        self.block_ref(call.block(pool));
        self.push_len(call.len(pool));
        for arg in call.args(pool) {
            match arg {
                BlockArg::Value(v) => {
                    self.push(BLOCK_ARG_VALUE);
                    self.value(v);
                }
                BlockArg::TryCallRet(i) => {
                    self.push(BLOCK_ARG_TRY_CALL_RET);
                    self.push(u64::from(i));
                }
                BlockArg::TryCallExn(i) => {
                    self.push(BLOCK_ARG_TRY_CALL_EXN);
                    self.push(u64::from(i));
                }
            }
        }
    }

    fn abi_param(&mut self, param: &AbiParam) {
        self.ty(param.value_type);
        match param.purpose {
            ArgumentPurpose::Normal => self.push(PURPOSE_NORMAL),
            ArgumentPurpose::StructArgument(size) => {
                self.push(PURPOSE_STRUCT_ARGUMENT);
                self.push(u64::from(size));
            }
            ArgumentPurpose::StructReturn => self.push(PURPOSE_STRUCT_RETURN),
            ArgumentPurpose::VMContext => self.push(PURPOSE_VMCONTEXT),
        }
        self.push(param.extension as u64);
    }

    fn signature(&mut self, sig: &Signature) {
        self.push(sig.call_conv as u64);
        self.push_len(sig.params.len());
        for p in &sig.params {
            self.abi_param(p);
        }
        self.push_len(sig.returns.len());
        for r in &sig.returns {
            self.abi_param(r);
        }
    }

    fn sig_ref(&mut self, sig: SigRef) -> Result<(), Unsupported> {
        let func = self.func;
        let Some(signature) = func.dfg.signatures.get(sig) else {
            return unsupported(UnsupportedReason::Undeclared(sig.into()));
        };
        self.signature(signature);
        Ok(())
    }

    fn mem_flags(&mut self, flags: MemFlags) -> Result<(), Unsupported> {
        // Computed once per set of flags: loads and stores repeat a few of them.
        let (bits, region) = match self.scratch.mem_flags[flags] {
            Some(tokens) => tokens,
            None => {
                let tokens = self.mem_flags_tokens(flags)?;
                self.scratch.mem_flags[flags] = Some(tokens);
                tokens
            }
        };
        self.push(bits);
        self.push(region);
        Ok(())
    }

    /// The two tokens of a set of memory flags: the flag bits, and the alias region.
    fn mem_flags_tokens(&self, flags: MemFlags) -> Result<(u64, u64), Unsupported> {
        let func = self.func;
        if !func.dfg.mem_flags.is_valid(flags) {
            return unsupported(UnsupportedReason::UndeclaredMemFlags);
        }
        let data = func.dfg.mem_flags[flags];
        let endianness = match data.explicit_endianness() {
            None => ENDIAN_NATIVE,
            Some(Endianness::Little) => ENDIAN_LITTLE,
            Some(Endianness::Big) => ENDIAN_BIG,
        };
        let trap = data.trap_code().map_or(0, |t| u64::from(t.as_raw().get()));
        let bits = endianness
            | u64::from(data.aligned()) << 2
            | u64::from(data.readonly()) << 3
            | u64::from(data.can_move()) << 4
            | u64::from(data.notrap()) << 5
            | trap << 8;
        // Alias regions by their user id: the same id means the same region.
        let region = match data.alias_region() {
            None => NO_ALIAS_REGION,
            Some(region) if func.dfg.alias_regions.is_valid(region) => {
                1 + u64::from(func.dfg.alias_regions[region].user_id)
            }
            Some(region) => return unsupported(UnsupportedReason::Undeclared(region.into())),
        };
        Ok((bits, region))
    }

    /// Writes a symbol reference: a module function by index (remembered for the
    /// comparator), anything else by its name. An address use of a module function
    /// is written by name when addresses are significant. `defined` is the module
    /// function of that name, if any.
    fn name(&mut self, key: SymbolKey<'_>, defined: Option<FuncIndex>, takes_address: bool) {
        if takes_address && let Some(index) = defined {
            self.address_taken.push(index);
        }
        let reference = if takes_address {
            Reference::Address
        } else {
            Reference::Call
        };
        let mode = self.options.mode();
        match defined {
            Some(index)
                if target_match(reference, self.module.get(index).linkage, mode)
                    == TargetMatch::ByClass =>
            {
                self.push(NAME_MODULE);
                self.out.push_callee(index.index() as u64);
            }
            Some(index) if self.options.symbols_by_reference => {
                self.push(NAME_EXACT);
                self.out.push_callee(index.index() as u64);
            }
            // Only the exact same name is known to be the same (`target_match`).
            _ => {
                self.push(NAME_EXTERNAL);
                self.symbol(key);
            }
        }
    }

    /// Writes `name` by reference if it is a user name and the sink writes those
    /// so ([`TokenSink::user_name_by_reference`]); returns whether it did.
    fn by_reference(&mut self, name: &ir::ExternalName) -> bool {
        match name {
            ir::ExternalName::User(r) => self.out.user_name_by_reference(*r),
            _ => false,
        }
    }

    /// Writes a symbol's name by content: no table of ids, so the stream of a
    /// function does not depend on which functions were walked before it.
    fn symbol(&mut self, key: SymbolKey<'_>) {
        match key {
            SymbolKey::User { namespace, index } => {
                self.push(SYMBOL_USER);
                self.push(u64::from(namespace));
                self.push(u64::from(index));
            }
            SymbolKey::Testcase(raw) => {
                self.push(SYMBOL_TESTCASE);
                self.constant_bytes(raw);
            }
            SymbolKey::LibCall(libcall) => {
                self.push(SYMBOL_LIBCALL);
                self.push(libcall as u64);
            }
            SymbolKey::Known(known) => {
                self.push(SYMBOL_KNOWN);
                self.push(known as u64);
            }
        }
    }

    fn func_ref(&mut self, func_ref: FuncRef, takes_address: bool) -> Result<(), Unsupported> {
        let func = self.func;
        let Some(data) = func.dfg.ext_funcs.get(func_ref) else {
            return unsupported(UnsupportedReason::Undeclared(func_ref.into()));
        };
        let Some(key) = SymbolKey::of_external(func, &data.name) else {
            return unsupported(UnsupportedReason::UndeclaredUserName);
        };
        if self.by_reference(&data.name) {
            self.sig_ref(data.signature)?;
            self.push_bool(data.colocated);
            self.push_bool(data.patchable);
            return Ok(());
        }
        // Looked up once per import: calls repeat the same few imports.
        let defined = match self.scratch.func_refs[func_ref] {
            Some(defined) => defined,
            None => {
                let defined = self.module.lookup_key(key);
                self.scratch.func_refs[func_ref] = Some(defined);
                defined
            }
        };
        self.name(key, defined, takes_address);
        self.sig_ref(data.signature)?;
        self.push_bool(data.colocated);
        self.push_bool(data.patchable);
        Ok(())
    }

    /// Writes a global value by content, following its chain of bases.
    fn global_value(&mut self, mut gv: GlobalValue) -> Result<(), Unsupported> {
        let func = self.func;
        for _ in 0..=func.global_values.len() {
            let Some(data) = func.global_values.get(gv) else {
                return unsupported(UnsupportedReason::Undeclared(gv.into()));
            };
            match data {
                GlobalValueData::VMContext => {
                    self.push(GLOBAL_VMCONTEXT);
                    return Ok(());
                }
                GlobalValueData::Load {
                    base,
                    offset,
                    global_type,
                    flags,
                } => {
                    self.push(GLOBAL_LOAD);
                    self.offset(*offset);
                    self.ty(*global_type);
                    self.mem_flags(*flags)?;
                    gv = *base;
                }
                GlobalValueData::IAddImm {
                    base,
                    offset,
                    global_type,
                } => {
                    self.push(GLOBAL_IADD_IMM);
                    self.push(offset.bits() as u64);
                    self.ty(*global_type);
                    gv = *base;
                }
                GlobalValueData::Symbol {
                    name,
                    offset,
                    colocated,
                    tls,
                } => {
                    self.push(GLOBAL_SYMBOL);
                    let Some(key) = SymbolKey::of_external(func, name) else {
                        return unsupported(UnsupportedReason::UndeclaredUserName);
                    };
                    if !self.by_reference(name) {
                        self.name(key, self.module.lookup_key(key), true);
                    }
                    self.push(offset.bits() as u64);
                    self.push_bool(*colocated);
                    self.push_bool(*tls);
                    return Ok(());
                }
                GlobalValueData::DynScaleTargetConst { vector_type } => {
                    self.push(GLOBAL_DYN_SCALE);
                    self.ty(*vector_type);
                    return Ok(());
                }
            }
        }
        unsupported(UnsupportedReason::GlobalValueCycle)
    }

    fn offset(&mut self, offset: Offset32) {
        self.push(i64::from(offset) as u64);
    }

    /// Writes a stack slot: its content on first use, its serial afterwards, so that
    /// two uses of one slot differ from one use each of two equal slots.
    fn stack_slot(&mut self, slot: StackSlot) -> Result<(), Unsupported> {
        let serial = self.scratch.slots[slot];
        if serial != 0 {
            self.push(SLOT_SEEN);
            self.push(u64::from(serial));
            return Ok(());
        }
        // Like values, a slot's serial is the token position of its first use.
        self.scratch.slots[slot] = self.out.position() + 1;
        let func = self.func;
        let Some(data) = func.sized_stack_slots.get(slot) else {
            return unsupported(UnsupportedReason::Undeclared(slot.into()));
        };
        self.push(SLOT_FIRST_USE);
        self.push(data.kind as u64);
        self.push(u64::from(data.size));
        self.push(u64::from(data.align_shift));
        match data.key {
            None => self.push(ABSENT),
            Some(key) => {
                self.push(PRESENT);
                self.push(key.bits());
            }
        }
        Ok(())
    }

    fn dynamic_stack_slot(&mut self, slot: DynamicStackSlot) -> Result<(), Unsupported> {
        let serial = self.scratch.dynamic_slots[slot];
        if serial != 0 {
            self.push(SLOT_SEEN);
            self.push(u64::from(serial));
            return Ok(());
        }
        self.scratch.dynamic_slots[slot] = self.out.position() + 1;
        let func = self.func;
        let Some(data) = func.dynamic_stack_slots.get(slot) else {
            return unsupported(UnsupportedReason::Undeclared(slot.into()));
        };
        let Some(dyn_ty) = func.dfg.dynamic_types.get(data.dyn_ty) else {
            return unsupported(UnsupportedReason::Undeclared(data.dyn_ty.into()));
        };
        self.push(SLOT_FIRST_USE);
        self.push(data.kind as u64);
        self.ty(dyn_ty.base_vector_ty);
        self.global_value(dyn_ty.dynamic_scale)
    }

    fn constant_bytes(&mut self, bytes: &[u8]) {
        self.push_len(bytes.len());
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.push(u64::from_le_bytes(word));
        }
    }

    fn exception_table(&mut self, table: ExceptionTable) -> Result<(), Unsupported> {
        let func = self.func;
        let Some(data) = func.dfg.exception_tables.get(table) else {
            return unsupported(UnsupportedReason::Undeclared(table.into()));
        };
        self.sig_ref(data.signature())?;
        self.block_call(data.normal_return());
        self.push_len(data.items().count());
        for item in data.items() {
            match item {
                ExceptionTableItem::Tag(tag, call) => {
                    self.push(EXCEPTION_TAG);
                    self.push(tag.index() as u64);
                    self.block_call(&call);
                }
                ExceptionTableItem::Default(call) => {
                    self.push(EXCEPTION_DEFAULT);
                    self.block_call(&call);
                }
                ExceptionTableItem::Context(v) => {
                    self.push(EXCEPTION_CONTEXT);
                    self.value(v);
                }
            }
        }
        Ok(())
    }

    fn inst(&mut self, inst: Inst) -> Result<(), Unsupported> {
        let func = self.func;
        let dfg = &func.dfg;
        let data = &dfg.insts[inst];
        // The controlling type is not written: it is the type of the first result or
        // of the type-variable operand, and both are written (an operand's type at
        // its definition, which every use names by serial; uses before definitions
        // make the function unsupported).
        let opcode = data.opcode() as u64;
        self.out.note_inst(inst);
        if !S::OPERANDS {
            self.push(opcode);
            // Only `iconst` needs its result type: to read its immediate.
            let result_type = match data {
                InstructionData::UnaryImm { .. } => {
                    dfg.inst_results(inst).first().map(|&r| dfg.value_type(r))
                }
                _ => None,
            };
            return self.operands(inst, data, result_type);
        }
        // One header token: the opcode, the number of results and whether a user
        // stack map follows (`instruction_header` in `tokens.rs`).
        let results = dfg.inst_results(inst);
        let stack_map = dfg.user_stack_map_entries(inst);
        self.push(instruction_header(
            opcode,
            results.len(),
            stack_map.is_some(),
        ));
        let result_type = results.first().map(|&r| dfg.value_type(r));
        self.operands(inst, data, result_type)?;
        for (i, &result) in results.iter().enumerate() {
            // The first result's type was read above.
            let ty = match result_type {
                Some(ty) if i == 0 => ty,
                _ => dfg.value_type(result),
            };
            self.ty(ty);
            self.define_value(result)?;
        }
        if let Some(entries) = stack_map {
            self.push_len(entries.len());
            for entry in entries {
                self.ty(entry.ty);
                self.stack_slot(entry.slot)?;
                self.push(u64::from(entry.offset));
            }
        }
        Ok(())
    }

    /// Writes the format-specific part of an instruction: its parts as
    /// [`instruction::visit`] hands them over. The opcode, written before,
    /// determines the format, so no format tag is needed.
    fn operands(
        &mut self,
        inst: Inst,
        data: &InstructionData,
        result_type: Option<Type>,
    ) -> Result<(), Unsupported> {
        let func = self.func;
        let mut parts = Parts {
            walker: self,
            inst,
            result_type,
        };
        instruction::visit(data, &func.dfg.value_lists, &mut parts)
    }

    /// Writes a hole: a constant or offset the similar merge may make a parameter.
    fn hole(&mut self, inst: Inst, token: u64, ty: Type, site: HoleSite) {
        let hole = Hole {
            position: 0,
            inst,
            ty,
            site,
        };
        self.out.push_hole(token, hole);
    }
}

/// The walker writing the parts of one instruction ([`Walker::operands`]).
struct Parts<'w, 'a, S> {
    walker: &'w mut Walker<'a, S>,
    inst: Inst,
    /// The type of the instruction's first result: an `iconst` immediate's width.
    result_type: Option<Type>,
}

impl<S: TokenSink> InstructionVisitor for Parts<'_, '_, S> {
    type Error = Unsupported;

    fn value(&mut self, value: Value) -> Result<(), Unsupported> {
        self.walker.value(value);
        Ok(())
    }

    fn values(&mut self, values: &[Value]) -> Result<(), Unsupported> {
        self.walker.values(values);
        Ok(())
    }

    fn immediate(&mut self, immediate: Immediate) -> Result<(), Unsupported> {
        let (walker, inst) = (&mut *self.walker, self.inst);
        match immediate {
            Immediate::LoadOffset { offset, .. }
                if walker.options.callee_load_holes
                    && walker.scratch.callee_loads.contains(inst) =>
            {
                let token = i64::from(offset) as u64;
                walker.hole(inst, token, types::I64, HoleSite::CalleeLoadOffset);
            }
            _ if immediate.is_constant() => {
                let (token, ty) = match immediate {
                    Immediate::Int(imm) => {
                        // `iconst.i32 -1` and `iconst.i32 0xffffffff` are the same
                        // value: only the bits of the result type count.
                        let bits = imm.bits() as u64;
                        let masked = match self.result_type {
                            Some(ty) if ty.is_int() && ty.bits() < 64 => {
                                bits & ((1u64 << ty.bits()) - 1)
                            }
                            _ => bits,
                        };
                        (masked, self.result_type.unwrap_or(types::INVALID))
                    }
                    Immediate::F32(_) => (immediate.word(), types::F32),
                    _ => (immediate.word(), types::F64),
                };
                walker.hole(inst, token, ty, HoleSite::Constant);
            }
            _ => walker.push(immediate.word()),
        }
        Ok(())
    }

    fn mem_flags(&mut self, flags: MemFlags) -> Result<(), Unsupported> {
        self.walker.mem_flags(flags)
    }

    fn block_call(&mut self, call: &BlockCall) -> Result<(), Unsupported> {
        self.walker.block_call(call);
        Ok(())
    }

    fn jump_table(&mut self, table: JumpTable) -> Result<(), Unsupported> {
        let walker = &mut *self.walker;
        let func = walker.func;
        let Some(table) = func.dfg.jump_tables.get(table) else {
            return unsupported(UnsupportedReason::Undeclared(table.into()));
        };
        let branches = table.all_branches();
        walker.push_len(branches.len());
        for call in branches {
            walker.block_call(call);
        }
        Ok(())
    }

    fn handler_block(&mut self, block: Block) -> Result<(), Unsupported> {
        self.walker.block_ref(block);
        Ok(())
    }

    fn function(&mut self, func_ref: FuncRef, use_: FunctionUse) -> Result<(), Unsupported> {
        let walker = &mut *self.walker;
        if use_ == FunctionUse::Address {
            return walker.func_ref(func_ref, true);
        }
        let callees = walker.out.callees_written();
        walker.func_ref(func_ref, false)?;
        // A patchable call keeps its callee: the embedder patches that call site,
        // which an indirect call through a parameter would not be.
        let patchable = walker
            .func
            .dfg
            .ext_funcs
            .get(func_ref)
            .is_some_and(|d| d.patchable);
        if use_ == FunctionUse::Call && walker.out.callees_written() > callees && !patchable {
            walker.out.note_call_site(self.inst);
        }
        Ok(())
    }

    fn signature(&mut self, sig: SigRef) -> Result<(), Unsupported> {
        self.walker.sig_ref(sig)
    }

    fn exception_table(&mut self, table: ExceptionTable) -> Result<(), Unsupported> {
        self.walker.exception_table(table)
    }

    fn stack_slot(&mut self, slot: StackSlot) -> Result<(), Unsupported> {
        self.walker.stack_slot(slot)
    }

    fn dynamic_stack_slot(&mut self, slot: DynamicStackSlot) -> Result<(), Unsupported> {
        self.walker.dynamic_stack_slot(slot)
    }

    fn global_value(&mut self, gv: GlobalValue) -> Result<(), Unsupported> {
        self.walker.global_value(gv)
    }

    fn constant(&mut self, constant: Constant) -> Result<(), Unsupported> {
        let walker = &mut *self.walker;
        // `ConstantPool::get` panics on an unknown handle; look it up instead.
        let constants = &walker.func.dfg.constants;
        let Some((_, data)) = constants.iter().find(|(h, _)| **h == constant) else {
            return unsupported(UnsupportedReason::Undeclared(constant.into()));
        };
        walker.constant_bytes(data.as_slice());
        Ok(())
    }

    fn shuffle_mask(&mut self, mask: ir::Immediate) -> Result<(), Unsupported> {
        let walker = &mut *self.walker;
        let Some(mask) = walker.func.dfg.immediates.get(mask) else {
            return unsupported(UnsupportedReason::ShuffleMaskMissing);
        };
        walker.constant_bytes(mask.as_slice());
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn type_codes_are_distinct() {
        let mut all = super::super::tokens::every_type();
        all.push(types::INVALID);
        all.sort_by_key(|t| type_code(*t));
        all.dedup();
        let mut codes: Vec<u64> = all.iter().map(|t| type_code(*t)).collect();
        let n = codes.len();
        codes.dedup();
        assert_eq!(codes.len(), n, "two distinct types share a code");
    }
}
