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
//! sizes of the corpus) prices every member and every merge tried, and decides,
//! compiling nothing at the default options (of the kinds off by default, an
//! aligned pair across CFGs over 1 KiB, `SMALL_GROUP`, and a pair the model
//! prefers cut at anchors up to 4 KiB, `CUT_CONFIRM`, are compiled to decide).
//! With [`Pricing::Confirmed`], the merges it accepts by a small margin
//! (predicted to save less than 5% of the members' size, `CLOSE_CALL`) are
//! compiled to confirm, and dropped if Cranelift's code does not shrink, and a
//! group of small functions (at most 1 KiB predicted in all) that the model
//! would not merge at all is planned by compiled sizes, as the model errs most
//! there and compiling them is cheap. Compiling every candidate instead
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
//! stretch of instructions per block (several, cut at runs of equal instructions,
//! with [`SimilarOptions::align_anchors`]), possibly empty on one side, whose values are
//! used after it only where the other function uses its own stretch's values in
//! the same places (escapes, passed to the join block; wasmtime expands a small constant-length `memory.copy`
//! inline, so two functions that differ in that length differ by instructions, not
//! constants). The merged body of a pair is a copy of the first member in which
//! each stretch is a branch on one more parameter, a [`HoleKind::Selector`]: `0`
//! runs the first member's stretch, `1` a copy of the second's (`splice.rs`); both
//! arms rejoin the rest of the block. The entry points pass `0` and `1`. A pair is
//! priced by the model like a group (`Planner::plan_aligned`); under
//! [`Pricing::Confirmed`] a close call is judged against the smaller member (what
//! a pair saves is about the code the two share), a small pair the model rejects
//! is compiled only when predicted to grow by at most 5% (`ALIGNED_GROWTH`), and a
//! close call on a pair larger than 8 KiB (`ALIGNED_CONFIRM`) is not merged.
//!
//! Off by default, a round after every other merges pairs of one signature
//! whole by *sequence alignment* ([`SimilarOptions::align_sequence`],
//! `sequence/`): blocks paired, instructions aligned when equal but for
//! their value operands, each operand that differs chosen by `select` on the
//! selector, the merged body written by `cranelift-frontend`'s SSA builder.
//!
//! A last round, off by default, grows merged pairs into groups of three or more
//! ([`SimilarOptions::align_groups`]): a function left alone, or another merged
//! pair, that aligns with a pair's first member joins it when the group saves
//! more, every member made to differ from the first at the same places; the
//! merged body dispatches on the selector (`0..k`) to one arm per member at
//! each stretch (`splice/group.rs`, `Planner::plan_grown`).
//!
//! The pass runs on a module whose identical functions were already merged, so
//! callees are compared by identity and function addresses by exact name.
//!
//! # Phases and files
//!
//! 1. `groups`: which functions are similar (equal blanked streams), which
//!    constants differ, which share a parameter, how a group splits.
//! 2. `plan`: each group planned (in parallel): the group whole or split, priced
//!    by `size_model` (predicted code size) or `cost` (compiled code size).
//! 3. `align`: pairs of the functions left that align, each planned the same way;
//!    `sequence`: pairs merged whole by sequence alignment, last.
//! 4. `merged_body` (the parameterized copy and its name, with `splice` for the
//!    stretches of an aligned pair, and `pinned`: memory accesses in blocks
//!    that run for some members only lose `can_move`) and `entry_points` (the
//!    members' new bodies), for every merge made.
//!
//! This file holds the options and the outcome and runs the four phases
//! (`merge_similar_reserving`); `pass` runs them on the identical merge's output
//! ([`SimilarPass`]), as the command line and `MergingModule` do.

mod align;
pub(crate) mod cost;
pub(crate) mod entry_points;
pub(crate) mod groups;
mod merged_body;
mod pass;
mod pinned;
mod plan;
mod rejection;
mod sequence;
pub(crate) mod size_model;
mod splice;

pub use entry_points::EntryPoints;
pub use groups::{HoleKind, HoleParameter};
pub use pass::{SimilarGroupReport, SimilarPass};
pub use plan::SimilarPhases;
use plan::{Merge, Phase, PhaseClock, Planner};
pub use rejection::RejectionReason;

