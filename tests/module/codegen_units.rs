//! Separate compilation the way rustc's codegen units need it: every unit carries
//! its own *local* copy of the same generic helpers, under the same names, and
//! calls the other units' functions through *hidden* symbols.
//!
//! Three units are built on three threads, each into a
//! `MergingModule<ObjectModule>`; each writes its summary, the main thread plans
//! the program, each unit applies its decisions and emits its object. The objects
//! are linked with `cc` against a C `main` and run, and so are the objects of a
//! build without merging. Both must print the same; the merged build must hold
//! each helper's code once (the linked executable's symbols, as `nm` lists them:
//! one promoted helper, `NAME.cguN.promoted.HASH`, instead of a local copy per
//! unit) and less `.text`.
//!
//! The plan's counts follow from the construction: the three helper classes have
//! only local members, so each gets a promoted representative (3 promotions) and
//! the two other copies are removed (6); of the hidden `cguN_twice`, equal in every
//! unit, `cgu0_twice` represents, `cgu2_twice` is removed (its address is taken
//! nowhere: no dead thunk) and `cgu1_twice`, whose address the C `main` reads from
//! a table, becomes a thunk. The `bias` of every unit shares a name but not a body,
//! and the `cguN_work` that call them must stay apart.
//!
//! A second run turns the similar merge on: it runs on what the decisions leave,
//! and in every unit merges `poly0` and `poly1`, which differ in two constants.

#![allow(clippy::result_large_err)]

#[path = "../support/define.rs"]
mod define_support;
#[path = "../../examples/shared/native.rs"]
#[allow(dead_code)]
mod native;

use clif_merge::module::{CompileMode, MergingModule, ModuleMergeOptions};
use clif_merge::separate::{ModuleDecisions, PlanCounts, Summary, plan_program, program_hash};
use clif_merge::similar::SimilarOptions;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature, Value};
use cranelift_frontend::FunctionBuilder;
use cranelift_module::{DataDescription, FuncId, Linkage, Module, ModuleResult};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::sync::mpsc::channel;

/// Codegen units.
const UNITS: usize = 3;
/// The generic helpers every unit has a local copy of.
const HELPERS: [&str; 3] = ["helper_mix", "helper_sum_to", "helper_clamp"];

const MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern int64_t run(int64_t);
extern int64_t (*cgu1_table[1])(int64_t);
extern int64_t cgu1_twice(int64_t);
int main(void) {
    int64_t xs[] = {0, 5, 1000, -3};
    for (int i = 0; i < 4; i++)
        printf("run(%lld) = %lld\n", (long long)xs[i], (long long)run(xs[i]));
    printf("through the table: %lld\n", (long long)cgu1_table[0](21));
    printf("the table holds cgu1_twice: %d\n", cgu1_table[0] == cgu1_twice);
    return 0;
}
"#;

/// Defines `id`: `body` gets the module, the builder in the entry block and the
/// parameters, and returns the value to return.
fn define<M: Module>(
    module: &mut M,
    id: FuncId,
    sig: &Signature,
    body: impl FnOnce(&mut M, &mut FunctionBuilder, &[Value]) -> Value,
) -> ModuleResult<()> {
    define_support::define_function(module, id, sig, |m, b, p| vec![body(m, b, p)]);
    Ok(())
}

use define_support::call;

