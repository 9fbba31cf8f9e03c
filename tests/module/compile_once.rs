//! Compile-once (`ModuleMergeOptions::compile_once`, on by default) against an
//! oracle outside the wrapper: after every define through `MergingModule`,
//! `ctx.compiled_code()` must be what a fresh `Context::compile` of the same
//! function gives (the whole `CompiledCode`: code, relocations, traps, call sites,
//! unwind info, source locations, frame layout), its relocations must name this
//! function's own targets, and the object must be the one written without
//! compile-once, byte for byte. Over every program of the real-world corpus
//! (`../shared/corpus`; missing, the test says so loudly, and fails under CI) and
//! over generated modules: the bench's (duplicates printed with renamed values and
//! blocks, shuffled blocks and renumbered callee declarations) and one whose functions have equal bodies and
//! differ only in their callees (they share one compiled stencil), which is also
//! run in a JIT: each function must call its own callees.

#[path = "../../benches/merge_bench/generator.rs"]
#[allow(dead_code)]
mod generator;
#[path = "../../benches/merge_bench/prepared.rs"]
mod prepared;
#[path = "../support/skip.rs"]
mod skip;

use clif_merge::module::{MergingModule, ModuleMergeOptions};
use clif_merge::testing::{expand_inputs, load};
use cranelift_codegen::Context;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, UserFuncName, types::I64};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleReloc};
use cranelift_object::{ObjectBuilder, ObjectModule};
use prepared::prepared;
use std::path::Path;

/// The host ISA, optimizing, position-independent (as the bench) if `pic` (the
/// JIT needs it off).
fn isa(pic: bool) -> OwnedTargetIsa {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").expect("flag");
    flags
        .set("is_pic", if pic { "true" } else { "false" })
        .expect("flag");
    cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("host ISA")
        .finish(settings::Flags::new(flags))
        .expect("ISA")
}

/// A relocation: offset, kind, addend, and its target (`ModuleReloc` has no
/// `Debug` or `PartialEq`).
type Relocation = (u32, Reloc, i64, String);

/// A function's relocations with their targets resolved through its own names.
fn relocs_of(ctx: &Context, id: FuncId) -> Vec<Relocation> {
    let compiled = ctx.compiled_code().expect("compiled code after the define");
    compiled
        .buffer
        .relocs()
        .iter()
        .map(|r| {
            let r = ModuleReloc::from_mach_reloc(r, &ctx.func, id);
            (r.offset, r.kind, r.addend, format!("{:?}", r.name))
        })
        .collect()
}

/// Defines `functions` (function `i` is `FuncId` `i`, declared beforehand) through
/// `module`, checking after each define that the compiled code left in the context
/// is what a fresh compile of the same function gives. Returns every define's
/// relocations.
fn define_checked<M: Module>(
    module: &mut MergingModule<M>,
    functions: &[Function],
    names: &[String],
    isa: &OwnedTargetIsa,
) -> Vec<Vec<Relocation>> {
    let mut all_relocs = Vec::new();
    for (i, func) in functions.iter().enumerate() {
        let id = FuncId::from_u32(i as u32);
        let mut ctx = Context::for_function(func.clone());
        module
            .define_function(id, &mut ctx)
            .unwrap_or_else(|e| panic!("{}: {e:?}", names[i]));
        let mut fresh = Context::for_function(func.clone());
        fresh
            .compile(&**isa, &mut Default::default())
            .expect("fresh compile");
        let (got, want) = (ctx.compiled_code(), fresh.compiled_code());
        assert!(
            got == want,
            "{}: the compiled code the wrapper left differs from a fresh compile",
            names[i]
        );
        let relocs = relocs_of(&ctx, id);
        assert_eq!(relocs, relocs_of(&fresh, id), "{}: relocations", names[i]);
        all_relocs.push(relocs);
    }
    all_relocs
}

/// Declares `names` in `module` (the first `defined` exported, the rest imports
/// with the signature of function 0).
fn declare_all<M: Module>(module: &mut M, functions: &[Function], names: &[String]) {
    for (i, name) in names.iter().enumerate() {
        let (linkage, sig) = match functions.get(i) {
            Some(f) => (Linkage::Export, &f.signature),
            None => (Linkage::Import, &functions[0].signature),
        };
        let id = module
            .declare_function(name, linkage, sig)
            .expect("declare");
        assert_eq!(id.as_u32() as usize, i, "declaration order");
    }
}

