//! The translation validator must catch a wrong merge, pass right ones, and say
//! honestly what it could not run.

use clif_merge::apply::apply;
use clif_merge::plan::{MergeAction, MergeDecision, MergePlan};
use clif_merge::validate::{ValidationReport, validate};
use clif_merge::{FuncIndex, FunctionSet, MergeOptions, merge_functions};
use cranelift_codegen::entity::EntityRef;
use cranelift_module::Linkage;
use std::process::Command;

fn module(text: &str) -> FunctionSet {
    let mut set = FunctionSet::new();
    for f in cranelift_reader::parse_functions(text).expect("parses") {
        set.push(f, Linkage::Local).expect("unique");
    }
    set
}

const NEAR_TWINS: &str = "
function %f(i32, i32) -> i32 {
block0(v0: i32, v1: i32):
    v2 = iadd v0, v1
    return v2
}
function %g(i32, i32) -> i32 {
block0(v0: i32, v1: i32):
    v2 = isub v0, v1
    return v2
}
function %caller(i32) -> i32 {
    fn0 = %g(i32, i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0, v0)
    return v1
}
";

/// Validates a plan the comparator would never make: %g (isub) merged into %f
/// (iadd) with `action`.
fn validate_wrong_merge(action: MergeAction) -> ValidationReport {
    let set = module(NEAR_TWINS);
    let plan = MergePlan {
        classes: vec![vec![FuncIndex::new(0), FuncIndex::new(1)]],
        decisions: vec![MergeDecision {
            function: FuncIndex::new(1),
            into: FuncIndex::new(0),
            action,
        }],
        unmerged_preemptible_classes: 0,
    };
    let output = apply(&set, &plan);
    validate(&set, &plan, &output)
}

#[test]
fn a_wrong_merge_is_caught_with_its_input() {
    let report = validate_wrong_merge(MergeAction::Erase);
    assert_eq!(report.mismatches.len(), 1, "{}", report.summary());
    let m = &report.mismatches[0];
    assert_eq!(m.function, FuncIndex::new(1));
    assert_ne!(m.original, m.merged);
    assert!(
        report.summary().contains("1 mismatches"),
        "{}",
        report.summary()
    );
}

#[test]
fn a_wrong_thunk_is_caught() {
    let report = validate_wrong_merge(MergeAction::Thunk);
    assert_eq!(report.mismatches.len(), 1, "{}", report.summary());
}

#[test]
fn right_merges_validate_and_unsupported_ones_are_not_counted_as_passed() {
    let set = module(
        "
function %a(i64) -> i64 {
block0(v0: i64):
    v1 = iconst.i64 3
    v2 = imul v0, v1
    return v2
}
function %b(i64) -> i64 {
block0(v5: i64):
    v6 = iconst.i64 3
    v7 = imul v5, v6
    return v7
}
function %load_a(i64) -> i32 {
block0(v0: i64):
    v1 = load.i32 v0
    return v1
}
function %load_b(i64) -> i32 {
block0(v0: i64):
    v1 = load.i32 v0
    return v1
}
",
    );
    let outcome = merge_functions(&set, &MergeOptions::default());
    assert_eq!(outcome.plan.decisions.len(), 2);
    let report = validate(&set, &outcome.plan, &outcome.output);
    assert_eq!(report.validated, 1, "{}", report.summary());
    assert_eq!(report.unvalidated.len(), 1, "{}", report.summary());
    assert!(
        report.unvalidated[0].1.contains("memory"),
        "{:?}",
        report.unvalidated
    );
    assert!(report.mismatches.is_empty());
    // Edge values (5 per i64) plus 64 random inputs all ran.
    assert!(report.runs >= 64, "{}", report.runs);
}

#[test]
fn cli_validate_prints_the_summary_and_extends_the_json() {
    let dir = std::env::temp_dir().join(format!("clif-merge-validate-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("twins.clif");
    std::fs::write(
        &file,
        "
function %f(i32) -> i32 {
block0(v0: i32):
    v1 = popcnt v0
    return v1
}
function %g(i32) -> i32 {
block0(v0: i32):
    v1 = popcnt v0
    return v1
}
",
    )
    .expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_clif-merge"))
        .args(["--validate", "--report", "json"])
        .arg(&file)
        .output()
        .expect("run clif-merge");
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(out.status.code(), Some(0));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("validated: 1 pairs, 0 unvalidated, 0 mismatches"),
        "{stderr}"
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(json["validation"]["validated"], 1);
    assert_eq!(json["validation"]["mismatches"], 0);
    assert_eq!(json["merged"], 1);
}
