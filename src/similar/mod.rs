//! Merging *similar* functions: bodies that are equal but for a few constants,
//! callees or stretches of instructions.
//!
//! Two functions are similar when their encodings (the one walk of
//! `identical/encode.rs`) are equal once the immediates of `iconst`,
//! `f32const` and `f64const` (`Hole`s), the offsets of *callee loads* (below) and
//! the callees of direct calls to module functions (`CallSite`s; the callee's
//! signature still has to be equal) are left out. A group of similar functions
//! becomes one *merged body*, a copy of the first member in which the differing
//! constants and offsets are new trailing parameters (and differing callees
//! function-address parameters called with `call_indirect`), and each member
//! becomes a thin *entry point* with its own name, signature and address that calls
//! the merged body with its own constants, offsets and callee addresses
//! (`return_call` where the calling convention allows tail calls). This is Swift's
//! and binaryen's "merge similar functions".
//!
//! # Callee loads: calls of imported functions
//!
//! Wasmtime calls an imported function by loading the callee's context and code
//! pointer from two constant offsets of the caller's `vmctx`, then `call_indirect`;
//! two functions that call different imports differ only in those offsets. So the
//! `Offset32` of a `load` (not an extending load) is a hole when its address operand
//! is an `i64` parameter of the entry block and its result is used only as the
//! callee of indirect calls, or only as a further argument of indirect calls whose
//! callees are such loads (`CalleeLoads` in `encode.rs`). The merged body replaces
//! `load FLAGS base+OFFSET` by `v = iadd base, param; load FLAGS v+0`, and each
//! entry point passes its own offset, sign-extended, as an `i64` constant. Every
//! other load offset stays an ordinary token: it is compared, never a parameter.
//!
//! Why that is sound: the base operand, the memory flags (alias region included),
//! the loaded type and every use of the result are still compared token by token
//! (only the offset token is blanked), so in every member the load reads through the
//! same base value with the same flags at the same program point. Run as member
//! `m`, the merged body's `iadd base, param` is `base + offset_m`, the address
//! member `m` computes (a load adds its sign-extended offset to the base, wrapping,
//! as `iadd` does), so the merged load reads the same bytes as member `m`'s load, in
//! the same executions and in the same order with respect to every other memory
//! operation; whatever the flags promise (`notrap`, `readonly`, `can_move`, the
//! region) was promised by member `m` for exactly that address and those
//! executions, so it still holds. The use restriction is what keeps the holes
//! few, not what makes them correct: it keeps ordinary loads (most of a function's
//! offsets) out of the parameters and the candidate groups. Whether a load is a
//! callee load depends on the uses of its result, which the stream does not show in
//! full (uses in unreachable blocks), so two functions are grouped only when their
//! load-offset holes are at the same positions (`groups::blanked`); the hole-blind
//! hash leaves out exactly the tokens the walk writes as holes, since both come
//! from the same walk, so equal blanked streams still share a hash.
//!
//! There is one parameter per distinct tuple of member values, not per differing
//! constant: constants (or callees) of the same kind and type that hold the same
//! value in every member, as a tuple across the members, share one parameter
//! (binaryen does the same). Constants that agree in some members only do not.
//! At most `max_holes` parameters are allowed.
//!
//! A group is merged only when it pays: the merged body and the entry points must
//! take fewer code bytes than the members for the ISA the code is compiled for
//! (the host ISA at `opt_level=speed` by default), or, without an ISA, fewer
//! instructions. A group that needs too many parameters or does not pay is not
//! dropped: it is split by the parameter with the fewest distinct values, and each
//! part is planned the same way; a group that pays is split too, and the parts are
//! kept instead when together they save more. So every subgroup a lower limit would
//! merge is among those tried, and a higher `max_holes` never saves less. Groups,
//! parameters and names are deterministic: the same input gives the same output.
//!
//! Sizes are *priced* ([`Pricing`]). By default ([`Pricing::Modeled`]) the ISA's
//! `SizeModel` (`size_model.rs`: bytes predicted from counts of instructions by
//! kind, calls, constants, parameters and blocks, fitted on Cranelift's compiled
//! sizes of the corpus) prices every member and every merge tried, and decides;
//! only the merges it accepts by a small margin (predicted to save less than 5%
//! of the members' size, `CLOSE_CALL`) are compiled to confirm, and dropped if
//! Cranelift's code does not shrink; a group of small functions (at most 1 KiB
//! predicted in all, `SMALL_GROUP`) that the model would not merge at all is
//! planned by compiled sizes, as the model errs most there and compiling them is
//! cheap. Compiling every candidate instead
//! ([`Pricing::Compiled`], the only way on ISAs without a model) costs about half
//! of the program's own compile time on the corpus; the model costs a few percent
//! and saves within 0.05 percentage points as many bytes (`docs/similar.md`). What the model
//! rejects is not compiled, so a small merge that would pay can stay unmade; what
//! it accepts by a clear margin is made without compiling, so such a merge can
//! (rarely) be one a compile would reject, or one the target cannot compile at all
//! (its members could not be compiled unmerged either; compiled pricing leaves such
//! a group alone). Pricing only chooses among merges: every merge made is built and
//! checked the same way whatever its price.
//!
//! # Merging by alignment
//!
//! Functions no group merged are then paired when they *align* (`align.rs`, on by
//! default, [`SimilarOptions::align`]): equal but for at most one straight-line
//! stretch of instructions per block, possibly empty on one side, whose values are
//! not used outside it (wasmtime expands a small constant-length `memory.copy`
//! inline, so two functions that differ in that length differ by instructions, not
//! constants). The merged body of a pair is a copy of the first member in which
//! each stretch is a branch on one more parameter, a [`HoleKind::Selector`]: `0`
//! runs the first member's stretch, `1` a copy of the second's (`splice.rs`); both
//! arms rejoin the rest of the block. The entry points pass `0` and `1`. A pair is
//! priced by the model like a group, but a close call is judged against the
//! smaller member (what a pair saves is about the code the two share), a small
//! pair the model rejects is compiled only when predicted to grow by at most 5%
//! (`ALIGNED_GROWTH`), and a close call on a pair larger than 8 KiB
//! (`ALIGNED_CONFIRM`) is not merged (`Planner::plan_aligned`).
//!
//! The pass runs on a module whose identical functions were already merged, so
//! callees are compared by identity and function addresses by exact name.
//!
//! # Phases and files
//!
//! 1. `groups`: which functions are similar (equal blanked streams), which
//!    constants differ, which share a parameter, how a group splits.
//! 2. This file plans each group (in parallel): the group whole or split, priced
//!    by `size_model` (predicted code size) or `cost` (compiled code size).
//! 3. `align`: pairs of the functions left that align, each planned the same way.
//! 4. `merged_body` (the parameterized copy and its name, with `splice` for the
//!    stretches of an aligned pair) and `entry_points` (the members' new bodies),
//!    for every merge made.

