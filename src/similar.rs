//! Merging *similar* functions: bodies that are equal but for a few constants.
//!
//! Two functions are similar when their encodings (the one walk of
//! [`crate::adapter`]) are equal once the immediates of `iconst`, `f32const` and
//! `f64const` ([`Hole`]s; immediate offsets are not holes, they change addressing)
//! and the callees of direct calls to module functions ([`CallSite`]s; the callee's
//! signature still has to be equal) are left out. A group of similar functions whose differing constants are few
//! (`max_holes`) becomes one *merged body*, a copy of the first member in which each
//! differing constant is a new trailing parameter (and each differing callee a
//! function-address parameter called with `call_indirect`), and each member becomes
//! a thin *entry point* with its own name, signature and address that calls the
//! merged body with its own constants and callee addresses (`return_call` where the calling convention allows tail
//! calls). This is Swift's and binaryen's "merge similar functions".
//!
//! A group is merged only when it pays: the bytes Cranelift emits for the host ISA
//! (`opt_level=speed`) for the merged body and the entry points must be fewer than
//! for the members (or, without a host ISA, the instruction counts). Groups,
//! parameters and names are deterministic: the same input gives the same output.
//!
//! The pass runs on a module whose identical functions were already merged, so
//! callees are compared by identity and function addresses by exact name.

use crate::adapter::walk_in_parallel;
use crate::adapter::{
    CallSite, FunctionEncoding, Hole, WalkOptions, encode_function, hole_blind_hash,
};
use crate::apply::{ForwardedArgument, build_forwarding_body};
use crate::hash::StructuralHash;
use crate::merging_module::compiled_size;
use crate::module::{FuncIndex, FunctionSet};
use crate::symbols::{NameAuthority, SymbolName};
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::{
    AbiParam, Function, InstBuilder, InstructionData, Opcode, Type, UserFuncName, types,
};
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use std::collections::HashMap;

/// Options of the similar-function merge.
#[derive(Clone, Debug)]
pub struct SimilarOptions {
    /// At most this many constants may differ within a group; each becomes a
    /// parameter of the merged body.
    pub max_holes: usize,
    /// A group is merged only when it saves at least this much: code bytes when
    /// sizes are measured on an ISA, instructions otherwise. At least 1 (a merge
    /// that saves nothing is never made).
    pub min_saved: u64,
}

impl Default for SimilarOptions {
    fn default() -> Self {
        Self {
            max_holes: 4,
            min_saved: 1,
        }
    }
}

/// What a parameter of a merged body stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HoleKind {
    /// An integer or float constant; the values are its bits.
    Constant,
    /// The callee of a direct call; the values are the callees' [`FuncIndex`]es. The
    /// merged body calls it with `call_indirect` through the parameter, and each
    /// entry point passes its callee's `func_addr`.
    Callee,
}

/// A constant or callee that differs between the members of a group: a trailing
/// parameter of the merged body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoleParameter {
    /// Constant or callee.
    pub kind: HoleKind,
    /// The parameter's type (the pointer type for a callee).
    pub ty: Type,
    /// Its value in each member, in member order.
    pub values: Vec<u64>,
}

/// A place in a body that may become a parameter.
#[derive(Copy, Clone, Debug)]
enum Slot {
    Constant(Hole),
    Callee(CallSite),
}

impl Slot {
    fn position(self) -> u32 {
        match self {
            Slot::Constant(h) => h.position,
            Slot::Callee(c) => c.position,
        }
    }
}

/// One group of similar functions merged into one body.
#[derive(Clone, Debug)]
pub struct SimilarGroup {
    /// The members, in input order; the first one's body is the merged body's.
    pub members: Vec<FuncIndex>,
    /// The differing constants, in walk order of the body.
    pub parameters: Vec<HoleParameter>,
    /// The name of the merged body.
    pub merged_name: UserFuncName,
    /// Code bytes of the members (host ISA), or instructions without a host ISA.
    pub size_before: u64,
    /// Code bytes of the merged body and the entry points, or instructions.
    pub size_after: u64,
    /// Whether the sizes are code bytes (else instruction counts).
    pub sizes_in_bytes: bool,
}

