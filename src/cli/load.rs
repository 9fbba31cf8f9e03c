//! Reading the inputs of a command into one module: files and directories,
//! parsing and verifying, linkage options.

use super::error::{CliError, catch_panic, indent};
use super::progress::{Meter, Phase};
use crate::identical::MergeOptions;
use crate::identical::plan::MergeMode;
use crate::ir::{DefinitionError, FunctionSet, Linkage, SymbolName};
use crate::validate::Progress;
use clap::ValueEnum;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::Function;
use cranelift_codegen::isa::{self, LookupError, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable, Flags, FlagsOrIsa, OptLevel};
use cranelift_codegen::verify_function;
use cranelift_reader::{IsaSpec, ParseOptions, parse_test};
use std::fmt;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use target_lexicon::Triple;

/// Whether function addresses are significant (see `--mode`).
#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    /// Functions whose addresses can be observed keep distinct addresses (thunks).
    Safe,
    /// Addresses are not significant: duplicates that stay symbols become aliases.
    All,
}

impl From<ModeArg> for MergeMode {
    fn from(mode: ModeArg) -> Self {
        match mode {
            ModeArg::Safe => MergeMode::Safe,
            ModeArg::All => MergeMode::All,
        }
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
    /// Per file read, the target and flags its functions were verified with.
    pub targets: Vec<InputTarget>,
    /// Per function, in input order, the index of its file in [`Self::targets`].
    pub function_file: Vec<usize>,
    /// `test`/`set`/`target` lines of the first file that has any, to print again.
    pub header: String,
    /// Number of files read.
    pub files: usize,
}

/// The target and flags of one input file (its `set` and `target` lines): what its
/// functions were verified with, so what the output is verified with, and what
/// similar merging measures code size on.
#[derive(Clone)]
pub struct InputTarget {
    /// The first ISA the file names, if any.
    pub isa: Option<OwnedTargetIsa>,
    /// The shared flags (the ISA's own when there is one).
    pub flags: Flags,
}

impl InputTarget {
    /// The target a parsed file names.
    pub fn of(spec: &IsaSpec) -> Self {
        match spec {
            IsaSpec::None(flags) => Self {
                isa: None,
                flags: flags.clone(),
            },
            IsaSpec::Some(isas) => match isas.first() {
                Some(isa) => Self {
                    isa: Some(isa.clone()),
                    flags: isa.flags().clone(),
                },
                None => Self {
                    isa: None,
                    flags: Flags::new(settings::builder()),
                },
            },
        }
    }

    /// What the verifier takes.
    pub fn flags_or_isa(&self) -> FlagsOrIsa<'_> {
        match &self.isa {
            Some(isa) => FlagsOrIsa::from(&**isa),
            None => FlagsOrIsa::from(&self.flags),
        }
    }

    /// The ISA similar merging measures code size on: this target (the host when
    /// the file names none) with the file's flags, at `opt_level=speed` unless the
    /// file asks for another optimization level, and with frame pointers kept
    /// (`return_call` needs them on x86_64). `None` when Cranelift has no backend
    /// for it.
    pub fn measuring_isa(&self) -> Option<OwnedTargetIsa> {
        let mut shared = settings::builder();
        for value in self.flags.iter() {
            // Every value came from a builder of this very crate: it is accepted.
            let _ = shared.set(value.name, &value.value_string());
        }
        if self.flags.opt_level() == OptLevel::None {
            shared.set("opt_level", "speed").ok()?;
        }
        shared.set("preserve_frame_pointers", "true").ok()?;
        let triple = match &self.isa {
            Some(isa) => isa.triple().clone(),
            None => target_lexicon::Triple::host(),
        };
        let mut builder = cranelift_codegen::isa::lookup(triple).ok()?;
        if let Some(isa) = &self.isa {
            for value in isa.isa_flags() {
                let _ = builder.set(value.name, &value.value_string());
            }
        }
        builder.finish(Flags::new(shared)).ok()
    }
}

impl LoadedModule {
    /// The target and flags the function named `name` was verified with (the first
    /// file's for a name no file defines, such as a thunk's or merged body's).
    pub fn target_of(&self, name: &SymbolName) -> Option<&InputTarget> {
        let file = self
            .functions
            .lookup(name)
            .map_or(0, |f| self.function_file[f.index()]);
        self.targets.get(file)
    }

    /// Checks an output function with the Cranelift verifier, with the target and
    /// flags the input function `verified_as` was verified with: a failure is an
    /// internal error (exit 3), since the input passed.
    pub fn verify_output(&self, func: &Function, verified_as: &SymbolName) -> Result<(), CliError> {
        let default_flags;
        let flags_or_isa = match self.target_of(verified_as) {
            Some(target) => target.flags_or_isa(),
            // Only without any input file (never after a successful load).
            None => {
                default_flags = Flags::new(settings::builder());
                FlagsOrIsa::from(&default_flags)
            }
        };
        verify_function(func, flags_or_isa).map_err(|errors| CliError {
            code: 3,
            message: format!(
                "internal error: merged function {} fails the Cranelift verifier:\n{}",
                func.name,
                indent(&errors.to_string())
            ),
        })
    }
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
    load_showing(paths, &Meter::hidden())
}

