//! The `clif-merge` command line: one clap parser ([`Cli`]) for the merge
//! (`clif-merge FILE...`, no subcommand) and the separate-compilation subcommands
//! (`summarize`, `plan`, `apply`, `dump`).
//!
//! * `merge`: the merge command's arguments and run;
//! * `separate`: the subcommands;
//! * `load`: reading inputs into a module (shared by both);
//! * `report`: what the merge prints (CLIF text, JSON, `--stats`);
//! * `progress`: the phase and bar shown on a terminal while a command runs;
//! * `error`: [`CliError`] and its exit codes.
//!
//! Exit codes: 0 success, 1 a mismatch found by `--validate`, 2 bad input or usage
//! (nothing is printed on stdout), 3 an internal error (a merged function failed the
//! verifier; nothing is printed).

pub(crate) mod error;
pub(crate) mod load;
pub(crate) mod merge;
pub(crate) mod progress;
pub(crate) mod report;
pub(crate) mod separate;

pub use error::CliError;
pub use load::{LoadedModule, ModeArg, SourceLocation, check_entity_numbers, expand_inputs, load};
pub use merge::{Args, ReportFormat, run};
pub use progress::ProgressDisplay;
pub use separate::SeparateCommand;

use clap::Parser;
use error::catch_panic;
use progress::Meter;
use std::ffi::OsString;
use std::io::Write;

/// The command line of `clif-merge`: one parser. Without a subcommand it is the
/// merge (`clif-merge [OPTIONS] FILE...`); `summarize`, `plan`, `apply` and `dump`
/// are the stages of separate compilation.
#[derive(Parser, Debug)]
#[command(
    name = "clif-merge",
    version,
    about = merge::ABOUT,
    long_about = merge::LONG_ABOUT,
    after_help = merge::AFTER_HELP,
    args_conflicts_with_subcommands = true,
    disable_help_subcommand = true,
    subcommand_negates_reqs = true
)]
pub struct Cli {
    /// A stage of separate compilation; none for the merge.
    #[command(subcommand)]
    pub command: Option<SeparateCommand>,
    /// The merge's arguments.
    #[command(flatten)]
    pub merge: Args,
}

/// Runs what `cli` asks for. Returns `(stdout, stderr)` text on success.
pub fn run_cli(cli: &Cli) -> Result<(String, String), CliError> {
    run_cli_showing(cli, &Meter::hidden())
}

/// [`run_cli`], showing its progress on `meter`.
fn run_cli_showing(cli: &Cli, meter: &Meter) -> Result<(String, String), CliError> {
    match &cli.command {
        Some(command) => separate::run(command, meter),
        None => merge::run_showing(&cli.merge, meter),
    }
}

/// Parses `argv`, runs, prints, returns the exit code; shows no progress (see
/// [`main_with_progress`]).
pub fn main_with_args(
    argv: impl IntoIterator<Item = OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
) -> i32 {
    main_with_progress(argv, stdout, stderr, ProgressDisplay::Hidden)
}

/// Entry point of the binary: [`main_with_args`], showing the run's progress on
/// stderr as `display` says. The progress is cleared before anything is printed,
/// so what is printed and the exit code are the same either way.
pub fn main_with_progress(
    argv: impl IntoIterator<Item = OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    display: ProgressDisplay,
) -> i32 {
    run_command::<Cli>(
        argv.into_iter().collect(),
        stdout,
        stderr,
        display,
        run_cli_showing,
    )
}

/// Parses `argv` as `A`, runs `run` on it (with a [`Meter`] for `display`) and
/// prints: clap's own output for usage errors and `--help`; on success the run's
/// stdout and stderr text; on failure `error: MESSAGE` and the error's exit code.
/// A panic (in a Cranelift crate or here) does not reach the user as a crash: it
/// becomes an internal error (exit 3). The panic hook is left as the program set it
/// (the `clif-merge` binary sets a quiet one).
fn run_command<A: Parser>(
    argv: Vec<OsString>,
    stdout: &mut dyn Write,
    stderr: &mut dyn Write,
    display: ProgressDisplay,
    run: impl FnOnce(&A, &Meter) -> Result<(String, String), CliError>,
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
    let meter = Meter::new(display);
    let result = catch_panic(|| run(&args, &meter)).unwrap_or_else(|panic| {
        Err(CliError {
            code: 3,
            message: format!("internal error: {panic}"),
        })
    });
    // Off the terminal before anything is printed.
    meter.clear();
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
