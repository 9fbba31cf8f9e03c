//! Command-line tests of the separate-compilation subcommands: run the
//! `clif-merge` binary as a process (`summarize`, `plan`, `apply`, `dump`) on small
//! programs of several modules written to a temp dir, and check exit codes, stdout,
//! stderr and the files written against the documented contract
//! (`clif-merge summarize --help`, `src/separate_cli.rs`): the JSON report of
//! `plan`, one decisions file per module, the CLIF `apply` prints (re-parsed,
//! verified and run in `cranelift-interpreter` against the original program), order
//! independence of the plan, and errors on bad or stale input.

use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::{Function, InstructionData, Opcode};
use cranelift_interpreter::environment::FunctionStore;
use cranelift_interpreter::interpreter::{Interpreter, InterpreterState};
use cranelift_interpreter::step::ControlFlow;
use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------

#[path = "../support/process.rs"]
mod process;

use process::{Run, TempDir, bad_input, clif_merge, ok, reparse_and_verify};

// ---------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------

/// Asserts a bad-input failure whose message mentions every one of `needles`.
fn bad_input_mentioning(run: &Run, needles: &[&str]) {
    bad_input(run);
    for needle in needles {
        assert!(
            run.stderr.contains(needle),
            "stderr should mention {needle:?}, got:\n{}",
            run.stderr
        );
    }
}

// ---------------------------------------------------------------------------------
// Helpers of this file
// ---------------------------------------------------------------------------------

/// The magic numbers of the file formats (documented in `src/summary.rs`).
const SUMMARY_MAGIC: &[u8] = b"CLIFMSUM";
const DECISIONS_MAGIC: &[u8] = b"CLIFMDEC";

/// `clif-merge summarize OPTIONS MODULE_DIR -o OUT`, which must succeed.
fn summarize(module_dir: &Path, out: &Path, options: &[&str]) -> Run {
    let mut argv: Vec<OsString> = vec!["summarize".into()];
    argv.extend(options.iter().map(OsString::from));
    argv.push(module_dir.into());
    argv.push("-o".into());
    argv.push(out.into());
    let run = ok(clif_merge(argv));
    assert!(
        run.stdout.is_empty(),
        "summarize prints nothing on stdout, got:\n{}",
        run.stdout
    );
    run
}

/// `clif-merge plan SUMMARIES --out-dir OUT_DIR [--report json]`.
fn plan(summaries: &[PathBuf], out_dir: &Path, json_report: bool) -> Run {
    let mut argv: Vec<OsString> = vec!["plan".into()];
    argv.extend(summaries.iter().map(|p| p.as_os_str().to_owned()));
    argv.push("--out-dir".into());
    argv.push(out_dir.into());
    if json_report {
        argv.push("--report".into());
        argv.push("json".into());
    }
    clif_merge(argv)
}

/// `clif-merge apply --decisions DECISIONS OPTIONS MODULE_DIR`.
fn apply(decisions: &Path, module_dir: &Path, options: &[&str]) -> Run {
    let mut argv: Vec<OsString> = vec!["apply".into(), "--decisions".into(), decisions.into()];
    argv.extend(options.iter().map(OsString::from));
    argv.push(module_dir.into());
    clif_merge(argv)
}

/// Parses the whole of stdout as one JSON object with exactly the report's keys.
fn json_report(run: &Run) -> Value {
    let value: Value = serde_json::from_str(&run.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not exactly one JSON value: {e}\n--- stdout ---\n{}",
            run.stdout
        )
    });
    let obj = value.as_object().expect("the report is a JSON object");
    let mut keys: Vec<&str> = obj.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "actions",
            "classes",
            "functions",
            "merged",
            "promoted",
            "redirected",
            "removed",
            "thunked"
        ]
    );
    value
}

/// Asserts that `dir` holds no decisions file (a failed `plan` writes none).
fn no_decisions_in(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let written: Vec<PathBuf> = entries
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "dec"))
        .collect();
    assert!(
        written.is_empty(),
        "a failed plan wrote decisions: {written:?}"
    );
}

/// The function `name` of `funcs`.
fn find<'a>(funcs: &'a [Function], name: &str) -> &'a Function {
    funcs
        .iter()
        .find(|f| f.name.to_string() == name)
        .unwrap_or_else(|| panic!("no function {name} in the output"))
}

fn names(funcs: &[Function]) -> Vec<String> {
    funcs.iter().map(|f| f.name.to_string()).collect()
}

/// The names of the functions `func` calls (`call`, `return_call`) or takes the
/// address of (`func_addr`), in instruction order.
fn callees(func: &Function) -> Vec<String> {
    let mut out = Vec::new();
    for block in func.layout.blocks() {
        for inst in func.layout.block_insts(block) {
            let func_ref = match func.dfg.insts[inst] {
                InstructionData::Call { func_ref, .. }
                | InstructionData::FuncAddr { func_ref, .. } => func_ref,
                _ => continue,
            };
            out.push(
                func.dfg.ext_funcs[func_ref]
                    .name
                    .display(Some(&func.params))
                    .to_string(),
            );
        }
    }
    out
}

/// If `func` is a thunk (one block that passes its parameters, in order, to one
/// function and returns its results: `return_call`, or `call` then `return`),
/// the function it transfers to.
fn thunk_target(func: &Function) -> Option<String> {
    let blocks: Vec<_> = func.layout.blocks().collect();
    let [entry] = blocks[..] else {
        return None;
    };
    let params = func.dfg.block_params(entry);
    let insts: Vec<_> = func.layout.block_insts(entry).collect();
    let callee_of = |inst| match func.dfg.insts[inst] {
        InstructionData::Call { func_ref, .. } => Some(
            func.dfg.ext_funcs[func_ref]
                .name
                .display(Some(&func.params))
                .to_string(),
        ),
        _ => None,
    };
    match insts[..] {
        [tail] if func.dfg.insts[tail].opcode() == Opcode::ReturnCall => {
            (func.dfg.inst_args(tail) == params).then(|| callee_of(tail))?
        }
        [call, ret]
            if func.dfg.insts[call].opcode() == Opcode::Call
                && func.dfg.insts[ret].opcode() == Opcode::Return =>
        {
            let passes = func.dfg.inst_args(call) == params;
            let returns = func.dfg.inst_args(ret) == func.dfg.inst_results(call);
            (passes && returns).then(|| callee_of(call))?
        }
        _ => None,
    }
}

