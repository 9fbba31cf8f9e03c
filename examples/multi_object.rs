//! Separate compilation across object files, in the three stages of GCC's WHOPR
//! design, the way a compiler with several codegen units would use clif-merge:
//!
//! 1. *LGEN* (one thread per codegen unit): each unit is built with
//!    cranelift-frontend into its own `MergingModule<ObjectModule>`, which records
//!    the functions, and writes its *summary* (`MergingModule::summarize`, in the
//!    summary file format).
//! 2. *WPA* (the main thread): `plan_program` reads every summary and decides, for
//!    the whole program, which functions of which unit are equal and which one
//!    represents each class.
//! 3. *LTRANS* (the same threads, each still holding its module): each unit gets
//!    its decisions (in the decisions file format), applies them
//!    (`MergingModule::with_decisions`) and emits its object file.
//!
//! The units look like what monomorphization produces: every unit instantiates the
//! same generic code under its own symbol names (`unit0_checksum_u32`,
//! `unit1_checksum_u32`, ...), with loops, recursion and calls to local helpers
//! that every unit has its own copy of; other functions differ from unit to unit
//! (a constant, or the function they call, even a local one of the same name) and
//! must not merge. `unit3` defines `run`, which the C `main` calls and which calls
//! into every unit, passing each result to the C function `report`; `unit2` puts
//! the address of its local helper in a table that the C `main` calls through.
//!
//! The four objects are linked with the system `cc` against a small C `main` and
//! run; so are the objects of a second build without merging. The example fails
//! (returns an error, exit status 1) unless both programs print the same thing and
//! the merged objects hold less code (`.text`).
//!
//! Run with `cargo run --release --example multi_object`.

// `ModuleResult` is cranelift-module's own error type, which the `Module` trait
// returns everywhere.
#![allow(clippy::result_large_err)]

use clif_merge::module::{CompileMode, MergeReport, MergingModule, ModuleMergeOptions};
use clif_merge::separate::{ModuleDecisions, ProgramPlan, Summary, plan_program};
use cranelift_codegen::Context;
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, Function, InstBuilder, Signature, UserFuncName, Value};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{DataDescription, FuncId, Linkage, Module, ModuleResult};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::error::Error;
use std::sync::mpsc::{Receiver, Sender, channel};

#[path = "shared/native.rs"]
#[allow(dead_code)]
mod native;

type BoxError = Box<dyn Error + Send + Sync>;

/// Codegen units.
const UNITS: usize = 4;
/// The unit that defines `run`.
const DRIVER: usize = 3;
/// The unit whose local `mix` has its address in a table.
const TABLE_UNIT: usize = 2;
/// The instantiations every unit exports as `unit{N}_{name}`, in the order `run`
/// reports them (tag `10 * N + position`; the C `main` has the same list).
const EXPORTS: [&str; 7] = [
    "checksum_i32",
    "checksum_u32",
    "sum_squares",
    "gcd",
    "scale",
    "apply",
    "biased",
];

const MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern int64_t run(int64_t);
extern int64_t (*unit2_table[2])(int64_t);
extern int64_t unit0_checksum_u32(int64_t), unit1_checksum_u32(int64_t);
extern int64_t unit2_checksum_u32(int64_t), unit3_checksum_u32(int64_t);
static const char *NAMES[] = {"checksum_i32", "checksum_u32", "sum_squares",
                              "gcd", "scale", "apply", "biased"};