/// Builds unit `unit` into `module`.
fn build_unit<M: Module>(module: &mut M, unit: usize) -> ModuleResult<()> {
    let mut unary = module.make_signature();
    unary.params.push(AbiParam::new(I64));
    unary.returns.push(AbiParam::new(I64));

    // The generic helpers: a local copy in every unit, the same name and body.
    let helpers: Vec<FuncId> = HELPERS
        .iter()
        .map(|name| module.declare_function(name, Linkage::Local, &unary))
        .collect::<ModuleResult<_>>()?;
    define(module, helpers[0], &unary, |_, b, p| {
        let mut x = p[0];
        for k in [0xff51_afd7_ed55_8ccd_u64, 0xc4ce_b9fe_1a85_ec53] {
            let shifted = b.ins().ushr_imm_u(x, 33);
            x = b.ins().bxor(x, shifted);
            x = b.ins().imul_imm_s(x, k as i64);
        }
        x
    })?;
    define(module, helpers[1], &unary, |_, b, p| {
        // sum of 0..n, as a loop.
        let (header, body, exit) = (b.create_block(), b.create_block(), b.create_block());
        let i = b.append_block_param(header, I64);
        let acc = b.append_block_param(header, I64);
        let result = b.append_block_param(exit, I64);
        let zero = b.ins().iconst(I64, 0);
        b.ins().jump(header, &[zero.into(), zero.into()]);
        b.switch_to_block(header);
        let more = b.ins().icmp(IntCC::SignedLessThan, i, p[0]);
        b.ins().brif(more, body, &[], exit, &[acc.into()]);
        b.switch_to_block(body);
        let acc = b.ins().iadd(acc, i);
        let i = b.ins().iadd_imm_s(i, 1);
        b.ins().jump(header, &[i.into(), acc.into()]);
        b.switch_to_block(exit);
        result
    })?;
    define(module, helpers[2], &unary, |_, b, p| {
        let lo = b.ins().iconst(I64, 0);
        let hi = b.ins().iconst(I64, 100);
        let x = b.ins().smax(p[0], lo);
        b.ins().smin(x, hi)
    })?;
    // The same name in every unit, another body in each.
    let bias = module.declare_function("bias", Linkage::Local, &unary)?;
    define(module, bias, &unary, |_, b, p| {
        b.ins().iadd_imm_s(p[0], 7 * unit as i64 + 1)
    })?;
    // Called across units: hidden, as rustc makes them. Equal in every unit.
    let twice = module.declare_function(&format!("cgu{unit}_twice"), Linkage::Hidden, &unary)?;
    define(module, twice, &unary, |_, b, p| {
        let doubled = b.ins().iadd(p[0], p[0]);
        b.ins().iadd_imm_s(doubled, 1)
    })?;
    // Two locals that differ in two constants (and from unit to unit): similar,
    // for the similar merge, but equal to nothing.
    let polys: Vec<FuncId> = (0..2)
        .map(|k| module.declare_function(&format!("poly{k}"), Linkage::Local, &unary))
        .collect::<ModuleResult<_>>()?;
    for (k, &poly) in polys.iter().enumerate() {
        define(module, poly, &unary, |_, b, p| {
            let mut x = p[0];
            for (i, c) in [3, 5, 7, 11, 13, 17, 19, 23].into_iter().enumerate() {
                let c = match i {
                    2 => c + 100 * k as i64 + 1000 * unit as i64,
                    5 => c - 10 * k as i64,
                    _ => c,
                };
                let c = b.ins().iconst(I64, c);
                let scaled = b.ins().imul(x, c);
                let rotated = b.ins().rotl_imm_u(scaled, (i + 1) as i64);
                x = b.ins().bxor(rotated, p[0]);
            }
            x
        })?;
    }
    // Called across units, and different in every unit (its own `bias`).
    let work = module.declare_function(&format!("cgu{unit}_work"), Linkage::Hidden, &unary)?;
    define(module, work, &unary, |m, b, p| {
        let x = call(m, b, polys[0], &[p[0]]);
        let y = call(m, b, polys[1], &[x]);
        let clamped = call(m, b, helpers[2], &[y]);
        let sum = call(m, b, helpers[1], &[clamped]);
        let mixed = call(m, b, helpers[0], &[sum]);
        let biased = call(m, b, bias, &[p[0]]);
        let t = b.ins().bxor(mixed, biased);
        call(m, b, twice, &[t])
    })?;
    if unit == 1 {
        // Its `twice` escapes through a table the C `main` reads.
        let table = module.declare_data("cgu1_table", Linkage::Export, true, false)?;
        let mut desc = DataDescription::new();
        desc.define(vec![0u8; 8].into_boxed_slice());
        let f = module.declare_func_in_data(twice, &mut desc);
        desc.write_function_addr(0, f);
        module.define_data(table, &desc)?;
    }
    if unit == 0 {
        // `run`: every unit's `work` and `twice`.
        let run = module.declare_function("run", Linkage::Export, &unary)?;
        let mut callees = Vec::new();
        for other in 0..UNITS {
            for name in ["work", "twice"] {
                let symbol = format!("cgu{other}_{name}");
                let linkage = if other == unit {
                    Linkage::Hidden
                } else {
                    Linkage::Import
                };
                callees.push(module.declare_function(&symbol, linkage, &unary)?);
            }
        }
        define(module, run, &unary, |m, b, p| {
            let mut total = b.ins().iconst(I64, 0);
            for callee in callees {
                let value = call(m, b, callee, &[p[0]]);
                total = b.ins().imul_imm_s(total, 31);
                total = b.ins().iadd(total, value);
            }
            total
        })?;
    }
    Ok(())
}

