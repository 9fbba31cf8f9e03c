//! Separate compilation through the library (`src/separate`): summaries, the
//! whole-program plan, decisions and their checks, applied to CLIF modules (and,
//! for the checks shared with it, through `MergingModule::with_decisions`).
//!
//! One test binary; each module is one former `tests/*.rs` binary. A test of the
//! summary, plan or decision code that does not run the command line goes here.

mod decision_checks;
mod separate;
mod shadowing;
