//! Command-line tests: run the `clif-merge` binary as a process and check its exit
//! code, stdout and stderr against the documented contract (`clif-merge --help`,
//! README): the JSON report, linkage and mode options, the CLIF output, errors on bad
//! input, directory inputs and `--stats`.

use serde_json::{Value, json};
use std::ffi::OsString;
use std::path::Path;
use std::process::Command;

// ---------------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------------

#[path = "../support/process.rs"]
mod process;

use process::{Run, TempDir, bad_input, clif_merge, ok, reparse_and_verify, s};

// ---------------------------------------------------------------------------------
// ---------------------------------------------------------------------------------

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
    assert_eq!(keys, ["actions", "classes", "functions", "merged"]);
    value
}

/// Runs with `--report json` plus `args` on `files`, returns the report.
fn report(args: &[&str], files: &[&Path]) -> Value {
    let mut argv: Vec<OsString> = vec!["--report".into(), "json".into()];
    argv.extend(args.iter().map(OsString::from));
    argv.extend(files.iter().map(|p| p.as_os_str().to_owned()));
    json_report(&ok(clif_merge(argv)))
}

fn action(function: &str, into: &str, action: &str) -> Value {
    json!({ "function": function, "into": into, "action": action })
}

/// The actions of a report, for comparison.
fn actions(report: &Value) -> &Value {
    &report["actions"]
}

/// Names of the external functions a function declares (`fnN = NAME ...`).
fn ext_func_names(func: &cranelift_codegen::ir::Function) -> Vec<String> {
    func.dfg
        .ext_funcs
        .values()
        .map(|d| d.name.display(Some(&func.params)).to_string())
        .collect()
}

/// A small function with a branch, named `name`. `k` is the multiplier in the
/// `then` block; `v` is the first value number, to rename all values.
fn branchy(name: &str, k: i32, v: u32) -> String {
    let [v0, v1, v2, v3, v4, v5] = [v, v + 1, v + 2, v + 3, v + 4, v + 5];
    format!(
        "function {name}(i32) -> i32 {{
block0(v{v0}: i32):
    v{v1} = iconst.i32 0
    brif v{v0}, block1, block2
block1:
    v{v2} = iconst.i32 {k}
    v{v3} = imul v{v0}, v{v2}
    return v{v3}
block2:
    v{v4} = iconst.i32 1
    v{v5} = isub v{v4}, v{v1}
    return v{v5}
}}
"
    )
}

/// The same function as `branchy(name, k, _)`, but with the two non-entry blocks
/// written in the other textual order and with other block numbers.
fn branchy_reordered(name: &str, k: i32) -> String {
    format!(
        "function {name}(i32) -> i32 {{
block0(v10: i32):
    v11 = iconst.i32 0
    brif v10, block7, block3
block3:
    v14 = iconst.i32 1
    v15 = isub v14, v11
    return v15
block7:
    v12 = iconst.i32 {k}
    v13 = imul v10, v12
    return v13
}}
"
    )
}

/// A small straight-line function of two i64, named `name`.
fn straight(name: &str, v: u32) -> String {
    let [v0, v1, v2, v3, v4] = [v, v + 1, v + 2, v + 3, v + 4];
    format!(
        "function {name}(i64, i64) -> i64 {{
block0(v{v0}: i64, v{v1}: i64):
    v{v2} = iadd v{v0}, v{v1}
    v{v4} = iconst.i64 3
    v{v3} = ishl v{v2}, v{v4}
    return v{v3}
}}
"
    )
}

/// A pair of equal functions `%a`, `%b` (different value numbers).
fn pair() -> String {
    format!("{}\n{}", branchy("%a", 2, 0), branchy("%b", 2, 20))
}

