//! The translation validator must catch a wrong merge, pass right ones, and say
//! honestly what it could not run.

#[path = "../support/verdicts.rs"]
mod verdicts;
use verdicts::verdicts;

use clif_merge::Linkage;
use clif_merge::similar::{SimilarOptions, SimilarOutcome, SimilarPass};
use clif_merge::testing::apply;
use clif_merge::validate::{
    NoProgress, Progress, SimilarValidationError, ValidationOptions, ValidationReport, validate,
    validate_program, validate_similar, validate_similar_with_progress, validate_with_progress,
};
use clif_merge::{FuncIndex, FunctionSet, MergeOptions, merge_functions};
use clif_merge::{MergeAction, MergeDecision, MergePlan};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::immediates::Imm64;
use cranelift_codegen::ir::{InstructionData, Opcode};
use std::process::Command;
use std::sync::Mutex;

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
    validate_forced_merge(NEAR_TWINS, action)
}

/// Validates the merge of the second function of `text` into the first, whatever
/// the comparator would say.
fn validate_forced_merge(text: &str, action: MergeAction) -> ValidationReport {
    let set = module(text);
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
    validate(&set, &plan, &output).expect("the validator crashed")
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
function %fp_a() -> i64 {
block0:
    v0 = get_frame_pointer.i64
    return v0
}
function %fp_b() -> i64 {
block0:
    v0 = get_frame_pointer.i64
    return v0
}
",
    );
    let outcome = merge_functions(&set, &MergeOptions::default());
    assert_eq!(outcome.plan.decisions.len(), 3);
    let report = validate(&set, &outcome.plan, &outcome.output).expect("the validator crashed");
    // Loads through a pointer run in the sandbox's memory.
    assert_eq!(report.validated, 2, "{}", report.summary());
    assert_eq!(report.unvalidated.len(), 1, "{}", report.summary());
    assert!(
        report.unvalidated[0]
            .1
            .to_string()
            .contains("machine state"),
        "{:?}",
        report.unvalidated
    );
    assert!(report.mismatches.is_empty());
    // Each validated pair (%load_b, %b) takes one i64: its 5 edge values plus
    // `RANDOM_INPUTS` (64) random ones, every one conclusive: 2 * (5 + 64) runs.
    assert_eq!(
        report.runs,
        2 * (5 + clif_merge::validate::RANDOM_INPUTS),
        "runs"
    );
}