/// Runs `name(args)` in the interpreter with every function of `program` callable
/// by name; the returned values, or the error as text.
fn interpret(program: &[Function], name: &str, args: &[DataValue]) -> Result<Vec<String>, String> {
    let mut store = FunctionStore::default();
    for f in program {
        store.add(f.name.to_string(), f);
    }
    let state = InterpreterState::default().with_function_store(store);
    let mut interpreter = Interpreter::new(state).with_fuel(Some(100_000));
    match interpreter.call_by_name(name, args) {
        Ok(ControlFlow::Return(values)) => Ok(values.iter().map(|v| format!("{v:?}")).collect()),
        Ok(other) => Err(format!("{other:?}")),
        Err(e) => Err(format!("error: {e}")),
    }
}

const SAMPLES: [i32; 7] = [0, 1, -1, 2, 7, i32::MIN, i32::MAX];

/// A function of one `i32` with a branch: `x * k` if `x != 0`, else `1 - 0`.
/// Values start at `v`; `reordered` writes the two arms in the other textual order
/// with other block numbers (still the same function).
fn branchy(name: &str, k: i32, v: u32, reordered: bool) -> String {
    let [v0, v1, v2, v3, v4, v5] = [v, v + 1, v + 2, v + 3, v + 4, v + 5];
    let then_arm = |b: u32| {
        format!(
            "block{b}:\n    v{v2} = iconst.i32 {k}\n    v{v3} = imul v{v0}, v{v2}\n    return v{v3}\n"
        )
    };
    let else_arm = |b: u32| {
        format!(
            "block{b}:\n    v{v4} = iconst.i32 1\n    v{v5} = isub v{v4}, v{v1}\n    return v{v5}\n"
        )
    };
    let (then_block, else_block, arms) = if reordered {
        (7, 3, format!("{}{}", else_arm(3), then_arm(7)))
    } else {
        (1, 2, format!("{}{}", then_arm(1), else_arm(2)))
    };
    format!(
        "function {name}(i32) -> i32 {{
block0(v{v0}: i32):
    v{v1} = iconst.i32 0
    brif v{v0}, block{then_block}, block{else_block}
{arms}}}
"
    )
}

/// The three-module program of the end-to-end tests, written to `dir/{a,b,c}/`:
///
/// - `a`: local `%f` (a copy of `%g`), exported `%main` calling `%f` and `%g`
///   (two files);
/// - `b`: exported `%g`, and exported `%h` (differs from `%g` in one constant);
/// - `c`: exported `%k` (a copy of `%g`, blocks reordered) and exported `%user`
///   calling `%k`.
///
/// Returns the module directories and each one's linkage options.
fn three_modules(dir: &TempDir) -> [(PathBuf, Vec<&'static str>); 3] {
    dir.write("a/f.clif", branchy("%f", 7, 0, false));
    dir.write(
        "a/main.clif",
        "function %main(i32) -> i32 {
    fn0 = %f(i32) -> i32
    fn1 = %g(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    v2 = call fn1(v1)
    v3 = iadd v1, v2
    return v3
}
",
    );
    dir.write(
        "b/b.clif",
        format!(
            "{}\n{}",
            branchy("%g", 7, 10, false),
            branchy("%h", 9, 0, false)
        ),
    );
    dir.write(
        "c/c.clif",
        format!(
            "{}\nfunction %user(i32) -> i32 {{
    fn0 = %k(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    v2 = iconst.i32 1
    v3 = iadd v1, v2
    return v3
}}
",
            branchy("%k", 7, 40, true)
        ),
    );
    [
        (dir.join("a"), vec!["--export", "%main"]),
        (dir.join("b"), vec!["--export", "%g", "--export", "%h"]),
        (dir.join("c"), vec!["--export", "%k", "--export", "%user"]),
    ]
}

/// Summarizes each module to `dir/NAME.sum` (the module's name is the file stem).
fn summarize_all(dir: &TempDir, modules: &[(PathBuf, Vec<&str>)]) -> Vec<PathBuf> {
    modules
        .iter()
        .map(|(module, options)| {
            let name = module.file_name().expect("module dir name");
            let out = dir.path().join(name).with_extension("sum");
            summarize(module, &out, options);
            out
        })
        .collect()
}

/// The program hash that marks the names `plan` promotes, over the summary files
/// `summaries`, as 16 hex digits (`clif-merge plan --help`).
fn program_hash(summaries: &[PathBuf]) -> String {
    let read: Vec<clif_merge::separate::Summary> = summaries
        .iter()
        .map(|path| {
            let bytes = std::fs::read(path).expect("summary file");
            clif_merge::separate::Summary::from_bytes(&bytes).expect("a summary")
        })
        .collect();
    format!("{:016x}", clif_merge::separate::program_hash(&read))
}

