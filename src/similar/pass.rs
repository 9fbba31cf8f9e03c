//! [`SimilarPass`]: the similar-function merge run on the identical merge's output,
//! as the command line and `MergingModule` run it, and its per-group reports.

use super::groups::{KnownFingerprints, similar_walk};
use super::plan::{Phase, PhaseClock, SimilarPhases};
use super::{SimilarGroup, SimilarOptions, SimilarOutcome, SizeBasis, merge_similar_clocked};
use crate::identical::rewrite::OutputEntry;
use crate::identical::{MergeOutcome, SimilarFingerprints};
use crate::ir::{FuncIndex, FunctionSet, NameAuthority, Reads, prefetch};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::TargetIsa;
use rustc_hash::FxHashSet;
use std::sync::Arc;

/// The similar-function merge run on the output of the identical-function merge:
/// the module it saw (the bodies that stayed, with their linkage) and what it did.
///
/// The two passes in sequence, as the command line's `--similar` and
/// `MergingModule` run them:
///
/// ```
/// use clif_merge::similar::{SimilarOptions, SimilarPass};
/// use clif_merge::{FunctionSet, Linkage, MergeOptions, merge_functions};
///
/// let function = |name: &str, constant: i32| {
///     format!(
///         "function %{name}(i32, i32) -> i32 {{
/// block0(v0: i32, v1: i32):
///     v2 = iconst.i32 {constant}
///     v3 = imul v0, v2
///     v4 = iadd v3, v1
///     v5 = bxor v4, v0
///     v6 = ishl v5, v1
///     v7 = isub v6, v3
///     v8 = band v7, v4
///     v9 = bor v8, v5
///     v10 = imul v9, v9
///     v11 = iadd v10, v6
///     v12 = bxor v11, v7
///     v13 = imul v12, v8
///     v14 = iadd v13, v9
///     v15 = rotl v14, v1
///     v16 = bxor v15, v10
///     return v16
/// }}
/// "
///     )
/// };
/// // `%f` and `%f_copy` are identical; `%g` is similar to both.
/// let clif = function("f", 17) + &function("f_copy", 17) + &function("g", 23);
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(&clif)? {
///     module.push(func, Linkage::Local)?;
/// }
///
/// // The identical merge, taking the similar merge's first look on the way.
/// let options = MergeOptions::default().with_similar_fingerprints(true);
/// let outcome = merge_functions(&module, &options);
/// assert_eq!(outcome.plan.decisions.len(), 1); // %f_copy into %f
///
/// // The similar merge on what stayed, sized for the host ISA.
/// let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())?
///     .finish(cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder()))?;
/// let similar = SimilarPass::after(&module, &outcome, &SimilarOptions::default(), Some(&*isa));
/// let reports = similar.group_reports();
/// assert_eq!(reports.len(), 1);
/// assert_eq!(reports[0].members, ["%f", "%g"]);
///
/// // The final module: %f and %g as entry points, then the merged body.
/// assert_eq!(similar.functions().len(), 3);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct SimilarPass {
    /// The functions the similar merge ran on ([`Self::module`]).
    pub(crate) module: FunctionSet,
    /// For each function of the first pass's module, its index in [`Self::module`]
    /// (`None` for a removed duplicate).
    pub(crate) index_of: SecondaryMap<FuncIndex, Option<FuncIndex>>,
    /// What the similar merge did ([`Self::outcome`]).
    pub(crate) outcome: SimilarOutcome,
}

impl SimilarPass {
    /// The functions the similar merge ran on: every body of the first pass's
    /// output, in output order. The indices of [`Self::outcome`] are indices of
    /// this set (the [type's example](Self) and [`Self::after`]'s use them).
    pub fn module(&self) -> &FunctionSet {
        &self.module
    }