#[test]
fn cli_validate_prints_the_summary_and_extends_the_json() {
    let dir = tempfile::Builder::new()
        .prefix("clif-merge-validate-")
        .tempdir()
        .expect("temp dir");
    let file = dir.path().join("twins.clif");
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
    drop(dir);
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

/// Pairs of functions that agree on everything the interpreter's own state could
/// run (nothing: they all go through pointers, symbols or calls leaving the module)
/// and differ in what the sandbox makes observable.
const SANDBOX_TWINS: [(&str, &str); 8] = [
    (
        "load offset",
        "
function %f(i64) -> i32 {
block0(v0: i64):
    v1 = load.i32 v0
    return v1
}
function %g(i64) -> i32 {
block0(v0: i64):
    v1 = load.i32 v0+4
    return v1
}",
    ),
    (
        "negative load offset (sign-extended, not zero-extended)",
        "
function %f(i64) -> i32 {
block0(v0: i64):
    v1 = uload16.i32 v0-4
    return v1
}
function %g(i64) -> i32 {
block0(v0: i64):
    v1 = iconst.i64 0xffff_fffc
    v2 = iadd v0, v1
    v3 = uload16.i32 v2
    return v3
}",
    ),
    (
        "negative store offset (sign-extended, not zero-extended)",
        "
function %f(i64, i32) {
block0(v0: i64, v1: i32):
    istore8 v1, v0-8
    return
}
function %g(i64, i32) {
block0(v0: i64, v1: i32):
    v2 = iconst.i64 0xffff_fff8
    v3 = iadd v0, v2
    istore8 v1, v3
    return
}",
    ),
    (
        "store address (memory is part of the result)",
        "
function %f(i64, i32) {
block0(v0: i64, v1: i32):
    store v1, v0
    return
}
function %g(i64, i32) {
block0(v0: i64, v1: i32):
    store v1, v0+8
    return
}",
    ),
    (
        "argument of a call leaving the module",
        "
function %f(i32) {
    fn0 = %ext(i32)
block0(v0: i32):
    call fn0(v0)
    return
}
function %g(i32) {
    fn0 = %ext(i32)
block0(v0: i32):
    v1 = iconst.i32 1
    v2 = iadd v0, v1
    call fn0(v2)
    return
}",
    ),
    (
        "callee outside the module",
        "
function %f(i32) -> i32 {
    fn0 = %ext1(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    return v1
}
function %g(i32) -> i32 {
    fn0 = %ext2(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    return v1
}",
    ),
    (
        "indirect call through a different table slot",
        "
function %f(i64, i32) -> i32 {
    sig0 = (i32) -> i32
block0(v0: i64, v1: i32):
    v2 = load.i64 v0+16
    v3 = call_indirect sig0, v2(v1)
    return v3
}
function %g(i64, i32) -> i32 {
    sig0 = (i32) -> i32
block0(v0: i64, v1: i32):
    v2 = load.i64 v0+24
    v3 = call_indirect sig0, v2(v1)
    return v3
}",
    ),
    (
        "symbol",
        "
function %f() -> i64 {
    gv0 = symbol colocated %table_a
block0:
    v0 = symbol_value.i64 gv0
    v1 = load.i64 v0+8
    return v1
}
function %g() -> i64 {
    gv0 = symbol colocated %table_b
block0:
    v0 = symbol_value.i64 gv0
    v1 = load.i64 v0+8
    return v1
}",
    ),
];

#[test]
fn the_sandbox_catches_wrong_merges_through_memory_calls_and_symbols() {
    for (what, text) in SANDBOX_TWINS {
        for action in [MergeAction::Erase, MergeAction::Thunk] {
            let report = validate_forced_merge(text, action);
            assert_eq!(
                report.mismatches.len(),
                1,
                "{what} ({action:?}): {}",
                report.summary()
            );
        }
    }
}

#[test]
fn the_sandbox_validates_right_merges_through_memory_calls_and_symbols() {
    for (what, text) in SANDBOX_TWINS {
        // Each function of a pair against an exact copy of itself.
        for half in text.split("\nfunction ").skip(1) {
            let copy = half.replacen("%f(", "%h(", 1).replacen("%g(", "%h(", 1);
            let pair = format!("\nfunction {half}\nfunction {copy}");
            let report = validate_forced_merge(&pair, MergeAction::Erase);
            assert_eq!(report.validated, 1, "{what}: {}", report.summary());
            assert!(report.mismatches.is_empty(), "{what}: {}", report.summary());
        }
    }
}

/// A 4 GB stack slot is not allocated by the validator: the pair is unvalidated.
#[test]
fn a_huge_stack_frame_is_not_allocated() {
    let report = validate_forced_merge(
        "
function %f(i32) -> i32 {
    ss0 = explicit_slot 4000000000
block0(v0: i32):
    v1 = stack_addr.i64 ss0
    store v0, v1
    v2 = load.i32 v1
    return v2
}
function %g(i32) -> i32 {
    ss0 = explicit_slot 4000000000
block0(v0: i32):
    v1 = stack_addr.i64 ss0
    store v0, v1
    v2 = load.i32 v1
    return v2
}",
        MergeAction::Erase,
    );
    assert_eq!(report.validated, 0, "{}", report.summary());
    assert_eq!(report.unvalidated.len(), 1, "{}", report.summary());
    assert!(report.mismatches.is_empty());
}

/// wasmtime's call of an imported function (`imported_callee_differs.clif` in
/// `filetests/similar`), with the callee's context and code pointer at negative
/// offsets of `vmctx`: three functions that differ only in those offsets.
fn callees_at_negative_vmctx_offsets() -> String {
    [("f", -16, -32), ("g", -48, -64), ("h", -80, -96)]
        .iter()
        .map(|(name, context, code)| {
            format!(
                "
function %{name}(i64 vmctx, i64, i32, i32) -> i32 tail {{
    sig0 = (i64 vmctx, i64, i32, i32) -> i32 tail
block0(v0: i64, v1: i64, v2: i32, v3: i32):
    v4 = iconst.i32 17
    v5 = imul v2, v4
    v6 = iadd v5, v3
    v7 = load.i64 notrap aligned readonly can_move v0{context}
    v8 = load.i64 notrap aligned readonly can_move v0{code}
    v9 = call_indirect sig0, v8(v7, v0, v6, v3)
    v10 = bxor v9, v2
    v11 = ishl v10, v3
    v12 = isub v11, v5
    v13 = band v12, v6
    v14 = bor v13, v9
    v15 = imul v14, v14
    v16 = iadd v15, v10
    v17 = bxor v16, v11
    v18 = imul v17, v12
    v19 = iadd v18, v13
    v20 = rotl v19, v3
    v21 = bxor v20, v14
    return v21
}}"
            )
        })
        .collect()
}

/// The similar merge of `callees_at_negative_vmctx_offsets`, which must make the
/// three functions one group whose entry points pass the offsets.
fn similar_merge_of_negative_vmctx_callees() -> SimilarPass {
    let set = module(&callees_at_negative_vmctx_offsets());
    let outcome = merge_functions(&set, &MergeOptions::default());
    let similar = SimilarPass::after(
        &set,
        &outcome,
        &SimilarOptions::default(),
        clif_merge::testing::host_isa().as_deref(),
    );
    assert_eq!(similar.outcome().groups.len(), 1, "one group");
    assert_eq!(
        similar.outcome().groups[0].members.len(),
        3,
        "three members"
    );
    let entry = similar
        .entry_point(similar.outcome().groups[0].members[1])
        .expect("%g is an entry point");
    let text = entry.display().to_string();
    assert!(text.contains("iconst.i64 -48"), "{text}");
    assert!(text.contains("iconst.i64 -64"), "{text}");
    similar
}

/// A load at `v0-16` reads 16 bytes below `v0`, as on the hardware: the merged
/// body's `iadd v0, -16` reads the same bytes, so the right merge validates.
#[test]
fn callee_loads_at_negative_vmctx_offsets_validate() {
    let similar = similar_merge_of_negative_vmctx_callees();
    let report =
        validate_similar(similar.module(), similar.outcome()).expect("the validator crashed");
    assert_eq!(report.validated, 3, "{}", report.summary());
    assert!(report.unvalidated.is_empty(), "{}", report.summary());
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);

    let dir = tempfile::Builder::new()
        .prefix("clif-merge-validate-")
        .tempdir()
        .expect("temp dir");
    let file = dir.path().join("negative_vmctx.clif");
    std::fs::write(&file, callees_at_negative_vmctx_offsets()).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_clif-merge"))
        .args(["--similar", "--validate"])
        .arg(&file)
        .output()
        .expect("run clif-merge");
    drop(dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("similar: validated: 3 pairs, 0 unvalidated, 0 mismatches"),
        "{stderr}"
    );
}

/// An outcome that is not a similar merge of the module is refused, not run: an
/// entry point left without its group calls a merged body the validation may not
/// have, and a member without an entry point would be checked against itself.
/// Whole groups left out, with their merged bodies and entry points, are a merge.
#[test]
fn outcomes_that_are_not_a_merge_are_refused() {
    let similar = similar_merge_of_negative_vmctx_callees();
    let members = similar.outcome().groups[0].members.clone();
    let refusal = |outcome: &SimilarOutcome| match validate_similar(similar.module(), outcome) {
        Err(SimilarValidationError::Inconsistent(why)) => why.to_string(),
        other => panic!("not refused: {other:?}"),
    };

    let mut without_group = similar.outcome().clone();
    without_group.groups.clear();
    without_group.merged_bodies.clear();
    let why = refusal(&without_group);
    assert!(
        why.ends_with("has an entry point but is a member of no group"),
        "{why}"
    );
    without_group.entry_points.retain(|_| false);
    let report = validate_similar(similar.module(), &without_group).expect("a merge");
    assert_eq!(report.validated, 0, "{}", report.summary());

    let mut without_body = similar.outcome().clone();
    without_body.merged_bodies.clear();
    assert_eq!(refusal(&without_body), "1 groups but 0 merged bodies");

    let mut without_entry = similar.outcome().clone();
    without_entry.entry_points.retain(|f| f != members[1]);
    let name = &similar.module().get(members[1]).func.name;
    assert_eq!(
        refusal(&without_entry),
        format!("member {name} has no entry point")
    );

    let mut twice = similar.outcome().clone();
    twice.groups[0].members.push(members[0]);
    assert!(refusal(&twice).ends_with("is a member of two groups"));
}

/// Entry points that pass their offsets zero-extended (`-48` as `0xffff_ffd0`, what
/// a merge that forgot the sign would emit) read 4 GiB away from the originals'
/// loads: every member is a mismatch. (An interpreter that zero-extends the
/// originals' offsets too would see them agree.)
#[test]
fn callee_offsets_passed_zero_extended_are_caught() {
    let similar = similar_merge_of_negative_vmctx_callees();
    let mut outcome = similar.outcome().clone();
    let members = outcome.groups[0].members.clone();
    for &member in &members {
        let entry = outcome
            .entry_points
            .get_mut(member)
            .expect("every member is an entry point");
        let insts: Vec<_> = entry
            .layout
            .blocks()
            .flat_map(|block| entry.layout.block_insts(block))
            .collect();
        let mut planted = 0;
        for inst in insts {
            if let InstructionData::UnaryImm {
                opcode: Opcode::Iconst,
                imm,
            } = &mut entry.dfg.insts[inst]
                && imm.bits() < 0
            {
                *imm = Imm64::new(i64::from(imm.bits() as u32));
                planted += 1;
            }
        }
        assert_eq!(planted, 2, "{}", entry.display());
    }
    let report = validate_similar(similar.module(), &outcome).expect("the validator crashed");
    assert_eq!(report.mismatches.len(), 3, "{}", report.summary());
    let caught: Vec<FuncIndex> = report.mismatches.iter().map(|m| m.function).collect();
    assert_eq!(caught, members);
}

/// A negative offset and the same offset added to the base are one address, as
/// on the hardware: wrapping at 64 bits for an `i64` base, at 32 bits for an `i32`
/// one (a 32-bit target's pointers).
#[test]
fn negative_offsets_address_what_adding_them_addresses() {
    for ty in ["i64", "i32"] {
        let report = validate_forced_merge(
            &format!(
                "
function %f({ty}, i32) -> i64 {{
block0(v0: {ty}, v1: i32):
    istore16 v1, v0-2
    v2 = sload16.i64 v0-8
    return v2
}}
function %g({ty}, i32) -> i64 {{
block0(v0: {ty}, v1: i32):
    v2 = iconst.{ty} -2
    v3 = iadd v0, v2
    istore16 v1, v3
    v4 = iconst.{ty} -8
    v5 = iadd v0, v4
    v6 = sload16.i64 v5
    return v6
}}"
            ),
            MergeAction::Erase,
        );
        assert_eq!(report.validated, 1, "{ty}: {}", report.summary());
        assert!(
            report.mismatches.is_empty(),
            "{ty}: {:?}",
            report.mismatches
        );
    }
}

/// A `stack_addr` outside its slot points wherever the frame layout puts it, which
/// the sandbox does not share with the hardware: no run through it is conclusive,
/// so the pair is unvalidated (the interpreter alone would trap on both sides and
/// call that agreement).
#[test]
fn a_stack_address_outside_its_slot_is_not_validated() {
    for offset in ["-8", "+8"] {
        let function = |name: &str| {
            format!(
                "
function %{name}(i64) -> i64 {{
    ss0 = explicit_slot 8
    ss1 = explicit_slot 8
block0(v0: i64):
    v1 = stack_addr.i64 ss1{offset}
    store v0, v1
    v2 = load.i64 v1
    return v2
}}"
            )
        };
        let report = validate_forced_merge(&(function("f") + &function("g")), MergeAction::Erase);
        assert_eq!(report.validated, 0, "ss1{offset}: {}", report.summary());
        assert_eq!(
            report.unvalidated.len(),
            1,
            "ss1{offset}: {}",
            report.summary()
        );
        assert!(
            report.mismatches.is_empty(),
            "ss1{offset}: {}",
            report.summary()
        );
    }
}

/// What a [`Progress`] was told, in order.
#[derive(Debug, PartialEq, Eq)]
enum Told {
    /// `start(total)`.
    Start(usize),
    /// `step()`.
    Step,
}

/// A [`Progress`] that records what it is told.
#[derive(Default)]
struct Recorder(Mutex<Vec<Told>>);

impl Progress for Recorder {
    fn start(&self, total: usize) {
        self.0
            .lock()
            .expect("not poisoned")
            .push(Told::Start(total));
    }

    fn step(&self) {
        self.0.lock().expect("not poisoned").push(Told::Step);
    }
}

impl Recorder {
    /// `start(total)` once, first, then `total` steps: nothing else.
    fn assert_counted(&self, total: usize) {
        let told = self.0.lock().expect("not poisoned");
        let mut expected = vec![Told::Start(total)];
        expected.extend((0..total).map(|_| Told::Step));
        assert_eq!(*told, expected);
    }
}

/// The validator tells its progress the number of pairs, then one step per pair,
/// whether the pair validated, could not be run or mismatched.
#[test]
fn progress_is_told_the_pairs_and_one_step_each() {
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
function %fp_a() -> i64 {
block0:
    v0 = get_frame_pointer.i64
    return v0
}
function %fp_b() -> i64 {
block0:
    v0 = get_frame_pointer.i64
    return v0
}
",
    );
    let outcome = merge_functions(&set, &MergeOptions::default());
    let recorder = Recorder::default();
    let report = validate_with_progress(
        &set,
        &outcome.plan,
        &outcome.output,
        &ValidationOptions::default(),
        &recorder,
    )
    .expect("the validator crashed");
    assert_eq!(report.validated, 1, "{}", report.summary());
    assert_eq!(report.unvalidated.len(), 1, "{}", report.summary());
    recorder.assert_counted(2);

    // A mismatch is a step too.
    let set = module(NEAR_TWINS);
    let plan = MergePlan {
        classes: vec![vec![FuncIndex::new(0), FuncIndex::new(1)]],
        decisions: vec![MergeDecision {
            function: FuncIndex::new(1),
            into: FuncIndex::new(0),
            action: MergeAction::Erase,
        }],
        unmerged_preemptible_classes: 0,
    };
    let output = apply(&set, &plan);
    let recorder = Recorder::default();
    let report = validate_with_progress(
        &set,
        &plan,
        &output,
        &ValidationOptions::default(),
        &recorder,
    )
    .expect("the validator crashed");
    assert_eq!(report.mismatches.len(), 1, "{}", report.summary());
    recorder.assert_counted(1);
}

/// The similar merge's validation counts one step per member of every group.
#[test]
fn progress_of_the_similar_validation_counts_members() {
    let text = include_str!("../../filetests/similar/group_of_five.clif");
    let set = module(text);
    let outcome = merge_functions(&set, &MergeOptions::default());
    let similar = SimilarPass::after(
        &set,
        &outcome,
        &SimilarOptions::default(),
        clif_merge::testing::host_isa().as_deref(),
    );
    let members: usize = similar
        .outcome()
        .groups
        .iter()
        .map(|g| g.members.len())
        .sum();
    assert_eq!(members, 5, "the five functions are one group");
    let recorder = Recorder::default();
    let report = validate_similar_with_progress(
        similar.module(),
        similar.outcome(),
        &ValidationOptions::default(),
        &recorder,
    )
    .expect("the validator crashed");
    assert_eq!(report.validated, 5, "{}", report.summary());
    recorder.assert_counted(5);
}

/// `%f` and `%g` take the address of `%k`, call `%h1` and `%h2` (which differ) and
/// return their result plus that address: the similar merge makes the callee a
/// parameter, so each entry point takes its callee's address before the merged
/// body takes `%k`'s.
const CALLEE_AND_ADDRESS_TWINS: &str = "
function %k(i32) -> i32 {
block0(v0: i32):
    v1 = iconst.i32 7
    v2 = iadd v0, v1
    return v2
}

function %h1(i32) -> i32 {
block0(v0: i32):
    v1 = imul v0, v0
    return v1
}

function %h2(i32) -> i32 {
block0(v0: i32):
    v1 = ineg v0
    v2 = iconst.i32 1
    v3 = iadd v1, v2
    return v3
}

function %f(i32, i32) -> i64 {
    fn0 = %h1(i32) -> i32
    fn1 = %k(i32) -> i32
block0(v0: i32, v1: i32):
    v18 = func_addr.i64 fn1
    v2 = iconst.i32 17
    v3 = imul v0, v2
    v4 = iadd v3, v1
    v5 = call fn0(v4)
    v6 = bxor v5, v0
    v7 = ishl v6, v1
    v8 = isub v7, v3
    v9 = band v8, v4
    v10 = bor v9, v5
    v11 = imul v10, v10
    v12 = iadd v11, v6
    v13 = bxor v12, v7
    v14 = imul v13, v8
    v15 = iadd v14, v9
    v16 = rotl v15, v1
    v17 = bxor v16, v10
    v19 = uextend.i64 v17
    v20 = iadd v19, v18
    return v20
}

function %g(i32, i32) -> i64 {
    fn0 = %h2(i32) -> i32
    fn1 = %k(i32) -> i32
block0(v0: i32, v1: i32):
    v18 = func_addr.i64 fn1
    v2 = iconst.i32 17
    v3 = imul v0, v2
    v4 = iadd v3, v1
    v5 = call fn0(v4)
    v6 = bxor v5, v0
    v7 = ishl v6, v1
    v8 = isub v7, v3
    v9 = band v8, v4
    v10 = bor v9, v5
    v11 = imul v10, v10
    v12 = iadd v11, v6
    v13 = bxor v12, v7
    v14 = imul v13, v8
    v15 = iadd v14, v9
    v16 = rotl v15, v1
    v17 = bxor v16, v10
    v19 = uextend.i64 v17
    v20 = iadd v19, v18
    return v20
}
";

/// The similar merge of [`CALLEE_AND_ADDRESS_TWINS`]: one group of `%f` and `%g`
/// whose entry points pass their callee's address.
fn similar_merge_of_callee_and_address_twins() -> SimilarPass {
    let set = module(CALLEE_AND_ADDRESS_TWINS);
    let outcome = merge_functions(&set, &MergeOptions::default());
    let similar = SimilarPass::after(
        &set,
        &outcome,
        &SimilarOptions::default(),
        clif_merge::testing::host_isa().as_deref(),
    );
    assert_eq!(similar.outcome().groups.len(), 1, "one group");
    let group = &similar.outcome().groups[0];
    assert_eq!(group.members.len(), 2, "%f and %g");
    let entry = similar
        .entry_point(group.members[0])
        .expect("%f is an entry point");
    let text = entry.display().to_string();
    assert!(text.contains("func_addr"), "the callee is passed: {text}");
    similar
}

/// Where a run takes the addresses of functions first does not move them: the
/// right similar merge validates, through the library and through the tool.
#[test]
fn a_callee_made_a_parameter_leaves_other_addresses_alone() {
    let similar = similar_merge_of_callee_and_address_twins();
    let report =
        validate_similar(similar.module(), similar.outcome()).expect("the validator crashed");
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert_eq!(report.validated, 2, "{}", report.summary());

    let dir = tempfile::Builder::new()
        .prefix("clif-merge-validate-")
        .tempdir()
        .expect("temp dir");
    let file = dir.path().join("callee_and_address.clif");
    std::fs::write(&file, CALLEE_AND_ADDRESS_TWINS).expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_clif-merge"))
        .args(["--similar", "--validate"])
        .arg(&file)
        .output()
        .expect("run clif-merge");
    drop(dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("similar: validated: 2 pairs, 0 unvalidated, 0 mismatches"),
        "{stderr}"
    );
}

/// An entry point that passes the address of the other member's callee is caught.
#[test]
fn an_entry_point_passing_another_callee_is_caught() {
    let similar = similar_merge_of_callee_and_address_twins();
    let mut wrong = similar.outcome().clone();
    let f = wrong.groups[0].members[0];
    let entry = wrong.entry_points.get_mut(f).expect("an entry point");
    // The entry point of %f names %h1; %h2 instead.
    let callee = entry
        .dfg
        .ext_funcs
        .values_mut()
        .find(|e| e.name.display(None).to_string() == "%h1")
        .expect("%f's entry point imports %h1");
    callee.name = cranelift_codegen::ir::ExternalName::testcase("h2");
    let report = validate_similar(similar.module(), &wrong).expect("the validator crashed");
    assert_eq!(report.mismatches.len(), 1, "{}", report.summary());
    assert_eq!(report.mismatches[0].function, f);
}

/// Functions the transformations below use: `%h1` and `%h2` differ.
const ADDRESSED: &str = "
function %h1(i64) -> i64 {
block0(v0: i64):
    v1 = imul v0, v0
    return v1
}
function %h2(i64) -> i64 {
block0(v0: i64):
    v1 = iadd v0, v0
    return v1
}
";

/// `validate_program` of `ADDRESSED` with `original` against `ADDRESSED` with
/// `transformed`, renaming nothing.
fn validate_addresses(original: &str, transformed: &str) -> ValidationReport {
    let original = module(&format!("{ADDRESSED}{original}"));
    let transformed = module(&format!("{ADDRESSED}{transformed}"));
    validate_program(&original, &transformed, []).expect("the validator crashed")
}

/// `%r` as it takes the address of `%h1` ... and as a wrong transformation
/// rewrites it to take `%h2`'s instead (or both, in the other order), for every
/// way an address can be observed.
const WRONG_ADDRESSES: [(&str, &str, &str); 7] = [
    (
        "func_addr returned",
        "
function %r() -> i64 {
    fn0 = %h1(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    return v0
}",
        "
function %r() -> i64 {
    fn0 = %h2(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    return v0
}",
    ),
    (
        "symbol_value returned",
        "
function %r() -> i64 {
    gv0 = symbol %h1
block0:
    v0 = symbol_value.i64 gv0
    return v0
}",
        "
function %r() -> i64 {
    gv0 = symbol %h2
block0:
    v0 = symbol_value.i64 gv0
    return v0
}",
    ),
    (
        "symbol_value for func_addr",
        "
function %r() -> i64 {
    fn0 = %h1(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    return v0
}",
        "
function %r() -> i64 {
    gv0 = symbol %h2
block0:
    v0 = symbol_value.i64 gv0
    return v0
}",
    ),
    (
        "stored to memory",
        "
function %r(i64) {
    fn0 = %h1(i64) -> i64
block0(v0: i64):
    v1 = func_addr.i64 fn0
    store v1, v0
    return
}",
        "
function %r(i64) {
    fn0 = %h2(i64) -> i64
block0(v0: i64):
    v1 = func_addr.i64 fn0
    store v1, v0
    return
}",
    ),
    (
        "stored, loaded and compared",
        "
function %r(i64) -> i8 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0(v0: i64):
    v1 = func_addr.i64 fn0
    store v1, v0
    v2 = load.i64 v0
    v3 = func_addr.i64 fn1
    v4 = icmp ult v2, v3
    return v4
}",
        "
function %r(i64) -> i8 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0(v0: i64):
    v3 = func_addr.i64 fn1
    store v3, v0
    v2 = load.i64 v0
    v1 = func_addr.i64 fn0
    v4 = icmp ult v2, v1
    return v4
}",
    ),
    (
        "addresses compared",
        "
function %r() -> i8 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    v1 = func_addr.i64 fn1
    v2 = icmp ult v0, v1
    return v2
}",
        "
function %r() -> i8 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0:
    v0 = func_addr.i64 fn1
    v1 = func_addr.i64 fn0
    v2 = icmp ult v0, v1
    return v2
}",
    ),
    (
        "passed to a call leaving the program",
        "
function %r() {
    fn0 = %h1(i64) -> i64
    fn1 = %ext(i64)
block0:
    v0 = func_addr.i64 fn0
    call fn1(v0)
    return
}",
        "
function %r() {
    fn0 = %h2(i64) -> i64
    fn1 = %ext(i64)
block0:
    v0 = func_addr.i64 fn0
    call fn1(v0)
    return
}",
    ),
];

