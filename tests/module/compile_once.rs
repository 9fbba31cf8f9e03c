//! Compile-once (`ModuleMergeOptions::compile_once`, on by default) against an
//! oracle outside the wrapper. After every define through `MergingModule`,
//! `ctx.compiled_code()` must be what a fresh `Context::compile` gives: of the
//! function itself, or, where the define reused the compile of an equal function
//! (`MergeReport::compiled_from`), of that function, the whole `CompiledCode`
//! (code, relocations by name reference, traps, call sites, unwind info, source
//! locations, frame layout); and its relocations, resolved through this
//! function's own names, must be the other function's with each of its names
//! replaced by one of this function's, one for one, and name what a fresh
//! compile of this function names, as often. With duplicates not compiled
//! (`with_compile_duplicates(false)`), a define that compiled nothing leaves no
//! compiled code, and the function whose code stands for it
//! (`MergeReport::not_compiled`) compiles to the same relocations by name.
//! Over every program of the real-world corpus (`../shared/corpus`; missing, the
//! test says so loudly, and fails under CI) and over generated modules: the
//! bench's (duplicates printed with renamed values and blocks, shuffled blocks
//! and renumbered callee declarations: their name references are renumbered)
//! and one whose functions have equal bodies and differ only in their callees
//! (they share one compiled stencil), which is also run in a JIT: each function
//! must call its own callees. Linked programs are checked by
//! `tests/linked_oracle.rs` (the `MergingModule` arm, both settings).

#[path = "../../benches/merge_bench/generator.rs"]
#[allow(dead_code)]
mod generator;
#[path = "../../benches/merge_bench/prepared.rs"]
mod prepared;
#[path = "../support/skip.rs"]
mod skip;

use clif_merge::module::{MergeReport, MergingModule, ModuleMergeOptions};
use clif_merge::testing::{expand_inputs, load};
use cranelift_codegen::CompiledCode;
use cranelift_codegen::Context;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::ir::function::FunctionParameters;
use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, SourceLoc, UserFuncName, types::I64};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleReloc};
use cranelift_object::{ObjectBuilder, ObjectModule};
use prepared::prepared;
use std::collections::HashMap;
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

/// What one define through the wrapper left: the compiled code (if any) and
/// its relocations resolved through the function as the define left it.
struct Defined {
    code: Option<CompiledCode>,
    relocs: Vec<Relocation>,
}

/// A fresh compile of `func`: its compiled code and its relocations resolved
/// through its own names.
fn fresh(func: &Function, isa: &OwnedTargetIsa, id: FuncId) -> (CompiledCode, Vec<Relocation>) {
    let mut ctx = Context::for_function(func.clone());
    ctx.compile(&**isa, &mut Default::default())
        .expect("fresh compile");
    let relocs = relocs_of(&ctx, id);
    (ctx.compiled_code().expect("compiled").clone(), relocs)
}

/// `func` with the base source location `base` (its source locations relative
/// to it as they were to its own).
fn rebased(func: &Function, base: SourceLoc) -> Function {
    let mut params = FunctionParameters::new();
    for (r, name) in func.params.user_named_funcs().iter() {
        assert_eq!(
            params.ensure_user_func_name(name.clone()),
            r,
            "a name twice"
        );
    }
    if base != SourceLoc::default() {
        params.ensure_base_srcloc(base);
    }
    let mut func = func.clone();
    func.params = params;
    func
}

/// Which parts of two compiled codes differ (for a failure's message).
fn difference(a: &CompiledCode, b: &CompiledCode) -> String {
    let (x, y) = (&a.buffer, &b.buffer);
    let parts = [
        ("code", x.data() == y.data()),
        ("relocations", x.relocs() == y.relocs()),
        ("traps", x.traps() == y.traps()),
        (
            "source locations",
            x.get_srclocs_sorted() == y.get_srclocs_sorted(),
        ),
        ("unwind info", x.unwind_info == y.unwind_info),
        ("frame layout", x.frame_layout() == y.frame_layout()),
        (
            "basic blocks",
            a.bb_starts == b.bb_starts && a.bb_edges == b.bb_edges,
        ),
        (
            "value labels",
            a.value_labels_ranges == b.value_labels_ranges,
        ),
    ];
    let differ: Vec<&str> = parts
        .iter()
        .filter(|(_, same)| !same)
        .map(|(p, _)| *p)
        .collect();
    format!("{differ:?} differ")
}