void report(int64_t tag, int64_t value) {
    if (tag >= 100) {
        printf("  mix64 %lld\n", (long long)value);
        return;
    }
    if (tag % 10 == 0)
        printf("  unit%lld:", (long long)(tag / 10));
    printf(" %s=%lld", NAMES[tag % 10], (long long)value);
    if (tag % 10 == 6)
        printf("\n");
}
int main(void) {
    int64_t xs[] = {0, 7, 100};
    for (int i = 0; i < 3; i++) {
        printf("run(%lld):\n", (long long)xs[i]);
        printf("  total %lld\n", (long long)run(xs[i]));
    }
    printf("unit2_table[0](5) = %lld, unit2_table[1](5) = %lld\n",
           (long long)unit2_table[0](5), (long long)unit2_table[1](5));
    void *f[] = {(void *)unit0_checksum_u32, (void *)unit1_checksum_u32,
                 (void *)unit2_checksum_u32, (void *)unit3_checksum_u32};
    int distinct = 1;
    for (int i = 0; i < 4; i++)
        for (int j = i + 1; j < 4; j++)
            distinct &= f[i] != f[j];
    printf("the four unitN_checksum_u32 have distinct addresses: %d\n", distinct);
    return 0;
}
"#;

/// The name of unit `unit`'s instantiation of `name`.
fn exported(unit: usize, name: &str) -> String {
    format!("unit{unit}_{name}")
}

/// Defines `id` with signature `sig`; `body` gets the module and the builder,
/// positioned in the entry block (whose parameters are the function's), and
/// returns the value to return.
fn define<M: Module>(
    module: &mut M,
    builder_context: &mut FunctionBuilderContext,
    id: FuncId,
    sig: &Signature,
    body: impl FnOnce(&mut M, &mut FunctionBuilder) -> Value,
) -> ModuleResult<()> {
    let mut func = Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig.clone());
    let mut b = FunctionBuilder::new(&mut func, builder_context);
    let entry = b.create_block();
    b.append_block_params_for_function_params(entry);
    b.switch_to_block(entry);
    let result = body(module, &mut b);
    b.ins().return_(&[result]);
    b.seal_all_blocks();
    b.finalize(module.target_config());
    let mut ctx = Context::for_function(func);
    module.define_function(id, &mut ctx)
}

/// A call of `callee` with `args`; its single result.
fn call<M: Module>(
    module: &mut M,
    b: &mut FunctionBuilder,
    callee: FuncId,
    args: &[Value],
) -> Value {
    let callee = module.declare_func_in_func(callee, b.func);
    let call = b.ins().call(callee, args);
    b.inst_results(call)[0]
}

/// `for i in 0..n { acc = step(acc, i) }`, starting from `init`; the final `acc`.
fn counted_loop<M: Module>(
    module: &mut M,
    b: &mut FunctionBuilder,
    n: Value,
    init: Value,
    step: impl FnOnce(&mut M, &mut FunctionBuilder, Value, Value) -> Value,
) -> Value {
    let (header, body, exit) = (b.create_block(), b.create_block(), b.create_block());
    let i = b.append_block_param(header, I64);
    let acc = b.append_block_param(header, I64);
    let result = b.append_block_param(exit, I64);
    let zero = b.ins().iconst(I64, 0);
    b.ins().jump(header, &[zero.into(), init.into()]);
    b.switch_to_block(header);
    let more = b.ins().icmp(IntCC::SignedLessThan, i, n);
    b.ins().brif(more, body, &[], exit, &[acc.into()]);
    b.switch_to_block(body);
    let next = step(module, b, acc, i);
    let i = b.ins().iadd_imm_s(i, 1);
    b.ins().jump(header, &[i.into(), next.into()]);
    b.switch_to_block(exit);
    result
}

/// MurmurHash3's 64-bit finalizer.
fn mix_body(b: &mut FunctionBuilder) -> Value {
    let mut x = b.block_params(b.current_block().expect("in a block"))[0];
    for k in [0xff51_afd7_ed55_8ccd_u64, 0xc4ce_b9fe_1a85_ec53] {
        let shifted = b.ins().ushr_imm_u(x, 33);
        x = b.ins().bxor(x, shifted);
        x = b.ins().imul_imm_s(x, k as i64);
    }
    let shifted = b.ins().ushr_imm_u(x, 33);
    b.ins().bxor(x, shifted)
}

