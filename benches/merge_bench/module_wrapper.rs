//! `module`: the cost of `MergingModule` to a backend, measured as a backend meets
//! it: the input's functions defined one after another through a plain
//! `ObjectModule`, then through `MergingModule<ObjectModule>` in each compile mode
//! (compile-at-define with and without compile-once), all on this thread, each run
//! timed from the first define to the emitted object, with the heap's high-water
//! mark above what was live before the run. Each function's IR is made (cloned from
//! the parsed input) just before its define, as a frontend makes it, and dropped by
//! the define, as a backend drops it. The objects written with and without
//! compile-once must be the same bytes.
//!
//! Then the same functions as three codegen units, each on its own thread: unit `k`
//! gets the `k`-th contiguous third of the functions in input order (functions
//! `k * n / 3 .. (k + 1) * n / 3`), exports them and imports every other function
//! under its name. The plain shape is three `ObjectModule`s; the merging shape is
//! three `MergingModule<ObjectModule>` (compile-at-define, compile-once, default
//! options) that define their functions, send their summary (as bytes) to this
//! thread, which plans the program (`plan_program`) and sends each unit its
//! decisions (as bytes), and then apply them (`with_decisions`) and finish to an
//! object. The time is the wall time from before the threads start to the last
//! object emitted; the object bytes are the sum of the three objects. The heap
//! counter is one for the whole process, so on threads it gives the program's peak
//! (all three units alive at once; the counters stay on, as in the other runs, and
//! the threads contend for them). The peak heap *per unit* is measured apart: each
//! unit is built alone on this thread, one after the other, from its first define
//! to its emitted object (the merging one gets the decisions the threaded run's plan
//! made for it, decoded inside the measurement), and its peak is the high-water mark
//! above what was live before it; reported are the largest over the three units,
//! for the plain and the merging shape, and the merging unit's against the plain
//! one unit by unit (the target is at most 1.10x).

use super::measure::{live_bytes, peak_bytes, reset_peak};
use super::prepared::prepared;
use anyhow::Context as _;
use clif_merge::FunctionSet;
use clif_merge::module::{CompileMode, MergingModule, ModuleMergeOptions};
use clif_merge::separate::{ModuleDecisions, PlanCounts, Summary, plan_program};
use cranelift_codegen::Context;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::ops::Range;
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

/// How the functions are defined.
#[derive(Copy, Clone, Debug)]
enum Variant {
    /// A plain `ObjectModule`.
    Plain,
    /// `MergingModule` in a compile mode, compiling each equal function once or
    /// not ([`ModuleMergeOptions::compile_once`], which only compile-at-define
    /// reads).
    Merging(CompileMode, bool),
    /// `MergingModule` compile-at-define with compile-once, not compiling
    /// duplicates ([`ModuleMergeOptions::compile_duplicates`] off).
    NoDuplicates,
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Plain => write!(f, "Plain"),
            Self::Merging(CompileMode::AtDefine, true) => write!(f, "AtDefine+once"),
            Self::Merging(mode, _) => write!(f, "{mode:?}"),
            Self::NoDuplicates => write!(f, "AtDefine+once-no-duplicates"),
        }
    }
}

/// One run: time, heap, the object, and what the pass merged.
struct Measured {
    time: Duration,
    peak_heap: usize,
    object: Vec<u8>,
    merged: usize,
    /// Defines that reused an equal function's compile.
    reused: usize,
}

/// The host ISA for the objects: `opt_level=speed`, position-independent.
fn object_isa() -> anyhow::Result<OwnedTargetIsa> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed")?;
    flags.set("is_pic", "true")?;
    Ok(
        cranelift_codegen::isa::lookup(target_lexicon::Triple::host())?
            .finish(settings::Flags::new(flags))?,
    )
}

