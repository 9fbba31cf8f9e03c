//! clif-merge: merge identical functions in Cranelift IR (CLIF).
//!
//! This is the Cranelift counterpart of LLVM's MergeFunctions pass and GCC's identical
//! code folding. The pipeline is:
//!
//! 1. [`adapter`] walks every function once, in CFG order from the entry block, and
//!    records the comparator's view of it as a [`adapter::FunctionEncoding`].
//! 2. [`hash`] derives a [`hash::StructuralHash`] from that encoding, and [`compare`]
//!    defines the total order [`compare::FunctionComparator`] over encodings. Both read
//!    the same encoding, so they cannot drift apart.
//! 3. [`partition`] drops functions with a unique hash, puts the rest in a `BTreeMap`
//!    keyed by the comparator, and refines the classes until calls between module
//!    functions agree (GCC ipa-icf style optimistic refinement).
//! 4. [`plan`] decides, per duplicate, whether it is erased, aliased or thunked.
//! 5. [`apply`] rewrites the CLIF: redirected calls, thunks, removed functions.
//!
//! [`validate`] checks the result independently of the comparator, by running each
//! duplicate and its replacement in `cranelift-interpreter`, inside a [`sandbox`]
//! where memory, calls leaving the module and indirect calls are defined.
//!
//! [`similar`] merges functions that differ only in a few constants or callees into
//! one parameterized body with thin entry points.
//!
//! Separate compilation follows GCC's WHOPR stages: [`summary`] summarizes a module,
//! [`program`] plans the whole program from all summaries, and [`transform`] (or
//! [`merging_module::MergingModule::with_decisions`]) applies a module's decisions;
//! [`separate_cli`] is the command line for them.
//!
//! [`driver`] runs the whole pipeline over a [`module::FunctionSet`], [`cli`] is the
//! `clif-merge` command-line tool built on top of it, and [`merging_module`] is the
//! drop-in `cranelift_module::Module` wrapper for compilers (object files and JIT).

pub mod adapter;
pub mod apply;
pub mod cli;
pub mod compare;
pub mod driver;
pub mod hash;
pub mod merging_module;
pub mod module;
pub mod partition;
pub mod plan;
pub mod program;
pub mod report;
pub mod sandbox;
pub mod separate_cli;
pub mod similar;
pub mod summary;
pub mod symbols;
pub mod transform;
pub mod validate;

pub use compare::FunctionComparator;
pub use driver::{MergeOptions, MergeOutcome, merge_functions, merge_functions_in_place};
pub use hash::StructuralHash;
pub use module::{DefinedFunction, FuncIndex, FunctionSet};
pub use plan::{MergeAction, MergeMode, MergePlan};