/// A `MergingModule<ObjectModule>` for `isa`, with compile-once on or off.
fn merging_object(isa: &OwnedTargetIsa, once: bool) -> MergingModule<ObjectModule> {
    let builder = ObjectBuilder::new(
        isa.clone(),
        "compile_once",
        cranelift_module::default_libcall_names(),
    )
    .expect("object builder");
    let options = ModuleMergeOptions::default().with_compile_once(once);
    MergingModule::new(ObjectModule::new(builder), options)
}

/// Defines `functions` through a `MergingModule<ObjectModule>` with compile-once
/// on or off, checking every define against a fresh compile when on; returns the
/// object and how many defines reused a compile.
fn object_of(functions: &[Function], names: &[String], once: bool) -> (Vec<u8>, usize) {
    let isa = isa(true);
    let mut module = merging_object(&isa, once);
    declare_all(&mut module, functions, names);
    if once {
        define_checked(&mut module, functions, names, &isa);
    } else {
        for (i, func) in functions.iter().enumerate() {
            let mut ctx = Context::for_function(func.clone());
            module
                .define_function(FuncId::from_u32(i as u32), &mut ctx)
                .expect("define");
        }
    }
    let (product, report) = module.finish_object().expect("finish");
    if !once {
        assert_eq!(report.compiles_reused, 0, "compile-once off reuses nothing");
    }
    (product.emit().expect("emit"), report.compiles_reused)
}

/// The bench's duplicates are one function up to numbering and block order, and
/// 40 of the 300 here compile to other machine code than their original
/// (Cranelift's output depends on both): compile-once must not hand them the
/// original's code.
#[test]
fn generated_duplicates_get_a_fresh_compile() {
    let generated = generator::generate(&generator::GenConfig {
        functions: 1500,
        dup_rate: 0.2,
        near_rate: 0.1,
        seed: 11,
    });
    let dir = tempfile::Builder::new()
        .prefix("clif-merge-compile-once-gen-")
        .tempdir()
        .expect("temp dir");
    let path = dir.path().join("module.clif");
    std::fs::write(&path, &generated.clif).expect("write module");
    let module = load(&[path]).expect("loads").functions;
    let (functions, names) = prepared(&module);
    let (with, _) = object_of(&functions, &names, true);
    let (without, _) = object_of(&functions, &names, false);
    assert!(with == without, "the object differs with compile-once");
}

#[test]
fn corpus_compile_once_is_a_fresh_compile() {
    let test = "corpus_compile_once_is_a_fresh_compile";
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if !corpus.join("unpack").exists() {
        skip::skip_or_fail(test, "../shared/corpus not found");
        return;
    }
    let dest = tempfile::Builder::new()
        .prefix("clif-merge-compile-once-")
        .tempdir()
        .expect("temp dir");
    let status = std::process::Command::new("sh")
        .arg(corpus.join("unpack"))
        .arg(dest.path())
        .status()
        .expect("run corpus unpack");
    assert!(status.success(), "corpus unpack failed");
    let mut programs: Vec<_> = std::fs::read_dir(dest.path())
        .expect("unpacked")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.is_dir())
        .collect();
    programs.sort();
    assert!(!programs.is_empty(), "no programs in the corpus");
    let mut reused_total = 0;
    for dir in programs {
        let files = expand_inputs(std::slice::from_ref(&dir)).expect("program files");
        let module = load(&files).expect("loads").functions;
        let (functions, names) = prepared(&module);
        let (with, reused) = object_of(&functions, &names, true);
        let (without, _) = object_of(&functions, &names, false);
        eprintln!(
            "{}: {} functions, {reused} compiles reused, object {} bytes",
            dir.display(),
            functions.len(),
            with.len()
        );
        assert!(
            with == without,
            "{}: the object differs with compile-once",
            dir.display()
        );
        reused_total += reused;
    }
    // The corpus has functions equal but for their callees (brotli has dozens):
    // the reuse path ran, it is not only the fresh-compile path that was checked.
    assert!(reused_total > 0, "no compile was reused over the corpus");
}

/// Number of callees and of callers with one body.
const CALLEES: usize = 5;
const CALLERS: usize = 8;

/// Callee `k`: `x * (k + 2) + k`.
fn callee(k: usize, x: i64) -> i64 {
    x.wrapping_mul(k as i64 + 2).wrapping_add(k as i64)
}

/// The callees caller `i` calls: `(i % CALLEES, (i + 1) % CALLEES)`, two
/// different ones (one callee twice would be one name, another stencil), so
/// callers `i` and `i + 5` are identical and the others differ in their callees.
fn callees_of(i: usize) -> (usize, usize) {
    (i % CALLEES, (i + 1) % CALLEES)
}

/// Caller `i`: `a(x + 7) ^ b(x * 3)` with `(a, b)` its callees, in one body.
fn caller(i: usize, x: i64) -> i64 {
    let (a, b) = callees_of(i);
    callee(a, x.wrapping_add(7)) ^ callee(b, x.wrapping_mul(3))
}

