//! How far a validation has got: [`Progress`], told by the validator and shown by
//! whoever called it (the `clif-merge` tool draws a bar on a terminal). The library
//! draws nothing and depends on no terminal crate.

/// Told how far a validation has got. Every method has a default that does
/// nothing; [`NoProgress`] is the implementation that keeps all of them.
///
/// The validator runs on a thread of its own, hence `Sync`.
pub trait Progress: Sync {
    /// The validation has `total` checks to run (pairs of an original and its
    /// replacement), none run yet.
    fn start(&self, total: usize) {
        let _ = total;
    }

    /// One more check has run, whatever it found.
    fn step(&self) {}
}

/// Progress that nobody is shown: what [`validate`](super::validate) and its
/// siblings report to.
#[derive(Copy, Clone, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