/// A transformation that takes the address of another function than the
/// original did is caught, however the address is observed.
#[test]
fn the_address_of_another_function_is_caught() {
    for (what, original, wrong) in WRONG_ADDRESSES {
        let report = validate_addresses(original, wrong);
        assert_eq!(report.mismatches.len(), 1, "{what}: {}", report.summary());
    }
}

/// Right transformations validate whatever order they take addresses in, and
/// `func_addr` and `symbol_value` of one function are one address.
#[test]
fn right_transformations_validate_whatever_order_they_take_addresses_in() {
    let right = [
        (
            "func_addr swapped",
            "
function %r() -> i64 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    v1 = func_addr.i64 fn1
    v2 = isub v0, v1
    return v2
}",
            "
function %r() -> i64 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0:
    v1 = func_addr.i64 fn1
    v0 = func_addr.i64 fn0
    v2 = isub v0, v1
    return v2
}",
        ),
        (
            "stored, loaded and compared, taken the other way round",
            "
function %r(i64) -> i8 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0(v0: i64):
    v1 = func_addr.i64 fn0
    store v1, v0
    v2 = load.i64 v0
    v3 = func_addr.i64 fn1
    v4 = icmp ult v2, v3
    return v4
}",
            "
function %r(i64) -> i8 {
    fn0 = %h1(i64) -> i64
    fn1 = %h2(i64) -> i64
block0(v0: i64):
    v3 = func_addr.i64 fn1
    v1 = func_addr.i64 fn0
    store v1, v0
    v2 = load.i64 v0
    v4 = icmp ult v2, v3
    return v4
}",
        ),
        (
            "symbol_value for func_addr",
            "
function %r() -> i64 {
    fn0 = %h1(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    return v0
}",
            "
function %r() -> i64 {
    gv0 = symbol %h1
block0:
    v0 = symbol_value.i64 gv0
    return v0
}",
        ),
        (
            "called through its address",
            "
function %r(i64, i64) -> i64 {
    sig0 = (i64) -> i64
    fn0 = %h1 sig0
block0(v0: i64, v1: i64):
    v2 = call fn0(v1)
    return v2
}",
            "
function %r(i64, i64) -> i64 {
    sig0 = (i64) -> i64
    fn0 = %h1 sig0
block0(v0: i64, v1: i64):
    v2 = func_addr.i64 fn0
    v3 = call_indirect sig0, v2(v1)
    return v3
}",
        ),
    ];
    for (what, original, transformed) in right {
        let report = validate_addresses(original, transformed);
        assert!(
            report.mismatches.is_empty(),
            "{what}: {:?}",
            report.mismatches
        );
        assert_eq!(report.validated, 1, "{what}: {}", report.summary());
    }
}

