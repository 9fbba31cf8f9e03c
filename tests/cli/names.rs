//! Every name in the output means what it meant in the input.
//!
//! Generated modules, built to make names collide: functions that merge exactly and
//! functions that merge as similar (so merged bodies get invented names), imports
//! spelled like the names the tool invents (`%f_merged`, the next free `uN:M`),
//! definitions spelled like runtime library functions (`%CeilF32`, which the CLIF
//! reader reads as that library function wherever it is referenced), addresses
//! taken, and every linkage. Each module goes through the command line's own path
//! (`clif-merge --similar`, in `--mode safe` and `--mode all`), its output is parsed
//! again with cranelift-reader, and the names of input and output are compared:
//!
//! * every name the output defines was defined in the input, or is new (a merged
//!   body), and a new name was mentioned nowhere in the input and is not the name
//!   of an alias the output reports;
//! * every name an output function mentions is defined in the output if the input
//!   defined it (a reference never dangles after its function was erased or
//!   aliased), and is not defined in the output if the input only declared it (an
//!   import stays an import) unless it is new;
//! * every input function missing from the output is reported erased or aliased,
//!   and every function that stays keeps its signature.
//!
//! This is the name half of soundness; the value half (the merged code computes
//! the same) is checked by the interpreter and by linked programs elsewhere.

use clap::Parser;
use clif_merge::SymbolName;
use clif_merge::testing::mentioned_names;
use clif_merge::testing::{Args, run};
use cranelift_codegen::ir::{Function, Signature};
use std::collections::{HashMap, HashSet};
use std::fmt::Write;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.next() % 100 < percent
    }
}

/// How the generated module spells its names.
enum Naming {
    /// `u0:N`.
    User,
    /// `%name`.
    Testcase,
}

/// A worker body long enough to be worth merging as similar: `constant` is its
/// hole; it may call `callee` and take the address of `address_of`.
fn worker(name: &str, constant: i64, callee: Option<&str>, address_of: Option<&str>) -> String {
    let mut text = format!("function {name}(i32, i32) -> i32 {{\n");
    if let Some(callee) = callee {
        writeln!(text, "    fn0 = {callee}(i32) -> i32").unwrap();
    }
    if let Some(target) = address_of {
        writeln!(text, "    fn1 = {target}(i32) -> i32").unwrap();
    }
    text.push_str("block0(v0: i32, v1: i32):\n");
    writeln!(text, "    v2 = iconst.i32 {constant}").unwrap();
    text.push_str(
        "    v3 = imul v0, v2
    v4 = iadd v3, v1
    v5 = bxor v4, v0
    v6 = ishl v5, v1
    v7 = isub v6, v3
    v8 = band v7, v4
    v9 = bor v8, v5
    v10 = imul v9, v9
    v11 = iadd v10, v6
    v12 = bxor v11, v7
    v13 = imul v12, v8
    v14 = iadd v13, v9
    v15 = rotl v14, v1
    v16 = bxor v15, v10
",
    );
    let mut result = 16;
    if callee.is_some() {
        text.push_str("    v17 = call fn0(v16)\n");
        result = 17;
    }
    if address_of.is_some() {
        writeln!(
            text,
            "    v18 = func_addr.i64 fn1\n    v19 = ireduce.i32 v18\n    v20 = iadd v{result}, v19"
        )
        .unwrap();
        result = 20;
    }
    writeln!(text, "    return v{result}\n}}\n").unwrap();
    text
}

/// A small helper `(i32) -> i32`: `x * factor`.
fn helper(name: &str, factor: i64) -> String {
    format!(
        "function {name}(i32) -> i32 {{\nblock0(v0: i32):\n    v1 = iconst.i32 {factor}\n    v2 = imul v0, v1\n    return v2\n}}\n\n"
    )
}

