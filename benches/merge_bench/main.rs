//! `merge_bench`: measures the clif-merge pass, and writes benchmark modules.
//!
//! ```text
//! cargo bench --bench merge_bench                       # the default suite
//! cargo bench --bench merge_bench -- gen --functions 10000 --out DIR
//! cargo bench --bench merge_bench -- pass [--threads T] [--repeat K] [--copying] [--json] INPUT...
//! cargo bench --bench merge_bench -- compile INPUT...
//! cargo bench --bench merge_bench -- separate [--parts K] INPUT...
//! cargo bench --bench merge_bench -- refine --configuration plain|at-define|at-define-fresh [--repeat K] INPUT...
//! cargo bench --bench merge_bench -- module [--repeat K] [--markdown] [--label L] [--only V] INPUT...
//! cargo bench --bench merge_bench -- similar [--repeat K] PROGRAM...
//! cargo bench --bench merge_bench -- size-model PROGRAM...
//! cargo bench --bench merge_bench -- similar-phases [--repeat K] [--no-one-sided] [--align-blocks] [--align-anchors] [--align-sequence] PROGRAM...
//! cargo bench --bench merge_bench -- similar-census [--align-cfg] PROGRAM...
//! cargo bench --bench merge_bench -- similar-sequence PROGRAM...
//! ```
//!
//! `gen` writes `DIR/module.clif` and `DIR/module.ll`: the same random module as
//! CLIF and as LLVM IR, for a side-by-side run with `opt -passes=mergefunc`
//! (`benches/compare.sh`). `pass` parses the inputs (not timed), then runs the pass
//! `K` times and reports the fastest run split into its stages, the comparisons per
//! function, the heap the parsed functions take and the peak heap the pass adds.
//! The pass runs in place (`merge_functions_in_place`, on a copy made before the
//! clock starts), as a compiler that owns its functions runs it and as LLVM's
//! MergeFunctions works; `--copying` measures `merge_functions` instead, which
//! leaves the input untouched and copies every function it rewrites.
//! `compile` reports Cranelift's own compile time for the same functions.
//! `separate` measures separate compilation (issue 7): the inputs, split into `K`
//! parts (`summary::split_module`), are summarized (in parallel over the parts),
//! written and read back, and planned; it reports the parse time of the CLIF text
//! (the yardstick for the plan), summarize time, summary bytes against CLIF text
//! bytes, plan time split into resolve and partition, the cross-module classes
//! and decisions (removed, thunked, promoted), and stage 3: every part applying
//! its decisions, one after another (total and slowest part). `module` defines the
//! inputs through a plain `ObjectModule` and through `MergingModule<ObjectModule>`
//! in each compile mode on one thread, the median of `--repeat` runs, with and
//! without compile-once, then as three codegen units on threads, plain and with
//! cross-unit merging (`module_wrapper.rs`); `--markdown` adds the rows of a
//! markdown table labelled `--label` (`benches/build_table.sh` runs it over the
//! generated 10k program and the corpus); `--only V` runs one variant once and
//! nothing else, for a process of its own under callgrind (`module_wrapper::only`
//! lists the variants). `refine` defines the inputs through one of those
//! configurations only, for `benches/refine_bench.sh` (the cost of class
//! refinement on call chains and fans, one configuration per process so that
//! callgrind counts one). `similar` times the
//! similar merge against compile, both on one thread, and `size-model` refits the
//! size model that prices similar merging (`similar_cost.rs`). The
//! default suite (no arguments) generates 1k and 10k modules in memory and measures
//! them, and the corpus programs when `../shared/corpus` can be unpacked.
//!
//! A criterion harness was not used: the numbers wanted are a split of one pass
//! and heap high-water marks, on inputs too large to repeat hundreds of times, and
//! the same binary must serve the side-by-side runner.

mod generator;
mod measure;
mod module_wrapper;
mod prepared;
mod sequence_estimate;
mod similar_cost;

