//! The `clif-merge` command line: argument parsing, reading and checking inputs,
//! running the pass, printing the result.
//!
//! Exit codes: 0 success, 2 bad input or usage (nothing is printed on stdout), 3 an
//! internal error (a merged function failed the verifier; nothing is printed).

use crate::apply::OutputEntry;
use crate::driver::{MergeOptions, merge_functions};
use crate::module::{DefinitionError, FunctionSet};
use crate::plan::MergeMode;
use crate::report::{clif_text, json_report, stats_text, validation_json};
use crate::similar::{SimilarOptions, SimilarPass};
use crate::validate::{ValidationReport, validate, validate_similar};
use clap::{Parser, ValueEnum};
use cranelift_codegen::ir::Function;
use cranelift_codegen::settings::{self, Flags};
use cranelift_codegen::verify_function;
use cranelift_module::Linkage;
use cranelift_reader::{IsaSpec, ParseOptions, parse_test};
use std::ffi::OsString;
use std::fmt;
use std::io::Write;
use std::path::{Path, PathBuf};

const ABOUT: &str = "Merge identical functions in Cranelift IR (CLIF)";

const LONG_ABOUT: &str = "\
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

const AFTER_HELP: &str = "\
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

/// Whether function addresses are significant (see `--mode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Functions whose addresses can be observed keep distinct addresses (thunks).
    Safe,
    /// Addresses are not significant: duplicates that stay symbols become aliases.
    All,
}

/// Command-line arguments of `clif-merge`.
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

    /// Give function NAME export linkage (visible outside the module). Repeatable.
    /// NAME as written after `function`, e.g. `%foo` or `u0:12`.
    #[arg(long = "export", value_name = "NAME")]
    pub export: Vec<String>,

    /// Give function NAME hidden linkage (visible in the linked object only).
    #[arg(long = "hidden", value_name = "NAME")]
    pub hidden: Vec<String>,

    /// Give function NAME preemptible linkage (may be replaced at link time; it is
    /// never kept in place of another and only ever becomes a thunk).
    #[arg(long = "preemptible", value_name = "NAME")]
    pub preemptible: Vec<String>,

    /// `safe`: a function whose address can be observed (taken with `func_addr`, or
    /// visible outside while the kept one is too) keeps its own address, via a thunk.
    /// `all`: addresses are not significant; such duplicates become aliases.
    #[arg(long, value_enum, default_value = "safe")]
    pub mode: ModeArg,

    /// Check every merge in cranelift-interpreter: each duplicate and its replacement
    /// run on edge-value and 64 seeded random inputs and must agree. Prints
    /// `validated: A pairs, B unvalidated (reasons), C mismatches` on stderr; exits 1
    /// on a mismatch, printing both functions and the input that tells them apart.
    #[arg(long)]
    pub validate: bool,

    /// Also merge *similar* functions: bodies equal but for a few integer or float
    /// constants or direct callees (of one signature) become one merged body
    /// (`%NAME_merged`) taking those as trailing parameters (a callee as a function
    /// address, called with `call_indirect`), and each original becomes an entry
    /// point that calls it with its own values (keeping its name, signature and
    /// address). Only when the code Cranelift emits for the host gets smaller. With
    /// `--validate`, every entry point is also run against its original.
    #[arg(long)]
    pub similar: bool,

    /// With `--similar`: at most this many constants and callees may differ within a
    /// group (each becomes a parameter of the merged body).
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub max_holes: usize,

    /// With `--similar`: merge a group only when it saves at least this many bytes of
    /// host code (instructions where Cranelift has no backend for the host).
    #[arg(long, default_value_t = 1, value_name = "BYTES")]
    pub min_saved: u64,
}

/// An error that ends the run, with its exit code.
#[derive(Debug)]
pub struct CliError {
    /// Process exit code.
    pub code: i32,
    /// The message, printed on stderr after `error: `.
    pub message: String,
}

impl CliError {
    pub(crate) fn input(message: impl Into<String>) -> Self {
        Self {
            code: 2,
            message: message.into(),
        }
    }
}

impl fmt::Display for CliError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Where a function came from.
#[derive(Clone, Debug)]
pub struct SourceLocation {
    /// The file.
    pub path: PathBuf,
    /// Line of the `function` keyword.
    pub line: usize,
}

impl fmt::Display for SourceLocation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.path.display(), self.line)
    }
}

/// The parsed inputs.
pub struct LoadedModule {
    /// The functions, all `Local` until linkage options are applied.
    pub functions: FunctionSet,
    /// Where each function was defined, in input order.
    pub locations: Vec<SourceLocation>,
    /// `test`/`set`/`target` lines of the first file that has any, to print again.
    pub header: String,
    /// Number of files read.
    pub files: usize,
}

