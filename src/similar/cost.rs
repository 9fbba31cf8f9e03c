//! Code-size measurement: what decides whether merging a group pays.

use crate::ir::catch_panic;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use cranelift_codegen::settings::FlagsOrIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_codegen::{CodegenError, Context, verify_function};
use std::cell::Cell;

thread_local! {
    /// This thread's compilation context, kept between [`compiled_size`] calls
    /// so that Cranelift reuses its allocations (the register allocator's too),
    /// as compilers that ship it do: the code it emits does not depend on what
    /// the context compiled before.
    static CONTEXT: Cell<Option<Context>> = const { Cell::new(None) };
}

/// Code bytes Cranelift emits for `func` on `isa`.
pub fn compiled_size(isa: &dyn TargetIsa, func: &Function) -> Result<u64, CodegenError> {
    // Taken out of the thread-local while compiling, and put back only after a
    // compile that succeeded, so that a context a panic or an error left
    // half-way is dropped rather than reused.
    let mut ctx = CONTEXT.take().unwrap_or_else(Context::new);
    ctx.clear();
    ctx.func = func.clone();
    let size = ctx
        .compile(isa, &mut ControlPlane::default())
        .map(|compiled| compiled.code_buffer().len() as u64)
        .map_err(|e| e.inner)?;
    CONTEXT.set(Some(ctx));
    Ok(size)
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
    let compiled = catch_panic(|| compiled_size(isa, func))
        .map_err(|message| not_compiled(format!("Cranelift panicked: {message}")))?;
    compiled.map_err(|e| not_compiled(e.to_string()))
}

/// The host ISA at `opt_level=speed` (with frame pointers, which `return_call`
/// needs on x86_64), or `None` where Cranelift has no backend for the host.
/// Cranelift's verifier is off, as compilers that ship Cranelift run it: code
/// sizes do not depend on it, and the bodies the similar merge builds are
/// verified on their own before they are measured (`verified_size_of`).
pub fn host_isa() -> Option<OwnedTargetIsa> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").ok()?;
    flags.set("preserve_frame_pointers", "true").ok()?;
    flags.set("enable_verifier", "false").ok()?;
    cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .ok()?
        .finish(settings::Flags::new(flags))
        .ok()
}

/// [`size_of`] for a body the merge built: first checked by Cranelift's verifier
/// (for `isa`, or for no target without one), whatever `isa`'s own
/// `enable_verifier` says, so that no body that fails it is ever merged.
pub(crate) fn verified_size_of(
    isa: Option<&dyn TargetIsa>,
    func: &Function,
) -> Result<u64, NotCompiled> {
    let flags = settings::Flags::new(settings::builder());
    let target = match isa {
        Some(isa) => FlagsOrIsa::from(isa),
        None => FlagsOrIsa::from(&flags),
    };
    verify_function(func, target).map_err(|errors| NotCompiled {
        function: func.name.to_string(),
        reason: format!("the verifier rejects it: {errors}"),
    })?;
    size_of(isa, func)
}

/// The size of `func`: code bytes on `isa`, or its instruction count without one.
/// A function that `isa` cannot compile is an error: a group the target cannot
/// compile (a member or a part of the merge) is not merged.
pub(crate) fn size_of(isa: Option<&dyn TargetIsa>, func: &Function) -> Result<u64, NotCompiled> {
    match isa {
        Some(isa) => measured_size(isa, func),
        None => Ok(func
            .layout
            .blocks()
            .map(|b| func.layout.block_insts(b).count() as u64)
            .sum()),
    }
}
