//! `similar` and `size-model`: what similar merging costs against Cranelift's
//! compile, and the size model that prices it.
//!
//! `similar INPUT...` takes each input as one program and times what `--similar`
//! adds, on a pool of ONE thread: the identical merge asked for the similar
//! merge's fingerprints (`MergeOptions::similar_fingerprints`) followed by the
//! similar merge on its outcome (`SimilarPass::after`), less the
//! identical merge alone; by the size model (`Pricing::Modeled`, the default) and
//! by compiling every candidate (`Pricing::Compiled`); against a single-threaded
//! Cranelift compile of the program's functions (`compile_all`), all in turn in
//! each of `--repeat` rounds (a compile before each merge, so that no merge finds
//! the data of the one before it in the caches), and prints similar ÷ compile for the fastest of
//! each: in wall time, and in the thread's CPU time (Linux; which waiting for a
//! core does not count: the steadier of the two on a busy machine).
//!
//! `size-model INPUT...` refits the size model: every function of every input,
//! and the merged bodies and entry points of the groups merged by compiled sizes,
//! are compiled (in parallel: this is not a timing) and the weighted least-squares
//! fit over all of them is printed as the Rust table to paste into
//! `src/similar/size_model.rs`. Then, per program, the error of the model built in
//! and of the fresh fit: the mean absolute percentage error of predicted against
//! compiled bytes over the program's functions, and over the similar groups merged
//! by compiled sizes, of the bytes each saves (predicted saving against compiled
//! saving), with the totals; and the groups merged by compiled sizes but not by
//! the model (default options), and the other way round.

use crate::measure::{compile_all, live_bytes, peak_bytes, reset_peak};
use anyhow::bail;
use clif_merge::similar::{Pricing, SimilarOptions, SimilarOutcome, SimilarPass};
use clif_merge::testing::{Feature, SizeFeatures, SizeModel, merge_similar_for, similar_census};
use clif_merge::testing::{compiled_size, expand_inputs, host_isa, load};
use clif_merge::{FunctionSet, MergeOptions, merge_functions};
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::{OwnedTargetIsa, TargetIsa};
use rayon::prelude::*;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Loads one program (a file or a directory of files).
pub(crate) fn load_program(input: &PathBuf) -> anyhow::Result<FunctionSet> {
    let files = expand_inputs(std::slice::from_ref(input)).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(load(&files).map_err(|e| anyhow::anyhow!("{e}"))?.functions)
}

/// The program's name: its last path component.
pub(crate) fn program_name(input: &std::path::Path) -> String {
    input.file_name().map_or_else(
        || input.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// CPU time the calling thread has run so far (Linux:
/// `clock_gettime(CLOCK_THREAD_CPUTIME_ID)`), or `None` elsewhere. Unlike wall time
/// it does not count the time the thread waited for a core, so it stays comparable
/// while other processes compete for the machine.
#[cfg(target_os = "linux")]
fn thread_cpu_time() -> Option<Duration> {
    let mut now = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `clock_gettime` writes one `timespec` through the pointer, which
    // points to a live, writable `timespec`.
    let status = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut now) };
    let seconds = u64::try_from(now.tv_sec).ok()?;
    let nanos = u32::try_from(now.tv_nsec).ok()?;
    (status == 0).then(|| Duration::new(seconds, nanos))
}

/// Without a thread CPU clock: `None`.
#[cfg(not(target_os = "linux"))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

/// Wall and CPU time of `f` on the calling thread, with its result.
fn timed<R>(f: impl FnOnce() -> R) -> (Duration, Option<Duration>, R) {
    let cpu = thread_cpu_time();
    let start = Instant::now();
    let result = f();
    let wall = start.elapsed();
    let cpu = cpu.zip(thread_cpu_time()).map(|(a, b)| b.saturating_sub(a));
    (wall, cpu, result)
}

