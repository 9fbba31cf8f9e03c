//! Several codegen units with cross-unit decisions, applied into one `JITModule`:
//! what the API allows today, pinned so that a change shows.
//!
//! `MergingModule<M>` owns its inner module, and `finish_jit` (for
//! `MergingModule<JITModule>`) finalizes that JIT: one wrapper per JIT. Several
//! units can reach one JIT only through `MergingModule<&mut JITModule>`
//! (cranelift-module implements `Module` for `&mut M`), which borrows the JIT for
//! the wrapper's whole life, so only one unit's wrapper can exist at a time, while
//! stage 3 of every unit needs the plan, which needs every unit's summary (stage 1).
//! The one shape left is two passes over the units, one after the other: each unit
//! is defined into a wrapper over the shared JIT and summarized, and the wrapper is
//! dropped (the JIT keeps only the declarations, which the wrapper forwards at
//! once); the program is planned; each unit is defined again into a new wrapper
//! with its decisions and finished with the generic `finish` (which defines what
//! stays into the JIT without finalizing it); the JIT is finalized once at the end.
//! (In `CompileMode::AtFinish` the first pass costs an IR walk; in
//! `CompileMode::AtDefine` every function is compiled twice.) A unit must give the
//! same IR in both passes, or its decisions are refused as planned for another
//! module: in one namespace a call to another unit's export is colocated once that
//! unit has declared it, so every unit's exports are declared first.
//!
//! Even so, stage 3 refuses the decisions of every unit but the representatives'
//! own: a unit's wrapper takes what the unit defines from the inner module's
//! declarations (`DeclaredNames::defines`: a name declared with a linkage other
//! than `Import`), and in one JIT the other units' exports and promoted names are
//! declared there too, so a representative in another unit looks like a definition
//! of this unit that a reference would bind to (`DecisionError::Shadowed`). The
//! refusal is the right side to err on (nothing is miscompiled: the finish fails
//! before defining anything). Applying units into one JIT needs the wrapper to
//! know which declarations are its unit's own (the functions and data defined
//! through it, plus whatever the inner module had defined before it was wrapped),
//! and a `finish_jit` that leaves the JIT unfinalized and returns the redirects of
//! erased and aliased duplicates for a `MergedJit` over several units.
//!
//! What serves several units in one JIT today needs no decisions at all: one JIT
//! is one namespace and `Module::define_function` takes `&mut self` (no parallel
//! defines into one JIT, wrapped or not), so every unit is defined into one
//! `MergingModule<JITModule>`, which merges across units as across functions of one
//! module (`tests/module/unwind.rs`, its `jit` half).
//!
//! The units: every unit has, under names of its own (one JIT is one namespace):
//! `sqK`, a local helper equal in every unit (the plan promotes one copy and
//! removes the others), `mixK`, exported and equal in every unit (one represents,
//! the others become thunks), `mineK`, exported and different in every unit, and
//! `workK`, which calls its unit's `sqK` and `mineK` and the next unit's `mix` (a
//! cycle of calls across units). The same units defined into one plain JIT run.

#![allow(clippy::result_large_err)]

#[path = "../support/define.rs"]
mod define_support;

use clif_merge::module::{CompileMode, MergingModule, ModuleMergeOptions};
use clif_merge::separate::{PlanCounts, plan_program};
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{FuncId, Linkage, Module, ModuleResult};
use define_support::{call_unary, define_unary};

/// Codegen units.
const UNITS: usize = 3;

/// Inputs every function is called with.
const INPUTS: [i64; 5] = [0, 1, 7, -3, 1 << 20];

fn jit() -> JITModule {
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("host ISA")
        .finish(cranelift_codegen::settings::Flags::new(
            cranelift_codegen::settings::builder(),
        ))
        .expect("ISA");
    JITModule::new(JITBuilder::with_isa(
        isa,
        cranelift_module::default_libcall_names(),
    ))
}

/// Declares and defines unit `unit`'s functions in `m`; returns every function it
/// defines, by name.
fn build_unit<M: Module>(m: &mut M, unit: usize) -> ModuleResult<Vec<(String, FuncId)>> {
    let mut unary = m.make_signature();
    unary.params.push(AbiParam::new(I64));
    unary.returns.push(AbiParam::new(I64));
    let next = (unit + 1) % UNITS;
    let sq = m.declare_function(&format!("sq{unit}"), Linkage::Local, &unary)?;
    let mix = m.declare_function(&format!("mix{unit}"), Linkage::Export, &unary)?;
    let mine = m.declare_function(&format!("mine{unit}"), Linkage::Export, &unary)?;
    let work = m.declare_function(&format!("work{unit}"), Linkage::Export, &unary)?;
    let next_mix = m.declare_function(&format!("mix{next}"), Linkage::Import, &unary)?;
    define_unary(m, sq, &unary, |_, b, x| {
        let square = b.ins().imul(x, x);
        b.ins().iadd_imm_s(square, 3)
    });
    define_unary(m, mix, &unary, |_, b, x| {
        let shifted = b.ins().sshr_imm_u(x, 3);
        let mixed = b.ins().bxor(x, shifted);
        let scaled = b.ins().imul_imm_s(mixed, 31);
        b.ins().iadd_imm_s(scaled, 7)
    });
    define_unary(m, mine, &unary, |_, b, x| {
        let scaled = b.ins().imul_imm_s(x, 5 + unit as i64);
        b.ins().iadd_imm_s(scaled, 100 * unit as i64)
    });
    define_unary(m, work, &unary, |m, b, x| {
        let a = call_unary(m, b, sq, x);
        let shifted = b.ins().iadd_imm_s(x, unit as i64);
        let c = call_unary(m, b, next_mix, shifted);
        let d = call_unary(m, b, mine, x);
        let ac = b.ins().bxor(a, c);
        b.ins().iadd(ac, d)
    });
    Ok(["sq", "mix", "mine", "work"]
        .into_iter()
        .map(|name| format!("{name}{unit}"))
        .zip([sq, mix, mine, work])
        .collect())
}

