//! Separate compilation in `MergingModule` compiling at define: summaries written
//! from machine code carry their source (target and settings), are never planned
//! together with IR summaries or with machine code of other settings, and
//! decisions planned for a module are refused at finish, never applied, when the
//! module changed since it was summarized: a function with a decision (`Stale`) or
//! one without, such as a representative other modules rely on
//! (`NotPlannedModule`).
//!
//! The tool dumps such summaries and refuses to plan them with IR summaries, and a
//! call redirected to another object's exported function links into a shared
//! library and runs as before.
//!
//! Module `a` exports `fa`; module `b` exports `fb` (equal to `fa`: the plan makes
//! it a thunk to `a`'s) and `gb` (equal to nothing).

#![allow(clippy::result_large_err)]

#[path = "../support/define.rs"]
mod define_support;
#[path = "../support/process.rs"]
mod process;

use clif_merge::module::{CompileMode, MergingModule, ModuleMergeOptions};
use clif_merge::separate::{
    DecisionAction, DecisionError, ModuleDecisions, PlanError, Summary, SummarySource, plan_program,
};
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder};
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{Linkage, Module, ModuleError};
use cranelift_object::{ObjectBuilder, ObjectModule};
use define_support::{call_unary, define_unary};
use std::process::Command;

/// The host's ISA, position-independent, optimizing at `opt_level`.
fn isa(opt_level: &str) -> OwnedTargetIsa {
    let mut flags = settings::builder();
    flags.set("is_pic", "true").expect("is_pic");
    flags.set("opt_level", opt_level).expect("opt_level");
    cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("a Cranelift backend for the host")
        .finish(settings::Flags::new(flags))
        .expect("host ISA")
}

/// Module `name` (`a` or `b`) compiled as `compile` says for `opt_level`, every
/// function `x * k + 1`, with `k` given per function: `a` defines `fa`, `b`
/// defines `fb` and `gb`.
fn module(
    name: &str,
    ks: &[(&str, i64)],
    compile: CompileMode,
    opt_level: &str,
) -> MergingModule<ObjectModule> {
    let exported: Vec<_> = ks.iter().map(|&(f, k)| (f, Linkage::Export, k)).collect();
    module_with(name, &exported, compile, opt_level)
}

/// [`module`] with each function's linkage given.
fn module_with(
    name: &str,
    ks: &[(&str, Linkage, i64)],
    compile: CompileMode,
    opt_level: &str,
) -> MergingModule<ObjectModule> {
    let builder = ObjectBuilder::new(
        isa(opt_level),
        name,
        cranelift_module::default_libcall_names(),
    )
    .expect("object builder");
    let options = ModuleMergeOptions::default().with_compile(compile);
    let mut m = MergingModule::new(ObjectModule::new(builder), options);
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    for &(function, linkage, k) in ks {
        let id = m
            .declare_function(function, linkage, &sig)
            .expect("declare");
        define_unary(&mut m, id, &sig, |_, b, x| {
            let y = b.ins().imul_imm_s(x, k);
            b.ins().iadd_imm_s(y, 1)
        });
    }
    m
}

const A: &[(&str, i64)] = &[("fa", 7)];
const B: &[(&str, i64)] = &[("fb", 7), ("gb", 5)];

/// Module `name` of the program, compiled at define with `opt_level` speed.
fn at_define(name: &str, ks: &[(&str, i64)]) -> MergingModule<ObjectModule> {
    module(name, ks, CompileMode::AtDefine, "speed")
}

/// The decisions of modules `a` and `b` as summarized from their machine code.
fn decisions() -> (ModuleDecisions, ModuleDecisions) {
    let summaries = [
        at_define("a", A).summarize("a").expect("summary"),
        at_define("b", B).summarize("b").expect("summary"),
    ];
    let plan = plan_program(&summaries).expect("plan");
    let mut decisions = plan.decisions.into_iter();
    let a = decisions.next().expect("a's decisions");
    let b = decisions.next().expect("b's decisions");
    (a, b)
}