mod align;
pub(crate) mod cost;
pub(crate) mod entry_points;
pub(crate) mod groups;
mod merged_body;
pub(crate) mod size_model;
mod splice;

pub use entry_points::EntryPoints;
pub use groups::{HoleKind, HoleParameter};

use crate::identical::encode::FunctionEncoding;
use crate::identical::rewrite::OutputEntry;
use crate::identical::{MergeOutcome, SimilarFingerprints};
use crate::ir::parallel;
use crate::ir::{FuncIndex, FunctionSet, NameAuthority, reads_machine_state};
use cost::{NotCompiled, size_of, verified_size_of};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Function, Type, UserFuncName, types};
use cranelift_codegen::isa::TargetIsa;
use entry_points::{build_entry_points, entry_point_features};
use groups::{
    Differing, KnownFingerprints, differing_parameters, find_groups, similar_walk,
    split_by_parameter, split_parameter,
};
use merged_body::{MergedNames, build_merged_body};
use size_model::SizeModel;
use splice::NotSpliced;
use std::collections::HashMap;
use std::sync::Arc;

/// The default [`SimilarOptions::max_holes`]. Chosen from measurements on the
/// corpus (see "The default `--max-holes`" in `docs/similar.md`): the code saved
/// grows with the limit up to 22 parameters and not beyond, and a higher limit
/// never saves less; 32 leaves room above that while still bounding the number of
/// arguments of a merged body.
pub const DEFAULT_MAX_HOLES: usize = 32;