/// A generated module: its CLIF text and the command-line arguments that give its
/// functions their linkage.
fn generate(seed: u64) -> (String, Vec<String>) {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let naming = if rng.chance(50) {
        Naming::User
    } else {
        Naming::Testcase
    };
    let workers = 2 + rng.below(3);
    let helpers = 1 + rng.below(3);
    // Names: helpers first, then workers; imports after the largest defined index,
    // or spelled like invented names.
    let (helper_names, worker_names, import_names): (Vec<String>, Vec<String>, Vec<String>) =
        match naming {
            Naming::User => {
                let mut index = 0;
                let mut next = || {
                    index += 1 + rng.below(2) as u32;
                    format!("u0:{index}")
                };
                let helpers: Vec<String> = (0..helpers).map(|_| next()).collect();
                let workers: Vec<String> = (0..workers).map(|_| next()).collect();
                let imports: Vec<String> = (0..2).map(|_| next()).collect();
                (helpers, workers, imports)
            }
            Naming::Testcase => {
                let pool = ["%h", "%CeilF32", "%Memcpy", "%f_merged1", "%h2", "%k"];
                let helpers: Vec<String> = (0..helpers).map(|i| pool[i * 2 % 6].into()).collect();
                let workers: Vec<String> = (0..workers)
                    .map(|i| ["%f", "%g", "%w", "%f_merged"][i].into())
                    .collect();
                let imports = ["%f_merged", "%g_merged", "%FloorF64", "%f_merged2"]
                    .iter()
                    .map(|s| s.to_string())
                    .filter(|s| !workers.contains(s) && !helpers.contains(s))
                    .collect();
                (helpers, workers, imports)
            }
        };
    let mut text = String::new();
    for name in &helper_names {
        text.push_str(&helper(name, [7, 9][rng.below(2)]));
    }
    let callees: Vec<&String> = helper_names.iter().chain(&import_names).collect();
    for name in &worker_names {
        let constant = [17, 23, 29][rng.below(3)];
        let callee = rng
            .chance(60)
            .then(|| callees[rng.below(callees.len())].as_str());
        let address_of = rng
            .chance(25)
            .then(|| callees[rng.below(callees.len())].as_str());
        text.push_str(&worker(name, constant, callee, address_of));
        text.push('\n');
    }
    let mut args = Vec::new();
    for name in helper_names.iter().chain(&worker_names) {
        match rng.below(5) {
            0 => args.extend(["--export".to_string(), name.clone()]),
            1 => args.extend(["--hidden".to_string(), name.clone()]),
            2 if rng.chance(30) => args.extend(["--preemptible".to_string(), name.clone()]),
            _ => {}
        }
    }
    (text, args)
}

/// Names a set of functions defines (with signatures) and mentions.
struct Names {
    defined: HashMap<SymbolName, Signature>,
    mentioned: HashSet<SymbolName>,
}

impl Names {
    fn of(functions: &[Function]) -> Self {
        let mut defined = HashMap::new();
        let mut mentioned = HashSet::new();
        for func in functions {
            let previous = defined.insert(SymbolName::of_function(func), func.signature.clone());
            assert!(previous.is_none(), "{} is defined twice", func.name);
            for name in mentioned_names(func) {
                mentioned.insert(SymbolName::of_external(func, name).expect("verified IR"));
            }
        }
        Self { defined, mentioned }
    }
}

/// The names the output's comment lines report as erased or aliased, and the
/// aliases among them.
fn removed_names(output: &str) -> (HashSet<SymbolName>, HashSet<SymbolName>) {
    let mut removed = HashSet::new();
    let mut aliases = HashSet::new();
    for line in output.lines() {
        let Some(rest) = line.strip_prefix("; ") else {
            continue;
        };
        let Some((name, what)) = rest.split_once(": ") else {
            continue;
        };
        if !(what.starts_with("erased") || what.starts_with("alias of")) {
            continue;
        }
        let parsed = cranelift_reader::parse_functions(&format!(
            "function {name}() {{\nblock0:\n    return\n}}"
        ))
        .expect("a reported name parses");
        let symbol = SymbolName::of_function(&parsed[0]);
        if what.starts_with("alias of") {
            aliases.insert(symbol.clone());
        }
        removed.insert(symbol);
    }
    (removed, aliases)
}

/// Checks the name invariants of the module doc; returns the first violation.
fn check_names(input: &[Function], output_text: &str) -> Result<(), String> {
    let output = cranelift_reader::parse_functions(output_text)
        .map_err(|e| format!("output does not parse: {e}"))?;
    let before = Names::of(input);
    let after = Names::of(&output);
    let (removed, aliases) = removed_names(output_text);
    let new: HashSet<&SymbolName> = after
        .defined
        .keys()
        .filter(|n| !before.defined.contains_key(*n))
        .collect();
    for name in &new {
        if before.mentioned.contains(*name) {
            return Err(format!(
                "new name {name} was already mentioned in the input"
            ));
        }
        if aliases.contains(*name) {
            return Err(format!("new name {name} is also reported as an alias"));
        }
    }
    for name in &after.mentioned {
        let defined_before = before.defined.contains_key(name);
        let defined_after = after.defined.contains_key(name);
        if defined_before && !defined_after {
            return Err(format!("{name} is still mentioned but no longer defined"));
        }
        if !defined_before && defined_after && !new.contains(name) {
            return Err(format!("import {name} became a definition"));
        }
    }
    for (name, signature) in &before.defined {
        match after.defined.get(name) {
            Some(kept) if kept != signature => {
                return Err(format!("{name} changed its signature"));
            }
            Some(_) if removed.contains(name) => {
                return Err(format!("{name} is reported removed but still defined"));
            }
            Some(_) => {}
            None if !removed.contains(name) => {
                return Err(format!("{name} vanished without being reported"));
            }
            None => {}
        }
    }
    Ok(())
}