    /// The index in [`Self::module`] of function `f` of the first pass's module
    /// (`None` for a duplicate the first pass removed).
    ///
    /// ```
    /// use clif_merge::similar::{SimilarOptions, SimilarPass};
    /// use clif_merge::{FunctionSet, Linkage, MergeOptions, merge_functions};
    ///
    /// let clif = "
    /// function %f(i32) -> i32 {
    /// block0(v0: i32):
    ///     v1 = iadd v0, v0
    ///     return v1
    /// }
    ///
    /// function %f_copy(i32) -> i32 {
    /// block0(v0: i32):
    ///     v1 = iadd v0, v0
    ///     return v1
    /// }
    /// ";
    /// let mut module = FunctionSet::new();
    /// for func in cranelift_reader::parse_functions(clif)? {
    ///     module.push(func, Linkage::Local)?;
    /// }
    /// let identical = merge_functions(&module, &MergeOptions::default());
    /// let similar = SimilarPass::after(&module, &identical, &SimilarOptions::default(), None);
    ///
    /// // %f_copy was erased into %f: only %f is left for the similar merge.
    /// let mut functions = module.iter().map(|(f, _)| f);
    /// let (f, f_copy) = (functions.next().unwrap(), functions.next().unwrap());
    /// let index = similar.index_of(f).unwrap();
    /// assert_eq!(similar.module().display_name(index), "%f");
    /// assert_eq!(similar.index_of(f_copy), None);
    /// assert!(similar.outcome().groups.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn index_of(&self, f: FuncIndex) -> Option<FuncIndex> {
        self.index_of[f]
    }

    /// What the similar merge did, in the indices of [`Self::module`].
    pub fn outcome(&self) -> &SimilarOutcome {
        &self.outcome
    }

    /// Runs the similar merge over the bodies the identical merge `identical` of
    /// `module` kept, for code compiled by `isa`: sizes are measured on it (without
    /// one, they are instruction counts), and entry points use `return_call` only
    /// where it compiles (the `tail` convention, with frame pointers kept). With
    /// [`MergeOptions::similar_fingerprints`](crate::MergeOptions::similar_fingerprints)
    /// set for the identical merge, the fingerprints it computed are not computed
    /// again.
    ///
    /// ```
    /// use clif_merge::similar::{SimilarOptions, SimilarPass, SizeBasis};
    /// use clif_merge::{FunctionSet, Linkage, MergeOptions, merge_functions};
    ///
    /// // Two functions equal but for one constant.
    /// let function = |name: &str, constant: i32| {
    ///     format!(
    ///         "function %{name}(i32, i32) -> i32 {{
    /// block0(v0: i32, v1: i32):
    ///     v2 = iconst.i32 {constant}
    ///     v3 = imul v0, v2
    ///     v4 = iadd v3, v1
    ///     v5 = bxor v4, v0
    ///     v6 = ishl v5, v1
    ///     v7 = isub v6, v3
    ///     v8 = band v7, v4
    ///     v9 = bor v8, v5
    ///     v10 = imul v9, v9
    ///     v11 = iadd v10, v6
    ///     v12 = bxor v11, v7
    ///     v13 = imul v12, v8
    ///     v14 = iadd v13, v9
    ///     v15 = rotl v14, v1
    ///     v16 = bxor v15, v10
    ///     return v16
    /// }}
    /// "
    ///     )
    /// };
    /// let clif = function("f", 17) + &function("g", 23);
    /// let mut module = FunctionSet::new();
    /// for func in cranelift_reader::parse_functions(&clif)? {
    ///     module.push(func, Linkage::Local)?;
    /// }
    /// let identical = merge_functions(&module, &MergeOptions::default());
    ///
    /// // No ISA: a merge pays when it takes fewer instructions.
    /// let similar = SimilarPass::after(&module, &identical, &SimilarOptions::default(), None);
    ///
    /// // One merged body taking the constant as a parameter, and `%f` and `%g` become
    /// // entry points that call it with 17 and 23.
    /// let f = module.iter().next().unwrap().0;
    /// let group = similar.group_of(f).unwrap();
    /// assert_eq!(group.members.len(), 2);
    /// assert_eq!(group.parameters[0].values, [17, 23]);
    /// assert_eq!(group.size_basis, SizeBasis::Instructions);
    /// assert!(group.size_after < group.size_before);
    /// assert!(similar.entry_point(f).is_some());
    ///
    /// // Asking for more than the group saves leaves the two alone, with the
    /// // reasons: as a group taking the constant, and as a pair merged by
    /// // alignment (the constant is a differing stretch of one instruction).
    /// let saved = group.size_before - group.size_after;
    /// let options = SimilarOptions::default().with_min_saved(saved + 1);
    /// let similar = SimilarPass::after(&module, &identical, &options, None);
    /// assert!(similar.outcome().groups.is_empty());
    /// assert_eq!(similar.outcome().rejected.len(), 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn after(
        module: &FunctionSet,
        identical: &MergeOutcome<'_>,
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
    ) -> Self {
        let fingerprints = identical.similar_fingerprints.as_ref();
        Self::after_merging(module, &identical.output, fingerprints, options, isa)
    }

    /// [`Self::after`], with the time it spent in each phase (diagnostics:
    /// `merge_bench similar-phases`).
    #[doc(hidden)]
    pub fn after_with_phases(
        module: &FunctionSet,
        identical: &MergeOutcome<'_>,
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
    ) -> (Self, SimilarPhases) {
        let fingerprints = identical.similar_fingerprints.as_ref();
        let reserved = module.iter().map(|(_, def)| &*def.func);
        let clock = PhaseClock::default();
        let pass = Self::after_clocked(
            module,
            &identical.output,
            fingerprints,
            options,
            isa,
            reserved,
            &clock,
        );
        (pass, clock.phases())
    }

    /// [`Self::after`] on `output`, which may be part of the first pass's
    /// output, with the fingerprints that pass computed if any.
    pub(crate) fn after_merging(
        module: &FunctionSet,
        output: &[OutputEntry<'_>],
        fingerprints: Option<&SimilarFingerprints>,
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
    ) -> Self {
        // Names the first pass removed (erased duplicates, aliases) still mean
        // something in the output: reserve every name of the original module.
        let reserved = module.iter().map(|(_, def)| &*def.func);
        Self::after_reserving(module, output, fingerprints, options, isa, reserved)
    }

    /// Like [`Self::after_merging`], never naming a merged body with a name any of
    /// `reserved` defines or mentions (rather than those of `module`).
    pub(crate) fn after_reserving<'f>(
        module: &FunctionSet,
        output: &[OutputEntry<'_>],
        fingerprints: Option<&SimilarFingerprints>,
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
        reserved: impl IntoIterator<Item = &'f Function>,
    ) -> Self {
        let clock = PhaseClock::default();
        Self::after_clocked(module, output, fingerprints, options, isa, reserved, &clock)
    }

    /// [`Self::after_reserving`], adding the time of each phase to `clock`.
    fn after_clocked<'f>(
        module: &FunctionSet,
        output: &[OutputEntry<'_>],
        fingerprints: Option<&SimilarFingerprints>,
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
        reserved: impl IntoIterator<Item = &'f Function>,
        clock: &PhaseClock,
    ) -> Self {
        let start = std::time::Instant::now();
        // Fingerprints taken with the walk this merge uses, if any.
        let fingerprints =
            fingerprints.filter(|f| f.callee_load_holes == similar_walk().callee_load_holes);
        let mut set = FunctionSet::new();
        let mut index_of = SecondaryMap::new();
        let mut known = KnownFingerprints::new();
        for (function, body) in output.iter().filter_map(OutputEntry::kept) {
            let def = module.get(function);
            // A body the first pass left as it was is shared, not copied, and
            // keeps the fingerprint that pass took of it.
            let unchanged = std::ptr::eq(body, &*def.func);
            // Names are unique in `module`, so they are in a subset of its
            // bodies; an unchanged body's names were checked when `module`
            // took it.
            let pushed = if unchanged {
                set.push_accepted(def.func.clone(), def.linkage)
            } else {
                set.push_shared(Arc::new(body.clone()), def.linkage)
            };
            if let Ok(index) = pushed {
                index_of[function] = Some(index);
                if unchanged && let Some(fingerprints) = fingerprints {
                    known[index] = Some(fingerprints.hashes[function]);
                }
            }
        }
        let mut authority = NameAuthority::new();
        // The bodies reserved, by address, so that those the module of kept bodies
        // shares (all that the first pass left as they were) are not reserved a
        // second time when the merged bodies are named: both borrows are live for
        // this whole call, so an equal address is the same, unchanged body.
        let mut reserved_bodies: FxHashSet<*const Function> = FxHashSet::default();
        // Each body's tables of names are asked for ahead (`ir::prefetch`): one
        // body after another, each would start with misses waited for in turn.
        let reserved: Vec<&Function> = reserved.into_iter().collect();
        for (i, &func) in reserved.iter().enumerate() {
            if let Some(ahead) = reserved.get(i + prefetch::RECORD_AHEAD) {
                Reads::Names.prefetch_record(ahead);
            }
            if let Some(ahead) = reserved.get(i + prefetch::ARRAYS_AHEAD) {
                Reads::Names.prefetch_arrays(ahead);
            }
            authority.reserve_function(func);
            reserved_bodies.insert(func);
        }
        let mut named = SecondaryMap::with_capacity(set.len());
        for (index, def) in set.iter() {
            named[index] = reserved_bodies.contains(&Arc::as_ptr(&def.func));
        }
        clock.add(Phase::Prepare, start.elapsed());
        let outcome = merge_similar_clocked(&set, options, isa, authority, &named, &known, clock);
        Self {
            module: set,
            index_of,
            outcome,
        }
    }

    /// The body printed for function `f` of the first pass's module: its entry point
    /// if it became one.
    pub fn entry_point(&self, f: FuncIndex) -> Option<&Function> {
        self.index_of[f].and_then(|i| self.outcome.entry_points.get(i))
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
            .map(|(f, d)| self.outcome.entry_points.get(f).unwrap_or(&d.func))
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
                replaced: g.parameters.iter().map(|p| p.uses).sum(),
                merged_into: g.merged_name.to_string(),
                size_before: g.size_before,
                size_after: g.size_after,
                size_basis: g.size_basis,
            })
            .collect()
    }
}

/// A merged group described by names, for reports.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SimilarGroupReport {
    /// The members, spelled as in CLIF (`%f`, `u0:12`), in input order (an
    /// aligned group of three or more: in selector order,
    /// [`SimilarGroup::members`]).
    pub members: Vec<String>,
    /// Number of parameters (differing constants, callees and offsets; those holding
    /// the same value in every member share one).
    pub holes: usize,
    /// Number of differing constants, callees and offsets the parameters stand for
    /// (more than [`Self::holes`] when some share a parameter).
    pub replaced: usize,
    /// The merged body's name.
    pub merged_into: String,
    /// Code bytes (or instructions) of the members.
    pub size_before: u64,
    /// Code bytes (or instructions) of the merged body and the entry points.
    pub size_after: u64,
    /// What the sizes are.
    pub size_basis: SizeBasis,
}