/// Declares and defines codegen unit `unit` in `module`.
fn build_unit<M: Module>(module: &mut M, unit: usize) -> ModuleResult<()> {
    let mut unary = module.make_signature();
    unary.params.push(AbiParam::new(I64));
    unary.returns.push(AbiParam::new(I64));
    let mut binary = unary.clone();
    binary.params.push(AbiParam::new(I64));
    let sig_of = |name: &str| if name == "gcd" { &binary } else { &unary };

    // Local helpers: every unit has its own copy, under the same (local) name.
    let mix = module.declare_function("mix", Linkage::Local, &unary)?;
    let square = module.declare_function("square", Linkage::Local, &unary)?;
    // Same name in every unit, a different body in each.
    let bias = module.declare_function("bias", Linkage::Local, &unary)?;
    let mut ids = Vec::new();
    for name in EXPORTS {
        let id = module.declare_function(&exported(unit, name), Linkage::Export, sig_of(name))?;
        ids.push(id);
    }
    let id = |name: &str| ids[EXPORTS.iter().position(|n| *n == name).expect("exported")];
    let mut bc = FunctionBuilderContext::new();

    define(module, &mut bc, mix, &unary, |_, b| mix_body(b))?;
    define(module, &mut bc, square, &unary, |_, b| {
        let x = b.block_params(b.current_block().expect("entry"))[0];
        b.ins().imul(x, x)
    })?;
    // The same generic checksum instantiated for two types: equal bodies.
    for name in ["checksum_i32", "checksum_u32"] {
        define(module, &mut bc, id(name), &unary, |m, b| {
            let n = b.block_params(b.current_block().expect("entry"))[0];
            let init = b.ins().iconst(I64, 0x1234_5678);
            let h = counted_loop(m, b, n, init, |m, b, h, i| {
                let t = b.ins().bxor(h, i);
                let t = call(m, b, mix, &[t]);
                b.ins().iadd(t, i)
            });
            b.ins().band_imm_u(h, 0xffff_ffff)
        })?;
    }
    define(module, &mut bc, id("sum_squares"), &unary, |m, b| {
        let n = b.block_params(b.current_block().expect("entry"))[0];
        let zero = b.ins().iconst(I64, 0);
        counted_loop(m, b, n, zero, |m, b, sum, i| {
            let s = call(m, b, square, &[i]);
            b.ins().iadd(sum, s)
        })
    })?;
    // Euclid's algorithm, recursive: `b == 0 ? a : gcd(b, a % b)`.
    let gcd = id("gcd");
    define(module, &mut bc, gcd, &binary, |m, b| {
        let params = b.block_params(b.current_block().expect("entry")).to_vec();
        let (x, y) = (params[0], params[1]);
        let (recurse, done) = (b.create_block(), b.create_block());
        let result = b.append_block_param(done, I64);
        b.ins().brif(y, recurse, &[], done, &[x.into()]);
        b.switch_to_block(recurse);
        let rem = b.ins().urem(x, y);
        let r = call(m, b, gcd, &[y, rem]);
        b.ins().jump(done, &[r.into()]);
        b.switch_to_block(done);
        result
    })?;
    // Differs in every unit: a unit-specific constant.
    define(module, &mut bc, id("scale"), &unary, |_, b| {
        let x = b.block_params(b.current_block().expect("entry"))[0];
        let scaled = b.ins().imul_imm_s(x, unit as i64 + 2);
        b.ins().iadd_imm_s(scaled, 1000 * unit as i64)
    })?;
    // The same body everywhere, but it calls its own unit's `scale`: differs too.
    define(module, &mut bc, id("apply"), &unary, |m, b| {
        let x = b.block_params(b.current_block().expect("entry"))[0];
        let scaled = call(m, b, id("scale"), &[x]);
        let mixed = call(m, b, mix, &[x]);
        b.ins().iadd(scaled, mixed)
    })?;
    define(module, &mut bc, bias, &unary, |_, b| {
        let x = b.block_params(b.current_block().expect("entry"))[0];
        b.ins().iadd_imm_s(x, 7 * unit as i64)
    })?;
    // The same body everywhere, calling a local `bias` that is another function
    // in every unit: must not merge either.
    define(module, &mut bc, id("biased"), &unary, |m, b| {
        let x = b.block_params(b.current_block().expect("entry"))[0];
        let biased = call(m, b, bias, &[x]);
        b.ins().imul(biased, x)
    })?;

    if unit == 0 {
        // The library's public hash: the same code as every unit's local `mix`.
        let mix64 = module.declare_function("mix64", Linkage::Export, &unary)?;
        define(module, &mut bc, mix64, &unary, |_, b| mix_body(b))?;
    }
    if unit == TABLE_UNIT {
        // The address of the local `mix` escapes through this table.
        let table = module.declare_data(&exported(unit, "table"), Linkage::Export, true, false)?;
        let mut desc = DataDescription::new();
        desc.define(vec![0u8; 16].into_boxed_slice());
        for (offset, f) in [(0u32, mix), (8, id("scale"))] {
            let f = module.declare_func_in_data(f, &mut desc);
            desc.write_function_addr(offset, f);
        }
        module.define_data(table, &desc)?;
    }
    if unit == DRIVER {
        build_run(module, &mut bc, &ids, &unary, &binary)?;
    }
    Ok(())
}

