//! Translation validation: every merge run in `cranelift-interpreter`, the
//! original against its replacement, as an oracle independent of the comparator.
//!
//! * [`translation`]: the pairs to check (identical merges, similar merges, a
//!   whole program after separate compilation) and the [`ValidationReport`];
//! * [`inputs`]: edge values and seeded random inputs per parameter type;
//! * [`sandbox`]: the interpreter state in which real compiled code can run
//!   (memory, calls leaving the module, indirect calls).

pub mod inputs;
pub mod sandbox;
pub mod translation;

pub use inputs::RANDOM_INPUTS;
pub use translation::{
    Mismatch, ValidationReport, ValidatorCrash, validate, validate_program, validate_similar,
};