/// Pseudo-random bytes (xorshift64*), deterministic per seed.
fn pseudo_random(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

// ---------------------------------------------------------------------------------
// 1. --report json
// ---------------------------------------------------------------------------------

/// Three copies of one function (values renamed; one with its blocks in another
/// textual order), a fourth differing in one constant, then a pair of equal
/// functions: exactly one JSON object with the exact classes and actions.
#[test]
fn json_report_exact_structure() {
    let dir = TempDir::new("json");
    let text = [
        branchy("%a", 2, 0),
        branchy("%b", 2, 30),
        branchy_reordered("%c", 2),
        branchy("%d", 3, 0),
        straight("%e", 0),
        straight("%f", 40),
    ]
    .join("\n");
    let file = dir.write("module.clif", text);
    let run = ok(clif_merge([
        OsString::from("--report"),
        "json".into(),
        file.clone().into(),
    ]));
    assert_eq!(
        run.stdout.trim_end().lines().count(),
        1,
        "one JSON line expected:\n{}",
        run.stdout
    );
    let report = json_report(&run);
    assert_eq!(
        report,
        json!({
            "functions": 6,
            "merged": 3,
            "classes": [["%a", "%b", "%c"], ["%e", "%f"]],
            "actions": [
                action("%b", "%a", "erase"),
                action("%c", "%a", "erase"),
                action("%f", "%e", "erase"),
            ],
        })
    );
    // Ordering is part of the contract, check it literally too (serde_json object
    // equality ignores key order, arrays do not).
    assert_eq!(
        report["classes"].to_string(),
        r#"[["%a","%b","%c"],["%e","%f"]]"#
    );
}

/// `u0:N` names are spelled like that in the report; classes follow input order
/// (not name order).
#[test]
fn json_report_user_names() {
    let dir = TempDir::new("json-u0");
    let text = [
        branchy("u0:3", 5, 0),
        straight("u0:1", 0),
        branchy("u0:7", 5, 10),
        straight("u0:2", 10),
        branchy("u0:0", 6, 0),
    ]
    .join("\n");
    let file = dir.write("user.clif", text);
    let report = report(&[], &[&file]);
    assert_eq!(
        report,
        json!({
            "functions": 5,
            "merged": 2,
            "classes": [["u0:3", "u0:7"], ["u0:1", "u0:2"]],
            "actions": [
                action("u0:7", "u0:3", "erase"),
                action("u0:2", "u0:1", "erase"),
            ],
        })
    );
}

// ---------------------------------------------------------------------------------
// 2. Linkage and mode
// ---------------------------------------------------------------------------------

/// `--export %b` on a pair of equals: the exported one is kept, the local one erased.
#[test]
fn export_keeps_strongest_linkage() {
    let dir = TempDir::new("export");
    let file = dir.write("pair.clif", pair());
    // Without options the first defined is kept.
    assert_eq!(
        actions(&report(&[], &[&file])),
        &json!([action("%b", "%a", "erase")])
    );
    let r = report(&["--export", "%b"], &[&file]);
    assert_eq!(r["classes"], json!([["%a", "%b"]]));
    assert_eq!(actions(&r), &json!([action("%a", "%b", "erase")]));
}

/// Taking the duplicate's address in a third function (which also takes the kept
/// one's, so the two addresses can be compared): a thunk in safe mode, an alias
/// with `--mode all`.
#[test]
fn address_taken_thunk_in_safe_alias_in_all() {
    let dir = TempDir::new("addr");
    let text = format!(
        "{}
function %t() -> i64 {{
    fn0 = %a(i32) -> i32
    fn1 = %b(i32) -> i32
block0:
    v0 = func_addr.i64 fn0
    v1 = func_addr.i64 fn1
    v2 = isub v0, v1
    return v2
}}
",
        pair()
    );
    let file = dir.write("addr.clif", text);
    let safe = report(&[], &[&file]);
    assert_eq!(safe["classes"], json!([["%a", "%b"]]));
    assert_eq!(actions(&safe), &json!([action("%b", "%a", "thunk")]));
    let explicit_safe = report(&["--mode", "safe"], &[&file]);
    assert_eq!(
        actions(&explicit_safe),
        &json!([action("%b", "%a", "thunk")])
    );
    let all = report(&["--mode", "all"], &[&file]);
    assert_eq!(actions(&all), &json!([action("%b", "%a", "alias")]));
}

/// Only the duplicate's address is taken: since the kept function's address is never
/// observable, the duplicate may share it (README: alias), in both modes; it is never
/// erased, as its address must stay a symbol.
#[test]
fn only_duplicate_address_taken_is_alias() {
    let dir = TempDir::new("addr-dup");
    let text = format!(
        "{}
function %t() -> i64 {{
    fn0 = %b(i32) -> i32
block0:
    v0 = func_addr.i64 fn0
    return v0
}}
",
        pair()
    );
    let file = dir.write("addr.clif", text);
    for mode in ["safe", "all"] {
        let r = report(&["--mode", mode], &[&file]);
        assert_eq!(actions(&r), &json!([action("%b", "%a", "alias")]), "{mode}");
    }
}

/// `--preemptible NAME` makes that function a thunk, and it is never the kept one.
#[test]
fn preemptible_becomes_thunk() {
    let dir = TempDir::new("preempt");
    let file = dir.write("pair.clif", pair());
    let r = report(&["--preemptible", "%b"], &[&file]);
    assert_eq!(actions(&r), &json!([action("%b", "%a", "thunk")]));
    // Even when it is defined first, the preemptible one is not kept.
    let r = report(&["--preemptible", "%a"], &[&file]);
    assert_eq!(actions(&r), &json!([action("%a", "%b", "thunk")]));
    // And in --mode all too.
    let r = report(&["--preemptible", "%b", "--mode", "all"], &[&file]);
    assert_eq!(actions(&r), &json!([action("%b", "%a", "thunk")]));
}

/// An unknown name in `--export`: exit 2, the name on stderr, nothing on stdout.
#[test]
fn export_unknown_name_is_an_error() {
    let dir = TempDir::new("export-unknown");
    let file = dir.write("pair.clif", pair());
    let run = clif_merge([
        OsString::from("--export"),
        "%nosuch".into(),
        file.clone().into(),
    ]);
    bad_input(&run);
    assert!(run.stderr.contains("%nosuch"), "{}", run.stderr);
    // Also with the JSON report.
    let run = clif_merge([
        OsString::from("--report"),
        "json".into(),
        "--export".into(),
        "%nosuch".into(),
        file.into(),
    ]);
    bad_input(&run);
    assert!(run.stderr.contains("%nosuch"), "{}", run.stderr);
}

// ---------------------------------------------------------------------------------
// 3. Default CLIF output
// ---------------------------------------------------------------------------------

/// The default output re-parses and verifies; the erased duplicate leaves its comment
/// line, and a caller of it now calls the kept function.
#[test]
fn clif_output_reparses_and_redirects_calls() {
    let dir = TempDir::new("clif");
    let text = format!(
        "{}
function %caller(i32) -> i32 {{
    fn0 = %b(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    v3 = iconst.i32 1
    v2 = iadd v1, v3
    return v2
}}
",
        pair()
    );
    let file = dir.write("caller.clif", text);
    let run = ok(clif_merge([file]));
    assert!(
        run.stdout
            .lines()
            .any(|l| l == "; %b: erased, calls go to %a"),
        "missing erased comment line:\n{}",
        run.stdout
    );
    let funcs = reparse_and_verify(&run.stdout);
    let names: Vec<String> = funcs.iter().map(|f| f.name.to_string()).collect();
    assert_eq!(names, ["%a", "%caller"], "output:\n{}", run.stdout);
    let caller = &funcs[1];
    assert_eq!(ext_func_names(caller), ["%a"], "output:\n{}", run.stdout);
}

// ---------------------------------------------------------------------------------
// 4. Bad input
// ---------------------------------------------------------------------------------

/// A syntax error on line 3: `error: FILE:3: ...` with the path as given.
#[test]
fn syntax_error_reports_file_and_line() {
    let dir = TempDir::new("syntax");
    let file = dir.write(
        "syntax.clif",
        "function %a(i32) -> i32 {
block0(v0: i32):
    v1 = frobnicate v0, v0
    return v1
}
",
    );
    let run = clif_merge([&file]);
    bad_input(&run);
    let want = format!("{}:3:", s(&file));
    assert!(
        run.stderr.contains(&want),
        "stderr should contain `{want}`:\n{}",
        run.stderr
    );
    // A relative path is reported as given, too.
    let out = Command::new(env!("CARGO_BIN_EXE_clif-merge"))
        .arg("syntax.clif")
        .current_dir(dir.path())
        .output()
        .expect("run clif-merge");
    let run = Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    };
    bad_input(&run);
    assert!(
        run.stderr.starts_with("error: syntax.clif:3:"),
        "{}",
        run.stderr
    );
}