/// Calls every function of `functions` in the finalized `jit` on [`INPUTS`].
fn results(jit: &JITModule, functions: &[(String, FuncId)]) -> Vec<(String, Vec<i64>)> {
    functions
        .iter()
        .map(|(name, id)| {
            let code = jit.get_finalized_function(*id);
            // SAFETY: every function was compiled for the host with the signature
            // `(i64) -> i64` in the host's default calling convention, and `jit`
            // outlives the calls.
            let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
            (name.clone(), INPUTS.iter().map(|&x| f(x)).collect())
        })
        .collect()
}

/// Every unit defined into one plain JIT, without merging.
fn unmerged() -> Vec<(String, Vec<i64>)> {
    let mut jit = jit();
    let mut functions = Vec::new();
    for unit in 0..UNITS {
        functions.extend(build_unit(&mut jit, unit).expect("define"));
    }
    jit.finalize_definitions().expect("finalize");
    results(&jit, &functions)
}

/// Declares every unit's exports in `jit`, so that each unit's IR is the same in
/// both passes (a call to an export declared in the JIT is colocated).
fn declare_exports(jit: &mut JITModule) {
    let mut unary = jit.make_signature();
    unary.params.push(AbiParam::new(I64));
    unary.returns.push(AbiParam::new(I64));
    for unit in 0..UNITS {
        for export in ["mix", "mine", "work"] {
            jit.declare_function(&format!("{export}{unit}"), Linkage::Export, &unary)
                .expect("declare");
        }
    }
}

/// The two passes of the module documentation, compiled as `compile` says: the
/// plan's counts and each unit's finish (`Err` with the error's text).
fn two_passes(compile: CompileMode) -> (PlanCounts, Vec<Result<usize, String>>) {
    let options = || ModuleMergeOptions::default().with_compile(compile);
    let name = |unit: usize| format!("unit{unit}");
    let mut jit = jit();
    declare_exports(&mut jit);
    // Pass 1: define and summarize each unit; the wrapper (and what it recorded or
    // compiled) is dropped, the JIT keeps the declarations.
    let summaries: Vec<_> = (0..UNITS)
        .map(|unit| {
            let mut m = MergingModule::new(&mut jit, options());
            build_unit(&mut m, unit).expect("define");
            m.summarize(&name(unit)).expect("summary")
        })
        .collect();
    let plan = plan_program(&summaries).expect("plan");
    // Pass 2: define each unit again, with its decisions, into the same JIT.
    let finishes = (0..UNITS)
        .map(|unit| {
            let decisions = plan
                .decisions
                .iter()
                .find(|d| d.module == name(unit))
                .cloned()
                .expect("the plan has decisions for every unit");
            let count = decisions.decisions.len();
            let mut m = MergingModule::new(&mut jit, options()).with_decisions(decisions);
            build_unit(&mut m, unit).expect("define");
            match m.finish() {
                Ok((_, report)) => {
                    assert_eq!(
                        report.cross_module.len(),
                        count,
                        "unit {unit}: every decision applied"
                    );
                    Ok(count)
                }
                Err(e) => Err(e.to_string()),
            }
        })
        .collect();
    (plan.counts(), finishes)
}

fn check(compile: CompileMode) {
    let (counts, finishes) = two_passes(compile);
    assert_eq!(
        counts,
        PlanCounts::default()
            // sq1 and sq2 (the promoted sq0 represents them).
            .with_removed(2)
            // mix1 and mix2, exported.
            .with_thunked(2)
            .with_promoted(1)
            // work0 calls mix1, work1 calls mix2: straight to mix0 now.
            .with_redirected(2),
        "{compile:?}: the plan"
    );
    // Unit 0 holds every representative: its one decision (promote sq0) applies,
    // and so does its call redirect (work0 calls mix0 for mix1).
    assert_eq!(finishes[0], Ok(1), "{compile:?}: unit 0");
    // Units 1 and 2 are refused: their representatives are declared in the shared
    // JIT with a definable linkage.
    for (unit, finish) in finishes.iter().enumerate().skip(1) {
        let error = finish.as_ref().expect_err("refused");
        assert!(
            error.contains(
                "lives in another module, but this module defines something of that name"
            ),
            "{compile:?}: unit {unit}: {error}"
        );
    }
}

#[test]
fn units_into_one_jit_compiled_at_finish_are_refused_not_miscompiled() {
    check(CompileMode::AtFinish);
}

#[test]
fn units_into_one_jit_compiled_at_define_are_refused_not_miscompiled() {
    check(CompileMode::AtDefine);
}

/// The units themselves are sound: defined into one plain JIT, every function
/// runs, and the equal ones return the same.
#[test]
fn units_run_in_one_plain_jit() {
    let results = unmerged();
    let of = |name: &str| &results.iter().find(|(n, _)| n == name).expect(name).1;
    for unit in 0..UNITS {
        assert_eq!(of(&format!("mix{unit}")), of("mix0"), "mix{unit}");
        assert_eq!(of(&format!("sq{unit}")), of("sq0"), "sq{unit}");
    }
    assert_ne!(of("mine0"), of("mine1"));
    assert_eq!(of("sq0"), &INPUTS.map(|x| x * x + 3).to_vec());
}
