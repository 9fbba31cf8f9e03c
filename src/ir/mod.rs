//! The IR layer: what the passes work on, independent of any pass.
//!
//! * [`function_set`]: [`FunctionSet`], the functions of one module with their
//!   [`Linkage`] and a name index;
//! * [`linkage`]: [`Linkage`], the pass's own copy of `cranelift_module::Linkage`;
//! * [`observable`]: what a program can observe of where its code is: whether
//!   addresses are significant ([`MergeMode`]), how a reference to a function
//!   compares ([`target_match`]), and which functions no thunk may front
//!   ([`reads_machine_state`]);
//! * `fnv`: the one fixed hash of file checksums and printed digests (for
//!   separate compilation and validation);
//! * `layout_order`: a function's layout read in the order of entity numbers,
//!   for what does not depend on the order;
//! * [`panics`]: the message of a caught panic ([`catch_panic`]);
//! * [`parallel`]: the one switch between `rayon` and sequential iteration (the
//!   `parallel` feature); results never depend on it;
//! * [`prefetch`]: asking the CPU for the functions a walk reads next (the
//!   crate's only `unsafe` code);
//! * [`symbols`]: symbol names as a linker sees them ([`SymbolName`], borrowed as
//!   [`SymbolKey`]), the one iterator over every name a function mentions
//!   ([`mentioned_names`](symbols::mentioned_names)), and the [`NameAuthority`] that hands out fresh names;
//! * [`sparse`]: [`SparseFunctionMap`], a value for a few functions of a module.
//!
//! Nothing here imports another folder of the crate.

#[cfg(any(feature = "separate", feature = "validate"))]
pub(crate) mod fnv;
pub(crate) mod function_set;
pub(crate) mod layout_order;
pub(crate) mod linkage;
pub(crate) mod observable;
pub(crate) mod panics;
pub(crate) mod parallel;
pub(crate) mod prefetch;
pub(crate) mod sparse;
pub(crate) mod symbols;

pub use function_set::{DefinedFunction, DefinitionError, FuncIndex, FunctionSet, ModuleFunctions};
pub(crate) use layout_order::{blocks_by_number, insts_by_number};
pub use linkage::Linkage;
#[cfg(all(feature = "module", feature = "separate"))]
pub use observable::target_match_across_modules;
pub use observable::{MergeMode, Reference, TargetMatch, reads_machine_state, target_match};
pub use panics::catch_panic;
#[cfg(feature = "validate")]
pub use panics::panic_message;
pub use prefetch::Reads;
pub use sparse::SparseFunctionMap;
#[cfg(feature = "separate")]
pub use symbols::mentioned_names;
pub use symbols::{NameAuthority, SymbolKey, SymbolName};
