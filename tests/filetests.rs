//! Runs every `.clif` file under `filetests/` through `clif-merge` and checks the
//! output against the file's `; check:`-style directives (the `filecheck` crate).
//!
//! A line `; clif-merge: ARGS` in a file gives extra command-line arguments. Every
//! file must contain at least one directive, so no file passes by checking nothing.

use clap::Parser;
use clif_merge::testing::{Args, run};
use std::path::{Path, PathBuf};

fn clif_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("filetests directory is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            clif_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "clif") {
            out.push(path);
        }
    }
}

fn extra_args(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("; clif-merge:"))
        .flat_map(|rest| rest.split_whitespace().map(str::to_string))
        .collect()
}

fn run_filetest(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut argv = vec!["clif-merge".to_string()];
    argv.extend(extra_args(&text));
    argv.push(path.display().to_string());
    let args = Args::try_parse_from(&argv).map_err(|e| format!("bad `; clif-merge:` line: {e}"))?;
    let (output, _) =
        run(&args).map_err(|e| format!("clif-merge failed (exit {}): {e}", e.code))?;
    let checker = filecheck::CheckerBuilder::new()
        .text(&text)
        .map_err(|e| format!("bad directives: {e}"))?
        .finish();
    if checker.is_empty() {
        return Err("no filecheck directives".into());
    }
    let (ok, explain) = checker
        .explain(&output, filecheck::NO_VARIABLES)
        .map_err(|e| format!("filecheck error: {e}"))?;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "directives do not match.\n--- output ---\n{output}\n--- filecheck ---\n{explain}"
        ))
    }
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
    let mut files = Vec::new();
    clif_files(&root, &mut files);
    files.sort();
    assert!(
        files.len() >= 40,
        "expected at least 40 filetests, found {}",
        files.len()
    );
    let mut failures = Vec::new();
    for path in &files {
        if let Err(e) = run_filetest(path) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} filetests failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

/// An oracle independent of the comparator: every merge the `merge/` filetests make
/// is run by the translation validator (`clif_merge::validate`: the duplicate in the
/// original module against its replacement in the merged module, in
/// `cranelift-interpreter`, on edge and random inputs). No mismatch is allowed, and
/// enough of it must actually run for the check to mean something.
#[test]
fn merges_in_filetests_agree_in_the_interpreter() {
    use clif_merge::validate::validate;
    use clif_merge::{FunctionSet, MergeOptions, merge_functions};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/merge");
    let mut files = Vec::new();
    clif_files(&root, &mut files);
    files.sort();
    let (mut validated, mut runs) = (0, 0);
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let mut module = FunctionSet::new();
        for f in cranelift_reader::parse_functions(&text).expect("parses") {
            module.push(f, clif_merge::Linkage::Local).expect("unique");
        }
        let outcome = merge_functions(&module, &MergeOptions::default());
        let report = validate(&module, &outcome.plan, &outcome.output);
        assert!(
            report.mismatches.is_empty(),
            "{}: {:?}",
            path.display(),
            report.mismatches
        );
        validated += report.validated;
        runs += report.runs;
    }
    assert!(
        validated >= 30,
        "only {validated} merges could be validated"
    );
    assert!(runs >= 50, "only {runs} interpreter comparisons ran");
    println!("{validated} merges validated by {runs} interpreter runs");
}

/// The same oracle for the similar-function merge: in every `similar/` filetest,
/// each member of a merged group, run in the original module, must agree with its
/// entry point (which calls the merged body with its constants) in the merged
/// module.
#[test]
fn similar_merges_in_filetests_agree_in_the_interpreter() {
    use clif_merge::similar::{SimilarOptions, SimilarPass};
    use clif_merge::validate::validate_similar;
    use clif_merge::{FunctionSet, MergeOptions, merge_functions};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/similar");
    let mut files = Vec::new();
    clif_files(&root, &mut files);
    files.sort();
    let (mut groups, mut validated, mut runs) = (0, 0, 0);
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let mut module = FunctionSet::new();
        for f in cranelift_reader::parse_functions(&text).expect("parses") {
            module.push(f, clif_merge::Linkage::Local).expect("unique");
        }
        let outcome = merge_functions(&module, &MergeOptions::default());
        let args = extra_args(&text);
        let option = |name: &str| -> Option<u64> {
            let i = args.iter().position(|a| a == name)?;
            args.get(i + 1)?.parse().ok()
        };
        let defaults = SimilarOptions::default();
        let options = SimilarOptions::default()
            .with_max_holes(option("--max-holes").map_or(defaults.max_holes, |n| n as usize))
            .with_min_saved(option("--min-saved").unwrap_or(defaults.min_saved));
        let similar = SimilarPass::after(&module, &outcome.output, &options);
        let report = validate_similar(&similar.module, &similar.outcome);
        assert!(
            report.mismatches.is_empty(),
            "{}: {:?}",
            path.display(),
            report.mismatches
        );
        groups += similar.outcome.groups.len();
        validated += report.validated;
        runs += report.runs;
    }
    assert!(groups >= 7, "only {groups} similar groups merged");
    assert!(validated >= 15, "only {validated} entry points validated");
    println!("{groups} similar groups, {validated} entry points validated by {runs} runs");
}