/// Every function of the CLIF files directly in `module_dir`.
fn parse_module(module_dir: &Path) -> Vec<Function> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(module_dir)
        .expect("read module dir")
        .map(|e| e.expect("dir entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "clif"))
        .collect();
    files.sort();
    files
        .iter()
        .flat_map(|f| {
            cranelift_reader::parse_functions(&std::fs::read_to_string(f).expect("read clif"))
                .expect("input parses")
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// 1. End to end
// ---------------------------------------------------------------------------------

/// Three modules with one class of duplicates across all three: summaries, the
/// plan's JSON report, one decisions file per module, and the CLIF each module's
/// `apply` prints (re-parsed, verified, the expected functions removed or made
/// thunks, calls redirected, and the whole program computing what it computed).
#[test]
fn end_to_end_three_modules() {
    let dir = TempDir::new("e2e");
    let modules = three_modules(&dir);

    // Stage 1.
    let summaries = summarize_all(&dir, &modules);
    let mut sizes = Vec::new();
    for (summary, name) in summaries.iter().zip(["a", "b", "c"]) {
        let bytes = std::fs::read(summary).expect("summary written");
        assert!(
            bytes.starts_with(SUMMARY_MAGIC),
            "{} does not start with the summary magic",
            summary.display()
        );
        assert!(
            bytes.windows(name.len()).any(|w| w == name.as_bytes()),
            "the summary of module {name} does not record its name"
        );
        sizes.push(bytes.len());
    }
    // Snapshot of the summaries' sizes: a 28-byte header (magic, format version,
    // vocabulary id, checksum), then the body (its first field after the module's
    // name: the source, one byte for IR). The format has no paths or times, so
    // the sizes are exact; they change when the modules, the summary format or the
    // fingerprint (whose hashes it holds, compressed) change (update deliberately).
    assert_eq!(sizes, [247, 250, 229], "bytes of the summaries of a, b, c");

    // Stage 2.
    let out_dir = dir.join("decisions");
    let run = ok(plan(&summaries, &out_dir, true));
    let report = json_report(&run);
    // By the documented rules: %f, %g and %k are equal (values renamed, blocks
    // reordered); %h differs in a constant; %main and %user are unique. The
    // representative is visible, the first by module and name: b::%g (a::%f is
    // local). The local a::%f, whose address is never taken, is removed; the
    // exported c::%k becomes a thunk.
    assert_eq!(
        report,
        json!({
            "functions": 6,
            "merged": 2,
            "removed": 1,
            "thunked": 1,
            "promoted": 0,
            "redirected": 0,
            "classes": [["b::%g", "a::%f", "c::%k"]],
            "actions": [
                {"function": "a::%f", "into": "b::%g", "action": "redirect"},
                {"function": "c::%k", "into": "b::%g", "action": "thunk"},
            ],
        })
    );
    for name in ["a", "b", "c"] {
        let path = out_dir.join(format!("{name}.dec"));
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("no decisions file {}: {e}", path.display()));
        assert!(bytes.starts_with(DECISIONS_MAGIC), "{}", path.display());
    }

    // Stage 3.
    let mut merged_program = Vec::new();
    let mut outputs = Vec::new();
    for (module, options) in &modules {
        let name = module
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        let decisions = out_dir.join(format!("{name}.dec"));
        let run = ok(apply(&decisions, module, options));
        let funcs = reparse_and_verify(&run.stdout);
        merged_program.extend(funcs.iter().cloned());
        outputs.push(funcs);
    }
    let [a, b, c] = &outputs[..] else {
        unreachable!()
    };

    // a: %f is gone, %main calls %g twice.
    assert_eq!(names(a), ["%main"]);
    assert_eq!(callees(find(a, "%main")), ["%g", "%g"]);

    // b: untouched, the same functions with the same instructions.
    assert_eq!(names(b), ["%g", "%h"]);
    let original_b = parse_module(&dir.join("b"));
    for f in &original_b {
        let out = find(b, &f.name.to_string());
        let opcodes = |func: &Function| -> Vec<Opcode> {
            func.layout
                .blocks()
                .flat_map(|bl| func.layout.block_insts(bl))
                .map(|i| func.dfg.insts[i].opcode())
                .collect()
        };
        assert_eq!(opcodes(out), opcodes(f), "{} changed", f.name);
        assert_eq!(thunk_target(out), None);
    }

    // c: %k is a thunk to %g, %user calls %g directly.
    assert_eq!(names(c), ["%k", "%user"]);
    assert_eq!(thunk_target(find(c, "%k")).as_deref(), Some("%g"));
    assert_eq!(callees(find(c, "%user")), ["%g"]);

    // The merged program computes what the original did.
    let original: Vec<Function> = ["a", "b", "c"]
        .iter()
        .flat_map(|m| parse_module(&dir.join(m)))
        .collect();
    for entry in ["%main", "%user", "%g", "%h", "%k"] {
        for x in SAMPLES {
            let args = [DataValue::I32(x)];
            let before = interpret(&original, entry, &args);
            let after = interpret(&merged_program, entry, &args);
            assert!(before.is_ok(), "{entry}({x}) in the original: {before:?}");
            assert_eq!(before, after, "{entry}({x}) differs after merging");
        }
    }
}

/// A local duplicate whose address its module takes cannot be removed: it becomes a
/// thunk, and the `func_addr` still names it.
#[test]
fn local_duplicate_with_address_taken_becomes_a_thunk() {
    let dir = TempDir::new("addr");
    dir.write(
        "a/a.clif",
        format!(
            "{}\nfunction %main(i32) -> i64 {{
    fn0 = %f(i32) -> i32
block0(v0: i32):
    v1 = func_addr.i64 fn0
    return v1
}}
",
            branchy("%f", 7, 0, false)
        ),
    );
    dir.write("b/b.clif", branchy("%g", 7, 10, true));
    let modules = [
        (dir.join("a"), vec!["--export", "%main"]),
        (dir.join("b"), vec!["--export", "%g"]),
    ];
    let summaries = summarize_all(&dir, &modules);
    let out_dir = dir.join("d");
    let report = json_report(&ok(plan(&summaries, &out_dir, true)));
    assert_eq!(
        report["actions"],
        json!([{"function": "a::%f", "into": "b::%g", "action": "thunk"}])
    );
    let run = ok(apply(&out_dir.join("a.dec"), &modules[0].0, &modules[0].1));
    let a = reparse_and_verify(&run.stdout);
    assert_eq!(names(&a), ["%f", "%main"]);
    assert_eq!(thunk_target(find(&a, "%f")).as_deref(), Some("%g"));
    assert_eq!(callees(find(&a, "%main")), ["%f"]);
}

// ---------------------------------------------------------------------------------
// 2. Order independence
// ---------------------------------------------------------------------------------

/// The decisions files and the report are the same whatever the order of the
/// summaries on the command line.
#[test]
fn plan_does_not_depend_on_summary_order() {
    let dir = TempDir::new("order");
    let modules = three_modules(&dir);
    let summaries = summarize_all(&dir, &modules);
    let mut reversed = summaries.clone();
    reversed.reverse();
    let mut rotated = summaries.clone();
    rotated.rotate_left(1);
    let orders = [summaries, reversed, rotated];
    let mut runs = Vec::new();
    for (i, order) in orders.iter().enumerate() {
        let out_dir = dir.path().join(format!("d{i}"));
        let report = json_report(&ok(plan(order, &out_dir, true)));
        let files: Vec<Vec<u8>> = ["a", "b", "c"]
            .iter()
            .map(|m| std::fs::read(out_dir.join(format!("{m}.dec"))).expect("decisions"))
            .collect();
        runs.push((report, files));
    }
    for (i, run) in runs.iter().enumerate().skip(1) {
        assert_eq!(run.0, runs[0].0, "report differs for order {i}");
        for (m, (x, y)) in ["a", "b", "c"].iter().zip(run.1.iter().zip(&runs[0].1)) {
            assert!(x == y, "{m}.dec differs for order {i}");
        }
    }
}

// ---------------------------------------------------------------------------------
// 3. Errors
// ---------------------------------------------------------------------------------

/// The summaries of the three-module program (a, b, c) and the decisions of `a`.
fn summaries_and_decisions(dir: &TempDir) -> (Vec<PathBuf>, PathBuf) {
    let modules = three_modules(dir);
    let summaries = summarize_all(dir, &modules);
    let out_dir = dir.join("d");
    ok(plan(&summaries, &out_dir, false));
    (summaries, out_dir.join("a.dec"))
}

/// A summary cut anywhere is refused by `plan` and `dump`, with exit code 2; cut
/// after its header, the message says it is truncated.
#[test]
fn truncated_summary_is_refused() {
    let dir = TempDir::new("trunc");
    let (summaries, _) = summaries_and_decisions(&dir);
    let bytes = std::fs::read(&summaries[0]).expect("summary");
    let cut = dir.join("cut.sum");
    let out_dir = dir.join("cut-out");
    for len in 0..bytes.len() {
        std::fs::write(&cut, &bytes[..len]).expect("write");
        let run = plan(&[cut.clone(), summaries[1].clone()], &out_dir, true);
        bad_input_mentioning(&run, &["cut.sum"]);
        no_decisions_in(&out_dir);
        let run = clif_merge([OsString::from("dump"), cut.clone().into()]);
        bad_input(&run);
        if len > 12 {
            assert!(
                run.stderr.contains("truncated"),
                "cut at {len}: {}",
                run.stderr
            );
        }
    }
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).expect("write");
    let run = plan(&[cut.clone(), summaries[1].clone()], &out_dir, false);
    bad_input_mentioning(&run, &["cut.sum", "truncated"]);
}

