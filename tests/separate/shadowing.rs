//! Separate compilation where a representative's name is also the name of a local
//! function in the module that applies a decision (C `static` functions may share
//! names across files). Each program is compiled module by module with
//! cranelift-object, linked with `cc` and run, unmerged and after
//! summarize → plan → apply; the two runs must print the same.
//!
//! These are the reproducers of the name-binding bugs: a decision named its target
//! by bare symbol, and the applying module bound that symbol to its own local of the
//! same name (a redirect, a thunk, a redirected call, and a thunk to itself).

#[path = "../support/oracle_native.rs"]
mod oracle_native;

use clif_merge::FunctionSet;
use clif_merge::MergeOptions;
use clif_merge::separate::{apply_decisions, plan_program, summarize};
use cranelift_codegen::ir::Function;
use cranelift_module::Linkage;
use oracle_native::{Scratch, compile_c, compile_object, link_and_run, require_cc};
use std::time::Duration;

/// A module: its name and its functions, each `(linkage, CLIF)`.
type ModuleText = (&'static str, Vec<(Linkage, String)>);

/// `%name(x) = x * k + c`.
fn affine(name: &str, k: i64, c: i64) -> String {
    format!(
        "function %{name}(i64) -> i64 system_v {{
block0(v0: i64):
    v1 = iconst.i64 {k}
    v2 = imul v0, v1
    v3 = iconst.i64 {c}
    v4 = iadd v2, v3
    return v4
}}"
    )
}

/// `%name(x) = a(x) + 100 * b(x)`: tells which function each of its calls reached.
fn caller(name: &str, a: &str, b: &str) -> String {
    format!(
        "function %{name}(i64) -> i64 system_v {{
    fn0 = %{a}(i64) -> i64 system_v
    fn1 = %{b}(i64) -> i64 system_v
block0(v0: i64):
    v1 = call fn0(v0)
    v2 = call fn1(v0)
    v3 = iconst.i64 100
    v4 = imul v2, v3
    v5 = iadd v1, v4
    return v5
}}"
    )
}

/// `%name(x)` calls `target` through its address, taken here.
fn through_address(name: &str, target: &str) -> String {
    format!(
        "function %{name}(i64) -> i64 system_v {{
    sig0 = (i64) -> i64 system_v
    fn0 = %{target}(i64) -> i64 system_v
block0(v0: i64):
    v1 = func_addr.i64 fn0
    v2 = call_indirect sig0, v1(v0)
    return v2
}}"
    )
}

fn parse(modules: &[ModuleText]) -> Vec<(String, FunctionSet)> {
    modules
        .iter()
        .map(|(name, functions)| {
            let mut set = FunctionSet::new();
            for (linkage, text) in functions {
                for func in cranelift_reader::parse_functions(text).expect("test CLIF parses") {
                    set.push(func, *linkage).expect("unique names");
                }
            }
            (name.to_string(), set)
        })
        .collect()
}

/// Links every module (one object each) with a C `main` that prints `entry(x)` for
/// each exported entry point and a few inputs; returns what it printed.
fn link_and_print(tag: &str, modules: &[(String, FunctionSet)], entries: &[&str]) -> String {
    let dir = Scratch::new(tag);
    let mut objects = Vec::new();
    for (name, set) in modules {
        let functions: Vec<(Function, Linkage)> = set
            .iter()
            .map(|(_, d)| ((*d.func).clone(), d.linkage.into()))
            .collect();
        let bytes = compile_object(&functions, &|s| s.to_string())
            .unwrap_or_else(|e| panic!("{tag}: module {name}: {e}"));
        objects.push(dir.write(&format!("{name}.o"), &bytes));
    }
    let mut c = String::from("#include <stdio.h>\n");
    for entry in entries {
        c.push_str(&format!("extern long {entry}(long);\n"));
    }
    c.push_str("int main(void) {\n    long xs[] = {0, 1, 2, 5, -3};\n");
    c.push_str("    for (int i = 0; i < 5; i++) {\n");
    for entry in entries {
        c.push_str(&format!(
            "        printf(\"{entry}(%ld) = %ld\\n\", xs[i], {entry}(xs[i]));\n"
        ));
    }
    c.push_str("    }\n    return 0;\n}\n");
    objects.push(compile_c(&dir, "main", &c).unwrap_or_else(|e| panic!("{tag}: {e}")));
    let run = link_and_run(&dir, "program", &objects, Duration::from_secs(10))
        .unwrap_or_else(|e| panic!("{tag}: {e}"));
    assert_eq!(
        run.status, "exit 0",
        "{tag}: the program failed:\n{}",
        run.stdout
    );
    run.stdout
}

