//! [`MergingModule`]: function merging for any `cranelift_module::Module`.
//!
//! Wrap the module a compiler already uses and keep using the `Module` trait. Here an
//! `ObjectModule` for the host (feature `object`) gets two exported functions with
//! the same body:
//!
//! ```
//! # #[cfg(feature = "object")]
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use clif_merge::MergeAction;
//! use clif_merge::module::{MergingModule, ModuleMergeOptions};
//! use cranelift_codegen::ir::{AbiParam, InstBuilder, UserFuncName, types::I64};
//! use cranelift_codegen::settings;
//! use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
//! use cranelift_module::{Linkage, Module, default_libcall_names};
//! use cranelift_object::{ObjectBuilder, ObjectModule};
//!
//! let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())?
//!     .finish(settings::Flags::new(settings::builder()))?;
//! let inner = ObjectModule::new(ObjectBuilder::new(isa, "example", default_libcall_names())?);
//! let mut module = MergingModule::new(inner, ModuleMergeOptions::default());
//!
//! // Declared and defined exactly as without the wrapper.
//! let mut ctx = module.make_context();
//! let mut builder_ctx = FunctionBuilderContext::new();
//! for name in ["triple", "times_three"] {
//!     ctx.func.signature.params.push(AbiParam::new(I64));
//!     ctx.func.signature.returns.push(AbiParam::new(I64));
//!     let id = module.declare_function(name, Linkage::Export, &ctx.func.signature)?;
//!     ctx.func.name = UserFuncName::user(0, id.as_u32());
//!     let mut builder = FunctionBuilder::new(&mut ctx.func, &mut builder_ctx);
//!     let block = builder.create_block();
//!     builder.append_block_params_for_function_params(block);
//!     builder.switch_to_block(block);
//!     builder.seal_block(block);
//!     let x = builder.block_params(block)[0];
//!     let three = builder.ins().iconst(I64, 3);
//!     let product = builder.ins().imul(x, three);
//!     builder.ins().return_(&[product]);
//!     builder.finalize(module.target_config());
//!     module.define_function(id, &mut ctx)?;
//!     module.clear_context(&mut ctx);
//! }
//!
//! // The pass runs at finish.
//! let (product, report) = module.finish_object()?;
//! assert_eq!(report.functions, 2);
//! assert_eq!(
//!     report.actions,
//!     [("times_three".to_string(), "triple".to_string(), MergeAction::Thunk)]
//! );
//! let object_file: Vec<u8> = product.emit()?;
//! assert!(!object_file.is_empty());
//! # Ok(())
//! # }
//! # #[cfg(not(feature = "object"))]
//! # fn main() {}
//! ```
//!
//! Declarations go to the inner module at once, so every `FuncId` and `DataId` stays
//! valid. When functions are compiled is [`CompileMode`]: by default
//! ([`CompileMode::AtDefine`]) `define_function` compiles the function at once, as
//! the inner module would, leaving `ctx.compiled_code()` for whatever wraps the
//! module, and keeps only its machine code; functions are compared by that code. With
//! [`CompileMode::AtFinish`] it records the function's IR instead and only the kept
//! functions are compiled at the end (merging similar functions needs this;
//! separate compilation works in both modes, from the IR or from the machine code). `define_data` is recorded, and every function address it
//! holds counts as address-taken (data is defined at the end, with the address of an
//! erased or aliased duplicate replaced by the kept function's, and identical
//! read-only objects folded where [`DataMerging`] allows). `define_function_bytes` is
//! recorded like data: the pass does not compare such code, every function address
//! its relocations take counts as address-taken, and it is defined at the end with
//! its references to an erased or aliased duplicate retargeted to the kept function.
//!
//! An erased or aliased duplicate gets no code. For an `ObjectModule`,
//! [`MergingModule::finish_object`] then points its symbol at the kept function's
//! code: same section, same offset, the duplicate's own name, scope and weak flag (an
//! erased, local duplicate is never referenced, so its symbol is harmless). For a
//! `JITModule`, [`MergingModule::finish_jit`] finalizes and returns a [`MergedJit`]
//! whose `get_finalized_function` resolves such a duplicate to the kept code. The
//! [`MergeReport`] lists the functions without code of their own and the thunks, for
//! an embedder that records unwind or debug info per function.
//!
//! Files: `merging` (the wrapper, the pass at finish), `compiled` (compile at
//! define: the machine-code comparison and relocation retargeting), `data`
//! (read-only data folding), `thunk` (thunks as one machine jump), `decisions`
//! (stage 3 of separate compilation, with the `separate` feature) and
//! `code_summary` (stages 1 and 3 from machine code, compiling at define) over
//! `cross_module` (the decisions as the finish applies them), `object` and `jit`
//! (the backend-specific finishes, with the features of those names). Imports point
//! downward: `object` and `jit` use `merging`, which uses `compiled`, `data`,
//! `thunk`, `code_summary`, `decisions` and `cross_module`; `code_summary` uses
//! `compiled` and `decisions`; `data` uses `compiled`.

// `ModuleResult` is cranelift-module's own error type, which the `Module` trait
// returns everywhere; the wrapper returns the same.
#![allow(clippy::result_large_err)]

#[cfg(feature = "separate")]
mod code_summary;
mod compile_once;
mod compiled;
mod cross_module;
mod data;
#[cfg(feature = "separate")]
mod decisions;
#[cfg(feature = "jit")]
mod jit;
mod merging;
#[cfg(feature = "object")]
mod object;
mod thunk;

pub use data::DataMerging;
#[cfg(feature = "jit")]
pub use jit::MergedJit;
pub use merging::{CompileMode, MergeReport, MergingModule, ModuleMergeOptions};
pub use thunk::ThunkCode;