/// What finishing `module` with `decisions` gives: the decisions applied (as the
/// report lists them), or the decision error.
fn finish(
    module: MergingModule<ObjectModule>,
    decisions: ModuleDecisions,
) -> Result<Vec<(String, String, DecisionAction)>, DecisionError> {
    match module.with_decisions(decisions).finish_object() {
        Ok((_, report)) => Ok(report.cross_module),
        Err(ModuleError::Backend(e)) => match e.downcast_ref::<DecisionError>() {
            Some(e) => Err(e.clone()),
            None => panic!("not a decision error: {e}"),
        },
        Err(e) => panic!("not a decision error: {e}"),
    }
}

#[test]
fn machine_code_summaries_name_their_source_and_survive_the_file_format() {
    let summary = at_define("b", B).summarize("b").expect("summary");
    let SummarySource::MachineCode { target, .. } = &summary.source else {
        panic!("a summary of machine code says {:?}", summary.source);
    };
    assert_eq!(*target, target_lexicon::Triple::host().to_string());
    assert_eq!(
        Summary::from_bytes(&summary.to_bytes()),
        Ok(summary.clone())
    );
    let names: Vec<&str> = summary.functions.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["fb", "gb"]);
    let ir = module("b", B, CompileMode::AtFinish, "speed")
        .summarize("b")
        .expect("summary");
    assert_eq!(ir.source, SummarySource::Ir);
    assert_ne!(ir.source.id(), summary.source.id());
}

#[test]
fn decisions_from_machine_code_apply_to_the_modules_as_summarized() {
    let (a, b) = decisions();
    assert!(a.decisions.is_empty(), "{a:?}");
    assert_eq!(b.decisions.len(), 1, "{b:?}");
    assert_eq!(
        (b.decisions[0].function.as_str(), b.decisions[0].action),
        ("fb", DecisionAction::Thunk)
    );
    assert_eq!(finish(at_define("a", A), a), Ok(Vec::new()));
    assert_eq!(
        finish(at_define("b", B), b),
        Ok(vec![("fb".into(), "a::fa".into(), DecisionAction::Thunk)])
    );
}

#[test]
fn a_function_changed_since_it_was_summarized_is_refused_at_finish() {
    let (a, b) = decisions();
    // `fb`, which has a decision, changed.
    let changed_fb = at_define("b", &[("fb", 8), ("gb", 5)]);
    assert_eq!(
        finish(changed_fb, b.clone()),
        Err(DecisionError::Stale("fb".into()))
    );
    // `gb`, which has none, changed: the module is not the one planned.
    let changed_gb = at_define("b", &[("fb", 7), ("gb", 6)]);
    assert_eq!(
        finish(changed_gb, b),
        Err(DecisionError::NotPlannedModule("b".into()))
    );
    // `fa`, the representative `b`'s thunk relies on, changed.
    let changed_fa = at_define("a", &[("fa", 9)]);
    assert_eq!(
        finish(changed_fa, a),
        Err(DecisionError::NotPlannedModule("a".into()))
    );
}

#[test]
fn summaries_of_different_sources_are_never_planned_together() {
    let machine_code = at_define("b", B).summarize("b").expect("summary");
    let ir = module("a", A, CompileMode::AtFinish, "speed")
        .summarize("a")
        .expect("summary");
    let Err(PlanError::MixedSources { modules, sources }) =
        plan_program(&[ir.clone(), machine_code.clone()])
    else {
        panic!("IR and machine code planned together");
    };
    assert_eq!(modules, ("a".to_string(), "b".to_string()));
    assert!(sources.0.starts_with("IR"), "{sources:?}");
    assert!(sources.1.starts_with("machine code for"), "{sources:?}");
    // Machine code of other settings means other bytes.
    let unoptimized = module("a", A, CompileMode::AtDefine, "none")
        .summarize("a")
        .expect("summary");
    assert!(matches!(
        plan_program(&[unoptimized, machine_code.clone()]),
        Err(PlanError::MixedSources { .. })
    ));
    // Decisions planned from IR are refused by the machine code's module.
    let ir_b = module("b", B, CompileMode::AtFinish, "speed")
        .summarize("b")
        .expect("summary");
    let plan = plan_program(&[ir, ir_b]).expect("plan of IR summaries");
    let b = plan.decisions.into_iter().nth(1).expect("b's decisions");
    assert!(
        matches!(
            finish(at_define("b", B), b),
            Err(DecisionError::NotPlannedModule(_) | DecisionError::Stale(_))
        ),
        "decisions planned from IR applied to machine code"
    );
}

