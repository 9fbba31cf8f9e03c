//! Fuzzes the command-line path: parse → verify → merge → print → re-parse → verify,
//! in both modes. Any input the reader and verifier accept must come out as CLIF that
//! parses and verifies again, with one function per function kept or thunked.

#![no_main]

use clif_merge::Linkage;
use clif_merge::OutputEntry;
use clif_merge::similar::{SimilarOptions, SimilarPass};
use clif_merge::testing::clif_text;
use clif_merge::{FunctionSet, MergeMode, MergeOptions, merge_functions};
use cranelift_codegen::settings::{self, Flags};
use cranelift_codegen::verify_function;
use cranelift_reader::{ParseOptions, parse_test};
use libfuzzer_sys::fuzz_target;

/// Runs `f` with libFuzzer's abort-on-panic hook set aside: a panic inside a
/// Cranelift crate on malformed input is that crate's business (the CLI reports it as
/// bad input), not a clif-merge crash.
fn outside_our_code<T>(f: impl FnOnce() -> T) -> Option<T> {
    let hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).ok();
    std::panic::set_hook(hook);
    result
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    // What the CLI refuses before parsing (the reader would allocate gigabytes).
    if clif_merge::testing::check_entity_numbers(text).is_err() {
        return;
    }
    let Some(Ok(test)) = outside_our_code(|| parse_test(text, ParseOptions::default())) else {
        return;
    };
    let flags = Flags::new(settings::builder());
    let mut module = FunctionSet::new();
    for (func, _) in test.functions {
        // Cranelift's own print → parse round trip must hold for the input, or a
        // failure to re-parse our output says nothing about us (fuzzing found
        // `vconst.i64x4`: printed as a 256-bit constant the reader refuses).
        let round_trips = || cranelift_reader::parse_functions(&func.display().to_string()).is_ok();
        if outside_our_code(|| verify_function(&func, &flags).is_ok() && round_trips())
            != Some(true)
            || module.push(func, Linkage::Local).is_err()
        {
            return;
        }
    }
    for mode in [MergeMode::Safe, MergeMode::All] {
        let outcome = merge_functions(&module, &MergeOptions::default().with_mode(mode));
        let printed = clif_text(&module, &outcome, None, "");
        let reparsed = cranelift_reader::parse_functions(&printed)
            .unwrap_or_else(|e| panic!("merged output does not parse: {e}\n{printed}"));
        for func in &reparsed {
            if let Err(e) = verify_function(func, &flags) {
                panic!("merged {} fails the verifier: {e}\n{printed}", func.name);
            }
        }
        let bodies = outcome
            .output
            .iter()
            .filter(|e| !matches!(e, OutputEntry::Removed { .. }))
            .count();
        assert_eq!(reparsed.len(), bodies);

        // The similar-function merge on top (sizes by instruction count, so no
        // compiling), merging by sequence alignment too (off by default, last:
        // the default merges stay as they are): entry points and merged bodies
        // must print, parse and verify.
        let options = SimilarOptions::default().with_align_sequence(true);
        let similar = SimilarPass::after(&module, &outcome, &options, None);
        let printed = clif_text(&module, &outcome, Some(&similar), "");
        let reparsed = cranelift_reader::parse_functions(&printed)
            .unwrap_or_else(|e| panic!("similar-merged output does not parse: {e}\n{printed}"));
        for func in &reparsed {
            if let Err(e) = verify_function(func, &flags) {
                panic!(
                    "similar-merged {} fails the verifier: {e}\n{printed}",
                    func.name
                );
            }
        }
        assert_eq!(reparsed.len(), bodies + similar.outcome().merged_bodies.len());
    }
});
