//! Merging by sequence alignment: pairs of functions of one signature merged
//! whole, whatever their block structures and whichever values their
//! instructions read (SalSSA, PLDI 2020, on HyFM's block pairing, LCTES 2021).
//! The last round of merging by alignment, off by default
//! ([`SimilarOptions::align_sequence`](super::SimilarOptions::align_sequence)).
//!
//! Every other kind of merging by alignment requires aligned instructions to
//! read the same values (an operand names the definition at the same place).
//! Here two instructions align when they are equal but for their value
//! operands, and an operand that differs is chosen by `select` on the selector.
//!
//! # Phases
//!
//! 1. **Candidates** ([`find_sequence_pairs`]). The functions left by the other
//!    rounds are bucketed by signature and sorted by size, largest first; each
//!    is compared with the next [`WINDOW`] of at least half its size by the
//!    overlap of their instruction shapes (opcode and controlling type, as a
//!    multiset), and the [`ATTEMPTS`] best, sharing at least
//!    [`MIN_OVERLAP_PERCENT`] of the larger one's shapes, are aligned.
//! 2. **Keys** ([`Keyed`]). Each instruction but the terminators is imported
//!    into the merged body's entities (callees, signatures, memory flags,
//!    constants by content; stack slots by number) with its values left out,
//!    and hashed with its controlling type and operand types.
//! 3. **Block pairing** ([`pair_blocks`]). The two layouts' blocks are aligned
//!    (Needleman-Wunsch, each pair scored by the keys the two blocks share);
//!    paired blocks have the same parameter types, and the entry blocks pair.
//! 4. **Instruction alignment** ([`align_insts`]). The keys of each paired
//!    block are aligned by their longest common subsequence.
//! 5. **Code generation** ([`build_sequence_body`]). The merged body is written
//!    with `cranelift-frontend`'s SSA builder: every value of either member is
//!    a variable (an aligned instruction's results and a paired block's
//!    parameters are one variable for both), so a value one member defines
//!    and uses after the members' paths have joined reaches its use through
//!    block parameters the builder adds.
//!
//! # Why the merged body computes what each member computed
//!
//! The merged body takes the members' parameters and a selector (`0` runs the
//! first, `1` the second). In a paired block, each run of instructions only
//! one member has is an arm behind a branch on the selector, and the arms
//! rejoin; a paired block whose terminators differ (in anything but value
//! operands, their targets compared as merged blocks) branches on the selector
//! to each member's terminator. An unpaired block is a target only of its own
//! member's terminators. So, run as member *k* (the selector is a parameter,
//! constant for a call), the merged body executes exactly *k*'s instructions,
//! aligned or *k*'s own, in *k*'s order, with *k*'s immediates, callees, flags
//! and slots (aligned instructions are equal but for value operands, checked
//! in full when built, not by their hash). Each operand reads the variable of
//! *k*'s value: one both members share, or a `select` on the selector of the
//! two members' variables. A variable holds the value of the last definition
//! executed on the path (the SSA builder's contract), and *k*'s path passes
//! *k*'s definition before each of *k*'s uses as in *k*, so it reads what *k*
//! read; where a variable has no definition on a path (the other member's),
//! the builder reads a zero that only the other member's `select` arms and
//! block arguments ever see. Stack slot `n` of the merged body is as large and
//! as aligned as both members' slot `n`, which only one member's code uses in
//! a call. A load the other member could hoist (`can_move`) stays in place
//! when only one member has it: its flag is cleared, as its address may be the
//! other member's placeholder. Cranelift's verifier checks every merged body.

use super::align::blocks::overlap;
use super::splice::NotSpliced;
use crate::ir::{FuncIndex, FunctionSet, parallel, reads_machine_state};
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::instructions::InstructionMapper;
use cranelift_codegen::ir::{
    self, AbiParam, Block, BlockCall, ExtFuncData, ExternalName, FuncRef, Function, Inst,
    InstBuilder, InstBuilderBase, InstructionData, Opcode, SigRef, StackSlot, Type, UserFuncName,
    Value, ValueList, types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_codegen::packed_option::ReservedValue;
use cranelift_codegen::settings;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use std::hash::{Hash, Hasher};

/// How many functions after a function in its size-sorted bucket are compared
/// with it by shape overlap.
pub const WINDOW: usize = 32;

/// How many of those, best overlap first, are aligned with it.
pub const ATTEMPTS: usize = 3;

/// A candidate shares at least this percentage of the larger function's
/// instruction shapes.
pub const MIN_OVERLAP_PERCENT: usize = 50;

/// The block pairing's and each block's instruction alignment's table is at
/// most this many cells; larger blocks align only their common prefix and
/// suffix.
const MAX_CELLS: usize = 1 << 22;

/// The value a member's instruction reads where its operands are left out
/// (the reserved value cannot be a block argument): the caller writes the
/// operands.
fn placeholder() -> Value {
    Value::from_u32(0)
}

/// How a pair aligns: the merged body's blocks in order, each with the steps
/// of its instructions (the terminators apart).
#[derive(Clone, Debug)]
pub(crate) struct SequenceAlignment {
    /// The second member.
    pub(crate) second: FuncIndex,
    /// The merged body's blocks, in layout order.
    blocks: Vec<MergedBlock>,
}

impl SequenceAlignment {
    /// Whether the pair might pay, counted in instructions before building
    /// it (HyFM's first tier): the instructions the two share must outweigh
    /// a branch and two jumps per run of instructions only one has, an
    /// unpaired block's jump, and the entry points' calls. Optimistic: the
    /// `select`s and the values carried through block parameters are not
    /// counted.
    fn promising(&self) -> bool {
        let (mut shared, mut overhead) = (0usize, 2 * ENTRY_POINT);
        for block in &self.blocks {
            match block {
                MergedBlock::Paired { steps, .. } => {
                    let mut in_run = false;
                    for step in steps {
                        let one_sided = !matches!(step, Step::Both(..));
                        if one_sided && !in_run {
                            overhead += RUN;
                        }
                        in_run = one_sided;
                        shared += usize::from(!one_sided);
                    }
                }
                MergedBlock::First(_) | MergedBlock::Second(_) => overhead += 1,
            }
        }
        shared > overhead
    }
}

/// What a run of instructions only one member has adds, in instructions: a
/// branch on the selector and the arms' jumps.
const RUN: usize = 3;

/// What an entry point takes, in instructions (a constant and a call).
const ENTRY_POINT: usize = 3;

/// A block of the merged body.
#[derive(Clone, Debug)]
enum MergedBlock {
    /// A block of each member, their instructions aligned.
    Paired {
        first: Block,
        second: Block,
        steps: Vec<Step>,
    },
    /// A block only the first member has.
    First(Block),
    /// A block only the second member has.
    Second(Block),
}

/// One step of a paired block: indices into the two blocks' instructions
/// (terminators apart).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Step {
    Both(usize, usize),
    First(usize),
    Second(usize),
}