/// Options of the similar-function merge.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SimilarOptions {
    /// A group is merged whole only when it needs at most this many parameters (one
    /// per distinct tuple of differing member values); a group needing more is
    /// split into subgroups.
    pub max_holes: usize,
    /// A group is merged only when it saves at least this much: code bytes when
    /// sizes are measured on an ISA, instructions otherwise. At least 1 (a merge
    /// that saves nothing is never made).
    pub min_saved: u64,
    /// How sizes are found: predicted by the ISA's size model (compiled only where
    /// the decision is close) or all compiled.
    pub pricing: Pricing,
    /// Whether functions no group merged are also merged by alignment: pairs equal
    /// but for a few straight-line stretches of instructions, which become one body
    /// choosing each stretch by a selector parameter (`align.rs`).
    pub align: bool,
}

impl Default for SimilarOptions {
    fn default() -> Self {
        Self {
            max_holes: DEFAULT_MAX_HOLES,
            min_saved: 1,
            pricing: Pricing::Modeled,
            align: true,
        }
    }
}

/// How the similar merge finds the sizes that decide whether a group pays (on an
/// ISA; without one, sizes are instruction counts either way).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
pub enum Pricing {
    /// The ISA's size model predicts every size and plans every group; each
    /// merge so planned that is predicted to save less than 5% of its members'
    /// size is then compiled (members, merged body, entry points) and made only
    /// if it pays. An ISA without a model compiles, as [`Pricing::Compiled`].
    #[default]
    Modeled,
    /// Every member and every merge tried is compiled by Cranelift and its code
    /// bytes counted: exact, and about as costly as compiling the groups' members
    /// several times.
    Compiled,
}

/// A merge predicted to save less than this share of its members' predicted size
/// is confirmed by compiling under [`Pricing::Modeled`]. Chosen on the corpus
/// (`docs/similar.md`, "Pricing"), with [`SMALL_GROUP`]: brotli, the
/// program with the most similar code, spent 3.6% of its compile time (one thread,
/// one series of runs on a busy machine) in the similar merge at 0.05 and 4.6% at
/// 0.1 (5.4% at 0.2 without `SMALL_GROUP`), while the bytes saved on the corpus
/// moved by less than 0.01 percentage points.
pub(crate) const CLOSE_CALL: f64 = 0.05;

/// A small aligned pair (members predicted at most [`SMALL_GROUP`] bytes) that the
/// size model predicts not to pay is compiled to check only when the merge is
/// predicted to grow the code by at most this factor. Chosen on the corpus
/// (`docs/similar.md`, "Merging by alignment"): the model over-predicts small merged pairs
/// (it under-predicts their members by 15% and over-predicts entry points), so
/// many a pair predicted to grow by 10-40% shrinks when compiled; but each such
/// pair saved 20 bytes on average for the compile of five functions (at 1.4,
/// compiling them took 2% of brotli's compile time to save 0.03% of its code).
pub(crate) const ALIGNED_GROWTH: f64 = 1.05;

/// A merge of an aligned pair that the size model accepts only as a close call
/// ([`CLOSE_CALL`] of the smaller member's predicted size) is compiled to confirm
/// only when its members are predicted to take at most this many bytes; a larger
/// one is not merged (compiling large pairs is what costs; `docs/similar.md`,
/// "Merging by alignment").
pub(crate) const ALIGNED_CONFIRM: u64 = 8192;

/// A group whose members are predicted to take at most this many bytes in all,
/// and that the model would not merge at all, is planned by compiled sizes under
/// [`Pricing::Modeled`]: the model errs most on small functions, and they compile
/// fast.
pub(crate) const SMALL_GROUP: u64 = 1024;

impl SimilarOptions {
    /// These options with at most `max_holes` parameters per merged group.
    pub fn with_max_holes(mut self, max_holes: usize) -> Self {
        self.max_holes = max_holes;
        self
    }

