//! clif-merge: merge identical functions in Cranelift IR (CLIF).
//!
//! This is the Cranelift counterpart of LLVM's MergeFunctions pass and GCC's identical
//! code folding. A compiler builds a [`FunctionSet`], runs [`merge_functions`] (or
//! [`merge_functions_in_place`]) with [`MergeOptions`], and reads the [`MergePlan`]
//! (classes of equal functions, and per duplicate a [`MergeAction`]: erase, alias or
//! thunk) and the rewritten functions ([`OutputEntry`]).
//!
//! ```
//! use clif_merge::{FunctionSet, Linkage, MergeAction, MergeOptions, merge_functions};
//!
//! // A module: two equal local functions and an exported caller. (A compiler pushes
//! // the `Function`s it built; here cranelift-reader parses them from CLIF text.)
//! let clif = "
//! function %square(i32) -> i32 {
//! block0(v0: i32):
//!     v1 = imul v0, v0
//!     return v1
//! }
//!
//! function %square_again(i32) -> i32 {
//! block0(v10: i32):
//!     v11 = imul v10, v10
//!     return v11
//! }
//!
//! function %sum_of_squares(i32, i32) -> i32 {
//!     fn0 = %square(i32) -> i32
//!     fn1 = %square_again(i32) -> i32
//! block0(v0: i32, v1: i32):
//!     v2 = call fn0(v0)
//!     v3 = call fn1(v1)
//!     v4 = iadd v2, v3
//!     return v4
//! }
//! ";
//! let mut module = FunctionSet::new();
//! for func in cranelift_reader::parse_functions(clif)? {
//!     let linkage = if func.name.to_string() == "%sum_of_squares" {
//!         Linkage::Export
//!     } else {
//!         Linkage::Local
//!     };
//!     module.push(func, linkage)?;
//! }
//!
//! let outcome = merge_functions(&module, &MergeOptions::default());
//!
//! // One class of equal functions; the duplicate, local and never address-taken, is
//! // erased and its caller calls the kept function instead.
//! assert_eq!(outcome.plan.classes.len(), 1);
//! let decision = outcome.plan.decisions[0];
//! assert_eq!(module.display_name(decision.function), "%square_again");
//! assert_eq!(module.display_name(decision.into), "%square");
//! assert_eq!(decision.action, MergeAction::Erase);
//! let merged: Vec<String> = outcome
//!     .output
//!     .iter()
//!     .filter_map(|entry| entry.body())
//!     .map(|func| func.display().to_string())
//!     .collect();
//! assert_eq!(merged.len(), 2); // %square and %sum_of_squares
//! assert!(!merged[1].contains("%square_again"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The rest is optional:
//!
//! * [`similar`]: merging functions that differ only in a few constants or callees
//!   into one parameterized body with thin entry points (no feature needed);
//! * `validate` (feature `validate`): translation validation in
//!   `cranelift-interpreter`;
//! * `separate` (feature `separate`): separate compilation (GCC's WHOPR stages:
//!   summarize each module, plan the whole program, apply per module);
//! * `module` (feature `module`, with `object` and `jit`): `MergingModule`, the
//!   drop-in `cranelift_module::Module` wrapper for compilers;
//! * the `clif-merge` command-line tool (feature `cli`).
//!
//! Inside, the crate is layered (`ir` < `identical` < `similar` < `validate`,
//! `separate` < `module` < `cli`): each folder of `src/` imports only the folders
//! below it (see "Architecture" in `docs/design.md`).

#![deny(unsafe_code)]

#[doc(hidden)]
#[cfg(feature = "cli")]
pub mod cli;
mod identical;
mod ir;
#[cfg(feature = "module")]
pub mod module;
#[cfg(feature = "separate")]
pub mod separate;
pub mod similar;
#[cfg(feature = "validate")]
pub mod validate;

pub use identical::encode::UnsupportedReason;
pub use identical::partition::PartitionStats;
pub use identical::plan::{MergeAction, MergeDecision, MergeMode, MergePlan};
pub use identical::rewrite::OutputEntry;
pub use identical::{
    MergeOptions, MergeOutcome, MergeStats, merge_functions, merge_functions_in_place,
};
pub use ir::{DefinedFunction, DefinitionError, FuncIndex, FunctionSet, Linkage, SymbolName};

/// Internals that the crate's own tests, benchmarks and fuzz targets reach into.
/// Not part of the API: no stability promise.
#[doc(hidden)]
pub mod testing {
    pub use crate::identical::compare::{CalleeView, ClassId, FunctionComparator};
    pub use crate::identical::encode::{FunctionEncoding, WalkOptions, encode_function};
    pub use crate::identical::encoded::EncodedFunctions;
    pub use crate::identical::fingerprint::{
        Chains, Fingerprint, FingerprintScratch, Operands, table_key,
    };
    pub use crate::identical::hash::StructuralHash;
    pub use crate::identical::partition::{Partition, partition};
    pub use crate::identical::rewrite::apply;
    pub use crate::ir::symbols::mentioned_names;
    pub use crate::similar::cost::{compiled_size, host_isa};
    pub use crate::similar::entry_points::entry_point_features;
    pub use crate::similar::groups::hole_blind_disagreements;
    pub use crate::similar::size_model::{Feature, SizeFeatures, SizeModel};

    use crate::similar::{SimilarOptions, SimilarOutcome};
    use crate::{FuncIndex, FunctionSet, MergeOutcome};
    use cranelift_codegen::entity::SecondaryMap;
    use cranelift_codegen::isa::TargetIsa;

    /// The similar merge on `module` as it is (no identical merge before it, no
    /// name reserved besides `module`'s), for code compiled by `isa`.
    pub fn merge_similar_for(
        module: &FunctionSet,
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
    ) -> SimilarOutcome {
        crate::similar::merge_similar_for(module, options, isa)
    }

    /// The census of missed merges by alignment (`merge_bench similar-census`).
    pub fn similar_census(
        module: &FunctionSet,
        options: &SimilarOptions,
        isa: Option<&dyn TargetIsa>,
    ) -> Vec<crate::similar::CensusRow> {
        crate::similar::census(module, options, isa)
    }

    /// Which functions of `module` may name one of `named` (`FunctionSet::naming`).
    pub fn naming(module: &FunctionSet, named: &[FuncIndex]) -> SecondaryMap<FuncIndex, bool> {
        module.naming(named)
    }

    /// Whether the identical merge took the similar merge's fingerprints
    /// (`MergeOptions::similar_fingerprints`).
    pub fn took_similar_fingerprints(outcome: &MergeOutcome<'_>) -> bool {
        outcome.similar_fingerprints.is_some()
    }

    #[cfg(feature = "cli")]
    pub use crate::cli::{
        Args, check_entity_numbers, expand_inputs, load,
        report::{clif_text, json_report, similar_json},
        run,
    };
    #[cfg(feature = "separate")]
    pub use crate::separate::summary::split_module;
}