/// A program in which `%r` returns the address of `%local` and what it computes.
const TAKES_LOCAL: &str = "
function %local(i64) -> i64 {
block0(v0: i64):
    v1 = iconst.i64 5
    v2 = imul v0, v1
    return v2
}
function %r(i64) -> i64, i64 {
    fn0 = %local(i64) -> i64
block0(v0: i64):
    v1 = func_addr.i64 fn0
    v2 = call fn0(v0)
    return v1, v2
}
";

/// A function separate compilation promoted under a new name is the same
/// function, with the same address, when `validate_program` is told the rename;
/// a name it is not told of is a new function, with an address of its own.
#[test]
fn a_promoted_function_keeps_its_address_under_its_new_name() {
    let original = module(TAKES_LOCAL);
    let transformed = module(&TAKES_LOCAL.replace("%local", "%local_promoted_1234"));
    let report = validate_program(
        &original,
        &transformed,
        [("%local", "%local_promoted_1234")],
    )
    .expect("the validator crashed");
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    // %r (its import renamed) and %local (under its new name).
    assert_eq!(report.validated, 2, "{}", report.summary());

    let report = validate_program(&original, &transformed, []).expect("the validator crashed");
    assert_eq!(report.mismatches.len(), 1, "{}", report.summary());
}

/// A function removed and its references sent to an equal representative is
/// caught when its address was taken: the representative's address is not its,
/// unless the function is declared an alias of it.
#[test]
fn a_redirected_function_whose_address_is_taken_is_caught() {
    let original = module(&format!(
        "{TAKES_LOCAL}
function %twin(i64) -> i64 {{
block0(v0: i64):
    v1 = iconst.i64 5
    v2 = imul v0, v1
    return v2
}}"
    ));
    // %local removed, %r's references sent to %twin.
    let redirected = module(
        "
function %r(i64) -> i64, i64 {
    fn0 = %twin(i64) -> i64
block0(v0: i64):
    v1 = func_addr.i64 fn0
    v2 = call fn0(v0)
    return v1, v2
}
function %twin(i64) -> i64 {
block0(v0: i64):
    v1 = iconst.i64 5
    v2 = imul v0, v1
    return v2
}",
    );
    let report = validate_program(&original, &redirected, []).expect("the validator crashed");
    assert_eq!(report.mismatches.len(), 1, "{}", report.summary());
    assert_eq!(report.mismatches[0].function, FuncIndex::new(1), "%r");
    // Declared an alias of %twin, %local has its address in both programs, and is
    // checked against it.
    let report = validate_program(&original, &redirected, [("%local", "%twin")])
        .expect("the validator crashed");
    assert!(report.mismatches.is_empty(), "{:?}", report.mismatches);
    assert_eq!(report.validated, 2, "{}", report.summary());
}