    /// These options merging only groups that save at least `min_saved`.
    pub fn with_min_saved(mut self, min_saved: u64) -> Self {
        self.min_saved = min_saved;
        self
    }

    /// These options with merging by alignment on (`true`) or off.
    pub fn with_align(mut self, align: bool) -> Self {
        self.align = align;
        self
    }

    /// These options finding sizes by `pricing`.
    pub fn with_pricing(mut self, pricing: Pricing) -> Self {
        self.pricing = pricing;
        self
    }
}

/// What the sizes of a merged group are.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum SizeBasis {
    /// Code bytes Cranelift emitted for the ISA.
    Compiled,
    /// Code bytes predicted by the ISA's size model.
    Predicted,
    /// Instruction counts (no ISA).
    Instructions,
}

impl SizeBasis {
    /// Whether the sizes are code bytes (compiled or predicted).
    pub fn in_bytes(self) -> bool {
        self != SizeBasis::Instructions
    }
}

/// One group of similar functions merged into one body.
#[derive(Clone, Debug)]
pub struct SimilarGroup {
    /// The members, in input order; the first one's body is the merged body's.
    pub members: Vec<FuncIndex>,
    /// The parameters of the merged body (one per distinct tuple of differing
    /// member values), in walk order of the body.
    pub parameters: Vec<HoleParameter>,
    /// The name of the merged body.
    pub merged_name: UserFuncName,
    /// Code bytes of the members (compiled or predicted), or instructions without an
    /// ISA.
    pub size_before: u64,
    /// Code bytes of the merged body and the entry points, or instructions.
    pub size_after: u64,
    /// What the sizes are.
    pub size_basis: SizeBasis,
}

impl SimilarGroup {
    /// Whether some parameter stands for more than one constant, callee or offset.
    pub fn shares_parameters(&self) -> bool {
        self.parameters
            .iter()
            .any(|p| p.uses > 1 && p.kind != HoleKind::Selector)
    }

    /// Whether the group is an aligned pair: its merged body chooses differing
    /// stretches of instructions by a [`HoleKind::Selector`] parameter.
    pub fn is_aligned(&self) -> bool {
        self.parameters.iter().any(|p| p.kind == HoleKind::Selector)
    }
}

