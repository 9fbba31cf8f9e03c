//! Translation validation: every merge run in `cranelift-interpreter`, the
//! original against its replacement, as an oracle independent of the comparator.
//!
//! * `translation`: the pairs to check ([`validate`]: identical merges,
//!   [`validate_similar`]: similar merges, [`validate_program`]: a whole program
//!   after separate compilation) and the [`ValidationReport`];
//! * `inputs`: edge values and seeded random inputs per parameter type;
//! * `progress`: how far a validation has got ([`Progress`]), for a caller to
//!   show;
//! * `sandbox`: the interpreter state in which real compiled code can run
//!   (memory, calls leaving the module, indirect calls), and how a run ended
//!   ([`RunOutcome`]).

mod inputs;
mod progress;
mod sandbox;
mod translation;

pub use inputs::RANDOM_INPUTS;
pub use progress::{NoProgress, Progress};
pub use sandbox::{Ending, RunOutcome};
pub use translation::{
    DEFAULT_PAIR_STEPS, Mismatch, PairCost, SimilarOutcomeError, SimilarValidationError,
    UnvalidatedReason, ValidationCost, ValidationOptions, ValidationReport, ValidatorCrash,
    check_similar_outcome, validate, validate_program, validate_similar,
    validate_similar_with_progress, validate_with_progress,
};