/// The relocations' targets, sorted, with their kinds and addends (what a
/// function refers to and how often, whatever the layout of its code).
fn targets(relocs: &[Relocation]) -> Vec<(Reloc, i64, String)> {
    let mut targets: Vec<_> = relocs
        .iter()
        .map(|(_, kind, addend, name)| (*kind, *addend, name.clone()))
        .collect();
    targets.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    targets
}

/// Defines `functions` (function `i` is `FuncId` `i`, declared beforehand) through
/// `module`, keeping what each define left.
fn define_all<M: Module>(module: &mut MergingModule<M>, functions: &[Function]) -> Vec<Defined> {
    functions
        .iter()
        .enumerate()
        .map(|(i, func)| {
            let id = FuncId::from_u32(i as u32);
            let mut ctx = Context::for_function(func.clone());
            module
                .define_function(id, &mut ctx)
                .unwrap_or_else(|e| panic!("function {i}: {e:?}"));
            let relocs = if ctx.compiled_code().is_some() {
                relocs_of(&ctx, id)
            } else {
                Vec::new()
            };
            Defined {
                code: ctx.compiled_code().cloned(),
                relocs,
            }
        })
        .collect()
}

/// Checks what each define of `functions` left (`defined`) against fresh
/// compiles, as the module docs say, given the report's `compiled_from` and
/// `not_compiled`. Returns how many defines reused a compile or compiled nothing.
fn check_defines(
    functions: &[Function],
    names: &[String],
    defined: &[Defined],
    report: &MergeReport,
    isa: &OwnedTargetIsa,
) -> usize {
    let from: HashMap<FuncId, FuncId> = report.compiled_from.iter().copied().collect();
    let standing: HashMap<FuncId, FuncId> = report.not_compiled.iter().copied().collect();
    assert_eq!(report.compiles_reused, from.len());
    for (i, (func, got)) in functions.iter().zip(defined).enumerate() {
        let id = FuncId::from_u32(i as u32);
        let name = &names[i];
        let (own_code, own_relocs) = fresh(func, isa, id);
        if let Some(&other) = standing.get(&id) {
            assert!(
                got.code.is_none(),
                "{name}: compiled code left, but not compiled"
            );
            assert!(
                other.as_u32() < id.as_u32(),
                "{name}: stands for a later function"
            );
            // The same code and the same names: a fresh compile of the other
            // refers to the same symbols, as often.
            let (_, other_relocs) = fresh(&functions[other.as_u32() as usize], isa, other);
            assert_eq!(
                targets(&own_relocs),
                targets(&other_relocs),
                "{name}: not compiled, but {} refers to other symbols",
                names[other.as_u32() as usize]
            );
            continue;
        }
        let code = got
            .code
            .as_ref()
            .unwrap_or_else(|| panic!("{name}: no compiled code after the define"));
        let Some(&other) = from.get(&id) else {
            assert!(*code == own_code, "{name}: differs from a fresh compile");
            assert_eq!(got.relocs, own_relocs, "{name}: relocations");
            continue;
        };
        assert!(
            other.as_u32() < id.as_u32(),
            "{name}: reused a later compile"
        );
        // Finished with this function's parameters: its base source location.
        let rebased = rebased(
            &functions[other.as_u32() as usize],
            func.params.base_srcloc(),
        );
        let (other_code, other_relocs) = fresh(&rebased, isa, other);
        assert!(
            *code == other_code,
            "{name}: the reused code is not a fresh compile of {}: {}",
            names[other.as_u32() as usize],
            difference(code, &other_code)
        );
        // The other's relocations, each of its names replaced by one of this
        // function's, one for one.
        assert_eq!(got.relocs.len(), other_relocs.len(), "{name}: relocations");
        let mut renamed: HashMap<&str, &str> = HashMap::new();
        let mut renamed_back: HashMap<&str, &str> = HashMap::new();
        for (mine, theirs) in got.relocs.iter().zip(&other_relocs) {
            assert_eq!(
                (mine.0, mine.1, mine.2),
                (theirs.0, theirs.1, theirs.2),
                "{name}: relocation"
            );
            let to = *renamed.entry(theirs.3.as_str()).or_insert(mine.3.as_str());
            let back = *renamed_back
                .entry(mine.3.as_str())
                .or_insert(theirs.3.as_str());
            assert_eq!(
                (to, back),
                (mine.3.as_str(), theirs.3.as_str()),
                "{name}: the names are not renamed one for one"
            );
        }
        // And the names are this function's own, as often as it refers to them.
        assert_eq!(
            targets(&got.relocs),
            targets(&own_relocs),
            "{name}: the reused code refers to other symbols than this function does"
        );
    }
    from.len() + standing.len()
}

