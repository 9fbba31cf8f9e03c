//! The `clif-merge` subcommands for separate compilation: `summarize` (stage 1, per
//! module), `plan` (stage 2, whole program), `apply` (stage 3, per module) and
//! `dump` (print a summary or decisions file). See [`crate::separate`].

use super::error::CliError;
use super::load::{InputTarget, LoadedModule, ModuleOptions, expand_inputs, load_showing};
use super::merge::SizePricing;
use super::progress::{Meter, Phase};
use super::report::{check_printable, plan_json};
use crate::identical::rewrite::OutputEntry;
use crate::ir::{FuncIndex, SymbolName};
use crate::separate::format::{DECISIONS_MAGIC, SUMMARY_MAGIC};
use crate::separate::program::{DecisionAction, ModuleDecisions, plan_program};
use crate::separate::summary::{FunctionSummary, Summary, Visibility, summarize};
use crate::separate::transform::{AppliedDecision, apply_decisions};
use crate::separate::vocabulary::SummarySource;
use crate::similar::{SimilarOptions, SimilarPass};
use crate::validate::Progress;
use clap::Subcommand;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::Function;
use std::borrow::Cow;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

const SUMMARIZE_ABOUT: &str = "\
Stage 1 of separate compilation, per module (wherever it is compiled): the module's own \
merge runs, then every function it still defines is summarized: name, linkage, \
address-taken flag, structural hash and the comparator's view of its body, with \
references to other functions by symbol name.

Symbol names are the CLIF names (`%foo`, `u0:12`), one namespace for the whole \
program; a local function is private to its module. Give linkage as the build has it: \
--hidden for a function other modules of the program call (every module that refers \
to a hidden function must be summarized and planned), --export for one that code \
outside the program may call. Use the same --mode and linkage options in `summarize` \
and `apply`.";

const PLAN_ABOUT: &str = "\
Stage 2 of separate compilation, once for the whole program: reads every summary, finds \
the classes of equal functions across modules (callees compared by symbol across \
modules), keeps one representative per class (the strongest linkage, then the first by \
module and definition order: the order of the summaries does not matter; a local one \
is promoted to hidden under a new name, `%NAME_MODULE_promoted_HASH`, when members in \
other modules go to it) and writes one decisions file per module. It reports how many \
duplicates were removed and thunked, how many representatives promoted and how many \
references redirected across modules.

Promoted names: HASH is 16 hex digits of the program hash, a 64-bit FNV-1a over every \
module's name and summary digest (the same in any order of the summaries, another \
whenever any summary changes). A promoted name is none that a summarized module \
defines, imports or mentions, nor another promoted name of the plan (`_2`, ... is \
appended on a clash); a name from outside the program (a C file, an archive member, a \
library) is one only if it spells this program's hash.";

const APPLY_ABOUT: &str = "\
Stage 3 of separate compilation, per module: runs the module's own merge again and \
applies its decisions: a local or hidden duplicate whose address is taken nowhere in \
the program is removed, any other becomes a thunk to its representative (an object \
file cannot alias a symbol it does not define), a promoted representative gets its new \
hidden name, and every call goes straight to the representative. With --similar, \
similar functions among those no decision names are merged next, as in the main \
command. Use the same --mode and linkage options as in `summarize`: `apply` checks \
every decision against the function it names and the module against its summary's \
digest, and refuses stale decisions.";

const AFTER_HELP: &str = "\
Example (GCC's WHOPR stages: summarize each module, plan the whole program, apply per \
module; %g and %h are called across modules, hence hidden):
  clif-merge summarize --export %main --hidden %g a/ -o a.sum
  clif-merge summarize --hidden %g2 --hidden %h b/ -o b.sum
  clif-merge plan a.sum b.sum --out-dir decisions --report json
  clif-merge apply --decisions decisions/a.dec --export %main --hidden %g a/ > a.merged.clif
  clif-merge dump decisions/a.dec

