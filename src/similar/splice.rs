//! Splicing an aligned pair's differing stretches into its merged body.
//!
//! The merged body is a copy of the first function (`merged_body.rs`). For each
//! stretch ([`Stretch`], found by `align.rs`), in the copy's block `B`:
//!
//! ```text
//! B:      prefix                         B:      prefix
//!         first's stretch         =>             brif selector, second_arm, first_arm
//!         suffix (ends in the     first_arm:     first's stretch; jump join
//!                 terminator)     second_arm:    second's stretch, copied; jump join
//!                                 join:          suffix
//! ```
//!
//! A stretch that ends its block (the two functions' terminators differ, merging
//! across CFGs) has no join: each arm ends in its own function's terminator, the
//! second's branching to the first function's blocks at the same positions of the
//! walk ([`Alignment::blocks`]):
//!
//! ```text
//! B:      prefix                         B:      prefix
//!         first's rest, terminator  =>           brif selector, second_arm, first_arm
//!                                 first_arm:     first's rest, terminator
//!                                 second_arm:    second's rest, terminator, copied
//! ```
//!
//! The merged control-flow graph then has the edges of both functions, and a
//! definition that dominates a use in each function need not dominate it in the
//! merged body; such a merged body is checked by Cranelift's verifier and the
//! pair refused if it fails.
//!
//! Values a stretch defines that are used after it reach those uses through
//! parameters of `join`, each arm passing its own value (escapes); a value only
//! one function's later stretches use (a one-sided escape) gets a parameter too,
//! the other arm passing a placeholder zero, and the merged body is then checked:
//! only arms of that function read the parameter, the join dominates every such
//! read, and every definition dominates its uses (across CFGs, Cranelift's
//! verifier accepts the body too).
//!
//! An empty stretch gets no arm (unless it must pass a placeholder): the branch
//! goes straight to `join`. The second
//! function's instructions are copied with `InstructionData::map`: each operand
//! becomes the first function's value defined at the same place
//! ([`Alignment::values`]) or a copied result; callees, signatures, memory flags
//! (with their alias region), constants and immediates are declared again in the
//! merged body by content. The alignment allows nothing else in a stretch.

mod group;
mod repair;
mod unpaired;

use super::align::{Alignment, Stretch};
use crate::ir::insts_by_number;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::dominator_tree::DominatorTree;
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::flowgraph::ControlFlowGraph;
use cranelift_codegen::ir::instructions::InstructionMapper;
use cranelift_codegen::ir::{
    self, Block, BlockCall, ExtFuncData, ExternalName, FuncRef, Function, Inst, InstBuilder,
    SigRef, StackSlot, Value, ValueList,
};
use cranelift_codegen::settings;
use rustc_hash::{FxHashMap, FxHashSet};

/// Why a stretch could not be copied (only for input the alignment should have
/// refused; the group is then not merged).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct NotSpliced(pub(crate) String);