/// Defines `functions` (named `names`, the defined ones first) through `variant`
/// and emits the object. Never inlined: callgrind counts it alone
/// (`--toggle-collect=*run_variant*`).
#[inline(never)]
fn run_variant(
    variant: Variant,
    functions: &[Function],
    names: &[String],
) -> anyhow::Result<Measured> {
    let isa = object_isa()?;
    reset_peak();
    let base = live_bytes();
    let start = Instant::now();
    let builder = ObjectBuilder::new(isa, "bench", cranelift_module::default_libcall_names())?;
    let inner = ObjectModule::new(builder);
    let (object, merged, reused) = match variant {
        Variant::Plain => {
            let mut module = inner;
            define_all(&mut module, functions, names, true)?;
            (module.finish().emit()?, 0, 0)
        }
        Variant::Merging(..) | Variant::NoDuplicates => {
            let (mode, once, duplicates) = match variant {
                Variant::Merging(mode, once) => (mode, once, true),
                _ => (CompileMode::AtDefine, true, false),
            };
            let options = ModuleMergeOptions::default()
                .with_compile(mode)
                .with_compile_once(once)
                .with_compile_duplicates(duplicates);
            let mut module = MergingModule::new(inner, options);
            let compiles = mode == CompileMode::AtDefine && duplicates;
            define_all(&mut module, functions, names, compiles)?;
            let (product, report) = module.finish_object()?;
            let reused = report.compiles_reused + report.not_compiled.len();
            (product.emit()?, report.merged(), reused)
        }
    };
    Ok(Measured {
        time: start.elapsed(),
        peak_heap: peak_bytes().saturating_sub(base),
        object,
        merged,
        reused,
    })
}

/// Declares every function of `names` (the first `functions.len()` exported, the
/// rest imports), then defines `functions` in order, checking that each define
/// left its compiled code in the context if `compiles` (every mode but
/// compile-at-finish).
fn define_all<M: Module>(
    module: &mut M,
    functions: &[Function],
    names: &[String],
    compiles: bool,
) -> anyhow::Result<()> {
    let all = 0..functions.len();
    declare_unit(module, functions, names, all.clone())?;
    define_range(module, functions, names, all, compiles)
}

/// Declares every function of `names` in order, so that each `FuncId` is its
/// index: those of `own` exported, the other functions imported (with their own
/// signatures; a name past `functions` with the first function's).
fn declare_unit<M: Module>(
    module: &mut M,
    functions: &[Function],
    names: &[String],
    own: Range<usize>,
) -> anyhow::Result<()> {
    for (i, name) in names.iter().enumerate() {
        let linkage = if own.contains(&i) {
            Linkage::Export
        } else {
            Linkage::Import
        };
        let sig = &functions.get(i).unwrap_or(&functions[0]).signature;
        let id = module.declare_function(name, linkage, sig)?;
        anyhow::ensure!(id.as_u32() as usize == i, "declaration order");
    }
    Ok(())
}

/// Defines the functions of `range` in order, each cloned just before its define,
/// checking that each define left its compiled code in the context if `compiles`.
fn define_range<M: Module>(
    module: &mut M,
    functions: &[Function],
    names: &[String],
    range: Range<usize>,
    compiles: bool,
) -> anyhow::Result<()> {
    for i in range {
        let mut ctx = Context::for_function(functions[i].clone());
        module
            .define_function(FuncId::from_u32(i as u32), &mut ctx)
            .with_context(|| names[i].clone())?;
        // What an embedder reads after every define (unwind info): compile-once
        // must leave it too.
        anyhow::ensure!(
            !compiles || ctx.compiled_code().is_some(),
            "no compiled code after defining {}",
            names[i]
        );
    }
    Ok(())
}

/// Codegen units of the threaded runs.
const UNITS: usize = 3;

/// The functions of unit `unit` of `n` functions: the `unit`-th contiguous third.
fn unit_range(n: usize, unit: usize) -> Range<usize> {
    unit * n / UNITS..(unit + 1) * n / UNITS
}

/// The name of unit `unit` (its module name in the summaries and the plan).
fn unit_name(unit: usize) -> String {
    format!("unit{unit}")
}

