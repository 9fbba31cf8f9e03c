//! Writing the merged body of a pair merged by sequence alignment (phase 5),
//! through `cranelift-frontend`'s SSA builder.

use super::alignment::{MergedBlock, SequenceAlignment, Step};
use super::import::{Importer, Imports, is_constant};
use crate::ir::FunctionSet;
use crate::similar::pinned::pin_one_sided;
use crate::similar::splice::NotSpliced;
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::{
    AbiParam, Block, BlockCall, DataFlowGraph, Function, Inst, InstBuilder, InstBuilderBase,
    InstructionData, StackSlot, Type, UserFuncName, Value, types,
};
use cranelift_codegen::isa::TargetFrontendConfig;
use cranelift_codegen::packed_option::ReservedValue;
use cranelift_codegen::settings;
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext, Variable};
use rustc_hash::{FxHashMap, FxHashSet};

/// Which member.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Member {
    First,
    Second,
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
        indices: [SecondaryMap::new(), SecondaryMap::new()],
        merged_blocks: Vec::with_capacity(alignment.blocks.len()),
        variables: [SecondaryMap::new(), SecondaryMap::new()],
        selector: Value::reserved_value(),
    };
    writer.build(&mut builder, alignment)?;
    let selector = writer.selector;
    builder.seal_all_blocks();
    builder.finalize(TargetFrontendConfig {
        default_call_conv: first.signature.call_conv,
        pointer_width: target_lexicon::PointerWidth::U64,
        page_size_align_log2: 12,
    });
    merged.dfg.resolve_all_aliases();
    pin_one_sided(&mut merged, selector, 2)?;
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

