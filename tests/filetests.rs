//! Runs every `.clif` file under `filetests/` through `clif-merge` and checks the
//! output against the file's `; check:`-style directives (the `filecheck` crate).
//!
//! A line `; clif-merge: ARGS` in a file gives extra command-line arguments. Every
//! file must contain at least one directive, so no file passes by checking nothing.

use clap::Parser;
use clif_merge::cli::{Args, run};
use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::Opcode;
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

/// Sample arguments for a signature, or `None` if a parameter type is not sampled.
fn sample_args(func: &cranelift_codegen::ir::Function) -> Option<Vec<Vec<DataValue>>> {
    use cranelift_codegen::ir::types;
    let samples: [i64; 5] = [0, 1, -1, 7, 300];
    let mut rows = Vec::new();
    for &x in &samples {
        let mut row = Vec::new();
        for (i, p) in func.signature.params.iter().enumerate() {
            let y = x.wrapping_add(i as i64 * 3);
            row.push(match p.value_type {
                types::I8 => DataValue::I8(y as i8),
                types::I16 => DataValue::I16(y as i16),
                types::I32 => DataValue::I32(y as i32),
                types::I64 => DataValue::I64(y),
                types::F32 => DataValue::F32((y as f32).into()),
                types::F64 => DataValue::F64((y as f64).into()),
                _ => return None,
            });
        }
        rows.push(row);
    }
    Some(rows)
}

/// An oracle independent of the comparator: for every merge the filetests make,
/// the duplicate and the function it merged into give the same results in
/// `cranelift-interpreter` (functions calling each other run in one store).
#[test]
fn merges_in_filetests_agree_in_the_interpreter() {
    // The interpreter recurses on the host stack for every CLIF call; recursive
    // filetests (factorial, ping/pong) need room.
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(interpret_filetest_merges)
        .expect("spawn")
        .join()
        .expect("interpreter comparison failed");
}

fn interpret_filetest_merges() {
    use clif_merge::{FunctionSet, MergeOptions, merge_functions};
    use cranelift_interpreter::environment::FunctionStore;
    use cranelift_interpreter::interpreter::{Interpreter, InterpreterState};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/merge");
    let mut files = Vec::new();
    clif_files(&root, &mut files);
    files.sort();
    let mut compared = 0;
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let functions = cranelift_reader::parse_functions(&text).expect("parses");
        let mut module = FunctionSet::new();
        for f in &functions {
            module
                .push(f.clone(), cranelift_module::Linkage::Local)
                .expect("unique");
        }
        let outcome = merge_functions(&module, &MergeOptions::default());
        let mut store = FunctionStore::default();
        for f in &functions {
            store.add(f.name.to_string(), f);
        }
        let run = |name: &str, args: &[DataValue]| -> String {
            let state = InterpreterState::default().with_function_store(store.clone());
            let mut interpreter = Interpreter::new(state).with_fuel(Some(20_000));
            match interpreter.call_by_name(name, args) {
                Ok(flow) => format!("{flow:?}"),
                Err(e) => format!("error: {e}"),
            }
        };
        for d in &outcome.plan.decisions {
            let dup = &module.get(d.function).func;
            let kept = module.display_name(d.into);
            // The interpreter has no memory behind raw pointers and does not resolve
            // symbols: leave out functions that access memory, use global values or
            // take or call through addresses.
            let interpretable = dup.global_values.is_empty()
                && dup.layout.blocks().all(|b| {
                    dup.layout.block_insts(b).all(|i| {
                        let op = dup.dfg.insts[i].opcode();
                        !(op.can_load()
                            || op.can_store()
                            || op == Opcode::FuncAddr
                            || op == Opcode::CallIndirect)
                    })
                });
            let Some(rows) = sample_args(dup).filter(|_| interpretable) else {
                continue;
            };
            for args in rows {
                let (a, b) = (run(&dup.name.to_string(), &args), run(&kept, &args));
                assert_eq!(
                    a,
                    b,
                    "{}: {} and {kept} disagree on {args:?}",
                    path.display(),
                    dup.name
                );
                if !a.starts_with("error") {
                    compared += 1;
                }
            }
        }
    }
    assert!(
        compared >= 50,
        "only {compared} interpreter comparisons ran"
    );
    println!("{compared} interpreter runs agreed");
}