use anyhow::{Context as _, bail};
use clif_merge::similar::SimilarOptions;
use clif_merge::testing::{expand_inputs, load};
use clif_merge::{FunctionSet, MergeOptions};
use measure::{
    CountingAllocator, PassRun, Rewrite, compile_all, compile_all_on, live_bytes, run_pass,
    warm_pool,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

fn main() {
    if let Err(e) = run() {
        eprintln!("merge_bench: {e:#}");
        std::process::exit(2);
    }
}

/// Command-line options after the subcommand.
struct Options {
    inputs: Vec<PathBuf>,
    threads: Vec<usize>,
    repeat: usize,
    functions: usize,
    dup_rate: f64,
    near_rate: f64,
    seed: u64,
    out: Option<PathBuf>,
    json: bool,
    rewrite: Rewrite,
    parts: Vec<usize>,
    markdown: bool,
    /// `similar-census --align-cfg`: the merge also aligns across differing terminators.
    align_cfg: bool,
    /// `similar-census --no-one-sided` (and `similar-phases`): the merge refuses one-sided escapes
    /// (`SimilarOptions::align_one_sided` off).
    no_one_sided: bool,
    /// `similar-phases --align-blocks` (and `similar-census`): the merge also merges by block
    /// pairing (`SimilarOptions::align_blocks`).
    align_blocks: bool,
    /// `similar-phases --align-anchors`: the merge also cuts stretches at anchors
    /// (`SimilarOptions::align_anchors`).
    align_anchors: bool,
    /// `similar-phases --align-sequence`: the merge also merges by sequence
    /// alignment (`SimilarOptions::align_sequence`).
    align_sequence: bool,
    label: Option<String>,
    /// `refine --configuration`: `plain` or `at-define`.
    configuration: Option<String>,
    /// `module --only V`: run only variant `V` once (`module_wrapper::only`).
    only: Option<String>,
}

fn parse_options(args: &[String]) -> anyhow::Result<Options> {
    let mut o = Options {
        inputs: Vec::new(),
        threads: Vec::new(),
        repeat: 5,
        functions: 1000,
        dup_rate: 0.2,
        near_rate: 0.2,
        seed: 1,
        out: None,
        json: false,
        rewrite: Rewrite::InPlace,
        parts: Vec::new(),
        markdown: false,
        align_cfg: false,
        no_one_sided: false,
        align_blocks: false,
        align_anchors: false,
        align_sequence: false,
        label: None,
        configuration: None,
        only: None,
    };
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let mut value = |name: &str| {
            it.next()
                .cloned()
                .with_context(|| format!("{name} needs a value"))
        };
        match arg.as_str() {
            "--bench" => {}
            "--json" => o.json = true,
            "--markdown" => o.markdown = true,
            "--label" => o.label = Some(value("--label")?),
            "--configuration" => o.configuration = Some(value("--configuration")?),
            "--only" => o.only = Some(value("--only")?),
            "--copying" => o.rewrite = Rewrite::Copying,
            "--align-cfg" => o.align_cfg = true,
            "--no-one-sided" => o.no_one_sided = true,
            "--align-blocks" => o.align_blocks = true,
            "--align-anchors" => o.align_anchors = true,
            "--align-sequence" => o.align_sequence = true,
            "--threads" => o.threads.push(value("--threads")?.parse()?),
            "--repeat" => o.repeat = value("--repeat")?.parse()?,
            "--functions" => o.functions = value("--functions")?.parse()?,
            "--dup-rate" => o.dup_rate = value("--dup-rate")?.parse()?,
            "--near-rate" => o.near_rate = value("--near-rate")?.parse()?,
            "--seed" => o.seed = value("--seed")?.parse()?,
            "--parts" => o.parts.push(value("--parts")?.parse()?),
            "--out" => o.out = Some(PathBuf::from(value("--out")?)),
            flag if flag.starts_with("--") => bail!("unknown option {flag}"),
            input => o.inputs.push(PathBuf::from(input)),
        }
    }
    if o.threads.is_empty() {
        o.threads = vec![
            1,
            std::thread::available_parallelism().map_or(1, |n| n.get()),
        ];
        o.threads.dedup();
    }
    Ok(o)
}

