//! [`RejectionReason`]: why the similar merge left a group of similar functions
//! alone ([`SimilarOutcome::rejected`](super::SimilarOutcome::rejected)).

use std::fmt;

/// Why a group of similar functions was found but not merged. Its `Display` is the
/// message the CLI prints after `not merged:`.
///
/// Sizes are those of [`SimilarGroup::size_basis`](super::SimilarGroup::size_basis):
/// code bytes (compiled or predicted) on an ISA, instruction counts without one.
///
/// ```
/// use clif_merge::similar::{RejectionReason, SimilarOptions, SimilarPass};
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
/// // A merge must save at least 1,000 instructions: this one saves a few.
/// let options = SimilarOptions::default().with_min_saved(1000);
/// let similar = SimilarPass::after(&module, &identical, &options, None);
/// let (members, reason) = &similar.outcome().rejected[0];
/// assert_eq!(members.len(), 2);
/// assert!(matches!(
///     reason,
///     RejectionReason::SavesTooLittle { min_saved: 1000, .. }
/// ));
/// assert!(reason.to_string().starts_with("saves "));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RejectionReason {
    /// The group differs in more places than
    /// [`SimilarOptions::max_holes`](super::SimilarOptions::max_holes) allows.
    TooManyParameters {
        /// The parameters its merged body would take.
        parameters: usize,
        /// The most allowed.
        max_holes: usize,
    },
    /// The merge (merged body and entry points) is not smaller than the members.
    NotSmaller {
        /// Size of the members.
        before: u64,
        /// Size of the merge.
        after: u64,
    },
    /// The merge saves less than
    /// [`SimilarOptions::min_saved`](super::SimilarOptions::min_saved).
    SavesTooLittle {
        /// Size of the members.
        before: u64,
        /// Size of the merge.
        after: u64,
        /// The least a merge must save (at least 1).
        min_saved: u64,
    },
    /// The target cannot compile a member or a part of the merge.
    CannotCompile {
        /// The function, as CLIF names it.
        function: String,
        /// Cranelift's error, or the message of its panic.
        reason: String,
    },
    /// The merged body could not be built: the differing stretches of an aligned
    /// pair cannot be spliced into one body.
    NotSpliced(String),
    /// The size model predicts the merge is not smaller than the members.
    PredictedNotSmaller {
        /// Predicted size of the members.
        before: u64,
        /// Predicted size of the merge.
        after: u64,
    },
    /// The size model predicts an aligned pair's merge grows the code by more than
    /// is worth compiling to check.
    PredictedToGrow {
        /// Predicted size of the members.
        before: u64,
        /// Predicted size of the merge.
        after: u64,
    },
    /// The size model predicts a close call on an aligned pair too large to
    /// confirm by compiling.
    TooLargeToConfirm {
        /// Bytes the merge is predicted to save.
        saved: u64,
        /// Predicted size of the members.
        before: u64,
    },
    /// The size model predicted a saving that compiling did not confirm.
    NotConfirmed {
        /// Bytes the merge was predicted to save.
        predicted_saved: u64,
        /// Why the compiled merge was refused.
        compiled: Box<RejectionReason>,
    },
    /// The group cannot be merged whole, and none of its subgroups (split by a
    /// parameter) merges either.
    NoSubgroupMerges(Box<RejectionReason>),
    /// A pair merged by sequence alignment was refused.
    Sequence(Box<RejectionReason>),
    /// A pair merged by alignment was refused.
    Aligned(Box<RejectionReason>),
}

impl fmt::Display for RejectionReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::TooManyParameters {
                parameters,
                max_holes,
            } => write!(f, "{parameters} parameters (at most {max_holes})"),
            Self::NotSmaller { before, after } => write!(f, "not smaller ({before} -> {after})"),
            Self::SavesTooLittle {
                before,
                after,
                min_saved,
            } => write!(
                f,
                "saves {} (less than {min_saved}: {before} -> {after})",
                before - after
            ),
            Self::CannotCompile { function, reason } => {
                write!(f, "the target cannot compile {function}: {reason}")
            }
            Self::NotSpliced(reason) => f.write_str(reason),
            Self::PredictedNotSmaller { before, after } => {
                write!(f, "predicted not smaller ({before} -> {after})")
            }
            Self::PredictedToGrow { before, after } => {
                let growth = *after as f64 / (*before).max(1) as f64;
                write!(
                    f,
                    "predicted not smaller ({before} -> {after}, {:+.0}%)",
                    (growth - 1.0) * 100.0
                )
            }
            Self::TooLargeToConfirm { saved, before } => write!(
                f,
                "predicted to save only {saved} of {before} bytes, too large to confirm"
            ),
            Self::NotConfirmed {
                predicted_saved,
                compiled,
            } => write!(
                f,
                "predicted to save {predicted_saved} bytes, but compiled {compiled}"
            ),
            Self::NoSubgroupMerges(reason) => {
                write!(f, "{reason}, and none of its subgroups merges")
            }
            Self::Sequence(reason) => write!(f, "sequence: {reason}"),
            Self::Aligned(reason) => write!(f, "aligned: {reason}"),
        }
    }
}