/// The result of the similar-function merge.
#[derive(Default)]
pub struct SimilarOutcome {
    /// The merged groups, ordered by first member.
    pub groups: Vec<SimilarGroup>,
    /// Each member's new body: an entry point calling its group's merged body.
    pub entry_points: SecondaryMap<FuncIndex, Option<Function>>,
    /// One merged body per group, in group order.
    pub merged_bodies: Vec<Function>,
    /// Groups of similar functions found but not merged, with the reason.
    pub rejected: Vec<(Vec<FuncIndex>, String)>,
}

impl SimilarOutcome {
    /// The group whose first member is `f`, with its merged body.
    pub fn merged_before(&self, f: FuncIndex) -> Option<(&SimilarGroup, &Function)> {
        self.groups
            .iter()
            .zip(&self.merged_bodies)
            .find(|(g, _)| g.members.first() == Some(&f))
    }
}

/// Finds the groups of similar functions in `module` and builds their merged bodies
/// and entry points, measuring sizes on the host ISA.
pub fn merge_similar(module: &FunctionSet, options: &SimilarOptions) -> SimilarOutcome {
    let isa = host_isa();
    merge_similar_for(module, options, isa.as_deref())
}

/// Like [`merge_similar`], for code compiled by `isa` (sizes are measured on it, and
/// entry points use `return_call` only where it compiles: the `tail` convention,
/// with frame pointers kept). Without an ISA, sizes are instruction counts.
pub fn merge_similar_for(
    module: &FunctionSet,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
) -> SimilarOutcome {
    merge_similar_reserving(module, options, isa, NameAuthority::new())
}