use crate::ir::parallel;
use crate::ir::{FuncIndex, FunctionSet, NameAuthority, reads_machine_state};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Function, UserFuncName, types};
use cranelift_codegen::isa::TargetIsa;
use entry_points::build_entry_points;
use groups::{KnownFingerprints, find_groups, similar_walk};
use merged_body::{MergedNames, build_merged_body};
use size_model::SizeModel;
use splice::NotSpliced;

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
    /// Whether merging by alignment lets a value a differing stretch defines be
    /// used after it, when the other function's stretch defines a value used in
    /// exactly the same places: the merged body passes the arm's value to a
    /// parameter of the block where the arms join (`align.rs`, "escapes").
    pub align_escapes: bool,
    /// Whether merging by alignment (with [`Self::align_escapes`]) also lets a
    /// value a differing stretch defines be used by later stretches of its own
    /// function only (a *one-sided escape*): the merged body passes it to a
    /// parameter of the join, the other arm passing a placeholder constant, and
    /// only arms of the same function (run under the same selector) read it.
    pub align_one_sided: bool,
    /// Whether merging by alignment also pairs functions whose terminators differ
    /// (blocks paired by position in the walk, same blocks and block parameters):
    /// where two paired blocks end differently, the merged body branches on the
    /// selector to either function's rest of the block, terminator included
    /// (`align.rs`, `splice.rs`). Tried on the functions the first alignment round
    /// left alone. Off by default.
    pub align_cfg: bool,
    /// Whether merging by alignment also pairs functions of the same signature
    /// whose block structures differ: their walks' blocks are paired by a
    /// sequence alignment, paired blocks aligned as across CFGs, and blocks
    /// without a partner kept, each reached only from its own function's code
    /// (`align/blocks.rs`). Tried last, on the functions every other round left
    /// alone.
    pub align_blocks: bool,
    /// Whether merging by alignment also grows merged aligned pairs into groups
    /// of three or more: a function left alone, or another merged pair, that
    /// aligns with a pair's first member joins it when the group saves more,
    /// every member aligned to differ from the first member at the same places
    /// (stretches widened where they differ elsewhere), the merged body choosing
    /// one member's stretch per selector value (`align.rs`, `splice/group.rs`).
    /// Tried last, on the functions and pairs every other round left. Off by
    /// default: on the corpus it adds 0.05 points of code saved for 1-1.7% of a
    /// compile (`docs/similar.md`, "Groups of three or more").
    pub align_groups: bool,
    /// Whether merging by alignment also tries each pair with its differing
    /// stretches cut at *anchors*, runs of equal instructions inside them, so
    /// that a block may hold several stretches (`align/anchors.rs`); the cut
    /// is priced beside the alignment with one stretch per block, and compiled
    /// with it to decide when the model prefers it. Applies to every alignment
    /// round but the groups'. Off by default: on the corpus it adds 0.01
    /// points of code saved for about 2 points of a compile (`docs/similar.md`,
    /// "Several stretches per block").
    pub align_anchors: bool,
    /// Whether the functions every other round left alone are also paired by
    /// sequence alignment (`sequence/`): functions of one signature merged
    /// whole, whatever their block structures, their instructions aligned when
    /// equal but for value operands, each operand that differs chosen by
    /// `select` on the selector, each run of instructions only one has behind
    /// a branch on it. Off by default.
    pub align_sequence: bool,
}

impl Default for SimilarOptions {
    fn default() -> Self {
        Self {
            max_holes: DEFAULT_MAX_HOLES,
            min_saved: 1,
            pricing: Pricing::Modeled,
            align: true,
            align_escapes: true,
            align_one_sided: true,
            align_cfg: false,
            align_blocks: false,
            align_groups: false,
            align_anchors: false,
            align_sequence: false,
        }
    }
}