/// A file with the summary magic but another format version is refused, the
/// message naming the version found and the version this tool reads.
#[test]
fn summary_of_another_version_is_refused() {
    let dir = TempDir::new("version");
    let (summaries, decisions) = summaries_and_decisions(&dir);
    let mut bytes = std::fs::read(&summaries[0]).expect("summary");
    let current = u32::from_le_bytes(bytes[8..12].try_into().expect("4 bytes"));
    let other = current + 41;
    bytes[8..12].copy_from_slice(&other.to_le_bytes());
    let file = dir.write("other.sum", &bytes);
    let out_dir = dir.join("out");
    let run = plan(&[file.clone(), summaries[1].clone()], &out_dir, true);
    bad_input_mentioning(
        &run,
        &[
            "other.sum",
            "version",
            &other.to_string(),
            &current.to_string(),
        ],
    );
    no_decisions_in(&out_dir);
    let run = clif_merge([OsString::from("dump"), file.into()]);
    bad_input_mentioning(&run, &["version", &other.to_string()]);

    // The same for a decisions file given to `apply`.
    let mut bytes = std::fs::read(&decisions).expect("decisions");
    bytes[8..12].copy_from_slice(&other.to_le_bytes());
    let file = dir.write("other.dec", &bytes);
    let run = apply(&file, &dir.join("a"), &["--export", "%main"]);
    bad_input_mentioning(&run, &["other.dec", "version", &other.to_string()]);
}

/// A summary or decisions file written by a build with another vocabulary (another
/// clif-merge or Cranelift version, or another walk: the numbers in its tokens may
/// mean other things) is refused with exit code 2, the message naming the file's
/// vocabulary id and this build's.
#[test]
fn summary_of_another_vocabulary_is_refused() {
    let dir = TempDir::new("vocabulary");
    let (summaries, decisions) = summaries_and_decisions(&dir);
    let mut bytes = std::fs::read(&summaries[0]).expect("summary");
    let current = u64::from_le_bytes(bytes[12..20].try_into().expect("8 bytes"));
    let other = current ^ 0x0123_4567_89ab_cdef;
    bytes[12..20].copy_from_slice(&other.to_le_bytes());
    let file = dir.write("other.sum", &bytes);
    let out_dir = dir.join("out");
    let (current_id, other_id) = (format!("{current:016x}"), format!("{other:016x}"));
    let run = plan(&[file.clone(), summaries[1].clone()], &out_dir, true);
    bad_input_mentioning(&run, &["other.sum", "vocabulary", &other_id, &current_id]);
    no_decisions_in(&out_dir);
    let run = clif_merge([OsString::from("dump"), file.into()]);
    bad_input_mentioning(&run, &["vocabulary", &other_id, &current_id]);

    // The same for a decisions file given to `apply`.
    let mut bytes = std::fs::read(&decisions).expect("decisions");
    assert_eq!(&bytes[12..20], &current.to_le_bytes(), "one id per build");
    bytes[12..20].copy_from_slice(&other.to_le_bytes());
    let file = dir.write("other.dec", &bytes);
    let run = apply(&file, &dir.join("a"), &["--export", "%main"]);
    bad_input_mentioning(&run, &["other.dec", "vocabulary", &other_id, &current_id]);
}

/// Random bytes are neither a summary nor a decisions file.
#[test]
fn random_file_is_refused() {
    let dir = TempDir::new("random");
    let (summaries, _) = summaries_and_decisions(&dir);
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    let noise: Vec<u8> = (0..400)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect();
    let file = dir.write("noise.bin", &noise);
    let out_dir = dir.join("out");
    let run = plan(&[summaries[0].clone(), file.clone()], &out_dir, true);
    bad_input_mentioning(&run, &["noise.bin", "not a clif-merge summary"]);
    no_decisions_in(&out_dir);
    let run = apply(&file, &dir.join("a"), &["--export", "%main"]);
    bad_input_mentioning(&run, &["noise.bin", "not a clif-merge decisions"]);
    let run = clif_merge([OsString::from("dump"), file.into()]);
    bad_input_mentioning(&run, &["noise.bin", "not a clif-merge"]);
    // Also CLIF text, the most likely mistake.
    let run = plan(&[dir.join("a/main.clif")], &out_dir, false);
    bad_input_mentioning(&run, &["main.clif", "not a clif-merge summary"]);
}

