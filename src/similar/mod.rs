//! Merging *similar* functions: bodies that are equal but for a few constants.
//!
//! Two functions are similar when their encodings (the one walk of
//! `identical/encode.rs`) are equal once the immediates of `iconst`,
//! `f32const` and `f64const` (`Hole`s; immediate offsets are not holes, they
//! change addressing) and the callees of direct calls to module functions
//! (`CallSite`s; the callee's
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

//!
//! Files: `groups` (which functions are similar, which constants differ),
//! `merged_body` (the parameterized copy and its name), `entry_points` (the
//! members' new bodies) and `cost` (code size, which decides whether a group
//! pays). This file runs them.

pub(crate) mod cost;
mod entry_points;
mod groups;
mod merged_body;

pub use groups::{HoleKind, HoleParameter};

use crate::identical::encode::{FunctionEncoding, WalkOptions};
use crate::identical::rewrite::OutputEntry;
use crate::ir::{FuncIndex, FunctionSet, NameAuthority};
use cost::{host_isa, sizes};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Function, UserFuncName, types};
use cranelift_codegen::isa::TargetIsa;
use entry_points::build_entry_points;
use groups::{Differing, differing_parameters, find_groups};
use merged_body::{MergedNames, build_merged_body};

/// Options of the similar-function merge.
#[derive(Clone, Debug)]
#[non_exhaustive]
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

impl SimilarOptions {
    /// These options with at most `max_holes` differing constants per group.
    pub fn with_max_holes(mut self, max_holes: usize) -> Self {
        self.max_holes = max_holes;
        self
    }

    /// These options merging only groups that save at least `min_saved`.
    pub fn with_min_saved(mut self, min_saved: u64) -> Self {
        self.min_saved = min_saved;
        self
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
pub(crate) fn merge_similar_reserving(
    module: &FunctionSet,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
    authority: NameAuthority,
) -> SimilarOutcome {
    // Phase 1 of 2: the groups of similar functions, each within the hole limit.
    let walk = WalkOptions {
        addresses_significant: true,
        ..WalkOptions::default()
    };
    let candidates = find_groups(module, walk, options.max_holes);

    // Phase 2 of 2: per group, the merged body and the entry points, kept when
    // they pay.
    let mut names = MergedNames::new(module, authority);
    let mut outcome = SimilarOutcome {
        rejected: candidates.rejected,
        ..SimilarOutcome::default()
    };
    for members in candidates.groups {
        match merge_group(
            module,
            members,
            &candidates.encodings,
            options,
            isa,
            &mut names,
        ) {
            GroupMerge::Merged(group, merged, entry_points) => {
                for (&m, entry) in group.members.iter().zip(entry_points) {
                    outcome.entry_points[m] = Some(entry);
                }
                outcome.merged_bodies.push(*merged);
                outcome.groups.push(group);
            }
            GroupMerge::Rejected(members, reason) => outcome.rejected.push((members, reason)),
            GroupMerge::Equal => {}
        }
    }
    outcome
        .rejected
        .sort_by_key(|(members, _)| members.first().copied());
    outcome
}

/// What became of one group.
enum GroupMerge {
    /// Merged: the group, its merged body, and each member's entry point (in
    /// member order).
    Merged(SimilarGroup, Box<Function>, Vec<Function>),
    /// Not merged, with the reason.
    Rejected(Vec<FuncIndex>, String),
    /// Nothing differs: equal functions the first pass left apart on purpose
    /// (distinct addresses).
    Equal,
}

/// Builds the merged body and the entry points of one group (members in input
/// order) and keeps them when they save at least `options.min_saved` on `isa`.
fn merge_group(
    module: &FunctionSet,
    members: Vec<FuncIndex>,
    encodings: &SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
    names: &mut MergedNames,
) -> GroupMerge {
    let pointer_type = isa.map_or(types::I64, |isa| isa.pointer_type());
    let frame_pointers = isa.is_none_or(|isa| isa.flags().preserve_frame_pointers());
    let Some(Differing {
        parameters,
        slots: differing,
    }) = differing_parameters(&members, encodings, pointer_type)
    else {
        return GroupMerge::Equal;
    };
    if parameters.is_empty() {
        return GroupMerge::Equal;
    }
    if parameters.len() > options.max_holes {
        let reason = format!(
            "{} constants differ (at most {})",
            parameters.len(),
            options.max_holes
        );
        return GroupMerge::Rejected(members, reason);
    }
    let merged_name = names.next(&module.get(members[0]).func.name);
    let first_func = &module.get(members[0]).func;
    let merged = build_merged_body(first_func, merged_name.clone(), &differing);
    let entry_points = build_entry_points(module, &members, &parameters, &merged, frame_pointers);
    let (size_before, size_after, sizes_in_bytes) =
        match sizes(isa, module, &members, &merged, &entry_points) {
            Ok(sizes) => sizes,
            Err(not_compiled) => {
                let reason = format!(
                    "the target cannot compile {}: {}",
                    not_compiled.function, not_compiled.reason
                );
                names.release(&merged_name);
                return GroupMerge::Rejected(members, reason);
            }
        };
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
        names.release(&merged_name);
        return GroupMerge::Rejected(members, reason);
    }
    let group = SimilarGroup {
        members,
        parameters,
        merged_name,
        size_before,
        size_after,
        sizes_in_bytes,
    };
    GroupMerge::Merged(group, Box::new(merged), entry_points)
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
        output: &[OutputEntry<'_>],
        options: &SimilarOptions,
    ) -> Self {
        let isa = host_isa();
        Self::after_for(module, output, options, isa.as_deref())
    }

    /// Like [`Self::after`], for code compiled by `isa` ([`merge_similar_for`]).
    pub fn after_for(
        module: &FunctionSet,
        output: &[OutputEntry<'_>],
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
    ) -> Self {
        let mut set = FunctionSet::new();
        let mut index_of = SecondaryMap::new();
        for (function, body) in output.iter().filter_map(OutputEntry::kept) {
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

    /// The merged groups described by name (the names of [`Self::module`]), in
    /// group order: what reports print.
    pub fn group_reports(&self) -> Vec<SimilarGroupReport> {
        self.outcome
            .groups
            .iter()
            .map(|g| SimilarGroupReport {
                members: g
                    .members
                    .iter()
                    .map(|&m| self.module.display_name(m))
                    .collect(),
                holes: g.parameters.len(),
                merged_into: g.merged_name.to_string(),
                size_before: g.size_before,
                size_after: g.size_after,
                sizes_in_bytes: g.sizes_in_bytes,
            })
            .collect()
    }
}

/// A merged group described by names, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimilarGroupReport {
    /// The members, spelled as in CLIF (`%f`, `u0:12`), in input order.
    pub members: Vec<String>,
    /// Number of parameters (differing constants and callees).
    pub holes: usize,
    /// The merged body's name.
    pub merged_into: String,
    /// Code bytes (or instructions) of the members.
    pub size_before: u64,
    /// Code bytes (or instructions) of the merged body and the entry points.
    pub size_after: u64,
    /// Whether the sizes are code bytes (else instruction counts).
    pub sizes_in_bytes: bool,
}