/// Splices `alignment`'s stretches into `merged` (a copy of the first function,
/// whose instructions keep their handles), choosing the second function's
/// (`second`) where `selector` is nonzero; with `joined` (a group of three or
/// more: each further member with its alignment with the first, at the same
/// places), each member's where `selector` is its position (`group.rs`).
pub(crate) fn splice_stretches(
    merged: &mut Function,
    selector: Value,
    second: &Function,
    alignment: &Alignment,
    joined: &[(&Function, &Alignment)],
) -> Result<(), NotSpliced> {
    // Escapes are found by value: no use may name one through an alias.
    merged.dfg.resolve_all_aliases();
    if !joined.is_empty() {
        return group::splice_group(merged, selector, second, alignment, joined);
    }
    let mut copier = Copier::new(merged, second, alignment);
    // Each escaping value of the first function, with the join's parameter that
    // replaces it outside its arm and that arm.
    let mut escaped: FxHashMap<Value, (Value, Block)> = FxHashMap::default();
    // With paired blocks, the second's unpaired blocks exist before any copied
    // terminator branches to them.
    let unpaired = copier.make_unpaired(&alignment.unpaired);
    for stretch in &alignment.stretches {
        match stretch.suffix {
            Some(suffix) => copier.splice(selector, stretch, suffix, &mut escaped)?,
            None => copier.splice_ending(selector, stretch)?,
        }
    }
    copier.copy_unpaired(&unpaired)?;
    copier.resolve_forwards()?;
    copier.own_unpaired(&unpaired, &alignment.first_unpaired);
    let one_sided = std::mem::take(&mut copier.one_sided);
    let arms = std::mem::take(&mut copier.arms);
    if !escaped.is_empty() {
        replace_escapes(merged, &escaped);
    }
    // Values of each function's unpaired blocks its own code uses, passed on
    // where their definitions no longer dominate those uses (`repair.rs`).
    repair::repair_unpaired(merged, &alignment.first_unpaired, &arms, true)?;
    let copies: Vec<Block> = unpaired.iter().map(|&(_, copy)| copy).collect();
    repair::repair_unpaired(merged, &copies, &arms, false)?;
    if alignment.is_across_cfgs() {
        // Across CFGs: every definition the aligned code uses dominates its uses
        // in both functions, but the merged graph has the edges of both, so check
        // the dominance (and everything else) rather than assume it.
        if !one_sided.is_empty() {
            check_one_sided(merged, &one_sided, &arms)?;
        }
        verify(merged)?;
    } else if !one_sided.is_empty() {
        // The same graph as the first function's: what a one-sided escape adds
        // beyond any merged body is its join's parameter and the placeholder
        // (of the parameter's type), so the check is where that is read and
        // that every definition still dominates its uses.
        check_one_sided(merged, &one_sided, &arms)?;
    }
    Ok(())
}

/// Inserts a placeholder of type `ty` (zero) at `pos`: `iconst` for an integer
/// of at most 64 bits, `f32const` or `f64const` (the types of
/// `align::has_placeholder`).
fn insert_placeholder(pos: &mut FuncCursor<'_>, ty: ir::Type) -> Result<Value, NotSpliced> {
    if ty.is_int() && ty.bits() <= 64 {
        Ok(pos.ins().iconst(ty, 0))
    } else if ty == ir::types::F32 {
        Ok(pos.ins().f32const(0.0))
    } else if ty == ir::types::F64 {
        Ok(pos.ins().f64const(0.0))
    } else {
        Err(NotSpliced(format!("no placeholder of type {ty}")))
    }
}

/// Runs Cranelift's verifier on `merged`.
fn verify(merged: &Function) -> Result<(), NotSpliced> {
    let flags = settings::Flags::new(settings::builder());
    cranelift_codegen::verify_function(merged, &flags)
        .map_err(|errors| NotSpliced(format!("the merged body does not verify: {errors}")))
}