Exit status: 0 on success, 2 on bad input (unreadable, truncated or corrupt files, \
a summary or decisions file of another format version or of another build's \
vocabulary, two modules defining one symbol, stale decisions), 3 on an internal error.";

/// A stage of separate compilation: the subcommands of `clif-merge`.
#[derive(Subcommand, Debug)]
pub enum SeparateCommand {
    /// Stage 1: summarize one module (after its own merge).
    #[command(long_about = SUMMARIZE_ABOUT, after_help = AFTER_HELP)]
    Summarize {
        /// CLIF files or directories: one module.
        #[arg(required = true, value_name = "FILE.clif|DIR")]
        inputs: Vec<PathBuf>,
        /// Where to write the summary.
        #[arg(short = 'o', long = "output", value_name = "M.sum")]
        output: PathBuf,
        /// The module's name (unique in the program); by default the output's file
        /// stem.
        #[arg(long, value_name = "NAME")]
        module: Option<String>,
        /// Linkage and mode.
        #[command(flatten)]
        options: ModuleOptions,
    },
    /// Stage 2: plan the whole program from all summaries.
    #[command(long_about = PLAN_ABOUT, after_help = AFTER_HELP)]
    Plan {
        /// The summaries of all modules.
        #[arg(required = true, value_name = "M.sum")]
        summaries: Vec<PathBuf>,
        /// Where to write one decisions file per module (`MODULE.dec`).
        #[arg(long, value_name = "DIR")]
        out_dir: PathBuf,
        /// Also print the cross-module classes and decisions as JSON on stdout
        /// (names as `MODULE::NAME`).
        #[arg(long, value_name = "json")]
        report: Option<String>,
    },
    /// Stage 3: apply a module's decisions and print the module as CLIF.
    #[command(long_about = APPLY_ABOUT, after_help = AFTER_HELP)]
    Apply {
        /// The module's decisions file (from `plan`).
        #[arg(long, value_name = "M.dec")]
        decisions: PathBuf,
        /// CLIF files or directories: the module, as summarized.
        #[arg(required = true, value_name = "FILE.clif|DIR")]
        inputs: Vec<PathBuf>,
        /// Linkage and mode, as given to `summarize`.
        #[command(flatten)]
        options: ModuleOptions,
        /// Then merge *similar* functions among those the decisions leave as they
        /// are, as the main command's `--similar` does (merged bodies are local to
        /// the module).
        #[arg(long)]
        similar: bool,
        /// With `--similar`: at most this many differing constants and callees per
        /// group (default: the main command's).
        #[arg(long, value_name = "N")]
        max_holes: Option<usize>,
        /// With `--similar`: merge a group only when it saves at least this many
        /// bytes of code (default: the main command's).
        #[arg(long, value_name = "BYTES")]
        min_saved: Option<u64>,
        /// With `--similar`: how code sizes are found, as the main command's
        /// `--size-pricing`.
        #[arg(long, value_enum, default_value = "model", value_name = "PRICING")]
        size_pricing: SizePricing,
    },
    /// Print a summary or decisions file in readable form.
    #[command(after_help = AFTER_HELP)]
    Dump {
        /// The file.
        #[arg(value_name = "M.sum|M.dec")]
        file: PathBuf,
    },
}

fn read(path: &Path) -> Result<Vec<u8>, CliError> {
    std::fs::read(path).map_err(|e| CliError::input(format!("{}: {e}", path.display())))
}

/// Loads one module's `inputs` (counting the files read on `meter`) and gives
/// its functions the linkage of `options`.
fn load_module(
    inputs: &[PathBuf],
    options: &ModuleOptions,
    meter: &Meter,
) -> Result<LoadedModule, CliError> {
    let files = expand_inputs(inputs)?;
    let mut loaded = load_showing(&files, meter)?;
    options.apply_linkage(&mut loaded.functions)?;
    Ok(loaded)
}

fn read_summary(path: &Path) -> Result<Summary, CliError> {
    Summary::from_bytes(&read(path)?)
        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))
}

fn read_decisions(path: &Path) -> Result<ModuleDecisions, CliError> {
    ModuleDecisions::from_bytes(&read(path)?)
        .map_err(|e| CliError::input(format!("{}: {e}", path.display())))
}

fn write(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    std::fs::write(path, bytes).map_err(|e| CliError::input(format!("{}: {e}", path.display())))
}

