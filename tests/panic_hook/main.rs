//! The library leaves the process-wide panic hook alone.
//!
//! A binary of its own, and it must stay alone: its test installs a panic hook,
//! which is global to the process, and counts the panics that reach it; in a
//! binary shared with other tests, their panics (and their threads) would reach
//! that hook and miscount, and its hook would swallow their panic messages.

mod panic_hook;
