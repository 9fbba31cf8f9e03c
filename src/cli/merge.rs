//! The merge command (`clif-merge [OPTIONS] FILE...`): its arguments, and the run
//! that loads the inputs, runs the pass (and the similar merge, and validation)
//! and prints the result.

use super::error::CliError;
use super::load::{InputTarget, LoadedModule, ModuleOptions, expand_inputs, load_showing};
use super::progress::{Meter, Phase};
use super::report::{
    check_printable, clif_text, json_report, similar_json, similar_stats_line, stats_text,
    validation_json, validation_stats_line,
};
use crate::identical::merge_functions;
use crate::identical::rewrite::OutputEntry;
use crate::ir::{FunctionSet, SymbolName};
use crate::similar::{Pricing, SimilarOptions, SimilarPass};
use crate::validate::{
    DEFAULT_PAIR_STEPS, ValidationOptions, ValidationReport, ValidatorCrash,
    validate_similar_with_progress, validate_with_progress,
};
use clap::{Parser, ValueEnum};
use cranelift_codegen::ir::Function;
use std::collections::HashMap;
use std::path::PathBuf;

/// The tool's one-line description.
pub(crate) const ABOUT: &str = "Merge identical functions in Cranelift IR (CLIF)";

/// The tool's description.
pub(crate) const LONG_ABOUT: &str = "\
Merge identical functions in Cranelift IR (CLIF).

All functions of all inputs form one module. Functions that provably compute the same \
thing are found (same signature and call convention; same CFG walked from the entry \
block; same instructions, immediates, types, memory flags, stack slots, global values, \
constants; callees defined in the module compared by equivalence class, so recursive \
and mutually recursive duplicates merge too). One function per class is kept and each \
duplicate is erased (local, address never taken: every call goes to the kept one), \
aliased (a second name for the kept code) or turned into a thunk (a body that jumps to \
the kept one, keeping its own address).

The merged module is printed as CLIF; each removed function leaves a comment line \
`; %g: erased, calls go to %f` or `; %g: alias of %f`, each thunk is preceded by \
`; %g: thunk to %f`.";

/// Examples and exit status.
pub(crate) const AFTER_HELP: &str = "\
Examples:
  clif-merge filetests/merge/core_mutual_recursion_pairs.clif
  clif-merge --report json --export %main a.clif b.clif
  clif-merge --stats --mode all corpus/brotli/

Separate compilation (merging across modules compiled apart; see each one's --help):
  clif-merge summarize a/ -o a.sum        stage 1, per module
  clif-merge plan a.sum b.sum --out-dir d  stage 2, whole program
  clif-merge apply --decisions d/a.dec a/  stage 3, per module
  clif-merge dump d/a.dec                  print a summary or decisions file

Exit status: 0 on success, 1 if --validate found a mismatch, 2 on bad input (parse error with FILE:LINE, a function \
that fails the Cranelift verifier, unreadable or empty input, duplicate names), 3 on \
an internal error.";

/// Output format of the merged module.
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReportFormat {
    /// The merged module as CLIF text.
    Clif,
    /// One JSON object: functions, merged, classes, actions.
    Json,
}

/// How `--similar` finds code sizes (`--size-pricing`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum SizePricing {
    /// Predicted by the target's size model, which decides (targets without a
    /// model compile).
    Model,
    /// As `model`, and groups of small functions the model would not merge,
    /// and every merge predicted to save less than 5%, compiled to decide.
    Confirm,
    /// Every member and every merge tried compiled (exact, slower).
    Compile,
}

impl From<SizePricing> for Pricing {
    fn from(pricing: SizePricing) -> Self {
        match pricing {
            SizePricing::Model => Pricing::Modeled,
            SizePricing::Confirm => Pricing::Confirmed,
            SizePricing::Compile => Pricing::Compiled,
        }
    }
}

/// Command-line arguments of the merge (`clif-merge [OPTIONS] FILE...`): flattened
/// into [`super::Cli`], and a parser of its own for tests.
#[derive(Parser, Debug)]
#[command(name = "clif-merge", version, about = ABOUT, long_about = LONG_ABOUT, after_help = AFTER_HELP)]
pub struct Args {
    /// CLIF files, or directories (every `.clif` file under them, sorted by path).
    #[arg(required = true, value_name = "FILE.clif|DIR")]
    pub inputs: Vec<PathBuf>,