/// Which member.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Member {
    First,
    Second,
}

/// Entities imported into the merged body by content, shared by both members
/// so that equal entities get equal handles.
#[derive(Default)]
struct Imports {
    signatures: FxHashMap<ir::Signature, SigRef>,
    functions: FxHashMap<(ExternalName, SigRef, bool, bool), FuncRef>,
    immediates: FxHashMap<ir::ConstantData, ir::Immediate>,
}

/// Maps one member's instructions into the merged body: entities imported by
/// content, blocks by `blocks` (once paired), values left out
/// ([`placeholder`]).
struct Importer<'a> {
    merged: &'a mut Function,
    source: &'a Function,
    imports: &'a mut Imports,
    blocks: Option<&'a SecondaryMap<Block, Option<Block>>>,
    /// Whether `can_move` is cleared from memory flags (an instruction only
    /// this member runs).
    pinned: bool,
    refused: Option<&'static str>,
}

impl Importer<'_> {
    fn refuse(&mut self, what: &'static str) {
        self.refused.get_or_insert(what);
    }

    fn import(&mut self, inst: Inst) -> Result<InstructionData, NotSpliced> {
        let data = self.source.dfg.insts[inst].map(&mut *self);
        match self.refused {
            Some(what) => Err(NotSpliced(format!("sequence: cannot copy {what}"))),
            None => Ok(data),
        }
    }
}

impl InstructionMapper for Importer<'_> {
    fn map_value(&mut self, _value: Value) -> Value {
        placeholder()
    }

    fn map_value_list(&mut self, value_list: ValueList) -> ValueList {
        let mut list = ValueList::new();
        for _ in value_list.as_slice(&self.source.dfg.value_lists) {
            list.push(placeholder(), &mut self.merged.dfg.value_lists);
        }
        list
    }

    fn map_global_value(&mut self, global_value: ir::GlobalValue) -> ir::GlobalValue {
        self.refuse("a global value");
        global_value
    }

    fn map_jump_table(&mut self, jump_table: ir::JumpTable) -> ir::JumpTable {
        let table = self.source.dfg.jump_tables[jump_table].clone();
        let mut branches = table
            .all_branches()
            .iter()
            .map(|&call| self.map_block_call(call));
        let Some(default) = branches.next() else {
            self.refuse("a jump table without a default");
            return jump_table;
        };
        let rest: Vec<BlockCall> = branches.collect();
        self.merged
            .dfg
            .jump_tables
            .push(ir::JumpTableData::new(default, &rest))
    }

    fn map_exception_table(&mut self, exception_table: ir::ExceptionTable) -> ir::ExceptionTable {
        self.refuse("an exception table");
        exception_table
    }

    fn map_block_call(&mut self, block_call: BlockCall) -> BlockCall {
        let pool = &self.source.dfg.value_lists;
        let target = block_call.block(pool);
        let mapped = self.blocks.and_then(|blocks| blocks[target]);
        let Some(block) = mapped else {
            self.refuse("a branch");
            return block_call;
        };
        let mut args = Vec::new();
        for arg in block_call.args(pool) {
            match arg {
                ir::BlockArg::Value(_) => args.push(ir::BlockArg::Value(placeholder())),
                _ => self.refuse("a block argument that is not a value"),
            }
        }
        BlockCall::new(block, args, &mut self.merged.dfg.value_lists)
    }

    fn map_block(&mut self, block: Block) -> Block {
        self.refuse("a block");
        block
    }

    fn map_func_ref(&mut self, func_ref: FuncRef) -> FuncRef {
        let data = &self.source.dfg.ext_funcs[func_ref];
        let name = match &data.name {
            ExternalName::User(r) => {
                let user = self.source.params.user_named_funcs()[*r].clone();
                ExternalName::User(self.merged.declare_imported_user_function(user))
            }
            other => other.clone(),
        };
        let (colocated, patchable) = (data.colocated, data.patchable);
        let signature = self.map_sig_ref(data.signature);
        let key = (name, signature, colocated, patchable);
        if let Some(&mapped) = self.imports.functions.get(&key) {
            return mapped;
        }
        let mapped = self.merged.import_function(ExtFuncData {
            name: key.0.clone(),
            signature,
            colocated,
            patchable,
        });
        self.imports.functions.insert(key, mapped);
        mapped
    }

    fn map_sig_ref(&mut self, sig_ref: SigRef) -> SigRef {
        let signature = &self.source.dfg.signatures[sig_ref];
        if let Some(&mapped) = self.imports.signatures.get(signature) {
            return mapped;
        }
        let mapped = self.merged.import_signature(signature.clone());
        self.imports.signatures.insert(signature.clone(), mapped);
        mapped
    }

    fn map_stack_slot(&mut self, stack_slot: StackSlot) -> StackSlot {
        // The merged body's slots are numbered as both members' (`merged_slots`).
        stack_slot
    }

    fn map_dynamic_stack_slot(&mut self, slot: ir::DynamicStackSlot) -> ir::DynamicStackSlot {
        self.refuse("a dynamic stack slot");
        slot
    }

    fn map_constant(&mut self, constant: ir::Constant) -> ir::Constant {
        let data = self.source.dfg.constants.get(constant).clone();
        self.merged.dfg.constants.insert(data)
    }

    fn map_immediate(&mut self, immediate: ir::Immediate) -> ir::Immediate {
        let data = self.source.dfg.immediates[immediate].clone();
        if let Some(&mapped) = self.imports.immediates.get(&data) {
            return mapped;
        }
        let mapped = self.merged.dfg.immediates.push(data.clone());
        self.imports.immediates.insert(data, mapped);
        mapped
    }

    fn map_mem_flags(&mut self, flags: ir::MemFlags) -> ir::MemFlags {
        let mut data = self.source.dfg.mem_flags[flags];
        if let Some(region) = data.alias_region() {
            let region_data = self.source.dfg.alias_regions[region].clone();
            let mapped = self.merged.dfg.alias_regions.insert(region_data.clone());
            // Regions are deduplicated by their user id alone: two members'
            // regions of one id must be the same region.
            if self.merged.dfg.alias_regions[mapped] != region_data {
                self.refuse("alias regions of one id that differ");
            }
            data.set_alias_region(Some(mapped));
        }
        if self.pinned && data.can_move() {
            match without_can_move(data) {
                Some(pinned) => data = pinned,
                None => self.refuse("memory flags whose can_move cannot be cleared"),
            }
        }
        match self.merged.dfg.mem_flags.insert(data) {
            Ok(mapped) => mapped,
            Err(_) => {
                self.refuse("more memory flags than a function can hold");
                flags
            }
        }
    }
}

