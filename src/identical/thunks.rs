//! Bodies that only transfer control to another function: the thunks of merged
//! duplicates, and (with extra arguments) the entry points of merged similar
//! functions.
//!
//! A thunk has the duplicate's name and signature and transfers to the kept
//! function: `return_call` where the calling convention allows tail calls, `call` +
//! `return` elsewhere.

use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::immediates::{Ieee32, Ieee64};
use cranelift_codegen::ir::{
    ExtFuncData, ExternalName, Function, InstBuilder, Signature, Type, UserFuncName, Value, types,
};

/// An external name inside `func` that refers to the function named `target`.
pub(crate) fn external_name(func: &mut Function, target: &UserFuncName) -> ExternalName {
    match target {
        UserFuncName::User(user) => {
            ExternalName::User(func.declare_imported_user_function(user.clone()))
        }
        UserFuncName::Testcase(t) => ExternalName::TestCase(t.clone()),
    }
}

/// Builds a body with `duplicate`'s name and signature that transfers to `kept`:
/// `return_call` where the calling convention allows tail calls, else `call` +
/// `return`.
pub fn build_thunk(duplicate: &Function, kept: &UserFuncName) -> Function {
    let tail_call = duplicate.signature.call_conv.supports_tail_calls();
    build_thunk_with(duplicate, kept, tail_call)
}

/// Like [`build_thunk`], choosing `return_call` (`tail_call`) or `call` + `return`.
pub fn build_thunk_with(duplicate: &Function, kept: &UserFuncName, tail_call: bool) -> Function {
    build_forwarding_body(duplicate, kept, &duplicate.signature, &[], tail_call)
}

/// An extra argument a forwarding body passes after its own.
#[derive(Clone, Debug)]
pub enum ForwardedArgument {
    /// A constant: its type and bits.
    Constant(Type, u64),
    /// The address of a function (`func_addr`).
    FunctionAddress {
        /// The function.
        name: UserFuncName,
        /// Its signature.
        signature: Signature,
        /// The pointer type.
        pointer: Type,
    },
}

/// A body with `caller`'s name and signature that passes its arguments, followed by
/// the `extra` ones, to `callee` (whose signature is
/// `callee_signature`) and returns what it returns: with `return_call` when
/// `tail_call`, else `call` + `return`. Thunks pass no constants; the entry points
/// of merged similar functions pass theirs.
pub fn build_forwarding_body(
    caller: &Function,
    callee: &UserFuncName,
    callee_signature: &Signature,
    extra: &[ForwardedArgument],
    tail_call: bool,
) -> Function {
    let signature = caller.signature.clone();
    let mut body = Function::with_name_signature(caller.name.clone(), signature.clone());
    let name = external_name(&mut body, callee);
    let sig_ref = body.import_signature(callee_signature.clone());
    let callee = body.import_function(ExtFuncData {
        name,
        signature: sig_ref,
        colocated: true,
        patchable: false,
    });
    let entry = body.dfg.make_block();
    body.layout.append_block(entry);
    let mut args: Vec<Value> = signature
        .params
        .iter()
        .map(|p| body.dfg.append_block_param(entry, p.value_type))
        .collect();
    for argument in extra {
        let value = match argument {
            &ForwardedArgument::Constant(ty, bits) => {
                let mut pos = FuncCursor::new(&mut body).at_bottom(entry);
                if ty == types::F32 {
                    pos.ins().f32const(Ieee32::with_bits(bits as u32))
                } else if ty == types::F64 {
                    pos.ins().f64const(Ieee64::with_bits(bits))
                } else {
                    pos.ins().iconst(ty, bits as i64)
                }
            }
            ForwardedArgument::FunctionAddress {
                name,
                signature,
                pointer,
            } => {
                let external = external_name(&mut body, name);
                let signature = body.import_signature(signature.clone());
                let target = body.import_function(ExtFuncData {
                    name: external,
                    signature,
                    colocated: true,
                    patchable: false,
                });
                let mut pos = FuncCursor::new(&mut body).at_bottom(entry);
                pos.ins().func_addr(*pointer, target)
            }
        };
        args.push(value);
    }
    let mut pos = FuncCursor::new(&mut body).at_bottom(entry);
    if tail_call {
        pos.ins().return_call(callee, &args);
    } else {
        let call = pos.ins().call(callee, &args);
        let results = pos.func.dfg.inst_results(call).to_vec();
        pos.ins().return_(&results);
    }
    body
}