/// Whether two imported instructions are equal but for their value operands
/// (which the importer leaves as placeholders): `InstructionData::eq`, but
/// branches compare their destinations (the merged blocks, the number of
/// arguments, a table's entries in order) rather than the handles of the lists
/// and tables that hold them, which each import makes anew.
fn equal_but_values(a: &InstructionData, b: &InstructionData, dfg: &DataFlowGraph) -> bool {
    let pool = &dfg.value_lists;
    let same =
        |x: &BlockCall, y: &BlockCall| x.block(pool) == y.block(pool) && x.len(pool) == y.len(pool);
    match (a, b) {
        (
            InstructionData::Jump {
                opcode: opcode_a,
                destination: to_a,
            },
            InstructionData::Jump {
                opcode: opcode_b,
                destination: to_b,
            },
        ) => opcode_a == opcode_b && same(to_a, to_b),
        (
            InstructionData::Brif {
                opcode: opcode_a,
                blocks: to_a,
                ..
            },
            InstructionData::Brif {
                opcode: opcode_b,
                blocks: to_b,
                ..
            },
        ) => opcode_a == opcode_b && to_a.iter().zip(to_b).all(|(x, y)| same(x, y)),
        (
            InstructionData::BranchTable {
                opcode: opcode_a,
                table: table_a,
                ..
            },
            InstructionData::BranchTable {
                opcode: opcode_b,
                table: table_b,
                ..
            },
        ) => {
            let (to_a, to_b) = (
                dfg.jump_tables[*table_a].all_branches(),
                dfg.jump_tables[*table_b].all_branches(),
            );
            opcode_a == opcode_b
                && to_a.len() == to_b.len()
                && to_a.iter().zip(to_b).all(|(x, y)| same(x, y))
        }
        _ => a.eq(b, pool),
    }
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
    /// Each member's blocks and the index of their merged block in the
    /// alignment.
    indices: [SecondaryMap<Block, Option<usize>>; 2],
    /// The merged body's block at each index of the alignment.
    merged_blocks: Vec<Block>,
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
                    self.indices[0][first] = Some(index);
                    self.indices[1][second] = Some(index);
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
                MergedBlock::First(b) => {
                    self.blocks[0][b] = Some(block);
                    self.indices[0][b] = Some(index);
                }
                MergedBlock::Second(b) => {
                    self.blocks[1][b] = Some(block);
                    self.indices[1][b] = Some(index);
                }
            }
            self.merged_blocks.push(block);
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
                    if let Some(t) = self.indices[member][call.block(&dfg.value_lists)] {
                        last_branch[t] = Some(last_branch[t].map_or(index, |l| l.max(index)));
                    }
                }
            }
        }
        let mut seal_after = vec![Vec::new(); alignment.blocks.len() + 1];
        for (&block, last) in self.merged_blocks.iter().zip(last_branch) {
            seal_after[last.map_or(0, |l| l + 1)].push(block);
        }
        for &block in &seal_after[0] {
            builder.seal_block(block);
        }
        seal_after
    }

    /// Makes one variable of pairs of *one-sided* values (defined by an
    /// instruction or block only one member has, not moved out of an arm, so
    /// only that member's path defines them), each value in at most one pair
    /// (SalSSA's phi coalescing): first those an aligned instruction reads at
    /// the same operand (it then reads them without a `select`), then, per
    /// merged block, those of one type both members read there (both are live
    /// where the members' paths join before it, and one block parameter
    /// carries both). Run as member *k*, only *k*'s definition of such a
    /// variable executes, so it holds *k*'s value wherever *k* reads it; the
    /// other member's path, where the value was undefined, passes its own
    /// instead of a zero.
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
        // The rest pairwise where both are read in one merged block (so both
        // are live where the two members' paths join before it, and one
        // block parameter can carry both), of one type, in the merged body's
        // order.
        let mut read_in: [Vec<Vec<Value>>; 2] = [
            vec![Vec::new(); alignment.blocks.len()],
            vec![Vec::new(); alignment.blocks.len()],
        ];
        for member in 0..2 {
            let func = self.members[member];
            for block in func.layout.blocks() {
                let Some(index) = self.indices[member][block] else {
                    continue;
                };
                for inst in func.layout.block_insts(block) {
                    for v in func.dfg.inst_values(inst) {
                        let v = func.dfg.resolve_aliases(v);
                        if one_sided[member][v] && !taken[member][v] {
                            read_in[member][index].push(v);
                        }
                    }
                }
            }
        }
        let [read_in_first, read_in_second] = &read_in;
        for (read_f, read_g) in read_in_first.iter().zip(read_in_second) {
            let mut rest: FxHashMap<Type, Vec<Value>> = FxHashMap::default();
            for &y in read_g.iter().rev() {
                if !taken[1][y] {
                    rest.entry(self.members[1].dfg.value_type(y))
                        .or_default()
                        .push(y);
                }
            }
            for &x in read_f {
                if taken[0][x] {
                    continue;
                }
                let ty = self.members[0].dfg.value_type(x);
                while let Some(y) = rest.get_mut(&ty).and_then(Vec::pop) {
                    if !taken[1][y] {
                        taken[0][x] = true;
                        taken[1][y] = true;
                        self.share(builder, x, y);
                        break;
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
            self.copy(builder, member, inst)?;
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
                    self.copy(builder, member, inst)?;
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
                    self.copy(builder, member, inst)?;
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
        self.copy(builder, Member::First, term_f)?;
        builder.switch_to_block(arm_g);
        self.copy(builder, Member::Second, term_g)?;
        Ok(())
    }

    /// Imports `inst` of `member`.
    fn import(
        &mut self,
        builder: &mut FunctionBuilder<'_>,
        member: Member,
        inst: Inst,
    ) -> Result<InstructionData, NotSpliced> {
        let mut importer = Importer {
            merged: &mut *builder.func,
            source: self.members[member as usize],
            imports: &mut self.imports,
            blocks: Some(&self.blocks[member as usize]),
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
    ) -> Result<(), NotSpliced> {
        let func = self.members[member as usize];
        let data = self.import(builder, member, inst)?;
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
        let data_a = self.import(builder, Member::First, a)?;
        let data_b = self.import(builder, Member::Second, b)?;
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
        if ctrl_a != ctrl_b || !equal_but_values(&data_a, &data_b, &builder.func.dfg) {
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

/// The instructions of `block` but its terminator, in layout order.
fn body_insts(func: &Function, block: Block) -> Vec<Inst> {
    let mut insts: Vec<Inst> = func.layout.block_insts(block).collect();
    insts.pop();
    insts
}
