//! The merge passes on CLIF, through the library (`src/identical`, `src/similar`
//! and `src/ir` below them): the comparator and hash against generated functions,
//! the real-world corpus, and the same results on any number of threads.
//!
//! One test binary; each module is one former `tests/*.rs` binary. A test of the
//! identical-function or the similar-function pass that goes through neither the
//! command line, `MergingModule` nor separate compilation goes here.

// Several modules load the same `tests/support` file with `#[path]`, each its own
// copy, as when every one of them was a test binary of its own.
#![allow(clippy::duplicate_mod)]

mod corpus;
mod parallel;
mod properties;
