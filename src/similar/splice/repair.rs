//! Passing the values of a member's unpaired blocks to the uses their
//! definitions no longer dominate (merging by block pairing, `align/blocks.rs`).
//!
//! A stretch's arm of member *k* (or another unpaired block of *k*) may use a
//! value `v` that an unpaired block `U` of *k* defines (the first member's block
//! as it is, or the copy of the second's). In *k* `v`'s definition dominates the
//! use; in the merged body the other member's edges may reach the use's block
//! around `U`, so it need not. Each such use then reads a variable that the
//! merged body's entry sets to a placeholder (zero) and `v`'s definition sets to
//! `v`, put in SSA form as Braun et al.'s "Simple and Efficient Construction of
//! SSA Form" (CC 2013) does: a block reached from `U` reads the variable through
//! a new parameter, each edge into it passing the variable's value at the end
//! of its source (`v` from `U`, the placeholder from a block `U` does not
//! reach, else the source's own parameter). Its trivial parameters are not
//! removed.
//!
//! Why that is sound: SSA construction makes every read see the last assignment
//! to the variable on the path that ran. The repaired uses are in code only *k*
//! runs (its arms and unpaired blocks: `Copier::arms`), and run as *k* the
//! merged body executes exactly *k*'s instructions in *k*'s order
//! (`align/blocks.rs`). *k*'s path to the use passes `v`'s definition (which
//! dominates the use in *k*) and nothing else assigns the variable after the
//! entry, so the use reads the value of the last run of `v`'s definition: what
//! *k* read. Run as the other member, the use never runs; the parameters along
//! its edges carry placeholders none of its code reads (only repaired uses read
//! them). Edges the parameters cannot be passed along (an exception edge, a
//! jump table another `br_table` shares) and types without a placeholder refuse
//! the pair; the verifier then checks the body as always.

use super::{NotSpliced, insert_placeholder};
use crate::similar::align::has_placeholder;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::dominator_tree::DominatorTree;
use cranelift_codegen::flowgraph::ControlFlowGraph;
use cranelift_codegen::ir::{self, Block, Function, Inst, Opcode, Value, ValueDef};
use rustc_hash::{FxHashMap, FxHashSet};

/// Makes each use of a value of `unpaired` (the unpaired blocks of the first
/// function, `first`, or the copies of the second's) in a block of the same
/// function's code (`arms`) that the value's definition does not dominate read
/// it through block parameters.
pub(super) fn repair_unpaired(
    merged: &mut Function,
    unpaired: &[Block],
    arms: &FxHashMap<Block, bool>,
    first: bool,
) -> Result<(), NotSpliced> {
    let unpaired: FxHashSet<Block> = unpaired
        .iter()
        .copied()
        .filter(|&b| merged.layout.is_block_inserted(b))
        .collect();
    if unpaired.is_empty() {
        return Ok(());
    }
    let cfg = ControlFlowGraph::with_function(merged);
    let domtree = DominatorTree::with_function(merged, &cfg);
    // Each use to repair: the value, its block and the instruction using it.
    let mut uses: Vec<(Value, Block, Inst)> = Vec::new();
    for block in merged.layout.blocks() {
        if arms.get(&block) != Some(&first) {
            continue;
        }
        for inst in merged.layout.block_insts(block) {
            for value in merged.dfg.inst_values(inst) {
                let (home, point): (Block, ir::ProgramPoint) = match merged.dfg.value_def(value) {
                    ValueDef::Param(b, _) => (b, b.into()),
                    ValueDef::Result(i, _) => match merged.layout.inst_block(i) {
                        Some(b) => (b, i.into()),
                        None => continue,
                    },
                    ValueDef::Union(..) => continue,
                };
                if unpaired.contains(&home)
                    && !domtree.dominates(point, inst, &merged.layout)
                    && !uses.contains(&(value, block, inst))
                {
                    uses.push((value, block, inst));
                }
            }
        }
    }
    if uses.is_empty() {
        return Ok(());
    }
    // How many instructions name each jump table: a parameter's argument is
    // per edge, so a table another `br_table` shares cannot take one.
    let mut tables: FxHashMap<ir::JumpTable, usize> = FxHashMap::default();
    for block in merged.layout.blocks() {
        if let Some(t) = merged.layout.last_inst(block)
            && let ir::InstructionData::BranchTable { table, .. } = merged.dfg.insts[t]
        {
            *tables.entry(table).or_default() += 1;
        }
    }
    let mut values: Vec<Value> = uses.iter().map(|u| u.0).collect();
    values.sort_unstable();
    values.dedup();
    for value in values {
        let mut variable = Variable::new(merged, &cfg, value)?;
        for &(v, block, inst) in &uses {
            if v != value {
                continue;
            }
            if block == variable.home {
                return Err(NotSpliced(format!("{value} is used before its definition")));
            }
            let read = variable.at_entry(merged, block)?;
            merged
                .dfg
                .map_inst_values(inst, |x| if x == value { read } else { x });
        }
        variable.fill(merged, &cfg, &tables)?;
    }
    Ok(())
}