fn run() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (command, rest) = match args.first().map(String::as_str) {
        Some(
            c @ ("gen" | "pass" | "compile" | "separate" | "module" | "similar" | "size-model"
            | "similar-census" | "similar-phases" | "similar-sequence" | "suite" | "refine"),
        ) => (c, &args[1..]),
        _ => ("suite", &args[..]),
    };
    let options = parse_options(rest)?;
    match command {
        "gen" => gen_command(&options),
        "pass" => {
            let (module, parsed_bytes) = load_inputs(&options.inputs)?;
            report_pass(&label(&options.inputs), &module, parsed_bytes, &options)
        }
        "separate" => separate(&options),
        "similar" => similar_cost::similar_command(&options.inputs, options.repeat, options.json),
        "size-model" => similar_cost::size_model_command(&options.inputs),
        "similar-census" => {
            similar_cost::census_command(&options.inputs, options.align_cfg, !options.no_one_sided)
        }
        "similar-sequence" => sequence_estimate::sequence_command(&options.inputs),
        "similar-phases" => similar_cost::phases_command(
            &options.inputs,
            options.repeat,
            &SimilarOptions::default()
                .with_align_one_sided(!options.no_one_sided)
                .with_align_blocks(options.align_blocks)
                .with_align_anchors(options.align_anchors)
                .with_align_sequence(options.align_sequence),
        ),
        "module" => {
            let (module, _) = load_inputs(&options.inputs)?;
            let label = options
                .label
                .clone()
                .unwrap_or_else(|| label(&options.inputs));
            if let Some(variant) = &options.only {
                return module_wrapper::only(&label, &module, variant);
            }
            if options.markdown {
                module_wrapper::table_header();
            }
            module_wrapper::module_bench(&label, &module, options.repeat, options.markdown)
        }
        "refine" => {
            let (module, _) = load_inputs(&options.inputs)?;
            let configuration = options.configuration.as_deref().unwrap_or("at-define");
            module_wrapper::refine_bench(
                &label(&options.inputs),
                &module,
                configuration,
                options.repeat,
            )
        }
        "compile" => {
            let (module, _) = load_inputs(&options.inputs)?;
            let (time, bytes) = compile_all(&module)?;
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let parallel = compile_all_on(&module, cores)?;
            let label = label(&options.inputs);
            if options.json {
                println!(
                    "{{\"input\":{label:?},\"functions\":{},\"compile_ms\":{:.3},\"cores\":{cores},\"compile_all_cores_ms\":{:.3},\"code_bytes\":{bytes}}}",
                    module.len(),
                    ms(time),
                    ms(parallel)
                );
            } else {
                println!(
                    "{label}: Cranelift compile of {} functions: {:.1} ms on one thread, {:.1} ms on {cores} threads, {bytes} code bytes",
                    module.len(),
                    ms(time),
                    ms(parallel)
                );
            }
            Ok(())
        }
        _ => suite(&options),
    }
}

fn label(inputs: &[PathBuf]) -> String {
    inputs
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(" ")
}

fn gen_command(o: &Options) -> anyhow::Result<()> {
    let out = o.out.as_ref().context("gen needs --out DIR")?;
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let module = generator::generate(&generator::GenConfig {
        functions: o.functions,
        dup_rate: o.dup_rate,
        near_rate: o.near_rate,
        seed: o.seed,
    });
    std::fs::write(out.join("module.clif"), &module.clif)?;
    std::fs::write(out.join("module.ll"), &module.ll)?;
    println!(
        "wrote {}/module.{{clif,ll}}: {} functions ({} exact duplicates, {} near duplicates), {} CLIF instructions, {:.1} MB CLIF, {:.1} MB LLVM IR",
        out.display(),
        module.functions,
        module.exact_duplicates,
        module.near_duplicates,
        module.clif_instructions,
        module.clif.len() as f64 / 1e6,
        module.ll.len() as f64 / 1e6
    );
    Ok(())
}