    /// What to print: the merged module as CLIF, or a JSON report of the merge.
    #[arg(long, value_enum, default_value = "clif", value_name = "FORMAT")]
    pub report: ReportFormat,

    /// Print a short summary (functions, classes, merged, by action, bytes removed,
    /// time) on stderr.
    #[arg(long)]
    pub stats: bool,

    /// Linkage and mode.
    #[command(flatten)]
    pub module: ModuleOptions,

    /// Check every merge in cranelift-interpreter: each duplicate and its replacement
    /// run on edge-value and 64 seeded random inputs and must agree. Prints
    /// `validated: A pairs, B unvalidated (reasons), C mismatches` on stderr; exits 1
    /// on a mismatch, printing both functions and the input that tells them apart.
    #[arg(long)]
    pub validate: bool,

    /// With `--validate`: the interpreter steps all runs of one pair may take
    /// together (each run takes at most 20,000, a merged side four times that, a
    /// patient rerun ten times). A pair that uses them up before any input ran to
    /// completion is reported unvalidated ("ran out of its budget of interpreter
    /// steps"), never a mismatch. Pairs are checked on all cores
    /// (`RAYON_NUM_THREADS` sets how many), with the same report whatever their
    /// number.
    #[arg(long, value_name = "STEPS", default_value_t = DEFAULT_PAIR_STEPS)]
    pub validate_budget: u64,

    /// Also merge *similar* functions: bodies equal but for a few integer or float
    /// constants or direct callees (of one signature) become one merged body
    /// (`%NAME_merged`) taking those as trailing parameters (a callee as a function
    /// address, called with `call_indirect`), and each original becomes an entry
    /// point that calls it with its own values (keeping its name, signature and
    /// address). Functions left that are equal but for a few straight-line stretches
    /// of instructions (at most one per block; several with `--align-anchors`) are then merged in pairs: the merged
    /// body runs either member's stretches, chosen by one more parameter (merging by
    /// alignment). Only when the code Cranelift emits for the host gets smaller.
    /// With `--validate`, every entry point is also run against its original.
    #[arg(long)]
    pub similar: bool,

    /// With `--similar`: do not merge by alignment (pairs of functions that differ
    /// by stretches of instructions); merge only functions that differ in constants,
    /// callees and callee-load offsets.
    #[arg(long)]
    pub no_align: bool,

    /// With `--similar`: when merging by alignment, refuse one-sided escapes (a
    /// value one member's stretch defines that only that member's later stretches
    /// use, passed through the join with a placeholder from the other arm).
    #[arg(long)]
    pub no_align_one_sided: bool,

    /// With `--similar`: also grow merged aligned pairs into groups of three or
    /// more: a function left alone, or another merged pair, that aligns with a
    /// pair's first member joins the pair when the group saves more; every member
    /// is aligned to differ from the first at the same places (stretches widened
    /// to cover each member's differences), and the merged body runs one
    /// member's stretch per value of the selector. Off by default: it costs more
    /// compile time than the code it saves is worth on typical programs.
    #[arg(long)]
    pub align_groups: bool,

    /// With `--similar`: also merge by alignment pairs whose blocks end in
    /// different terminators (same blocks and block parameters in walk order); the
    /// merged body branches on the selector to either member's rest of such a
    /// block. Off by default.
    #[arg(long)]
    pub align_cfg: bool,

    /// With `--similar`: also merge by alignment pairs of the same signature whose
    /// block structures differ: blocks are paired by a sequence alignment of the
    /// two walks, and blocks without a partner are kept, each reached only from
    /// its own member's code. Off by default.
    #[arg(long)]
    pub align_blocks: bool,

    /// With `--similar`: last, pair the functions every other kind left alone
    /// by sequence alignment: two functions of one signature are merged whole,
    /// whatever their block structures; instructions equal but for the values
    /// they read are shared, each differing operand chosen by a `select` on the
    /// selector, and what only one member has runs behind a branch on it. Off
    /// by default.
    #[arg(long)]
    pub align_sequence: bool,

