//! The merged body of a group: a copy of its first member whose differing
//! constants and callees are trailing parameters, named by [`MergedNames`] so that
//! it never takes a name the module already gives a meaning.

use super::align::Alignment;
use super::groups::{Differing, HoleKind, Slot};
use super::pinned::pin_one_sided;
use super::sequence::build_sequence_body;
use super::size_model::{Feature, SizeFeatures, inst_feature};
use super::splice::{NotSpliced, splice_stretches};
use crate::ir::{FuncIndex, FunctionSet, NameAuthority};
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::immediates::Offset32;
use cranelift_codegen::ir::{
    AbiParam, Function, Inst, InstBuilder, InstructionData, Opcode, Type, UserFuncName, Value,
    types,
};
use rustc_hash::FxHashMap;

/// A copy of `first` named `name`, whose `differing` constants and callees are
/// trailing parameters (one per parameter of `differing`, in its order; slots
/// sharing a parameter read the same one): a constant's value becomes an alias of
/// its entry block parameter (the constant instruction is removed), a direct call
/// becomes a `call_indirect` through its parameter, and a callee load `load FLAGS
/// base+OFFSET` becomes `load FLAGS (iadd base, param)+0`: the same address at the
/// same program point, read with the same flags.
///
/// For an aligned pair, the differing stretches are then spliced in, the second
/// member's (a function of `module`) chosen where the selector parameter is
/// nonzero (`splice.rs`).
pub(crate) fn build_merged_body(
    module: &FunctionSet,
    first: &Function,
    name: UserFuncName,
    differing: &Differing,
) -> Result<Function, NotSpliced> {
    if let Some(sequence) = &differing.sequence {
        return build_sequence_body(module, first, name, sequence);
    }
    let mut func = first.clone();
    func.name = name;
    let Some(entry) = func.layout.entry_block() else {
        return Ok(func);
    };
    let params: Vec<Value> = differing
        .parameters
        .iter()
        .map(|p| {
            func.signature.params.push(AbiParam::new(p.ty));
            func.dfg.append_block_param(entry, p.ty)
        })
        .collect();
    for &(slot, index) in &differing.slots {
        let param = params[index];
        match slot {
            Slot::Constant(hole) => {
                let value = func.dfg.first_result(hole.inst);
                func.dfg.clear_results(hole.inst);
                func.layout.remove_inst(hole.inst);
                func.dfg.change_to_alias(value, param);
            }
            Slot::LoadOffset(hole) => {
                let InstructionData::Load { arg, .. } = func.dfg.insts[hole.inst] else {
                    continue;
                };
                let srcloc = func.srcloc(hole.inst);
                let mut pos = FuncCursor::new(&mut func).at_inst(hole.inst);
                pos.set_srcloc(srcloc);
                let address = pos.ins().iadd(arg, param);
                if let InstructionData::Load { arg, offset, .. } = &mut func.dfg.insts[hole.inst] {
                    *arg = address;
                    *offset = Offset32::new(0);
                }
            }
            Slot::Callee(call) => {
                let InstructionData::Call { func_ref, .. } = func.dfg.insts[call.inst] else {
                    continue;
                };
                let signature = func.dfg.ext_funcs[func_ref].signature;
                let args = func.dfg.inst_args(call.inst).to_vec();
                // A tail call stays a tail call: `return_call_indirect` ends the block
                // as `return_call` did.
                if func.dfg.insts[call.inst].opcode() == Opcode::ReturnCall {
                    func.replace(call.inst)
                        .return_call_indirect(signature, param, &args);
                } else {
                    func.replace(call.inst)
                        .call_indirect(signature, param, &args);
                }
            }
        }
    }
    if let Some(alignment) = &differing.alignment {
        let selector = differing
            .parameters
            .iter()
            .position(|p| p.kind == HoleKind::Selector)
            .map(|i| params[i]);
        let Some(selector) = selector else {
            return Err(NotSpliced("an aligned pair without a selector".into()));
        };
        let second = &module.get(alignment.second).func;
        let joined: Vec<(&Function, &Alignment)> = differing
            .joined
            .iter()
            .map(|a| (&*module.get(a.second).func, a))
            .collect();
        splice_stretches(&mut func, selector, second, alignment, &joined)?;
        pin_one_sided(&mut func, selector, 2 + joined.len())?;
    }
    Ok(func)
}

