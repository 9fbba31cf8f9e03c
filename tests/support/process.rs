//! Running the `clif-merge` binary as a process in tests: a temporary directory,
//! the run's exit code and output, and the contract's assertions on them. Shared by
//! `tests/cli/cli.rs` and `tests/cli/separate_cli.rs` (`#[path]`-included).

#![allow(dead_code)]

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A fresh directory under the system temp dir, removed on drop (`tempfile`).
pub struct TempDir(tempfile::TempDir);

impl TempDir {
    pub fn new(test: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("clif-merge-cli-{test}-"))
            .tempdir()
            .expect("create temp dir");
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    pub fn join(&self, rel: &str) -> PathBuf {
        self.0.path().join(rel)
    }

    /// Writes `contents` to `rel` (creating parent directories) and returns its path.
    pub fn write(&self, rel: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.join(rel);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).expect("create parent dir");
        }
        std::fs::write(&path, contents).expect("write temp file");
        path
    }
}

/// What one run of the binary produced.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs `clif-merge` with `args`.
pub fn clif_merge<I, S>(args: I) -> Run
where
    I: IntoIterator<Item = S>,
    S: Into<OsString>,
{
    let args: Vec<OsString> = args.into_iter().map(Into::into).collect();
    let out = Command::new(env!("CARGO_BIN_EXE_clif-merge"))
        .args(&args)
        .output()
        .expect("run clif-merge");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn s(path: &Path) -> String {
    path.display().to_string()
}

/// Asserts a successful run and returns it.
pub fn ok(run: Run) -> Run {
    assert_eq!(
        run.code,
        Some(0),
        "expected exit 0\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.stdout,
        run.stderr
    );
    run
}

/// Asserts a run that failed on bad input: exit code 2, nothing on stdout, stderr
/// starting with `error: `, and no panic.
pub fn bad_input(run: &Run) {
    assert_eq!(
        run.code,
        Some(2),
        "expected exit 2\n--- stdout ---\n{}\n--- stderr ---\n{}",
        run.stdout,
        run.stderr
    );
    assert!(
        run.stdout.is_empty(),
        "stdout must be empty on failure, got:\n{}",
        run.stdout
    );
    assert!(
        run.stderr.starts_with("error: "),
        "stderr must start with `error: `, got:\n{}",
        run.stderr
    );
    assert!(
        !run.stderr.contains("panicked"),
        "the tool panicked:\n{}",
        run.stderr
    );
}

/// Parses CLIF output again and checks every function with the verifier.
pub fn reparse_and_verify(text: &str) -> Vec<cranelift_codegen::ir::Function> {
    let funcs = cranelift_reader::parse_functions(text)
        .unwrap_or_else(|e| panic!("output does not re-parse: {e}\n--- output ---\n{text}"));
    let flags = cranelift_codegen::settings::Flags::new(cranelift_codegen::settings::builder());
    for f in &funcs {
        if let Err(errors) = cranelift_codegen::verify_function(f, &flags) {
            panic!(
                "output function {} fails the verifier:\n{errors}\n--- output ---\n{text}",
                f.name
            );
        }
    }
    funcs
}