/// The result of the similar-function merge.
#[derive(Default)]
pub struct SimilarOutcome {
    /// The merged groups, ordered by first member.
    pub groups: Vec<SimilarGroup>,
    /// Each member's new body: an entry point calling its group's merged body.
    pub entry_points: EntryPoints,
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
/// and entry points, for code compiled by `isa` (sizes are measured on it, and
/// entry points use `return_call` only where it compiles: the `tail` convention,
/// with frame pointers kept). Without an ISA, sizes are instruction counts.
/// Embedders run it through [`SimilarPass::after`], on the identical merge's output.
pub(crate) fn merge_similar_for(
    module: &FunctionSet,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
) -> SimilarOutcome {
    let known = KnownFingerprints::new();
    merge_similar_reserving(module, options, isa, NameAuthority::new(), &known)
}

/// Like [`merge_similar_for`], never naming a merged body with a name `authority`
/// knows (besides every name `module` defines or mentions).
/// `known` are fingerprints of `module`'s functions computed before.
pub(crate) fn merge_similar_reserving(
    module: &FunctionSet,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
    authority: NameAuthority,
    known: &KnownFingerprints,
) -> SimilarOutcome {
    // Phase 1 of 4: the groups of similar functions.
    let candidates = find_groups(module, similar_walk(), known);

    // Phase 2 of 4: per group (in parallel), the subgroups to merge: the group
    // itself or subgroups of it, whichever saves the most.
    let model = match options.pricing {
        Pricing::Modeled => isa.and_then(SizeModel::for_isa),
        Pricing::Compiled => None,
    };
    let planner = Planner {
        module,
        encodings: &candidates.encodings,
        options,
        isa,
        pointer_type: isa.map_or(types::I64, |isa| isa.pointer_type()),
    };
    let plans = parallel::map(&candidates.groups, 1, |members| {
        planner.plan_group(members, model.as_ref())
    });

    let mut outcome = SimilarOutcome::default();
    let mut merges = Vec::new();
    for plan in plans {
        merges.extend(plan.merges);
        outcome.rejected.extend(plan.rejected);
    }

    // Phase 3 of 4: pairs of the functions left that align, each planned like a
    // group.
    if options.align {
        let mut merged = SecondaryMap::<FuncIndex, bool>::new();
        for &m in merges.iter().flat_map(|m| &m.members) {
            merged[m] = true;
        }
        let rest: Vec<FuncIndex> = module
            .iter()
            .filter(|(f, defined)| !merged[*f] && !reads_machine_state(&defined.func))
            .map(|(f, _)| f)
            .collect();
        let pairs = align::find_aligned_pairs(module, &rest);
        let plans = parallel::map(&pairs, 1, |(first, alignment)| {
            planner.plan_aligned(*first, alignment, model.as_ref())
        });

        for plan in plans {
            merges.extend(plan.merges);
            outcome.rejected.extend(plan.rejected);
        }
    }

    // Phase 4 of 4: names, merged bodies and entry points, in order of first member.
    merges.sort_by_key(|m| m.members[0]);
    let frame_pointers = isa.is_none_or(|isa| isa.flags().preserve_frame_pointers());
    let mut names = MergedNames::new(module, authority);
    for merge in merges {
        let merged_name = names.next(&module.get(merge.members[0]).func.name);
        let (merged, entry_points) =
            match build_merge(module, &merge, merged_name.clone(), frame_pointers) {
                Ok(built) => built,
                Err(reason) => {
                    outcome.rejected.push((merge.members, reason.0));
                    continue;
                }
            };
        for (&m, entry) in merge.members.iter().zip(entry_points) {
            outcome.entry_points.insert(m, entry);
        }
        outcome.merged_bodies.push(merged);
        outcome.groups.push(SimilarGroup {
            members: merge.members,
            parameters: merge.differing.parameters,
            merged_name,
            size_before: merge.size_before,
            size_after: merge.size_after,
            size_basis: merge.basis,
        });
    }
    outcome
        .rejected
        .sort_by_key(|(members, _)| members.first().copied());
    outcome
}

/// The merged body (named `name`) and the entry points (in member order) of a
/// group.
fn build_merge(
    module: &FunctionSet,
    merge: &Merge,
    name: UserFuncName,
    frame_pointers: bool,
) -> Result<(Function, Vec<Function>), NotSpliced> {
    let first = &module.get(merge.members[0]).func;
    let merged = build_merged_body(module, first, name, &merge.differing)?;
    let entry_points = build_entry_points(
        module,
        &merge.members,
        &merge.differing.parameters,
        &merged,
        frame_pointers,
    );
    Ok((merged, entry_points))
}

/// A group chosen for merging, measured.
struct Merge {
    /// The members, in input order.
    members: Vec<FuncIndex>,
    /// Its parameters and the slots they replace.
    differing: Differing,
    /// Size of the members.
    size_before: u64,
    /// Size of the merged body and the entry points.
    size_after: u64,
    /// What the sizes are.
    basis: SizeBasis,
}

/// What to do with a group: the subgroups to merge (the group itself, or parts of
/// it), what they save, and the parts not merged, with the reason.
#[derive(Default)]
struct Plan {
    merges: Vec<Merge>,
    saved: u64,
    rejected: Vec<(Vec<FuncIndex>, String)>,
}

/// The sizes of the members of one group, each measured once however many
/// subgroups it is tried in.
type MemberSizes = HashMap<FuncIndex, Result<u64, NotCompiled>>;

/// How a plan finds sizes.
#[derive(Copy, Clone)]
enum Sizer<'a> {
    /// Predicted by the model.
    Model(&'a SizeModel),
    /// Compiled on the ISA, or instruction counts without one ([`size_of`]).
    Measure,
}

/// Whether a predicted saving of `saved` for a group whose members take `size` is
/// a close call.
fn is_close(saved: u64, size: u64) -> bool {
    (saved as f64) < CLOSE_CALL * size as f64
}

/// Plans groups: what is constant for every group of a module.
struct Planner<'a> {
    module: &'a FunctionSet,
    encodings: &'a SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    options: &'a SimilarOptions,
    isa: Option<&'a dyn TargetIsa>,
    pointer_type: Type,
}

