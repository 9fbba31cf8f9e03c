//! Code-size measurement: what decides whether merging a group pays.

use crate::ir::{FuncIndex, FunctionSet};
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{CodegenError, Context};

/// Code bytes Cranelift emits for `func` on `isa`.
pub fn compiled_size(isa: &dyn TargetIsa, func: &Function) -> Result<u64, CodegenError> {
    let mut ctx = Context::for_function(func.clone());
    let compiled = ctx
        .compile(isa, &mut ControlPlane::default())
        .map_err(|e| e.inner)?;
    Ok(compiled.code_buffer().len() as u64)
}

/// The host ISA at `opt_level=speed` (with frame pointers, which `return_call`
/// needs on x86_64), or `None` where Cranelift has no backend for the host.
pub fn host_isa() -> Option<OwnedTargetIsa> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").ok()?;
    flags.set("preserve_frame_pointers", "true").ok()?;
    cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()
}

/// Sizes before and after: code bytes when every function compiles for `isa`, else
/// instruction counts.
pub(crate) fn sizes(
    isa: Option<&dyn TargetIsa>,
    module: &FunctionSet,
    members: &[FuncIndex],
    merged: &Function,
    entry_points: &[Function],
) -> (u64, u64, bool) {
    if let Some(isa) = isa {
        let before: Option<u64> = members
            .iter()
            .map(|&m| compiled_size(isa, &module.get(m).func).ok())
            .sum();
        let after: Option<u64> = std::iter::once(merged)
            .chain(entry_points)
            .map(|f| compiled_size(isa, f).ok())
            .sum();
        if let (Some(before), Some(after)) = (before, after) {
            return (before, after, true);
        }
    }
    let count = |f: &Function| -> u64 {
        f.layout
            .blocks()
            .map(|b| f.layout.block_insts(b).count() as u64)
            .sum()
    };
    let before = members.iter().map(|&m| count(&module.get(m).func)).sum();
    let after = std::iter::once(merged).chain(entry_points).map(count).sum();
    (before, after, false)
}