/// Expands directories into the sorted list of `.clif` files under them.
pub fn expand_inputs(inputs: &[PathBuf]) -> Result<Vec<PathBuf>, CliError> {
    let mut files = Vec::new();
    for input in inputs {
        let meta = std::fs::metadata(input)
            .map_err(|e| CliError::input(format!("{}: {e}", input.display())))?;
        if meta.is_dir() {
            let mut found = Vec::new();
            collect_clif_files(input, &mut found)?;
            if found.is_empty() {
                return Err(CliError::input(format!(
                    "{}: directory contains no .clif files",
                    input.display()
                )));
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(input.clone());
        }
    }
    Ok(files)
}

fn collect_clif_files(dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), CliError> {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir)
            .map_err(|e| CliError::input(format!("{}: {e}", dir.display())))?;
        for entry in entries {
            let entry = entry.map_err(|e| CliError::input(format!("{}: {e}", dir.display())))?;
            let path = entry.path();
            let file_type = entry
                .file_type()
                .map_err(|e| CliError::input(format!("{}: {e}", path.display())))?;
            if file_type.is_dir() {
                pending.push(path);
            } else if path.extension().is_some_and(|e| e == "clif") {
                out.push(path);
            }
        }
    }
    Ok(())
}

/// Reads, parses and verifies every input file into one module.
pub fn load(paths: &[PathBuf]) -> Result<LoadedModule, CliError> {
    let mut functions = FunctionSet::new();
    let mut locations: Vec<SourceLocation> = Vec::new();
    let mut header = String::new();
    for path in paths {
        let bytes = std::fs::read(path)
            .map_err(|e| CliError::input(format!("{}: cannot read: {e}", path.display())))?;
        let text = std::str::from_utf8(&bytes).map_err(|e| {
            CliError::input(format!(
                "{}: not CLIF text: invalid UTF-8 at byte {}",
                path.display(),
                e.valid_up_to()
            ))
        })?;
        check_entity_numbers(text).map_err(|(line, token, limit)| {
            CliError::input(format!(
                "{}:{line}: entity number `{token}` is too large for an input of this size (at most {limit} here): the CLIF reader would allocate every entity up to it",
                path.display()
            ))
        })?;
        // cranelift-reader panics on some malformed input (fuzzing found
        // `vconst.i32` with 16 bytes of data); that is bad input, not a crash.
        let parsed =
            catch_panic(|| parse_test(text, ParseOptions::default())).map_err(|panic| {
                CliError::input(format!(
                    "{}: the CLIF reader failed on this input: {panic}",
                    path.display()
                ))
            })?;
        let test = parsed.map_err(|e| {
            CliError::input(format!(
                "{}:{}: {}",
                path.display(),
                e.location.line_number,
                e.message
            ))
        })?;
        if test.functions.is_empty() {
            return Err(CliError::input(format!(
                "{}: no functions found (expected `function NAME(...) {{ ... }}`)",
                path.display()
            )));
        }
        if header.is_empty() {
            header = header_lines(text);
        }
        let default_flags;
        let flags_or_isa = match &test.isa_spec {
            IsaSpec::None(flags) => cranelift_codegen::settings::FlagsOrIsa::from(flags),
            IsaSpec::Some(isas) => match isas.first() {
                Some(isa) => cranelift_codegen::settings::FlagsOrIsa::from(&**isa),
                None => {
                    default_flags = Flags::new(settings::builder());
                    cranelift_codegen::settings::FlagsOrIsa::from(&default_flags)
                }
            },
        };
        for (func, details) in test.functions {
            let location = SourceLocation {
                path: path.clone(),
                line: details.location.line_number,
            };
            let verified =
                catch_panic(|| verify_function(&func, flags_or_isa)).map_err(|panic| {
                    CliError::input(format!(
                        "{location}: the Cranelift verifier failed on function {}: {panic}",
                        func.name
                    ))
                })?;
            if let Err(errors) = verified {
                return Err(CliError::input(format!(
                    "{location}: function {} fails the Cranelift verifier:\n{}",
                    func.name,
                    indent(&errors.to_string())
                )));
            }
            let name = func.name.to_string();
            match functions.push(func, Linkage::Local) {
                Ok(_) => {}
                Err(e @ DefinitionError::Duplicate(_)) => {
                    let first = functions
                        .iter()
                        .position(|(_, d)| d.func.name.to_string() == name)
                        .map(|i| locations[i].to_string())
                        .unwrap_or_default();
                    return Err(CliError::input(format!(
                        "{location}: {e} (first defined at {first})"
                    )));
                }
                Err(e) => return Err(CliError::input(format!("{location}: {e}"))),
            }
            locations.push(location);
        }
    }
    Ok(LoadedModule {
        functions,
        locations,
        header,
        files: paths.len(),
    })
}