/// What one unit's build gave.
#[derive(Copy, Clone, Debug, Default)]
struct UnitBuilt {
    /// Bytes of its object.
    object: usize,
    /// Duplicates its own merge merged.
    merged: usize,
    /// Defines that reused an equal function's compile.
    reused: usize,
    /// Whole-program decisions it got, and how many it applied.
    decisions: usize,
    applied: usize,
}

/// How a merging unit meets the planner: its summary (bytes) out, its decisions
/// (bytes, `None` if the plan has none for it) back.
type Exchange<'a> = dyn FnMut(Vec<u8>) -> anyhow::Result<Option<Vec<u8>>> + 'a;

/// Builds unit `unit` of `functions` into an object: plain, or merging, when
/// `exchange` is given; it gets the unit's summary as bytes and returns the unit's
/// decisions as bytes (`None`: the plan had none for it).
#[inline(never)]
fn build_unit(
    isa: OwnedTargetIsa,
    functions: &[Function],
    names: &[String],
    unit: usize,
    exchange: Option<&mut Exchange<'_>>,
) -> anyhow::Result<UnitBuilt> {
    let name = unit_name(unit);
    let own = unit_range(functions.len(), unit);
    let builder = ObjectBuilder::new(
        isa,
        name.as_str(),
        cranelift_module::default_libcall_names(),
    )?;
    let inner = ObjectModule::new(builder);
    let Some(exchange) = exchange else {
        let mut module = inner;
        declare_unit(&mut module, functions, names, own.clone())?;
        define_range(&mut module, functions, names, own, true)?;
        let object = module.finish().emit()?;
        return Ok(UnitBuilt {
            object: object.len(),
            ..UnitBuilt::default()
        });
    };
    let options = ModuleMergeOptions::default()
        .with_compile(CompileMode::AtDefine)
        .with_compile_once(true);
    let mut module = MergingModule::new(inner, options);
    declare_unit(&mut module, functions, names, own.clone())?;
    define_range(&mut module, functions, names, own, true)?;
    // The summary goes out as bytes (a file, in a build of processes): the unit
    // keeps neither.
    let summary = module.summarize(&name)?.to_bytes();
    let mut decisions = 0;
    if let Some(bytes) = exchange(summary)? {
        let d = ModuleDecisions::from_bytes(&bytes).map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
        decisions = d.decisions.len();
        module = module.with_decisions(d);
    }
    let (product, report) = module.finish_object()?;
    let object = product.emit()?;
    Ok(UnitBuilt {
        object: object.len(),
        merged: report.merged(),
        reused: report.compiles_reused,
        decisions,
        applied: report.cross_module.len(),
    })
}

/// One threaded build of the three units.
struct UnitsRun {
    /// Wall time from before the threads start to the last object.
    time: Duration,
    /// The program's peak heap above what was live before (all threads).
    peak_heap: usize,
    units: Vec<UnitBuilt>,
    /// The plan's counts and classes (merging only).
    counts: PlanCounts,
    classes: usize,
    /// Each unit's decisions as bytes (merging only; `None` where the plan had
    /// none for it).
    decisions: Vec<Option<Vec<u8>>>,
}

