//! The core pass: merging identical functions of a [`FunctionSet`].
//!
//! The pipeline, stage by stage ([`analyze`] then the rewrite):
//!
//! 1. *Screen* ([`screen`]): `fingerprint` hashes the first few dozen
//!    instructions of every function (its prefix key), then whole, with a much
//!    cheaper walk than the encoding, the functions whose prefix key another
//!    shares; both hashes are functions of the encoding ([`hash`]). Only the
//!    functions whose hash another shares are encoded: [`encode`] walks a
//!    function once, in CFG order from the entry block, and writes the
//!    comparator's view of it as a token stream ([`encode::FunctionEncoding`]) in
//!    the grammar of [`tokens`] (every tag named, with why equal streams mean
//!    equal functions, and what is deliberately not compared). Each bucket of
//!    equal hashes is grouped at once by the tree ([`tree`]). What the screening
//!    leaves is an [`encoded::EncodedFunctions`].
//! 2. *Partition* ([`partition`]): the groups are refined until calls between
//!    module functions agree (GCC ipa-icf style optimistic refinement), ordering
//!    functions with the comparator ([`compare::FunctionComparator`], a total
//!    order over encodings).
//! 3. *Resolve addresses*: the address uses the screening did not look for are
//!    found in the functions that may name a member of a class.
//! 4. *Plan* ([`plan`]): per duplicate, erased, aliased or thunked.
//! 5. *Rewrite* ([`rewrite`]): redirected references, and [`thunks`].
//!
//! This file runs the whole pipeline ([`merge_functions`],
//! [`merge_functions_in_place`]). Imports point downward only: `fingerprint` uses
//! `hash`'s types, `hash` uses `encode`, `encoded` uses both, `compare` uses
//! `encoded` and `tree`, `screen` uses `compare`, `encoded` and `fingerprint`,
//! `partition` uses `compare` and `tree`, `plan` uses `partition`, `rewrite` uses
//! `plan` and `thunks`; nothing here imports a folder above `ir`.

pub(crate) mod callee_loads;
pub(crate) mod compare;
pub(crate) mod encode;
pub(crate) mod encoded;
pub(crate) mod fingerprint;
pub(crate) mod hash;
pub(crate) mod instruction;
pub(crate) mod partition;
pub(crate) mod plan;
pub(crate) mod rewrite;
pub(crate) mod screen;
pub(crate) mod thunks;
pub(crate) mod tokens;
pub(crate) mod tree;

use crate::ir::{FuncIndex, FunctionSet};
use cranelift_codegen::entity::SecondaryMap;
use encode::{UnsupportedReason, WalkOptions};
use encoded::EncodedFunctions;
use hash::StructuralHash;
use partition::{PartitionStats, partition};
use plan::{MergeMode, MergePlan, plan};
use rewrite::{OutputEntry, apply_among, apply_in_place};
use std::time::{Duration, Instant};

/// Options of the pass.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MergeOptions {
    /// Whether function addresses are significant.
    pub mode: MergeMode,
    /// Whether the pass also takes the similar-function merge's first look at
    /// every function (its fingerprints with the holes left out) in its own walk,
    /// for [`SimilarPass::after`](crate::similar::SimilarPass::after) to reuse:
    /// set it when the similar merge runs next. Off, the pass computes only its
    /// own fingerprints.
    pub similar_fingerprints: bool,
}

impl MergeOptions {
    /// These options with `mode`.
    pub fn with_mode(mut self, mode: MergeMode) -> Self {
        self.mode = mode;
        self
    }

    /// These options, computing the similar merge's fingerprints or not
    /// ([`Self::similar_fingerprints`]).
    pub fn with_similar_fingerprints(mut self, similar_fingerprints: bool) -> Self {
        self.similar_fingerprints = similar_fingerprints;
        self
    }
}

/// The similar-function merge's fingerprints of a module's functions, computed by
/// the identical merge's walk ([`MergeOptions::similar_fingerprints`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct SimilarFingerprints {
    /// Whether they leave callee-load offsets out (the walk option
    /// `callee_load_holes` they were computed with).
    pub(crate) callee_load_holes: bool,
    /// Per function of the module.
    pub(crate) hashes: SecondaryMap<FuncIndex, StructuralHash>,
}

/// The walk option the identical merge computes [`SimilarFingerprints`] with: the
/// similar merge's (`similar::groups::similar_walk`), which leaves callee-load
/// offsets out.
const SIMILAR_CALLEE_LOAD_HOLES: bool = true;