/// What a case exercised.
#[derive(Default)]
struct Exercised {
    /// Modules with a similar merge.
    similar: usize,
    /// Merged bodies that could not take the first name tried (`%f_merged`, or the
    /// index after the largest defined one): it was an import or an alias.
    first_name_taken: usize,
    /// Modules with both an alias and a similar merge (`--mode all`).
    alias_and_similar: usize,
}

fn run_case(seed: u64, mode: &str, seen: &mut Exercised) -> Result<(), String> {
    let (text, linkage) = generate(seed);
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let path = dir.path().join("module.clif");
    std::fs::write(&path, &text).map_err(|e| e.to_string())?;
    let mut argv = vec![
        "clif-merge".to_string(),
        "--similar".into(),
        "--mode".into(),
    ];
    argv.push(mode.into());
    argv.extend(linkage);
    argv.push(path.display().to_string());
    let args = Args::try_parse_from(&argv).map_err(|e| e.to_string())?;
    let (output, _) = run(&args).map_err(|e| format!("exit {}: {e}", e.code))?;
    let input = cranelift_reader::parse_functions(&text).map_err(|e| e.to_string())?;
    check_names(&input, &output).map_err(|e| {
        format!("{e}\nargs: {argv:?}\n--- input ---\n{text}\n--- output ---\n{output}")
    })?;
    let largest_user_index = input
        .iter()
        .filter_map(|f| match SymbolName::of_function(f) {
            SymbolName::User { index, .. } => Some(index),
            _ => None,
        })
        .max();
    let merged_bodies: Vec<&str> = output
        .lines()
        .filter_map(|l| l.strip_prefix("; ")?.split_once(": merged body of"))
        .map(|(name, _)| name)
        .collect();
    seen.similar += usize::from(!merged_bodies.is_empty());
    seen.alias_and_similar +=
        usize::from(!merged_bodies.is_empty() && output.contains(": alias of "));
    for name in merged_bodies {
        let first_choice = match name.strip_prefix("u0:") {
            Some(index) => {
                Some(index.parse::<u32>().ok()) == largest_user_index.map(|i| Some(i + 1))
            }
            None => name.ends_with("_merged"),
        };
        seen.first_name_taken += usize::from(!first_choice);
    }
    Ok(())
}

#[test]
fn every_name_in_the_output_means_what_it_meant() {
    let mut seen = Exercised::default();
    let cases = 300;
    for seed in 0..cases {
        for mode in ["safe", "all"] {
            if let Err(e) = run_case(seed, mode, &mut seen) {
                panic!("seed {seed}, --mode {mode}: {e}");
            }
        }
    }
    println!(
        "{} modules: {} with a similar merge, {} merged bodies whose first name was taken, {} with an alias and a similar merge",
        cases * 2,
        seen.similar,
        seen.first_name_taken,
        seen.alias_and_similar
    );
    // Each situation the generator is built for must come up, or the names check
    // passes without having seen it.
    assert!(seen.similar > 0, "no module had a similar merge");
    assert!(seen.first_name_taken > 0, "no merged body met a taken name");
    assert!(
        seen.alias_and_similar > 0,
        "no alias next to a similar merge"
    );
}
#[test]
fn the_checker_sees_a_dangling_reference() {
    let input = cranelift_reader::parse_functions(
        "function %a(i32) -> i32 {\nblock0(v0: i32):\n    return v0\n}\n\
         function %b(i32) -> i32 {\n    fn0 = %a(i32) -> i32\nblock0(v0: i32):\n    v1 = call fn0(v0)\n    return v1\n}",
    )
    .expect("parses");
    // %a erased, but %b still calls it: what an unredirected erase prints.
    let output = "; %a: erased, calls go to %c\n\nfunction %b(i32) -> i32 {\n    fn0 = %a(i32) -> i32\nblock0(v0: i32):\n    v1 = call fn0(v0)\n    return v1\n}\n";
    let error = check_names(&input, output).expect_err("dangling reference");
    assert!(error.contains("no longer defined"), "{error}");
    // A merged body named like the input's import.
    let input = cranelift_reader::parse_functions(
        "function %f(i32) -> i32 {\n    fn0 = %f_merged(i32) -> i32\nblock0(v0: i32):\n    v1 = call fn0(v0)\n    return v1\n}",
    )
    .expect("parses");
    let output = "function %f_merged(i32) -> i32 {\nblock0(v0: i32):\n    return v0\n}\n\
                  function %f(i32) -> i32 {\n    fn0 = %f_merged(i32) -> i32\nblock0(v0: i32):\n    v1 = call fn0(v0)\n    return v1\n}\n";
    let error = check_names(&input, output).expect_err("import defined");
    assert!(error.contains("already mentioned"), "{error}");
}
