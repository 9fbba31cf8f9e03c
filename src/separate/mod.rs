//! Separate compilation: merging identical functions across modules compiled
//! apart, in the three stages of GCC's WHOPR design
//! (GCC Internals, "Using summary information in IPA passes",
//! <https://gcc.gnu.org/onlinedocs/gccint/IPA.html>; `docs/separate.md`).
//!
//! 1. `summary`: a module's [`Summary`] ([`summarize`]), after its own merge (per
//!    module, wherever it is compiled);
//! 2. `program`: the whole-program plan from all summaries ([`plan_program`]),
//!    one [`ModuleDecisions`] per module;
//! 3. `transform`: a module applies its decisions ([`apply_decisions`]), after
//!    `check` checked them ([`DecisionError`]); `MergingModule::with_decisions`
//!    applies them through the same checks.
//!
//! `format` is the file format both kinds of file share (magic, version, the
//! [`Vocabulary`] id of the build, checksum, `postcard`; errors are
//! [`FormatError`]s). Imports point downward:
//! `transform` uses `check`, `check` uses `program` and `summary`, `program` uses
//! `summary`, both use `format`.

pub(crate) mod check;
pub(crate) mod format;
pub(crate) mod program;
pub(crate) mod summary;
pub(crate) mod transform;
pub(crate) mod vocabulary;

pub use check::DecisionError;
pub use format::{FORMAT_VERSION, FormatError};
pub use program::{
    CallRedirect, Decision, DecisionAction, ModuleDecisions, PlanCounts, PlanError, ProgramPlan,
    QualifiedName, plan_program,
};
pub use summary::{
    ClifNames, FunctionSummary, Summary, SymbolNames, SymbolRef, Visibility, summarize,
    summarize_modules, summarize_with,
};
pub use transform::{TransformError, apply_decisions};
pub use vocabulary::Vocabulary;
