//! Valid CLIF of the kinds that once made clif-merge report an internal error, run
//! through the binary, plain and with `--similar --mode all`. Each file in
//! `tests/hard/` is written after one kind of failure found by running clif-merge
//! over all 1,278 files of Cranelift's own filetests (wasmtime v48.0.0,
//! `cranelift/filetests/filetests/`; each file names the upstream files of its
//! kind): instructions that verify only with the input's ISA and flags,
//! similar functions that the target's backend cannot compile, and types
//! Cranelift's printer cannot print back.
//!
//! Every run must end in exit 0 or 2 (never 3, never a crash); every exit-0 CLIF
//! output must parse again and pass the verifier with the target and flags its
//! header names, which are the input's.

#[path = "../support/process.rs"]
mod process;

use cranelift_codegen::settings::{self, Flags, FlagsOrIsa};
use cranelift_codegen::verify_function;
use cranelift_reader::{IsaSpec, ParseOptions, parse_test};
use process::{Run, clif_merge};
use std::path::{Path, PathBuf};

/// What a run of one hard file must do.
struct Expected {
    /// The file under `tests/hard/`.
    file: &'static str,
    /// Extra arguments.
    args: &'static [&'static str],
    /// The exit code.
    code: i32,
    /// Text that must appear on stderr (with `--stats`).
    stderr_contains: &'static [&'static str],
    /// Text that must appear on stdout.
    stdout_contains: &'static [&'static str],
}

const SIMILAR: &[&str] = &["--similar", "--mode", "all"];

const EXPECTED: &[Expected] = &[
    Expected {
        file: "frame_pointer.clif",
        args: &[],
        code: 0,
        stderr_contains: &["merged: 1"],
        stdout_contains: &["; %fp_b: erased, calls go to %fp_a"],
    },
    Expected {
        file: "frame_pointer.clif",
        args: SIMILAR,
        code: 0,
        stderr_contains: &["merged: 1"],
        stdout_contains: &["get_frame_pointer.i64"],
    },
    Expected {
        file: "pinned_reg.clif",
        args: &[],
        code: 0,
        stderr_contains: &["merged: 1"],
        stdout_contains: &["; %bump_b: erased, calls go to %bump_a"],
    },
    Expected {
        file: "pinned_reg.clif",
        args: SIMILAR,
        code: 0,
        stderr_contains: &["merged: 1"],
        stdout_contains: &["set_pinned_reg"],
    },
    Expected {
        file: "i128_similar.clif",
        args: &[],
        code: 0,
        stderr_contains: &["merged: 0"],
        stdout_contains: &["function %f(i128)", "function %g(i128)"],
    },
    Expected {
        file: "i128_similar.clif",
        args: SIMILAR,
        code: 0,
        stderr_contains: &["similar: 0 groups"],
        stdout_contains: &["function %f(i128)", "function %g(i128)"],
    },
    // Compiling the small group to decide (the model alone rejects it) finds
    // that the target cannot compile it.
    Expected {
        file: "i128_similar.clif",
        args: &["--similar", "--mode", "all", "--size-pricing", "confirm"],
        code: 0,
        stderr_contains: &[
            "similar: 0 groups",
            "not merged: %f, %g: the target cannot compile",
        ],
        stdout_contains: &["function %f(i128)", "function %g(i128)"],
    },
    Expected {
        file: "vector64_x64.clif",
        args: SIMILAR,
        code: 0,
        stderr_contains: &["similar: 0 groups"],
        stdout_contains: &["splat.i8x8"],
    },
    // Compiled to decide, the backend's panic is caught and reported.
    Expected {
        file: "vector64_x64.clif",
        args: &["--similar", "--mode", "all", "--size-pricing", "confirm"],
        code: 0,
        stderr_contains: &[
            "similar: 0 groups",
            "not merged: %f, %g: the target cannot compile",
        ],
        stdout_contains: &["splat.i8x8"],
    },
    Expected {
        file: "vector64_aarch64.clif",
        args: SIMILAR,
        code: 0,
        stderr_contains: &["similar: "],
        stdout_contains: &["target aarch64", "vall_true"],
    },
    Expected {
        file: "dynamic_types.clif",
        args: &[],
        code: 2,
        stderr_contains: &[
            "%store_explicit",
            "dynamic vector type",
            "cannot print as CLIF that parses again",
        ],
        stdout_contains: &[],
    },
    Expected {
        file: "dynamic_types.clif",
        args: &["--report", "json"],
        code: 0,
        stderr_contains: &[],
        stdout_contains: &["\"functions\""],
    },
];

