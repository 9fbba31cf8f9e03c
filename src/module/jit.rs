//! Finishing a [`MergingModule`] over a `JITModule`: [`MergedJit`] resolves an
//! erased or aliased duplicate to the kept code.

use super::merging::{MergeReport, MergingModule};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, ModuleResult};
use std::collections::HashMap;

impl MergingModule<JITModule> {
    /// Runs the pass, compiles and finalizes. In the returned [`MergedJit`], the
    /// `FuncId` of an erased or aliased duplicate resolves to the kept function's code.
    ///
    /// ```
    /// use clif_merge::MergeAction;
    /// use clif_merge::module::{MergingModule, ModuleMergeOptions};
    /// use cranelift_codegen::ir::{AbiParam, InstBuilder, UserFuncName, types::I64};
    /// use cranelift_codegen::settings;
    /// use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
    /// use cranelift_jit::{JITBuilder, JITModule};
    /// use cranelift_module::{Linkage, Module, default_libcall_names};
    ///
    /// let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())?
    ///     .finish(settings::Flags::new(settings::builder()))?;
    /// let inner = JITModule::new(JITBuilder::with_isa(isa, default_libcall_names()));
    /// let mut module = MergingModule::new(inner, ModuleMergeOptions::default());
    ///
    /// // Two local functions computing x * 3.
    /// let mut ctx = module.make_context();
    /// let mut builder_ctx = FunctionBuilderContext::new();
    /// let mut ids = Vec::new();
    /// for name in ["triple", "times_three"] {
    ///     ctx.func.signature.params.push(AbiParam::new(I64));
    ///     ctx.func.signature.returns.push(AbiParam::new(I64));
    ///     let id = module.declare_function(name, Linkage::Local, &ctx.func.signature)?;
    ///     ctx.func.name = UserFuncName::user(0, id.as_u32());
    ///     let mut builder = FunctionBuilder::new(&mut ctx.func, &mut builder_ctx);
    ///     let block = builder.create_block();
    ///     builder.append_block_params_for_function_params(block);
    ///     builder.switch_to_block(block);
    ///     builder.seal_block(block);
    ///     let x = builder.block_params(block)[0];
    ///     let three = builder.ins().iconst(I64, 3);
    ///     let product = builder.ins().imul(x, three);
    ///     builder.ins().return_(&[product]);
    ///     builder.finalize(module.target_config());
    ///     module.define_function(id, &mut ctx)?;
    ///     module.clear_context(&mut ctx);
    ///     ids.push(id);
    /// }
    ///
    /// let (jit, report) = module.finish_jit()?;
    /// assert_eq!(report.actions[0].2, MergeAction::Erase);
    /// // The erased duplicate's id resolves to the kept code.
    /// let code = jit.get_finalized_function(ids[1]);
    /// assert_eq!(code, jit.get_finalized_function(ids[0]));
    /// // SAFETY: the code was compiled for the host with the signature `(i64) -> i64`
    /// // in the host's default calling convention, and `jit` outlives the call.
    /// let times_three: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
    /// assert_eq!(times_three(7), 21);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn finish_jit(self) -> ModuleResult<(MergedJit, MergeReport)> {
        let (mut module, report, merged) = self.merge_and_define(false)?;
        module.finalize_definitions()?;
        let redirects = merged
            .map(|m| {
                m.codeless()
                    .map(|d| (m.id(d.function), m.id(d.into)))
                    .collect()
            })
            .unwrap_or_default();
        Ok((MergedJit { module, redirects }, report))
    }
}

/// A finalized `JITModule` after merging.
pub struct MergedJit {
    module: JITModule,
    redirects: HashMap<FuncId, FuncId>,
}

impl MergedJit {
    /// The address of a function's code; for an erased or aliased duplicate, the
    /// kept function's code (a thunk has code of its own).
    pub fn get_finalized_function(&self, id: FuncId) -> *const u8 {
        let id = self.redirects.get(&id).copied().unwrap_or(id);
        self.module.get_finalized_function(id)
    }

    /// The finalized module.
    pub fn module(&self) -> &JITModule {
        &self.module
    }

    /// The finalized module, for example to free its memory.
    pub fn into_inner(self) -> JITModule {
        self.module
    }
}