/// A unit compiled to an object: its bytes, and whether every decision it got was
/// applied.
struct Unit {
    object: Vec<u8>,
    decisions: usize,
    applied: usize,
    /// Groups of similar functions merged.
    similar_groups: usize,
}

/// What the plan found: its counts and how many classes across units.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
struct Planned {
    counts: PlanCounts,
    classes: usize,
}

/// Compiles every unit on its own thread, as `compile` says; with `merge`, through
/// the three stages (the main thread plans in between). The units in order, the plan's counts and
/// its program hash (which marks promoted names; 0 without `merge`).
fn build_program(
    merge: bool,
    similar: bool,
    compile: CompileMode,
) -> Result<(Vec<Unit>, Planned, u64), String> {
    std::thread::scope(|scope| {
        let (summary_tx, summary_rx) = channel::<Vec<u8>>();
        let mut decision_txs = Vec::new();
        let threads: Vec<_> = (0..UNITS)
            .map(|unit| {
                let summary_tx = summary_tx.clone();
                let (decision_tx, decision_rx) = channel::<Vec<u8>>();
                decision_txs.push(decision_tx);
                scope.spawn(move || -> Result<Unit, String> {
                    let name = format!("cgu{unit}");
                    let isa = native::pic_host_isa()?;
                    let builder = ObjectBuilder::new(
                        isa,
                        name.as_str(),
                        cranelift_module::default_libcall_names(),
                    )
                    .map_err(|e| e.to_string())?;
                    // AtFinish summarizes the IR, AtDefine the machine code.
                    let options = ModuleMergeOptions::default()
                        .with_compile(compile)
                        .with_enabled(merge)
                        .with_similar(similar.then(SimilarOptions::default));
                    let mut module = MergingModule::new(ObjectModule::new(builder), options);
                    build_unit(&mut module, unit).map_err(|e| format!("{name}: {e}"))?;
                    let mut decisions = 0;
                    if merge {
                        let summary = module.summarize(&name).map_err(|e| e.to_string())?;
                        summary_tx
                            .send(summary.to_bytes())
                            .map_err(|_| "the planner is gone")?;
                        drop(summary_tx);
                        let bytes = decision_rx
                            .recv()
                            .map_err(|_| format!("{name}: no decisions"))?;
                        let d = ModuleDecisions::from_bytes(&bytes).map_err(|e| e.to_string())?;
                        decisions = d.decisions.len();
                        module = module.with_decisions(d);
                    }
                    let (product, report) =
                        module.finish_object().map_err(|e| format!("{name}: {e}"))?;
                    Ok(Unit {
                        object: product.emit().map_err(|e| e.to_string())?,
                        decisions,
                        applied: report.cross_module.len(),
                        similar_groups: report.similar_groups,
                    })
                })
            })
            .collect();
        drop(summary_tx);
        let mut planned = Planned::default();
        let mut hash = 0;
        if merge {
            let summaries: Vec<Summary> = summary_rx
                .iter()
                .map(|bytes| Summary::from_bytes(&bytes).map_err(|e| e.to_string()))
                .collect::<Result<_, _>>()?;
            let plan = plan_program(&summaries).map_err(|e| e.to_string())?;
            planned = Planned {
                counts: plan.counts(),
                classes: plan.classes.len(),
            };
            hash = program_hash(&summaries);
            for decisions in &plan.decisions {
                let unit: usize = decisions.module["cgu".len()..]
                    .parse()
                    .map_err(|_| format!("no unit {}", decisions.module))?;
                decision_txs[unit]
                    .send(decisions.to_bytes())
                    .map_err(|_| format!("{} is gone", decisions.module))?;
            }
        }
        drop(decision_txs);
        let units = threads
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| "a codegen thread panicked".to_string())?
            })
            .collect::<Result<Vec<_>, _>>()?;
        Ok((units, planned, hash))
    })
}

