//! The IR layer: what the passes work on, independent of any pass.
//!
//! * [`function_set`]: [`FunctionSet`], the functions of one module with their
//!   linkage and a name index;
//! * [`symbols`]: symbol names as a linker sees them ([`SymbolName`], borrowed as
//!   [`SymbolKey`]), the one iterator over every name a function mentions
//!   ([`mentioned_names`]), and the [`NameAuthority`] that hands out fresh names.
//!
//! Nothing here imports another folder of the crate.

pub mod function_set;
pub mod symbols;

pub use function_set::{DefinedFunction, DefinitionError, FuncIndex, FunctionSet};
pub use symbols::{NameAuthority, SymbolKey, SymbolName, mentioned_names};