/// Checks what makes a one-sided escape sound, on the merged body: every use of
/// its join's parameter is in an arm of the same function as its definition, so
/// it runs under the same selector value (the selector is a parameter, constant
/// for a call) and reads the value that arm passed, never the other arm's
/// placeholder; and the join dominates every use, so the parameter holds the
/// value of the last run through the join. Checks too that every value's
/// definition dominates each of its uses in reachable code (the SSA property
/// Cranelift's verifier checks), as a value that moved to a join parameter
/// could break it.
fn check_one_sided(
    merged: &Function,
    one_sided: &FxHashMap<Value, (Block, bool)>,
    arms: &FxHashMap<Block, bool>,
) -> Result<(), NotSpliced> {
    let cfg = ControlFlowGraph::with_function(merged);
    let domtree = DominatorTree::with_function(merged, &cfg);
    let (dfg, layout) = (&merged.dfg, &merged.layout);
    let not_dominated = |value: Value| {
        NotSpliced(format!(
            "{value} is used where its definition does not dominate"
        ))
    };
    // The instructions read so far: a result defined in the block of its use
    // dominates the use when its instruction was read before it.
    let mut read: SecondaryMap<Inst, bool> = SecondaryMap::with_capacity(dfg.num_insts());
    for block in layout.blocks() {
        let reachable = domtree.is_reachable(block);
        for inst in layout.block_insts(block) {
            for value in dfg.inst_values(inst) {
                // Each definition strictly dominates its uses in reachable code.
                let def = dfg.value_def(value);
                let dominates = match def {
                    ir::ValueDef::Result(def, _) => match layout.inst_block(def) {
                        Some(at) if at == block => read[def],
                        Some(at) => domtree.block_dominates(at, block),
                        None => false,
                    },
                    ir::ValueDef::Param(at, _) => {
                        layout.is_block_inserted(at) && domtree.block_dominates(at, block)
                    }
                    ir::ValueDef::Union(..) => false,
                };
                if reachable && !dominates {
                    return Err(not_dominated(value));
                }
                // One-sided escapes are joins' parameters.
                if !matches!(def, ir::ValueDef::Param(..)) {
                    continue;
                }
                let Some(&(join, first)) = one_sided.get(&value) else {
                    continue;
                };
                if arms.get(&block) != Some(&first) {
                    return Err(NotSpliced(format!(
                        "one-sided escape {value} is used outside its function's arms"
                    )));
                }
                if join == block || !domtree.block_dominates(join, block) {
                    return Err(NotSpliced(format!(
                        "one-sided escape {value} is used where its join does not dominate"
                    )));
                }
            }
            read[inst] = true;
        }
    }
    Ok(())
}

/// Makes every use of an escaping value outside the arm that defines it read the
/// join's parameter instead.
fn replace_escapes(merged: &mut Function, escaped: &FxHashMap<Value, (Value, Block)>) {
    // Every use of an escaping value outside the arm that defines it is dominated
    // by the join (in the first function the definition dominates the use; the
    // use is after the stretch in its block, or in a block that block dominates),
    // so it may read the join's parameter, which holds the value of the arm that
    // ran: the first function's when the selector is 0.
    // Each instruction on its own: read in the order of numbers.
    let insts: Vec<(Inst, Block)> = insts_by_number(merged)
        .filter_map(|inst| Some((inst, merged.layout.inst_block(inst)?)))
        .collect();
    for (inst, block) in insts {
        merged.dfg.map_inst_values(inst, |v| match escaped.get(&v) {
            Some(&(param, arm)) if arm != block => param,
            _ => v,
        });
    }
}

/// `name`, a callee's name in `source`, as a name of `merged` (a user name
/// declared in `merged` again).
pub(crate) fn imported_name(
    source: &Function,
    merged: &mut Function,
    name: &ExternalName,
) -> ExternalName {
    match name {
        ExternalName::User(r) => {
            let user = source.params.user_named_funcs()[*r].clone();
            ExternalName::User(merged.declare_imported_user_function(user))
        }
        other => other.clone(),
    }
}

/// `table` with each branch mapped by `map`; `None` for a table without a
/// default (which a verified function does not have).
pub(crate) fn mapped_jump_table(
    table: &ir::JumpTableData,
    mut map: impl FnMut(BlockCall) -> BlockCall,
) -> Option<ir::JumpTableData> {
    let mut branches = table.all_branches().iter().map(|&call| map(call));
    let default = branches.next()?;
    let rest: Vec<BlockCall> = branches.collect();
    Some(ir::JumpTableData::new(default, &rest))
}