/// The variable one value of an unpaired block is read through.
struct Variable {
    value: Value,
    ty: ir::Type,
    /// The block defining `value`.
    home: Block,
    /// The blocks reached from `home` (only those can read `value`).
    reached: FxHashSet<Block>,
    /// The parameter each block reads the variable through.
    params: FxHashMap<Block, Value>,
    /// Blocks given a parameter whose incoming edges have no argument yet.
    pending: Vec<Block>,
    /// The placeholder, defined in the entry block once needed.
    placeholder: Option<Value>,
}

impl Variable {
    fn new(merged: &Function, cfg: &ControlFlowGraph, value: Value) -> Result<Self, NotSpliced> {
        let ty = merged.dfg.value_type(value);
        if !has_placeholder(ty) {
            return Err(NotSpliced(format!("no placeholder of type {ty}")));
        }
        let home = match merged.dfg.value_def(value) {
            ValueDef::Param(b, _) => b,
            ValueDef::Result(i, _) if !merged.dfg.insts[i].opcode().is_terminator() => merged
                .layout
                .inst_block(i)
                .ok_or_else(|| NotSpliced(format!("{value} is not in the layout")))?,
            _ => return Err(NotSpliced(format!("{value} cannot be passed on"))),
        };
        let mut reached = FxHashSet::default();
        let mut stack: Vec<Block> = cfg.succ_iter(home).collect();
        while let Some(b) = stack.pop() {
            if reached.insert(b) {
                stack.extend(cfg.succ_iter(b));
            }
        }
        Ok(Self {
            value,
            ty,
            home,
            reached,
            params: FxHashMap::default(),
            pending: Vec::new(),
            placeholder: None,
        })
    }

    /// The placeholder zero, at the top of the entry block (which dominates
    /// every block).
    fn placeholder(&mut self, merged: &mut Function) -> Result<Value, NotSpliced> {
        if let Some(p) = self.placeholder {
            return Ok(p);
        }
        let entry = merged
            .layout
            .entry_block()
            .ok_or_else(|| NotSpliced("a merged body without blocks".into()))?;
        let mut pos = FuncCursor::new(merged);
        pos.goto_first_insertion_point(entry);
        let p = insert_placeholder(&mut pos, self.ty)?;
        self.placeholder = Some(p);
        Ok(p)
    }

    /// The variable on entry to `block` (not `home`).
    fn at_entry(&mut self, merged: &mut Function, block: Block) -> Result<Value, NotSpliced> {
        if !self.reached.contains(&block) {
            return self.placeholder(merged);
        }
        if let Some(&p) = self.params.get(&block) {
            return Ok(p);
        }
        let p = merged.dfg.append_block_param(block, self.ty);
        self.params.insert(block, p);
        self.pending.push(block);
        Ok(p)
    }

    /// The variable at the end of `block`.
    fn at_end(&mut self, merged: &mut Function, block: Block) -> Result<Value, NotSpliced> {
        if block == self.home {
            Ok(self.value)
        } else {
            self.at_entry(merged, block)
        }
    }

    /// Gives every edge into a block with a parameter its argument.
    fn fill(
        &mut self,
        merged: &mut Function,
        cfg: &ControlFlowGraph,
        tables: &FxHashMap<ir::JumpTable, usize>,
    ) -> Result<(), NotSpliced> {
        while let Some(block) = self.pending.pop() {
            let mut preds: Vec<(Block, Inst)> =
                cfg.pred_iter(block).map(|p| (p.block, p.inst)).collect();
            preds.sort_unstable();
            preds.dedup();
            for (pred, inst) in preds {
                match merged.dfg.insts[inst] {
                    ir::InstructionData::BranchTable { table, .. }
                        if tables.get(&table) == Some(&1) => {}
                    _ if matches!(merged.dfg.insts[inst].opcode(), Opcode::Jump | Opcode::Brif) => {
                    }
                    _ => {
                        return Err(NotSpliced(format!(
                            "{}: cannot pass {} along the edge of {inst}",
                            block, self.value
                        )));
                    }
                }
                let arg = self.at_end(merged, pred)?;
                let dfg = &mut merged.dfg;
                for call in dfg.insts[inst]
                    .branch_destination_mut(&mut dfg.jump_tables, &mut dfg.exception_tables)
                {
                    if call.block(&dfg.value_lists) == block {
                        call.append_argument(arg, &mut dfg.value_lists);
                    }
                }
            }
        }
        Ok(())
    }
}