/// `data` without `can_move`: its flags set again by name but that one,
/// checked to differ from `data` in nothing else.
fn without_can_move(data: ir::MemFlagsData) -> Option<ir::MemFlagsData> {
    let mut pinned = ir::MemFlagsData::new().with_alias_region(data.alias_region());
    let text = data.with_alias_region(None).to_string();
    for name in text.split_whitespace().filter(|&n| n != "can_move") {
        if !pinned.set_by_name(name).ok()? {
            return None;
        }
    }
    (pinned.with_can_move() == data && !pinned.can_move()).then_some(pinned)
}

/// One block of [`Keyed`]: the block, its instructions but the terminator
/// with their keys, and its terminator.
type KeyedBlock = (Block, Vec<(Inst, u64)>, Inst);

/// One member's instructions, imported with their keys.
struct Keyed {
    /// Per block in layout order.
    blocks: Vec<KeyedBlock>,
}

impl Keyed {
    fn new(
        merged: &mut Function,
        imports: &mut Imports,
        source: &Function,
    ) -> Result<Self, NotSpliced> {
        let mut blocks = Vec::new();
        for block in source.layout.blocks() {
            let Some(terminator) = source.layout.last_inst(block) else {
                return Err(NotSpliced("sequence: an empty block".into()));
            };
            let mut insts = Vec::new();
            for inst in source.layout.block_insts(block) {
                if inst == terminator {
                    break;
                }
                let mut importer = Importer {
                    merged: &mut *merged,
                    source,
                    imports: &mut *imports,
                    blocks: None,
                    pinned: false,
                    refused: None,
                };
                let data = importer.import(inst)?;
                let mut hasher = FxHasher::default();
                // Constants of one type align whatever their values
                // (`Writer::copy_both` chooses the value by `select`).
                match data.opcode() {
                    opcode if is_constant(opcode) => opcode.hash(&mut hasher),
                    _ => data.hash(&mut hasher, &merged.dfg.value_lists),
                }
                source.dfg.ctrl_typevar(inst).hash(&mut hasher);
                for v in source.dfg.inst_values(inst) {
                    source.dfg.value_type(v).hash(&mut hasher);
                }
                insts.push((inst, hasher.finish()));
            }
            blocks.push((block, insts, terminator));
        }
        Ok(Self { blocks })
    }
}

/// Aligns `first` with `second` (of `second_index`); `None` when they cannot
/// be merged this way (signatures, slots or entities), or share no
/// instruction.
pub(crate) fn align_sequences(
    first: &Function,
    second: &Function,
    second_index: FuncIndex,
) -> Result<SequenceAlignment, NotSpliced> {
    if first.signature != second.signature {
        return Err(NotSpliced("sequence: signatures differ".into()));
    }
    let mut scratch = Function::new();
    let mut imports = Imports::default();
    let keyed_first = Keyed::new(&mut scratch, &mut imports, first)?;
    let keyed_second = Keyed::new(&mut scratch, &mut imports, second)?;
    let blocks = pair_blocks(first, second, &keyed_first, &keyed_second)?;
    let merged = blocks
        .into_iter()
        .map(|pairing| match pairing {
            Pairing::Both(i, j) => {
                let (bf, kf, _) = &keyed_first.blocks[i];
                let (bg, kg, _) = &keyed_second.blocks[j];
                let steps = align_insts(kf, kg);
                MergedBlock::Paired {
                    first: *bf,
                    second: *bg,
                    steps,
                }
            }
            Pairing::First(i) => MergedBlock::First(keyed_first.blocks[i].0),
            Pairing::Second(j) => MergedBlock::Second(keyed_second.blocks[j].0),
        })
        .collect();
    Ok(SequenceAlignment {
        second: second_index,
        blocks: merged,
    })
}

/// A step of the block pairing: indices into the layouts' blocks.
#[derive(Copy, Clone, Debug)]
enum Pairing {
    Both(usize, usize),
    First(usize),
    Second(usize),
}

/// The blocks of `first` and `second` aligned (Needleman-Wunsch without gap
/// costs, maximizing the keys paired blocks share): paired blocks have the
/// same parameter types; the entry blocks pair.
fn pair_blocks(
    first: &Function,
    second: &Function,
    kf: &Keyed,
    kg: &Keyed,
) -> Result<Vec<Pairing>, NotSpliced> {
    let (n, m) = (kf.blocks.len(), kg.blocks.len());
    if n == 0 || m == 0 {
        return Err(NotSpliced("sequence: a function without blocks".into()));
    }
    if n.saturating_mul(m) > MAX_CELLS {
        return Err(NotSpliced("sequence: too many blocks to pair".into()));
    }
    let param_types = |func: &Function, block: Block| -> Vec<Type> {
        func.dfg
            .block_params(block)
            .iter()
            .map(|&p| func.dfg.value_type(p))
            .collect()
    };
    let types_f: Vec<Vec<Type>> = kf.blocks.iter().map(|b| param_types(first, b.0)).collect();
    let types_g: Vec<Vec<Type>> = kg.blocks.iter().map(|b| param_types(second, b.0)).collect();
    let sorted = |keyed: &Keyed| -> Vec<Vec<u64>> {
        keyed
            .blocks
            .iter()
            .map(|(_, insts, _)| {
                let mut keys: Vec<u64> = insts.iter().map(|&(_, k)| k).collect();
                keys.sort_unstable();
                keys
            })
            .collect()
    };
    let (sf, sg) = (sorted(kf), sorted(kg));
    // The entry blocks pair; the rest are aligned. Each paired block scores
    // one more than the keys the two share, so that blocks of the same
    // parameter types pair rather than stay apart.
    let score = |i: usize, j: usize| -> Option<u64> {
        (types_f[i] == types_g[j]).then(|| 1 + overlap(&sf[i], &sg[j]) as u64)
    };
    if score(0, 0).is_none() {
        return Err(NotSpliced("sequence: entry blocks differ".into()));
    }
    let (rows, cols) = (n - 1, m - 1);
    let width = cols + 1;
    let mut table = vec![0u64; (rows + 1) * width];
    for i in 1..=rows {
        for j in 1..=cols {
            let mut best = table[(i - 1) * width + j].max(table[i * width + j - 1]);
            if let Some(s) = score(i, j) {
                best = best.max(table[(i - 1) * width + j - 1] + s);
            }
            table[i * width + j] = best;
        }
    }
    let mut steps = Vec::with_capacity(rows + cols + 1);
    let (mut i, mut j) = (rows, cols);
    while i > 0 || j > 0 {
        let here = table[i * width + j];
        let diagonal = (i > 0 && j > 0)
            .then(|| score(i, j))
            .flatten()
            .is_some_and(|s| here == table[(i - 1) * width + j - 1] + s);
        if diagonal {
            steps.push(Pairing::Both(i, j));
            i -= 1;
            j -= 1;
            continue;
        }
        if i > 0 && here == table[(i - 1) * width + j] {
            steps.push(Pairing::First(i));
            i -= 1;
        } else {
            steps.push(Pairing::Second(j));
            j -= 1;
        }
    }
    steps.push(Pairing::Both(0, 0));
    steps.reverse();
    Ok(steps)
}