/// Like [`merge_similar_for`], never naming a merged body with a name `authority`
/// knows (besides every name `module` defines or mentions).
pub fn merge_similar_reserving(
    module: &FunctionSet,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
    authority: NameAuthority,
) -> SimilarOutcome {
    let walk = WalkOptions {
        addresses_significant: true,
        ..WalkOptions::default()
    };
    let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
    let hashes = walk_in_parallel(module, &all, |func, scratch| {
        hole_blind_hash(func, module, walk, scratch).ok()
    });

    // Buckets of functions sharing the constant-blind hash.
    let mut by_hash: Vec<(StructuralHash, FuncIndex)> = all
        .iter()
        .zip(&hashes)
        .filter_map(|(&f, h)| h.map(|h| (h, f)))
        .collect();
    by_hash.sort_unstable();
    let buckets: Vec<&[(StructuralHash, FuncIndex)]> = by_hash
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|run| run.len() > 1)
        .collect();
    let candidates: Vec<FuncIndex> = buckets.iter().flat_map(|b| b.iter().map(|e| e.1)).collect();
    let encoded = walk_in_parallel(module, &candidates, |func, scratch| {
        encode_function(func, module, walk, scratch).ok()
    });
    let mut encodings: SecondaryMap<FuncIndex, Option<FunctionEncoding>> = SecondaryMap::new();
    for (&f, e) in candidates.iter().zip(encoded) {
        encodings[f] = e;
    }

    // Groups: equal encodings with the constants blanked out.
    let mut groups: Vec<Vec<FuncIndex>> = Vec::new();
    let mut outcome_rejections = Vec::new();
    for bucket in buckets {
        let mut keyed: Vec<(Vec<u64>, FuncIndex)> = bucket
            .iter()
            .filter_map(|&(_, f)| encodings[f].as_ref().map(|e| (blanked(e), f)))
            .collect();
        keyed.sort();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            if run.len() > 1 {
                groups.push(run.iter().map(|e| e.1).collect());
            }
        }
    }
    // A group with more differing holes than allowed is split into subgroups that
    // agree on enough of them.
    let mut within_limit = Vec::new();
    for members in groups {
        let parts = split_to_limit(members.clone(), &encodings, options.max_holes);
        if parts.is_empty() {
            let differing = differing_positions(&members, &encodings).len();
            outcome_rejections.push((
                members,
                format!(
                    "{differing} constants or callees differ (at most {}), and no two members agree on enough of them",
                    options.max_holes
                ),
            ));
        }
        within_limit.extend(parts);
    }
    let mut groups = within_limit;
    groups.sort_by_key(|g| g[0]);

    let pointer_type = isa.map_or(types::I64, |isa| isa.pointer_type());
    let frame_pointers = isa.is_none_or(|isa| isa.flags().preserve_frame_pointers());
    let mut names = MergedNames::new(module, authority);
    let mut outcome = SimilarOutcome {
        rejected: outcome_rejections,
        ..SimilarOutcome::default()
    };
    for members in groups {
        let Some(first) = encodings[members[0]].as_ref() else {
            continue;
        };
        let mut slots: Vec<Slot> = first
            .holes()
            .iter()
            .map(|&h| Slot::Constant(h))
            .chain(first.call_sites().iter().map(|&c| Slot::Callee(c)))
            .collect();
        slots.sort_by_key(|s| s.position());
        // Which constants and callees differ between members.
        let mut parameters = Vec::new();
        let mut differing: Vec<(Slot, Type)> = Vec::new();
        for slot in slots {
            let values: Vec<u64> = members
                .iter()
                .filter_map(|&m| encodings[m].as_ref())
                .map(|e| e.tokens()[slot.position() as usize])
                .collect();
            if values.iter().all(|&v| v == values[0]) {
                continue;
            }
            let (kind, ty) = match slot {
                Slot::Constant(h) => (HoleKind::Constant, h.ty),
                Slot::Callee(_) => (HoleKind::Callee, pointer_type),
            };
            parameters.push(HoleParameter { kind, ty, values });
            differing.push((slot, ty));
        }
        if parameters.is_empty() {
            // Equal functions left apart on purpose (distinct addresses).
            continue;
        }
        if parameters.len() > options.max_holes {
            outcome.rejected.push((
                members,
                format!(
                    "{} constants differ (at most {})",
                    parameters.len(),
                    options.max_holes
                ),
            ));
            continue;
        }
        let merged_name = names.next(&module.get(members[0]).func.name);
        let first_func = &module.get(members[0]).func;
        let merged = build_merged_body(first_func, merged_name.clone(), &differing);
        let entry_points: Vec<Function> = members
            .iter()
            .enumerate()
            .map(|(i, &m)| {
                let func = &module.get(m).func;
                let extra: Vec<ForwardedArgument> = parameters
                    .iter()
                    .map(|p| match p.kind {
                        HoleKind::Constant => ForwardedArgument::Constant(p.ty, p.values[i]),
                        HoleKind::Callee => {
                            let callee = &module.get(FuncIndex::new(p.values[i] as usize)).func;
                            ForwardedArgument::FunctionAddress {
                                name: callee.name.clone(),
                                signature: callee.signature.clone(),
                                pointer: p.ty,
                            }
                        }
                    })
                    .collect();
                let tail_call = func.signature.call_conv.supports_tail_calls() && frame_pointers;
                build_forwarding_body(func, &merged_name, &merged.signature, &extra, tail_call)
            })
            .collect();
        let (size_before, size_after, sizes_in_bytes) =
            sizes(isa, module, &members, &merged, &entry_points);
        let min_saved = options.min_saved.max(1);
        if size_after.saturating_add(min_saved) > size_before {
            let reason = if size_after >= size_before {
                format!("not smaller ({size_before} -> {size_after})")
            } else {
                format!(
                    "saves {} (less than {min_saved}: {size_before} -> {size_after})",
                    size_before - size_after
                )
            };
            outcome.rejected.push((members, reason));
            names.release(&merged_name);
            continue;
        }
        for (&m, entry) in members.iter().zip(entry_points) {
            outcome.entry_points[m] = Some(entry);
        }
        outcome.merged_bodies.push(merged);
        outcome.groups.push(SimilarGroup {
            members,
            parameters,
            merged_name,
            size_before,
            size_after,
            sizes_in_bytes,
        });
    }
    outcome
        .rejected
        .sort_by_key(|(members, _)| members.first().copied());
    outcome
}