impl Planner<'_> {
    /// The plan for the aligned pair of `first` and `alignment.second`: merged
    /// whole or not at all. Without a `model`, by measured sizes. With one, the
    /// pair is built once and its predicted sizes decide:
    ///
    /// * predicted to save at least `min_saved`: merged on the model's word,
    ///   unless the saving is a close call *measured against the smaller member*
    ///   ([`CLOSE_CALL`] of its predicted size): what a pair saves is about the
    ///   code the two share (the second member's copy of it goes away), so the
    ///   model's error on the saving scales with the smaller member, not with the
    ///   pair. A close call is compiled to confirm when the members take at most
    ///   [`ALIGNED_CONFIRM`] bytes, and not merged otherwise;
    /// * predicted not to save: compiled only when the members are small
    ///   ([`SMALL_GROUP`]) and the merge is predicted to grow the code by at most
    ///   [`ALIGNED_GROWTH`] (the model over-predicts small merged pairs, but
    ///   rarely by more than that); not merged otherwise.
    fn plan_aligned(
        &self,
        first: FuncIndex,
        alignment: &align::Alignment,
        model: Option<&SizeModel>,
    ) -> Plan {
        let members = [first, alignment.second];
        let differing = Differing::aligned(alignment.clone());
        let rejected = |reason: String| Plan {
            rejected: vec![(members.to_vec(), format!("aligned: {reason}"))],
            ..Plan::default()
        };
        let merged = |merge: Merge| Plan {
            saved: merge.size_before - merge.size_after,
            merges: vec![merge],
            rejected: Vec::new(),
        };
        let compiled = |differing: Differing| match self.measure(
            &members,
            differing,
            Sizer::Measure,
            &mut MemberSizes::new(),
        ) {
            Ok(merge) => merged(merge),
            Err(reason) => rejected(reason),
        };
        let Some(model) = model else {
            return compiled(differing);
        };
        let mut sizes = MemberSizes::new();
        let predicted = match self.sized(&members, differing, Sizer::Model(model), &mut sizes) {
            Ok(predicted) => predicted,
            Err(reason) => return rejected(reason),
        };
        let (before, after) = (predicted.size_before, predicted.size_after);
        if self.saves_enough(before, after) {
            let saved = before - after;
            let smaller = sizes.values().filter_map(|s| s.clone().ok()).min();
            if !is_close(saved, smaller.unwrap_or(before)) {
                return merged(predicted);
            }
            if before > ALIGNED_CONFIRM {
                return rejected(format!(
                    "predicted to save only {saved} of {before} bytes, too large to confirm"
                ));
            }
            return compiled(predicted.differing);
        }
        let growth = after as f64 / before.max(1) as f64;
        if growth > ALIGNED_GROWTH || before > SMALL_GROUP {
            return rejected(format!(
                "predicted not smaller ({before} -> {after}, {:+.0}%)",
                (growth - 1.0) * 100.0
            ));
        }
        compiled(predicted.differing)
    }

    /// The best plan for the group `members`. With a `model`, planned by predicted
    /// sizes, then each merge the plan makes that is predicted to save less than
    /// [`CLOSE_CALL`] of its members' size is compiled to confirm, and dropped
    /// when it does not pay (a small group the model rejects is planned by
    /// compiled sizes instead). Without one, planned by measured sizes (compiled,
    /// or instruction counts without an ISA).
    fn plan_group(&self, members: &[FuncIndex], model: Option<&SizeModel>) -> Plan {
        let plan = |sizer: Sizer<'_>, sizes: &mut MemberSizes| self.plan(members, sizer, sizes);
        let Some(model) = model else {
            return plan(Sizer::Measure, &mut MemberSizes::new());
        };
        let mut predicted_sizes = MemberSizes::new();
        let predicted = plan(Sizer::Model(model), &mut predicted_sizes);
        if predicted.merges.is_empty() {
            // Small functions are where the model errs most and compiling costs
            // least: a small group it rejects is planned by compiled sizes.
            let size: u64 = members
                .iter()
                .map(|&m| model.predict(&self.module.get(m).func))
                .sum();
            if size <= SMALL_GROUP {
                return plan(Sizer::Measure, &mut MemberSizes::new());
            }
            return predicted;
        }
        let mut plan = Plan {
            rejected: predicted.rejected,
            ..Plan::default()
        };
        let mut sizes = MemberSizes::new();
        for merge in predicted.merges {
            let saved = merge.size_before - merge.size_after;
            if !is_close(saved, merge.size_before) {
                plan.saved += saved;
                plan.merges.push(merge);
                continue;
            }
            match self.measure(&merge.members, merge.differing, Sizer::Measure, &mut sizes) {
                Ok(merge) => {
                    plan.saved += merge.size_before - merge.size_after;
                    plan.merges.push(merge);
                }
                Err(reason) => plan.rejected.push((
                    merge.members,
                    format!("predicted to save {saved} bytes, but compiled {reason}"),
                )),
            }
        }
        plan
    }

    /// The best plan for `members` (in input order) with sizes by `sizer`: merged
    /// whole when it needs at most `max_holes` parameters and saves at least
    /// `min_saved`, or split by the parameter with the fewest distinct values into
    /// subgroups planned the same way, whichever saves more (the whole group on a
    /// tie). Every subgroup a lower limit would merge is among those tried, so a
    /// higher limit never saves less.
    fn plan(&self, members: &[FuncIndex], sizer: Sizer<'_>, sizes: &mut MemberSizes) -> Plan {
        let Some(differing) = differing_parameters(members, self.encodings, self.pointer_type)
        else {
            return Plan::default();
        };
        // Nothing differs: equal functions the first pass left apart on purpose
        // (distinct addresses).
        let Some(split_at) = split_parameter(&differing.parameters) else {
            return Plan::default();
        };
        let mut split = Plan::default();
        let parts = split_by_parameter(members, split_at);
        for part in &parts {
            let plan = self.plan(part, sizer, sizes);
            split.merges.extend(plan.merges);
            split.saved += plan.saved;
            split.rejected.extend(plan.rejected);
        }
        let max_holes = self.options.max_holes;
        let whole = if differing.parameters.len() > max_holes {
            Err(format!(
                "{} parameters (at most {max_holes})",
                differing.parameters.len()
            ))
        } else {
            self.measure(members, differing, sizer, sizes)
        };
        match whole {
            Ok(merge) if merge.size_before - merge.size_after >= split.saved => Plan {
                saved: merge.size_before - merge.size_after,
                merges: vec![merge],
                rejected: Vec::new(),
            },
            Err(reason) if split.merges.is_empty() => {
                let reason = if parts.is_empty() {
                    reason
                } else {
                    format!("{reason}, and none of its subgroups merges")
                };
                Plan {
                    rejected: vec![(members.to_vec(), reason)],
                    ..Plan::default()
                }
            }
            _ => split,
        }
    }

    /// The size of `func` by `sizer`.
    fn size(&self, sizer: Sizer<'_>, func: &Function) -> Result<u64, NotCompiled> {
        match sizer {
            Sizer::Model(model) => Ok(model.predict(func)),
            Sizer::Measure => size_of(self.isa, func),
        }
    }

    /// The group `members` merged whole with the parameters `differing`, sized by
    /// `sizer`; an error (the reason) when it does not save at least `min_saved` or
    /// the target cannot compile it.
    fn measure(
        &self,
        members: &[FuncIndex],
        differing: Differing,
        sizer: Sizer<'_>,
        sizes: &mut MemberSizes,
    ) -> Result<Merge, String> {
        let merge = self.sized(members, differing, sizer, sizes)?;
        let (size_before, size_after) = (merge.size_before, merge.size_after);
        if !self.saves_enough(size_before, size_after) {
            let min_saved = self.options.min_saved.max(1);
            return Err(if size_after >= size_before {
                format!("not smaller ({size_before} -> {size_after})")
            } else {
                format!(
                    "saves {} (less than {min_saved}: {size_before} -> {size_after})",
                    size_before - size_after
                )
            });
        }
        Ok(merge)
    }

    /// Whether going from `before` to `after` saves at least `min_saved` (and at
    /// least 1).
    fn saves_enough(&self, before: u64, after: u64) -> bool {
        after.saturating_add(self.options.min_saved.max(1)) <= before
    }

    /// The group `members` merged whole with the parameters `differing`, its
    /// members and its merge (merged body and entry points) sized by `sizer`,
    /// whatever it saves; an error (the reason) when it cannot be built or the
    /// target cannot compile it.
    fn sized(
        &self,
        members: &[FuncIndex],
        differing: Differing,
        sizer: Sizer<'_>,
        sizes: &mut MemberSizes,
    ) -> Result<Merge, String> {
        let cannot_compile =
            |e: NotCompiled| format!("the target cannot compile {}: {}", e.function, e.reason);
        let mut size_before = 0;
        for &m in members {
            let size = sizes
                .entry(m)
                .or_insert_with(|| self.size(sizer, &self.module.get(m).func));
            size_before += size.clone().map_err(cannot_compile)?;
        }
        let basis = match (sizer, self.isa) {
            (Sizer::Model(_), _) => SizeBasis::Predicted,
            (Sizer::Measure, Some(_)) => SizeBasis::Compiled,
            (Sizer::Measure, None) => SizeBasis::Instructions,
        };
        let mut merge = Merge {
            members: members.to_vec(),
            differing,
            size_before,
            size_after: 0,
            basis,
        };
        // Measured under a stand-in name: the name of a callee does not change the
        // size of a call.
        let frame_pointers = self
            .isa
            .is_none_or(|isa| isa.flags().preserve_frame_pointers());
        let name = UserFuncName::testcase("clif_merge_measured");
        match sizer {
            // The entry points are predicted from their features, without
            // building them.
            Sizer::Model(model) => {
                let first = &self.module.get(members[0]).func;
                let merged = build_merged_body(self.module, first, name, &merge.differing)
                    .map_err(|NotSpliced(reason)| reason)?;
                merge.size_after = model.predict(&merged);
                let parameters = &merge.differing.parameters;
                for features in
                    entry_point_features(self.module, members, parameters, frame_pointers)
                {
                    merge.size_after += model.predict_features(&features);
                }
            }
            Sizer::Measure => {
                let (merged, entry_points) = build_merge(self.module, &merge, name, frame_pointers)
                    .map_err(|NotSpliced(reason)| reason)?;
                for func in std::iter::once(&merged).chain(&entry_points) {
                    merge.size_after += verified_size_of(self.isa, func).map_err(cannot_compile)?;
                }
            }
        }
        Ok(merge)
    }
}

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
    /// // Asking for more than the group saves leaves it alone, with the reason.
    /// let saved = group.size_before - group.size_after;
    /// let options = SimilarOptions::default().with_min_saved(saved + 1);
    /// let similar = SimilarPass::after(&module, &identical, &options, None);
    /// assert!(similar.outcome.groups.is_empty());
    /// assert_eq!(similar.outcome.rejected.len(), 1);
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
            let body = if unchanged {
                def.func.clone()
            } else {
                Arc::new(body.clone())
            };
            // Names are unique in `module`, so they are in a subset of its bodies.
            if let Ok(index) = set.push_shared(body, def.linkage) {
                index_of[function] = Some(index);
                if unchanged && let Some(fingerprints) = fingerprints {
                    known[index] = Some(fingerprints.hashes[function]);
                }
            }
        }
        let mut authority = NameAuthority::new();
        for func in reserved {
            authority.reserve_function(func);
        }
        let outcome = merge_similar_reserving(&set, options, isa, authority, &known);
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
pub struct SimilarGroupReport {
    /// The members, spelled as in CLIF (`%f`, `u0:12`), in input order.
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
