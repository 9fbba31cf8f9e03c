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
//!
//! # Example
//!
//! Two modules compiled apart each define the same helper: module `a` as a hidden
//! function (visible to the other modules of the linked program), module `b` as a
//! local one. The three stages remove `b`'s copy and send its call to `a`'s.
//!
//! ```
//! use clif_merge::separate::{DecisionAction, Summary, apply_decisions, plan_program, summarize};
//! use clif_merge::{FunctionSet, Linkage, MergeOptions};
//!
//! /// Parses `clif`, giving its functions `linkages` in order.
//! fn module(clif: &str, linkages: &[Linkage]) -> Result<FunctionSet, Box<dyn std::error::Error>> {
//!     let mut module = FunctionSet::new();
//!     let functions = cranelift_reader::parse_functions(clif)?;
//!     for (func, &linkage) in functions.into_iter().zip(linkages) {
//!         module.push(func, linkage)?;
//!     }
//!     Ok(module)
//! }
//! let a = module(
//!     "function %scale_a(i64) -> i64 {
//! block0(v0: i64):
//!     v1 = iconst.i64 3
//!     v2 = imul v0, v1
//!     return v2
//! }",
//!     &[Linkage::Hidden],
//! )?;
//! let b = module(
//!     "function %scale_b(i64) -> i64 {
//! block0(v0: i64):
//!     v1 = iconst.i64 3
//!     v2 = imul v0, v1
//!     return v2
//! }
//!
//! function %main(i64) -> i64 {
//!     fn0 = %scale_b(i64) -> i64
//! block0(v0: i64):
//!     v1 = call fn0(v0)
//!     v2 = iadd v1, v0
//!     return v2
//! }",
//!     &[Linkage::Local, Linkage::Export],
//! )?;
//! let options = MergeOptions::default();
//!
//! // 1. Per module, wherever it is compiled: its summary, written to a file.
//! let summary_files = [
//!     summarize(&a, "a", &options).to_bytes(),
//!     summarize(&b, "b", &options).to_bytes(),
//! ];
//!
//! // 2. Once, from every summary: the decisions of each module (in name order).
//! let summaries: Vec<Summary> = summary_files
//!     .iter()
//!     .map(|bytes| Summary::from_bytes(bytes))
//!     .collect::<Result<_, _>>()?;
//! let plan = plan_program(&summaries)?;
//! let (decisions_a, decisions_b) = (&plan.decisions[0], &plan.decisions[1]);
//! assert!(decisions_a.decisions.is_empty());
//! assert_eq!(decisions_b.decisions.len(), 1);
//! let decision = &decisions_b.decisions[0];
//! assert_eq!(decision.function, "%scale_b");
//! assert_eq!(decision.action, DecisionAction::Redirect);
//! assert_eq!((decision.to_module.as_str(), decision.to.as_str()), ("a", "%scale_a"));
//!
//! // 3. Per module: its decisions applied. `b` loses its copy and calls `a`'s.
//! let applied_b = apply_decisions(&b, &options, decisions_b)?;
//! assert_eq!(applied_b.functions.len(), 1);
//! let (_, main) = applied_b.functions.iter().next().unwrap();
//! assert!(main.func.display().to_string().contains("%scale_a"));
//! // `a` stays as it was.
//! assert_eq!(apply_decisions(&a, &options, decisions_a)?.functions.len(), 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
    QualifiedName, plan_program, program_hash,
};
pub use summary::{
    ClifNames, FunctionSummary, Summary, SymbolNames, SymbolRef, Visibility, summarize,
    summarize_modules, summarize_with,
};
pub use transform::{AppliedDecision, AppliedModule, ModuleAlias, apply_decisions};
pub use vocabulary::{SummarySource, Vocabulary};
