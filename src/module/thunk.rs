//! Thunks in machine code: a duplicate that must keep its own address becomes one
//! jump to the kept function where the ISA allows it, a CLIF thunk elsewhere.

use crate::identical::thunks::build_thunk_with;
use crate::similar::cost::compiled_size;
use cranelift_codegen::Context;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::ir::{Function, UserFuncName};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::isa::unwind::UnwindInfo;
use cranelift_module::{FuncId, Module, ModuleError, ModuleReloc, ModuleRelocTarget, ModuleResult};
use target_lexicon::Architecture;

/// Code bytes Cranelift emits for `func` on `isa`, as a module error on failure.
pub(super) fn code_size(isa: &dyn TargetIsa, func: &Function) -> ModuleResult<u64> {
    compiled_size(isa, func).map_err(ModuleError::Compilation)
}

/// A thunk the wrapper defined: what an embedder that records unwind info for the
/// code it saw compiled needs to describe the thunk's code instead.
#[derive(Clone, Debug)]
pub struct ThunkCode {
    /// The function whose code is now the thunk.
    pub function: FuncId,
    /// The function it transfers to.
    pub target: FuncId,
    /// The thunk's code size in bytes.
    pub size: u64,
    /// Its unwind info when it is compiled CLIF (`call` + `return`, or
    /// `return_call`); `None` for one machine jump, which keeps no frame: the
    /// CIE's initial rules describe all of it.
    pub unwind: Option<UnwindInfo>,
}

/// Defines a thunk for `id` (whose CLIF thunk body is `body`) that transfers to
/// `target`; returns what it defined.
pub(super) fn define_thunk<M: Module>(
    inner: &mut M,
    id: FuncId,
    body: &Function,
    target: FuncId,
) -> ModuleResult<ThunkCode> {
    let isa = inner.isa();
    let tail = body.signature.call_conv.supports_tail_calls();
    let target_name = UserFuncName::user(0, target.as_u32());
    let compiled = |inner: &mut M, thunk: Function| -> ModuleResult<ThunkCode> {
        let mut ctx = Context::for_function(thunk);
        inner.define_function(id, &mut ctx)?;
        let compiled = ctx.compiled_code().ok_or_else(|| {
            ModuleError::Backend(anyhow::anyhow!(
                "Cranelift compiled a thunk but kept no code"
            ))
        })?;
        Ok(ThunkCode {
            function: id,
            target,
            size: compiled.code_buffer().len() as u64,
            unwind: compiled
                .create_unwind_info(inner.isa())
                .map_err(ModuleError::Compilation)?,
        })
    };
    // Cranelift compiles `return_call` only with frame pointers.
    if tail && isa.flags().preserve_frame_pointers() {
        compiled(inner, build_thunk_with(body, &target_name, true))
    } else if let Some((bytes, kind)) = machine_thunk(isa) {
        // x86_64 `jmp rel32`: the displacement is at byte 1, relative to its own
        // end; aarch64 `b imm26`: the whole word.
        let (offset, addend, alignment) = match kind {
            Reloc::X86CallPCRel4 => (1, -4, 1),
            _ => (0, 0, 4),
        };
        let reloc = ModuleReloc {
            offset,
            kind,
            name: ModuleRelocTarget::user(0, target.as_u32()),
            addend,
        };
        inner.define_function_bytes(id, alignment, &bytes, &[reloc])?;
        Ok(ThunkCode {
            function: id,
            target,
            size: bytes.len() as u64,
            unwind: None,
        })
    } else {
        compiled(inner, build_thunk_with(body, &target_name, false))
    }
}

/// A thunk as one machine jump to the kept function. The signatures are identical,
/// so a jump leaves arguments, return address and stack exactly as the caller set
/// them, whatever the calling convention. x86_64: `jmp rel32`; aarch64: `b imm26`
/// (not with BTI, where an indirect call must land on a `bti` instruction). Elsewhere
/// the thunk is CLIF: `return_call` for the `tail` convention when the ISA keeps frame
/// pointers (Cranelift needs them for tail calls), `call` + `return` otherwise.
fn machine_thunk(isa: &dyn TargetIsa) -> Option<(Vec<u8>, Reloc)> {
    match isa.triple().architecture {
        Architecture::X86_64 => Some((vec![0xe9, 0, 0, 0, 0], Reloc::X86CallPCRel4)),
        Architecture::Aarch64(_) => {
            let bti = isa
                .isa_flags()
                .iter()
                .any(|f| f.name == "use_bti" && f.as_bool() == Some(true));
            (!bti).then(|| (0x1400_0000u32.to_le_bytes().to_vec(), Reloc::Arm64Call))
        }
        _ => None,
    }
}