/// Runs the program unmerged and merged (summarize, plan, apply per module) and
/// compares. Returns the plan's shadowed members, to check that the test reached
/// the situation it is about.
fn check(tag: &str, modules: &[ModuleText], entries: &[&str]) -> usize {
    let modules = parse(modules);
    let options = MergeOptions::default();
    let summaries: Vec<_> = modules
        .iter()
        .map(|(name, set)| summarize(set, name, &options))
        .collect();
    let plan = plan_program(&summaries).expect("plan");
    let merged: Vec<(String, FunctionSet)> = modules
        .iter()
        .zip(&plan.decisions)
        .map(|((name, set), decisions)| {
            assert_eq!(*name, decisions.module);
            let out = apply_decisions(set, &options, decisions)
                .unwrap_or_else(|e| panic!("{tag}: applying {name}'s decisions: {e}"))
                .functions;
            (name.clone(), out)
        })
        .collect();
    let before = link_and_print(&format!("{tag}-before"), &modules, entries);
    let after = link_and_print(&format!("{tag}-after"), &merged, entries);
    assert_eq!(
        before, after,
        "{tag}: the merged program prints something else; decisions: {:?}",
        plan.decisions
    );
    plan.shadowed.len()
}

/// `a` has a local `%g` and a local `%f`, a copy of `b`'s exported `%g`. Redirecting
/// `a::%f` to `b::%g` by name made `a`'s calls of `%f` call `a`'s own `%g`.
#[test]
fn a_redirect_does_not_bind_to_a_same_named_local() {
    if !require_cc("a_redirect_does_not_bind_to_a_same_named_local") {
        return;
    }
    let modules = [
        (
            "a",
            vec![
                (Linkage::Local, affine("g", 1, 40)),
                (Linkage::Local, affine("f", 7, 3)),
                (Linkage::Export, caller("main_a", "f", "g")),
            ],
        ),
        ("b", vec![(Linkage::Export, affine("g", 7, 3))]),
    ];
    assert_eq!(check("redirect", &modules, &["main_a", "g"]), 1);
}

/// `c` has a local `%g` and an exported `%k`, a copy of `b`'s exported `%g`: a
/// thunk from `c::%k` "to `%g`" called `c`'s own `%g`.
#[test]
fn a_thunk_does_not_bind_to_a_same_named_local() {
    if !require_cc("a_thunk_does_not_bind_to_a_same_named_local") {
        return;
    }
    let modules = [
        ("b", vec![(Linkage::Export, affine("g", 7, 3))]),
        (
            "c",
            vec![
                (Linkage::Local, affine("g", 1, 40)),
                (Linkage::Export, affine("k", 7, 3)),
                (Linkage::Export, caller("main_c", "k", "g")),
            ],
        ),
    ];
    assert_eq!(check("thunk", &modules, &["main_c", "k", "g"]), 1);
}

/// `d` exports `%t`, a copy of `b`'s exported `%g`, so `%t` becomes a thunk to
/// `b::%g`; `a` calls `%t` and has a local `%g`: sending `a`'s calls of `%t`
/// "to `%g`" called `a`'s own `%g`.
#[test]
fn a_redirected_call_does_not_bind_to_a_same_named_local() {
    if !require_cc("a_redirected_call_does_not_bind_to_a_same_named_local") {
        return;
    }
    let modules = [
        (
            "a",
            vec![
                (Linkage::Local, affine("g", 1, 40)),
                (Linkage::Export, caller("main_a", "t", "g")),
            ],
        ),
        ("b", vec![(Linkage::Export, affine("g", 7, 3))]),
        ("d", vec![(Linkage::Export, affine("t", 7, 3))]),
    ];
    // The call redirect in `a` is the refused one; `d::%t` still becomes a thunk.
    check("call", &modules, &["main_a", "t", "g"]);
}

/// `a` has a local `%g` whose address it takes, a copy of `b`'s exported `%g`:
/// making `a::%g` a thunk "to `%g`" made it call itself forever.
#[test]
fn a_thunk_never_targets_itself() {
    if !require_cc("a_thunk_never_targets_itself") {
        return;
    }
    let modules = [
        (
            "a",
            vec![
                (Linkage::Local, affine("g", 7, 3)),
                (Linkage::Export, through_address("fa", "g")),
            ],
        ),
        ("b", vec![(Linkage::Export, affine("g", 7, 3))]),
    ];
    assert_eq!(check("self", &modules, &["fa", "g"]), 1);
}