/// A decisions file is not a summary and a summary is not a decisions file.
#[test]
fn summary_and_decisions_are_not_interchangeable() {
    let dir = TempDir::new("kinds");
    let (summaries, decisions) = summaries_and_decisions(&dir);
    let out_dir = dir.join("out");
    let run = plan(&[summaries[1].clone(), decisions.clone()], &out_dir, true);
    bad_input_mentioning(&run, &["a.dec", "not a clif-merge summary"]);
    no_decisions_in(&out_dir);
    let run = apply(&summaries[0], &dir.join("a"), &["--export", "%main"]);
    bad_input_mentioning(&run, &["a.sum", "not a clif-merge decisions"]);
}

/// Two summaries of one module name (the default name is the output's stem, so
/// `x/a.sum` and `a.sum` are both module `a`; `--module` can name it too).
#[test]
fn two_summaries_of_one_module_are_refused() {
    let dir = TempDir::new("dupmod");
    let modules = three_modules(&dir);
    let first = dir.join("a.sum");
    summarize(&modules[0].0, &first, &modules[0].1);
    std::fs::create_dir_all(dir.join("x")).expect("mkdir");
    let second = dir.join("x/a.sum");
    summarize(&modules[1].0, &second, &modules[1].1);
    let out_dir = dir.join("out");
    let run = plan(&[first.clone(), second], &out_dir, true);
    bad_input_mentioning(&run, &["`a`"]);
    no_decisions_in(&out_dir);

    let third = dir.join("c.sum");
    summarize(
        &modules[2].0,
        &third,
        &["--module", "a", "--export", "%k", "--export", "%user"],
    );
    let run = plan(&[third, first], &out_dir, false);
    bad_input_mentioning(&run, &["`a`"]);
    no_decisions_in(&out_dir);
}

/// Two modules that both export one symbol cannot be linked together.
#[test]
fn two_modules_exporting_one_symbol_are_refused() {
    let dir = TempDir::new("dupsym");
    let modules = three_modules(&dir);
    // A module `d` exporting its own `%g` (another body).
    dir.write("d/d.clif", branchy("%g", 3, 0, false));
    let b = dir.join("b.sum");
    summarize(&modules[1].0, &b, &modules[1].1);
    let d = dir.join("d.sum");
    summarize(&dir.join("d"), &d, &["--export", "%g"]);
    let out_dir = dir.join("out");
    let run = plan(&[d, b], &out_dir, true);
    bad_input_mentioning(&run, &["%g", "`b`", "`d`"]);
    no_decisions_in(&out_dir);
}

/// A local symbol of one name in two modules is two symbols: no error. Equal, with
/// no visible member, they still merge across the modules, as rustc's per-unit
/// copies of one generic function must: `p`'s is promoted to hidden under a new
/// name, `q`'s is removed and its calls go there. Applied, the modules compute
/// what they did.
#[test]
fn one_local_name_in_two_modules_is_fine() {
    let dir = TempDir::new("local-names");
    let helper = branchy("%helper", 5, 0, false);
    for (m, k) in [("p", 2), ("q", 3)] {
        dir.write(
            &format!("{m}/{m}.clif"),
            format!(
                "{helper}\nfunction %{m}_entry(i32) -> i32 {{
    fn0 = %helper(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    v2 = iconst.i32 {k}
    v3 = iadd v1, v2
    return v3
}}
"
            ),
        );
    }
    let modules = [
        (dir.join("p"), vec!["--export", "%p_entry"]),
        (dir.join("q"), vec!["--export", "%q_entry"]),
    ];
    let summaries = summarize_all(&dir, &modules);
    let report = json_report(&ok(plan(&summaries, &dir.join("d"), true)));
    let promoted = format!("%helper_p_promoted_{}", program_hash(&summaries));
    assert_eq!(
        report["actions"],
        json!([
            {"function": "p::%helper", "into": format!("p::{promoted}"), "action": "promote"},
            {"function": "q::%helper", "into": format!("p::{promoted}"), "action": "redirect"},
        ])
    );
    assert_eq!(
        [&report["functions"], &report["merged"], &report["promoted"]],
        [&json!(4), &json!(1), &json!(1)]
    );
    let mut merged = Vec::new();
    for (m, (module, options)) in ["p", "q"].into_iter().zip(&modules) {
        let run = ok(apply(
            &dir.join("d").join(format!("{m}.dec")),
            module,
            options,
        ));
        merged.extend(reparse_and_verify(&run.stdout));
    }
    assert_eq!(
        names(&merged),
        [promoted.as_str(), "%p_entry", "%q_entry"],
        "one helper left, under its promoted name"
    );
    for (m, (module, _)) in ["p", "q"].into_iter().zip(&modules) {
        // Each original module on its own: their `%helper`s are two symbols.
        let original = parse_module(module);
        let entry = format!("%{m}_entry");
        for x in [0, 1, 7, -3] {
            let args = [DataValue::I32(x)];
            assert_eq!(
                interpret(&merged, &entry, &args),
                interpret(&original, &entry, &args),
                "{entry}({x})"
            );
        }
    }
}

/// The CLIF of module `a` after changing `%f`'s multiplier from 7 to 8.
fn change_f(dir: &TempDir) {
    dir.write("a/f.clif", branchy("%f", 8, 0, false));
}

