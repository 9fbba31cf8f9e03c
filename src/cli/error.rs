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

/// Runs `f`, turning a panic into its message.
pub(crate) fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".into())
    })
}

/// `text` with every line indented by two spaces.
pub(crate) fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
