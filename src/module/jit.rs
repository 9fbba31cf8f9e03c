//! Finishing a [`MergingModule`] over a `JITModule`: [`MergedJit`] resolves an
//! erased or aliased duplicate to the kept code.

use super::merging::{MergeReport, MergingModule};
use cranelift_jit::JITModule;
use cranelift_module::{FuncId, ModuleResult};
use std::collections::HashMap;

impl MergingModule<JITModule> {
    /// Runs the pass, compiles and finalizes. In the returned [`MergedJit`], the
    /// `FuncId` of an erased or aliased duplicate resolves to the kept function's code.
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