/// Decisions about a function whose body changed after summarizing are refused.
#[test]
fn stale_decisions_are_refused() {
    let dir = TempDir::new("stale");
    let modules = three_modules(&dir);
    let summaries = summarize_all(&dir, &modules);
    let out_dir = dir.join("d");
    ok(plan(&summaries, &out_dir, false));

    // a::%f was decided `redirect`.
    change_f(&dir);
    let run = apply(&out_dir.join("a.dec"), &modules[0].0, &modules[0].1);
    bad_input_mentioning(&run, &["%f", "changed since it was summarized"]);

    // c::%k was decided `thunk`: another constant in it.
    let text = std::fs::read_to_string(dir.join("c/c.clif")).expect("read");
    assert!(text.contains("iconst.i32 7"));
    dir.write("c/c.clif", text.replacen("iconst.i32 7", "iconst.i32 6", 1));
    let run = apply(&out_dir.join("c.dec"), &modules[2].0, &modules[2].1);
    bad_input_mentioning(&run, &["%k", "changed since it was summarized"]);

    // b has no decisions of its own, but b::%g is the representative that a's
    // redirect and c's thunk rely on: b with another %g is refused, though no
    // decision of b names it (a thunk elsewhere would compute the new %g).
    let original_b = std::fs::read_to_string(dir.join("b/b.clif")).expect("read");
    let (g, h) = original_b.split_at(original_b.find("function %h").expect("%h in b"));
    assert!(g.contains("iconst.i32 7"));
    dir.write(
        "b/b.clif",
        format!("{}{h}", g.replacen("iconst.i32 7", "iconst.i32 8", 1)),
    );
    let run = apply(&out_dir.join("b.dec"), &modules[1].0, &modules[1].1);
    bad_input_mentioning(&run, &["`b`", "changed since it was summarized"]);

    // Any other change to b is refused too: decisions apply only to the module
    // that was summarized.
    dir.write(
        "b/b.clif",
        original_b.replace("iconst.i32 9", "iconst.i32 11"),
    );
    let run = apply(&out_dir.join("b.dec"), &modules[1].0, &modules[1].1);
    bad_input_mentioning(&run, &["`b`", "changed since it was summarized"]);

    // The module as summarized applies.
    dir.write("b/b.clif", original_b);
    let run = ok(apply(&out_dir.join("b.dec"), &modules[1].0, &modules[1].1));
    reparse_and_verify(&run.stdout);
}

/// Two modules, each exporting a function that calls `%callee` and doubles the
/// result; `r::%r` is decided a thunk to `p::%p`. Returns the decisions of `r`.
fn caller_pair(dir: &TempDir, local_callee: bool) -> PathBuf {
    let callee = |k: i32| {
        if local_callee {
            format!(
                "function %callee(i32) -> i32 {{
block0(v0: i32):
    v1 = iconst.i32 {k}
    v2 = iadd v0, v1
    return v2
}}

"
            )
        } else {
            String::new()
        }
    };
    for name in ["p", "r"] {
        dir.write(
            &format!("{name}/{name}.clif"),
            format!(
                "{}function %{name}(i32) -> i32 {{
    fn0 = %callee(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    v2 = iconst.i32 2
    v3 = imul v1, v2
    return v3
}}
",
                callee(5)
            ),
        );
    }
    let modules = [
        (dir.join("p"), vec!["--export", "%p"]),
        (dir.join("r"), vec!["--export", "%r"]),
    ];
    let summaries = summarize_all(dir, &modules);
    let out_dir = dir.join("d");
    let report = json_report(&ok(plan(&summaries, &out_dir, true)));
    let thunk = json!({"function": "r::%r", "into": "p::%p", "action": "thunk"});
    let expected = if local_callee {
        // The two local `%callee`s are equal too: one is promoted, one removed.
        let promoted = format!("p::%callee_p_promoted_{}", program_hash(&summaries));
        json!([
            {"function": "p::%callee", "into": promoted, "action": "promote"},
            {"function": "r::%callee", "into": promoted, "action": "redirect"},
            thunk,
        ])
    } else {
        json!([thunk])
    };
    assert_eq!(report["actions"], expected);
    out_dir.join("r.dec")
}

/// `r::%r` was planned to be a thunk to `p::%p` because both call `%callee`; then
/// `%r` is changed to call `%other_callee`. It is no longer equal to `%p`, so the
/// decision is stale and must be refused; applying it would make `%r` call the
/// wrong function.
#[test]
fn stale_decisions_after_changing_a_callee_are_refused() {
    let dir = TempDir::new("stale-callee");
    let decisions = caller_pair(&dir, false);
    let text = std::fs::read_to_string(dir.join("r/r.clif")).expect("read");
    dir.write("r/r.clif", text.replace("%callee", "%other_callee"));
    let run = apply(&decisions, &dir.join("r"), &["--export", "%r"]);
    bad_input_mentioning(&run, &["%r", "changed since it was summarized"]);
}

/// As above, but `%r` is unchanged and its module's local `%callee` changes: `%r`
/// no longer computes what `%p` computes, and the decision about it is stale.
#[test]
fn stale_decisions_after_changing_a_local_callee_are_refused() {
    let dir = TempDir::new("stale-local-callee");
    let decisions = caller_pair(&dir, true);
    let text = std::fs::read_to_string(dir.join("r/r.clif")).expect("read");
    dir.write("r/r.clif", text.replace("iconst.i32 5", "iconst.i32 6"));
    let run = apply(&decisions, &dir.join("r"), &["--export", "%r"]);
    bad_input_mentioning(&run, &["changed since it was summarized"]);
}

/// Decisions planned with `--mode safe` cannot be applied with `--mode all`, and
/// the other way round.
#[test]
fn decisions_of_another_mode_are_refused() {
    let dir = TempDir::new("mode");
    let modules = three_modules(&dir);
    let summaries = summarize_all(&dir, &modules);
    let out_dir = dir.join("d");
    ok(plan(&summaries, &out_dir, false));
    let run = apply(
        &out_dir.join("a.dec"),
        &modules[0].0,
        &options_all(&modules[0].1),
    );
    bad_input_mentioning(&run, &["--mode"]);

    // Summaries made with --mode all, applied in the default (safe) mode.
    let all: Vec<PathBuf> = modules
        .iter()
        .map(|(module, options)| {
            let name = module.file_name().expect("name");
            let out = dir.path().join("all").join(name).with_extension("sum");
            std::fs::create_dir_all(out.parent().expect("parent")).expect("mkdir");
            summarize(module, &out, &options_all(options));
            out
        })
        .collect();
    let out_all = dir.join("d-all");
    ok(plan(&all, &out_all, false));
    let run = apply(&out_all.join("a.dec"), &modules[0].0, &modules[0].1);
    bad_input_mentioning(&run, &["--mode"]);
    // ... and in the mode they were made in, they apply.
    let run = ok(apply(
        &out_all.join("a.dec"),
        &modules[0].0,
        &options_all(&modules[0].1),
    ));
    reparse_and_verify(&run.stdout);

    // Summaries of both modes in one plan.
    let run = plan(
        &[summaries[0].clone(), all[1].clone()],
        &dir.join("mixed"),
        true,
    );
    bad_input_mentioning(&run, &["mode"]);
    no_decisions_in(&dir.join("mixed"));
}