/// Runs a subcommand, showing its progress on `meter`. Returns `(stdout, stderr)`
/// text on success.
pub(crate) fn run(command: &SeparateCommand, meter: &Meter) -> Result<(String, String), CliError> {
    match command {
        SeparateCommand::Summarize {
            inputs,
            output,
            module,
            options,
        } => summarize_command(inputs, output, module, options, meter),
        SeparateCommand::Plan {
            summaries,
            out_dir,
            report,
        } => plan_command(summaries, out_dir, report, meter),
        SeparateCommand::Apply {
            decisions,
            inputs,
            options,
            similar,
            max_holes,
            min_saved,
            size_pricing,
        } => {
            let similar = similar.then(|| {
                let defaults = SimilarOptions::default();
                defaults
                    .clone()
                    .with_max_holes(max_holes.unwrap_or(defaults.max_holes))
                    .with_min_saved(min_saved.unwrap_or(defaults.min_saved))
                    .with_pricing((*size_pricing).into())
            });
            apply_command(decisions, inputs, options, similar.as_ref(), meter)
        }
        SeparateCommand::Dump { file } => dump_command(file),
    }
}

/// `summarize`: loads one module, summarizes it and writes the summary.
fn summarize_command(
    inputs: &[PathBuf],
    output: &Path,
    module: &Option<String>,
    options: &ModuleOptions,
    meter: &Meter,
) -> Result<(String, String), CliError> {
    let loaded = load_module(inputs, options, meter)?;
    let name = match module {
        Some(name) => name.clone(),
        None => output
            .file_stem()
            .map(|s| s.to_string_lossy().to_string())
            .unwrap_or_else(|| "module".into()),
    };
    meter.phase(Phase::Summarizing);
    let start = Instant::now();
    let summary = summarize(&loaded.functions, &name, &options.merge_options());
    let time = start.elapsed();
    let bytes = summary.to_bytes();
    write(output, &bytes)?;
    let text: usize = loaded
        .functions
        .iter()
        .map(|(_, d)| d.func.display().to_string().len())
        .sum();
    let stderr = format!(
        "summarized module `{name}`: {} functions ({} visible), {} bytes of summary for {} bytes of CLIF text ({:.2}), {:.3} ms\n",
        summary.functions.len(),
        summary
            .functions
            .iter()
            .filter(|f| f.visibility != Visibility::Local)
            .count(),
        bytes.len(),
        text,
        bytes.len() as f64 / text.max(1) as f64,
        time.as_secs_f64() * 1e3,
    );
    Ok((String::new(), stderr))
}

/// `plan`: reads every summary, plans the program, writes one decisions file per
/// module (and the JSON report when asked).
fn plan_command(
    summaries: &[PathBuf],
    out_dir: &Path,
    report: &Option<String>,
    meter: &Meter,
) -> Result<(String, String), CliError> {
    if let Some(format) = report
        && format != "json"
    {
        return Err(CliError::input(format!(
            "unknown report format `{format}` (expected `json`)"
        )));
    }
    meter.counted(Phase::ReadingSummaries, summaries.len());
    let summaries: Vec<Summary> = summaries
        .iter()
        .map(|p| {
            let summary = read_summary(p);
            meter.step();
            summary
        })
        .collect::<Result<_, _>>()?;
    meter.phase(Phase::Planning);
    let plan = plan_program(&summaries).map_err(|e| CliError::input(e.to_string()))?;
    std::fs::create_dir_all(out_dir)
        .map_err(|e| CliError::input(format!("{}: {e}", out_dir.display())))?;
    for decisions in &plan.decisions {
        if decisions.module.contains(['/', '\\']) || decisions.module.starts_with('.') {
            return Err(CliError::input(format!(
                "module name `{}` cannot be a file name",
                decisions.module
            )));
        }
        let path = out_dir.join(format!("{}.dec", decisions.module));
        write(&path, &decisions.to_bytes())?;
    }
    let counts = plan.counts();
    let stderr = format!(
        "planned {} modules, {} functions: {} classes across modules; {} duplicates merged ({} removed, {} thunked), {} local representatives promoted to hidden, {} references redirected across modules; {} comparisons; resolve {:.3} ms, partition {:.3} ms\n",
        plan.decisions.len(),
        plan.functions,
        plan.classes.len(),
        counts.merged(),
        counts.removed,
        counts.thunked,
        counts.promoted,
        counts.redirected,
        plan.comparisons,
        plan.time_resolve.as_secs_f64() * 1e3,
        plan.time_partition.as_secs_f64() * 1e3,
    );
    let stdout = if report.is_some() {
        format!("{}\n", plan_json(&plan))
    } else {
        String::new()
    };
    Ok((stdout, stderr))
}