/// `run(x)`: calls every unit's instantiations and `mix64`, reports each result
/// to the C function `report(tag, value)` and returns their (wrapping) sum.
fn build_run<M: Module>(
    module: &mut M,
    bc: &mut FunctionBuilderContext,
    own: &[FuncId],
    unary: &Signature,
    binary: &Signature,
) -> ModuleResult<()> {
    let mut report_sig = module.make_signature();
    report_sig
        .params
        .extend([AbiParam::new(I64), AbiParam::new(I64)]);
    let report = module.declare_function("report", Linkage::Import, &report_sig)?;
    let mut callees = Vec::new();
    for unit in 0..UNITS {
        for (position, name) in EXPORTS.iter().enumerate() {
            let sig = if *name == "gcd" { binary } else { unary };
            let id = if unit == DRIVER {
                own[position]
            } else {
                module.declare_function(&exported(unit, name), Linkage::Import, sig)?
            };
            callees.push((10 * unit as i64 + position as i64, id, *name == "gcd"));
        }
    }
    let mix64 = module.declare_function("mix64", Linkage::Import, unary)?;
    callees.push((100, mix64, false));
    let run = module.declare_function("run", Linkage::Export, unary)?;
    define(module, bc, run, unary, |m, b| {
        let x = b.block_params(b.current_block().expect("entry"))[0];
        let mut total = b.ins().iconst(I64, 0);
        for (tag, callee, binary) in callees {
            let value = if binary {
                let a = b.ins().imul_imm_s(x, 12);
                let a = b.ins().iadd_imm_s(a, 6);
                let eighteen = b.ins().iconst(I64, 18);
                call(m, b, callee, &[a, eighteen])
            } else {
                call(m, b, callee, &[x])
            };
            let tag = b.ins().iconst(I64, tag);
            let report_ref = m.declare_func_in_func(report, b.func);
            b.ins().call(report_ref, &[tag, value]);
            total = b.ins().iadd(total, value);
        }
        total
    })
}

/// What one unit's thread produced.
struct UnitOutput {
    name: String,
    object: Vec<u8>,
    report: MergeReport,
    /// Size of its summary file (0 without merging).
    summary_bytes: usize,
    /// Size of its decisions file (0 without merging).
    decisions_bytes: usize,
}

/// The channels of a merging unit: its summary goes out, its decisions come in.
struct Stages {
    summary: Sender<Vec<u8>>,
    decisions: Receiver<Vec<u8>>,
}