/// Module `a` exports `fa`; module `b` has a local `lb` equal to it and exports
/// `cb`, which calls `lb`. The plan removes `lb` and `b`'s call, compiled as a
/// call of a function of its own object, goes to `a`'s exported `fa`: linked into
/// a shared library (where the linker must route a call of an exported symbol
/// through the PLT; on ELF cranelift-object writes such calls as `R_X86_64_PLT32`
/// anyway), the program must still run as before. Returns the two objects, merged
/// or not.
fn shared_library_objects(merge: bool) -> Vec<Vec<u8>> {
    let mut a = at_define("a", A);
    let mut b = at_define("b", &[]);
    let mut sig = b.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    let lb = b
        .declare_function("lb", Linkage::Local, &sig)
        .expect("declare");
    define_unary(&mut b, lb, &sig, |_, builder, x| {
        let y = builder.ins().imul_imm_s(x, 7);
        builder.ins().iadd_imm_s(y, 1)
    });
    let cb = b
        .declare_function("cb", Linkage::Export, &sig)
        .expect("declare");
    define_unary(&mut b, cb, &sig, |m, builder, x| {
        let y = call_unary(m, builder, lb, x);
        builder.ins().iadd_imm_s(y, 2)
    });
    if merge {
        let summaries = [
            a.summarize("a").expect("summary"),
            b.summarize("b").expect("summary"),
        ];
        let plan = plan_program(&summaries).expect("plan");
        let mut decisions = plan.decisions.into_iter();
        let (da, db) = (decisions.next().expect("a"), decisions.next().expect("b"));
        assert_eq!(
            db.decisions
                .iter()
                .map(|d| (d.function.as_str(), d.action, d.to.as_str()))
                .collect::<Vec<_>>(),
            [("lb", DecisionAction::Redirect, "fa")]
        );
        a = a.with_decisions(da);
        b = b.with_decisions(db);
    }
    [a, b]
        .into_iter()
        .map(|m| {
            let (product, _) = m.finish_object().expect("finish");
            product.emit().expect("emit")
        })
        .collect()
}