/// The size-model features of the merged body [`build_merged_body`] builds from
/// `first` for `differing`, counted from `first` without building it: `first`'s
/// features (`first_features`, counted by the caller, who has them already from
/// pricing `first` as a member) with the parameters added, without the constants that became
/// parameters, with one more `iadd` per callee load, and with each direct call
/// made indirect (its callee one more argument); for an aligned pair, per
/// stretch (`splice.rs`) one more `brif` and join block, each arm (one with
/// instructions, or both when the stretch passes a one-sided escape) a block,
/// a `jump` and a zero constant per placeholder it passes, the second's arm with
/// copies of the second member's (of `module`) instructions. `None` for a body
/// without an entry block (left as it is) and for an aligned pair with a
/// stretch that ends its block (across CFGs) or merged by sequence alignment:
/// build those. Whether the body can
/// be spliced (a one-sided escape's checks, the verifier) is not counted: a
/// pair priced so is built once the model accepts it. The groups and pairs priced so and merged
/// are checked against the bodies built by `tests/passes/parallel.rs`, and every
/// aligned pair of the filetests by `aligned_features_are_the_built_ones`.
pub(crate) fn merged_body_features(
    module: &FunctionSet,
    first: &Function,
    first_features: &SizeFeatures,
    differing: &Differing,
) -> Option<SizeFeatures> {
    first.layout.entry_block()?;
    if differing.sequence.is_some() {
        return None;
    }
    let mut features = first_features.clone();
    let params = first.signature.params.len();
    let added = differing.parameters.len();
    features.add(Feature::Params, added);
    features.add(
        Feature::StackParams,
        (params + added).saturating_sub(6) - params.saturating_sub(6),
    );
    for &(slot, _) in &differing.slots {
        match slot {
            Slot::Constant(hole) => features.remove(inst_feature(first, hole.inst), 1),
            Slot::LoadOffset(hole) => {
                if let InstructionData::Load { .. } = first.dfg.insts[hole.inst] {
                    features.add(Feature::IntArith, 1);
                }
            }
            Slot::Callee(call) => {
                if let InstructionData::Call { .. } = first.dfg.insts[call.inst] {
                    features.remove(Feature::Calls, 1);
                    features.add(Feature::IndirectCalls, 1);
                    features.add(Feature::CallArguments, 1);
                }
            }
        }
    }
    let Some(alignment) = &differing.alignment else {
        return Some(features);
    };
    // The second's unpaired blocks (block pairing) are copied whole: built to count.
    if !alignment.unpaired.is_empty() {
        return None;
    }
    let second = &module.get(alignment.second).func;
    // One more constant per placeholder an arm passes (`splice.rs`: zero).
    let placeholder = |ty: Type| match ty {
        ty if ty.is_int() && ty.bits() <= 64 => Some(Feature::SmallConstants),
        types::F32 | types::F64 => Some(Feature::FloatConstants),
        _ => None,
    };
    if !differing.joined.is_empty() {
        return group_features(module, features, alignment, &differing.joined);
    }
    for stretch in &alignment.stretches {
        // A stretch ending its block (across CFGs) has arms of its own.
        stretch.suffix?;
        let one_sided = !stretch.first_only.is_empty() || !stretch.second_only.is_empty();
        features.add(Feature::Branches, 1);
        features.add(Feature::Blocks, 1);
        if !stretch.first.is_empty() || one_sided {
            features.add(Feature::Blocks, 1);
            features.add(Feature::Jumps, 1);
            for &v in &stretch.second_only {
                features.add(placeholder(second.dfg.value_type(v))?, 1);
            }
        }
        if !stretch.second.is_empty() || one_sided {
            features.add(Feature::Blocks, 1);
            features.add(Feature::Jumps, 1);
            for &v in &stretch.first_only {
                features.add(placeholder(first.dfg.value_type(v))?, 1);
            }
        }
        add_copies(&mut features, second, &stretch.second)?;
    }
    Some(features)
}