/// A function that parses but fails the Cranelift verifier: its name and `verifier`.
#[test]
fn verifier_failure_names_the_function() {
    let dir = TempDir::new("verifier");
    let mixed = dir.write(
        "mixed.clif",
        format!(
            "{}
function %bad_types(i32, i64) -> i32 {{
block0(v0: i32, v1: i64):
    v2 = iadd v0, v1
    return v2
}}
",
            branchy("%fine", 2, 0)
        ),
    );
    let run = clif_merge([&mixed]);
    bad_input(&run);
    assert!(run.stderr.contains("%bad_types"), "{}", run.stderr);
    assert!(run.stderr.contains("verifier"), "{}", run.stderr);

    let unterminated = dir.write(
        "unterminated.clif",
        "function %no_terminator(i32) -> i32 {
block0(v0: i32):
    v1 = iconst.i32 1
    v2 = iadd v0, v1
}
",
    );
    let run = clif_merge([&unterminated]);
    bad_input(&run);
    assert!(run.stderr.contains("%no_terminator"), "{}", run.stderr);
    assert!(run.stderr.contains("verifier"), "{}", run.stderr);
}

/// A `target` whose backend this build lacks (Pulley's: `cli` turns on Cranelift's
/// native backends only) is bad input naming the file, the line and the target,
/// not a verifier failure nor a run as if the file named no target; in the merge
/// and in `summarize` alike.
#[test]
fn a_target_not_built_in_is_named_with_its_line() {
    let dir = TempDir::new("pulley");
    // Reads the frame pointer, which the verifier accepts only with an ISA.
    let frame_pointer = "function %fp(i64) -> i64 {
block0(v0: i64):
    v1 = get_frame_pointer.i64
    v2 = iadd v0, v1
    return v2
}
";
    let plain = "function %id(i64) -> i64 {