/// Copies instructions of the second function into the merged body.
struct Copier<'a> {
    merged: &'a mut Function,
    second: &'a Function,
    /// The second function's values and what they are in the merged body.
    values: FxHashMap<Value, Value>,
    /// The second function's blocks and the merged body's at the same position
    /// (only when a stretch ends its block).
    blocks: FxHashMap<Block, Block>,
    func_refs: FxHashMap<FuncRef, FuncRef>,
    sig_refs: FxHashMap<SigRef, SigRef>,
    /// What could not be copied, if anything.
    missing: Option<String>,
    /// Each arm block made, and whether it runs the first function's stretch
    /// (selector 0) or the second's.
    arms: FxHashMap<Block, bool>,
    /// Each join parameter that holds a one-sided escape, with its join and
    /// whether it is the first function's value (read only by first arms).
    one_sided: FxHashMap<Value, (Block, bool)>,
    /// The second function's unpaired blocks (merging by block pairing).
    unpaired: FxHashSet<Block>,
    /// Values of the second's unpaired blocks that a second arm copied before
    /// them uses, each with the stand-in it reads until the block is copied
    /// (a parameter of `forward_block`, which is never laid out).
    forwards: FxHashMap<Value, Value>,
    forward_block: Option<Block>,
}

impl<'a> Copier<'a> {
    /// A copier of `second`'s stretches into `merged`, which maps `second`'s
    /// values and blocks as `alignment` pairs them, and has copied nothing yet.
    fn new(merged: &'a mut Function, second: &'a Function, alignment: &Alignment) -> Self {
        Self {
            merged,
            second,
            values: alignment.values.iter().copied().collect(),
            blocks: alignment.blocks.iter().copied().collect(),
            func_refs: FxHashMap::default(),
            sig_refs: FxHashMap::default(),
            missing: None,
            arms: FxHashMap::default(),
            one_sided: FxHashMap::default(),
            unpaired: alignment.unpaired.iter().copied().collect(),
            forwards: FxHashMap::default(),
            forward_block: None,
        }
    }
}