/// Adds the features of copies of `insts` (of `func`) to `features`; `None`
/// for a branch table (whose entries the copy would count).
fn add_copies(features: &mut SizeFeatures, func: &Function, insts: &[Inst]) -> Option<()> {
    for &inst in insts {
        let data = &func.dfg.insts[inst];
        if let InstructionData::BranchTable { .. } = data {
            return None;
        }
        if data.opcode().is_call() {
            features.add(Feature::CallArguments, func.dfg.inst_args(inst).len());
        }
        features.add(inst_feature(func, inst), 1);
    }
    Some(())
}

/// [`merged_body_features`] of an aligned group of three or more
/// (`splice/group.rs`), from `features` (the first member's, with the selector
/// parameter): per stretch, a join block, a `brif` per member but the last,
/// an `iconst`, an `icmp` and a dispatch block per member past the second,
/// and each member's arm with instructions a block and a `jump`, the copied
/// arms with copies of their members' instructions. `None` for a stretch
/// ending its block (groups have none).
fn group_features(
    module: &FunctionSet,
    mut features: SizeFeatures,
    alignment: &Alignment,
    joined: &[Alignment],
) -> Option<SizeFeatures> {
    let second = &module.get(alignment.second).func;
    let members = 2 + joined.len();
    for (i, stretch) in alignment.stretches.iter().enumerate() {
        stretch.suffix?;
        features.add(Feature::Branches, members - 1);
        features.add(Feature::Blocks, 1 + (members - 2));
        features.add(Feature::SmallConstants, members - 2);
        features.add(Feature::Compares, members - 2);
        if !stretch.first.is_empty() {
            features.add(Feature::Blocks, 1);
            features.add(Feature::Jumps, 1);
        }
        let mut arms = vec![(second, &stretch.second)];
        for a in joined {
            arms.push((&module.get(a.second).func, &a.stretches.get(i)?.second));
        }
        for (func, insts) in arms {
            if !insts.is_empty() {
                features.add(Feature::Blocks, 1);
                features.add(Feature::Jumps, 1);
                add_copies(&mut features, func, insts)?;
            }
        }
    }
    Some(features)
}

/// Fresh names for merged bodies: `%NAME_merged` for a test-case name, the next
/// free index of the namespace (after the largest one the module defines) for a
/// `uN:M` name. Free means unknown to the module's [`NameAuthority`]: no function
/// defines, declares or refers to it.
pub(crate) struct MergedNames {
    authority: NameAuthority,
    next_index: FxHashMap<u32, u32>,
}

impl MergedNames {
    /// Names for merged bodies of `module`, avoiding every name `authority` knows.
    /// The functions `named` marks have their names in `authority` already.
    pub(crate) fn new(
        module: &FunctionSet,
        mut authority: NameAuthority,
        named: &SecondaryMap<FuncIndex, bool>,
    ) -> Self {
        let mut next_index: FxHashMap<u32, u32> = FxHashMap::default();
        for (f, def) in module.iter() {
            // Reserving is idempotent: a body reserved already adds nothing.
            if !named[f] {
                authority.reserve_function(&def.func);
            }
            if let UserFuncName::User(user) = &def.func.name {
                let next = next_index.entry(user.namespace).or_default();
                *next = (*next).max(user.index.wrapping_add(1));
            }
        }
        Self {
            authority,
            next_index,
        }
    }

