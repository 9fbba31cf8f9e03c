//! `MergingModule` with `similar`: functions built with `FunctionBuilder` that differ
//! only in constants or in their callee are compiled with and without the
//! similar-function merge, in memory (`JITModule`), and run on the CPU: every
//! function returns what the unmerged build returns, and the merge saved code.

use clif_merge::module::{MergedJit, MergingModule, ModuleMergeOptions};
use clif_merge::similar::{Pricing, SimilarOptions};
use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, UserFuncName, types};
use cranelift_codegen::isa::CallConv;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module};

/// (name, constant, callee: index into the leaf functions or none)
const FUNCTIONS: &[(&str, i64, Option<usize>)] = &[
    ("scale3", 3, None),
    ("scale5", 5, None),
    ("scale7", 7, None),
    ("via_square", 11, Some(0)),
    ("via_negate", 11, Some(1)),
];

fn signature() -> cranelift_codegen::ir::Signature {
    let mut sig = cranelift_codegen::ir::Signature::new(CallConv::SystemV);
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    sig
}

/// A leaf: `x * x` or `1 - x`.
fn define_leaf(module: &mut MergingModule<JITModule>, id: FuncId, square: bool) {
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), signature());
    let mut context = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut func, &mut context);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let x = b.block_params(block)[0];
    let r = if square {
        b.ins().imul(x, x)
    } else {
        let one = b.ins().iconst(types::I64, 1);
        b.ins().isub(one, x)
    };
    b.ins().return_(&[r]);
    b.seal_all_blocks();
    let mut ctx = cranelift_codegen::Context::for_function(func);
    module.define_function(id, &mut ctx).expect("define leaf");
}

/// A body of some twenty instructions using `constant`, calling `callee` if any.
fn define_body(
    module: &mut MergingModule<JITModule>,
    id: FuncId,
    constant: i64,
    callee: Option<FuncId>,
) {
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), signature());
    let callee = callee.map(|c| module.declare_func_in_func(c, &mut func));
    let mut context = FunctionBuilderContext::new();
    let mut b = FunctionBuilder::new(&mut func, &mut context);
    let block = b.create_block();
    b.append_block_params_for_function_params(block);
    b.switch_to_block(block);
    let x = b.block_params(block)[0];
    let c = b.ins().iconst(types::I64, constant);
    let mut v = b.ins().imul(x, c);
    if let Some(callee) = callee {
        let call = b.ins().call(callee, &[v]);
        v = b.inst_results(call)[0];
    }
    let mut acc = b.ins().iadd(v, x);
    for round in 0..6 {
        let t = b.ins().bxor(acc, v);
        let u = b.ins().imul(t, x);
        acc = if round % 2 == 0 {
            b.ins().iadd(u, acc)
        } else {
            b.ins().isub(u, acc)
        };
    }
    b.ins().return_(&[acc]);
    b.seal_all_blocks();
    let mut ctx = cranelift_codegen::Context::for_function(func);
    module.define_function(id, &mut ctx).expect("define body");
}

fn build(similar: Option<SimilarOptions>) -> (MergedJit, Vec<FuncId>, usize, u64) {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").expect("flag");
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("host ISA")
        .finish(settings::Flags::new(flags))
        .expect("ISA");
    let builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    let options = ModuleMergeOptions::default().with_similar(similar);
    let mut module = MergingModule::new(JITModule::new(builder), options);
    let leaves: Vec<FuncId> = ["square", "negate"]
        .iter()
        .map(|n| {
            module
                .declare_function(n, Linkage::Local, &signature())
                .expect("declare")
        })
        .collect();
    let ids: Vec<FuncId> = FUNCTIONS
        .iter()
        .map(|(n, _, _)| {
            module
                .declare_function(n, Linkage::Export, &signature())
                .expect("declare")
        })
        .collect();
    define_leaf(&mut module, leaves[0], true);
    define_leaf(&mut module, leaves[1], false);
    for (&(_, constant, callee), &id) in FUNCTIONS.iter().zip(&ids) {
        define_body(&mut module, id, constant, callee.map(|c| leaves[c]));
    }
    let (jit, report) = module.finish_jit().expect("finish");
    (jit, ids, report.similar_groups, report.bytes_saved)
}

fn results(jit: &MergedJit, ids: &[FuncId]) -> Vec<Vec<i64>> {
    ids.iter()
        .map(|&id| {
            let ptr = jit.get_finalized_function(id);
            // SAFETY: every function has the signature (i64) -> i64 system_v.
            let f: extern "sysv64" fn(i64) -> i64 = unsafe { std::mem::transmute(ptr) };
            [-3, 0, 1, 2, 7, 1 << 40, i64::MIN, i64::MAX]
                .iter()
                .map(|&x| f(x))
                .collect()
        })
        .collect()
}

#[cfg(target_arch = "x86_64")]
#[test]
fn similar_functions_run_the_same_after_merging() {
    let (plain, plain_ids, plain_groups, _) = build(None);
    assert_eq!(plain_groups, 0);
    let compiled = SimilarOptions::default().with_pricing(Pricing::Compiled);
    let (merged, merged_ids, groups, bytes_saved) = build(Some(compiled));
    // The three `scale` functions differ in a constant, the two `via` ones in their
    // callee: two groups.
    assert_eq!(groups, 2, "similar groups");
    // A group is merged only when it saves at least `min_saved` bytes (default 1),
    // so a merge saves something; the exact count is a snapshot of the x86_64 code
    // (opt_level speed), with every size compiled: changes when the fixture, the
    // similar merge or Cranelift's x86_64 backend changes; update deliberately.
    assert!(bytes_saved >= SimilarOptions::default().min_saved);
    assert_eq!(bytes_saved, 223, "bytes saved");
    assert_eq!(results(&merged, &merged_ids), results(&plain, &plain_ids));

    // Priced by the size model (the default), the same two groups merge and run the
    // same; the bytes saved are the model's prediction (a snapshot of the model's
    // x86_64 coefficients: it over-predicts these tiny functions' saving).
    let (modeled, modeled_ids, groups, predicted_saved) = build(Some(SimilarOptions::default()));
    assert_eq!(groups, 2, "similar groups, modeled");
    assert_eq!(predicted_saved, 584, "bytes saved, predicted");
    assert_eq!(results(&modeled, &modeled_ids), results(&plain, &plain_ids));
}
