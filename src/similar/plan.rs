//! Planning a group of similar functions, or an aligned pair: merged whole, split,
//! or not at all, priced by the size model (`size_model.rs`) or by compiled sizes
//! (`cost.rs`), with the thresholds that decide a close call.

use super::cost::{NotCompiled, size_of, verified_size_of};
use super::entry_points::entry_point_features;
use super::groups::{Differing, differing_parameters, split_by_parameter, split_parameter};
use super::merged_body::{build_merged_body, merged_body_features};
use super::sequence::SequenceAlignment;
use super::size_model::{SizeFeatures, SizeModel};
use super::splice::NotSpliced;
use super::{Pricing, RejectionReason, SimilarOptions, SizeBasis, align, build_merge};
use crate::identical::encode::FunctionEncoding;
use crate::ir::{FuncIndex, FunctionSet};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Function, Type, UserFuncName};
use cranelift_codegen::isa::TargetIsa;
use std::collections::HashMap;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A merge predicted to save less than this share of its members' predicted size
/// is confirmed by compiling under [`Pricing::Confirmed`](super::Pricing::Confirmed). Chosen on the corpus
/// (`docs/similar.md`, "Pricing"), with [`SMALL_GROUP`]: brotli, the
/// program with the most similar code, spent 3.6% of its compile time (one thread,
/// one series of runs on a busy machine) in the similar merge at 0.05 and 4.6% at
/// 0.1 (5.4% at 0.2 without `SMALL_GROUP`), while the bytes saved on the corpus
/// moved by less than 0.01 percentage points. The default pricing,
/// [`Pricing::Modeled`](super::Pricing::Modeled), confirms nothing: on the corpus it
/// saves 256 bytes more for 0.3-0.5 points less of a compile ("Pricing").
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

/// An aligned pair the model prefers cut at anchors ([`align::Alignment::cut`])
/// is compiled both ways to decide only when its members are predicted to take
/// at most this many bytes; a larger one keeps its whole alignment. The model
/// underprices the cut's extra blocks and joins (on the corpus it preferred
/// the cut in 17 pairs, and compiling showed the cut saving more in 10), and
/// compiling both ways of the largest pairs cost more than a tenth of brotli's
/// compile time (`docs/similar.md`, "Several stretches per block").
pub(crate) const CUT_CONFIRM: u64 = 4096;

/// Growing an aligned group ([`Planner::plan_grown`]) compiles no more groups
/// the model predicts not to gain once this many compiled did not pay: a hub
/// with many candidates (brotli has hubs with some 25) would otherwise compile a
/// group per candidate, most of the round's cost, for a few bytes each
/// (`docs/similar.md`, "Groups of three or more").
pub(crate) const GROUP_REFUTED: usize = 1;

/// A group whose members are predicted to take at most this many bytes in all,
/// and that the model would not merge at all, is planned by compiled sizes under
/// [`Pricing::Confirmed`](super::Pricing::Confirmed): the model errs most on
/// small functions, and they compile fast. (Under the default
/// [`Pricing::Modeled`](super::Pricing::Modeled) the model decides: compiling
/// them took a sixth of brotli's similar merge for 591 bytes of the corpus's
/// code, `docs/similar.md`, "Pricing".) Also the size above which an aligned
/// pair across CFGs the model accepts is compiled to confirm.
pub(crate) const SMALL_GROUP: u64 = 1024;

/// Number of [`Phase`]s.
const PHASES: usize = 10;

/// A phase of the similar merge, or a part of its planning, timed by a
/// [`PhaseClock`].
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Before phase 1: the module of the bodies the identical merge kept, and the
    /// names to avoid (`SimilarPass`).
    Prepare,
    /// Phase 1: the groups of similar functions (fingerprints not taken by the
    /// identical merge, encodings, blanked keys).
    Groups,
    /// Phase 2: planning every group (what the parts below split, and the rest).
    PlanGroups,
    /// Phase 3: finding the aligned pairs (spanned walks and alignment).
    AlignPairs,
    /// Phase 3: planning every aligned pair.
    PlanAligned,
    /// Phase 4: names, merged bodies and entry points of the merges made.
    Build,
    /// In planning: the size model's prediction of members.
    PredictMembers,
    /// In planning: merged bodies built to be priced by the model.
    BuildPriced,
    /// In planning: the model's prediction of merged bodies and entry points.
    PredictMerges,
    /// In planning: members and merges compiled (built and verified first).
    Compile,
}