/// How many of the executable's defined symbols (as `nm` lists them) are named
/// `name`, a unit's own copy, and how many `name.cguN.promoted.HASH`, a promoted
/// one (HASH the program hash `hash` in 16 hex digits).
fn copies(symbols: &str, name: &str, hash: u64) -> (usize, usize) {
    let promoted = |s: &str| {
        s.strip_prefix(&format!("{name}.cgu"))
            .and_then(|rest| rest.strip_suffix(&format!(".promoted.{hash:016x}")))
            .is_some_and(|unit| !unit.is_empty() && unit.bytes().all(|b| b.is_ascii_digit()))
    };
    let defined: Vec<&str> = symbols
        .lines()
        .filter_map(|line| line.split_whitespace().nth(2))
        .collect();
    (
        defined.iter().filter(|s| **s == name).count(),
        defined.iter().filter(|s| promoted(s)).count(),
    )
}

#[test]
fn codegen_units_share_one_copy_of_each_local_helper() {
    check_codegen_units(false, CompileMode::AtFinish);
}

/// The same with the similar merge on: it runs on what the whole-program decisions
/// leave, and merges each unit's `poly0` and `poly1`.
#[test]
fn codegen_units_merge_similar_functions_the_decisions_leave() {
    check_codegen_units(true, CompileMode::AtFinish);
}

/// The same program compiled at define: the summaries are written from machine
/// code, the plan is the one the IR summaries give (the same counts and the same
/// classes), and the linked program prints what the unmerged one prints.
#[test]
fn codegen_units_compiled_at_define_get_the_plan_of_the_ir() {
    let (_, at_finish, _) =
        build_program(true, false, CompileMode::AtFinish).expect("merged at finish");
    let at_define = check_codegen_units(false, CompileMode::AtDefine);
    assert_eq!(at_define, at_finish, "the plan: AtDefine vs AtFinish");
    println!("the plan at define and at finish: {at_define:?}");
}

/// Builds the program unmerged and merged (compiled as `compile` says), checks the
/// plan, the linked program's output and its symbols; returns what the plan found.
fn check_codegen_units(similar: bool, compile: CompileMode) -> Planned {
    let (plain, _, _) = build_program(false, false, compile).expect("plain build");
    let (merged, planned, hash) = build_program(true, similar, compile).expect("merged build");
    let counts = planned.counts;
    assert_eq!(
        counts,
        PlanCounts::default()
            .with_removed(7)
            .with_thunked(1)
            .with_promoted(3)
            // cgu0 and cgu2 call cgu1_twice (a thunk now) and cgu0 calls
            // cgu2_twice (removed): the other units' references to removed
            // helpers are to locals, not symbols.
            .with_redirected(2),
        "the plan's counts"
    );
    for (i, unit) in merged.iter().enumerate() {
        assert_eq!(
            unit.applied, unit.decisions,
            "cgu{i}: every decision applied"
        );
        assert_eq!(
            unit.similar_groups,
            usize::from(similar),
            "cgu{i}: groups of similar functions merged"
        );
    }
    let objects = |units: &[Unit]| units.iter().map(|u| u.object.clone()).collect::<Vec<_>>();
    let (plain_objects, merged_objects) = (objects(&plain), objects(&merged));
    let plain_slices: Vec<&[u8]> = plain_objects.iter().map(Vec::as_slice).collect();
    let merged_slices: Vec<&[u8]> = merged_objects.iter().map(Vec::as_slice).collect();
    let plain_run = native::link_all_and_run(&plain_slices, MAIN_C, "cgu-plain").expect("links");
    let merged_run = native::link_all_and_run(&merged_slices, MAIN_C, "cgu-merged").expect("links");
    assert_eq!(plain_run.code, 0, "{}", plain_run.stdout);
    assert_eq!(
        (&merged_run.stdout, merged_run.code),
        (&plain_run.stdout, plain_run.code),
        "merging changed what the program does"
    );
    for helper in HELPERS {
        assert_eq!(
            copies(&plain_run.symbols, helper, hash),
            (UNITS, 0),
            "{helper} unmerged"
        );
        assert_eq!(
            copies(&merged_run.symbols, helper, hash),
            (0, 1),
            "{helper} merged: one promoted copy:\n{}",
            merged_run.symbols
        );
    }
    assert_eq!(
        copies(&merged_run.symbols, "bias", hash),
        (UNITS, 0),
        "every bias stays"
    );
    let text = |objects: &[Vec<u8>]| -> u64 {
        objects
            .iter()
            .map(|o| native::text_bytes(o).expect("an object"))
            .sum()
    };
    let (before, after) = (text(&plain_objects), text(&merged_objects));
    println!(
        "{}.text: {before} bytes unmerged, {after} merged; {counts:?}",
        merged_run.stdout
    );
    assert!(after < before, ".text {before} -> {after}");
    planned
}