/// Builds the three units on their own threads, plain or (`merge`) through the
/// three stages, this thread planning in between.
fn run_units(merge: bool, functions: &[Function], names: &[String]) -> anyhow::Result<UnitsRun> {
    let isa = object_isa()?;
    reset_peak();
    let base = live_bytes();
    let start = Instant::now();
    let (units, counts, classes, decisions) = std::thread::scope(|scope| {
        let (summary_tx, summary_rx) = channel::<Vec<u8>>();
        let mut decision_txs = Vec::new();
        let threads: Vec<_> = (0..UNITS)
            .map(|unit| {
                let summary_tx = summary_tx.clone();
                let (decision_tx, decision_rx) = channel::<Option<Vec<u8>>>();
                decision_txs.push(decision_tx);
                let isa = isa.clone();
                scope.spawn(move || {
                    let mut exchange = |summary: Vec<u8>| -> anyhow::Result<Option<Vec<u8>>> {
                        summary_tx
                            .send(summary)
                            .map_err(|_| anyhow::anyhow!("the planner is gone"))?;
                        decision_rx
                            .recv()
                            .map_err(|_| anyhow::anyhow!("unit {unit}: no decisions"))
                    };
                    let exchange: Option<&mut dyn FnMut(_) -> _> =
                        if merge { Some(&mut exchange) } else { None };
                    build_unit(isa, functions, names, unit, exchange)
                })
            })
            .collect();
        drop(summary_tx);
        let mut counts = PlanCounts::default();
        let mut classes = 0;
        let mut decisions = vec![None; UNITS];
        if merge {
            let summaries: Vec<Summary> = summary_rx
                .iter()
                .take(UNITS)
                .map(|bytes| Summary::from_bytes(&bytes))
                .collect::<Result<_, _>>()?;
            let plan = plan_program(&summaries).map_err(|e| anyhow::anyhow!("{e}"))?;
            counts = plan.counts();
            classes = plan.classes.len();
            for d in &plan.decisions {
                let Some(unit) = (0..UNITS).find(|&u| unit_name(u) == d.module) else {
                    anyhow::bail!("the plan names no unit {}", d.module);
                };
                decisions[unit] = Some(d.to_bytes());
            }
            for (tx, d) in decision_txs.iter().zip(&decisions) {
                // A unit that failed before its summary is gone: its join says why.
                tx.send(d.clone()).ok();
            }
        }
        let units = threads
            .into_iter()
            .map(|t| {
                t.join()
                    .map_err(|_| anyhow::anyhow!("a unit's thread panicked"))?
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((units, counts, classes, decisions))
    })?;
    Ok(UnitsRun {
        time: start.elapsed(),
        peak_heap: peak_bytes().saturating_sub(base),
        units,
        counts,
        classes,
        decisions,
    })
}

/// The peak heap of each unit built alone on this thread, above what was live
/// before it: plain, or merging with the `decisions` the threaded run's plan made.
fn heap_per_unit(
    decisions: Option<&[Option<Vec<u8>>]>,
    functions: &[Function],
    names: &[String],
) -> anyhow::Result<Vec<usize>> {
    (0..UNITS)
        .map(|unit| {
            let isa = object_isa()?;
            let mut mine = decisions.map(|d| d[unit].clone());
            let mut exchange = |summary: Vec<u8>| -> anyhow::Result<Option<Vec<u8>>> {
                drop(summary);
                Ok(mine.take().flatten())
            };
            let exchange: Option<&mut dyn FnMut(_) -> _> = if decisions.is_some() {
                Some(&mut exchange)
            } else {
                None
            };
            reset_peak();
            let base = live_bytes();
            build_unit(isa, functions, names, unit, exchange)?;
            Ok(peak_bytes().saturating_sub(base))
        })
        .collect()
}

/// The variants [`module_bench`] runs, in its order.
const VARIANTS: [Variant; 5] = [
    Variant::Plain,
    Variant::Merging(CompileMode::AtDefine, true),
    Variant::NoDuplicates,
    Variant::Merging(CompileMode::AtDefine, false),
    Variant::Merging(CompileMode::AtFinish, true),
];

/// Runs one variant once, named as `module --only` takes it: `plain`, `once`
/// (the default options), `no-duplicates` (compile-once without compiling
/// duplicates), `every` (compile-once off), `at-finish`, `units-plain` or
/// `units-merging` (the three codegen units on threads); prints its time, heap
/// and object, nothing else: for one configuration per process under callgrind.
pub fn only(label: &str, module: &FunctionSet, variant: &str) -> anyhow::Result<()> {
    let (functions, names) = prepared(module);
    let msf = |time: Duration| time.as_secs_f64() * 1e3;
    let units = match variant {
        "units-plain" => Some(false),
        "units-merging" => Some(true),
        _ => None,
    };
    if let Some(merge) = units {
        anyhow::ensure!(
            functions.len() >= UNITS,
            "{label}: fewer functions than units"
        );
        let run = run_units(merge, &functions, &names)?;
        let objects: usize = run.units.iter().map(|u| u.object).sum();
        println!(
            "{label}: {variant}: {:.1} ms, program peak heap {:.1} MB, objects {objects} bytes",
            msf(run.time),
            run.peak_heap as f64 / 1e6
        );
        return Ok(());
    }
    let variant = match variant {
        "plain" => Variant::Plain,
        "once" => Variant::Merging(CompileMode::AtDefine, true),
        "no-duplicates" => Variant::NoDuplicates,
        "every" => Variant::Merging(CompileMode::AtDefine, false),
        "at-finish" => Variant::Merging(CompileMode::AtFinish, true),
        other => anyhow::bail!("unknown variant {other}"),
    };
    let m = run_variant(variant, &functions, &names)?;
    println!(
        "{label}: {variant}: {} functions, {:.1} ms, peak heap {:.1} MB, object {} bytes, {} merged, {} compiles reused or not compiled",
        functions.len(),
        msf(m.time),
        m.peak_heap as f64 / 1e6,
        m.object.len(),
        m.merged,
        m.reused
    );
    Ok(())
}

/// Runs every variant on `module` `repeat` times, interleaved (so that a slow
/// spell of a shared machine hits every variant alike), then the three codegen
/// units on threads, plain and merging, as often, and prints one line each with the
/// median time, then the ratios of the medians; with `markdown`, also the rows of a
/// markdown table (`table_header` prints its head), labelled `label`.
pub fn module_bench(
    label: &str,
    module: &FunctionSet,
    repeat: usize,
    markdown: bool,
) -> anyhow::Result<()> {
    let variants = VARIANTS;
    let (functions, names) = prepared(module);
    anyhow::ensure!(
        functions.len() >= UNITS,
        "{label}: fewer functions than units"
    );
    let repeat = repeat.max(1);
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let mut unit_times: [Vec<Duration>; 2] = [Vec::new(), Vec::new()];
    let mut last: Vec<Measured> = Vec::new();
    let mut last_units: Vec<UnitsRun> = Vec::new();
    for _ in 0..repeat {
        last.clear();
        for (i, &variant) in variants.iter().enumerate() {
            let m = run_variant(variant, &functions, &names)?;
            times[i].push(m.time);
            last.push(m);
        }
        last_units.clear();
        for (i, merge) in [false, true].into_iter().enumerate() {
            let run = run_units(merge, &functions, &names)?;
            unit_times[i].push(run.time);
            last_units.push(run);
        }
        for (unit, built) in last_units[1].units.iter().enumerate() {
            anyhow::ensure!(
                built.applied == built.decisions,
                "{label}: unit {unit} applied {} of its {} decisions",
                built.applied,
                built.decisions
            );
        }
    }
    let median = |t: &mut Vec<Duration>| {
        t.sort_unstable();
        t[t.len() / 2]
    };
    let medians: Vec<Duration> = times.iter_mut().map(median).collect();
    let unit_medians: Vec<Duration> = unit_times.iter_mut().map(median).collect();
    let per_unit_plain = heap_per_unit(None, &functions, &names)?;
    let per_unit_merging = heap_per_unit(Some(&last_units[1].decisions), &functions, &names)?;
    let mb = |bytes: usize| bytes as f64 / 1e6;
    let msf = |time: Duration| time.as_secs_f64() * 1e3;
    for ((variant, m), time) in variants.iter().zip(&last).zip(&medians) {
        println!(
            "{label}: {variant}: {} functions, {:.1} ms (median of {repeat}), peak heap {:.1} MB, object {} bytes, {} merged, {} compiles reused",
            module.len(),
            msf(*time),
            mb(m.peak_heap),
            m.object.len(),
            m.merged,
            m.reused
        );
    }
    let (plain, plain_time) = (&last[0], medians[0]);
    for ((variant, m), time) in variants.iter().zip(&last).zip(&medians).skip(1) {
        println!(
            "{label}: {variant} / Plain: time {:.3}x, peak heap {:.3}x, object {:.3}x; merged {:.1}% of the functions",
            time.as_secs_f64() / plain_time.as_secs_f64(),
            m.peak_heap as f64 / plain.peak_heap.max(1) as f64,
            m.object.len() as f64 / plain.object.len().max(1) as f64,
            100.0 * m.merged as f64 / module.len().max(1) as f64,
        );
    }
    let object_sum = |run: &UnitsRun| run.units.iter().map(|u| u.object).sum::<usize>();
    let sizes = |run: &UnitsRun| {
        run.units
            .iter()
            .map(|u| u.object.to_string())
            .collect::<Vec<_>>()
            .join(" + ")
    };
    let per_unit = |heaps: &[usize]| {
        heaps
            .iter()
            .map(|&h| format!("{:.1}", mb(h)))
            .collect::<Vec<_>>()
            .join(" / ")
    };
    let max = |heaps: &[usize]| heaps.iter().copied().max().unwrap_or(0);
    let (plain_units, merging_units) = (&last_units[0], &last_units[1]);
    let c = merging_units.counts;
    let own: usize = merging_units.units.iter().map(|u| u.merged).sum();
    let reused: usize = merging_units.units.iter().map(|u| u.reused).sum();
    println!(
        "{label}: {UNITS} plain units on threads (contiguous thirds): {:.1} ms (median of {repeat}), program peak heap {:.1} MB, objects {} = {} bytes; peak heap per unit alone {} MB",
        msf(unit_medians[0]),
        mb(plain_units.peak_heap),
        sizes(plain_units),
        object_sum(plain_units),
        per_unit(&per_unit_plain),
    );
    println!(
        "{label}: {UNITS} merging units on threads (AtDefine+once, cross-unit): {:.1} ms (median of {repeat}), program peak heap {:.1} MB, objects {} = {} bytes; peak heap per unit alone {} MB; plan: {} classes across units, {} removed, {} thunked, {} promoted, {} references redirected; merged in the units themselves {own}; {reused} compiles reused",
        msf(unit_medians[1]),
        mb(merging_units.peak_heap),
        sizes(merging_units),
        object_sum(merging_units),
        per_unit(&per_unit_merging),
        merging_units.classes,
        c.removed,
        c.thunked,
        c.promoted,
        c.redirected,
    );
    let heap_ratio = max(&per_unit_merging) as f64 / max(&per_unit_plain).max(1) as f64;
    let unit_ratios: Vec<f64> = per_unit_merging
        .iter()
        .zip(&per_unit_plain)
        .map(|(&m, &p)| m as f64 / p.max(1) as f64)
        .collect();
    let worst = unit_ratios.iter().copied().fold(0.0, f64::max);
    println!(
        "{label}: {UNITS} merging units / {UNITS} plain units: time {:.3}x, program peak heap {:.3}x, objects {:.3}x, peak heap per unit (largest) {:.3}x, unit by unit {}{}",
        unit_medians[1].as_secs_f64() / unit_medians[0].as_secs_f64(),
        merging_units.peak_heap as f64 / plain_units.peak_heap.max(1) as f64,
        object_sum(merging_units) as f64 / object_sum(plain_units).max(1) as f64,
        heap_ratio,
        unit_ratios
            .iter()
            .map(|r| format!("{r:.3}x"))
            .collect::<Vec<_>>()
            .join(" / "),
        if heap_ratio.max(worst) <= 1.10 {
            " (<= 1.10x)"
        } else {
            " (OVER 1.10x)"
        },
    );
    if markdown {
        let ratio = |a: f64, b: f64| format!(" ({:.2}×)", a / b.max(f64::MIN_POSITIVE));
        for ((variant, m), time) in variants.iter().zip(&last).zip(&medians) {
            let first = matches!(variant, Variant::Plain);
            let r = |a: f64, b: f64| if first { String::new() } else { ratio(a, b) };
            let name = match variant {
                Variant::Plain => "plain `ObjectModule`",
                Variant::Merging(CompileMode::AtDefine, true) => "`AtDefine`, compile once",
                Variant::Merging(CompileMode::AtDefine, false) => "`AtDefine`",
                Variant::Merging(..) => "`AtFinish`",
                Variant::NoDuplicates => "`AtDefine`, compile once, duplicates not compiled",
            };
            println!(
                "| {label} | {name} | {} ms{} | {:.1} MB{} | {}{} | {} |",
                thousands(msf(*time).round() as usize),
                r(msf(*time), msf(plain_time)),
                mb(m.peak_heap),
                r(m.peak_heap as f64, plain.peak_heap as f64),
                thousands(m.object.len()),
                r(m.object.len() as f64, plain.object.len() as f64),
                if first {
                    String::new()
                } else if matches!(variant, Variant::Merging(CompileMode::AtDefine, true)) {
                    format!("{} ({} compiles reused)", thousands(m.merged), m.reused)
                } else if matches!(variant, Variant::NoDuplicates) {
                    format!("{} ({} not compiled)", thousands(m.merged), m.reused)
                } else {
                    thousands(m.merged)
                },
            );
        }
        println!(
            "| {label} | {UNITS} plain units on threads | {} ms | {:.1} MB per unit, {:.1} MB all | {} | |",
            thousands(msf(unit_medians[0]).round() as usize),
            mb(max(&per_unit_plain)),
            mb(plain_units.peak_heap),
            thousands(object_sum(plain_units)),
        );
        println!(
            "| {label} | {UNITS} units on threads, cross-unit merging | {} ms{} | {:.1} MB per unit{}, {:.1} MB all | {}{} | {} in units + {} across ({} compiles reused) |",
            thousands(msf(unit_medians[1]).round() as usize),
            ratio(msf(unit_medians[1]), msf(unit_medians[0])),
            mb(max(&per_unit_merging)),
            ratio(max(&per_unit_merging) as f64, max(&per_unit_plain) as f64),
            mb(merging_units.peak_heap),
            thousands(object_sum(merging_units)),
            ratio(
                object_sum(merging_units) as f64,
                object_sum(plain_units) as f64
            ),
            thousands(own),
            thousands(c.merged()),
            reused,
        );
    }
    Ok(())
}

/// The header of the markdown table [`module_bench`] prints rows of.
pub fn table_header() {
    println!("| input | build | define → objects | peak heap | object bytes | merged |");
    println!("|---|---|---:|---:|---:|---:|");
}

/// `n` with thousands separated by commas.
fn thousands(n: usize) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// `refine`: defines the input through one configuration, `plain` (an
/// `ObjectModule`), `at-define` (`MergingModule<ObjectModule>` compiling at
/// define, default options) or `at-define-fresh` (the same compiling every
/// function, compile-once off), the fastest of `repeat` runs. One configuration per
/// process, so that `valgrind --tool=callgrind` counts the instructions of one
/// (`benches/refine_bench.sh` runs both and prints the ratio).
pub fn refine_bench(
    label: &str,
    module: &FunctionSet,
    configuration: &str,
    repeat: usize,
) -> anyhow::Result<()> {
    let variant = match configuration {
        "plain" => Variant::Plain,
        "at-define" => Variant::Merging(CompileMode::AtDefine, true),
        "at-define-fresh" => Variant::Merging(CompileMode::AtDefine, false),
        other => anyhow::bail!("unknown configuration {other} (plain, at-define, at-define-fresh)"),
    };
    let (functions, names) = prepared(module);
    let mut best: Option<Measured> = None;
    for _ in 0..repeat.max(1) {
        let m = run_variant(variant, &functions, &names)?;
        if best.as_ref().is_none_or(|b| m.time < b.time) {
            best = Some(m);
        }
    }
    let best = best.context("no run")?;
    println!(
        "{label} {configuration}: {} functions, {:.1} ms, {} merged, {} object bytes",
        functions.len(),
        best.time.as_secs_f64() * 1e3,
        best.merged,
        best.object.len()
    );
    Ok(())
}