/// Links `objects` into a shared library, a C `main` against it, runs it, and
/// returns its output.
fn run_as_shared_library(objects: &[Vec<u8>], tag: &str) -> String {
    let dir = std::env::temp_dir().join(format!("clif-merge-shared-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let mut link = Command::new("cc");
    link.arg("-shared").arg("-o").arg(dir.join("libab.so"));
    for (i, object) in objects.iter().enumerate() {
        let path = dir.join(format!("m{i}.o"));
        std::fs::write(&path, object).expect("write object");
        link.arg(path);
    }
    let linked = link.output().expect("the system C compiler `cc`");
    assert!(
        linked.status.success(),
        "{tag}: linking the shared library failed:\n{}",
        String::from_utf8_lossy(&linked.stderr)
    );
    let main = dir.join("main.c");
    std::fs::write(
        &main,
        "#include <stdio.h>\n#include <stdint.h>\nextern int64_t cb(int64_t), fa(int64_t);\n\
         int main(void) { printf(\"%lld %lld\\n\", (long long)cb(5), (long long)fa(5)); return 0; }\n",
    )
    .expect("write main");
    let program = dir.join("program");
    let built = Command::new("cc")
        .arg(&main)
        .arg(format!("-L{}", dir.display()))
        .arg("-lab")
        .arg(format!("-Wl,-rpath,{}", dir.display()))
        .arg("-o")
        .arg(&program)
        .output()
        .expect("cc");
    assert!(
        built.status.success(),
        "{tag}: linking main failed:\n{}",
        String::from_utf8_lossy(&built.stderr)
    );
    let run = Command::new(&program).output().expect("run");
    assert!(run.status.success(), "{tag}: the program failed");
    let _ = std::fs::remove_dir_all(&dir);
    String::from_utf8_lossy(&run.stdout).into_owned()
}

#[test]
fn a_call_redirected_to_another_objects_export_links_into_a_shared_library() {
    if target_lexicon::Triple::host().binary_format != target_lexicon::BinaryFormat::Elf {
        panic!("this test links an ELF shared library");
    }
    let plain = run_as_shared_library(&shared_library_objects(false), "plain");
    let merged = run_as_shared_library(&shared_library_objects(true), "merged");
    assert_eq!(plain, "38 36\n");
    assert_eq!(merged, plain);
}

/// The tool reads summaries of machine code that a compiler wrote: `dump` says
/// their source, and `plan` refuses one planned with a summary of IR (exit 2).
#[test]
fn the_tool_dumps_machine_code_summaries_and_refuses_to_mix_them() {
    let dir = process::TempDir::new("mixed-sources");
    let machine_code = dir.write(
        "b.sum",
        at_define("b", B)
            .summarize("b")
            .expect("summary")
            .to_bytes(),
    );
    let ir = dir.write(
        "a.sum",
        module("a", A, CompileMode::AtFinish, "speed")
            .summarize("a")
            .expect("summary")
            .to_bytes(),
    );
    let dump = process::ok(process::clif_merge(["dump".into(), machine_code.clone()]));
    assert!(
        dump.stdout.contains("summarized from machine code for"),
        "{}",
        dump.stdout
    );
    let planned = process::clif_merge([
        "plan".into(),
        ir,
        machine_code,
        "--out-dir".into(),
        dir.join("dec"),
    ]);
    process::bad_input(&planned);
    assert!(
        planned.stderr.contains("was summarized from IR")
            && planned.stderr.contains("from machine code for"),
        "{}",
        planned.stderr
    );
}

/// Module `b` has a local `h` that its own merge erases (it equals `fb`), and
/// module `a` exports an `h` equal to both: the plan must not make `b`'s `fb` a
/// thunk to `a`'s `h`, since `h` in `b` is `b`'s own (erased) local. Before the
/// summaries listed every local name, the plan did, and `b`'s finish refused the
/// decisions (`Shadowed("h")`) in both compile modes.
#[test]
fn a_local_name_erased_by_its_own_merge_is_not_given_to_another_modules_representative() {
    let a: &[(&str, Linkage, i64)] = &[("h", Linkage::Export, 7)];
    let b: &[(&str, Linkage, i64)] = &[("fb", Linkage::Export, 7), ("h", Linkage::Local, 7)];
    for compile in [CompileMode::AtDefine, CompileMode::AtFinish] {
        let unit = |name: &str, ks| module_with(name, ks, compile, "speed");
        let summaries = [
            unit("a", a).summarize("a").expect("summary"),
            unit("b", b).summarize("b").expect("summary"),
        ];
        let plan = plan_program(&summaries).expect("plan");
        let shadowed: Vec<_> = plan
            .shadowed
            .iter()
            .map(|(member, rep)| {
                (
                    format!("{}:{}", member.module, member.name),
                    format!("{}:{}", rep.module, rep.name),
                )
            })
            .collect();
        assert_eq!(
            shadowed,
            [("b:fb".to_string(), "a:h".to_string())],
            "{compile:?}"
        );
        let mut decisions = plan.decisions.into_iter();
        let (da, db) = (decisions.next().expect("a"), decisions.next().expect("b"));
        assert_eq!(finish(unit("a", a), da), Ok(Vec::new()), "{compile:?}");
        assert_eq!(finish(unit("b", b), db), Ok(Vec::new()), "{compile:?}");
    }
}