/// The generated module: the callees (`FuncId` 0..CALLEES), then the callers,
/// built and declared in `module`; returns the functions and their names.
fn generated<M: Module>(module: &mut M) -> (Vec<Function>, Vec<String>) {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    let mut builder_ctx = FunctionBuilderContext::new();
    let mut functions = Vec::new();
    let mut names = Vec::new();
    for k in 0..CALLEES + CALLERS {
        let name = if k < CALLEES {
            format!("callee{k}")
        } else {
            format!("caller{}", k - CALLEES)
        };
        let id = module
            .declare_function(&name, Linkage::Export, &sig)
            .expect("declare");
        assert_eq!(id.as_u32() as usize, k);
        names.push(name);
    }
    for k in 0..CALLEES + CALLERS {
        let mut func = Function::with_name_signature(UserFuncName::user(0, k as u32), sig.clone());
        let mut b = FunctionBuilder::new(&mut func, &mut builder_ctx);
        let block = b.create_block();
        b.append_block_params_for_function_params(block);
        b.switch_to_block(block);
        b.seal_block(block);
        let x = b.block_params(block)[0];
        let result = if k < CALLEES {
            let times = b.ins().imul_imm_s(x, k as i64 + 2);
            b.ins().iadd_imm_s(times, k as i64)
        } else {
            let (a, c) = callees_of(k - CALLEES);
            let fa = module.declare_func_in_func(FuncId::from_u32(a as u32), b.func);
            let fc = module.declare_func_in_func(FuncId::from_u32(c as u32), b.func);
            let x7 = b.ins().iadd_imm_s(x, 7);
            let x3 = b.ins().imul_imm_s(x, 3);
            let call_a = b.ins().call(fa, &[x7]);
            let ra = b.inst_results(call_a)[0];
            let call_c = b.ins().call(fc, &[x3]);
            let rc = b.inst_results(call_c)[0];
            b.ins().bxor(ra, rc)
        };
        b.ins().return_(&[result]);
        b.finalize(module.target_config());
        functions.push(func);
    }
    (functions, names)
}

#[test]
fn equal_bodies_with_other_callees_share_a_compile_and_call_their_own() {
    let isa = isa(false);
    let builder = JITBuilder::with_isa(isa.clone(), cranelift_module::default_libcall_names());
    let mut module = MergingModule::new(JITModule::new(builder), ModuleMergeOptions::default());
    let (functions, names) = generated(&mut module);
    let relocs = define_checked(&mut module, &functions, &names, &isa);
    // Each caller's call relocations name its own callees, in call order.
    for i in 0..CALLERS {
        let (a, c) = callees_of(i);
        let targets: Vec<String> = relocs[CALLEES + i].iter().map(|r| r.3.clone()).collect();
        let want: Vec<String> = [a, c]
            .iter()
            .map(|&k| {
                format!(
                    "{:?}",
                    cranelift_module::ModuleRelocTarget::user(0, k as u32)
                )
            })
            .collect();
        assert_eq!(targets, want, "caller{i}'s call targets");
    }
    let (jit, report) = module.finish_jit().expect("finish");
    // One stencil for the eight callers: compiled plainly the first time, through
    // the cache the second, reused from the third on.
    assert_eq!(report.compiles_reused, CALLERS - 2);
    // Callers 0 and 5, 1 and 6, 2 and 7 are the same code calling the same
    // callees: merged.
    assert_eq!(report.merged(), 3, "{:?}", report.actions);
    for i in 0..CALLERS {
        let ptr = jit.get_finalized_function(FuncId::from_u32((CALLEES + i) as u32));
        // SAFETY: every caller has the signature (i64) -> i64 of the host's
        // default calling convention (`make_signature`).
        let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(ptr) };
        for x in [0, 1, -3, 1000, i64::MAX] {
            assert_eq!(f(x), caller(i, x), "caller{i}({x})");
        }
    }
}

#[test]
fn equal_bodies_with_other_callees_write_the_same_object_with_and_without() {
    let isa = isa(true);
    let object = |once: bool| {
        let mut module = merging_object(&isa, once);
        let (functions, names) = generated(&mut module);
        define_checked(&mut module, &functions, &names, &isa);
        let (product, report) = module.finish_object().expect("finish");
        (product.emit().expect("emit"), report.compiles_reused)
    };
    let (with, reused) = object(true);
    let (without, none) = object(false);
    assert_eq!((reused, none), (CALLERS - 2, 0));
    assert!(with == without, "the object differs with compile-once");
}
