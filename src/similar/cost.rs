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

/// Why a function could not be measured on the target.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotCompiled {
    /// The function.
    pub function: String,
    /// Cranelift's error, or the message of its panic (some backends panic on
    /// verified IR they have no lowering for, such as i128 arguments without
    /// `enable_llvm_abi_extensions` or 64-bit vectors on x86_64).
    pub reason: String,
}

/// [`compiled_size`], with a panic inside Cranelift turned into an error.
fn measured_size(isa: &dyn TargetIsa, func: &Function) -> Result<u64, NotCompiled> {
    let not_compiled = |reason: String| NotCompiled {
        function: func.name.to_string(),
        reason,
    };
    let compiled =
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| compiled_size(isa, func)))
            .map_err(|payload| {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "a panic without a message".into());
                not_compiled(format!("Cranelift panicked: {message}"))
            })?;
    compiled.map_err(|e| not_compiled(e.to_string()))
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

/// Sizes before and after: code bytes on `isa`, or instruction counts without one.
/// A function that `isa` cannot compile (a member or a part of the merge) is an
/// error: a group the target cannot compile is not merged.
pub(crate) fn sizes(
    isa: Option<&dyn TargetIsa>,
    module: &FunctionSet,
    members: &[FuncIndex],
    merged: &Function,
    entry_points: &[Function],
) -> Result<(u64, u64, bool), NotCompiled> {
    if let Some(isa) = isa {
        let before: u64 = members
            .iter()
            .map(|&m| measured_size(isa, &module.get(m).func))
            .sum::<Result<u64, NotCompiled>>()?;
        let after: u64 = std::iter::once(merged)
            .chain(entry_points)
            .map(|f| measured_size(isa, f))
            .sum::<Result<u64, NotCompiled>>()?;
        return Ok((before, after, true));
    }
    let count = |f: &Function| -> u64 {
        f.layout
            .blocks()
            .map(|b| f.layout.block_insts(b).count() as u64)
            .sum()
    };
    let before = members.iter().map(|&m| count(&module.get(m).func)).sum();
    let after = std::iter::once(merged).chain(entry_points).map(count).sum();
    Ok((before, after, false))
}