fn options_all<'a>(options: &[&'a str]) -> Vec<&'a str> {
    let mut options = options.to_vec();
    options.extend(["--mode", "all"]);
    options
}

/// Decisions of one module applied to another module name functions it does not
/// define.
#[test]
fn decisions_of_another_module_are_refused() {
    let dir = TempDir::new("other-module");
    let modules = three_modules(&dir);
    let summaries = summarize_all(&dir, &modules);
    let out_dir = dir.join("d");
    ok(plan(&summaries, &out_dir, false));
    // c's decisions name %k; module b does not define it.
    let run = apply(&out_dir.join("c.dec"), &modules[1].0, &modules[1].1);
    bad_input_mentioning(&run, &["%k"]);
}

/// Only the JSON report exists.
#[test]
fn unknown_report_format_is_refused() {
    let dir = TempDir::new("format");
    let (summaries, _) = summaries_and_decisions(&dir);
    let out_dir = dir.join("out");
    let mut argv: Vec<OsString> = vec!["plan".into()];
    argv.extend(summaries.iter().map(|p| p.as_os_str().to_owned()));
    argv.extend(["--out-dir".into(), out_dir.clone().into()]);
    argv.extend(["--report".into(), "xml".into()]);
    let run = clif_merge(argv);
    bad_input_mentioning(&run, &["xml"]);
    no_decisions_in(&out_dir);
}

// ---------------------------------------------------------------------------------
// 4. dump and help
// ---------------------------------------------------------------------------------

/// `dump` of a summary names the module and every function; of a decisions file,
/// the decided function, its action and its representative.
#[test]
fn dump_names_the_functions() {
    let dir = TempDir::new("dump");
    let modules = three_modules(&dir);
    let summaries = summarize_all(&dir, &modules);
    let out_dir = dir.join("d");
    ok(plan(&summaries, &out_dir, false));

    let run = ok(clif_merge([
        OsString::from("dump"),
        summaries[0].clone().into(),
    ]));
    assert!(run.stdout.contains("`a`"), "{}", run.stdout);
    for name in ["%f", "%main"] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(name)),
            "dump of a.sum does not list {name}:\n{}",
            run.stdout
        );
    }
    let run = ok(clif_merge([
        OsString::from("dump"),
        summaries[2].clone().into(),
    ]));
    for name in ["%k", "%user"] {
        assert!(
            run.stdout.lines().any(|l| l.starts_with(name)),
            "dump of c.sum does not list {name}:\n{}",
            run.stdout
        );
    }

    let run = ok(clif_merge([
        OsString::from("dump"),
        out_dir.join("a.dec").into(),
    ]));
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("%f"))
        .unwrap_or_else(|| panic!("dump of a.dec does not list %f:\n{}", run.stdout));
    assert!(
        line.contains("redirect") && line.contains("b::%g"),
        "{line}"
    );
    let run = ok(clif_merge([
        OsString::from("dump"),
        out_dir.join("c.dec").into(),
    ]));
    let line = run
        .stdout
        .lines()
        .find(|l| l.starts_with("%k"))
        .unwrap_or_else(|| panic!("dump of c.dec does not list %k:\n{}", run.stdout));
    assert!(line.contains("thunk") && line.contains("b::%g"), "{line}");
    // b has no decisions: its dump lists no function.
    let run = ok(clif_merge([
        OsString::from("dump"),
        out_dir.join("b.dec").into(),
    ]));
    assert!(run.stdout.contains("`b`"), "{}", run.stdout);
    assert!(!run.stdout.contains("%g "), "{}", run.stdout);
}

/// The main help mentions the subcommands; each subcommand has its help.
#[test]
fn help_mentions_the_subcommands() {
    let run = ok(clif_merge(["--help"]));
    for command in ["summarize", "plan", "apply", "dump"] {
        assert!(
            run.stdout.contains(command),
            "`clif-merge --help` does not mention {command}:\n{}",
            run.stdout
        );
    }
    for command in ["summarize", "plan", "apply", "dump"] {
        let run = ok(clif_merge([command, "--help"]));
        assert!(
            run.stdout.contains("Usage: clif-merge") && run.stdout.contains(command),
            "`clif-merge {command} --help`:\n{}",
            run.stdout
        );
    }
    let run = ok(clif_merge(["summarize", "--help"]));
    for option in ["--output", "--module", "--export", "--mode"] {
        assert!(run.stdout.contains(option), "{option}:\n{}", run.stdout);
    }
    // `plan --help` states what a promoted name is kept apart from.
    let run = ok(clif_merge(["plan", "--help"]));
    for needle in [
        "%NAME_MODULE_promoted_HASH",
        "program hash",
        "spells this program's hash",
    ] {
        assert!(run.stdout.contains(needle), "{needle}:\n{}", run.stdout);
    }
    // A subcommand without its required arguments is a usage error.
    let run = clif_merge(["summarize"]);
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
}

// ---------------------------------------------------------------------------------
// 5. Size
// ---------------------------------------------------------------------------------

/// A module of a few realistic functions (a loop over memory, selects, a jump
/// table, calls).
const REALISTIC: &str = "function %sum_array(i64, i64) -> i64 {
block0(v0: i64, v1: i64):
    v2 = iconst.i64 0
    v3 = iconst.i64 0
    jump block1(v2, v3)

block1(v4: i64, v5: i64):
    v6 = icmp ult v4, v1
    brif v6, block2, block3

block2:
    v12 = iconst.i64 3
    v7 = ishl v4, v12
    v8 = iadd v0, v7
    v9 = load.i64 notrap aligned v8
    v10 = iadd v5, v9
    v13 = iconst.i64 1
    v11 = iadd v4, v13
    jump block1(v11, v10)

block3:
    return v5
}

function %clamp(i32, i32, i32) -> i32 {
block0(v0: i32, v1: i32, v2: i32):
    v3 = icmp slt v0, v1
    v4 = select v3, v1, v0
    v5 = icmp sgt v4, v2
    v6 = select v5, v2, v4
    return v6
}

