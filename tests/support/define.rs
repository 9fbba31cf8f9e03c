//! Functions built with cranelift-frontend and defined in a `Module`, for the tests
//! that drive modules the way a compiler does (`#[path]`-included): the builder's
//! boilerplate in one place.

#![allow(dead_code)]

use cranelift_codegen::Context;
use cranelift_codegen::ir::{Function, InstBuilder, Signature, UserFuncName, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Module};

/// Builds function `id` with signature `sig`: `body` gets the module, the builder
/// (in the entry block) and the entry block's parameters, and returns the values to
/// return. Defines it in `m`; returns whether `ctx.compiled_code()` was there
/// afterwards.
pub fn define_function<M: Module>(
    m: &mut M,
    id: FuncId,
    sig: &Signature,
    body: impl FnOnce(&mut M, &mut FunctionBuilder, &[Value]) -> Vec<Value>,
) -> bool {
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig.clone());
    let mut context = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut func, &mut context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let params = b.block_params(entry).to_vec();
    let results = body(m, &mut b, &params);
    b.ins().return_(&results);
    b.seal_all_blocks();
    b.finalize(m.target_config());
    let mut ctx = Context::for_function(func);
    m.define_function(id, &mut ctx).expect("define");
    ctx.compiled_code().is_some()
}

/// [`define_function`] for a function of one parameter and one result: `body`
/// gets the parameter and returns the result.
pub fn define_unary<M: Module>(
    m: &mut M,
    id: FuncId,
    sig: &Signature,
    body: impl FnOnce(&mut M, &mut FunctionBuilder, Value) -> Value,
) -> bool {
    define_function(m, id, sig, |m, b, p| vec![body(m, b, p[0])])
}

/// [`call`] with one argument.
pub fn call_unary<M: Module>(
    m: &mut M,
    b: &mut FunctionBuilder,
    callee: FuncId,
    x: Value,
) -> Value {
    call(m, b, callee, &[x])
}

/// A call of `callee` with `args`; its single result.
pub fn call<M: Module>(
    m: &mut M,
    b: &mut FunctionBuilder,
    callee: FuncId,
    args: &[Value],
) -> Value {
    let callee = m.declare_func_in_func(callee, b.func);
    let call = b.ins().call(callee, args);
    b.inst_results(call)[0]
}

/// A `MergingModule` over a JIT for the host (default flags) with `options`.
#[cfg(feature = "jit")]
pub fn merging_jit(
    options: clif_merge::module::ModuleMergeOptions,
) -> clif_merge::module::MergingModule<cranelift_jit::JITModule> {
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("host ISA")
        .finish(cranelift_codegen::settings::Flags::new(
            cranelift_codegen::settings::builder(),
        ))
        .expect("ISA");
    let builder =
        cranelift_jit::JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    clif_merge::module::MergingModule::new(cranelift_jit::JITModule::new(builder), options)
}