/// Compiles unit `unit` into an object; with `stages`, merging across the
/// program (stage 1, wait for stage 2, stage 3), otherwise without merging.
fn compile_unit(unit: usize, stages: Option<Stages>) -> Result<UnitOutput, BoxError> {
    let name = format!("unit{unit}");
    let isa = native::pic_host_isa()?;
    let builder = ObjectBuilder::new(
        isa,
        name.as_str(),
        cranelift_module::default_libcall_names(),
    )?;
    // Compiled at finish the summaries are of the IR (at define, of the machine
    // code); this example saves the compile time of the duplicates.
    let options = ModuleMergeOptions::default()
        .with_enabled(stages.is_some())
        .with_compile(CompileMode::AtFinish);
    let mut module = MergingModule::new(ObjectModule::new(builder), options);
    build_unit(&mut module, unit)?;
    let (mut summary_bytes, mut decisions_bytes) = (0, 0);
    if let Some(Stages { summary, decisions }) = stages {
        // Stage 1.
        let bytes = module.summarize(&name)?.to_bytes();
        summary_bytes = bytes.len();
        summary.send(bytes).map_err(|_| "the planner is gone")?;
        // The planner stops waiting for summaries once every unit sent its own.
        drop(summary);
        // Stage 3.
        let bytes = decisions
            .recv()
            .map_err(|_| format!("{name}: no decisions (planning failed)"))?;
        decisions_bytes = bytes.len();
        module = module.with_decisions(ModuleDecisions::from_bytes(&bytes)?);
    }
    let (product, report) = module.finish_object()?;
    Ok(UnitOutput {
        name,
        object: product.emit()?,
        report,
        summary_bytes,
        decisions_bytes,
    })
}

/// Compiles every unit on its own thread; with `merge`, the main thread plans
/// the program from their summaries in between. Units in order, and the plan.
fn compile_program(merge: bool) -> Result<(Vec<UnitOutput>, Option<ProgramPlan>), BoxError> {
    std::thread::scope(|scope| {
        let (summary_tx, summary_rx) = channel();
        let mut decision_txs = Vec::new();
        let threads: Vec<_> = (0..UNITS)
            .map(|unit| {
                let stages = merge.then(|| {
                    let (tx, rx) = channel();
                    decision_txs.push(tx);
                    Stages {
                        summary: summary_tx.clone(),
                        decisions: rx,
                    }
                });
                scope.spawn(move || compile_unit(unit, stages))
            })
            .collect();
        drop(summary_tx);
        let mut plan = None;
        let mut planning_error = None;
        if merge {
            // Stage 2, once every unit has summarized (a unit that failed sends
            // nothing; its error comes from its thread below).
            let mut summaries: Vec<Summary> = Vec::new();
            for bytes in summary_rx {
                summaries.push(Summary::from_bytes(&bytes)?);
            }
            if summaries.len() == UNITS {
                match plan_program(&summaries) {
                    Ok(p) => {
                        for decisions in &p.decisions {
                            let unit = (0..UNITS)
                                .position(|u| format!("unit{u}") == decisions.module)
                                .ok_or_else(|| format!("no unit {}", decisions.module))?;
                            decision_txs[unit]
                                .send(decisions.to_bytes())
                                .map_err(|_| format!("{} is gone", decisions.module))?;
                        }
                        plan = Some(p);
                    }
                    Err(e) => planning_error = Some(e),
                }
            }
            // A unit without decisions stops.
            decision_txs.clear();
        }
        let results: Vec<_> = threads.into_iter().map(|t| t.join()).collect();
        if let Some(e) = planning_error {
            return Err(format!("planning failed: {e}").into());
        }
        let mut units = Vec::new();
        for result in results {
            units.push(result.map_err(|_| "a codegen thread panicked")??);
        }
        Ok((units, plan))
    })
}

/// Links the objects of `units` with the C `main` and runs the program.
fn link_and_run(units: &[UnitOutput], tag: &str) -> Result<native::Run, BoxError> {
    let objects: Vec<&[u8]> = units.iter().map(|u| u.object.as_slice()).collect();
    native::link_all_and_run(&objects, MAIN_C, tag).map_err(|e| e.to_string().into())
}

/// Bytes of code (all text sections) in an object file.
fn text_bytes(object_file: &[u8]) -> Result<u64, BoxError> {
    native::text_bytes(object_file).map_err(|e| e.to_string().into())
}