impl Copier<'_> {
    /// Splices a stretch that ends its block: each arm runs its function's rest
    /// of the block, terminator included.
    fn splice_ending(&mut self, selector: Value, stretch: &Stretch) -> Result<(), NotSpliced> {
        let (Some(&start), false) = (stretch.first.first(), stretch.second.is_empty()) else {
            return Err(NotSpliced(
                "a stretch ending its block without a terminator".into(),
            ));
        };
        if !stretch.escapes.is_empty() {
            return Err(NotSpliced(
                "a value escapes a stretch ending its block".into(),
            ));
        }
        let srcloc = self.merged.srcloc(start);
        // Where the stretch is now: a stretch spliced before it in the same
        // block (merging by block pairing) moved it to that stretch's join.
        let block = self
            .merged
            .layout
            .inst_block(start)
            .unwrap_or(stretch.block);
        let first_arm = self.merged.dfg.make_block();
        self.merged.layout.split_block(first_arm, start);
        let second_arm = self.merged.dfg.make_block();
        self.merged.layout.insert_block_after(second_arm, first_arm);
        for &inst in &stretch.second {
            self.copy(inst, second_arm)?;
        }
        self.arms.insert(first_arm, true);
        self.arms.insert(second_arm, false);
        let mut pos = FuncCursor::new(self.merged).at_bottom(block);
        pos.set_srcloc(srcloc);
        pos.ins().brif(selector, second_arm, &[], first_arm, &[]);
        Ok(())
    }

    fn splice(
        &mut self,
        selector: Value,
        stretch: &Stretch,
        suffix: Inst,
        escaped: &mut FxHashMap<Value, (Value, Block)>,
    ) -> Result<(), NotSpliced> {
        if !stretch.escapes.is_empty() && (stretch.first.is_empty() || stretch.second.is_empty()) {
            return Err(NotSpliced("a value escapes an empty stretch".into()));
        }
        let one_sided = !stretch.first_only.is_empty() || !stretch.second_only.is_empty();
        let srcloc = self.merged.srcloc(suffix);
        // Where the stretch is now: a stretch spliced before it in the same
        // block (several stretches per block, `align/anchors.rs`, or block
        // pairing) moved it to that stretch's join.
        let block = self
            .merged
            .layout
            .inst_block(suffix)
            .unwrap_or(stretch.block);
        let join = self.merged.dfg.make_block();
        self.merged.layout.split_block(join, suffix);
        // The join's parameters: the escapes, then the first function's one-sided
        // escapes, then the second's.
        let mut from_first = Vec::new();
        for &(first, _) in &stretch.escapes {
            let ty = self.merged.dfg.value_type(first);
            self.merged.dfg.append_block_param(join, ty);
            from_first.push(first);
        }
        let first_only_types: Vec<ir::Type> = stretch
            .first_only
            .iter()
            .map(|&v| self.merged.dfg.value_type(v))
            .collect();
        let second_only_types: Vec<ir::Type> = stretch
            .second_only
            .iter()
            .map(|&v| self.second.dfg.value_type(v))
            .collect();
        for &ty in first_only_types.iter().chain(&second_only_types) {
            self.merged.dfg.append_block_param(join, ty);
        }
        from_first.extend(&stretch.first_only);
        let first_arm = match stretch.first.first() {
            Some(&start) => {
                let arm = self.merged.dfg.make_block();
                self.merged.layout.split_block(arm, start);
                Some(arm)
            }
            None if one_sided => {
                let arm = self.merged.dfg.make_block();
                self.merged.layout.insert_block(arm, join);
                Some(arm)
            }
            None => None,
        };
        if let Some(arm) = first_arm {
            for &ty in &second_only_types {
                from_first.push(self.placeholder(arm, ty, srcloc)?);
            }
            self.jump(arm, join, &from_first, srcloc);
            self.arms.insert(arm, true);
        }
        let second_arm = if stretch.second.is_empty() && !one_sided {
            None
        } else {
            let arm = self.merged.dfg.make_block();
            self.merged.layout.insert_block(arm, join);
            for &inst in &stretch.second {
                self.copy(inst, arm)?;
            }
            let mut from_second = Vec::new();
            for &(_, second) in &stretch.escapes {
                from_second.push(self.copied(second)?);
            }
            for &ty in &first_only_types {
                from_second.push(self.placeholder(arm, ty, srcloc)?);
            }
            for &second in &stretch.second_only {
                from_second.push(self.copied(second)?);
            }
            self.jump(arm, join, &from_second, srcloc);
            self.arms.insert(arm, false);
            Some(arm)
        };
        let params = self.merged.dfg.block_params(join).to_vec();
        let (paired, rest) = params.split_at(stretch.escapes.len());
        let (first_params, second_params) = rest.split_at(stretch.first_only.len());
        let arm = first_arm.unwrap_or(join);
        for (&(first, second), &param) in stretch.escapes.iter().zip(paired) {
            escaped.insert(first, (param, arm));
            // Later stretches of the second function read the join's parameter
            // too: through the first function's value, which becomes it.
            self.values.insert(second, first);
        }
        for (&first, &param) in stretch.first_only.iter().zip(first_params) {
            escaped.insert(first, (param, arm));
            self.one_sided.insert(param, (join, true));
        }
        for (&second, &param) in stretch.second_only.iter().zip(second_params) {
            // Later second arms read the join's parameter.
            self.values.insert(second, param);
            self.one_sided.insert(param, (join, false));
        }
        let mut pos = FuncCursor::new(self.merged).at_bottom(block);
        pos.set_srcloc(srcloc);
        pos.ins().brif(
            selector,
            second_arm.unwrap_or(join),
            &[],
            first_arm.unwrap_or(join),
            &[],
        );
        Ok(())
    }

    /// The merged body's copy of the second function's `value`, a result of the
    /// stretch just copied.
    fn copied(&self, value: Value) -> Result<Value, NotSpliced> {
        match self.values.get(&self.second.dfg.resolve_aliases(value)) {
            Some(&copied) => Ok(copied),
            None => Err(NotSpliced(format!("{value} escapes but is not copied"))),
        }
    }

    /// A placeholder of type `ty` (zero) appended to `block`: what an arm passes
    /// for the other function's one-sided escape, which nothing it runs reads.
    fn placeholder(
        &mut self,
        block: Block,
        ty: ir::Type,
        srcloc: ir::SourceLoc,
    ) -> Result<Value, NotSpliced> {
        let mut pos = FuncCursor::new(self.merged).at_bottom(block);
        pos.set_srcloc(srcloc);
        insert_placeholder(&mut pos, ty)
    }

    fn jump(&mut self, from: Block, to: Block, args: &[Value], srcloc: ir::SourceLoc) {
        let args: Vec<ir::BlockArg> = args.iter().map(|&v| ir::BlockArg::Value(v)).collect();
        let mut pos = FuncCursor::new(self.merged).at_bottom(from);
        pos.set_srcloc(srcloc);
        pos.ins().jump(to, &args);
    }

    /// Appends a copy of the second function's `inst` to `block`.
    fn copy(&mut self, inst: Inst, block: Block) -> Result<(), NotSpliced> {
        let second = self.second;
        let data = second.dfg.insts[inst].map(&mut *self);
        if let Some(what) = self.missing.take() {
            return Err(NotSpliced(format!("cannot copy {inst}: {what}")));
        }
        let copy = self.merged.dfg.make_inst(data);
        self.merged
            .dfg
            .make_inst_results(copy, second.dfg.ctrl_typevar(inst));
        let results = second.dfg.inst_results(inst);
        let copied = self.merged.dfg.inst_results(copy);
        if results.len() != copied.len()
            || results
                .iter()
                .zip(copied)
                .any(|(&r, &c)| second.dfg.value_type(r) != self.merged.dfg.value_type(c))
        {
            return Err(NotSpliced(format!("{inst} changed its result types")));
        }
        for (&r, &c) in results.iter().zip(copied) {
            self.values.insert(r, c);
        }
        self.merged.layout.append_inst(copy, block);
        self.merged.set_srcloc(copy, second.srcloc(inst));
        Ok(())
    }

    /// Makes each stand-in of `forwards` an alias of the copy it stands for,
    /// and every use read the copy.
    fn resolve_forwards(&mut self) -> Result<(), NotSpliced> {
        let Some(block) = self.forward_block.take() else {
            return Ok(());
        };
        self.merged.dfg.detach_block_params(block);
        for (&value, &stand_in) in &self.forwards {
            let Some(&copy) = self.values.get(&value) else {
                return Err(NotSpliced(format!("{value} is used but not copied")));
            };
            self.merged.dfg.change_to_alias(stand_in, copy);
        }
        self.merged.dfg.resolve_all_aliases();
        Ok(())
    }

    fn refuse(&mut self, what: &str) {
        self.missing.get_or_insert_with(|| what.to_string());
    }
}