/// Finds an entity reference (`v123`, `block7`, `ss2`, ...) whose number is out of
/// proportion to the input: cranelift-reader creates every entity up to the largest
/// number it sees, so `v1555555555` in a 400-byte file would take gigabytes (fuzzing
/// found this). The limit is generous: a million, or four per byte of input.
/// Comments, names (`%...`), user names (`u1:2`) and source locations are skipped.
pub fn check_entity_numbers(text: &str) -> Result<(), (usize, String, u64)> {
    let limit = 1_000_000u64.max(4 * text.len() as u64);
    for (line_index, line) in text.lines().enumerate() {
        let code = line.split(';').next().unwrap_or("");
        let bytes = code.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            let at_word_start =
                i == 0 || !(bytes[i - 1].is_ascii_alphanumeric() || bytes[i - 1] == b'_');
            if !(at_word_start && bytes[i].is_ascii_lowercase())
                || (i > 0 && matches!(bytes[i - 1], b'%' | b'@'))
            {
                i += 1;
                continue;
            }
            let start = i;
            while i < bytes.len() && bytes[i].is_ascii_lowercase() {
                i += 1;
            }
            let digits = i;
            while i < bytes.len() && bytes[i].is_ascii_digit() {
                i += 1;
            }
            let whole_word =
                i == bytes.len() || !(bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_');
            let user_name = &code[start..digits] == "u" && i < bytes.len() && bytes[i] == b':';
            if digits < i && whole_word && !user_name {
                let number = code[digits..i].parse::<u64>().unwrap_or(u64::MAX);
                if number > limit {
                    return Err((line_index + 1, code[start..i].to_string(), limit));
                }
            }
        }
    }
    Ok(())
}

/// Runs `f`, turning a panic into its message.
fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into())
    })
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `test`, `set` and `target` lines before the first function.
fn header_lines(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("function") {
            break;
        }
        if ["test ", "set ", "target "]
            .iter()
            .any(|k| line.starts_with(k))
        {
            out.push_str(line);
            out.push('\n');
        }
    }
    out
}

/// Sets the linkage of the functions named in the options.
fn apply_linkage(module: &mut FunctionSet, args: &Args) -> Result<(), CliError> {
    apply_linkage_lists(module, &args.export, &args.hidden, &args.preemptible)
}

/// Gives the functions named in `export`, `hidden` and `preemptible` that linkage.
pub(crate) fn apply_linkage_lists(
    module: &mut FunctionSet,
    export: &[String],
    hidden: &[String],
    preemptible: &[String],
) -> Result<(), CliError> {
    let lists = [
        (export, Linkage::Export),
        (hidden, Linkage::Hidden),
        (preemptible, Linkage::Preemptible),
    ];
    for (names, linkage) in lists {
        for name in names {
            let wanted = name.as_str();
            let found = module.iter().find_map(|(i, d)| {
                let spelled = d.func.name.to_string();
                (spelled == wanted || spelled.strip_prefix('%') == Some(wanted)).then_some(i)
            });
            match found {
                Some(index) => module.set_linkage(index, linkage),
                None => {
                    return Err(CliError::input(format!(
                        "no function named `{name}` in the inputs (names are spelled as after `function`, e.g. `%foo` or `u0:12`)"
                    )));
                }
            }
        }
    }
    Ok(())
}

/// Checks every function of the merged module with the Cranelift verifier.
fn verify_output(functions: &[&Function]) -> Result<(), CliError> {
    let flags = Flags::new(settings::builder());
    for func in functions {
        if let Err(errors) = verify_function(func, &flags) {
            return Err(CliError {
                code: 3,
                message: format!(
                    "internal error: merged function {} fails the Cranelift verifier:\n{}",
                    func.name,
                    indent(&errors.to_string())
                ),
            });
        }
    }
    Ok(())
}