function %classify(i32) -> i32 {
block0(v0: i32):
    br_table v0, block4, [block1, block2, block3]

block1:
    v1 = iconst.i32 10
    return v1

block2:
    v2 = iconst.i32 20
    return v2

block3:
    v3 = iconst.i32 30
    return v3

block4:
    v4 = iconst.i32 -1
    return v4
}

function %dispatch(i64, i64, i32) -> i64 {
    fn0 = %sum_array(i64, i64) -> i64
    fn1 = %classify(i32) -> i32
block0(v0: i64, v1: i64, v2: i32):
    v3 = call fn0(v0, v1)
    v4 = call fn1(v2)
    v5 = sextend.i64 v4
    v6 = imul v3, v5
    v9 = iconst.i64 0
    v7 = icmp sge v6, v9
    brif v7, block1, block2

block1:
    return v6

block2:
    v8 = ineg v6
    return v8
}
";

/// `apply --similar` merges similar functions among those the decisions leave as
/// they are: module `s` has a local copy of `b::%g` (removed by its decision) and
/// two functions that differ in two constants (merged into one body). The output
/// verifies and computes what the input did.
#[test]
fn apply_merges_similar_functions_the_decisions_leave() {
    let dir = TempDir::new("apply-similar");
    dir.write("b/b.clif", branchy("%g", 7, 0, false));
    let classify = REALISTIC
        .split("\nfunction ")
        .find(|f| f.starts_with("%classify"))
        .expect("REALISTIC has %classify");
    let classify2 = classify
        .replacen("%classify", "%classify2", 1)
        .replacen("iconst.i32 10", "iconst.i32 11", 1)
        .replacen("iconst.i32 20", "iconst.i32 21", 1);
    dir.write(
        "s/s.clif",
        format!(
            "function {classify}\nfunction {classify2}\n{}",
            branchy("%f", 7, 0, false)
        ),
    );
    let s_options = ["--export", "%classify", "--export", "%classify2"];
    let modules = [
        (dir.join("b"), vec!["--export", "%g"]),
        (dir.join("s"), s_options.to_vec()),
    ];
    let summaries = summarize_all(&dir, &modules);
    ok(plan(&summaries, &dir.join("d"), false));
    let mut options = s_options.to_vec();
    // Small functions: the size model alone leaves them; compiled, they pay.
    options.extend(["--similar", "--size-pricing", "confirm"]);
    let run = ok(apply(&dir.join("d/s.dec"), &dir.join("s"), &options));
    assert!(
        run.stderr.contains("similar: 1 groups of 2 functions"),
        "{}",
        run.stderr
    );
    let merged = reparse_and_verify(&run.stdout);
    assert_eq!(
        names(&merged),
        ["%classify", "%classify2", "%classify_merged"],
        "%f removed, the two similar functions merged"
    );
    let original = parse_module(&dir.join("s"));
    for name in ["%classify", "%classify2"] {
        for x in [0, 1, 2, 3, 4, -1] {
            let args = [DataValue::I32(x)];
            assert_eq!(
                interpret(&merged, name, &args),
                interpret(&original, name, &args),
                "{name}({x})"
            );
        }
    }
}

/// The summary of a module is smaller than its CLIF text: by the sizes of the files,
/// and by the ratio `summarize` reports (whose summary size must be the file's).
#[test]
fn summary_is_smaller_than_the_clif_text() {
    let dir = TempDir::new("size");
    let clif = dir.write("m/m.clif", REALISTIC);
    let out = dir.join("m.sum");
    let run = summarize(&dir.join("m"), &out, &["--export", "%dispatch"]);
    let summary_len = std::fs::metadata(&out).expect("summary").len();
    let clif_len = std::fs::metadata(&clif).expect("clif").len();
    assert!(
        summary_len < clif_len,
        "summary {summary_len} bytes, CLIF {clif_len} bytes"
    );
    // Snapshot of the sizes: changes when `REALISTIC`, the summary format or the
    // fingerprint (whose hashes it holds) changes; update deliberately.
    assert_eq!(
        (summary_len, clif_len),
        (639, 1308),
        "bytes of summary, CLIF"
    );

    // "... N bytes of summary for M bytes of CLIF text (R), ..."
    let line = run.stderr.trim_end();
    let number_before = |marker: &str| -> f64 {
        let (before, _) = line
            .split_once(marker)
            .unwrap_or_else(|| panic!("no {marker:?} in {line:?}"));
        before
            .rsplit(' ')
            .next()
            .and_then(|w| w.parse().ok())
            .unwrap_or_else(|| panic!("no number before {marker:?} in {line:?}"))
    };
    let reported_summary = number_before(" bytes of summary");
    let reported_text = number_before(" bytes of CLIF text");
    let ratio: f64 = line
        .split_once("CLIF text (")
        .and_then(|(_, rest)| rest.split_once(')'))
        .and_then(|(r, _)| r.parse().ok())
        .unwrap_or_else(|| panic!("no ratio in {line:?}"));
    assert_eq!(reported_summary, summary_len as f64, "{line}");
    assert!(ratio < 1.0, "{line}");
    assert!(
        (ratio - reported_summary / reported_text).abs() < 0.01,
        "the ratio is not summary / text: {line}"
    );
    assert!(line.contains("4 functions"), "{line}");
}

/// In `--mode all` a module's own merge makes an exported duplicate an alias: `apply`
/// must still name it (as the main command does), or whatever links against it
/// finds nothing.
#[test]
fn apply_keeps_the_aliases_of_the_module_own_merge() {
    let dir = TempDir::new("aliases");
    dir.write(
        "m/m.clif",
        format!(
            "{}\n{}",
            branchy("%f", 7, 0, false),
            branchy("%g", 7, 10, false)
        ),
    );
    let options = ["--mode", "all", "--export", "%f", "--export", "%g"];
    let module = dir.join("m");
    let summary = dir.join("m.sum");
    summarize(&module, &summary, &options);
    let out_dir = dir.join("d");
    ok(plan(&[summary], &out_dir, false));
    let run = ok(apply(&out_dir.join("m.dec"), &module, &options));
    assert!(run.stdout.contains("function %f("), "{}", run.stdout);
    assert!(run.stdout.contains("; %g: alias of %f"), "{}", run.stdout);
    reparse_and_verify(&run.stdout);
}
