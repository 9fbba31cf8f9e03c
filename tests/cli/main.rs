//! The `clif-merge` command-line tool (`src/cli`): its contract (exit codes, JSON
//! report, CLIF output, errors), the separate-compilation subcommands, the
//! filetests under `filetests/`, hard and hostile inputs, and the meaning of every
//! name in its output.
//!
//! One test binary; each module is one former `tests/*.rs` binary. A test that runs
//! the tool, as a process (`CARGO_BIN_EXE_clif-merge`, `support/process.rs`) or in
//! process through its argument parser, goes here.

// Several modules load the same `tests/support` file with `#[path]`, each its own
// copy, as when every one of them was a test binary of its own.
#![allow(clippy::duplicate_mod)]

mod cli;
mod filetests;
mod hard_inputs;
mod hostile;
mod names;
mod separate_cli;