/// Runs the tool. Returns `(stdout, stderr)` text on success.
pub fn run(args: &Args) -> Result<(String, String), CliError> {
    let files = expand_inputs(&args.inputs)?;
    let mut loaded = load(&files)?;
    apply_linkage(&mut loaded.functions, args)?;
    let options = MergeOptions {
        mode: match args.mode {
            ModeArg::Safe => MergeMode::Safe,
            ModeArg::All => MergeMode::All,
        },
    };
    let outcome = merge_functions(&loaded.functions, &options);
    let similar = args.similar.then(|| {
        let options = SimilarOptions {
            max_holes: args.max_holes,
            min_saved: args.min_saved,
        };
        SimilarPass::after(&loaded.functions, &outcome.output, &options)
    });
    let printed: Vec<&Function> = match &similar {
        Some(similar) => similar.functions(),
        None => outcome
            .output
            .iter()
            .filter_map(OutputEntry::body)
            .collect(),
    };
    verify_output(&printed)?;
    let mut stderr = String::new();
    let validation = if args.validate {
        // The interpreter may panic on what it does not support: such runs count as
        // inconclusive (`main_with_args` keeps their panic reports quiet).
        let report = validate(&loaded.functions, &outcome.plan, &outcome.output);
        if !report.mismatches.is_empty() {
            return Err(CliError {
                code: 1,
                message: mismatch_message(&loaded.functions, &report),
            });
        }
        stderr.push_str(&report.summary());
        stderr.push('\n');
        if let Some(similar) = &similar {
            let report = validate_similar(&similar.module, &similar.outcome);
            if !report.mismatches.is_empty() {
                return Err(CliError {
                    code: 1,
                    message: mismatch_message(&similar.module, &report),
                });
            }
            stderr.push_str("similar: ");
            stderr.push_str(&report.summary());
            stderr.push('\n');
        }
        Some(report)
    } else {
        None
    };
    let stdout = match args.report {
        ReportFormat::Clif => clif_text(
            &loaded.functions,
            &outcome,
            similar.as_ref(),
            &loaded.header,
        ),
        ReportFormat::Json => {
            let mut json = json_report(&loaded.functions, &outcome);
            if let (Some(report), Some(object)) = (&validation, json.as_object_mut()) {
                object.insert(
                    "validation".into(),
                    validation_json(&loaded.functions, report),
                );
            }
            if let (Some(similar), Some(object)) = (&similar, json.as_object_mut()) {
                object.insert("similar".into(), similar.json());
            }
            let mut s = json.to_string();
            s.push('\n');
            s
        }
    };
    if args.stats {
        stderr.push_str(&stats_text(&loaded.functions, &outcome, loaded.files));
        if let Some(similar) = &similar {
            stderr.push_str(&similar.stats_line());
        }
    }
    Ok((stdout, stderr))
}

/// The message for a failed validation: the summary, then per mismatch both
/// functions and the input that tells them apart.
fn mismatch_message(module: &FunctionSet, report: &ValidationReport) -> String {
    let mut message = format!("translation validation failed: {}", report.summary());
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

/// Entry point of the binary: parses `argv`, runs, prints, returns the exit code.
pub fn main_with_args(
    argv: impl IntoIterator<Item = OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    let argv: Vec<OsString> = argv.into_iter().collect();
    if let Some(command) = argv.get(1).and_then(|a| a.to_str())
        && crate::separate_cli::SUBCOMMANDS.contains(&command)
    {
        return crate::separate_cli::main_with_args(argv, stdout, stderr);
    }
    run_command::<Args>(argv, stdout, stderr, run)
}

/// Parses `argv` as `A`, runs `run` on it and prints: clap's own output for usage
/// errors and `--help`; on success the run's stdout and stderr text; on failure
/// `error: MESSAGE` and the error's exit code. A panic (in a Cranelift crate or
/// here) does not reach the user as a crash: it becomes an internal error (exit 3),
/// and its default report is not printed. Shared by the main command and the
/// separate-compilation subcommands.
pub(crate) fn run_command<A: Parser>(
    argv: Vec<OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    run: impl FnOnce(&A) -> Result<(String, String), CliError>,
) -> i32 {
    let args = match A::try_parse_from(argv) {
        Ok(args) => args,
        Err(e) => {
            let code = e.exit_code();
            let text = e.render().to_string();
            if code == 0 {
                let _ = write!(stdout, "{text}");
            } else {
                let _ = write!(stderr, "{text}");
            }
            return code;
        }
    };
    std::panic::set_hook(Box::new(|_| {}));
    let result = catch_panic(|| run(&args)).unwrap_or_else(|panic| {
        Err(CliError {
            code: 3,
            message: format!("internal error: {panic}"),
        })
    });
    let _ = std::panic::take_hook();
    match result {
        Ok((out, err)) => {
            let _ = stderr.write_all(err.as_bytes());
            if stdout.write_all(out.as_bytes()).is_err() {
                return 1;
            }
            0
        }
        Err(e) => {
            let _ = writeln!(stderr, "error: {e}");
            e.code
        }
    }
}