/// `apply`: loads one module, applies its decisions (then, with `similar`, merges
/// similar functions among those the decisions leave as they are) and prints it as
/// CLIF.
fn apply_command(
    decisions: &Path,
    inputs: &[PathBuf],
    options: &ModuleOptions,
    similar: Option<&SimilarOptions>,
    meter: &Meter,
) -> Result<(String, String), CliError> {
    let decisions = read_decisions(decisions)?;
    let loaded = load_module(inputs, options, meter)?;
    meter.phase(Phase::Applying);
    let applied = apply_decisions(&loaded.functions, &options.merge_options(), &decisions)
        .map_err(|e| CliError::input(e.to_string()))?;
    let out = &applied.functions;
    // The decision that made each function of the output (a thunk, a promoted
    // representative), as `apply_decisions` checked and applied it.
    let decided = |f: FuncIndex| applied.decided.get(f.index()).and_then(Option::as_ref);
    let similar = similar.map(|similar| {
        // Among the functions no decision names; never naming a merged body with a
        // name the module had (removed functions, aliases) or has.
        let undecided: Vec<OutputEntry<'_>> = out
            .iter()
            .filter(|&(f, _)| decided(f).is_none())
            .map(|(f, def)| OutputEntry::Function(f, Cow::Borrowed(&def.func)))
            .collect();
        let reserved = loaded
            .functions
            .iter()
            .chain(out.iter())
            .map(|(_, d)| &*d.func);
        let isa = loaded.targets.first().and_then(InputTarget::measuring_isa);
        meter.phase(Phase::MergingSimilar);
        SimilarPass::after_reserving(out, &undecided, None, similar, isa.as_deref(), reserved)
    });
    // Each printed function, with the name it is verified as (the target and flags
    // of the file it came from: a promoted function as its old name, a merged body
    // as its group's first member, which no decision names) and its decision.
    let mut printed: Vec<(&Function, SymbolName, Option<&AppliedDecision>)> = Vec::new();
    for (f, def) in out.iter() {
        let func = similar
            .as_ref()
            .and_then(|similar| similar.entry_point(f))
            .unwrap_or(&def.func);
        let decision = decided(f);
        let verified_as = match decision {
            Some(d) if d.decision.action == DecisionAction::Promote => {
                SymbolName::of_user_func_name(&d.name)
            }
            _ => SymbolName::of_function(&def.func),
        };
        printed.push((func, verified_as, decision));
    }
    if let Some(similar) = &similar {
        let outcome = similar.outcome();
        for (group, body) in outcome.groups.iter().zip(&outcome.merged_bodies) {
            let first = &similar.module().get(group.members[0]).func;
            printed.push((body, SymbolName::of_function(first), None));
        }
    }
    check_printable(&printed.iter().map(|(f, _, _)| *f).collect::<Vec<_>>())?;
    meter.phase(Phase::Printing);
    let mut text = loaded.header.clone();
    for (func, verified_as, decision) in &printed {
        loaded.verify_output(func, verified_as)?;
        match decision.map(|d| &d.decision) {
            Some(d) if d.action == DecisionAction::Promote => {
                let _ = writeln!(
                    text,
                    "; {}: promoted to hidden {} (the representative of functions in other modules)",
                    d.function, d.to
                );
            }
            Some(d) => {
                let _ = writeln!(text, "; {}: thunk to {}::{}", d.function, d.to_module, d.to);
            }
            None => {}
        }
        let _ = writeln!(text, "{}", func.display());
    }
    for alias in &applied.aliases {
        let _ = writeln!(text, "; {}: alias of {}", alias.name, alias.of);
    }
    for d in &decisions.decisions {
        if d.action == DecisionAction::Redirect {
            let _ = writeln!(
                text,
                "; {}: removed, calls go to {}::{}",
                d.function, d.to_module, d.to
            );
        }
    }
    let mut stderr = format!(
        "applied {} decisions and {} redirected references to module `{}`\n",
        decisions.decisions.len(),
        decisions.calls.len(),
        decisions.module
    );
    if let Some(similar) = &similar {
        let outcome = similar.outcome();
        let members: usize = outcome.groups.iter().map(|g| g.members.len()).sum();
        let _ = writeln!(
            stderr,
            "similar: {} groups of {members} functions merged among those the decisions leave as they are",
            outcome.groups.len()
        );
    }
    Ok((text, stderr))
}