block0(v0: i64):
    return v0
}
";
    for target in ["pulley32", "pulley64", "pulley32be", "pulley64be"] {
        for (kind, body) in [("fp", frame_pointer), ("plain", plain)] {
            let file = dir.write(
                &format!("{target}_{kind}.clif"),
                format!(
                    "; a filetest of the Pulley backend\ntest compile\ntarget {target}\n\n{body}"
                ),
            );
            let want = format!(
                "error: {}:3: target {target} is not built in (this clif-merge has the backends: x86_64, aarch64, s390x, riscv64)\n",
                s(&file)
            );
            let run = clif_merge([&file]);
            bad_input(&run);
            assert_eq!(run.stderr, want);
            let summary = dir.join(&format!("{target}_{kind}.sum"));
            let run = clif_merge([
                OsString::from("summarize"),
                file.clone().into_os_string(),
                OsString::from("-o"),
                summary.into_os_string(),
            ]);
            bad_input(&run);
            assert_eq!(run.stderr, want);
        }
    }
    // Only targets not built in: the first is named.
    let file = dir.write(
        "two_pulleys.clif",
        format!("test run\ntarget pulley32\ntarget pulley64\n{plain}"),
    );
    let run = clif_merge([&file]);
    bad_input(&run);
    assert!(
        run.stderr.starts_with(&format!(
            "error: {}:2: target pulley32 is not built in",
            s(&file)
        )),
        "{}",
        run.stderr
    );
    // Beside a target that is built in, the file is read for that one, as before.
    let file = dir.write(
        "x86_and_pulley.clif",
        format!("test run\ntarget x86_64\ntarget pulley64\n{plain}"),
    );
    let run = ok(clif_merge([&file]));
    assert!(run.stdout.contains("function %id"), "{}", run.stdout);
    // The built-in targets still read as before.
    let file = dir.write("native.clif", format!("target aarch64\n{plain}"));
    ok(clif_merge([&file]));
}