/// The instructions of two paired blocks aligned by the longest common
/// subsequence of their keys; a block pair too large for the table aligns
/// its common prefix and suffix only.
fn align_insts(a: &[(Inst, u64)], b: &[(Inst, u64)]) -> Vec<Step> {
    let prefix = a
        .iter()
        .zip(b)
        .take_while(|((_, x), (_, y))| x == y)
        .count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|((_, x), (_, y))| x == y)
        .count();
    let mut steps: Vec<Step> = (0..prefix).map(|i| Step::Both(i, i)).collect();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let (n, m) = (ma.len(), mb.len());
    if (n + 1).saturating_mul(m + 1) > MAX_CELLS {
        steps.extend((0..n).map(|i| Step::First(prefix + i)));
        steps.extend((0..m).map(|j| Step::Second(prefix + j)));
    } else {
        let width = m + 1;
        let mut table = vec![0u32; (n + 1) * width];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                table[i * width + j] = if ma[i].1 == mb[j].1 {
                    table[(i + 1) * width + j + 1] + 1
                } else {
                    table[(i + 1) * width + j].max(table[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && ma[i].1 == mb[j].1 {
                steps.push(Step::Both(prefix + i, prefix + j));
                i += 1;
                j += 1;
            } else if j == m || (i < n && table[(i + 1) * width + j] >= table[i * width + j + 1]) {
                steps.push(Step::First(prefix + i));
                i += 1;
            } else {
                steps.push(Step::Second(prefix + j));
                j += 1;
            }
        }
    }
    let (ea, eb) = (a.len() - suffix, b.len() - suffix);
    steps.extend((0..suffix).map(|k| Step::Both(ea + k, eb + k)));
    steps
}

/// The merged body of `first` and the second member of `alignment` (a
/// function of `module`), named `name`: the members' parameters and a trailing
/// `i32` selector, `0` running the first member and `1` the second (the
/// module doc).
pub(crate) fn build_sequence_body(
    module: &FunctionSet,
    first: &Function,
    name: UserFuncName,
    alignment: &SequenceAlignment,
) -> Result<Function, NotSpliced> {
    let second = &*module.get(alignment.second).func;
    let mut signature = first.signature.clone();
    signature.params.push(AbiParam::new(types::I32));
    let mut merged = Function::with_name_signature(name, signature);
    merged_slots(&mut merged, first, second)?;
    let mut context = FunctionBuilderContext::new();
    let mut builder = FunctionBuilder::new(&mut merged, &mut context);
    let mut writer = Writer {
        members: [first, second],
        imports: Imports::default(),
        blocks: [SecondaryMap::new(), SecondaryMap::new()],
        variables: [SecondaryMap::new(), SecondaryMap::new()],
        selector: Value::reserved_value(),
    };
    writer.build(&mut builder, alignment)?;
    builder.seal_all_blocks();
    builder.finalize(TargetFrontendConfig {
        default_call_conv: first.signature.call_conv,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    });
    merged.dfg.resolve_all_aliases();
    let flags = settings::Flags::new(settings::builder());
    // The SSA builder leaves block parameters that always receive one value
    // around a loop (a cycle of parameters); Cranelift removes them when it
    // compiles, so they are removed here too, before the model prices the body.
    let mut context = cranelift_codegen::Context::for_function(merged);
    context.compute_cfg();
    context.compute_domtree();
    context.remove_constant_phis(&flags).map_err(|error| {
        NotSpliced(format!(
            "sequence: the merged body does not verify: {error}"
        ))
    })?;
    context.func.dfg.resolve_all_aliases();
    let merged = context.func;
    cranelift_codegen::verify_function(&merged, &flags).map_err(|errors| {
        NotSpliced(format!(
            "sequence: the merged body does not verify: {errors}"
        ))
    })?;
    Ok(merged)
}

/// The merged body's stack slots: slot `n` as large and as aligned as both
/// members' slot `n` (of the same kind).
fn merged_slots(
    merged: &mut Function,
    first: &Function,
    second: &Function,
) -> Result<(), NotSpliced> {
    if !first.dynamic_stack_slots.is_empty() || !second.dynamic_stack_slots.is_empty() {
        return Err(NotSpliced("sequence: a dynamic stack slot".into()));
    }
    let count = first
        .sized_stack_slots
        .len()
        .max(second.sized_stack_slots.len());
    for n in 0..count {
        let slot = StackSlot::new(n);
        let (a, b) = (
            first.sized_stack_slots.get(slot),
            second.sized_stack_slots.get(slot),
        );
        let data = match (a, b) {
            (Some(a), Some(b)) => {
                if a.kind != b.kind || a.key != b.key {
                    return Err(NotSpliced("sequence: stack slots of other kinds".into()));
                }
                let mut data = a.clone();
                data.size = a.size.max(b.size);
                data.align_shift = a.align_shift.max(b.align_shift);
                data
            }
            (Some(only), None) | (None, Some(only)) => only.clone(),
            (None, None) => unreachable!("n is below both counts' maximum"),
        };
        merged.sized_stack_slots.push(data);
    }
    Ok(())
}

/// Writes the merged body through the SSA builder.
struct Writer<'a> {
    members: [&'a Function; 2],
    imports: Imports,
    /// Each member's blocks and the merged body's.
    blocks: [SecondaryMap<Block, Option<Block>>; 2],
    /// Each member's values and their variables.
    variables: [SecondaryMap<Value, Option<Variable>>; 2],
    selector: Value,
}

impl Writer<'_> {
    fn build(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        alignment: &SequenceAlignment,
    ) -> Result<(), NotSpliced> {
        // The merged blocks, and the variables aligned instructions and
        // paired blocks share.
        for (index, merged_block) in alignment.blocks.iter().enumerate() {
            let block = builder.create_block();
            // Parameters before any instruction: the SSA builder appends its
            // own after them.
            let (member, source) = match *merged_block {
                MergedBlock::Paired { first, .. } | MergedBlock::First(first) => (0, first),
                MergedBlock::Second(second) => (1, second),
            };
            if index == 0 {
                builder.append_block_params_for_function_params(block);
            } else {
                let func = self.members[member];
                for &p in func.dfg.block_params(source) {
                    builder.append_block_param(block, func.dfg.value_type(p));
                }
            }
            match *merged_block {
                MergedBlock::Paired {
                    first,
                    second,
                    ref steps,
                } => {
                    self.blocks[0][first] = Some(block);
                    self.blocks[1][second] = Some(block);
                    let (pf, pg) = (
                        self.members[0].dfg.block_params(first),
                        self.members[1].dfg.block_params(second),
                    );
                    for (&a, &b) in pf.iter().zip(pg) {
                        self.share(builder, a, b);
                    }
                    let (insts_f, insts_g) = (
                        body_insts(self.members[0], first),
                        body_insts(self.members[1], second),
                    );
                    for step in steps {
                        if let Step::Both(i, j) = *step {
                            let (rf, rg) = (
                                self.members[0].dfg.inst_results(insts_f[i]),
                                self.members[1].dfg.inst_results(insts_g[j]),
                            );
                            for (&a, &b) in rf.iter().zip(rg) {
                                self.share(builder, a, b);
                            }
                        }
                    }
                }
                MergedBlock::First(b) => self.blocks[0][b] = Some(block),
                MergedBlock::Second(b) => self.blocks[1][b] = Some(block),
            }
        }
        self.coalesce(builder, alignment);
        let seal_after = self.seal_after(builder, alignment);
        for (index, merged_block) in alignment.blocks.iter().enumerate() {
            let (block_f, block_g) = match *merged_block {
                MergedBlock::Paired { first, second, .. } => (Some(first), Some(second)),
                MergedBlock::First(b) => (Some(b), None),
                MergedBlock::Second(b) => (None, Some(b)),
            };
            let block = block_f
                .and_then(|b| self.blocks[0][b])
                .or_else(|| block_g.and_then(|b| self.blocks[1][b]))
                .ok_or_else(|| NotSpliced("sequence: a block not made".into()))?;
            builder.switch_to_block(block);
            let params = builder.block_params(block).to_vec();
            let params = if index == 0 {
                let Some((&selector, params)) = params.split_last() else {
                    return Err(NotSpliced("sequence: no selector".into()));
                };
                self.selector = selector;
                params.to_vec()
            } else {
                params
            };
            for (member, source) in [(Member::First, block_f), (Member::Second, block_g)] {
                let Some(source) = source else { continue };
                let func = self.members[member as usize];
                for (&p, &v) in func.dfg.block_params(source).iter().zip(&params) {
                    let var = self.variable(builder, member, p);
                    builder.def_var(var, v);
                }
            }
            match merged_block {
                MergedBlock::Paired {
                    first,
                    second,
                    steps,
                } => self.paired(builder, *first, *second, steps)?,
                MergedBlock::First(b) => self.alone(builder, Member::First, *b)?,
                MergedBlock::Second(b) => self.alone(builder, Member::Second, *b)?,
            }
            for &block in &seal_after[index + 1] {
                builder.seal_block(block);
            }
        }
        Ok(())
    }

    /// The merged blocks to seal before writing the merged block at each
    /// index (at `0`, those no member's terminator branches to), and after
    /// writing the last (at its index plus one): each once every merged
    /// block that may branch to it was written, so that the SSA builder
    /// passes a value through block parameters only where paths join.
    fn seal_after(
        &self,
        builder: &mut FunctionBuilder<'_>,
        alignment: &SequenceAlignment,
    ) -> Vec<Vec<Block>> {
        let mut index_of = SecondaryMap::<Block, Option<usize>>::new();
        let mut merged_blocks = Vec::with_capacity(alignment.blocks.len());
        for (index, merged_block) in alignment.blocks.iter().enumerate() {
            let block = match *merged_block {
                MergedBlock::Paired { first, .. } | MergedBlock::First(first) => {
                    self.blocks[0][first]
                }
                MergedBlock::Second(second) => self.blocks[1][second],
            };
            if let Some(block) = block {
                index_of[block] = Some(index);
                merged_blocks.push(block);
            }
        }
        let mut last_branch: Vec<Option<usize>> = vec![None; alignment.blocks.len()];
        for (index, merged_block) in alignment.blocks.iter().enumerate() {
            let sources = match *merged_block {
                MergedBlock::Paired { first, second, .. } => [Some(first), Some(second)],
                MergedBlock::First(first) => [Some(first), None],
                MergedBlock::Second(second) => [None, Some(second)],
            };
            for (member, source) in sources.into_iter().enumerate() {
                let func = self.members[member];
                let Some(terminator) = source.and_then(|b| func.layout.last_inst(b)) else {
                    continue;
                };
                let dfg = &func.dfg;
                for call in dfg.insts[terminator]
                    .branch_destination(&dfg.jump_tables, &dfg.exception_tables)
                {
                    let target = self.blocks[member][call.block(&dfg.value_lists)];
                    if let Some(t) = target.and_then(|t| index_of[t]) {
                        last_branch[t] = Some(last_branch[t].map_or(index, |l| l.max(index)));
                    }
                }
            }
        }
        let mut seal_after = vec![Vec::new(); alignment.blocks.len() + 1];
        for (t, last) in last_branch.into_iter().enumerate() {
            if let Some(&block) = merged_blocks.get(t) {
                seal_after[last.map_or(0, |l| l + 1)].push(block);
            }
        }
        for &block in &seal_after[0] {
            builder.seal_block(block);
        }
        seal_after
    }

    /// Makes one variable of each pair of *one-sided* values (defined by an
    /// instruction or block only one member has, so only that member's path
    /// defines them) that an aligned instruction reads at the same operand,
    /// each value in at most one pair (SalSSA's phi coalescing). Run as member
    /// *k*, only *k*'s definition of such a variable executes, so it holds
    /// *k*'s value wherever *k* reads it, and the aligned instruction reads it
    /// without a `select`; the other member's path, where the value was
    /// undefined, passes its own instead of a zero.
    fn coalesce(&mut self, builder: &mut FunctionBuilder<'_>, alignment: &SequenceAlignment) {
        let mut one_sided = [
            SecondaryMap::<Value, bool>::new(),
            SecondaryMap::<Value, bool>::new(),
        ];
        let mark = |one_sided: &mut SecondaryMap<Value, bool>, func: &Function, inst: Inst| {
            for &r in func.dfg.inst_results(inst) {
                one_sided[r] = true;
            }
        };
        for merged_block in &alignment.blocks {
            match *merged_block {
                MergedBlock::Paired {
                    first,
                    second,
                    ref steps,
                } => {
                    let (fa, fb) = (self.members[0], self.members[1]);
                    let (insts_f, insts_g) = (body_insts(fa, first), body_insts(fb, second));
                    for step in steps {
                        match *step {
                            // A pure instruction may run on both paths
                            // (`Writer::paired`): its results are not one-sided.
                            Step::First(i) if !is_pure(fa, insts_f[i]) => {
                                mark(&mut one_sided[0], fa, insts_f[i])
                            }
                            Step::Second(j) if !is_pure(fb, insts_g[j]) => {
                                mark(&mut one_sided[1], fb, insts_g[j])
                            }
                            _ => {}
                        }
                    }
                }
                MergedBlock::First(b) | MergedBlock::Second(b) => {
                    let member = usize::from(matches!(merged_block, MergedBlock::Second(_)));
                    let func = self.members[member];
                    for &p in func.dfg.block_params(b) {
                        one_sided[member][p] = true;
                    }
                    for inst in func.layout.block_insts(b) {
                        mark(&mut one_sided[member], func, inst);
                    }
                }
            }
        }
        let mut taken = [
            SecondaryMap::<Value, bool>::new(),
            SecondaryMap::<Value, bool>::new(),
        ];
        for merged_block in &alignment.blocks {
            let MergedBlock::Paired {
                first,
                second,
                ref steps,
            } = *merged_block
            else {
                continue;
            };
            let (fa, fb) = (self.members[0], self.members[1]);
            let (insts_f, insts_g) = (body_insts(fa, first), body_insts(fb, second));
            for step in steps {
                let Step::Both(i, j) = *step else { continue };
                for (x, y) in fa
                    .dfg
                    .inst_values(insts_f[i])
                    .zip(fb.dfg.inst_values(insts_g[j]))
                {
                    let (x, y) = (fa.dfg.resolve_aliases(x), fb.dfg.resolve_aliases(y));
                    if one_sided[0][x]
                        && one_sided[1][y]
                        && !taken[0][x]
                        && !taken[1][y]
                        && fa.dfg.value_type(x) == fb.dfg.value_type(y)
                    {
                        taken[0][x] = true;
                        taken[1][y] = true;
                        self.share(builder, x, y);
                    }
                }
            }
        }
    }

    /// Makes `a` (of the first member) and `b` (of the second) one variable.
    fn share(&mut self, builder: &mut FunctionBuilder<'_>, a: Value, b: Value) {
        let var = self.variable(builder, Member::First, a);
        self.variables[1][b] = Some(var);
    }

    /// The variable of `value` of `member`, declared when first asked for.
    fn variable(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        member: Member,
        value: Value,
    ) -> Variable {
        let func = self.members[member as usize];
        let value = func.dfg.resolve_aliases(value);
        if let Some(var) = self.variables[member as usize][value] {
            return var;
        }
        let var = builder.declare_var(func.dfg.value_type(value));
        self.variables[member as usize][value] = Some(var);
        var
    }

    /// A block only `member` has: its instructions and terminator.
    fn alone(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        member: Member,
        block: Block,
    ) -> Result<(), NotSpliced> {
        let func = self.members[member as usize];
        for inst in func.layout.block_insts(block) {
            self.copy(builder, member, inst, true)?;
        }
        Ok(())
    }

    /// A paired block: its steps, then one terminator or each member's.
    fn paired(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        first: Block,
        second: Block,
        steps: &[Step],
    ) -> Result<(), NotSpliced> {
        let (insts_f, insts_g) = (
            body_insts(self.members[0], first),
            body_insts(self.members[1], second),
        );
        let mut k = 0;
        while k < steps.len() {
            if let Step::Both(i, j) = steps[k] {
                self.copy_both(builder, insts_f[i], insts_g[j])?;
                k += 1;
                continue;
            }
            // A run of steps only one member has: an arm for each member
            // with any, behind a branch on the selector.
            let end = steps[k..]
                .iter()
                .position(|s| matches!(s, Step::Both(..)))
                .map_or(steps.len(), |p| k + p);
            let run = &steps[k..end];
            // A pure instruction (no side effect, no trap, no memory access)
            // whose operands are not defined in an arm of this run runs
            // unconditionally, before the arms: on the other member's path
            // it computes a value nothing reads, and it needs no arm and
            // its value no join parameter.
            let (mut only_f, mut only_g) = (Vec::new(), Vec::new());
            let mut armed: [FxHashSet<Value>; 2] = Default::default();
            for step in run {
                let (member, inst) = match *step {
                    Step::First(i) => (Member::First, insts_f[i]),
                    Step::Second(j) => (Member::Second, insts_g[j]),
                    Step::Both(..) => continue,
                };
                let func = self.members[member as usize];
                let armed_here = &mut armed[member as usize];
                let reads_arm = func
                    .dfg
                    .inst_values(inst)
                    .any(|v| armed_here.contains(&func.dfg.resolve_aliases(v)));
                if is_pure(func, inst) && !reads_arm {
                    self.copy(builder, member, inst, true)?;
                    continue;
                }
                armed_here.extend(func.dfg.inst_results(inst).iter().copied());
                match member {
                    Member::First => only_f.push(inst),
                    Member::Second => only_g.push(inst),
                }
            }
            if only_f.is_empty() && only_g.is_empty() {
                k = end;
                continue;
            }
            let join = builder.create_block();
            let arm_f = (!only_f.is_empty()).then(|| builder.create_block());
            let arm_g = (!only_g.is_empty()).then(|| builder.create_block());
            builder.ins().brif(
                self.selector,
                arm_g.unwrap_or(join),
                &[],
                arm_f.unwrap_or(join),
                &[],
            );
            for (member, arm, insts) in [
                (Member::First, arm_f, &only_f),
                (Member::Second, arm_g, &only_g),
            ] {
                let Some(arm) = arm else { continue };
                builder.seal_block(arm);
                builder.switch_to_block(arm);
                for &inst in insts {
                    self.copy(builder, member, inst, true)?;
                }
                builder.ins().jump(join, &[]);
            }
            builder.seal_block(join);
            builder.switch_to_block(join);
            k = end;
        }
        let (term_f, term_g) = (
            self.members[0].layout.last_inst(first),
            self.members[1].layout.last_inst(second),
        );
        let (Some(term_f), Some(term_g)) = (term_f, term_g) else {
            return Err(NotSpliced("sequence: an empty block".into()));
        };
        if self.copy_both(builder, term_f, term_g).is_ok() {
            return Ok(());
        }
        let (arm_f, arm_g) = (builder.create_block(), builder.create_block());
        builder.ins().brif(self.selector, arm_g, &[], arm_f, &[]);
        builder.seal_block(arm_f);
        builder.seal_block(arm_g);
        builder.switch_to_block(arm_f);
        self.copy(builder, Member::First, term_f, true)?;
        builder.switch_to_block(arm_g);
        self.copy(builder, Member::Second, term_g, true)?;
        Ok(())
    }

    /// Imports `inst` of `member` (`pinned`: only that member runs it).
    fn import(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        member: Member,
        inst: Inst,
        pinned: bool,
    ) -> Result<InstructionData, NotSpliced> {
        let mut importer = Importer {
            merged: &mut *builder.func,
            source: self.members[member as usize],
            imports: &mut self.imports,
            blocks: Some(&self.blocks[member as usize]),
            pinned,
            refused: None,
        };
        importer.import(inst)
    }

    /// Copies `inst` of `member`, its operands reading `member`'s variables.
    fn copy(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        member: Member,
        inst: Inst,
        pinned: bool,
    ) -> Result<(), NotSpliced> {
        let func = self.members[member as usize];
        let data = self.import(builder, member, inst, pinned)?;
        let operands: Vec<Value> = func.dfg.inst_values(inst).collect();
        let operands: Vec<Value> = operands
            .into_iter()
            .map(|v| {
                let var = self.variable(builder, member, v);
                builder.use_var(var)
            })
            .collect();
        self.emit(
            builder,
            data,
            func.dfg.ctrl_typevar(inst),
            operands,
            [(member, inst), (member, inst)],
        )
    }

    /// Copies the aligned instructions `a` (of the first member) and `b` (of
    /// the second) as one, each operand that differs chosen by `select`; an
    /// error when they are not equal but for value operands (the terminators
    /// of a paired block, tried first as one).
    fn copy_both(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        a: Inst,
        b: Inst,
    ) -> Result<(), NotSpliced> {
        let (fa, fb) = (self.members[0], self.members[1]);
        let data_a = self.import(builder, Member::First, a, false)?;
        let data_b = self.import(builder, Member::Second, b, false)?;
        let (ctrl_a, ctrl_b) = (fa.dfg.ctrl_typevar(a), fb.dfg.ctrl_typevar(b));
        let pool = &builder.func.dfg.value_lists;
        if ctrl_a == ctrl_b
            && is_constant(data_a.opcode())
            && data_a.opcode() == data_b.opcode()
            && !data_a.eq(&data_b, pool)
        {
            // Two constants of one type: both, and a `select`.
            let (inst_a, _) = builder.ins().build(data_a, ctrl_a);
            let (inst_b, _) = builder.ins().build(data_b, ctrl_b);
            let (x, y) = (
                builder.func.dfg.first_result(inst_a),
                builder.func.dfg.first_result(inst_b),
            );
            let chosen = builder.ins().select(self.selector, y, x);
            let var = self.variable(builder, Member::First, fa.dfg.first_result(a));
            builder.def_var(var, chosen);
            let var = self.variable(builder, Member::Second, fb.dfg.first_result(b));
            builder.def_var(var, chosen);
            return Ok(());
        }
        if ctrl_a != ctrl_b || !data_a.eq(&data_b, pool) {
            return Err(NotSpliced("sequence: aligned instructions differ".into()));
        }
        let (va, vb): (Vec<Value>, Vec<Value>) = (
            fa.dfg.inst_values(a).collect(),
            fb.dfg.inst_values(b).collect(),
        );
        if va.len() != vb.len() {
            return Err(NotSpliced("sequence: aligned instructions differ".into()));
        }
        if va
            .iter()
            .zip(&vb)
            .any(|(&x, &y)| fa.dfg.value_type(x) != fb.dfg.value_type(y))
        {
            return Err(NotSpliced("sequence: operand types differ".into()));
        }
        let mut operands = Vec::with_capacity(va.len());
        for (&x, &y) in va.iter().zip(&vb) {
            let (var_x, var_y) = (
                self.variable(builder, Member::First, x),
                self.variable(builder, Member::Second, y),
            );
            let (vx, vy) = (builder.use_var(var_x), builder.use_var(var_y));
            let dfg = &builder.func.dfg;
            let (vx, vy) = (dfg.resolve_aliases(vx), dfg.resolve_aliases(vy));
            operands.push(if vx == vy {
                vx
            } else {
                builder.ins().select(self.selector, vy, vx)
            });
        }
        self.emit(
            builder,
            data_a,
            ctrl_a,
            operands,
            [(Member::First, a), (Member::Second, b)],
        )
    }

    /// Inserts `data` with `operands`, its results defining the variables of
    /// the results of each of `sources`.
    fn emit(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        data: InstructionData,
        ctrl: Type,
        operands: Vec<Value>,
        sources: [(Member, Inst); 2],
    ) -> Result<(), NotSpliced> {
        let (inst, _) = builder.ins().build(data, ctrl);
        builder
            .func
            .dfg
            .overwrite_inst_values(inst, operands.into_iter());
        let results = builder.func.dfg.inst_results(inst).to_vec();
        for (member, source) in sources {
            let func = self.members[member as usize];
            let source_results = func.dfg.inst_results(source);
            if source_results.len() != results.len() {
                return Err(NotSpliced("sequence: results differ".into()));
            }
            for (&r, &value) in source_results.iter().zip(&results) {
                let var = self.variable(builder, member, r);
                builder.def_var(var, value);
            }
        }
        Ok(())
    }
}

