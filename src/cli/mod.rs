//! The `clif-merge` command line: the merge (`clif-merge FILE...`) and the
//! separate-compilation subcommands (`summarize`, `plan`, `apply`, `dump`).
//!
//! * `merge`: the merge command's arguments and run;
//! * `separate`: the subcommands;
//! * `load`: reading inputs into a module (shared by both);
//! * `report`: what the merge prints (CLIF text, JSON, `--stats`);
//! * `error`: [`CliError`] and its exit codes.
//!
//! Exit codes: 0 success, 1 a mismatch found by `--validate`, 2 bad input or usage
//! (nothing is printed on stdout), 3 an internal error (a merged function failed the
//! verifier; nothing is printed).

pub(crate) mod error;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod report;
pub(crate) mod separate;

pub use error::CliError;
pub use load::{LoadedModule, ModeArg, SourceLocation, check_entity_numbers, expand_inputs, load};
pub use merge::{Args, ReportFormat, run};

use clap::Parser;
use error::catch_panic;
use separate::SeparateArgs;
use std::ffi::OsString;
use std::io::Write;

/// Entry point of the binary: parses `argv`, runs, prints, returns the exit code.
pub fn main_with_args(
    argv: impl IntoIterator<Item = OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    let argv: Vec<OsString> = argv.into_iter().collect();
    if let Some(command) = argv.get(1).and_then(|a| a.to_str())
        && separate::SUBCOMMANDS.contains(&command)
    {
        return run_command::<SeparateArgs>(argv, stdout, stderr, separate::run);
    }
    run_command::<Args>(argv, stdout, stderr, merge::run)
}

/// Parses `argv` as `A`, runs `run` on it and prints: clap's own output for usage
/// errors and `--help`; on success the run's stdout and stderr text; on failure
/// `error: MESSAGE` and the error's exit code. A panic (in a Cranelift crate or
/// here) does not reach the user as a crash: it becomes an internal error (exit 3).
/// The panic hook is left as the program set it (the `clif-merge` binary sets a
/// quiet one). Shared by the main command and the separate-compilation
/// subcommands.
fn run_command<A: Parser>(
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
    let result = catch_panic(|| run(&args)).unwrap_or_else(|panic| {
        Err(CliError {
            code: 3,
            message: format!("internal error: {panic}"),
        })
    });
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