/// A missing file: the path on stderr.
#[test]
fn missing_file_names_the_path() {
    let dir = TempDir::new("missing");
    let file = dir.path().join("does-not-exist.clif");
    let run = clif_merge([&file]);
    bad_input(&run);
    assert!(run.stderr.contains(&s(&file)), "{}", run.stderr);
}

/// An empty file: the path, and that there are no functions.
#[test]
fn empty_file_says_no_functions() {
    let dir = TempDir::new("empty");
    let file = dir.write("empty.clif", "");
    let run = clif_merge([&file]);
    bad_input(&run);
    assert!(run.stderr.contains(&s(&file)), "{}", run.stderr);
    assert!(run.stderr.contains("no functions"), "{}", run.stderr);
    // Only comments and a header count as empty too.
    let file = dir.write("comments.clif", "; nothing here\ntest optimize\n");
    let run = clif_merge([&file]);
    bad_input(&run);
    assert!(run.stderr.contains(&s(&file)), "{}", run.stderr);
    assert!(run.stderr.contains("no functions"), "{}", run.stderr);
}

/// 4 KB of pseudo-random bytes (invalid UTF-8): exit 2, no panic.
#[test]
fn binary_garbage_is_rejected_without_panic() {
    let dir = TempDir::new("binary");
    for seed in 1..=8u64 {
        let mut bytes = pseudo_random(seed, 4096);
        bytes[100] = 0xff; // never valid UTF-8
        assert!(std::str::from_utf8(&bytes).is_err());
        let file = dir.write(&format!("garbage{seed}.clif"), &bytes);
        let run = clif_merge([&file]);
        bad_input(&run);
        assert!(run.stderr.contains(&s(&file)), "{}", run.stderr);
    }
    // Invalid UTF-8 after a valid function.
    let mut bytes = branchy("%a", 2, 0).into_bytes();
    bytes.extend_from_slice(&[b';', b' ', 0xc3, 0x28, 0xff, b'\n']);
    let file = dir.write("tail.clif", &bytes);
    let run = clif_merge([&file]);
    bad_input(&run);
    assert!(run.stderr.contains(&s(&file)), "{}", run.stderr);
}

/// Valid UTF-8 garbage (random printable ASCII, and valid functions with random
/// printable characters overwritten): exit 2, no panic.
#[test]
fn text_garbage_is_rejected_without_panic() {
    let dir = TempDir::new("text");
    let mut cases: Vec<Vec<u8>> = Vec::new();
    for seed in 1..=8u64 {
        let bytes: Vec<u8> = pseudo_random(seed, 4096)
            .into_iter()
            .map(|b| match b % 100 {
                0..=4 => b'\n',
                r => b' ' + (r - 5) % 95,
            })
            .collect();
        cases.push(bytes);
    }
    // Random printable garbage after the `function` keyword, to get past the first
    // token.
    for seed in 20..=27u64 {
        let mut bytes = b"function %f(i32) -> i32 {\nblock0(v0: i32):\n".to_vec();
        bytes.extend(pseudo_random(seed, 512).into_iter().map(|b| b' ' + b % 95));
        cases.push(bytes);
    }
    for (i, bytes) in cases.iter().enumerate() {
        assert!(std::str::from_utf8(bytes).is_ok());
        let file = dir.write(&format!("text{i}.clif"), bytes);
        let run = clif_merge([&file]);
        bad_input(&run);
    }
}