/// Whether `inst` of `func` may run where its function would not: one result,
/// no side effect, no trap, no memory access, no call (Cranelift's own test
/// for instructions it may move, less the loads).
fn is_pure(func: &Function, inst: Inst) -> bool {
    let opcode = func.dfg.insts[inst].opcode();
    func.dfg.inst_results(inst).len() == 1
        && !(opcode.is_call()
            || opcode.is_branch()
            || opcode.is_terminator()
            || opcode.is_return()
            || opcode.can_trap()
            || opcode.other_side_effects()
            || opcode.can_store()
            || opcode.can_load())
}

/// Whether `opcode` makes a constant from its immediate alone.
fn is_constant(opcode: Opcode) -> bool {
    matches!(opcode, Opcode::Iconst | Opcode::F32const | Opcode::F64const)
}

/// The instructions of `block` but its terminator, in layout order.
fn body_insts(func: &Function, block: Block) -> Vec<Inst> {
    let mut insts: Vec<Inst> = func.layout.block_insts(block).collect();
    insts.pop();
    insts
}

/// What phase 1 reads of a function.
struct Profile {
    func: FuncIndex,
    /// Its instructions' shapes (opcode and controlling type), sorted.
    shapes: Vec<u64>,
}

/// Phase 1 and the alignments: pairs of `functions` (of `module`) merged by
/// sequence alignment, each function in at most one, as `price` plans them.
/// Readers of machine state and functions without a body are left out. In
/// each bucket of one signature, largest first, a function not yet taken is
/// aligned with the [`ATTEMPTS`] best of the next [`WINDOW`] by shape overlap
/// (the first member of a pair is the one first in the module), each pair is
/// priced, and it takes the partner whose plan saves the most (`price`
/// returns what a plan saves, if anything). A function no partner pays for
/// gives the plan of its first attempt (a refusal, with its reason).
pub(crate) fn find_sequence_pairs<P: Send>(
    module: &FunctionSet,
    functions: &[FuncIndex],
    price: impl Fn(FuncIndex, &SequenceAlignment) -> (Option<u64>, P) + Sync,
) -> Vec<P> {
    let mut buckets: FxHashMap<&ir::Signature, Vec<Profile>> = FxHashMap::default();
    for &f in functions {
        let func = &*module.get(f).func;
        if func.layout.entry_block().is_none() || reads_machine_state(func) {
            continue;
        }
        let mut shapes: Vec<u64> = func
            .layout
            .blocks()
            .flat_map(|b| func.layout.block_insts(b))
            .map(|inst| {
                let mut hasher = FxHasher::default();
                func.dfg.insts[inst].opcode().hash(&mut hasher);
                func.dfg.ctrl_typevar(inst).hash(&mut hasher);
                hasher.finish()
            })
            .collect();
        shapes.sort_unstable();
        buckets
            .entry(&func.signature)
            .or_default()
            .push(Profile { func: f, shapes });
    }
    let mut buckets: Vec<Vec<Profile>> = buckets
        .into_values()
        .filter(|bucket| bucket.len() > 1)
        .collect();
    for bucket in &mut buckets {
        bucket.sort_by_key(|p| (std::cmp::Reverse(p.shapes.len()), p.func));
    }
    buckets.sort_by_key(|bucket| bucket[0].func);
    parallel::map(&buckets, 1, |bucket| pair_bucket(module, bucket, &price))
        .into_iter()
        .flatten()
        .collect()
}