/// Parses inputs and returns the module with the heap bytes it holds.
fn load_inputs(inputs: &[PathBuf]) -> anyhow::Result<(FunctionSet, usize)> {
    if inputs.is_empty() {
        bail!("no inputs given");
    }
    let files = expand_inputs(inputs).map_err(|e| anyhow::anyhow!("{e}"))?;
    let before = live_bytes();
    let loaded = load(&files).map_err(|e| anyhow::anyhow!("{e}"))?;
    let module = loaded.functions;
    drop(loaded.locations);
    let parsed = live_bytes().saturating_sub(before);
    Ok((module, parsed))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// Runs the pass `repeat` times per thread count and prints the fastest run.
fn report_pass(
    label: &str,
    module: &FunctionSet,
    parsed_bytes: usize,
    o: &Options,
) -> anyhow::Result<()> {
    let options = MergeOptions::default();
    let mut first: Option<(usize, usize)> = None;
    for &threads in &o.threads {
        let pool = warm_pool(threads)?;
        let mut best: Option<PassRun> = None;
        for _ in 0..o.repeat.max(1) {
            let run = run_pass(module, &options, &pool, false, o.rewrite);
            if best.as_ref().is_none_or(|b| run.total < b.total) {
                best = Some(run);
            }
        }
        let Some(mut run) = best else { continue };
        // One more run, counting the heap, for the memory numbers.
        run.peak_extra = run_pass(module, &options, &pool, true, o.rewrite).peak_extra;
        // Every thread count must find the same merges.
        match first {
            None => first = Some((run.merged, run.classes)),
            Some(f) if f != (run.merged, run.classes) => {
                bail!("{label}: {threads} threads found different merges than 1 thread")
            }
            Some(_) => {}
        }
        let s = &run.stats;
        let per_fn = s.partition.comparisons as f64 / s.functions.max(1) as f64;
        if o.json {
            println!(
                "{{\"input\":{label:?},\"threads\":{threads},\"functions\":{},\"instructions\":{},\"pass_ms\":{:.3},\"hash_ms\":{:.3},\"encode_ms\":{:.3},\"tree_ms\":{:.3},\"refine_ms\":{:.3},\"apply_ms\":{:.3},\"candidates\":{},\"comparisons\":{},\"comparisons_per_function\":{per_fn:.3},\"parsed_bytes\":{parsed_bytes},\"pass_peak_bytes\":{},\"classes\":{},\"merged\":{}}}",
                s.functions,
                s.instructions,
                ms(run.total),
                ms(s.time_hash),
                ms(s.time_encode),
                ms(s.time_tree),
                ms(s.time_refine),
                ms(s.time_apply),
                s.partition.candidates,
                s.partition.comparisons,
                run.peak_extra,
                run.classes,
                run.merged
            );
        } else {
            println!(
                "{label} [{threads} thread{}]: {} functions, {} instructions; pass {:.2} ms = hash {:.2} + encode {:.2} + tree {:.2} + refine {:.2} + apply {:.2}; {} candidates, {:.2} comparisons/function; heap: parsed functions {:.1} MB, pass peak {:.1} MB ({:.2}x); {} classes, {} merged",
                if threads == 1 { "" } else { "s" },
                s.functions,
                s.instructions,
                ms(run.total),
                ms(s.time_hash),
                ms(s.time_encode),
                ms(s.time_tree),
                ms(s.time_refine),
                ms(s.time_apply),
                s.partition.candidates,
                per_fn,
                parsed_bytes as f64 / 1e6,
                run.peak_extra as f64 / 1e6,
                run.peak_extra as f64 / parsed_bytes.max(1) as f64,
                run.classes,
                run.merged
            );
        }
    }
    Ok(())
}

/// The default suite: generated 1k and 10k modules, then the corpus if present.
fn suite(o: &Options) -> anyhow::Result<()> {
    let dir = std::env::temp_dir().join(format!("merge_bench.{}", std::process::id()));
    for functions in [1_000, 10_000] {
        let out = dir.join(format!("gen{functions}"));
        let sub = Options {
            functions,
            out: Some(out.clone()),
            ..parse_options(&[])?
        };
        gen_command(&sub)?;
        let inputs = [out.join("module.clif")];
        let (module, parsed) = load_inputs(&inputs)?;
        report_pass(&format!("generated N={functions}"), &module, parsed, o)?;
    }
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/corpus");
    if corpus.join("unpack").exists() {
        let unpacked = dir.join("corpus");
        std::fs::create_dir_all(&unpacked)?;
        let status = std::process::Command::new("sh")
            .arg(corpus.join("unpack"))
            .arg(&unpacked)
            .stdout(std::process::Stdio::null())
            .status()?;
        if status.success() {
            let mut programs: Vec<PathBuf> = std::fs::read_dir(&unpacked)?
                .filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.is_dir())
                .collect();
            programs.sort();
            for program in programs {
                let (module, parsed) = load_inputs(std::slice::from_ref(&program))?;
                let name = program
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned());
                report_pass(&name.unwrap_or_default(), &module, parsed, o)?;
            }
        }
    }
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}