/// Two files defining the same function name: the name and both files.
#[test]
fn duplicate_name_across_files() {
    let dir = TempDir::new("dup");
    let one = dir.write("one.clif", branchy("%twice", 2, 0));
    let two = dir.write(
        "two.clif",
        format!("{}\n{}", straight("%other", 0), straight("%twice", 0)),
    );
    let run = clif_merge([&one, &two]);
    bad_input(&run);
    assert!(run.stderr.contains("%twice"), "{}", run.stderr);
    assert!(run.stderr.contains(&s(&one)), "{}", run.stderr);
    assert!(run.stderr.contains(&s(&two)), "{}", run.stderr);
}

/// An empty directory: exit 2.
#[test]
fn empty_directory_is_an_error() {
    let dir = TempDir::new("emptydir");
    let empty = dir.path().join("nothing");
    std::fs::create_dir_all(empty.join("nested")).expect("mkdir");
    // A file that is not `.clif` does not count.
    std::fs::write(empty.join("notes.txt"), "function %x() {}").expect("write");
    let run = clif_merge([&empty]);
    bad_input(&run);
    assert!(run.stderr.contains(&s(&empty)), "{}", run.stderr);
}

/// No arguments at all: a usage error, exit 2.
/// Plain text, no ANSI colour codes (stderr is a pipe here).
#[test]
fn no_arguments_is_a_usage_error() {
    let run = clif_merge(Vec::<OsString>::new());
    assert_eq!(run.code, Some(2), "{run:?}");
    assert!(run.stdout.is_empty(), "{run:?}");
    assert!(
        run.stderr.starts_with("error: "),
        "stderr (a pipe) must start with plain `error: `: {run:?}"
    );
    assert!(run.stderr.contains("Usage"), "{run:?}");
    assert!(!run.stderr.contains("panicked"), "{run:?}");
}

// ---------------------------------------------------------------------------------
// 5. --help
// ---------------------------------------------------------------------------------

/// `--help`: exit 0, the options and an example on stdout.
#[test]
fn help_lists_options_and_an_example() {
    let run = ok(clif_merge(["--help"]));
    for option in ["--report", "--stats", "--export", "--preemptible", "--mode"] {
        assert!(
            run.stdout.contains(option),
            "--help lacks {option}:\n{}",
            run.stdout
        );
    }
    assert!(
        run.stdout.lines().any(|l| {
            let l = l.trim_start();
            l.starts_with("clif-merge ") && (l.contains(".clif") || l.ends_with('/'))
        }),
        "--help has no example line:\n{}",
        run.stdout
    );
    assert!(run.stderr.is_empty(), "{}", run.stderr);
}

// ---------------------------------------------------------------------------------
// 6. Directory inputs
// ---------------------------------------------------------------------------------

/// A directory means every `.clif` file under it, sorted by path; here the two
/// duplicate pairs are split across files in nested directories, and the class order
/// follows the sorted path order (not the names, not creation order).
#[test]
fn directory_is_every_clif_file_sorted_by_path() {
    let dir = TempDir::new("dir");
    let root = dir.path().join("root");
    // Created in reverse of the sorted order.
    dir.write(
        "root/c/sub/last.clif",
        format!("{}\n{}", straight("%alpha2", 10), branchy("%gamma", 9, 0)),
    );
    dir.write(
        "root/b.clif",
        format!("{}\n{}", straight("%alpha1", 0), branchy("%beta2", 4, 10)),
    );
    dir.write("root/a/deep/first.clif", branchy("%beta1", 4, 0));
    // Not `.clif`: ignored (it would not parse).
    dir.write("root/a/readme.txt", "not clif at all {");
    let r = report(&[], &[&root]);
    assert_eq!(
        r,
        json!({
            "functions": 5,
            "merged": 2,
            "classes": [["%beta1", "%beta2"], ["%alpha1", "%alpha2"]],
            "actions": [
                action("%beta2", "%beta1", "erase"),
                action("%alpha2", "%alpha1", "erase"),
            ],
        })
    );
    // The CLIF output follows the same order.
    let run = ok(clif_merge([&root]));
    let funcs = reparse_and_verify(&run.stdout);
    let names: Vec<String> = funcs.iter().map(|f| f.name.to_string()).collect();
    assert_eq!(names, ["%beta1", "%alpha1", "%gamma"], "{}", run.stdout);
}

