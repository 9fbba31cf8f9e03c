//! How a command fails: [`CliError`] with its exit code, and panics turned into
//! messages.

use std::fmt;

/// An error that ends the run, with its exit code.
#[derive(Debug)]
pub struct CliError {
    /// Process exit code.
    pub code: i32,
    /// The message, printed on stderr after `error: `.
    pub message: String,
}

impl CliError {
    /// A bad-input error (exit code 2).
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

pub(crate) use crate::ir::catch_panic;

/// `text` with every line indented by two spaces.
pub(crate) fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