fn hard_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/hard")
}

/// Parses CLIF output with its header and verifies every function with the
/// target and flags the header names.
fn reparse_with_header(text: &str) -> Result<usize, String> {
    let test = parse_test(text, ParseOptions::default())
        .map_err(|e| format!("output does not parse again: {e}"))?;
    let flags;
    let flags_or_isa = match &test.isa_spec {
        IsaSpec::None(f) => FlagsOrIsa::from(f),
        IsaSpec::Some(isas) => match isas.first() {
            Some(isa) => FlagsOrIsa::from(&**isa),
            None => {
                flags = Flags::new(settings::builder());
                FlagsOrIsa::from(&flags)
            }
        },
    };
    for (func, _) in &test.functions {
        verify_function(func, flags_or_isa)
            .map_err(|e| format!("{} fails the verifier: {e}", func.name))?;
    }
    Ok(test.functions.len())
}

fn check(expected: &Expected) -> Result<(), String> {
    let path = hard_dir().join(expected.file);
    let mut argv: Vec<String> = expected.args.iter().map(|s| s.to_string()).collect();
    argv.push("--stats".into());
    argv.push(path.display().to_string());
    let run: Run = clif_merge(&argv);
    let context = || {
        format!(
            "clif-merge {}\n--- stdout ---\n{}\n--- stderr ---\n{}",
            argv.join(" "),
            run.stdout,
            run.stderr
        )
    };
    if run.code != Some(expected.code) {
        return Err(format!(
            "exit {:?}, expected {}\n{}",
            run.code,
            expected.code,
            context()
        ));
    }
    // A reason may quote Cranelift's own panic message ("Cranelift panicked: ..."):
    // what must not appear is a panic report or the tool's internal-error exit.
    if run.stderr.contains("panicked at") || run.stderr.contains("error: internal error") {
        return Err(format!("a crash reported as output\n{}", context()));
    }
    for text in expected.stderr_contains {
        if !run.stderr.contains(text) {
            return Err(format!("stderr lacks `{text}`\n{}", context()));
        }
    }
    for text in expected.stdout_contains {
        if !run.stdout.contains(text) {
            return Err(format!("stdout lacks `{text}`\n{}", context()));
        }
    }
    let clif_output = !argv.iter().any(|a| a == "json");
    if expected.code == 0 && clif_output {
        reparse_with_header(&run.stdout).map_err(|e| format!("{e}\n{}", context()))?;
    }
    Ok(())
}

#[test]
fn hard_inputs_never_make_an_internal_error() {
    let failures: Vec<String> = EXPECTED
        .iter()
        .filter_map(|e| {
            check(e)
                .err()
                .map(|m| format!("{} {:?}: {m}", e.file, e.args))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "{} of {} runs failed:\n\n{}",
        failures.len(),
        EXPECTED.len(),
        failures.join("\n\n")
    );
}

/// Every file in `tests/hard/` is checked, both plain and with `--similar`.
#[test]
fn every_hard_file_has_expectations() {
    let mut files: Vec<String> = std::fs::read_dir(hard_dir())
        .expect("tests/hard")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".clif"))
        .collect();
    files.sort();
    for file in &files {
        let runs = EXPECTED.iter().filter(|e| e.file == file).count();
        assert!(runs >= 1, "{file} has no expectations");
    }
}