    /// A fresh name for the merged body of a group whose first member is `base`.
    pub(crate) fn next(&mut self, base: &UserFuncName) -> UserFuncName {
        match base {
            UserFuncName::Testcase(t) => {
                let base = String::from_utf8_lossy(t.raw());
                self.authority.fresh_testcase(&base, "_merged")
            }
            UserFuncName::User(user) => {
                let next = self.next_index.entry(user.namespace).or_default();
                let name = self.authority.fresh_user(user.namespace, *next);
                if let UserFuncName::User(fresh) = &name {
                    *next = fresh.index.wrapping_add(1);
                }
                name
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::FuncIndex;
    use crate::similar::align::blocks::find_paired_pairs;
    use crate::similar::align::{AlignedSearch, Rules, find_aligned_pairs};
    use crate::similar::similar_filetests;

    /// Every aligned pair of the filetests whose merged body's features are
    /// counted has the features of the body built.
    #[test]
    fn aligned_features_are_the_built_ones() {
        let (mut counted, mut with_one_sided) = (0, 0);
        for (path, module) in similar_filetests("") {
            let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
            let mut pairs = Vec::new();
            for (one_sided, cfg) in [(false, false), (true, false), (true, true)] {
                let rules = Rules {
                    escapes: true,
                    one_sided,
                    cfg,
                    anchors: true,
                };
                pairs.extend(find_aligned_pairs(&module, &all, rules));
            }
            // Block pairing's alignments too: counted where nothing is copied whole.
            let rules = Rules {
                escapes: true,
                one_sided: true,
                cfg: true,
                anchors: true,
            };
            pairs.extend(find_paired_pairs(&module, &all, rules));
            // And the ways cut at anchors.
            let cuts: Vec<(FuncIndex, Alignment)> = pairs
                .iter()
                .filter_map(|(first, a)| a.cut.as_deref().map(|cut| (*first, cut.clone())))
                .collect();
            pairs.extend(cuts);
            {
                for (first, alignment) in pairs {
                    let first = &module.get(first).func;
                    let differing = Differing::aligned(alignment);
                    let of_first = SizeFeatures::of(first);
                    let Some(features) =
                        merged_body_features(&module, first, &of_first, &differing)
                    else {
                        continue;
                    };
                    let name = UserFuncName::testcase("built");
                    let Ok(built) = build_merged_body(&module, first, name, &differing) else {
                        continue;
                    };
                    with_one_sided += usize::from(
                        differing
                            .alignment
                            .as_ref()
                            .is_some_and(|a| a.has_one_sided_escapes()),
                    );
                    assert_eq!(SizeFeatures::of(&built), features, "{}", path.display());
                    counted += 1;
                }
            }
        }
        assert!(counted > 5, "{counted} aligned pairs counted");
        assert!(with_one_sided > 0, "a pair with a one-sided escape counted");
    }

    /// Every aligned group of the filetests (a pair, grown by every later
    /// function that aligns with its first, all aligned again where they differ
    /// at other places) has the counted features of the body built, and the
    /// body verifies.
    #[test]
    fn group_features_are_the_built_ones() {
        let (mut counted, mut widened) = (0, 0);
        for (path, module) in similar_filetests("") {
            let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
            let plain = Rules {
                escapes: true,
                ..Rules::default()
            };
            let (pairs, round) = AlignedSearch::without_one_sided(&module, &all, plain);
            for (first, alignment) in pairs {
                if !alignment.is_simple() {
                    continue;
                }
                let second = alignment.second;
                let mut group = vec![alignment];
                for &c in all.iter().filter(|&&c| c > first && c != second) {
                    let Some((_, a)) = find_aligned_pairs(&module, &[first, c], plain).pop() else {
                        continue;
                    };
                    if !a.is_simple() {
                        continue;
                    }
                    if a.same_places(&group[0]) {
                        group.push(a);
                        continue;
                    }
                    let mut with: Vec<&_> = group.iter().collect();
                    with.push(&a);
                    if let Some(again) = round.widened(&module, first, &with) {
                        group = again;
                        widened += 1;
                    }
                }
                if group.len() < 2 {
                    continue;
                }
                let joined = group.split_off(1);
                let func = &module.get(first).func;
                let differing = Differing::grouped(group.remove(0), joined);
                let of_first = SizeFeatures::of(func);
                let features =
                    merged_body_features(&module, func, &of_first, &differing).expect("counted");
                let name = UserFuncName::testcase("built");
                let built = build_merged_body(&module, func, name, &differing).expect("built");
                assert_eq!(SizeFeatures::of(&built), features, "{}", path.display());
                counted += 1;
            }
        }
        assert!(widened > 0, "a group aligned again counted");
        assert!(counted >= 2, "{counted} aligned groups counted");
    }
}