/// How the similar merge finds the sizes that decide whether a group pays (on an
/// ISA; without one, sizes are instruction counts either way).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Pricing {
    /// The ISA's size model predicts every size and decides. An ISA without a
    /// model compiles, as [`Pricing::Compiled`].
    #[default]
    Modeled,
    /// As [`Pricing::Modeled`], but a group of small functions (at most 1 KiB
    /// in all) that the model would not merge is planned by compiled sizes,
    /// where the model errs most and compiling costs least; each merge
    /// planned that is predicted to save less than 5% of its members' size (of
    /// the smaller member's, for an aligned pair) is then compiled (members,
    /// merged body, entry points) and made only if it pays; a close call on an
    /// aligned pair over 8 KiB is not merged, and a small aligned pair
    /// predicted to grow the code by at most 5% is compiled to check. Slower,
    /// for about 300 bytes more of the corpus's 6.5 MB of code.
    Confirmed,
    /// Every member and every merge tried is compiled by Cranelift and its code
    /// bytes counted: exact, and about as costly as compiling the groups' members
    /// several times.
    Compiled,
}

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

    /// These options with values escaping an aligned stretch allowed (`true`) or
    /// not ([`Self::align_escapes`]).
    pub fn with_align_escapes(mut self, escapes: bool) -> Self {
        self.align_escapes = escapes;
        self
    }

    /// These options with one-sided escapes allowed (`true`) or not
    /// ([`Self::align_one_sided`]).
    pub fn with_align_one_sided(mut self, one_sided: bool) -> Self {
        self.align_one_sided = one_sided;
        self
    }

    /// These options with stretches also cut at anchors (`true`) or not
    /// ([`Self::align_anchors`]).
    pub fn with_align_anchors(mut self, anchors: bool) -> Self {
        self.align_anchors = anchors;
        self
    }

    /// The same options with merging by sequence alignment on (`true`) or not
    /// ([`Self::align_sequence`]).
    pub fn with_align_sequence(mut self, sequence: bool) -> Self {
        self.align_sequence = sequence;
        self
    }

    /// The same options with merging by alignment across differing terminators on
    /// (`true`) or off ([`Self::align_cfg`]).
    pub fn with_align_cfg(mut self, cfg: bool) -> Self {
        self.align_cfg = cfg;
        self
    }

    /// Returns the options with merging by block pairing on (`true`) or off
    /// ([`Self::align_blocks`]).
    pub fn with_align_blocks(mut self, blocks: bool) -> Self {
        self.align_blocks = blocks;
        self
    }

    /// Returns the options with aligned pairs grown into groups of three or
    /// more (`true`) or not ([`Self::align_groups`]).
    pub fn with_align_groups(mut self, groups: bool) -> Self {
        self.align_groups = groups;
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
#[non_exhaustive]
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
#[non_exhaustive]
pub struct SimilarGroup {
    /// The members, in input order; the first one's body is the merged body's.
    /// An aligned group of three or more lists them in selector order instead
    /// (the merged pair's two, then each member that joined it).
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
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct SimilarOutcome {
    /// The merged groups, ordered by first member.
    pub groups: Vec<SimilarGroup>,
    /// Each member's new body: an entry point calling its group's merged body.
    pub entry_points: EntryPoints,
    /// One merged body per group, in group order.
    pub merged_bodies: Vec<Function>,
    /// Groups of similar functions found but not merged, with the reason.
    pub rejected: Vec<(Vec<FuncIndex>, RejectionReason)>,
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
    merge_similar_clocked(
        module,
        options,
        isa,
        authority,
        &SecondaryMap::new(),
        known,
        &PhaseClock::default(),
    )
}

/// [`merge_similar_reserving`], adding the time of each phase to `clock`. The
/// functions `named` marks have their names in `authority` already (the same
/// bodies were reserved), so they are not reserved again.
pub(crate) fn merge_similar_clocked(
    module: &FunctionSet,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
    authority: NameAuthority,
    named: &SecondaryMap<FuncIndex, bool>,
    known: &KnownFingerprints,
    clock: &PhaseClock,
) -> SimilarOutcome {
    // Phase 1 of 4: the groups of similar functions.
    let candidates = clock.time(Phase::Groups, || find_groups(module, similar_walk(), known));

    // Phase 2 of 4: per group (in parallel), the subgroups to merge: the group
    // itself or subgroups of it, whichever saves the most.
    let model = match options.pricing {
        Pricing::Modeled | Pricing::Confirmed => isa.and_then(SizeModel::for_isa),
        Pricing::Compiled => None,
    };
    let mut predicted = SecondaryMap::with_capacity(module.len());
    predicted.resize(module.len());
    let mut measured = SecondaryMap::with_capacity(module.len());
    measured.resize(module.len());
    let planner = Planner {
        module,
        encodings: &candidates.encodings,
        options,
        isa,
        pointer_type: isa.map_or(types::I64, |isa| isa.pointer_type()),
        clock,
        predicted: &predicted,
        measured: &measured,
    };
    let plans = clock.time(Phase::PlanGroups, || {
        parallel::map(&candidates.groups, 1, |members| {
            planner.plan_group(members, model.as_ref())
        })
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
        // Functions that read machine state are among them: whether one does
        // reads every instruction, so each round leaves them out only among
        // the few it would otherwise read whole, as if they had been left out
        // here (`align::walk_candidates`).
        let mut rest: Vec<FuncIndex> = module
            .iter()
            .filter(|(f, _)| !merged[*f])
            .map(|(f, _)| f)
            .collect();
        // Rounds, each on what the rounds before left, so that every pair of a
        // round stays as it is: first without one-sided escapes, then with them
        // (a pair they let align has more instructions in common than the pairs
        // found without them, and would otherwise take their partners: on the
        // corpus, resvg saved less), then across differing terminators, then by
        // block pairing.
        let mut rounds = vec![AlignRound::WithoutOneSided];
        if options.align_escapes && options.align_one_sided {
            rounds.push(AlignRound::OneSided);
        }
        if options.align_cfg {
            rounds.push(AlignRound::AcrossTerminators);
        }
        if options.align_blocks {
            rounds.push(AlignRound::PairedBlocks);
        }
        // The first round's walks and attempts, which the one-sided round reuses.
        let mut first_round = None;
        for round in rounds {
            for &m in merges.iter().flat_map(|m| &m.members) {
                merged[m] = true;
            }
            rest.retain(|&f| !merged[f]);
            let rules = align::Rules {
                escapes: options.align_escapes,
                one_sided: options.align_one_sided,
                cfg: false,
                anchors: options.align_anchors,
            };
            let pairs = clock.time(Phase::AlignPairs, || match (round, &first_round) {
                (AlignRound::WithoutOneSided, _) => {
                    let (pairs, search) =
                        align::AlignedSearch::without_one_sided(module, &rest, rules);
                    first_round = Some(search);
                    pairs
                }
                // Only the pairs that need a one-sided escape: the pairs of the
                // round before were priced already.
                (AlignRound::OneSided, Some(search)) => search.one_sided_pairs(module, &rest),
                (AlignRound::OneSided, None) => align::find_aligned_pairs(module, &rest, rules),
                (AlignRound::AcrossTerminators, _) => {
                    align::find_aligned_pairs(module, &rest, align::Rules { cfg: true, ..rules })
                }
                (AlignRound::PairedBlocks, _) => {
                    // Which functions block pairing walks depends on which
                    // others it could pair with: readers of machine state are
                    // left out first.
                    let rest: Vec<FuncIndex> = rest
                        .iter()
                        .copied()
                        .filter(|&f| !reads_machine_state(&module.get(f).func))
                        .collect();
                    align::blocks::find_paired_pairs(module, &rest, rules)
                }
            });
            let plans = clock.time(Phase::PlanAligned, || {
                parallel::map(&pairs, 1, |(first, alignment)| {
                    planner.plan_aligned(*first, alignment, model.as_ref())
                })
            });
            for plan in plans {
                merges.extend(plan.merges);
                outcome.rejected.extend(plan.rejected);
            }
        }
        if let (true, Some(first_round)) = (options.align_groups, &first_round) {
            for &m in merges.iter().flat_map(|m| &m.members) {
                merged[m] = true;
            }
            rest.retain(|&f| !merged[f]);
            grow_groups(
                module,
                first_round,
                &rest,
                &planner,
                model.as_ref(),
                &mut merges,
            );
        }
        if options.align_sequence {
            for &m in merges.iter().flat_map(|m| &m.members) {
                merged[m] = true;
            }
            rest.retain(|&f| !merged[f]);
            // Each pair is priced to choose among a function's partners.
            let plans = clock.time(Phase::PlanAligned, || {
                sequence::find_sequence_pairs(module, &rest, |first, alignment| {
                    let plan = planner.plan_sequence(first, alignment, model.as_ref());
                    ((!plan.merges.is_empty()).then_some(plan.saved), plan)
                })
            });
            for plan in plans {
                merges.extend(plan.merges);
                outcome.rejected.extend(plan.rejected);
            }
        }
    }

    // Phase 4 of 4: names, merged bodies and entry points, in order of first member.
    let build_start = std::time::Instant::now();
    merges.sort_by_key(|m| m.members[0]);
    let frame_pointers = isa.is_none_or(|isa| isa.flags().preserve_frame_pointers());
    let mut names = MergedNames::new(module, authority, named);
    outcome
        .entry_points
        .reserve(merges.iter().map(|m| m.members.len()).sum());
    for mut merge in merges {
        let merged_name = names.next(&module.get(merge.members[0]).func.name);
        // The merged body priced, renamed, when the planner kept it.
        let priced_body = merge.merged_body.take();
        let built = build_merge(
            module,
            &merge,
            priced_body,
            merged_name.clone(),
            frame_pointers,
        );
        let (merged, entry_points) = match built {
            Ok(built) => built,
            Err(reason) => {
                outcome
                    .rejected
                    .push((merge.members, RejectionReason::NotSpliced(reason.0)));
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
    clock.add(Phase::Build, build_start.elapsed());
    outcome
}

/// The last round of merging by alignment ([`SimilarOptions::align_groups`]):
/// each merged aligned pair of the simple kind ([`align::Alignment::is_simple`]),
/// in order of first member, grown by the functions of `left` and the merged
/// pairs after it that align with its first member
/// ([`align::FirstRound::group_joiners`]; all members made to differ from it
/// at the same places, [`align::FirstRound::widened`]), replaced in `merges` by the group
/// when it saves more (`Planner::plan_grown`); a pair that joins is removed.
/// Every other merge stays as it is.
fn grow_groups(
    module: &FunctionSet,
    first_round: &align::FirstRound,
    left: &[FuncIndex],
    planner: &Planner<'_>,
    model: Option<&SizeModel>,
    merges: &mut Vec<Merge>,
) {
    let mut hubs: Vec<(usize, FuncIndex)> = merges
        .iter()
        .enumerate()
        .filter(|(_, m)| {
            m.differing.joined.is_empty()
                && m.differing
                    .alignment
                    .as_ref()
                    .is_some_and(align::Alignment::is_simple)
        })
        .map(|(i, m)| (i, m.members[0]))
        .collect();
    if hubs.len() + left.len() < 3 {
        return;
    }
    hubs.sort_by_key(|&(_, hub)| hub);
    let clock = planner.clock;
    let offers = clock.time(Phase::AlignPairs, || {
        let pairs: Vec<(FuncIndex, &align::Alignment)> = hubs
            .iter()
            .filter_map(|&(i, hub)| Some((hub, merges[i].differing.alignment.as_ref()?)))
            .collect();
        first_round.group_joiners(module, &pairs, left)
    });
    // In order of first member: a pair offered to a hub comes after it, so it
    // is still as merged when offered.
    let mut gone = vec![false; hubs.len()];
    let mut grown: Vec<(usize, Merge)> = Vec::new();
    clock.time(Phase::PlanAligned, || {
        for (h, hub_offers) in offers.iter().enumerate() {
            if gone[h] || hub_offers.is_empty() {
                continue;
            }
            let open: Vec<&align::Offer> = hub_offers
                .iter()
                .filter(|o| o.pair.is_none_or(|p| !gone[p]))
                .collect();
            let tries: Vec<(&[align::Alignment], Option<&Merge>)> = open
                .iter()
                .map(|o| (o.alignments.as_slice(), o.pair.map(|p| &merges[hubs[p].0])))
                .collect();
            let hub = hubs[h].1;
            let widen =
                |alignments: &[&align::Alignment]| first_round.widened(module, hub, alignments);
            let pair = &merges[hubs[h].0];
            if let Some((group, taken)) = planner.plan_grown(pair, &tries, model, &widen) {
                for k in taken {
                    if let Some(p) = open[k].pair {
                        gone[p] = true;
                    }
                }
                grown.push((hubs[h].0, group));
            }
        }
    });
    for (i, group) in grown {
        merges[i] = group;
    }
    // The pairs that joined another's group, by index in `merges`.
    let mut removed = vec![false; merges.len()];
    for (&(i, _), &gone) in hubs.iter().zip(&gone) {
        removed[i] = gone;
    }
    let mut removed = removed.into_iter();
    merges.retain(|_| !removed.next().unwrap_or(false));
}

/// The rounds of merging by alignment (phase 3), in the order they run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum AlignRound {
    /// Same blocks, escapes through joins but no one-sided ones.
    WithoutOneSided,
    /// The pairs only one-sided escapes let align.
    OneSided,
    /// Same blocks whose terminators may differ (`SimilarOptions::align_cfg`).
    AcrossTerminators,
    /// Blocks paired across different block structures
    /// (`SimilarOptions::align_blocks`).
    PairedBlocks,
}

/// One row of the census of missed merges (`merge_bench similar-census`): why
/// functions the similar merge saw were left alone, and what they might save.
#[derive(Clone, Debug, PartialEq, Eq)]
#[doc(hidden)]
pub struct CensusRow {
    /// The reason.
    pub reason: String,
    /// How many functions it keeps apart.
    pub functions: usize,
    /// The code bytes at stake: for a function and its nearest partner, the
    /// smaller one's size (what a merge of two saves is about the code they
    /// share); for a function that aligns with a merged pair, its own size; none
    /// for a function without a candidate partner. An upper bound, not a promise.
    pub at_stake: u64,
    /// The code bytes of those functions, in all.
    pub bytes: u64,
}

/// The census of missed merges by alignment on `module` (merged alone, with
/// `options`, for `isa`): every function the alignment phase saw and left alone,
/// by [`align::Missed`] reason, sized by the ISA's size model (instructions
/// without one). Diagnostics: it runs the merge, then tries every function left
/// against its nearest partners once more.
pub(crate) fn census(
    module: &FunctionSet,
    options: &SimilarOptions,
    isa: Option<&dyn TargetIsa>,
) -> Vec<CensusRow> {
    use align::{Escape, Missed, Refusal};
    let outcome = merge_similar_for(module, options, isa);
    let mut by_group = SecondaryMap::<FuncIndex, bool>::new();
    let mut by_alignment = SecondaryMap::<FuncIndex, bool>::new();
    for group in &outcome.groups {
        for &m in &group.members {
            if group.is_aligned() {
                by_alignment[m] = true;
            } else {
                by_group[m] = true;
            }
        }
    }
    let considered: Vec<FuncIndex> = module
        .iter()
        .filter(|(f, defined)| !by_group[*f] && !reads_machine_state(&defined.func))
        .map(|(f, _)| f)
        .collect();
    let model = isa.and_then(SizeModel::for_isa);
    let size = |f: FuncIndex| {
        let func = &module.get(f).func;
        model
            .as_ref()
            .map_or(func.dfg.num_insts() as u64, |m| m.predict(func))
    };
    let reason = |missed: Missed| match missed {
        Missed::NoLayoutPartner => "no candidate: block structure differs",
        Missed::NoWalkPartner => "no candidate: block order or terminator immediates differ",
        Missed::PartnersTaken => "no candidate left: its bucket's others counted with others",
        Missed::AlignsWithMerged => "aligns with a merged pair (group of 3+)",
        Missed::NotProfitable => "aligns, pricing rejects the pair",
        Missed::Refused(Refusal::Structure) => "refused: signature or block parameters differ",
        Missed::Refused(Refusal::TooManyStretches) => {
            "refused: more blocks differ than MAX_STRETCHES"
        }
        Missed::Refused(Refusal::ValueEscapes(Escape::IntoTerminatorVsAligned)) => {
            "refused: escape: a terminator uses it, the other's uses an earlier value"
        }
        Missed::Refused(Refusal::ValueEscapes(Escape::IntoTerminatorOther)) => {
            "refused: escape: a terminator uses it, the other's another stretch's"
        }
        Missed::Refused(Refusal::ValueEscapes(Escape::IntoLaterStretch)) => {
            "refused: escape: one side's later stretch uses it (one-sided)"
        }
        Missed::Refused(Refusal::ValueEscapes(Escape::IntoLaterStretchType)) => {
            "refused: escape: one-sided, of a type without a placeholder"
        }
        Missed::Refused(Refusal::ValueEscapes(Escape::FromEndingStretch)) => {
            "refused: escape: from a stretch ending its block"
        }
        Missed::Refused(Refusal::ValueEscapes(Escape::Other)) => {
            "refused: escape: other (values of different stretches paired)"
        }
        Missed::Refused(Refusal::OperandDiffers) => "refused: the terminator's operands differ",
        Missed::Refused(Refusal::TerminatorDiffers) => "refused: the terminators differ",
        Missed::Refused(Refusal::StretchNamesEntity) => {
            "refused: a stretch names a stack slot, block, table or patchable call"
        }
        Missed::Refused(Refusal::SecondNamesGlobal) => {
            "refused: the second's stretch names a global value"
        }
        Missed::Refused(Refusal::TerminatorNotCopied) => {
            "refused: the second's terminator cannot be copied"
        }
    };
    // The functions without a candidate of the same block structure, tried again
    // across differing terminators (`SimilarOptions::align_cfg`): what that
    // subset has at stake, and what still keeps the rest apart.
    let cfg_reason = |missed: Missed| match missed {
        Missed::NoLayoutPartner => "across CFGs: no candidate: blocks or block parameters differ",
        Missed::NoWalkPartner => "across CFGs: no candidate: block order differs",
        Missed::PartnersTaken => "across CFGs: no candidate left",
        Missed::AlignsWithMerged => "across CFGs: aligns with a merged pair",
        Missed::NotProfitable => "across CFGs: aligns (merged or pricing rejects)",
        Missed::Refused(Refusal::TerminatorNotCopied) => {
            "across CFGs: refused: the second's terminator cannot be copied"
        }
        Missed::Refused(_) => "across CFGs: refused inside the blocks",
    };
    let same_cfg = align::census(
        module,
        &considered,
        &by_alignment,
        options.align_escapes,
        options.align_one_sided,
        false,
    );
    let mut no_layout_partner = SecondaryMap::<FuncIndex, bool>::new();
    for &(f, _, missed) in &same_cfg {
        no_layout_partner[f] = missed == Missed::NoLayoutPartner;
    }
    // The census across CFGs runs on what the merge left alone with the options
    // as given: with `align_cfg` on, pairs it merged are not in it.
    let cfg_rows = align::census(
        module,
        &considered,
        &by_alignment,
        options.align_escapes,
        options.align_one_sided,
        true,
    )
    .into_iter()
    .filter(|&(f, p, _)| no_layout_partner[f] || p.is_some_and(|p| no_layout_partner[p]))
    .map(|(f, p, missed)| (f, p, missed, true));
    let mut rows: Vec<((bool, Missed), CensusRow)> = Vec::new();
    for (f, partner, missed, cfg) in same_cfg
        .into_iter()
        .map(|(f, p, m)| (f, p, m, false))
        .chain(cfg_rows)
    {
        let stake = match (missed, partner) {
            (Missed::AlignsWithMerged, _) => size(f),
            (_, Some(p)) => size(f).min(size(p)),
            (_, None) => 0,
        };
        let bytes = size(f) + partner.map_or(0, size);
        let functions = 1 + usize::from(partner.is_some());
        let (key, reason) = match cfg {
            false => ((false, missed), reason(missed)),
            // Refusals inside the blocks are one row across CFGs.
            true => match missed {
                Missed::Refused(r) if r != Refusal::TerminatorNotCopied => (
                    (true, Missed::Refused(Refusal::Structure)),
                    cfg_reason(missed),
                ),
                _ => ((true, missed), cfg_reason(missed)),
            },
        };
        match rows.iter_mut().find(|(m, _)| *m == key) {
            Some((_, row)) => {
                row.functions += functions;
                row.at_stake += stake;
                row.bytes += bytes;
            }
            None => rows.push((
                key,
                CensusRow {
                    reason: reason.to_string(),
                    functions,
                    at_stake: stake,
                    bytes,
                },
            )),
        }
    }
    rows.sort_by_key(|(m, _)| *m);
    let mut rows: Vec<CensusRow> = rows.into_iter().map(|(_, row)| row).collect();
    rows.extend(pairing_census(
        module,
        &considered,
        &by_alignment,
        &no_layout_partner,
        options,
        &size,
        &reason,
    ));
    rows
}

/// The census rows of merging by block pairing (`align/blocks.rs`): for each
/// function without a layout partner, largest first, its best partner by shape
/// overlap among the same signature's functions the merge left alone, what the
/// paired blocks' common prefixes and suffixes could save (the smaller member's
/// bytes times the share of its instructions they hold: a bound), by what became
/// of aligning the two with paired blocks (`reason` names a refusal).
fn pairing_census(
    module: &FunctionSet,
    considered: &[FuncIndex],
    merged: &SecondaryMap<FuncIndex, bool>,
    no_layout_partner: &SecondaryMap<FuncIndex, bool>,
    options: &SimilarOptions,
    size: &dyn Fn(FuncIndex) -> u64,
    reason: &dyn Fn(align::Missed) -> &'static str,
) -> Vec<CensusRow> {
    let left: Vec<FuncIndex> = considered.iter().copied().filter(|&f| !merged[f]).collect();
    let of: Vec<FuncIndex> = left
        .iter()
        .copied()
        .filter(|&f| no_layout_partner[f])
        .collect();
    let mut rows: Vec<CensusRow> = Vec::new();
    let census = align::blocks::census(
        module,
        &left,
        &of,
        options.align_escapes,
        options.align_one_sided,
    );
    for entry in census {
        let (why, functions, bytes, stake) = match (entry.partner, entry.attempt) {
            (Some(p), Some(attempt)) => {
                let smaller = size(entry.func).min(size(p));
                let why = match attempt {
                    Ok(true) => "aligns, promising (merged, or the pricing rejects it)".to_string(),
                    Ok(false) => "aligns, too little in common".to_string(),
                    Err(refusal) => reason(align::Missed::Refused(refusal)).to_string(),
                };
                (
                    format!(
                        "block pairing, a partner of its signature within 2x (bound of common code): {why}"
                    ),
                    2,
                    size(entry.func) + size(p),
                    smaller * entry.bound as u64 / entry.smaller.max(1) as u64,
                )
            }
            _ => (
                "block pairing: no partner of its signature within 2x".to_string(),
                1,
                size(entry.func),
                0,
            ),
        };
        match rows.iter_mut().find(|r| r.reason == why) {
            Some(row) => {
                row.functions += functions;
                row.bytes += bytes;
                row.at_stake += stake;
            }
            None => rows.push(CensusRow {
                reason: why,
                functions,
                at_stake: stake,
                bytes,
            }),
        }
    }
    rows
}

/// The merged body (named `name`) and the entry points (in member order) of a
/// group: `priced_body` renamed when the planner built it for `merge` already,
/// else built now.
fn build_merge(
    module: &FunctionSet,
    merge: &Merge,
    priced_body: Option<Function>,
    name: UserFuncName,
    frame_pointers: bool,
) -> Result<(Function, Vec<Function>), NotSpliced> {
    let merged = match priced_body {
        Some(mut merged) => {
            merged.name = name;
            merged
        }
        None => {
            let first = &module.get(merge.members[0]).func;
            build_merged_body(module, first, name, &merge.differing)?
        }
    };
    let entry_points = build_entry_points(
        module,
        &merge.members,
        &merge.differing.parameters,
        &merged,
        frame_pointers,
    );
    Ok((merged, entry_points))
}

/// Every file of `filetests/similar/` whose name starts with `prefix`, in name
/// order, with its functions parsed into a module: the inputs of the unit tests
/// that check the alignment and the merged bodies against what is built.
#[cfg(test)]
pub(crate) fn similar_filetests(prefix: &str) -> Vec<(std::path::PathBuf, FunctionSet)> {
    let mut files: Vec<_> = std::fs::read_dir("filetests/similar")
        .expect("filetests")
        .map(|e| e.expect("an entry").path())
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with(prefix))
        })
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let text = std::fs::read_to_string(&path).expect("reads");
            let mut module = FunctionSet::new();
            for func in cranelift_reader::parse_functions(&text).expect("parses") {
                module
                    .push(func, crate::ir::Linkage::Local)
                    .expect("a function");
            }
            (path, module)
        })
        .collect()
}
