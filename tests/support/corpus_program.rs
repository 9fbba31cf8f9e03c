//! One program of `../shared/corpus`, unpacked and loaded for a test. Shared by the
//! tests that need a real program but not the whole corpus (`#[path]`-included).

use clif_merge::FunctionSet;
use clif_merge::testing::{expand_inputs, load};
use std::path::Path;

/// Unpacks `../shared/corpus/PROGRAM.tar.xz` into a temporary directory named after
/// `test`, loads every function of it as one module (local linkage) and removes the
/// directory. `None` when the corpus is not there, after a loud note (a failure
/// under CI: see `support/skip.rs`, which the including test must include as `skip`).
pub fn load_corpus_program(program: &str, test: &str) -> Option<FunctionSet> {
    let archive = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/corpus")
        .join(format!("{program}.tar.xz"));
    if !archive.exists() {
        super::skip::skip_or_fail(test, "../shared/corpus not found");
        return None;
    }
    let dest = tempfile::Builder::new()
        .prefix(&format!("clif-merge-{test}-"))
        .tempdir()
        .expect("temp dir");
    let status = std::process::Command::new("tar")
        .arg("-C")
        .arg(dest.path())
        .arg("-xJf")
        .arg(&archive)
        .status()
        .expect("tar");
    assert!(status.success(), "unpacking {program} failed");
    let files = expand_inputs(&[dest.path().join(program)]).expect("unpacked program");
    let module = load(&files).expect("loads").functions;
    Some(module)
}