impl Phase {
    /// Every phase, in [`SimilarPhases`] order.
    const ALL: [Phase; PHASES] = [
        Phase::Prepare,
        Phase::Groups,
        Phase::PlanGroups,
        Phase::AlignPairs,
        Phase::PlanAligned,
        Phase::Build,
        Phase::PredictMembers,
        Phase::BuildPriced,
        Phase::PredictMerges,
        Phase::Compile,
    ];

    /// Its name in [`SimilarPhases`].
    fn name(self) -> &'static str {
        match self {
            Phase::Prepare => "prepare",
            Phase::Groups => "groups",
            Phase::PlanGroups => "plan groups",
            Phase::AlignPairs => "find aligned pairs",
            Phase::PlanAligned => "plan aligned pairs",
            Phase::Build => "build merges",
            Phase::PredictMembers => "  predict members",
            Phase::BuildPriced => "  build merged bodies to price",
            Phase::PredictMerges => "  predict merges",
            Phase::Compile => "  compile",
        }
    }
}

/// Time spent per [`Phase`] of one run of the similar merge, summed over threads
/// (diagnostics: `merge_bench similar-phases`).
#[derive(Default)]
pub(crate) struct PhaseClock([AtomicU64; PHASES]);

impl PhaseClock {
    /// Runs `f`, adding its wall time to `phase`.
    pub(crate) fn time<T>(&self, phase: Phase, f: impl FnOnce() -> T) -> T {
        let start = Instant::now();
        let result = f();
        self.add(phase, start.elapsed());
        result
    }

    /// Adds `time` to `phase`.
    pub(crate) fn add(&self, phase: Phase, time: Duration) {
        let nanos = u64::try_from(time.as_nanos()).unwrap_or(u64::MAX);
        self.0[phase as usize].fetch_add(nanos, Ordering::Relaxed);
    }

    /// The times so far, by phase.
    pub(crate) fn phases(&self) -> SimilarPhases {
        SimilarPhases(
            Phase::ALL
                .iter()
                .map(|&p| {
                    let nanos = self.0[p as usize].load(Ordering::Relaxed);
                    (p.name(), Duration::from_nanos(nanos))
                })
                .collect(),
        )
    }
}