/// `dump`: prints a summary or decisions file in readable form.
fn dump_command(file: &Path) -> Result<(String, String), CliError> {
    let bytes = read(file)?;
    if bytes.starts_with(&SUMMARY_MAGIC) {
        let summary = read_summary(file)?;
        Ok((dump_summary(&summary), String::new()))
    } else if bytes.starts_with(&DECISIONS_MAGIC) {
        let decisions = read_decisions(file)?;
        Ok((dump_decisions(&decisions), String::new()))
    } else {
        Err(CliError::input(format!(
            "{}: not a clif-merge summary or decisions file",
            file.display()
        )))
    }
}

fn dump_summary(summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "summary of module `{}` (addresses {}), {} functions, {} symbols",
        summary.module,
        if summary.addresses_significant {
            "significant"
        } else {
            "not significant"
        },
        summary.functions.len(),
        summary.symbols.len()
    );
    // IR is what the tool itself summarizes; only another source is worth a line.
    if summary.source != SummarySource::Ir {
        let _ = writeln!(out, "summarized from {}", summary.source);
    }
    let symbol = |s: u32| {
        summary
            .symbols
            .get(s as usize)
            .map(|s| {
                if s.local {
                    format!("{} (local)", s.name)
                } else {
                    s.name.clone()
                }
            })
            .unwrap_or_default()
    };
    for f in &summary.functions {
        let _ = write!(out, "{} {:?}", f.name, f.visibility);
        if f.address_taken {
            out.push_str(" address-taken");
        }
        if let Some(s) = f.same_as {
            let _ = write!(out, " same-as {}", symbol(s));
        }
        if !f.supported {
            out.push_str(" (not comparable)\n");
            continue;
        }
        let _ = writeln!(
            out,
            " hash {:016x}, {} instructions, {} tokens",
            f.hash,
            f.instructions,
            f.tokens.len()
        );
        let refs = references(f);
        if !refs.is_empty() {
            let names: Vec<String> = refs
                .iter()
                .map(|&(s, exact)| {
                    if exact {
                        format!("={}", symbol(s))
                    } else {
                        symbol(s)
                    }
                })
                .collect();
            let _ = writeln!(out, "    refers to {}", names.join(", "));
        }
    }
    if !summary.addresses_taken.is_empty() {
        let names: Vec<String> = summary.addresses_taken.iter().map(|&s| symbol(s)).collect();
        let _ = writeln!(out, "addresses taken: {}", names.join(", "));
    }
    out
}

/// The symbols `f` refers to, with whether by exact name.
fn references(f: &FunctionSummary) -> Vec<(u32, bool)> {
    f.references
        .iter()
        .map(|&p| (f.tokens[p as usize] as u32, f.is_exact(p)))
        .collect()
}

fn dump_decisions(decisions: &ModuleDecisions) -> String {
    let mut out = format!(
        "decisions for module `{}` (addresses {}), {} functions\n",
        decisions.module,
        if decisions.addresses_significant {
            "significant"
        } else {
            "not significant"
        },
        decisions.decisions.len()
    );
    for d in &decisions.decisions {
        let _ = writeln!(
            out,
            "{} {} {}::{} (fingerprint {:016x})",
            d.function,
            d.action.as_str(),
            d.to_module,
            d.to,
            d.fingerprint
        );
    }
    for c in &decisions.calls {
        let what = match c.action {
            DecisionAction::Thunk => "calls to",
            DecisionAction::Redirect | DecisionAction::Promote => "references to",
        };
        let _ = writeln!(out, "{what} {} go to {}::{}", c.symbol, c.to_module, c.to);
    }
    out
}