// ---------------------------------------------------------------------------------
// 7. --stats
// ---------------------------------------------------------------------------------

/// `--stats`: a summary on stderr; stdout is still the normal CLIF output.
#[test]
fn stats_on_stderr_clif_on_stdout() {
    let dir = TempDir::new("stats");
    let file = dir.write("pair.clif", pair());
    let plain = ok(clif_merge([&file]));
    let run = ok(clif_merge([OsString::from("--stats"), file.clone().into()]));
    for word in ["functions", "merged", "erase"] {
        assert!(
            run.stderr.contains(word),
            "--stats lacks `{word}`:\n{}",
            run.stderr
        );
    }
    assert!(
        !run.stdout.contains("merged:"),
        "stats leaked to stdout:\n{}",
        run.stdout
    );
    assert_eq!(run.stdout, plain.stdout, "--stats changed stdout");
    assert!(
        run.stdout
            .lines()
            .any(|l| l == "; %b: erased, calls go to %a"),
        "{}",
        run.stdout
    );
    let funcs = reparse_and_verify(&run.stdout);
    assert_eq!(funcs.len(), 1);
    assert_eq!(funcs[0].name.to_string(), "%a");
    // Without --stats nothing is printed on stderr.
    assert!(plain.stderr.is_empty(), "{}", plain.stderr);
}

/// Two equal functions that loop for 10^9 iterations (three instructions each):
/// no input finishes within any budget the validator gives a pair.
fn spinning_pair() -> String {
    ["%spin_a", "%spin_b"]
        .map(|name| {
            format!(
                "function {name}(i64) -> i64 {{
block0(v0: i64):
    v1 = iconst.i64 1000000000
    v10 = iconst.i64 3
    v11 = iconst.i64 1
    jump block1(v0, v1)

block1(v2: i64, v3: i64):
    v4 = iadd v2, v10
    v5 = isub v3, v11
    brif v5, block1(v4, v5), block2

block2:
    return v4
}}
"
            )
        })
        .join("\n")
}

/// A pair whose functions loop for 3 * 10^9 interpreter steps ends within the
/// pair's budget of steps: unvalidated for its budget, never a mismatch (exit 0),
/// with the budget's stops in `--stats` and the JSON report; `--validate-budget`
/// sets the budget.
#[test]
fn a_pair_that_loops_for_billions_of_steps_is_unvalidated_for_its_budget() {
    let dir = TempDir::new("spin");
    let file = dir.write("spin.clif", spinning_pair());
    let expected = "validated: 0 pairs, 1 unvalidated (1 ran out of its budget of interpreter steps), 0 mismatches";
    for budget in [None, Some("100000")] {
        let mut argv: Vec<OsString> = vec!["--validate".into(), "--stats".into()];
        if let Some(steps) = budget {
            argv.extend(["--validate-budget".into(), steps.into()]);
        }
        argv.push(file.clone().into());
        let run = ok(clif_merge(argv));
        assert!(run.stderr.contains(expected), "{budget:?}:\n{}", run.stderr);
        let steps = budget.unwrap_or("4000000");
        assert!(
            run.stderr.contains(&format!(
                "{steps} interpreter steps, 1 runs cut short by the budget"
            )),
            "{budget:?}:\n{}",
            run.stderr
        );
    }
    let run = ok(clif_merge([
        OsString::from("--validate"),
        "--report".into(),
        "json".into(),
        "--validate-budget".into(),
        "100000".into(),
        file.into(),
    ]));
    let value: Value = serde_json::from_str(&run.stdout).expect("JSON");
    let validation = &value["validation"];
    assert_eq!(validation["unvalidated"], json!(1), "{validation}");
    assert_eq!(
        validation["unvalidated_pairs"],
        json!([{"function": "%spin_b", "reason": "ran out of its budget of interpreter steps"}])
    );
    assert_eq!(validation["cost"]["steps"], json!(100000), "{validation}");
    assert_eq!(validation["cost"]["budget_stops"], json!(1), "{validation}");
}

