//! clif-merge: merge identical functions in Cranelift IR (CLIF).
//!
//! This is the Cranelift counterpart of LLVM's MergeFunctions pass and GCC's identical
//! code folding. The crate is layered; each folder imports only the folders below it:
//!
//! * [`ir`]: [`FunctionSet`] (the functions of a module with their linkage) and
//!   symbol names;
//! * [`identical`]: the core pass ([`merge_functions`]): one walk per function,
//!   structural hash, total order, partition, plan, rewrite;
//! * [`similar`]: merging functions that differ only in a few constants or callees
//!   into one parameterized body with thin entry points;
//! * [`validate`]: translation validation in `cranelift-interpreter`, inside a
//!   sandbox where memory, calls leaving the module and indirect calls are defined;
//! * [`separate`]: separate compilation (GCC's WHOPR stages: summarize, plan the
//!   whole program, apply per module);
//! * [`module`]: [`module::MergingModule`], the drop-in `cranelift_module::Module`
//!   wrapper for compilers (object files and JIT);
//! * [`cli`]: the `clif-merge` command-line tool.

#![forbid(unsafe_code)]

#[cfg(feature = "cli")]
pub mod cli;
pub mod identical;
pub mod ir;
#[cfg(feature = "module")]
pub mod module;
#[cfg(feature = "separate")]
pub mod separate;
pub mod similar;
#[cfg(feature = "validate")]
pub mod validate;

pub use identical::compare::FunctionComparator;
pub use identical::hash::StructuralHash;
pub use identical::plan::{MergeAction, MergeMode, MergePlan};
pub use identical::{MergeOptions, MergeOutcome, merge_functions, merge_functions_in_place};
pub use ir::{DefinedFunction, FuncIndex, FunctionSet, Linkage};
