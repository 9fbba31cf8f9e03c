//! Entry points: each member of a merged group keeps its name, signature and
//! address, and becomes a body that calls the merged body with its own constants
//! and callee addresses (`return_call` where the calling convention allows tail
//! calls and the ISA keeps frame pointers).

use super::groups::{HoleKind, HoleParameter};
use crate::identical::thunks::{ForwardedArgument, build_forwarding_body};
use crate::ir::{FuncIndex, FunctionSet};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::Function;

/// One entry point per member of `members` (in member order), each calling
/// `merged` with its own values of `parameters`. `frame_pointers`: whether the
/// target keeps them (Cranelift compiles `return_call` only then).
pub(crate) fn build_entry_points(
    module: &FunctionSet,
    members: &[FuncIndex],
    parameters: &[HoleParameter],
    merged: &Function,
    frame_pointers: bool,
) -> Vec<Function> {
    members
        .iter()
        .enumerate()
        .map(|(i, &m)| {
            let func = &module.get(m).func;
            let extra: Vec<ForwardedArgument> = parameters
                .iter()
                .map(|p| match p.kind {
                    HoleKind::Constant | HoleKind::CalleeLoadOffset | HoleKind::Selector => {
                        ForwardedArgument::Constant(p.ty, p.values[i])
                    }
                    HoleKind::Callee => {
                        let callee = &module.get(FuncIndex::new(p.values[i] as usize)).func;
                        ForwardedArgument::FunctionAddress {
                            name: callee.name.clone(),
                            signature: callee.signature.clone(),
                            pointer: p.ty,
                        }
                    }
                })
                .collect();
            let tail_call = func.signature.call_conv.supports_tail_calls() && frame_pointers;
            build_forwarding_body(func, &merged.name, &merged.signature, &extra, tail_call)
        })
        .collect()
}
