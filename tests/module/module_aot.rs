//! End to end through `MergingModule<ObjectModule>`: a module with duplicates is
//! compiled for the host, written as an object file, linked with the system `cc`
//! against a C `main`, and run. The merged program must print exactly what the
//! unmerged one prints, with a smaller `.text`, and the symbols must be what the plan
//! says (checked with the `object` crate and with `nm`).

#[path = "../common/mod.rs"]
mod common;
#[path = "../../examples/shared/native.rs"]
#[allow(dead_code)]
mod native;

use clif_merge::module::{MergingModule, ModuleMergeOptions};
use clif_merge::{MergeAction, MergeMode, MergeOptions};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_object::{ObjectBuilder, ObjectModule};
use object::{Object, ObjectSymbol};
use std::process::Command;

const MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern int64_t compute(int64_t);
extern int64_t exported_1(int64_t);
extern int64_t exported_2(int64_t);
extern int64_t (*fn_table[2])(int64_t);
int main(void) {
    printf("compute(5) = %lld\n", (long long)compute(5));
    printf("compute(9) = %lld\n", (long long)compute(9));
    printf("exported_1(3) = %lld, exported_2(3) = %lld\n",
           (long long)exported_1(3), (long long)exported_2(3));
    printf("table: %lld %lld\n", (long long)fn_table[0](4), (long long)fn_table[1](4));
    printf("exported addresses equal: %d\n", (void *)&exported_1 == (void *)&exported_2);
    printf("table addresses equal: %d\n", fn_table[0] == fn_table[1]);
    return (int)(compute(2) % 100);
}
"#;

/// Builds the module into an object file; `None` options means no merging.
fn build_object(options: ModuleMergeOptions) -> (Vec<u8>, clif_merge::module::MergeReport) {
    let mut flags = settings::builder();
    flags.set("is_pic", "true").expect("flag");
    flags.set("opt_level", "none").expect("flag");
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("host ISA")
        .finish(settings::Flags::new(flags))
        .expect("ISA");
    let builder = ObjectBuilder::new(isa, "merge_test", cranelift_module::default_libcall_names())
        .expect("object builder");
    let mut module = MergingModule::new(ObjectModule::new(builder), options);
    common::define_fixture(&mut module);
    let (product, report) = module.finish_object().expect("finish");
    (product.emit().expect("emit"), report)
}

fn work_dir(tag: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("clif-merge-aot-{tag}-"))
        .tempdir()
        .expect("temp dir")
}

fn symbol_address(object_bytes: &[u8], name: &str) -> Option<(u64, Option<object::SectionIndex>)> {
    let file = object::File::parse(object_bytes).expect("object parses");
    file.symbols()
        .find(|s| s.name() == Ok(name))
        .map(|s| (s.address(), s.section_index()))
}

fn options(enabled: bool, mode: MergeMode) -> ModuleMergeOptions {
    ModuleMergeOptions::default()
        .with_merge(MergeOptions::default().with_mode(mode))
        .with_enabled(enabled)
}