/// The fastest of some runs: wall time and thread CPU time, each the minimum.
#[derive(Copy, Clone)]
struct Best {
    wall: Duration,
    cpu: Option<Duration>,
}

impl Best {
    fn new() -> Self {
        Self {
            wall: Duration::MAX,
            cpu: None,
        }
    }

    fn add(&mut self, wall: Duration, cpu: Option<Duration>) {
        self.wall = self.wall.min(wall);
        self.cpu = match (self.cpu, cpu) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    /// `self` as a percentage of `of`: (wall, CPU).
    fn percent_of(&self, of: &Best) -> String {
        let wall = 100.0 * self.wall.as_secs_f64() / of.wall.as_secs_f64();
        match self.cpu.zip(of.cpu) {
            Some((a, b)) => format!(
                "{wall:.2}% | {:.2}%",
                100.0 * a.as_secs_f64() / b.as_secs_f64()
            ),
            None => format!("{wall:.2}% | -"),
        }
    }

    /// `self` less `other`, each the fastest of its runs.
    fn minus(&self, other: &Best) -> Best {
        Best {
            wall: self.wall.saturating_sub(other.wall),
            cpu: self.cpu.zip(other.cpu).map(|(a, b)| a.saturating_sub(b)),
        }
    }
}

/// One program measured: compile, and the similar merge under each pricing asked
/// for (with the number of groups it merged), each the fastest of the rounds.
struct Measured {
    compile: Best,
    pricings: Vec<(Best, usize)>,
}

/// Compile and the similar merge under each of `pricings`, measured in turn in
/// each of `repeat` rounds (so that a change of load affects them alike), the
/// similar merge on `pool`.
fn measure_program(
    module: &FunctionSet,
    pool: &rayon::ThreadPool,
    repeat: usize,
    pricings: &[Pricing],
) -> anyhow::Result<Measured> {
    let alone_options = MergeOptions::default();
    let with_options = MergeOptions::default().with_similar_fingerprints(true);
    let isa = clif_merge::testing::host_isa();
    let mut alone = Best::new();
    let mut both = vec![(Best::new(), 0); pricings.len()];
    let mut compile = Best::new();
    for _ in 0..repeat.max(1) {
        let (wall, cpu, result) = timed(|| compile_all(module));
        result?;
        compile.add(wall, cpu);
        let (wall, cpu, _) = pool.install(|| timed(|| merge_functions(module, &alone_options)));
        alone.add(wall, cpu);
        for (&pricing, (best, groups)) in pricings.iter().zip(&mut both) {
            // Each merge runs right after a compile, as the identical merge alone
            // did: neither finds the other's data in the caches.
            let (wall, cpu, result) = timed(|| compile_all(module));
            result?;
            compile.add(wall, cpu);
            let options = SimilarOptions::default().with_pricing(pricing);
            let (wall, cpu, pass) = pool.install(|| {
                timed(|| {
                    let outcome = merge_functions(module, &with_options);
                    SimilarPass::after(module, &outcome, &options, isa.as_deref())
                })
            });
            best.add(wall, cpu);
            *groups = pass.outcome().groups.len();
        }
    }
    Ok(Measured {
        compile,
        pricings: both
            .into_iter()
            .map(|(best, groups)| (best.minus(&alone), groups))
            .collect(),
    })
}

/// `similar`: the similar merge on one thread against compile on one thread,
/// by the model and by compiling every candidate.
/// With `json`, one JSON line per program instead, with the model's pricing only
/// (what `benches/compare.sh` reads): `similar_ms` and the `compile_ms` it was
/// measured against, wall time.
pub fn similar_command(inputs: &[PathBuf], repeat: usize, json: bool) -> anyhow::Result<()> {
    if inputs.is_empty() {
        bail!("no inputs given");
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let pricings: &[Pricing] = if json {
        &[Pricing::Modeled]
    } else {
        println!(
            "| program | functions | compile, wall / CPU | model, wall / CPU | ÷ compile, wall | ÷ compile, CPU | groups | compiled, wall / CPU | ÷ compile, wall | ÷ compile, CPU | groups |"
        );
        println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        &[Pricing::Modeled, Pricing::Compiled]
    };
    for input in inputs {
        let module = load_program(input)?;
        let Measured { compile, pricings } = measure_program(&module, &pool, repeat, pricings)?;
        if json {
            println!(
                "{{\"input\":{:?},\"similar_ms\":{:.3},\"similar_compile_ms\":{:.3}}}",
                input.display().to_string(),
                crate::ms(pricings[0].0.wall),
                crate::ms(compile.wall)
            );
            continue;
        }
        let show = |b: &Best| {
            format!(
                "{:.1} / {} ms",
                crate::ms(b.wall),
                b.cpu.map_or("-".into(), |c| format!("{:.1}", crate::ms(c)))
            )
        };
        let [(modeled, modeled_groups), (compiled, compiled_groups)] = [pricings[0], pricings[1]];
        println!(
            "| {} | {} | {} | {} | {} | {modeled_groups} | {} | {} | {compiled_groups} |",
            program_name(input),
            module.len(),
            show(&compile),
            show(&modeled),
            modeled.percent_of(&compile),
            show(&compiled),
            compiled.percent_of(&compile),
        );
    }
    Ok(())
}

/// `similar-phases INPUT...`: where the similar merge's time goes, per program, on
/// a pool of one thread: each phase's wall time in the fastest of `repeat` runs
/// (`SimilarPass::after_with_phases`; "fingerprints" is the identical merge asked
/// for them less the identical merge alone, CPU time), each also as a share of a one-thread
/// compile measured in the same rounds; and the peak heap the similar merge adds
/// (above what was live after the identical merge, its output included) against
/// the heap the parsed functions take; the similar merge runs with `options`.
pub fn phases_command(
    inputs: &[PathBuf],
    repeat: usize,
    options: &SimilarOptions,
) -> anyhow::Result<()> {
    if inputs.is_empty() {
        bail!("no inputs given");
    }
    let pool = rayon::ThreadPoolBuilder::new().num_threads(1).build()?;
    let isa = clif_merge::testing::host_isa();
    let alone_options = MergeOptions::default();
    let with_options = MergeOptions::default().with_similar_fingerprints(true);
    println!("| program | phase | ms | ÷ compile |");
    println!("|---|---|---:|---:|");
    for input in inputs {
        let before = live_bytes();
        let module = load_program(input)?;
        let parsed = live_bytes().saturating_sub(before);
        let mut compile = Best::new();
        let mut alone = Best::new();
        let mut with = Best::new();
        let mut total = Best::new();
        let mut phases: Vec<(&'static str, Duration)> = Vec::new();
        let mut fastest: Option<Duration> = None;
        for _ in 0..repeat.max(1) {
            let (wall, cpu, result) = timed(|| compile_all(&module));
            result?;
            compile.add(wall, cpu);
            let (wall, cpu, _) =
                pool.install(|| timed(|| merge_functions(&module, &alone_options)));
            alone.add(wall, cpu);
            // The identical merge asked for fingerprints runs after a compile
            // too, as it did alone: run right after it, it would find its data
            // in the caches and the fingerprints would seem to cost nothing.
            let (wall, cpu, result) = timed(|| compile_all(&module));
            result?;
            compile.add(wall, cpu);
            pool.install(|| {
                let (wall, cpu, outcome) = timed(|| merge_functions(&module, &with_options));
                with.add(wall, cpu);
                let (wall, cpu, (_, times)) = timed(|| {
                    SimilarPass::after_with_phases(&module, &outcome, options, isa.as_deref())
                });
                total.add(wall, cpu);
                // The phases of the fastest round, all from that one round, so
                // that the parts never exceed the phases that hold them (a
                // minimum taken per phase could: compiling's from one round,
                // planning's from another).
                let this = cpu.unwrap_or(wall);
                if fastest.is_none_or(|best| this < best) {
                    fastest = Some(this);
                    phases = times.0;
                }
            });
        }
        // One more run for the heap: what the similar merge adds at its peak above
        // what was live once the identical merge had finished.
        let (peak, merged) = pool.install(|| {
            let outcome = merge_functions(&module, &with_options);
            let before = live_bytes();
            reset_peak();
            let pass = SimilarPass::after(&module, &outcome, options, isa.as_deref());
            (
                peak_bytes().saturating_sub(before),
                pass.outcome().groups.len(),
            )
        });
        let name = program_name(input);
        let compile_cpu = compile.cpu.unwrap_or(compile.wall);
        let row = |phase: &str, time: Duration| {
            println!(
                "| {name} | {phase} | {:.2} | {:.2}% |",
                crate::ms(time),
                100.0 * time.as_secs_f64() / compile_cpu.as_secs_f64()
            );
        };
        row("compile (one thread)", compile_cpu);
        let fingerprints = with.minus(&alone);
        row(
            "fingerprints",
            fingerprints.cpu.unwrap_or(fingerprints.wall),
        );
        for (phase, time) in &phases {
            row(phase, *time);
        }
        row("similar merge, all", total.cpu.unwrap_or(total.wall));
        println!(
            "| {name} | peak heap: similar merge / parsed functions | {:.1} / {:.1} MB | {:.2}x ({merged} groups) |",
            peak as f64 / 1e6,
            parsed as f64 / 1e6,
            peak as f64 / parsed.max(1) as f64
        );
    }
    Ok(())
}

/// `similar-census INPUT...`: why the similar merge (default options, host ISA)
/// left each function alone, per program, as a markdown table: per reason, the
/// functions it keeps apart and the code bytes at stake (predicted by the size
/// model; `CensusRow::at_stake`), also as a share of the program's predicted code.
/// With `align_cfg`, the merge also aligns across differing terminators
/// (`SimilarOptions::align_cfg`); without `one_sided`, it refuses one-sided
/// escapes (`SimilarOptions::align_one_sided`).
pub fn census_command(inputs: &[PathBuf], align_cfg: bool, one_sided: bool) -> anyhow::Result<()> {
    let (isa, model) = host_and_model(inputs)?;
    println!(
        "| program | reason | functions | bytes of those functions | bytes at stake | at stake, share of program |"
    );
    println!("|---|---|---:|---:|---:|---:|");
    for input in inputs {
        let module = load_program(input)?;
        let program: u64 = module.iter().map(|(_, d)| model.predict(&d.func)).sum();
        let options = SimilarOptions::default()
            .with_align_cfg(align_cfg)
            .with_align_one_sided(one_sided);
        let rows = similar_census(&module, &options, Some(&*isa));
        for row in rows {
            println!(
                "| {} | {} | {} | {} | {} | {:.2}% |",
                program_name(input),
                row.reason,
                row.functions,
                row.bytes,
                row.at_stake,
                100.0 * row.at_stake as f64 / program.max(1) as f64
            );
        }
    }
    Ok(())
}

/// The host's ISA and its size model, for the commands that read `inputs` (at
/// least one).
pub(crate) fn host_and_model(inputs: &[PathBuf]) -> anyhow::Result<(OwnedTargetIsa, SizeModel)> {
    if inputs.is_empty() {
        bail!("no inputs given");
    }
    let isa = host_isa().ok_or_else(|| anyhow::anyhow!("no Cranelift backend for this host"))?;
    let model =
        SizeModel::for_isa(&*isa).ok_or_else(|| anyhow::anyhow!("no size model for this host"))?;
    Ok((isa, model))
}

/// Compiled sizes of `functions` on `isa`, in parallel.
fn compiled_sizes(isa: &dyn TargetIsa, functions: &[&Function]) -> anyhow::Result<Vec<u64>> {
    functions
        .par_iter()
        .map(|f| compiled_size(isa, f).map_err(|e| anyhow::anyhow!("compiling {}: {e}", f.name)))
        .collect()
}

/// One program's samples for the fit, and its groups merged by compiled sizes.
struct ProgramSamples {
    name: String,
    /// The program's own functions: features and compiled bytes.
    functions: Vec<(SizeFeatures, u64)>,
    /// Per merged group: the features of its members, of its merged body and entry
    /// points, and its compiled sizes before and after.
    groups: Vec<GroupSample>,
    /// Groups (member names) merged by compiled sizes only, and by the model only.
    differences: (Vec<String>, Vec<String>),
}

/// A group merged by compiled sizes, for the error of predicted savings.
struct GroupSample {
    members: Vec<SizeFeatures>,
    merged: Vec<SizeFeatures>,
    before: u64,
    after: u64,
}

/// Compiles a program and its compiled-priced similar merge; with the samples of
/// its merged bodies and entry points.
fn program_samples(
    isa: &dyn TargetIsa,
    input: &PathBuf,
) -> anyhow::Result<(ProgramSamples, Vec<(SizeFeatures, u64)>)> {
    let module = load_program(input)?;
    let functions: Vec<&Function> = module.iter().map(|(_, d)| &*d.func).collect();
    let sizes = compiled_sizes(isa, &functions)?;
    let options = SimilarOptions::default().with_pricing(Pricing::Compiled);
    let outcome: SimilarOutcome = merge_similar_for(&module, &options, Some(isa));
    let mut groups = Vec::new();
    for (group, merged) in outcome.groups.iter().zip(&outcome.merged_bodies) {
        let members = group
            .members
            .iter()
            .map(|&m| SizeFeatures::of(&module.get(m).func))
            .collect();
        let mut after: Vec<&Function> = vec![merged];
        after.extend(
            group
                .members
                .iter()
                .filter_map(|&m| outcome.entry_points.get(m)),
        );
        groups.push(GroupSample {
            members,
            merged: after.iter().map(|f| SizeFeatures::of(f)).collect(),
            before: group.size_before,
            after: group.size_after,
        });
    }
    let samples: Vec<(SizeFeatures, u64)> = functions
        .iter()
        .zip(&sizes)
        .map(|(f, &s)| (SizeFeatures::of(f), s))
        .collect();
    // The merged bodies and entry points join the fit; the error table is over the
    // program's own functions.
    let extra: Vec<&Function> = outcome
        .merged_bodies
        .iter()
        .chain(outcome.entry_points.iter().map(|(_, f)| f))
        .collect();
    let extra_samples = extra
        .iter()
        .map(|f| SizeFeatures::of(f))
        .zip(compiled_sizes(isa, &extra)?)
        .collect();
    let modeled = merge_similar_for(&module, &SimilarOptions::default(), Some(isa));
    let describe = |outcome: &SimilarOutcome| -> Vec<String> {
        outcome
            .groups
            .iter()
            .map(|g| {
                let names: Vec<String> =
                    g.members.iter().map(|&m| module.display_name(m)).collect();
                format!(
                    "{} ({} -> {} {:?})",
                    names.join(" "),
                    g.size_before,
                    g.size_after,
                    g.size_basis
                )
            })
            .collect()
    };
    let members = |outcome: &SimilarOutcome| -> Vec<Vec<_>> {
        outcome.groups.iter().map(|g| g.members.clone()).collect()
    };
    let (compiled_members, modeled_members) = (members(&outcome), members(&modeled));
    let only = |described: Vec<String>, mine: &[Vec<_>], other: &[Vec<_>]| -> Vec<String> {
        described
            .into_iter()
            .zip(mine)
            .filter(|(_, m)| !other.contains(m))
            .map(|(d, _)| d)
            .collect()
    };
    let differences = (
        only(describe(&outcome), &compiled_members, &modeled_members),
        only(describe(&modeled), &modeled_members, &compiled_members),
    );
    let program = ProgramSamples {
        name: program_name(input),
        functions: samples,
        groups,
        differences,
    };
    Ok((program, extra_samples))
}

/// The model's error on one program: (mean absolute % error over functions,
/// mean absolute % error of group savings, predicted total saving, compiled total
/// saving).
fn errors(model: &SizeModel, program: &ProgramSamples) -> (f64, f64, i64, i64) {
    let mut function_error = 0.0;
    for (features, bytes) in &program.functions {
        let predicted = model.predict_features(features) as f64;
        function_error += (predicted - *bytes as f64).abs() / (*bytes).max(1) as f64;
    }
    let function_error = 100.0 * function_error / program.functions.len().max(1) as f64;
    let (mut saving_error, mut predicted_total, mut compiled_total) = (0.0, 0i64, 0i64);
    for group in &program.groups {
        let before: u64 = group
            .members
            .iter()
            .map(|x| model.predict_features(x))
            .sum();
        let after: u64 = group.merged.iter().map(|x| model.predict_features(x)).sum();
        let predicted = before as i64 - after as i64;
        let compiled = group.before as i64 - group.after as i64;
        saving_error += (predicted - compiled).abs() as f64 / compiled.max(1) as f64;
        predicted_total += predicted;
        compiled_total += compiled;
    }
    let saving_error = 100.0 * saving_error / program.groups.len().max(1) as f64;
    (
        function_error,
        saving_error,
        predicted_total,
        compiled_total,
    )
}

/// `size-model`: refit the model on the inputs and print its error.
pub fn size_model_command(inputs: &[PathBuf]) -> anyhow::Result<()> {
    if inputs.is_empty() {
        bail!("no inputs given");
    }
    let Some(isa) = host_isa() else {
        bail!("no Cranelift backend for this host");
    };
    let mut programs = Vec::new();
    let mut samples = Vec::new();
    for input in inputs {
        let (program, extra) = program_samples(&*isa, input)?;
        samples.extend(program.functions.iter().cloned());
        samples.extend(extra);
        programs.push(program);
    }
    let Some(fitted) = SizeModel::fit(&samples) else {
        bail!("no samples");
    };
    println!(
        "// Fitted on {} samples ({} programs' functions, merged bodies and entry points), {}:",
        samples.len(),
        programs.len(),
        isa.triple()
    );
    println!(
        "const {}: [f64; FEATURES] = [",
        isa.triple().architecture.to_string().to_uppercase()
    );
    for feature in Feature::ALL {
        println!(
            "    {:.3}, // {feature:?}",
            fitted.coefficients[feature as usize]
        );
    }
    println!("];");
    let built_in = SizeModel::for_isa(&*isa);
    println!();
    println!(
        "| program | functions | model | function bytes: mean abs. error | groups | saving per group: mean abs. error | saving: predicted / compiled |"
    );
    println!("|---|---:|---|---:|---:|---:|---:|");
    for program in &programs {
        let models = built_in
            .iter()
            .map(|m| ("built in", m))
            .chain([("fresh fit", &fitted)]);
        for (which, model) in models {
            let (function_error, saving_error, predicted, compiled) = errors(model, program);
            println!(
                "| {} | {} | {which} | {function_error:.1}% | {} | {saving_error:.1}% | {predicted} / {compiled} |",
                program.name,
                program.functions.len(),
                program.groups.len(),
            );
        }
    }
    for program in &programs {
        let (compiled_only, modeled_only) = &program.differences;
        println!(
            "\n{}: {} groups merged by compiled sizes only, {} by the model only",
            program.name,
            compiled_only.len(),
            modeled_only.len()
        );
        for group in compiled_only {
            println!("  compiled only: {group}");
        }
        for group in modeled_only {
            println!("  model only:    {group}");
        }
    }
    Ok(())
}