/// A `MergingModule<ObjectModule>` for `isa` with `options`.
fn merging_object(
    isa: &OwnedTargetIsa,
    options: ModuleMergeOptions,
) -> MergingModule<ObjectModule> {
    let builder = ObjectBuilder::new(
        isa.clone(),
        "compile_once",
        cranelift_module::default_libcall_names(),
    )
    .expect("object builder");
    MergingModule::new(ObjectModule::new(builder), options)
}

/// Defines `functions` through a `MergingModule<ObjectModule>` with `options`,
/// checking every define against fresh compiles; returns how many defines
/// reused a compile or compiled nothing.
fn checked_object(functions: &[Function], names: &[String], options: ModuleMergeOptions) -> usize {
    let isa = isa(true);
    let mut module = merging_object(&isa, options);
    declare_all(&mut module, functions, names);
    let defined = define_all(&mut module, functions);
    let (product, report) = module.finish_object().expect("finish");
    product.emit().expect("emit");
    check_defines(functions, names, &defined, &report, &isa)
}

/// Both settings of `compile_duplicates`.
fn both_settings() -> [ModuleMergeOptions; 2] {
    [
        ModuleMergeOptions::default(),
        ModuleMergeOptions::default().with_compile_duplicates(false),
    ]
}

/// The bench's duplicates are one function up to numbering, block order and
/// the numbering of their callee declarations, as gen 10k's: 2,000 functions
/// (400 exact duplicates, 400 near ones that must not share a compile).
#[test]
fn generated_duplicates_reuse_an_equal_compile() {
    let generated = generator::generate(&generator::GenConfig {
        functions: 2000,
        dup_rate: 0.2,
        near_rate: 0.2,
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
    for options in both_settings() {
        let reused = checked_object(&functions, &names, options);
        eprintln!("{reused} defines reused a compile or compiled nothing");
        // The check above only means something where the reuse path ran.
        assert!(reused > 0, "no define reused anything");
    }
}

#[test]
fn corpus_compile_once_is_an_equal_compile() {
    let test = "corpus_compile_once_is_an_equal_compile";
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
    for options in both_settings() {
        let mut reused_total = 0;
        for dir in &programs {
            let files = expand_inputs(std::slice::from_ref(dir)).expect("program files");
            let module = load(&files).expect("loads").functions;
            let (functions, names) = prepared(&module);
            let reused = checked_object(&functions, &names, options.clone());
            eprintln!(
                "{}: {} functions, {reused} defines reused a compile or compiled nothing",
                dir.display(),
                functions.len(),
            );
            reused_total += reused;
        }
        // The corpus has functions equal but for their callees (brotli has
        // dozens), and equal ones: the reuse path ran.
        assert!(reused_total > 0, "nothing was reused over the corpus");
    }
}

/// Declares `names` in `module` (the first `functions.len()` exported, the rest
/// imports with the signature of function 0).
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
    for options in both_settings() {
        let duplicates = options.compile_duplicates;
        let builder = JITBuilder::with_isa(isa.clone(), cranelift_module::default_libcall_names());
        let mut module = MergingModule::new(JITModule::new(builder), options);
        let (functions, names) = generated(&mut module);
        let defined = define_all(&mut module, &functions);
        // Each caller's call relocations name its own callees, in call order.
        for i in 0..CALLERS {
            let (a, c) = callees_of(i);
            if defined[CALLEES + i].code.is_none() {
                continue;
            }
            let targets: Vec<String> = defined[CALLEES + i]
                .relocs
                .iter()
                .map(|r| r.3.clone())
                .collect();
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
        check_defines(&functions, &names, &defined, &report, &isa);
        let caller_id = |i: usize| FuncId::from_u32((CALLEES + i) as u32);
        if duplicates {
            // One stencil for the eight callers, stored by its second define at
            // the latest: every caller from the third on reuses it.
            assert!(
                report.compiles_reused >= CALLERS - 2,
                "{:?}",
                report.compiled_from
            );
            assert!(report.not_compiled.is_empty());
        } else {
            // Callers 5, 6 and 7 are callers 0, 1 and 2, callees and all; the
            // others call other callees (compiled). Callers 1 and 2 repeat the
            // callers' key, so they are stored: 6 and 7 are not compiled; caller
            // 0, the first of its key, is stored only if the policy stores firsts.
            let twins: Vec<(FuncId, FuncId)> = (5..CALLERS)
                .map(|i| (caller_id(i), caller_id(i - 5)))
                .collect();
            assert!(
                report.not_compiled.iter().all(|pair| twins.contains(pair))
                    && twins[1..]
                        .iter()
                        .all(|pair| report.not_compiled.contains(pair)),
                "{:?}",
                report.not_compiled
            );
        }
        // Callers 0 and 5, 1 and 6, 2 and 7 are the same code calling the same
        // callees: merged.
        assert_eq!(report.merged(), 3, "{:?}", report.actions);
        for i in 0..CALLERS {
            let ptr = jit.get_finalized_function(caller_id(i));
            // SAFETY: every caller has the signature (i64) -> i64 of the host's
            // default calling convention (`make_signature`).
            let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(ptr) };
            for x in [0, 1, -3, 1000, i64::MAX] {
                assert_eq!(f(x), caller(i, x), "caller{i}({x})");
            }
        }
    }
}

/// Functions built by the same builder calls compile to the same code whatever
/// their callees: there compile-once changes no byte of the object.
#[test]
fn equal_bodies_with_other_callees_write_the_same_object_with_and_without() {
    let isa = isa(true);
    let object = |once: bool| {
        let options = ModuleMergeOptions::default().with_compile_once(once);
        let mut module = merging_object(&isa, options);
        let (functions, names) = generated(&mut module);
        let defined = define_all(&mut module, &functions);
        let (product, report) = module.finish_object().expect("finish");
        check_defines(&functions, &names, &defined, &report, &isa);
        (product.emit().expect("emit"), report.compiles_reused)
    };
    let (with, reused) = object(true);
    let (without, none) = object(false);
    assert!(reused >= CALLERS - 2 && none == 0, "{reused} {none}");
    assert!(with == without, "the object differs with compile-once");
}

/// rustc_codegen_cranelift asks every function to collect value labels
/// (`collect_debug_info`) and may give it none: such functions still share a
/// compile, which is then a fresh compile's with the (empty) label ranges.
#[test]
fn functions_collecting_no_value_labels_share_a_compile() {
    let isa = isa(true);
    let mut module = merging_object(&isa, ModuleMergeOptions::default());
    let (mut functions, names) = generated(&mut module);
    for func in &mut functions {
        func.dfg.collect_debug_info();
    }
    let defined = define_all(&mut module, &functions);
    let (product, report) = module.finish_object().expect("finish");
    product.emit().expect("emit");
    check_defines(&functions, &names, &defined, &report, &isa);
    assert!(report.compiles_reused > 0, "nothing reused");
}