/// The token stream with every constant and direct callee blanked. Which positions
/// hold them is decided by the tokens before them (the grammar is deterministic), so
/// two streams equal once blanked have them at the same positions.
fn blanked(encoding: &FunctionEncoding) -> Vec<u64> {
    let mut tokens = encoding.tokens().to_vec();
    for hole in encoding.holes() {
        tokens[hole.position as usize] = 0;
    }
    for call in encoding.call_sites() {
        tokens[call.position as usize] = 0;
    }
    tokens
}

/// A copy of `first` named `name`, whose `differing` constants and callees are
/// trailing parameters: a constant's value becomes an alias of its new entry block
/// parameter (the constant instruction is removed), a direct call becomes a
/// `call_indirect` through its parameter.
fn build_merged_body(first: &Function, name: UserFuncName, differing: &[(Slot, Type)]) -> Function {
    let mut func = first.clone();
    func.name = name;
    let Some(entry) = func.layout.entry_block() else {
        return func;
    };
    for &(slot, ty) in differing {
        func.signature.params.push(AbiParam::new(ty));
        let param = func.dfg.append_block_param(entry, ty);
        match slot {
            Slot::Constant(hole) => {
                let value = func.dfg.first_result(hole.inst);
                func.dfg.clear_results(hole.inst);
                func.layout.remove_inst(hole.inst);
                func.dfg.change_to_alias(value, param);
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
    func
}

/// Positions (in the first member's tokens; the layout is the same in every
/// member) of the constants and direct callees whose values differ between
/// `members`.
fn differing_positions(
    members: &[FuncIndex],
    encodings: &SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
) -> Vec<u32> {
    let Some(first) = members.first().and_then(|&m| encodings[m].as_ref()) else {
        return Vec::new();
    };
    let mut positions: Vec<u32> = first
        .holes()
        .iter()
        .map(|h| h.position)
        .chain(first.call_sites().iter().map(|c| c.position))
        .filter(|&p| {
            let value = first.tokens()[p as usize];
            members
                .iter()
                .filter_map(|&m| encodings[m].as_ref())
                .any(|e| e.tokens()[p as usize] != value)
        })
        .collect();
    positions.sort_unstable();
    positions
}

/// `members` split into subgroups in which at most `max_holes` constants or callees
/// differ: split by the differing hole with the fewest distinct values (the one
/// most members agree on), recursively; members left alone drop out. A group
/// already within the limit is returned as it is; an empty result means no two
/// members agree on enough.
fn split_to_limit(
    members: Vec<FuncIndex>,
    encodings: &SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    max_holes: usize,
) -> Vec<Vec<FuncIndex>> {
    let differing = differing_positions(&members, encodings);
    if differing.len() <= max_holes {
        return vec![members];
    }
    let value = |m: FuncIndex, p: u32| encodings[m].as_ref().map(|e| e.tokens()[p as usize]);
    let distinct = |p: u32| {
        let mut values: Vec<Option<u64>> = members.iter().map(|&m| value(m, p)).collect();
        values.sort_unstable();
        values.dedup();
        values.len()
    };
    let Some(&split_at) = differing.iter().min_by_key(|&&p| (distinct(p), p)) else {
        return Vec::new();
    };
    // Parts in order of their first member, members in input order.
    let mut parts: Vec<(Option<u64>, Vec<FuncIndex>)> = Vec::new();
    for &m in &members {
        let v = value(m, split_at);
        match parts.iter_mut().find(|(key, _)| *key == v) {
            Some((_, part)) => part.push(m),
            None => parts.push((v, vec![m])),
        }
    }
    parts
        .into_iter()
        .filter(|(_, part)| part.len() > 1)
        .flat_map(|(_, part)| split_to_limit(part, encodings, max_holes))
        .collect()
}

/// The host ISA at `opt_level=speed` (with frame pointers, which `return_call`
/// needs on x86_64), or `None` where Cranelift has no backend for the host.
pub fn host_isa() -> Option<OwnedTargetIsa> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").ok()?;
    flags.set("preserve_frame_pointers", "true").ok()?;
    cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()
}

/// Sizes before and after: code bytes when every function compiles for `isa`, else
/// instruction counts.
fn sizes(
    isa: Option<&dyn TargetIsa>,
    module: &FunctionSet,
    members: &[FuncIndex],
    merged: &Function,
    entry_points: &[Function],
) -> (u64, u64, bool) {
    if let Some(isa) = isa {
        let before: Option<u64> = members
            .iter()
            .map(|&m| compiled_size(isa, &module.get(m).func).ok())
            .sum();
        let after: Option<u64> = std::iter::once(merged)
            .chain(entry_points)
            .map(|f| compiled_size(isa, f).ok())
            .sum();
        if let (Some(before), Some(after)) = (before, after) {
            return (before, after, true);
        }
    }
    let count = |f: &Function| -> u64 {
        f.layout
            .blocks()
            .map(|b| f.layout.block_insts(b).count() as u64)
            .sum()
    };
    let before = members.iter().map(|&m| count(&module.get(m).func)).sum();
    let after = std::iter::once(merged).chain(entry_points).map(count).sum();
    (before, after, false)
}

/// Fresh names for merged bodies: `%NAME_merged` for a test-case name, the next
/// free index of the namespace (after the largest one the module defines) for a
/// `uN:M` name. Free means unknown to the module's [`NameAuthority`]: no function
/// defines, declares or refers to it.
struct MergedNames {
    authority: NameAuthority,
    next_index: HashMap<u32, u32>,
}

impl MergedNames {
    fn new(module: &FunctionSet, mut authority: NameAuthority) -> Self {
        let mut next_index: HashMap<u32, u32> = HashMap::new();
        for (_, def) in module.iter() {
            authority.reserve_function(&def.func);
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

    fn next(&mut self, base: &UserFuncName) -> UserFuncName {
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

    /// Gives back a name that was not used.
    fn release(&mut self, name: &UserFuncName) {
        self.authority.release(&SymbolName::of_user_func_name(name));
    }
}

/// The similar-function merge run on the output of the identical-function merge:
/// the module it saw (the bodies that stayed, with their linkage) and what it did.
pub struct SimilarPass {
    /// The functions the similar merge ran on: every body of the first pass's output,
    /// in output order.
    pub module: FunctionSet,
    /// For each function of the first pass's module, its index in [`Self::module`]
    /// (`None` for a removed duplicate).
    pub index_of: SecondaryMap<FuncIndex, Option<FuncIndex>>,
    /// What the similar merge did.
    pub outcome: SimilarOutcome,
}

impl SimilarPass {
    /// Runs the similar merge over the bodies of `output`, the result of merging
    /// identical functions of `module`.
    pub fn after(
        module: &FunctionSet,
        output: &[crate::apply::OutputEntry<'_>],
        options: &SimilarOptions,
    ) -> Self {
        let isa = host_isa();
        Self::after_for(module, output, options, isa.as_deref())
    }

    /// Like [`Self::after`], for code compiled by `isa` ([`merge_similar_for`]).
    pub fn after_for(
        module: &FunctionSet,
        output: &[crate::apply::OutputEntry<'_>],
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
    ) -> Self {
        use crate::apply::OutputEntry;
        let mut set = FunctionSet::new();
        let mut index_of = SecondaryMap::new();
        for entry in output {
            let (function, body) = match entry {
                OutputEntry::Function(f, body) => (*f, &**body),
                OutputEntry::Thunk { function, body, .. } => (*function, body),
                OutputEntry::Removed { .. } => continue,
            };
            let linkage = module.get(function).linkage;
            // Names are unique in `module`, so they are in a subset of its bodies.
            if let Ok(index) = set.push(body.clone(), linkage) {
                index_of[function] = Some(index);
            }
        }
        // Names the first pass removed (erased duplicates, aliases) still mean
        // something in the output: reserve every name of the original module.
        let mut authority = NameAuthority::new();
        for (_, def) in module.iter() {
            authority.reserve_function(&def.func);
        }
        let outcome = merge_similar_reserving(&set, options, isa, authority);
        Self {
            module: set,
            index_of,
            outcome,
        }
    }

    /// The body printed for function `f` of the first pass's module: its entry point
    /// if it became one.
    pub fn entry_point(&self, f: FuncIndex) -> Option<&Function> {
        self.index_of[f].and_then(|i| self.outcome.entry_points[i].as_ref())
    }

    /// The merged body printed just before function `f` (the first member of its
    /// group), with the group.
    pub fn merged_before(&self, f: FuncIndex) -> Option<(&SimilarGroup, &Function)> {
        self.index_of[f].and_then(|i| self.outcome.merged_before(i))
    }

    /// The merged group function `f` of the first pass's module belongs to.
    pub fn group_of(&self, f: FuncIndex) -> Option<&SimilarGroup> {
        let i = self.index_of[f]?;
        self.outcome.groups.iter().find(|g| g.members.contains(&i))
    }

    /// Every function of the final module: bodies with entry points in place, then
    /// the merged bodies.
    pub fn functions(&self) -> Vec<&Function> {
        self.module
            .iter()
            .map(|(f, d)| self.outcome.entry_points[f].as_ref().unwrap_or(&d.func))
            .chain(&self.outcome.merged_bodies)
            .collect()
    }

    /// The JSON list of merged groups: members, number of parameters (holes), the
    /// merged body's name, and sizes before and after.
    pub fn json(&self) -> serde_json::Value {
        let groups: Vec<serde_json::Value> = self
            .outcome
            .groups
            .iter()
            .map(|g| {
                let members: Vec<String> = g
                    .members
                    .iter()
                    .map(|&m| self.module.display_name(m))
                    .collect();
                let unit = if g.sizes_in_bytes {
                    "bytes"
                } else {
                    "instructions"
                };
                serde_json::json!({
                    "members": members,
                    "holes": g.parameters.len(),
                    "merged_into": g.merged_name.to_string(),
                    format!("{unit}_before"): g.size_before,
                    format!("{unit}_after"): g.size_after,
                })
            })
            .collect();
        serde_json::Value::Array(groups)
    }

    /// One line for `--stats`.
    pub fn stats_line(&self) -> String {
        let groups = &self.outcome.groups;
        let members: usize = groups.iter().map(|g| g.members.len()).sum();
        let holes: usize = groups.iter().map(|g| g.parameters.len()).sum();
        let before: u64 = groups.iter().map(|g| g.size_before).sum();
        let after: u64 = groups.iter().map(|g| g.size_after).sum();
        let unit = match groups.first() {
            Some(g) if !g.sizes_in_bytes => "instructions",
            _ => "code bytes",
        };
        let mut line = format!(
            "  similar: {} groups ({members} functions, {holes} parameters), {before} -> {after} {unit}; {} groups not merged\n",
            groups.len(),
            self.outcome.rejected.len()
        );
        for (members, reason) in self.outcome.rejected.iter().take(5) {
            let names: Vec<String> = members
                .iter()
                .map(|&m| self.module.display_name(m))
                .collect();
            line.push_str(&format!("    not merged: {}: {reason}\n", names.join(", ")));
        }
        line
    }
}