/// The plans of one bucket of [`find_sequence_pairs`], sorted largest first.
fn pair_bucket<P>(
    module: &FunctionSet,
    bucket: &[Profile],
    price: &impl Fn(FuncIndex, &SequenceAlignment) -> (Option<u64>, P),
) -> Vec<P> {
    let mut taken = vec![false; bucket.len()];
    let mut plans = Vec::new();
    for i in 0..bucket.len() {
        if taken[i] {
            continue;
        }
        let size = bucket[i].shapes.len();
        let mut candidates: Vec<(usize, usize)> = (i + 1..bucket.len().min(i + 1 + WINDOW))
            .filter(|&j| !taken[j] && bucket[j].shapes.len() * 2 >= size)
            .map(|j| (overlap(&bucket[i].shapes, &bucket[j].shapes), j))
            .filter(|&(overlap, _)| overlap * 100 >= MIN_OVERLAP_PERCENT * size)
            .collect();
        candidates.sort_by_key(|&(overlap, j)| (std::cmp::Reverse(overlap), j));
        let mut best: Option<(u64, usize, P)> = None;
        let mut refused = None;
        for &(_, j) in candidates.iter().take(ATTEMPTS) {
            let (a, b) = (bucket[i].func, bucket[j].func);
            let (first, second) = if a < b { (a, b) } else { (b, a) };
            let aligned =
                align_sequences(&module.get(first).func, &module.get(second).func, second);
            let Some(alignment) = aligned.ok().filter(SequenceAlignment::promising) else {
                continue;
            };
            match price(first, &alignment) {
                (Some(saved), plan) => {
                    if best.as_ref().is_none_or(|&(most, _, _)| saved > most) {
                        best = Some((saved, j, plan));
                    }
                }
                (None, plan) => {
                    refused.get_or_insert(plan);
                }
            }
        }
        match (best, refused) {
            (Some((_, j, plan)), _) => {
                taken[i] = true;
                taken[j] = true;
                plans.push(plan);
            }
            (None, Some(plan)) => plans.push(plan),
            (None, None) => {}
        }
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::similar::similar_filetests;

    /// `without_can_move` clears `can_move` and keeps every other flag, the
    /// trap code and the alias region.
    #[test]
    fn can_move_is_cleared_alone() {
        let mut regions = ir::AliasRegionSet::new();
        let region = regions.insert(ir::AliasRegionData {
            user_id: 7,
            description: "a region".into(),
        });
        for names in [
            &["notrap", "aligned", "readonly", "can_move"][..],
            &["aligned", "can_move", "big"][..],
            &["heap_oob", "can_move"][..],
        ] {
            let mut data = ir::MemFlagsData::new().with_alias_region(Some(region));
            for name in names {
                assert_eq!(data.set_by_name(name), Ok(true), "{name}");
            }
            let pinned = without_can_move(data).expect("clears");
            assert!(!pinned.can_move());
            assert_eq!(pinned.with_can_move(), data);
        }
    }

    /// Every pair of functions of one signature in the similar filetests is
    /// aligned and its merged body built: the body verifies (checked by the
    /// builder) or the pair is refused with a reason; most are built.
    #[test]
    fn filetest_pairs_build_or_are_refused() {
        let (mut built, mut refused) = (0, 0);
        for (path, module) in similar_filetests("") {
            let functions: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
            for (k, &a) in functions.iter().enumerate() {
                for &b in &functions[k + 1..] {
                    let (fa, fb) = (&module.get(a).func, &module.get(b).func);
                    if fa.signature != fb.signature {
                        continue;
                    }
                    let result = align_sequences(fa, fb, b).and_then(|alignment| {
                        build_sequence_body(
                            &module,
                            fa,
                            UserFuncName::testcase("merged"),
                            &alignment,
                        )
                    });
                    match result {
                        Ok(_) => built += 1,
                        Err(NotSpliced(reason)) => {
                            eprintln!("{}: {a} {b}: {reason}", path.display());
                            refused += 1;
                        }
                    }
                }
            }
        }
        eprintln!("built {built}, refused {refused}");
        assert!(built > 0 && built > refused);
    }
}