/// What the pass did and what it cost.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MergeStats {
    /// Functions in the module.
    pub functions: usize,
    /// Functions the walk could not handle (never merged), with the reason.
    pub unsupported: Vec<(FuncIndex, UnsupportedReason)>,
    /// Instructions over all functions: the reachable ones of every function the
    /// pass walked whole (every function whose prefix key another shares, and
    /// every function that may take an address), the instruction table's length
    /// of the others. The two agree when every instruction is in a reachable
    /// block, as in the IR cranelift-reader and most frontends build.
    pub instructions: u64,
    /// Reachable instructions in the bodies of merged duplicates.
    pub instructions_merged: u64,
    /// Partition counters.
    pub partition: PartitionStats,
    /// Time spent hashing: every function's prefix, and the functions whose prefix
    /// key another shares whole (the hashing walks, `fingerprint.rs`).
    pub time_hash: Duration,
    /// Time spent encoding the functions whose hash another function shares.
    pub time_encode: Duration,
    /// Time spent on the hash filter and the tree.
    pub time_tree: Duration,
    /// Time spent refining classes by their callees.
    pub time_refine: Duration,
    /// Time spent planning and rewriting.
    ///
    /// The pass in all is `time_hash + time_encode + time_tree + time_refine +
    /// time_apply`.
    pub time_apply: Duration,
}

/// The result of the pass.
#[non_exhaustive]
pub struct MergeOutcome<'a> {
    /// The decisions.
    pub plan: MergePlan,
    /// The merged module, in input order.
    pub output: Vec<OutputEntry<'a>>,
    /// Counters and timings.
    pub stats: MergeStats,
    /// The similar merge's fingerprints, when the options asked for them.
    pub(crate) similar_fingerprints: Option<SimilarFingerprints>,
}

/// Runs the pass over `module` and rewrites it in place, copying nothing: what a
/// compiler that owns its functions wants (LLVM's MergeFunctions works the same way).
/// (A body `module` shares with a clone of it is copied before it is rewritten:
/// [`DefinedFunction::func`](crate::DefinedFunction::func).)
/// Afterwards, functions the plan erased or aliased still have their old bodies and
/// are to be skipped; thunked duplicates have their thunks; everything else has its
/// references redirected. Returns the plan and the counters.
///
/// ```
/// use clif_merge::{FunctionSet, Linkage, MergeAction, MergeOptions, merge_functions_in_place};
///
/// let clif = "
/// function %add_one(i64) -> i64 {
/// block0(v0: i64):
///     v1 = iconst.i64 1
///     v2 = iadd v0, v1
///     return v2
/// }
///
/// function %increment(i64) -> i64 {
/// block0(v0: i64):
///     v1 = iconst.i64 1
///     v2 = iadd v0, v1
///     return v2
/// }
///
/// function %twice(i64) -> i64 {
///     fn0 = %add_one(i64) -> i64
///     fn1 = %increment(i64) -> i64
/// block0(v0: i64):
///     v1 = call fn0(v0)
///     v2 = call fn1(v1)
///     return v2
/// }
/// ";
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(clif)? {
///     module.push(func, Linkage::Local)?;
/// }
///
/// let (plan, stats) = merge_functions_in_place(&mut module, &MergeOptions::default());
/// assert_eq!(plan.decisions.len(), 1);
/// assert_eq!(stats.instructions_merged, 3);
///
/// // Emit what stays: skip the functions the plan erased or aliased.
/// let decisions = plan.decision_map();
/// let emitted: Vec<String> = module
///     .iter()
///     .filter(|(f, _)| decisions[*f].is_none_or(|d| d.action == MergeAction::Thunk))
///     .map(|(f, _)| module.display_name(f))
///     .collect();
/// assert_eq!(emitted, ["%add_one", "%twice"]);
/// // `%twice`, rewritten in place, calls `%add_one` twice.
/// let (_, twice) = module.iter().last().unwrap();
/// assert!(!twice.func.display().to_string().contains("%increment"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn merge_functions_in_place(
    module: &mut FunctionSet,
    options: &MergeOptions,
) -> (MergePlan, MergeStats) {
    let Analysis {
        plan,
        mut stats,
        naming,
        ..
    } = analyze(module, options);
    let start = Instant::now();
    apply_in_place(module, &plan, naming.as_ref());
    stats.time_apply += start.elapsed();
    (plan, stats)
}

/// What the analysis of a module found: everything the rewrite needs.
struct Analysis {
    /// What becomes of each duplicate.
    plan: MergePlan,
    /// Counters and timings so far.
    stats: MergeStats,
    /// The similar merge's fingerprints, when the options asked for them.
    similar_fingerprints: Option<SimilarFingerprints>,
    /// When address uses were looked for, which functions may name a member of
    /// a class (`FunctionSet::naming`): the only ones the rewrite can change.
    naming: Option<SecondaryMap<FuncIndex, bool>>,
}