/// `separate`: summarize, write, read and plan the inputs split into parts.
fn separate(o: &Options) -> anyhow::Result<()> {
    use clif_merge::separate::{Summary, apply_decisions, plan_program, summarize_modules};
    use clif_merge::testing::split_module;
    use std::time::Instant;
    if o.inputs.is_empty() {
        bail!("no inputs given");
    }
    let files = expand_inputs(&o.inputs).map_err(|e| anyhow::anyhow!("{e}"))?;
    let text_bytes: u64 = files
        .iter()
        .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
        .sum();
    let start = Instant::now();
    let module = load(&files).map_err(|e| anyhow::anyhow!("{e}"))?.functions;
    let parse = start.elapsed();
    let options = MergeOptions::default();
    let parts = if o.parts.is_empty() {
        vec![4]
    } else {
        o.parts.clone()
    };
    for k in parts {
        let (_, split) = split_module(&module, k);
        let named: Vec<(String, FunctionSet)> = split
            .into_iter()
            .enumerate()
            .map(|(i, part)| (format!("part{i}"), part))
            .collect();
        let start = Instant::now();
        let summaries = summarize_modules(&named, &options);
        let summarize = start.elapsed();
        let bytes: Vec<Vec<u8>> = summaries.iter().map(Summary::to_bytes).collect();
        let summary_bytes: usize = bytes.iter().map(Vec::len).sum();
        let start = Instant::now();
        let read: Vec<Summary> = bytes
            .iter()
            .map(|b| Summary::from_bytes(b))
            .collect::<Result<_, _>>()?;
        let read_time = start.elapsed();
        let start = Instant::now();
        let plan = plan_program(&read).map_err(|e| anyhow::anyhow!("{e}"))?;
        let plan_time = start.elapsed();
        let decisions: usize = plan.decisions.iter().map(|d| d.decisions.len()).sum();
        let counts = plan.counts();
        // Stage 3, part by part on this thread: the total, and the slowest part.
        let (mut apply_total, mut apply_max) = (Duration::ZERO, Duration::ZERO);
        for part_decisions in &plan.decisions {
            // The plan lists modules by name (`part10` before `part2`).
            let Some((_, part)) = named
                .iter()
                .find(|(name, _)| *name == part_decisions.module)
            else {
                bail!("no part {}", part_decisions.module);
            };
            let start = Instant::now();
            apply_decisions(part, &options, part_decisions)
                .map_err(|e| anyhow::anyhow!("{}: {e}", part_decisions.module))?;
            let time = start.elapsed();
            apply_total += time;
            apply_max = apply_max.max(time);
        }
        let line = format!(
            "{}: {} functions in {k} parts: parse {:.1} ms; summarize {:.1} ms; summaries {summary_bytes} bytes for {text_bytes} bytes of CLIF text ({:.3}); read {:.1} ms; plan {:.1} ms (resolve {:.1}, partition {:.1}), {} comparisons; {} classes across modules, {decisions} decisions ({} removed, {} thunked, {} promoted, {} references redirected); apply {:.1} ms in all parts (slowest part {:.1} ms)",
            label(&o.inputs),
            module.len(),
            ms(parse),
            ms(summarize),
            summary_bytes as f64 / text_bytes.max(1) as f64,
            ms(read_time),
            ms(plan_time),
            ms(plan.time_resolve),
            ms(plan.time_partition),
            plan.comparisons,
            plan.classes.len(),
            counts.removed,
            counts.thunked,
            counts.promoted,
            counts.redirected,
            ms(apply_total),
            ms(apply_max),
        );
        if o.json {
            println!(
                "{{\"input\":{:?},\"functions\":{},\"parts\":{k},\"parse_ms\":{:.3},\"summarize_ms\":{:.3},\"summary_bytes\":{summary_bytes},\"text_bytes\":{text_bytes},\"read_ms\":{:.3},\"plan_ms\":{:.3},\"classes\":{},\"decisions\":{decisions},\"apply_ms\":{:.3},\"apply_max_part_ms\":{:.3}}}",
                label(&o.inputs),
                module.len(),
                ms(parse),
                ms(summarize),
                ms(read_time),
                ms(plan_time),
                plan.classes.len(),
                ms(apply_total),
                ms(apply_max),
            );
        } else {
            println!("{line}");
        }
    }
    Ok(())
}