/// [`load`], counting the files read on `meter`.
pub(crate) fn load_showing(paths: &[PathBuf], meter: &Meter) -> Result<LoadedModule, CliError> {
    meter.counted(Phase::Reading, paths.len());
    let mut functions = FunctionSet::new();
    let mut locations: Vec<SourceLocation> = Vec::new();
    let mut targets: Vec<InputTarget> = Vec::new();
    let mut function_file: Vec<usize> = Vec::new();
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
        // The reader skips a `target` whose backend this build lacks: with no other
        // target, the functions would be verified and measured as if none was named.
        if let IsaSpec::None(_) = test.isa_spec
            && let Some((line, target)) = target_not_built_in(text)
        {
            return Err(CliError::input(format!(
                "{}:{line}: target {target} is not built in (this clif-merge has the backends: {})",
                path.display(),
                built_in_architectures().join(", ")
            )));
        }
        if test.functions.is_empty() {
            return Err(CliError::input(format!(
                "{}: no functions found (expected `function NAME(...) {{ ... }}`)",
                path.display()
            )));
        }
        if header.is_empty() {
            header = header_lines(text);
        }
        let target = InputTarget::of(&test.isa_spec);
        let flags_or_isa = target.flags_or_isa();
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
            let symbol = SymbolName::of_function(&func);
            match functions.push(func, Linkage::Local) {
                Ok(_) => {}
                Err(e @ DefinitionError::Duplicate(_)) => {
                    let first = functions
                        .lookup(&symbol)
                        .map(|i| locations[i.index()].to_string())
                        .unwrap_or_default();
                    return Err(CliError::input(format!(
                        "{location}: {e} (first defined at {first})"
                    )));
                }
                Err(e) => return Err(CliError::input(format!("{location}: {e}"))),
            }
            locations.push(location);
            function_file.push(targets.len());
        }
        targets.push(target);
        meter.step();
    }
    Ok(LoadedModule {
        functions,
        locations,
        targets,
        function_file,
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

/// The first `target` line of `text`'s header (before the first function) that
/// names an architecture Cranelift knows but this build has no backend for (the
/// Pulley interpreter's `pulley32`, `pulley64`, `pulley32be`, `pulley64be`): its
/// line number and the name.
fn target_not_built_in(text: &str) -> Option<(usize, &str)> {
    for (index, line) in text.lines().enumerate() {
        let code = line.split(';').next().unwrap_or("").trim();
        if code.starts_with("function") {
            return None;
        }
        let mut words = code.split_whitespace();
        if words.next() != Some("target") {
            continue;
        }
        let Some(name) = words.next() else {
            continue;
        };
        let disabled = Triple::from_str(name)
            .is_ok_and(|triple| matches!(isa::lookup(triple), Err(LookupError::SupportDisabled)));
        if disabled {
            return Some((index + 1, name));
        }
    }
    None
}

/// The architectures this build has a backend for, in Cranelift's order.
fn built_in_architectures() -> Vec<&'static str> {
    isa::ALL_ARCHITECTURES
        .iter()
        .copied()
        .filter(|name| isa::lookup_by_name(name).is_ok())
        .collect()
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

/// The linkage and mode options, the same for the main command, `summarize` and
/// `apply` (flattened into each).
#[derive(clap::Args, Debug, Clone)]
pub struct ModuleOptions {
    /// Give function NAME export linkage (visible outside the module, to other
    /// modules and to code outside the program). Repeatable. NAME as written after
    /// `function`, e.g. `%foo` or `u0:12`.
    #[arg(long = "export", value_name = "NAME")]
    pub export: Vec<String>,

    /// Give function NAME hidden linkage (visible in the linked object only: to the
    /// program's other modules).
    #[arg(long = "hidden", value_name = "NAME")]
    pub hidden: Vec<String>,

    /// Give function NAME preemptible linkage (may be replaced at link time; it is
    /// never kept in place of another, only ever becomes a thunk, and is never
    /// merged across modules).
    #[arg(long = "preemptible", value_name = "NAME")]
    pub preemptible: Vec<String>,

    /// `safe`: a function whose address can be observed (taken with `func_addr`, or
    /// visible outside while the kept one is too) keeps its own address, via a thunk.
    /// `all`: addresses are not significant; such duplicates become aliases.
    #[arg(long, value_enum, default_value = "safe")]
    pub mode: ModeArg,
}

impl ModuleOptions {
    /// The pass's options for this mode.
    pub fn merge_options(&self) -> MergeOptions {
        MergeOptions::default().with_mode(self.mode.into())
    }

    /// Gives the functions named in `--export`, `--hidden` and `--preemptible` that
    /// linkage.
    pub fn apply_linkage(&self, module: &mut FunctionSet) -> Result<(), CliError> {
        let lists = [
            (&self.export, Linkage::Export),
            (&self.hidden, Linkage::Hidden),
            (&self.preemptible, Linkage::Preemptible),
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
}
