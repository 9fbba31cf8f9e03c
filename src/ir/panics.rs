//! Caught panics: Cranelift's crates panic on some input their verifier accepts (a
//! backend without a lowering, the reader on odd text, the interpreter on what it
//! cannot run), and every layer that catches one reports its message.

use std::any::Any;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// The message of a panic's payload (`"no message"` when it carries none).
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "no message".into())
}

/// Runs `f`, turning a panic into its message.
pub fn catch_panic<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| panic_message(payload.as_ref()))
}