impl InstructionMapper for Copier<'_> {
    fn map_value(&mut self, value: Value) -> Value {
        let value = self.second.dfg.resolve_aliases(value);
        match self.values.get(&value) {
            Some(&v) => v,
            None => {
                // A result of an unpaired block not copied yet: a stand-in.
                let unpaired = match self.second.dfg.value_def(value) {
                    ir::ValueDef::Result(inst, _) => self
                        .second
                        .layout
                        .inst_block(inst)
                        .is_some_and(|b| self.unpaired.contains(&b)),
                    _ => false,
                };
                if !unpaired {
                    self.refuse("a value defined outside the stretch and not aligned");
                    return value;
                }
                if let Some(&stand_in) = self.forwards.get(&value) {
                    return stand_in;
                }
                let block = *self
                    .forward_block
                    .get_or_insert_with(|| self.merged.dfg.make_block());
                let ty = self.second.dfg.value_type(value);
                let stand_in = self.merged.dfg.append_block_param(block, ty);
                self.forwards.insert(value, stand_in);
                stand_in
            }
        }
    }

    fn map_value_list(&mut self, value_list: ValueList) -> ValueList {
        let mut list = ValueList::new();
        for &v in value_list.as_slice(&self.second.dfg.value_lists) {
            let v = self.map_value(v);
            list.push(v, &mut self.merged.dfg.value_lists);
        }
        list
    }

    fn map_global_value(&mut self, global_value: ir::GlobalValue) -> ir::GlobalValue {
        self.refuse("a global value");
        global_value
    }

    fn map_jump_table(&mut self, jump_table: ir::JumpTable) -> ir::JumpTable {
        // A copied `br_table` gets a table of its own, each target mapped as a
        // branch's is.
        let table = self.second.dfg.jump_tables[jump_table].clone();
        match mapped_jump_table(&table, |call| self.map_block_call(call)) {
            Some(mapped) => self.merged.dfg.jump_tables.push(mapped),
            None => {
                self.refuse("a jump table without a default");
                jump_table
            }
        }
    }

    fn map_exception_table(&mut self, exception_table: ir::ExceptionTable) -> ir::ExceptionTable {
        self.refuse("an exception table");
        exception_table
    }

    fn map_block_call(&mut self, block_call: BlockCall) -> BlockCall {
        // Only a copied terminator across CFGs names blocks: each becomes the
        // first function's block at the same position of the walk.
        let pool = &self.second.dfg.value_lists;
        let target = block_call.block(pool);
        let Some(&block) = self.blocks.get(&target) else {
            self.refuse("a branch");
            return block_call;
        };
        let mut args = Vec::new();
        for arg in block_call.args(pool) {
            match arg {
                ir::BlockArg::Value(v) => args.push(ir::BlockArg::Value(self.map_value(v))),
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
        if let Some(&mapped) = self.func_refs.get(&func_ref) {
            return mapped;
        }
        let data = &self.second.dfg.ext_funcs[func_ref];
        let name = imported_name(self.second, self.merged, &data.name);
        let signature = self.map_sig_ref(data.signature);
        let mapped = self.merged.import_function(ExtFuncData {
            name,
            signature,
            colocated: data.colocated,
            patchable: data.patchable,
        });
        self.func_refs.insert(func_ref, mapped);
        mapped
    }

    fn map_sig_ref(&mut self, sig_ref: SigRef) -> SigRef {
        if let Some(&mapped) = self.sig_refs.get(&sig_ref) {
            return mapped;
        }
        let mapped = self
            .merged
            .import_signature(self.second.dfg.signatures[sig_ref].clone());
        self.sig_refs.insert(sig_ref, mapped);
        mapped
    }

    fn map_stack_slot(&mut self, stack_slot: StackSlot) -> StackSlot {
        self.refuse("a stack slot");
        stack_slot
    }

    fn map_dynamic_stack_slot(&mut self, slot: ir::DynamicStackSlot) -> ir::DynamicStackSlot {
        self.refuse("a dynamic stack slot");
        slot
    }

    fn map_constant(&mut self, constant: ir::Constant) -> ir::Constant {
        let data = self.second.dfg.constants.get(constant).clone();
        self.merged.dfg.constants.insert(data)
    }

    fn map_immediate(&mut self, immediate: ir::Immediate) -> ir::Immediate {
        let data = self.second.dfg.immediates[immediate].clone();
        self.merged.dfg.immediates.push(data)
    }

    fn map_mem_flags(&mut self, flags: ir::MemFlags) -> ir::MemFlags {
        let mut data = self.second.dfg.mem_flags[flags];
        if let Some(region) = data.alias_region() {
            let region = self.second.dfg.alias_regions[region].clone();
            data.set_alias_region(Some(self.merged.dfg.alias_regions.insert(region)));
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
