//! Separate compilation: merging identical functions across modules compiled
//! apart, in the three stages of GCC's WHOPR design
//! (`../shared/design/gcc-ipa-summaries.rst`).
//!
//! 1. [`summary`]: a module's summary, after its own merge (per module, wherever
//!    it is compiled);
//! 2. [`program`]: the whole-program plan from all summaries, one
//!    [`ModuleDecisions`] per module;
//! 3. [`transform`]: a module applies its decisions.
//!
//! [`format`] is the file format both kinds of file share (magic, version,
//! checksum, `postcard`). Imports point downward: `transform` uses `program` and
//! `summary`, `program` uses `summary`, both use `format`.

pub mod format;
pub mod program;
pub mod summary;
pub mod transform;

pub use format::FormatError;
pub use program::{
    CallRedirect, Decision, DecisionAction, ModuleDecisions, PlanError, ProgramPlan, QualifiedName,
    plan_program,
};
pub use summary::{
    FunctionSummary, Summary, SymbolNames, SymbolRef, Visibility, summarize, summarize_modules,
    summarize_with,
};
pub use transform::{TransformError, apply_decisions};