/// Time spent in each phase of one run of the similar merge, summed over threads:
/// its four phases, then (indented names) the parts of planning in phases 2 and 3.
/// Diagnostics for `merge_bench similar-phases`; not a stable interface.
#[derive(Clone, Debug, Default)]
#[doc(hidden)]
#[non_exhaustive]
pub struct SimilarPhases(pub Vec<(&'static str, Duration)>);

/// A group chosen for merging, measured.
pub(super) struct Merge {
    /// The members, in input order.
    pub(super) members: Vec<FuncIndex>,
    /// Its parameters and the slots they replace.
    pub(super) differing: Differing,
    /// Size of the members.
    pub(super) size_before: u64,
    /// Size of the merged body and the entry points.
    pub(super) size_after: u64,
    /// What the sizes are.
    pub(super) basis: SizeBasis,
    /// The merged body built to price the merge (under a stand-in name), which
    /// phase 4 renames instead of building it again: one priced by compiling,
    /// an aligned pair's with stretches only the splice can count, or an aligned
    /// pair's merged on the model's word. `None` for a group the model priced
    /// from its first member's features (`merged_body_features`): phase 4
    /// builds it.
    pub(super) merged_body: Option<Function>,
}

/// What to do with a group: the subgroups to merge (the group itself, or parts of
/// it), what they save, and the parts not merged, with the reason.
#[derive(Default)]
pub(super) struct Plan {
    pub(super) merges: Vec<Merge>,
    pub(super) saved: u64,
    pub(super) rejected: Vec<(Vec<FuncIndex>, RejectionReason)>,
}

impl Plan {
    /// The plan that makes `merge`.
    fn merging(merge: Merge) -> Self {
        Self {
            saved: merge.size_before - merge.size_after,
            merges: vec![merge],
            rejected: Vec::new(),
        }
    }

    /// The plan that leaves `members` alone, for `reason`.
    fn refusing(members: &[FuncIndex], reason: RejectionReason) -> Self {
        Self {
            rejected: vec![(members.to_vec(), reason)],
            ..Self::default()
        }
    }
}

/// One step of growing an aligned group ([`Planner::plan_grown`]).
#[derive(Copy, Clone)]
struct Growth<'a> {
    /// The group (or pair) so far.
    current: &'a Merge,
    /// The members of the group grown: `current`'s, then those joining.
    members: &'a [FuncIndex],
    /// The functions joining.
    joining: &'a [FuncIndex],
    /// The merged pair the functions joining come from, if any.
    replaced: Option<&'a Merge>,
}

/// What growing one aligned group keeps between its steps
/// ([`Planner::plan_grown`]).
#[derive(Default)]
struct GrowthSizes {
    /// The members' predicted sizes.
    predicted: MemberSizes,
    /// The members' measured sizes.
    measured: MemberSizes,
    /// What the group so far saves by measured sizes, once known.
    current_measured: Option<u64>,
    /// How many groups compiled to confirm did not pay.
    refuted: usize,
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

/// What `merge` saves, when its sizes were compiled.
fn compiled_saving(merge: &Merge) -> Option<u64> {
    (merge.basis == SizeBasis::Compiled).then(|| merge.size_before.saturating_sub(merge.size_after))
}

/// Plans groups: what is constant for every group of a module.
pub(super) struct Planner<'a> {
    pub(super) module: &'a FunctionSet,
    pub(super) encodings: &'a SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    pub(super) options: &'a SimilarOptions,
    pub(super) isa: Option<&'a dyn TargetIsa>,
    pub(super) pointer_type: Type,
    /// Where the time goes.
    pub(super) clock: &'a PhaseClock,
    /// Each function's size-model features and the model's prediction from
    /// them, counted once however many groups and pairs it is priced in (a
    /// group's first member's features are also where its merged body's are
    /// counted from, `merged_body_features`).
    pub(super) predicted: &'a SecondaryMap<FuncIndex, OnceLock<(SizeFeatures, u64)>>,
    /// Each function's measured size ([`size_of`]), taken once however many
    /// groups and pairs compile it (a small group the model rejects, then an
    /// aligned pair of one of its members): compiling is deterministic, so the
    /// size is the same.
    pub(super) measured: &'a SecondaryMap<FuncIndex, OnceLock<Result<u64, NotCompiled>>>,
}

impl Planner<'_> {
    /// Whether a merge predicted to save `saved` of `size` bytes is a close call,
    /// compiled to confirm: only under [`Pricing::Confirmed`], below
    /// [`CLOSE_CALL`] of `size`.
    fn is_close(&self, saved: u64, size: u64) -> bool {
        self.options.pricing == Pricing::Confirmed && (saved as f64) < CLOSE_CALL * size as f64
    }

    /// How much a small aligned merge the model predicts to grow the code may
    /// grow and still be compiled to check: [`ALIGNED_GROWTH`] under
    /// [`Pricing::Confirmed`], not at all otherwise.
    fn aligned_growth(&self) -> f64 {
        if self.options.pricing == Pricing::Confirmed {
            ALIGNED_GROWTH
        } else {
            1.0
        }
    }

    /// The plan for the aligned pair of `first` and `alignment.second`: merged
    /// whole or not at all. Without a `model`, by measured sizes. With one, its
    /// predicted sizes decide (its merged body's features counted without
    /// building it where `merged_body_features` can; built once merged):
    ///
    /// * predicted to save at least `min_saved`: merged on the model's word,
    ///   unless the saving is a close call *measured against the smaller member*
    ///   ([`CLOSE_CALL`] of its predicted size): what a pair saves is about the
    ///   code the two share (the second member's copy of it goes away), so the
    ///   model's error on the saving scales with the smaller member, not with the
    ///   pair. A close call is compiled to confirm when the members take at most
    ///   [`ALIGNED_CONFIRM`] bytes, and not merged otherwise;
    /// * across CFGs (copied terminators, unpaired blocks, repaired values:
    ///   shapes the model was not fitted on, and whose block parameters it
    ///   underprices): predicted to save, compiled to confirm when the members
    ///   take more than [`SMALL_GROUP`] bytes;
    /// * predicted not to save: compiled only when the members are small
    ///   ([`SMALL_GROUP`]) and the merge is predicted to grow the code by at most
    ///   [`ALIGNED_GROWTH`] (the model over-predicts small merged pairs, but
    ///   rarely by more than that); not merged otherwise.
    ///
    /// A pair that can also be cut at anchors ([`align::Alignment::cut`]) is
    /// priced both ways; when the model prefers the cut and the members take at
    /// most [`CUT_CONFIRM`] bytes, both are compiled and the way that saves
    /// more is kept.
    pub(super) fn plan_aligned(
        &self,
        first: FuncIndex,
        alignment: &align::Alignment,
        model: Option<&SizeModel>,
    ) -> Plan {
        let whole = self.plan_alignment(first, alignment, model);
        let Some(cut) = &alignment.cut else {
            return whole;
        };
        let better = |cut: Plan, whole: Plan| {
            if !cut.merges.is_empty() && (whole.merges.is_empty() || cut.saved > whole.saved) {
                cut
            } else {
                whole
            }
        };
        let cut_priced = self.plan_alignment(first, cut, model);
        if model.is_none() || cut_priced.merges.is_empty() {
            return better(cut_priced, whole);
        }
        let before = cut_priced
            .merges
            .first()
            .map_or(u64::MAX, |m| m.size_before);
        if (!whole.merges.is_empty() && cut_priced.saved <= whole.saved) || before > CUT_CONFIRM {
            return whole;
        }
        // The model prefers the cut, whose extra blocks and joins it
        // underprices: both are compiled to decide.
        better(
            self.plan_alignment(first, cut, None),
            self.plan_alignment(first, alignment, None),
        )
    }

    /// The plan for the pair `members` merged whole with `differing`, by
    /// measured sizes (reusing `priced_body`, as [`Self::sized`]); `rejected`
    /// makes the refusal from its reason.
    fn compiled_pair(
        &self,
        members: &[FuncIndex],
        differing: Differing,
        priced_body: Option<Function>,
        rejected: &dyn Fn(RejectionReason) -> Plan,
    ) -> Plan {
        let sizes = &mut MemberSizes::new();
        match self.measure(members, differing, priced_body, Sizer::Measure, sizes) {
            Ok(merge) => Plan::merging(merge),
            Err(reason) => rejected(reason),
        }
    }

    /// The plan for the pair of `first` and `alignment.second` merged by
    /// sequence alignment: merged whole or not at all. With a `model`, its
    /// merged body is built and predicted; a pair predicted to save is
    /// compiled to confirm unless its members are small ([`SMALL_GROUP`]), as
    /// the model was not fitted on such bodies (selects, arms, values the SSA
    /// builder carries through block parameters). Without one, by measured
    /// sizes.
    pub(super) fn plan_sequence(
        &self,
        first: FuncIndex,
        alignment: &SequenceAlignment,
        model: Option<&SizeModel>,
    ) -> Plan {
        let members = [first, alignment.second];
        let differing = Differing::sequence(alignment.clone());
        let rejected = |reason: RejectionReason| {
            Plan::refusing(&members, RejectionReason::Sequence(Box::new(reason)))
        };
        let merged = Plan::merging;
        let compiled = |differing: Differing, priced_body: Option<Function>| {
            self.compiled_pair(&members, differing, priced_body, &rejected)
        };
        let Some(model) = model else {
            return compiled(differing, None);
        };
        let predicted = match self.sized(
            &members,
            differing,
            None,
            Sizer::Model(model),
            &mut MemberSizes::new(),
        ) {
            Ok(predicted) => predicted,
            Err(reason) => return rejected(reason),
        };
        let (before, after) = (predicted.size_before, predicted.size_after);
        if !self.saves_enough(before, after) {
            return rejected(RejectionReason::PredictedNotSmaller { before, after });
        }
        if before > SMALL_GROUP {
            return compiled(predicted.differing, predicted.merged_body);
        }
        merged(predicted)
    }

    /// [`Self::plan_aligned`] for one way of aligning the pair.
    fn plan_alignment(
        &self,
        first: FuncIndex,
        alignment: &align::Alignment,
        model: Option<&SizeModel>,
    ) -> Plan {
        let members = [first, alignment.second];
        let differing = Differing::aligned(alignment.without_cut());
        let rejected = |reason: RejectionReason| {
            Plan::refusing(&members, RejectionReason::Aligned(Box::new(reason)))
        };
        let merged = Plan::merging;
        let compiled = |differing: Differing, priced_body: Option<Function>| {
            self.compiled_pair(&members, differing, priced_body, &rejected)
        };
        let Some(model) = model else {
            return compiled(differing, None);
        };
        let mut sizes = MemberSizes::new();
        let predicted = match self.sized(&members, differing, None, Sizer::Model(model), &mut sizes)
        {
            Ok(predicted) => predicted,
            Err(reason) => return rejected(reason),
        };
        let (before, after) = (predicted.size_before, predicted.size_after);
        if self.saves_enough(before, after) {
            let saved = before - after;
            let smaller = sizes.values().filter_map(|s| s.clone().ok()).min();
            // Bodies across CFGs (copied terminators, unpaired blocks, repaired
            // values) are shapes the model was not fitted on: compiled to confirm
            // unless small, where its error is a few bytes.
            if alignment.is_across_cfgs() && before > SMALL_GROUP {
                return compiled(predicted.differing, predicted.merged_body);
            }
            if !self.is_close(saved, smaller.unwrap_or(before)) {
                return match self.with_merged_body(predicted) {
                    Ok(merge) => merged(merge),
                    Err(reason) => rejected(reason),
                };
            }
            if before > ALIGNED_CONFIRM {
                return rejected(RejectionReason::TooLargeToConfirm { saved, before });
            }
            return compiled(predicted.differing, predicted.merged_body);
        }
        let growth = after as f64 / before.max(1) as f64;
        if growth > self.aligned_growth() || before > SMALL_GROUP {
            return rejected(RejectionReason::PredictedToGrow { before, after });
        }
        compiled(predicted.differing, predicted.merged_body)
    }

    /// The merged aligned pair `pair` grown into a group by `offers`: each a
    /// function left alone or the members of another merged pair (with the
    /// merge it would replace), given by their alignments with `pair`'s first
    /// member, tried in order and kept when the group with them saves more than
    /// the group without them (and than the pair they come from); with the indices
    /// of the offers kept, or `None` when none is (the pair stays as it is).
    /// With a model, the gain (what the group saves beyond the group so far and
    /// the pair it absorbs, all predicted, whatever priced them before) decides;
    /// a gain predicted to be a close call ([`CLOSE_CALL`] of the joining
    /// functions' predicted size) is compiled to confirm (when the group's
    /// members take at most [`ALIGNED_CONFIRM`] bytes; not merged otherwise),
    /// and so is a predicted loss of at most [`ALIGNED_GROWTH`] of functions
    /// joining that take at most [`SMALL_GROUP`] bytes (as for a small pair),
    /// until [`GROUP_REFUTED`] groups compiled did not pay.
    /// Without one, by measured sizes. Where the functions joining
    /// differ from the first elsewhere than the group so far, `widen` aligns
    /// every member again so that all differ at the same places (each stretch
    /// covering every member's span, [`align::FirstRound::widened`]).
    pub(super) fn plan_grown(
        &self,
        pair: &Merge,
        offers: &[(&[align::Alignment], Option<&Merge>)],
        model: Option<&SizeModel>,
        widen: &dyn Fn(&[&align::Alignment]) -> Option<Vec<align::Alignment>>,
    ) -> Option<(Merge, Vec<usize>)> {
        let mut alignment = pair.differing.alignment.clone()?;
        let mut grown: Option<Merge> = None;
        let mut taken = Vec::new();
        let mut joined: Vec<align::Alignment> = Vec::new();
        let mut sizes = GrowthSizes {
            current_measured: compiled_saving(pair),
            ..GrowthSizes::default()
        };
        for (k, &(alignments, replaced)) in offers.iter().enumerate() {
            // Every member's alignment with the first, the pair's first.
            let mut all: Vec<&align::Alignment> = vec![&alignment];
            all.extend(&joined);
            all.extend(alignments);
            let widened = if all.iter().all(|a| a.same_places(&alignment)) {
                None
            } else {
                match widen(&all) {
                    Some(widened) => Some(widened),
                    None => continue,
                }
            };
            let (next_alignment, next_joined) = match widened {
                Some(mut widened) => {
                    let rest = widened.split_off(1);
                    (widened.pop()?, rest)
                }
                None => {
                    let mut next = joined.clone();
                    next.extend_from_slice(alignments);
                    (alignment.clone(), next)
                }
            };
            let members: Vec<FuncIndex> = pair
                .members
                .iter()
                .copied()
                .chain(next_joined.iter().map(|a| a.second))
                .collect();
            let differing = Differing::grouped(next_alignment.clone(), next_joined.clone());
            let current = grown.as_ref().unwrap_or(pair);
            let joining: Vec<FuncIndex> = alignments.iter().map(|a| a.second).collect();
            let step = Growth {
                current,
                members: &members,
                joining: &joining,
                replaced,
            };
            if let Some(merge) = self.grown_by(step, differing, model, &mut sizes) {
                sizes.current_measured = compiled_saving(&merge);
                grown = Some(merge);
                taken.push(k);
                alignment = next_alignment;
                joined = next_joined;
            }
        }
        // The merged body of the group grown, built once: a group the splice
        // refuses leaves the pair as it is.
        let merge = self.with_merged_body(grown?).ok()?;
        Some((merge, taken))
    }

    /// The group `step.members` with `differing` when it saves more than
    /// `step.current` and the merge `step.replaced` (if any) together, priced as
    /// [`Self::plan_grown`] says; `sizes` are kept between steps.
    fn grown_by(
        &self,
        step: Growth<'_>,
        differing: Differing,
        model: Option<&SizeModel>,
        sizes: &mut GrowthSizes,
    ) -> Option<Merge> {
        let saved = |merge: &Merge| merge.size_before.saturating_sub(merge.size_after);
        let GrowthSizes {
            predicted: predicted_sizes,
            measured: measured_sizes,
            current_measured,
            refuted,
        } = sizes;
        let Growth {
            current,
            members,
            joining,
            replaced,
        } = step;
        let Some(model) = model else {
            // Without a model, sizes are measured.
            let baseline = saved(current)
                + match replaced {
                    Some(r) => self.saved_by(r, Sizer::Measure, measured_sizes)?,
                    None => 0,
                };
            return self
                .measure(members, differing, None, Sizer::Measure, measured_sizes)
                .ok()
                .filter(|m| saved(m) > baseline);
        };
        // Predicted again whatever priced it (a pair confirmed by compiling):
        // the gain is what the model predicts joining adds.
        let baseline = self.saved_by(current, Sizer::Model(model), predicted_sizes)?
            + match replaced {
                Some(r) => self.saved_by(r, Sizer::Model(model), predicted_sizes)?,
                None => 0,
            };
        let predicted = self
            .sized(
                members,
                differing,
                None,
                Sizer::Model(model),
                predicted_sizes,
            )
            .ok()?;
        let joining_size: u64 = joining.iter().map(|&f| self.predict(model, f)).sum();
        if self.saves_enough(predicted.size_before, predicted.size_after)
            && saved(&predicted) > baseline
        {
            let gain = saved(&predicted) - baseline;
            if !self.is_close(gain, joining_size) {
                // Built once grown (`plan_grown`).
                return Some(predicted);
            }
            if predicted.size_before > ALIGNED_CONFIRM {
                return None;
            }
        } else {
            // Predicted not to gain: compiled only when the functions joining are
            // small and the loss predicted is at most `ALIGNED_GROWTH` of them,
            // as a small pair the model rejects.
            let loss = baseline.saturating_sub(saved(&predicted));
            let growth = self.aligned_growth() - 1.0;
            if joining_size > SMALL_GROUP
                || loss as f64 > growth * joining_size as f64
                || *refuted == GROUP_REFUTED
            {
                return None;
            }
        }
        // A close call: the group, what it grows and what it replaces, compiled.
        let compiled = (|| {
            let mut baseline = match *current_measured {
                Some(measured) => measured,
                None => self.saved_by(current, Sizer::Measure, measured_sizes)?,
            };
            *current_measured = Some(baseline);
            if let Some(r) = replaced {
                baseline += match compiled_saving(r) {
                    Some(measured) => measured,
                    None => self.saved_by(r, Sizer::Measure, measured_sizes)?,
                };
            }
            let priced_body = predicted.merged_body;
            self.measure(
                members,
                predicted.differing,
                priced_body,
                Sizer::Measure,
                measured_sizes,
            )
            .ok()
            .filter(|m| saved(m) > baseline)
        })();
        *refuted += usize::from(compiled.is_none());
        compiled
    }

    /// What `merge` saves with sizes by `sizer`; `None` when it cannot be
    /// built or compiled.
    fn saved_by(&self, merge: &Merge, sizer: Sizer<'_>, sizes: &mut MemberSizes) -> Option<u64> {
        let merge = self
            .sized(&merge.members, merge.differing.clone(), None, sizer, sizes)
            .ok()?;
        Some(merge.size_before.saturating_sub(merge.size_after))
    }

    /// `merge` (priced by the model) with its merged body, built now when it was
    /// priced from counted features: an aligned pair is refused here, as when it
    /// was built to be priced, when its stretches cannot be spliced.
    fn with_merged_body(&self, mut merge: Merge) -> Result<Merge, RejectionReason> {
        if merge.merged_body.is_some() || merge.differing.alignment.is_none() {
            return Ok(merge);
        }
        let first = &self.module.get(merge.members[0]).func;
        let name = UserFuncName::testcase("clif_merge_measured");
        let merged = self
            .clock
            .time(Phase::BuildPriced, || {
                build_merged_body(self.module, first, name, &merge.differing)
            })
            .map_err(not_spliced)?;
        debug_assert_eq!(
            merged_body_features(
                self.module,
                first,
                &SizeFeatures::of(first),
                &merge.differing
            ),
            Some(SizeFeatures::of(&merged)),
            "the features counted are those of the body built"
        );
        merge.merged_body = Some(merged);
        Ok(merge)
    }

    /// The best plan for the group `members`. With a `model`, planned by predicted
    /// sizes, then each merge the plan makes that is predicted to save less than
    /// [`CLOSE_CALL`] of its members' size is compiled to confirm, and dropped
    /// when it does not pay (a small group the model rejects is planned by
    /// compiled sizes instead). Without one, planned by measured sizes (compiled,
    /// or instruction counts without an ISA).
    pub(super) fn plan_group(&self, members: &[FuncIndex], model: Option<&SizeModel>) -> Plan {
        let plan = |sizer: Sizer<'_>, sizes: &mut MemberSizes| self.plan(members, sizer, sizes);
        let Some(model) = model else {
            return plan(Sizer::Measure, &mut MemberSizes::new());
        };
        let mut predicted_sizes = MemberSizes::new();
        let predicted = plan(Sizer::Model(model), &mut predicted_sizes);
        if predicted.merges.is_empty() {
            // Small functions are where the model errs most and compiling costs
            // least: a small group it rejects is planned by compiled sizes.
            let size: u64 = members.iter().map(|&m| self.predict(model, m)).sum();
            if self.options.pricing == Pricing::Confirmed && size <= SMALL_GROUP {
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
            if !self.is_close(saved, merge.size_before) {
                plan.saved += saved;
                plan.merges.push(merge);
                continue;
            }
            let priced_body = merge.merged_body;
            match self.measure(
                &merge.members,
                merge.differing,
                priced_body,
                Sizer::Measure,
                &mut sizes,
            ) {
                Ok(merge) => {
                    plan.saved += merge.size_before - merge.size_after;
                    plan.merges.push(merge);
                }
                Err(reason) => plan.rejected.push((
                    merge.members,
                    RejectionReason::NotConfirmed {
                        predicted_saved: saved,
                        compiled: Box::new(reason),
                    },
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
            Err(RejectionReason::TooManyParameters {
                parameters: differing.parameters.len(),
                max_holes,
            })
        } else {
            self.measure(members, differing, None, sizer, sizes)
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
                    RejectionReason::NoSubgroupMerges(Box::new(reason))
                };
                Plan {
                    rejected: vec![(members.to_vec(), reason)],
                    ..Plan::default()
                }
            }
            _ => split,
        }
    }

    /// The size of member `m` by `sizer`.
    fn size(&self, sizer: Sizer<'_>, m: FuncIndex) -> Result<u64, NotCompiled> {
        match sizer {
            Sizer::Model(model) => Ok(self.predict(model, m)),
            Sizer::Measure => self.measured[m]
                .get_or_init(|| {
                    self.clock.time(Phase::Compile, || {
                        size_of(self.isa, &self.module.get(m).func)
                    })
                })
                .clone(),
        }
    }

    /// The model's prediction of function `m`, made once.
    fn predict(&self, model: &SizeModel, m: FuncIndex) -> u64 {
        self.predicted_features(model, m).1
    }

    /// The size-model features of function `m` and the model's prediction from
    /// them, counted once.
    fn predicted_features(&self, model: &SizeModel, m: FuncIndex) -> &(SizeFeatures, u64) {
        self.predicted[m].get_or_init(|| {
            self.clock.time(Phase::PredictMembers, || {
                let features = SizeFeatures::of(&self.module.get(m).func);
                let predicted = model.predict_features(&features);
                (features, predicted)
            })
        })
    }

    /// The group `members` merged whole with the parameters `differing`, sized by
    /// `sizer` (reusing `priced_body`, as [`Self::sized`]); an error (the reason)
    /// when it does not save at least `min_saved` or the target cannot compile it.
    fn measure(
        &self,
        members: &[FuncIndex],
        differing: Differing,
        priced_body: Option<Function>,
        sizer: Sizer<'_>,
        sizes: &mut MemberSizes,
    ) -> Result<Merge, RejectionReason> {
        let merge = self.sized(members, differing, priced_body, sizer, sizes)?;
        let (size_before, size_after) = (merge.size_before, merge.size_after);
        if !self.saves_enough(size_before, size_after) {
            let min_saved = self.options.min_saved.max(1);
            return Err(if size_after >= size_before {
                RejectionReason::NotSmaller {
                    before: size_before,
                    after: size_after,
                }
            } else {
                RejectionReason::SavesTooLittle {
                    before: size_before,
                    after: size_after,
                    min_saved,
                }
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
    /// target cannot compile it. `priced_body`: the merged body already built for
    /// `differing` (to be priced by the model), compiled instead of building it
    /// again.
    fn sized(
        &self,
        members: &[FuncIndex],
        differing: Differing,
        priced_body: Option<Function>,
        sizer: Sizer<'_>,
        sizes: &mut MemberSizes,
    ) -> Result<Merge, RejectionReason> {
        let cannot_compile = |e: NotCompiled| RejectionReason::CannotCompile {
            function: e.function,
            reason: e.reason,
        };
        let mut size_before = 0;
        for &m in members {
            let size = sizes.entry(m).or_insert_with(|| self.size(sizer, m));
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
            merged_body: None,
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
                // A group is priced from features counted from its first
                // member, unbuilt (phase 4 builds the merges made; an aligned
                // pair merged on the model's word is built once priced,
                // `with_merged_body`), unless it has stretches only the splice
                // can count: then its merged body is built, and kept.
                let first_features = &self.predicted_features(model, members[0]).0;
                let counted = self.clock.time(Phase::PredictMerges, || {
                    merged_body_features(self.module, first, first_features, &merge.differing)
                });
                let (features, merged) = match counted {
                    Some(features) => (features, None),
                    None => {
                        let merged = self
                            .clock
                            .time(Phase::BuildPriced, || {
                                build_merged_body(self.module, first, name, &merge.differing)
                            })
                            .map_err(not_spliced)?;
                        let features = self
                            .clock
                            .time(Phase::PredictMerges, || SizeFeatures::of(&merged));
                        (features, Some(merged))
                    }
                };
                merge.size_after = self.clock.time(Phase::PredictMerges, || {
                    let parameters = &merge.differing.parameters;
                    let entry_points =
                        entry_point_features(self.module, members, parameters, frame_pointers);
                    model.predict_features(&features)
                        + entry_points
                            .iter()
                            .map(|f| model.predict_features(f))
                            .sum::<u64>()
                });
                merge.merged_body = merged;
            }
            Sizer::Measure => {
                let (size, merged) = self.clock.time(Phase::Compile, || {
                    let (merged, entry_points) =
                        build_merge(self.module, &merge, priced_body, name, frame_pointers)
                            .map_err(not_spliced)?;
                    let mut size = 0;
                    for func in std::iter::once(&merged).chain(&entry_points) {
                        size += verified_size_of(self.isa, func).map_err(cannot_compile)?;
                    }
                    Ok::<_, RejectionReason>((size, merged))
                })?;
                merge.size_after = size;
                merge.merged_body = Some(merged);
            }
        }
        Ok(merge)
    }
}

/// The refusal of a merge whose merged body could not be spliced.
fn not_spliced(NotSpliced(reason): NotSpliced) -> RejectionReason {
    RejectionReason::NotSpliced(reason)
}