    /// With `--similar`: when merging by alignment, also try each pair with its
    /// differing stretches cut at runs of equal instructions inside them
    /// (anchors), so that one block may hold several stretches; the planner
    /// prices both ways and keeps the one that saves more (compiling both when
    /// the size model prefers the cut). Off by default.
    #[arg(long)]
    pub align_anchors: bool,

    /// With `--similar`: a group is merged whole only when it needs at most this
    /// many parameters (constants and callees that differ; those holding the same
    /// value in every member share one); a group needing more is split into
    /// subgroups.
    #[arg(long, default_value_t = crate::similar::DEFAULT_MAX_HOLES, value_name = "N")]
    pub max_holes: usize,

    /// With `--similar`: merge a group only when it saves at least this many bytes of
    /// host code (instructions where Cranelift has no backend for the host).
    #[arg(long, default_value_t = 1, value_name = "BYTES")]
    pub min_saved: u64,

    /// With `--similar`: how code sizes are found: `model` predicts them with the
    /// target's size model, which decides; `confirm` also compiles groups of
    /// small functions the model would not merge, and every merge predicted to
    /// save less than 5%, to decide; `compile` compiles every member and every
    /// merge tried.
    #[arg(long, value_enum, default_value = "model", value_name = "PRICING")]
    pub size_pricing: SizePricing,
}

/// Checks every function of the merged module with the Cranelift verifier, each
/// with the target and flags of the file it came from (a merged body with those of
/// its group's first member, whose body it is), as the input was verified.
fn verify_output(
    functions: &[&Function],
    loaded: &LoadedModule,
    similar: Option<&SimilarPass>,
) -> Result<(), CliError> {
    let merged_from: HashMap<SymbolName, SymbolName> = similar
        .map(|similar| {
            similar
                .outcome
                .groups
                .iter()
                .filter_map(|g| {
                    let first = similar.module().get(*g.members.first()?);
                    Some((
                        SymbolName::of_user_func_name(&g.merged_name),
                        SymbolName::of_function(&first.func),
                    ))
                })
                .collect()
        })
        .unwrap_or_default();
    for func in functions {
        let name = SymbolName::of_function(func);
        loaded.verify_output(func, merged_from.get(&name).unwrap_or(&name))?;
    }
    Ok(())
}

/// A validator that crashed is an internal error (exit 3) naming what crashed,
/// never a report of nothing checked.
fn crashed(crash: ValidatorCrash) -> CliError {
    CliError {
        code: 3,
        message: format!("internal error: {crash}"),
    }
}

/// Runs the tool. Returns `(stdout, stderr)` text on success.
pub fn run(args: &Args) -> Result<(String, String), CliError> {
    run_showing(args, &Meter::hidden())
}