// ---------------------------------------------------------------------------------
// --similar
// ---------------------------------------------------------------------------------

/// `--similar --report json` adds a `similar` list with the documented shape, the
/// sizes it reports say the merge pays, and the printed module (entry points and the
/// merged body) parses again.
#[test]
fn similar_json_lists_groups_and_the_output_parses_again() {
    let file = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("filetests/similar/constant_and_callee_differ.clif");
    let run = ok(clif_merge([
        "--similar".into(),
        "--report".into(),
        "json".into(),
        s(&file),
    ]));
    let value: Value = serde_json::from_str(&run.stdout).expect("one JSON value");
    let similar = value["similar"].as_array().expect("a `similar` list");
    assert_eq!(similar.len(), 1);
    let group = &similar[0];
    assert_eq!(group["members"], json!(["%f", "%g"]));
    assert_eq!(group["holes"], json!(2));
    assert_eq!(group["merged_into"], json!("%f_merged"));
    let (before, after) = (
        group["bytes_before"].as_u64().expect("bytes_before"),
        group["bytes_after"].as_u64().expect("bytes_after"),
    );
    assert!(
        after < before,
        "merged only when smaller: {before} -> {after}"
    );
    // Snapshot of the sizes for x86_64, the host they are measured on: predicted by
    // the size model (the default pricing), and compiled with `--size-pricing
    // compile`; the group merged is the same. Changes when the filetest, the merged
    // body, the size model or Cranelift's x86_64 backend changes.
    if cfg!(target_arch = "x86_64") {
        assert_eq!(group["sizes"], json!("predicted"));
        assert_eq!((before, after), (294, 230), "predicted bytes before, after");
        let compiled = ok(clif_merge([
            "--similar".into(),
            "--size-pricing".into(),
            "compile".into(),
            "--report".into(),
            "json".into(),
            s(&file),
        ]));
        let value: Value = serde_json::from_str(&compiled.stdout).expect("one JSON value");
        let group = &value["similar"][0];
        assert_eq!(group["members"], json!(["%f", "%g"]));
        assert_eq!(group["sizes"], json!("compiled"));
        assert_eq!(
            (
                group["bytes_before"].as_u64(),
                group["bytes_after"].as_u64()
            ),
            (Some(284), Some(187)),
            "compiled bytes before, after"
        );
    }

    let dir = TempDir::new("similar");
    let printed = ok(clif_merge(["--similar".into(), s(&file)])).stdout;
    let again = dir.write("again.clif", &printed);
    let reparsed = ok(clif_merge(["--report", "json", &s(&again)]));
    let value: Value = serde_json::from_str(&reparsed.stdout).expect("JSON");
    // The four input functions, plus the merged body.
    assert_eq!(value["functions"], json!(5));
}

/// Without `--similar` the JSON report has no `similar` key and nothing is merged.
#[test]
fn similar_is_off_by_default() {
    let file =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/similar/constants_one_hole.clif");
    let value = report(&[], &[&file]);
    assert_eq!(value["merged"], json!(0));
}