pub fn main() -> Result<(), BoxError> {
    let (merged, plan) = compile_program(true)?;
    let plan = plan.ok_or("no plan")?;
    let (plain, _) = compile_program(false)?;

    println!("stage 1: {UNITS} codegen units built and summarized on {UNITS} threads");
    for unit in &merged {
        println!(
            "  {}: {} functions, summary {} bytes",
            unit.name, unit.report.functions, unit.summary_bytes
        );
    }
    println!(
        "stage 2: plan_program over {} summarized functions, {} comparisons, {} classes:",
        plan.functions,
        plan.comparisons,
        plan.classes.len()
    );
    // Every class has a representative (listed first) that the other members go
    // to; a local one is promoted to hidden under a new name, so that the other
    // units can call it.
    let decided: std::collections::HashMap<(&str, &str), &clif_merge::separate::Decision> = plan
        .decisions
        .iter()
        .flat_map(|m| {
            m.decisions
                .iter()
                .map(move |d| ((m.module.as_str(), d.function.as_str()), d))
        })
        .collect();
    for class in &plan.classes {
        let names: Vec<String> = class.iter().map(ToString::to_string).collect();
        let first = (class[0].module.as_str(), class[0].name.as_str());
        let kind = match decided.get(&first) {
            Some(d) => format!("merged into the first, promoted to hidden `{}`", d.to),
            None => "merged into the first".to_string(),
        };
        println!("  ({kind}) {}", names.join(" = "));
    }
    println!("stage 3: decisions applied by each unit");
    let mut applied = 0;
    for (unit, decisions) in merged.iter().zip(&plan.decisions) {
        if decisions.module != unit.name {
            return Err(format!("decisions of {} given to {}", decisions.module, unit.name).into());
        }
        println!(
            "  {}: {} decisions ({} bytes), {} applied; merged within the unit: {}",
            unit.name,
            decisions.decisions.len(),
            unit.decisions_bytes,
            unit.report.cross_module.len(),
            unit.report.merged()
        );
        for (function, into, action) in &unit.report.cross_module {
            // What was applied must be what the plan decided.
            let decided = decisions
                .decisions
                .iter()
                .find(|d| {
                    d.function == *function
                        && *into == format!("{}::{}", d.to_module, d.to)
                        && d.action == *action
                })
                .ok_or_else(|| format!("{}: {function} -> {into} was not planned", unit.name))?;
            println!("    {function} -> {into} ({})", decided.action.as_str());
        }
        for (function, into, action) in &unit.report.actions {
            println!("    {function} -> {into} ({action}, within the unit)");
        }
        if unit.report.cross_module.len() != decisions.decisions.len() {
            return Err(format!("{}: not every decision was applied", unit.name).into());
        }
        applied += unit.report.cross_module.len();
    }
    if applied == 0 {
        return Err("the plan merged nothing across units".into());
    }

    let plain_run = link_and_run(&plain, "multi-object-plain")?;
    let merged_run = link_and_run(&merged, "multi-object-merged")?;
    println!("\nprogram output without merging:\n{}", plain_run.stdout);
    println!("program output with merging:\n{}", merged_run.stdout);
    let identical = plain_run.stdout == merged_run.stdout && plain_run.code == merged_run.code;
    println!("identical output: {}", if identical { "yes" } else { "NO" });

    let mut sizes = [0u64; 2];
    println!(".text in bytes, without and with merging:");
    for (plain, merged) in plain.iter().zip(&merged) {
        let (before, after) = (text_bytes(&plain.object)?, text_bytes(&merged.object)?);
        println!("  {}: {before} -> {after}", plain.name);
        sizes[0] += before;
        sizes[1] += after;
    }
    println!("  total: {} -> {}", sizes[0], sizes[1]);

    if plain_run.code != 0 || merged_run.code != 0 {
        return Err(format!(
            "a program failed: {} without merging, {} with merging",
            plain_run.code, merged_run.code
        )
        .into());
    }
    if !identical {
        return Err("merging changed the program's output".into());
    }
    if sizes[1] >= sizes[0] {
        return Err(format!(
            "merging did not shrink .text: {} bytes before, {} after",
            sizes[0], sizes[1]
        )
        .into());
    }
    Ok(())
}