/// [`run`], showing its progress on `meter`.
pub(crate) fn run_showing(args: &Args, meter: &Meter) -> Result<(String, String), CliError> {
    let files = expand_inputs(&args.inputs)?;
    let mut loaded = load_showing(&files, meter)?;
    args.module.apply_linkage(&mut loaded.functions)?;
    let options = args
        .module
        .merge_options()
        .with_similar_fingerprints(args.similar);
    meter.phase(Phase::Merging);
    let outcome = merge_functions(&loaded.functions, &options);
    let similar = args.similar.then(|| {
        meter.phase(Phase::MergingSimilar);
        let options = SimilarOptions::default()
            .with_max_holes(args.max_holes)
            .with_min_saved(args.min_saved)
            .with_pricing(args.size_pricing.into())
            .with_align(!args.no_align)
            .with_align_one_sided(!args.no_align_one_sided)
            .with_align_cfg(args.align_cfg)
            .with_align_blocks(args.align_blocks)
            .with_align_groups(args.align_groups)
            .with_align_anchors(args.align_anchors)
            .with_align_sequence(args.align_sequence);
        // Sizes on the input's target and flags (the first file's).
        let isa = loaded.targets.first().and_then(InputTarget::measuring_isa);
        SimilarPass::after(&loaded.functions, &outcome, &options, isa.as_deref())
    });
    let printed: Vec<&Function> = match &similar {
        Some(similar) => similar.functions(),
        None => outcome
            .output
            .iter()
            .filter_map(OutputEntry::body)
            .collect(),
    };
    meter.phase(Phase::Verifying);
    verify_output(&printed, &loaded, similar.as_ref())?;
    if args.report == ReportFormat::Clif {
        check_printable(&printed)?;
    }
    let mut stderr = String::new();
    let validation = if args.validate {
        // The interpreter may panic on what it does not support: such runs count as
        // inconclusive (`main_with_args` keeps their panic reports quiet).
        meter.phase(Phase::Validating);
        let validation_options = ValidationOptions::default().with_pair_steps(args.validate_budget);
        let report = validate_with_progress(
            &loaded.functions,
            &outcome.plan,
            &outcome.output,
            &validation_options,
            meter,
        )
        .map_err(crashed)?;
        if !report.mismatches.is_empty() {
            return Err(CliError {
                code: 1,
                message: mismatch_message(&loaded.functions, &report),
            });
        }
        stderr.push_str(&report.to_string());
        stderr.push('\n');
        let similar_report = match &similar {
            None => None,
            Some(similar) => {
                meter.phase(Phase::ValidatingSimilar);
                let report = validate_similar_with_progress(
                    similar.module(),
                    similar.outcome(),
                    &validation_options,
                    meter,
                )
                .map_err(|error| CliError {
                    code: 3,
                    message: format!("internal error: {error}"),
                })?;
                if !report.mismatches.is_empty() {
                    return Err(CliError {
                        code: 1,
                        message: mismatch_message(similar.module(), &report),
                    });
                }
                stderr.push_str("similar: ");
                stderr.push_str(&report.to_string());
                stderr.push('\n');
                Some(report)
            }
        };
        Some((report, similar_report))
    } else {
        None
    };
    meter.phase(Phase::Printing);
    let stdout = match args.report {
        ReportFormat::Clif => clif_text(
            &loaded.functions,
            &outcome,
            similar.as_ref(),
            &loaded.header,
        ),
        ReportFormat::Json => {
            let mut json = json_report(&loaded.functions, &outcome);
            if let (Some((report, similar_report)), Some(object)) =
                (&validation, json.as_object_mut())
            {
                object.insert(
                    "validation".into(),
                    validation_json(&loaded.functions, report),
                );
                if let (Some(report), Some(similar)) = (similar_report, &similar) {
                    object.insert(
                        "similar_validation".into(),
                        validation_json(similar.module(), report),
                    );
                }
            }
            if let (Some(similar), Some(object)) = (&similar, json.as_object_mut()) {
                object.insert("similar".into(), similar_json(&similar.group_reports()));
            }
            let mut s = json.to_string();
            s.push('\n');
            s
        }
    };
    if args.stats {
        stderr.push_str(&stats_text(&loaded.functions, &outcome, loaded.files));
        if let Some(similar) = &similar {
            stderr.push_str(&similar_stats_line(similar));
        }
        if let Some((report, similar_report)) = &validation {
            stderr.push_str(&validation_stats_line(
                "validation",
                &loaded.functions,
                report,
            ));
            if let (Some(report), Some(similar)) = (similar_report, &similar) {
                stderr.push_str(&validation_stats_line(
                    "similar validation",
                    similar.module(),
                    report,
                ));
            }
        }
    }
    Ok((stdout, stderr))
}

/// The message for a failed validation: the summary, then per mismatch both
/// functions and the input that tells them apart.
fn mismatch_message(module: &FunctionSet, report: &ValidationReport) -> String {
    let mut message = format!("translation validation failed: {report}");
    for m in &report.mismatches {
        message.push_str(&format!(
            "\n\n{} merged into {} behaves differently on input {:?}:\n  original: {}\n  merged:   {}\n\n{}\n{}",
            module.display_name(m.function),
            module.display_name(m.into),
            m.input,
            m.original,
            m.merged,
            module.get(m.function).func.display(),
            module.get(m.into).func.display(),
        ));
    }
    message
}