/// Two equal functions that take each other's addresses: `%b` merged into `%a`.
const TAKE_EACH_OTHERS_ADDRESS: &str = "
function %a() -> i64 {
    fn0 = %a() -> i64
    fn1 = %b() -> i64
block0:
    v0 = func_addr.i64 fn0
    v1 = func_addr.i64 fn1
    v2 = isub v1, v0
    return v2
}
function %b() -> i64 {
    fn0 = %a() -> i64
    fn1 = %b() -> i64
block0:
    v0 = func_addr.i64 fn0
    v1 = func_addr.i64 fn1
    v2 = isub v1, v0
    return v2
}
";

/// An erased or aliased duplicate is declared one address with its kept function
/// in both worlds, and a thunk keeps its own in both: each merge validates.
#[test]
fn merges_validate_with_the_addresses_their_plan_declares() {
    for action in [MergeAction::Erase, MergeAction::Alias, MergeAction::Thunk] {
        let report = validate_forced_merge(TAKE_EACH_OTHERS_ADDRESS, action);
        assert!(
            report.mismatches.is_empty(),
            "{action:?}: {:?}",
            report.mismatches
        );
        assert_eq!(report.validated, 1, "{action:?}: {}", report.summary());
    }
}

/// Two functions that return the addresses of different functions are no
/// duplicates: merging them is caught.
#[test]
fn a_merge_of_functions_returning_different_addresses_is_caught() {
    let text = format!(
        "
function %a() -> i64 {{
    fn0 = %h1(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    return v0
}}
function %b() -> i64 {{
    fn0 = %h2(i64) -> i64
block0:
    v0 = func_addr.i64 fn0
    return v0
}}
{ADDRESSED}"
    );
    for action in [MergeAction::Erase, MergeAction::Thunk] {
        let report = validate_forced_merge(&text, action);
        assert_eq!(
            report.mismatches.len(),
            1,
            "{action:?}: {}",
            report.summary()
        );
    }
}

/// Every filetest, merged (identical, then similar, every function exported so
/// that duplicates become thunks and are checked), validated on one thread and
/// on three: the same verdicts, pair by pair, whatever the threads.
#[test]
fn verdicts_do_not_depend_on_the_number_of_threads() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
    let mut files = Vec::new();
    for dir in ["merge", "nomerge", "similar"] {
        for entry in std::fs::read_dir(root.join(dir)).expect("filetests") {
            let path = entry.expect("an entry").path();
            if path.extension().is_some_and(|e| e == "clif") {
                files.push(path);
            }
        }
    }
    files.sort();
    let isa = clif_merge::testing::host_isa();
    let mut pairs = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let Ok(functions) = cranelift_reader::parse_functions(&text) else {
            continue;
        };
        let mut set = FunctionSet::new();
        if functions
            .into_iter()
            .any(|f| set.push(f, Linkage::Export).is_err())
        {
            continue;
        }
        let outcome = merge_functions(&set, &MergeOptions::default());
        let similar =
            SimilarPass::after(&set, &outcome, &SimilarOptions::default(), isa.as_deref());
        let [one, three] = [1, 3].map(|threads| {
            let options = ValidationOptions::default().with_threads(threads);
            let identical =
                validate_with_progress(&set, &outcome.plan, &outcome.output, &options, &NoProgress)
                    .expect("the validator crashed");
            let similar = validate_similar_with_progress(
                similar.module(),
                similar.outcome(),
                &options,
                &NoProgress,
            )
            .expect("the validator crashed");
            (
                verdicts(&identical),
                verdicts(&similar),
                identical.validated + similar.validated,
            )
        });
        assert_eq!(one, three, "{}", path.display());
        pairs += one.2;
    }
    assert!(pairs > 0, "no filetest pair was validated");
    println!(
        "{} filetests, {pairs} pairs validated alike on 1 and 3 threads",
        files.len()
    );
}