#[test]
fn merged_program_behaves_like_the_unmerged_one_and_is_smaller() {
    let (plain, _) = build_object(options(false, MergeMode::Safe));
    let (merged, report) = build_object(options(true, MergeMode::Safe));
    let plain_run = native::link_and_run(&plain, MAIN_C, "aot-safe-plain").expect("links and runs");
    let merged_run =
        native::link_and_run(&merged, MAIN_C, "aot-safe-merged").expect("links and runs");
    let (plain_out, plain_code) = (plain_run.stdout, plain_run.code);
    let (merged_out, merged_code) = (merged_run.stdout, merged_run.code);
    println!("{plain_out}");
    println!("merged: {:?}", report.actions);
    assert_eq!(merged_out, plain_out);
    assert_eq!(merged_code, plain_code);
    assert!(
        plain_out.contains("table addresses equal: 0"),
        "{plain_out}"
    );
    assert!(
        plain_out.contains("exported addresses equal: 0"),
        "{plain_out}"
    );
    let action = |name: &str| {
        report
            .actions
            .iter()
            .find(|(f, _, _)| f == name)
            .map(|(_, _, a)| *a)
    };
    assert_eq!(action("helper_b"), Some(MergeAction::Erase));
    assert_eq!(action("exported_2"), Some(MergeAction::Thunk));
    assert_eq!(action("addr_b"), Some(MergeAction::Thunk));
    assert_eq!(action("ping2"), Some(MergeAction::Erase));
    assert_eq!(action("pong2"), Some(MergeAction::Erase));
    assert_eq!(report.to_json()["merged"], 5);
    // Three erased duplicates (helper_b, ping2, pong2) had code and now have none.
    assert!(report.bytes_saved > 0);
    assert_eq!(report.to_json()["bytes_saved"], report.bytes_saved);
    // Erased functions are absent from the symbol table.
    for erased in ["helper_b", "ping2", "pong2"] {
        assert_eq!(
            symbol_address(&merged, erased),
            None,
            "{erased} still has a symbol"
        );
        assert!(symbol_address(&plain, erased).is_some());
    }
    // A thunk is one jump (x86_64 `jmp rel32`, 5 bytes).
    if cfg!(target_arch = "x86_64") {
        let file = object::File::parse(&*merged).expect("object parses");
        let thunk = file
            .symbols()
            .find(|s| s.name() == Ok("exported_2"))
            .expect("exported_2 symbol");
        assert_eq!(thunk.size(), 5, "thunk is not a single jmp");
    }
    let (before, after) = (
        native::text_bytes(&plain).expect("object"),
        native::text_bytes(&merged).expect("object"),
    );
    println!(".text: {before} bytes unmerged, {after} bytes merged");
    // The erased duplicates' code is gone, and a thunk is smaller than the body it
    // replaces.
    assert!(after < before, ".text did not shrink: {before} -> {after}");
    // Snapshot of the x86_64 sizes (opt_level none): changes when the fixture, the
    // plan, the thunks or Cranelift's x86_64 backend changes; update deliberately.
    if cfg!(target_arch = "x86_64") {
        assert_eq!(
            (report.bytes_saved, before, after),
            (130, 428, 298),
            "bytes saved, .text unmerged, .text merged"
        );
    }
}

#[test]
fn mode_all_makes_exported_duplicates_real_aliases() {
    let dir = work_dir("all");
    let (plain, _) = build_object(options(false, MergeMode::All));
    let (merged, report) = build_object(options(true, MergeMode::All));
    assert!(
        report
            .actions
            .iter()
            .any(|(f, k, a)| f == "exported_2" && k == "exported_1" && *a == MergeAction::Alias),
        "{:?}",
        report.actions
    );
    // The alias is a second symbol on the kept code: same section, same address.
    let kept = symbol_address(&merged, "exported_1").expect("exported_1");
    let alias = symbol_address(&merged, "exported_2").expect("exported_2");
    assert_eq!(kept, alias);
    assert!(kept.1.is_some(), "alias must be defined, not undefined");
    // `nm` agrees.
    let obj = dir.path().join("module.o");
    std::fs::write(&obj, &merged).expect("write");
    let nm = Command::new("nm").arg(&obj).output().expect("nm");
    let nm = String::from_utf8_lossy(&nm.stdout);
    let addr = |name: &str| {
        nm.lines()
            .find(|l| l.ends_with(&format!(" {name}")))
            .map(|l| l.split_whitespace().take(2).collect::<Vec<_>>())
    };
    let (a, b) = (addr("exported_1"), addr("exported_2"));
    assert_eq!(a, b, "nm:\n{nm}");
    assert_eq!(a.as_ref().map(|v| v[1]), Some("T"), "nm:\n{nm}");
    // In mode all the program may see equal addresses; everything else is the same.
    let plain_run = native::link_and_run(&plain, MAIN_C, "aot-all-plain").expect("links and runs");
    let merged_run =
        native::link_and_run(&merged, MAIN_C, "aot-all-merged").expect("links and runs");
    let (plain_out, plain_code) = (plain_run.stdout, plain_run.code);
    let (merged_out, merged_code) = (merged_run.stdout, merged_run.code);
    let strip = |s: &str| {
        s.lines()
            .filter(|l| !l.contains("addresses equal"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(strip(&merged_out), strip(&plain_out));
    assert_eq!(merged_code, plain_code);
}