/// The pipeline but the rewrite, stage by stage:
///
/// 1. *Screen* (`screen.rs`): hash every function cheaply, encode only those
///    whose hash another shares, and group each bucket of equal hashes at once
///    with callees read optimistically.
/// 2. *Partition* (`partition.rs`): refine the groups until calls between
///    module functions agree.
/// 3. *Resolve addresses*: find the address uses the screening left out, in the
///    functions that may name a member of a class.
/// 4. *Plan* (`plan.rs`): erase, alias or thunk each duplicate.
fn analyze(module: &FunctionSet, options: &MergeOptions) -> Analysis {
    let mut stats = MergeStats {
        functions: module.len(),
        ..MergeStats::default()
    };

    // 1. Screen.
    let walk = WalkOptions {
        addresses_significant: options.mode == MergeMode::Safe,
        ..WalkOptions::default()
    };
    let hole_blind = options
        .similar_fingerprints
        .then_some(SIMILAR_CALLEE_LOAD_HOLES);
    let (mut functions, time_hash, time_encode) =
        EncodedFunctions::hash_first(module, walk, hole_blind);
    let similar_fingerprints = hole_blind.map(|callee_load_holes| SimilarFingerprints {
        callee_load_holes,
        hashes: std::mem::take(&mut functions.hole_blind),
    });
    stats.unsupported = functions.unsupported.clone();
    stats.instructions = module.iter().map(|(f, _)| functions.instructions(f)).sum();
    stats.time_hash = time_hash;
    stats.time_encode = time_encode;

    // 2. Partition.
    let partition = partition(&functions);
    stats.partition = partition.stats.clone();
    stats.time_tree = partition.time_tree;
    stats.time_refine = partition.time_refine;

    // 3. Resolve addresses. When address uses are left to find, one scan of the
    // names serves them and the rewrite; otherwise the rewrite scans the names
    // itself.
    let start = Instant::now();
    let classes = partition.merge_classes();
    let naming = (!functions.unresolved.is_empty()).then(|| module.naming(&classes.concat()));
    if let Some(naming) = &naming {
        functions.resolve_address_taken(module, naming);
    }

    // 4. Plan.
    let plan = plan(module, classes, &functions.address_taken, options.mode);
    stats.time_apply = start.elapsed();
    stats.instructions_merged = plan
        .decisions
        .iter()
        .map(|d| functions.instructions(d.function))
        .sum();
    Analysis {
        plan,
        stats,
        similar_fingerprints,
        naming,
    }
}

/// Runs the pass over `module`.
///
/// `module` is not changed: the result borrows every function the rewrite left as
/// it was ([`OutputEntry::Function`]).
///
/// ```
/// use clif_merge::{FunctionSet, Linkage, MergeAction, MergeMode, MergeOptions, merge_functions};
///
/// // Two exported functions with the same body: other modules may compare their
/// // addresses, so by default neither can be erased.
/// let clif = "
/// function %api_v1(i32) -> i32 {
/// block0(v0: i32):
///     v1 = iconst.i32 7
///     v2 = imul v0, v1
///     return v2
/// }
///
/// function %api_v2(i32) -> i32 {
/// block0(v0: i32):
///     v1 = iconst.i32 7
///     v2 = imul v0, v1
///     return v2
/// }
/// ";
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(clif)? {
///     module.push(func, Linkage::Export)?;
/// }
///
/// // Safe mode (the default): the duplicate keeps an address of its own, a thunk.
/// let safe = merge_functions(&module, &MergeOptions::default());
/// assert_eq!(safe.plan.decisions[0].action, MergeAction::Thunk);
///
/// // Addresses not significant: the duplicate becomes a second name for the code.
/// let all = merge_functions(&module, &MergeOptions::default().with_mode(MergeMode::All));
/// assert_eq!(all.plan.decisions[0].action, MergeAction::Alias);
/// assert_eq!(all.stats.functions, 2);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn merge_functions<'a>(module: &'a FunctionSet, options: &MergeOptions) -> MergeOutcome<'a> {
    let Analysis {
        plan,
        mut stats,
        similar_fingerprints,
        naming,
    } = analyze(module, options);
    let start = Instant::now();
    let output = apply_among(module, &plan, naming.as_ref());
    stats.time_apply += start.elapsed();
    MergeOutcome {
        plan,
        output,
        stats,
        similar_fingerprints,
    }
}
