//! The linked-program oracle: merges are judged by what the merged code does when it
//! is linked with the system `cc` and run, not by clif-merge's own model of it.
//!
//! Every check builds a program twice (or more): once from the CLIF as it is, once
//! from what clif-merge made of it. Each module becomes a real object file
//! (`cranelift-object`, host ISA, `opt_level=speed`, frame pointers kept, PIC;
//! `%name` is the symbol `name`, local functions are symbols private to their
//! object, so two objects may each have a local `g`), the objects are linked with a C
//! file by `cc`, the executable runs, and its output and exit status must be the
//! same. A merge clif-merge refuses (an `Err` from `plan_program` or
//! `apply_decisions`) is not a miscompile: it is counted and printed. A panic, a
//! function failing the Cranelift verifier, a merged module that does not compile
//! or link, or a different output is a failure; the failure message has the seed,
//! the modules' CLIF before and after, and both outputs.
//!
//! 1. `generated_programs_link_and_run_alike_after_separate_merging`: generated
//!    programs of 2 to 4 modules (`support/oracle_programs.rs`: same-named locals
//!    in several modules next to another module's exported function of that name,
//!    cross-module calls to exported, hidden and preemptible functions, addresses
//!    taken, called indirectly and compared, `return_call` between `tail`
//!    functions, functions provided by C, some calling back, and sometimes a module
//!    clif-merge never sees). clif-merge runs its separate-compilation pipeline
//!    through the library: `summary::summarize` per module (through the summary
//!    file format), `program::plan_program` over all summaries,
//!    `transform::apply_decisions` per module, in `MergeMode::Safe` and
//!    `MergeMode::All`. The C `main` calls every visible function on ten inputs,
//!    calls through the addresses CLIF hands out, and prints which addresses compare
//!    equal (`addr` lines: all compared in safe mode, where addresses are
//!    significant; in mode all only those where the unmerged build found two
//!    addresses equal, for one function keeps one address in every mode).
//! 2. `separate_test_modules_link_and_run_alike`: the modules `tests/separate/separate.rs`
//!    builds through the same pipeline: the benchmark generator's module (seed 1,
//!    300 functions) split by `summary::split_module` into 2, 4 and 8 parts, and
//!    the `filetests/merge` and `filetests/nomerge` files (as one module, every
//!    `%name` prefixed by its file's number; a file with `uN:M` names on its own)
//!    split into 2 and 4 parts, and into 3 with every function exported (split
//!    parts export only what other parts call). Their C `main` (generic, from the
//!    signatures) calls every exported function C can call on three rows of
//!    arguments, each call in a child process (a trap, crash or endless loop ends
//!    only that call, after at most 1 s), with pointer arguments into memory mapped
//!    at a fixed address, and prints results, signals and a checksum of that
//!    memory; imports become C stubs that leave a trace in that memory. Output
//!    lines that differ between two builds of the *unmerged* program with different
//!    code layouts (other object and function order, padding) depend on addresses
//!    and are not compared, nor are calls that time out; both are counted and
//!    printed, as are functions C cannot call (vectors, `tail`, several results).
//!    `tests/separate/separate.rs` also splits brotli from the corpus: its functions need
//!    the wasmtime runtime (vmctx, linear memory), so it is not run (said so).
//! 3. `generated_modules_run_alike_after_similar_merging` and
//!    `filetests_run_alike_after_similar_merging`: single modules through what the
//!    command line's `--similar` runs (`driver::merge_functions`, then
//!    `similar::SimilarPass::after`), in both modes, compiled as
//!    `SimilarPass::functions` gives them. The generated modules have families of
//!    long functions differing in constants or callees (some `tail` ones ending in
//!    `return_call`s whose callee differs) and names the merge could collide with:
//!    an import named `%F_merged` (or `u0:N`, one past the largest index) provided
//!    by C, and a visible duplicate named so (an alias in mode all).
//! 4. `generated_programs_link_and_run_alike_through_merging_module`: generated
//!    programs of 2 or 3 modules where function addresses are everywhere
//!    (`oracle_programs::generate_address_program`: twins, exact copies under other
//!    names and linkages, whose addresses are taken by `func_addr`, by `symbol_value`
//!    of the function's symbol, by data objects (exported and read by C, or local and
//!    read by CLIF), and on x86_64 by machine code given with
//!    `define_function_bytes` (`lea; ret`), mostly one kind per group of twins, so
//!    that their getters differ only in whose address they return; machine code that
//!    tail-jumps; address comparisons in CLIF; functions that compare or call the
//!    address they are passed, from C or from CLIF). Each module goes through its
//!    own `MergingModule<ObjectModule>` as a compiler drives it (declare with the
//!    linkage, `define_function`, `define_data` with `write_function_addr`,
//!    `define_function_bytes`, `finish_object`), in both compile modes
//!    (`CompileMode::AtDefine`: compared by machine code; `AtFinish`: by IR) and
//!    both merge modes; the unmerged build defines the same through a plain
//!    `ObjectModule`. The C `main` is the one of test 1, which also calls through
//!    the addresses the exported data objects hold, passes every address to the
//!    functions that compare it (`addr-is` lines, compared as the `addr` lines
//!    are) or call it (`via` lines), and calls the machine-code jumps. Half the
//!    programs also hold a function copied into two modules whose address each
//!    module takes at two sites (`add_twins_across_modules`). An `Err` from the
//!    wrapper is a refusal, unless Cranelift (its verifier included) rejected what
//!    the wrapper gave it: that, a panic, a link failure or another output is a
//!    failure.
//! 5. `one_function_keeps_one_address_across_modules`: that shape alone
//!    (`oracle_programs::twins_across_modules_program`), 24 programs through the
//!    separate pipeline of test 1, the `clif-merge` binary's `summarize`, `plan`
//!    and `apply`, and the wrapper of test 4.
//!
//! An alias of tests 1 and 3 becomes a real alias, as `MergingModule::finish_object`
//! writes one: the object's `ObjectModule` declares it, and its symbol is pointed at
//! the kept function's code once the object is finished (one address, two names).
//! Test 2 lowers it as a forwarding function with the alias's name that calls (or,
//! for `tail`, tail-calls) the kept function; it compares no address. `apply_decisions` returns the
//! aliases of a module's own merge beside its functions.
//!
//! Environment: `ORACLE_SEED=N` runs only seed N of the generated programs and
//! modules (and prints its CLIF and outputs), `ORACLE_PROGRAMS=N` sets how many
//! programs run (default 200 multi-module programs, 160 single modules, and 300
//! programs through `MergingModule`, each built in 4 configurations), and
//! `ORACLE_KEEP=1` keeps each program's directory (C source, objects, executables,
//! outputs) under the temp dir. Without `cc` the tests fail under CI (`CI` set)
//! and skip loudly otherwise.
//!
//! Run: `cargo test --release --test oracle -- --nocapture` (the counters:
//! programs, builds, functions merged, refusals, what was not compared and why).

#[path = "../../benches/merge_bench/generator.rs"]
#[allow(dead_code)]
mod generator;
#[path = "../support/oracle_native.rs"]
mod oracle_native;
#[path = "../support/oracle_programs.rs"]
mod oracle_programs;

use clif_merge::OutputEntry;
use clif_merge::module::{CompileMode, MergeReport, MergingModule, ModuleMergeOptions};
use clif_merge::separate::{
    ModuleDecisions, Summary, apply_decisions, plan_program, program_hash, summarize,
};
use clif_merge::similar::{SimilarOptions, SimilarPass};
use clif_merge::testing::split_module;
use clif_merge::{FuncIndex, FunctionSet, MergeAction, MergeMode, MergeOptions, merge_functions};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Function, Signature, UserFuncName};
use cranelift_codegen::verify_function;
use cranelift_module::{Linkage, ModuleError};
use oracle_native::{
    AliasSpec, CSignature, DefineError, HarnessCall, ObjectSpec, Run, Scratch, compile_c,
    compile_object, compile_object_spec, define_object, forwarding_function, generic_harness,
    host_isa, link_and_run, object_module, referenced_functions, referenced_symbols, require_cc,
    symbol_of,
};
use oracle_programs::{
    Body, BytesCode, Program, generate_address_program, generate_program, generate_similar_module,
    twins_across_modules_program,
};
use rayon::prelude::*;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Functions of one object file, with their linkage.
type Object = Vec<(Function, Linkage)>;

/// Aliases of one object file: (symbol, symbol of the kept function).
type Aliases = Vec<(String, String)>;

/// A way of merging a program's modules (name, functions) in a mode.
type Merge<'a> = &'a dyn Fn(&[(String, FunctionSet)], MergeMode) -> Merged;

const MODES: [MergeMode; 2] = [MergeMode::Safe, MergeMode::All];

/// What clif-merge made of a program.
enum Merged {
    /// The objects to build, how many functions clif-merge changed or removed, how
    /// many groups of similar functions it merged, what it decided (text), and per
    /// object its aliases (symbol, symbol of the kept function), each in the object
    /// as a forwarding function ([`build_and_run`] can make it a real alias).
    Built(Vec<Object>, usize, usize, String, Vec<Aliases>),
    /// It refused (an error, not a panic): not a miscompile.
    Refused(String),
    /// It panicked or produced a function the verifier rejects.
    Broken(String),
}

/// One failure: a one-line summary and the details to debug it.
struct Failure {
    summary: String,
    details: String,
}

/// Counters over a test's programs.
#[derive(Default)]
struct Tally {
    programs: AtomicUsize,
    builds: AtomicUsize,
    refused: AtomicUsize,
    changed: AtomicUsize,
    groups: AtomicUsize,
}

impl Tally {
    fn add(counter: &AtomicUsize, n: usize) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Runs `f`, turning a panic into its message.
fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        payload
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

fn mode_name(mode: MergeMode) -> &'static str {
    match mode {
        MergeMode::Safe => "safe",
        MergeMode::All => "all",
        _ => unreachable!("a merge mode this test does not run"),
    }
}

/// The seeds to run: `ORACLE_SEED` alone, or `0..ORACLE_PROGRAMS` (default
/// `default`).
fn seeds(default: u64) -> Vec<u64> {
    if let Some(seed) = std::env::var("ORACLE_SEED")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
    {
        return vec![seed];
    }
    let n = std::env::var("ORACLE_PROGRAMS")
        .ok()
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or(default);
    (0..n).collect()
}

fn single_seed() -> bool {
    std::env::var("ORACLE_SEED").is_ok()
}

/// Checks `functions` with the Cranelift verifier for the ISA they are compiled
/// for (some instructions, such as `get_return_address`, need one).
fn verify(functions: &Object) -> Result<(), String> {
    let isa = host_isa();
    for (func, _) in functions {
        if let Err(e) = verify_function(func, &*isa) {
            return Err(format!(
                "{} fails the Cranelift verifier: {e}\n{}",
                func.name,
                func.display()
            ));
        }
    }
    Ok(())
}

fn as_object(set: &FunctionSet) -> Object {
    set.iter()
        .map(|(_, d)| ((*d.func).clone(), d.linkage.into()))
        .collect()
}

/// Adds alias `name` of `of` (with `of`'s `signature`) to `object` as a forwarding
/// function, and to `aliases`, so that [`build_and_run`] makes it a real alias.
fn push_alias(
    (object, aliases): (&mut Object, &mut Aliases),
    name: &UserFuncName,
    linkage: Linkage,
    signature: &Signature,
    of: &UserFuncName,
) {
    object.push((forwarding_function(name.clone(), signature, of), linkage));
    aliases.push((symbol_of(name), symbol_of(of)));
}

/// Runs clif-merge's separate-compilation pipeline over `modules` (name, functions)
/// through the library, as the `summarize`, `plan` and `apply` subcommands do.
fn merge_separately(modules: &[(String, FunctionSet)], mode: MergeMode) -> Merged {
    let options = MergeOptions::default().with_mode(mode);
    let summaries = match catch(|| {
        modules
            .iter()
            .map(|(name, set)| summarize(set, name, &options))
            .collect::<Vec<_>>()
    }) {
        Ok(s) => s,
        Err(panic) => return Merged::Broken(format!("summarize panicked: {panic}")),
    };
    let mut read = Vec::new();
    for s in &summaries {
        match Summary::from_bytes(&s.to_bytes()) {
            Ok(back) if back == *s => read.push(back),
            Ok(_) => return Merged::Broken(format!("summary of {} changes in its file", s.module)),
            Err(e) => return Merged::Broken(format!("summary of {} unreadable: {e}", s.module)),
        }
    }
    let plan = match catch(|| plan_program(&read)) {
        Ok(Ok(plan)) => plan,
        Ok(Err(e)) => return Merged::Refused(format!("plan_program: {e}")),
        Err(panic) => return Merged::Broken(format!("plan_program panicked: {panic}")),
    };
    let mut objects = Vec::new();
    let mut changed = 0;
    let mut decided = String::new();
    let mut forwarders = Vec::new();
    for d in &plan.decisions {
        for x in &d.decisions {
            decided.push_str(&format!(
                "{}: {} {} -> {}::{}\n",
                d.module,
                x.action.as_str(),
                x.function,
                x.to_module,
                x.to
            ));
        }
        for c in &d.calls {
            decided.push_str(&format!(
                "{}: calls to {} go to {}::{}\n",
                d.module, c.symbol, c.to_module, c.to
            ));
        }
    }
    for (name, set) in modules {
        let Some(decisions) = plan.decisions.iter().find(|d| d.module == *name) else {
            return Merged::Broken(format!("plan_program gave no decisions for module {name}"));
        };
        let out = match catch(|| apply_decisions(set, &options, decisions)) {
            Ok(Ok(out)) => out,
            Ok(Err(e)) => return Merged::Refused(format!("apply_decisions({name}): {e}")),
            Err(panic) => {
                return Merged::Broken(format!("apply_decisions({name}) panicked: {panic}"));
            }
        };
        let mut object = as_object(&out.functions);
        let mut aliases = Aliases::new();
        let defined: HashSet<String> = object.iter().map(|(f, _)| symbol_of(&f.name)).collect();
        let signatures: HashMap<String, Signature> = object
            .iter()
            .map(|(f, _)| (symbol_of(&f.name), f.signature.clone()))
            .collect();
        for alias in &out.aliases {
            if defined.contains(&symbol_of(&alias.name)) {
                return Merged::Broken(format!(
                    "apply_decisions({name}): alias {} is also defined",
                    alias.name
                ));
            }
            let Some(signature) = signatures.get(&symbol_of(&alias.of)) else {
                return Merged::Broken(format!(
                    "apply_decisions({name}): alias {} of {}, which is not defined here",
                    alias.name, alias.of
                ));
            };
            push_alias(
                (&mut object, &mut aliases),
                &alias.name,
                alias.linkage.into(),
                signature,
                &alias.of,
            );
        }
        let before: Vec<String> = set
            .iter()
            .map(|(_, d)| d.func.display().to_string())
            .collect();
        changed += object
            .iter()
            .filter(|(f, _)| !before.contains(&f.display().to_string()))
            .count()
            + set.len().saturating_sub(object.len());
        if let Err(e) = verify(&object) {
            return Merged::Broken(format!("apply_decisions({name}) output: {e}"));
        }
        objects.push(object);
        forwarders.push(aliases);
    }
    Merged::Built(objects, changed, 0, decided, forwarders)
}

/// Runs the `clif-merge` binary's separate-compilation subcommands over `modules`
/// (name, functions): each module written to a directory as CLIF, `summarize` with
/// its functions' linkage as options, `plan` over every summary, `apply` per
/// module; the CLIF `apply` prints is parsed again (a promoted function hidden, an
/// alias a forwarding function named in the aliases).
fn merge_through_cli(modules: &[(String, FunctionSet)], mode: MergeMode) -> Merged {
    use std::ffi::OsString;
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(e) => return Merged::Broken(format!("no temp dir: {e}")),
    };
    let run = |args: &[OsString]| -> Result<String, String> {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_clif-merge"))
            .args(args)
            .output()
            .map_err(|e| format!("running clif-merge: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "clif-merge {args:?}: {}\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let mut per_module = Vec::new();
    let mut summaries = Vec::new();
    for (name, set) in modules {
        let module_dir = dir.path().join(name);
        let mut text = String::new();
        let mut options: Vec<OsString> = vec!["--mode".into(), mode_name(mode).into()];
        for (_, d) in set.iter() {
            text.push_str(&format!("{}\n", d.func.display()));
            let flag = match d.linkage {
                clif_merge::Linkage::Export => "--export",
                clif_merge::Linkage::Hidden => "--hidden",
                clif_merge::Linkage::Preemptible => "--preemptible",
                _ => continue,
            };
            options.extend([flag.into(), d.func.name.to_string().into()]);
        }
        if let Err(e) = std::fs::create_dir_all(&module_dir)
            .and_then(|()| std::fs::write(module_dir.join("m.clif"), text))
        {
            return Merged::Broken(format!("writing module {name}: {e}"));
        }
        let summary = dir.path().join(format!("{name}.sum"));
        let mut args: Vec<OsString> = vec!["summarize".into()];
        args.extend(options.iter().cloned());
        args.extend([
            module_dir.clone().into(),
            "-o".into(),
            summary.clone().into(),
        ]);
        if let Err(e) = run(&args) {
            return Merged::Refused(e);
        }
        summaries.push(summary);
        per_module.push((name, set, module_dir, options));
    }
    let decisions = dir.path().join("decisions");
    let mut args: Vec<OsString> = vec!["plan".into()];
    args.extend(summaries.iter().map(|p| p.clone().into()));
    args.extend(["--out-dir".into(), decisions.clone().into()]);
    if let Err(e) = run(&args) {
        return Merged::Refused(e);
    }
    let mut objects = Vec::new();
    let mut all_aliases = Vec::new();
    let mut decided = String::new();
    let mut changed = 0;
    for (name, set, module_dir, options) in per_module {
        let mut args: Vec<OsString> = vec![
            "apply".into(),
            "--decisions".into(),
            decisions.join(format!("{name}.dec")).into(),
        ];
        args.extend(options);
        args.push(module_dir.into());
        let printed = match run(&args) {
            Ok(printed) => printed,
            Err(e) => return Merged::Refused(e),
        };
        let functions = match cranelift_reader::parse_functions(&printed) {
            Ok(functions) => functions,
            Err(e) => return Merged::Broken(format!("apply's CLIF does not parse: {e}")),
        };
        let linkage_of = |func: &Function| {
            set.iter()
                .find(|(_, d)| d.func.name == func.name)
                .map_or(Linkage::Hidden, |(_, d)| d.linkage.into())
        };
        let mut object: Object = functions
            .iter()
            .map(|f| (f.clone(), linkage_of(f)))
            .collect();
        let mut aliases = Aliases::new();
        for line in printed.lines().filter(|l| l.starts_with("; ")) {
            decided.push_str(&format!("{name}: {line}\n"));
            changed += 1;
            let Some((alias, of)) = line[2..].split_once(": alias of ") else {
                continue;
            };
            let (Some(kept), Some((_, original))) = (
                functions.iter().find(|f| f.name.to_string() == of),
                set.iter().find(|(_, d)| d.func.name.to_string() == alias),
            ) else {
                return Merged::Broken(format!("{name}: alias {alias} of {of} not found"));
            };
            push_alias(
                (&mut object, &mut aliases),
                &original.func.name,
                original.linkage.into(),
                &kept.signature,
                &kept.name,
            );
        }
        if let Err(e) = verify(&object) {
            return Merged::Broken(format!("apply({name}) output: {e}"));
        }
        objects.push(object);
        all_aliases.push(aliases);
    }
    Merged::Built(objects, changed, 0, decided, all_aliases)
}

/// Aligned groups of three or more members (`SimilarOptions::align_groups`) the
/// similar merges of the generated modules made, in every build.
static ALIGNED_GROUPS: AtomicUsize = AtomicUsize::new(0);

/// Runs clif-merge on one module as `clif-merge --similar` does: the identical merge
/// (`merge_functions`), then the similar merge on its output (`SimilarPass::after`).
/// Every function printed becomes a function of the object (merged bodies local,
/// entry points and others with their linkage); an alias becomes a forwarding
/// function, named in the result's aliases. Counts the aligned groups of three or more it makes in `groups`,
/// if given.
fn merge_similar(set: &FunctionSet, mode: MergeMode, groups: Option<&AtomicUsize>) -> Merged {
    let result = catch(|| {
        let outcome = merge_functions(set, &MergeOptions::default().with_mode(mode));
        // Across CFGs, by block pairing, in groups, cut at anchors and by
        // sequence alignment too (all off by default):
        // each runs after the default alignment rounds and keeps their pairs, so
        // this checks every kind natively.
        let similar = SimilarPass::after(
            set,
            &outcome,
            &SimilarOptions::default()
                .with_align_cfg(true)
                .with_align_blocks(true)
                .with_align_groups(true)
                .with_align_anchors(true)
                .with_align_sequence(true),
            clif_merge::testing::host_isa().as_deref(),
        );
        let mut object: Object = similar
            .functions()
            .into_iter()
            .enumerate()
            .map(|(k, func)| {
                let linkage = if k < similar.module().len() {
                    similar.module().get(FuncIndex::new(k)).linkage.into()
                } else {
                    Linkage::Local
                };
                (func.clone(), linkage)
            })
            .collect();
        let mut forwarders = Vec::new();
        for entry in &outcome.output {
            if let OutputEntry::Removed {
                function,
                into,
                action: MergeAction::Alias,
            } = entry
            {
                let alias = set.get(*function);
                let kept = &set.get(*into).func;
                push_alias(
                    (&mut object, &mut forwarders),
                    &alias.func.name,
                    alias.linkage.into(),
                    &kept.signature,
                    &kept.name,
                );
            }
        }
        let mut decided = String::new();
        for d in &outcome.plan.decisions {
            decided.push_str(&format!(
                "{} {} -> {}\n",
                d.action,
                set.display_name(d.function),
                set.display_name(d.into)
            ));
        }
        for g in &similar.outcome().groups {
            let members: Vec<String> = g
                .members
                .iter()
                .map(|&m| similar.module().display_name(m))
                .collect();
            decided.push_str(&format!(
                "similar: {} merged into {} ({} parameters)\n",
                members.join(", "),
                g.merged_name,
                g.parameters.len()
            ));
        }
        let grown = similar
            .outcome()
            .groups
            .iter()
            .filter(|g| g.is_aligned() && g.members.len() >= 3)
            .count();
        if let Some(groups) = groups {
            groups.fetch_add(grown, Ordering::Relaxed);
        }
        let changed = outcome.plan.decisions.len()
            + similar
                .outcome()
                .groups
                .iter()
                .map(|g| g.members.len())
                .sum::<usize>();
        (
            object,
            changed,
            similar.outcome().groups.len(),
            decided,
            forwarders,
        )
    });
    match result {
        Err(panic) => Merged::Broken(format!("merge_functions/SimilarPass panicked: {panic}")),
        Ok((object, changed, groups, decided, forwarders)) => match verify(&object) {
            Err(e) => Merged::Broken(format!("similar merge output: {e}")),
            Ok(()) => Merged::Built(vec![object], changed, groups, decided, vec![forwarders]),
        },
    }
}

/// Compiles `objects` and links them with `extra` object files (the C side) in
/// `dir`; runs the executable. `Err` on anything before the run. A function of
/// `objects[i]` named as an alias in `aliases[i]` (absent: none) becomes a real
/// alias, as `MergingModule::finish_object` makes one: its symbol names the kept
/// function's code (one address, as the alias has in any linker).
#[allow(clippy::too_many_arguments)]
fn build_and_run(
    dir: &Scratch,
    tag: &str,
    objects: &[Object],
    aliases: &[Aliases],
    rename: &dyn Fn(&str) -> String,
    extra: &[PathBuf],
    reverse: bool,
    timeout: Duration,
) -> Result<Run, String> {
    let mut paths: Vec<PathBuf> = extra.to_vec();
    let mut compiled = Vec::new();
    for (i, object) in objects.iter().enumerate() {
        let mut spec = ObjectSpec::default();
        for (func, linkage) in object {
            let symbol = symbol_of(&func.name);
            let mut of_object = aliases.get(i).into_iter().flatten();
            match of_object.find(|(alias, _)| *alias == symbol) {
                Some((_, of)) => spec.aliases.push(AliasSpec {
                    symbol,
                    linkage: *linkage,
                    signature: func.signature.clone(),
                    of: of.clone(),
                }),
                None => spec.functions.push((func.clone(), *linkage)),
            }
        }
        let bytes = catch(|| compile_object_spec(&spec, rename))
            .map_err(|panic| format!("Cranelift panicked compiling object {i}: {panic}"))?
            .map_err(|e| format!("object {i} does not compile: {e}"))?;
        compiled.push(dir.write(&format!("{tag}-{i}.o"), &bytes));
    }
    if reverse {
        compiled.reverse();
    }
    paths.extend(compiled);
    link_and_run(dir, tag, &paths, timeout)
}

/// Whether `line` is an address line (`addr`, `addr-is`, `addr-cmp`) saying that
/// two addresses are equal.
fn addresses_equal(line: &str) -> bool {
    line.starts_with("addr") && (line.ends_with(": 1") || line.ends_with("= 1"))
}

/// The lines of `out` that are compared, line by line with the unmerged build's
/// output `base`: every line when addresses are significant; otherwise an `addr`
/// line only where `base` found the two addresses equal (different functions may
/// come to share an address when addresses are not significant, but one function
/// keeps one address).
fn significant<'o>(out: &'o str, base: &str, addresses: bool) -> Vec<&'o str> {
    let mut base = base.lines();
    out.lines()
        .filter(|l| {
            let in_base = base.next();
            addresses || !l.starts_with("addr") || in_base.is_some_and(addresses_equal)
        })
        .collect()
}

/// How the merged program's `run` differs from the unmerged one's `base` (the
/// address lines as [`significant`] says): a one-line summary and the details, or
/// `None` when they agree.
fn difference(base: &Run, run: &Run, addresses: bool) -> Option<(String, String)> {
    let (a, b) = (
        significant(&base.stdout, &base.stdout, addresses),
        significant(&run.stdout, &base.stdout, addresses),
    );
    if a == b && base.status == run.status {
        return None;
    }
    let what = if base.status != run.status {
        format!(
            "the merged program ends with {} (unmerged: {})",
            run.status, base.status
        )
    } else {
        format!(
            "the merged program prints something else: {}",
            first_differences(&a, &b)
                .lines()
                .next()
                .unwrap_or("")
                .trim()
        )
    };
    let details = format!(
        "--- differing lines ---\n{}--- output unmerged ({}) ---\n{}--- output merged ({}) ---\n{}",
        first_differences(&a, &b),
        base.status,
        base.stdout,
        run.status,
        run.stdout
    );
    Some((what, details))
}

/// The first differing lines of two outputs.
fn first_differences(a: &[&str], b: &[&str]) -> String {
    let mut out = String::new();
    let mut shown = 0;
    for i in 0..a.len().max(b.len()) {
        let (x, y) = (a.get(i).copied(), b.get(i).copied());
        if x != y {
            out.push_str(&format!(
                "  line {}: unmerged `{}`, merged `{}`\n",
                i + 1,
                x.unwrap_or("<none>"),
                y.unwrap_or("<none>")
            ));
            shown += 1;
            if shown == 12 {
                out.push_str("  ...\n");
                break;
            }
        }
    }
    out
}

fn objects_clif(objects: &[Object], names: &[String]) -> String {
    let mut out = String::new();
    for (object, name) in objects.iter().zip(names) {
        out.push_str(&format!(";; ---- module {name} ----\n"));
        for (func, linkage) in object {
            out.push_str(&format!("; {linkage:?}\n{}\n", func.display()));
        }
    }
    out
}

/// Prints the counters and panics with every failure (details of the first three).
fn conclude(test: &str, tally: &Tally, failures: Vec<Failure>, elapsed: Duration) {
    println!(
        "{test}: {} programs, {} merged builds linked and run, {} functions changed by merging \
         ({} groups of similar functions), {} merges refused (errors, not miscompiles), \
         {} failures, {:.1} s",
        tally.programs.load(Ordering::Relaxed),
        tally.builds.load(Ordering::Relaxed),
        tally.changed.load(Ordering::Relaxed),
        tally.groups.load(Ordering::Relaxed),
        tally.refused.load(Ordering::Relaxed),
        failures.len(),
        elapsed.as_secs_f64()
    );
    if failures.is_empty() {
        return;
    }
    let mut message = format!("{test}: {} failures:\n", failures.len());
    for f in &failures {
        message.push_str(&format!("  {}\n", f.summary));
    }
    for f in failures.iter().take(3) {
        message.push_str(&format!(
            "\n==================== {} ====================\n{}\n",
            f.summary, f.details
        ));
    }
    message.push_str("\n(rerun one generated program with ORACLE_SEED=N)\n");
    panic!("{message}");
}

/// The result of checking one generated program.
#[derive(Default)]
struct Checked {
    failures: Vec<Failure>,
    /// Refusals, with the reason.
    refused: Vec<String>,
    builds: usize,
    changed: usize,
    groups: usize,
    /// Per configuration of the wrapper: functions merged in each build.
    by_config: Vec<(String, usize)>,
}

impl Checked {
    /// The result of a check of `what` that panicked with `panic`.
    fn panicked(what: &str, panic: String) -> Self {
        Self {
            failures: vec![Failure {
                summary: format!("{what}: the check panicked: {}", first_line(&panic)),
                details: panic,
            }],
            ..Self::default()
        }
    }
}

/// Builds program `program` unmerged and merged by `merge` (per mode; `shown` are
/// the modules clif-merge sees), runs both, compares.
fn check_generated(program: &Program, kind: &str, merge: Merge<'_>) -> Checked {
    let seed = program.seed;
    let mut checked = Checked::default();
    let dir = Scratch::new(&format!("{kind}{seed}"));
    let c_source = program.c_main();
    let c_object = compile_c(&dir, "main", &c_source)
        .unwrap_or_else(|e| panic!("seed {seed}: the generated C does not compile: {e}"));
    let sets: Vec<FunctionSet> = (0..program.modules)
        .map(|m| program.module_set(m))
        .collect();
    let names: Vec<String> = (0..program.modules).map(Program::module_name).collect();
    let originals: Vec<Object> = sets.iter().map(as_object).collect();
    let rename = |s: &str| s.to_string();
    // The programs run in milliseconds; a merged one still running after 10 s hangs.
    let timeout = Duration::from_secs(10);
    let base = build_and_run(
        &dir,
        "unmerged",
        &originals,
        &[],
        &rename,
        std::slice::from_ref(&c_object),
        false,
        timeout,
    )
    .unwrap_or_else(|e| {
        panic!(
            "seed {seed}: the unmerged program does not build: {e}\n{}",
            objects_clif(&originals, &names)
        )
    });
    assert_eq!(
        base.status,
        "exit 0",
        "seed {seed}: the unmerged program fails\n{}\n{}",
        objects_clif(&originals, &names),
        base.stdout
    );
    let original_text: String = (0..program.modules)
        .map(|m| {
            let role = if program.opaque == Some(m) {
                " (opaque: not shown to clif-merge)"
            } else {
                ""
            };
            format!(";; ---- module m{m}{role} ----\n{}", program.module_clif(m))
        })
        .collect();
    for mode in MODES {
        let shown: Vec<(String, FunctionSet)> = (0..program.modules)
            .filter(|&m| program.opaque != Some(m))
            .map(|m| (names[m].clone(), sets[m].clone()))
            .collect();
        let fail = |what: String, merged_text: &str, outputs: &str| Failure {
            summary: format!("{kind} seed {seed}, mode {}: {what}", mode_name(mode)),
            details: format!(
                "seed {seed}, mode {}: {what}\n--- the modules (CLIF; linkage in comments) ---\n\
                 {original_text}\n--- after clif-merge ---\n{merged_text}\n--- C main ---\n\
                 {c_source}\n{outputs}",
                mode_name(mode)
            ),
        };
        let (merged, decided, forwarders) = match merge(&shown, mode) {
            Merged::Refused(why) => {
                checked.refused.push(why);
                continue;
            }
            Merged::Broken(why) => {
                checked.failures.push(fail(why, "", ""));
                continue;
            }
            Merged::Built(objects, changed, groups, decided, forwarders) => {
                checked.changed += changed;
                checked.groups += groups;
                (objects, decided, forwarders)
            }
        };
        // The opaque module is linked as it is.
        let mut objects = Vec::new();
        let mut aliases = Vec::new();
        let mut object_names = Vec::new();
        let mut merged_iter = merged.into_iter().zip(forwarders);
        for m in 0..program.modules {
            if program.opaque == Some(m) {
                objects.push(originals[m].clone());
                aliases.push(Aliases::new());
            } else {
                let (object, its_aliases) =
                    merged_iter.next().expect("one object per shown module");
                objects.push(object);
                aliases.push(its_aliases);
            }
            object_names.push(names[m].clone());
        }
        let merged_text = format!(
            "--- what clif-merge decided ---\n{decided}\n{}",
            objects_clif(&objects, &object_names)
        );
        checked.builds += 1;
        let run = match build_and_run(
            &dir,
            &format!("merged-{}", mode_name(mode)),
            &objects,
            &aliases,
            &rename,
            std::slice::from_ref(&c_object),
            false,
            timeout,
        ) {
            Ok(run) => run,
            Err(e) => {
                checked.failures.push(fail(
                    format!("the merged program does not build: {}", first_line(&e)),
                    &merged_text,
                    &format!(
                        "--- error ---\n{e}\n--- output unmerged ---\n{}",
                        base.stdout
                    ),
                ));
                continue;
            }
        };
        if let Some((what, details)) = difference(&base, &run, mode == MergeMode::Safe) {
            checked.failures.push(fail(what, &merged_text, &details));
        } else if single_seed() {
            println!(
                "seed {seed}, mode {}: same output\n{original_text}\n--- after clif-merge ---\n{merged_text}\n--- output ---\n{}",
                mode_name(mode),
                run.stdout
            );
        }
    }
    checked
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

fn run_generated(
    test: &str,
    default_programs: u64,
    generate: fn(u64) -> Program,
    kind: &str,
    merge: fn(&[(String, FunctionSet)], MergeMode) -> Merged,
) {
    if !require_cc(test) {
        return;
    }
    let start = Instant::now();
    let tally = Tally::default();
    let results: Vec<Checked> = seeds(default_programs)
        .into_par_iter()
        .map(|seed| {
            let program = generate(seed);
            match catch(|| check_generated(&program, kind, &merge)) {
                Ok(checked) => checked,
                Err(panic) => Checked::panicked(&format!("{kind} seed {seed}"), panic),
            }
        })
        .collect();
    let mut failures = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    for r in results {
        Tally::add(&tally.programs, 1);
        Tally::add(&tally.builds, r.builds);
        Tally::add(&tally.changed, r.changed);
        Tally::add(&tally.groups, r.groups);
        Tally::add(&tally.refused, r.refused.len());
        for why in r.refused {
            let key: String = why.split('`').next().unwrap_or(&why).to_string();
            *reasons.entry(key).or_default() += 1;
        }
        failures.extend(r.failures);
    }
    for (why, n) in &reasons {
        println!("  refused {n}x: {why}");
    }
    assert!(
        single_seed() || tally.changed.load(Ordering::Relaxed) > 0,
        "{test}: nothing was merged: the oracle checked nothing"
    );
    conclude(test, &tally, failures, start.elapsed());
}

#[test]
fn generated_programs_link_and_run_alike_after_separate_merging() {
    run_generated(
        "generated_programs_link_and_run_alike_after_separate_merging",
        200,
        generate_program,
        "program",
        merge_separately,
    );
}

#[test]
fn generated_modules_run_alike_after_similar_merging() {
    let test = "generated_modules_run_alike_after_similar_merging";
    run_generated(
        test,
        160,
        generate_similar_module,
        "similar",
        |modules, mode| merge_similar(&modules[0].1, mode, Some(&ALIGNED_GROUPS)),
    );
    let grown = ALIGNED_GROUPS.load(Ordering::Relaxed);
    println!("{test}: {grown} aligned groups of three or more built and run");
    assert!(
        single_seed() || !require_cc(test) || grown > 0,
        "{test}: no aligned group of three or more was merged"
    );
}

// ---------------------------------------------------------------------------
// Modules that were not generated for this test: the generic harness.

/// A program of existing CLIF: the parts clif-merge sees, as modules.
struct Existing {
    label: String,
    parts: Vec<(String, FunctionSet)>,
}

/// Why functions of `parts` cannot be called from C, or `None`; and the calls.
fn harness_calls(parts: &[(String, FunctionSet)]) -> (Vec<HarnessCall>, BTreeMap<String, usize>) {
    let mut calls = Vec::new();
    let mut skipped: BTreeMap<String, usize> = BTreeMap::new();
    for (_, set) in parts {
        for (_, def) in set.iter() {
            // C may call what is visible outside the program: hidden functions
            // are the program's own (reached through the exported ones).
            if matches!(
                def.linkage,
                clif_merge::Linkage::Local | clif_merge::Linkage::Hidden
            ) {
                continue;
            }
            match CSignature::of(&def.func.signature) {
                Ok(sig) => calls.push(HarnessCall {
                    symbol: symbol_of(&def.func.name),
                    sig,
                }),
                Err(why) => *skipped.entry(why).or_default() += 1,
            }
        }
    }
    (calls, skipped)
}

/// Names the program defines, and the functions and data it needs from C.
#[allow(clippy::type_complexity)]
fn outside_names(
    parts: &[(String, FunctionSet)],
) -> Result<
    (
        HashSet<String>,
        BTreeMap<String, CSignature>,
        BTreeSet<String>,
    ),
    String,
> {
    let defined: HashSet<String> = parts
        .iter()
        .flat_map(|(_, s)| s.iter().map(|(_, d)| symbol_of(&d.func.name)))
        .collect();
    let mut imports = BTreeMap::new();
    let mut called = HashSet::new();
    for (_, set) in parts {
        for (_, def) in set.iter() {
            for (name, sig) in referenced_functions(&def.func) {
                called.insert(name.clone());
                if defined.contains(&name) || imports.contains_key(&format!("x_{name}")) {
                    continue;
                }
                let c = CSignature::of(&sig)
                    .map_err(|why| format!("imports `{name}`, which C cannot provide: {why}"))?;
                imports.insert(format!("x_{name}"), c);
            }
        }
    }
    let mut data = BTreeSet::new();
    for (_, set) in parts {
        for (_, def) in set.iter() {
            for name in referenced_symbols(&def.func) {
                if !defined.contains(&name) && !called.contains(&name) {
                    data.insert(format!("x_{name}"));
                }
            }
        }
    }
    Ok((defined, imports, data))
}

/// Links and runs an existing program unmerged (in two code layouts, to find the
/// output lines that depend on addresses) and merged by `merge` in each mode, and
/// compares the lines that do not depend on addresses.
fn check_existing(program: &Existing, merge: Merge<'_>, tally: &Tally) -> Vec<Failure> {
    let label = &program.label;
    let started = Instant::now();
    let mut failures = Vec::new();
    let (calls, skipped) = harness_calls(&program.parts);
    let (defined, imports, data) = match outside_names(&program.parts) {
        Ok(x) => x,
        Err(why) => {
            println!("{label}: skipped: {why}");
            return failures;
        }
    };
    if calls.is_empty() {
        println!("{label}: skipped: no exported function C can call");
        return failures;
    }
    for (why, n) in &skipped {
        println!("{label}: {n} exported functions not called from C: {why}");
    }
    Tally::add(&tally.programs, 1);
    let rename = |s: &str| {
        if defined.contains(s) {
            s.to_string()
        } else {
            format!("x_{s}")
        }
    };
    let dir = Scratch::new("existing");
    let c = generic_harness(&calls, &imports, &data, false);
    let c_padded = generic_harness(&calls, &imports, &data, true);
    let main = compile_c(&dir, "main", &c).expect("harness compiles");
    let main_padded = compile_c(&dir, "main_padded", &c_padded).expect("harness compiles");
    let originals: Vec<Object> = program.parts.iter().map(|(_, s)| as_object(s)).collect();
    let names: Vec<String> = program.parts.iter().map(|(n, _)| n.clone()).collect();
    // Every call ends within 1 s (an alarm); all of them well within this.
    let timeout = Duration::from_secs(300);
    let build = |tag: &str, objects: &[Object], main: &PathBuf, reverse: bool| {
        build_and_run(
            &dir,
            tag,
            objects,
            &[],
            &rename,
            std::slice::from_ref(main),
            reverse,
            timeout,
        )
    };
    let base = match build("unmerged", &originals, &main, false) {
        Ok(run) => run,
        Err(e) => {
            println!(
                "{label}: skipped: the unmerged program does not build: {}",
                e.lines().take(6).collect::<Vec<_>>().join("\n    ")
            );
            return failures;
        }
    };
    // The second layout: code and data in front, objects in the other order, each
    // with its functions in the other order.
    let reversed: Vec<Object> = originals
        .iter()
        .map(|o| o.iter().rev().cloned().collect())
        .collect();
    // Every call runs in a child: the harness itself always finishes (else, say, its
    // memory could not be mapped, and nothing would be compared).
    assert_eq!(
        base.status, "exit 0",
        "{label}: the harness of the unmerged program fails:\n{}",
        base.stdout
    );
    let moved = build("unmerged-moved", &reversed, &main_padded, true)
        .unwrap_or_else(|e| panic!("{label}: the unmerged program builds once only: {e}"));
    let (a, b): (Vec<&str>, Vec<&str>) = (
        base.stdout.lines().collect(),
        moved.stdout.lines().collect(),
    );
    assert_eq!(
        a.len(),
        b.len(),
        "{label}: the harness printed different line counts"
    );
    // Compared: the calls that print the same in both layouts and end in time
    // (SIGALRM, 14, after 1 s).
    let timed_out = |l: &str| l.ends_with(": signal 14");
    let stable: Vec<bool> = a
        .iter()
        .zip(&b)
        .map(|(x, y)| x == y && !timed_out(x))
        .collect();
    let unstable: Vec<&str> = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x != y)
        .map(|(l, _)| l.split([' ', ':']).next().unwrap_or(l))
        .collect();
    println!(
        "{label}: {} calls ({} of them crash or trap alike, {} time out: not compared), \
         {} depend on addresses (not compared){}",
        a.len(),
        a.iter()
            .filter(|l| (l.contains(": signal") || l.contains(": exit")) && !timed_out(l))
            .count(),
        a.iter().filter(|l| timed_out(l)).count(),
        unstable.len(),
        if unstable.is_empty() {
            String::new()
        } else {
            format!(
                ": {}",
                unstable
                    .iter()
                    .take(8)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        }
    );
    // The compared lines of the unmerged and a merged output: stable ones that did
    // not time out in the merged run either.
    let keep = |merged: &str| -> (Vec<String>, Vec<String>) {
        let merged: Vec<&str> = merged.lines().collect();
        (0..a.len())
            .filter(|&i| stable[i] && !merged.get(i).is_some_and(|l| timed_out(l)))
            .map(|i| {
                let got = merged.get(i).copied().unwrap_or("<missing>");
                (a[i].to_string(), got.to_string())
            })
            .unzip()
    };
    for mode in MODES {
        let summary = |what: &str| format!("{label}, mode {}: {what}", mode_name(mode));
        let (objects, decided) = match merge(&program.parts, mode) {
            Merged::Refused(why) => {
                println!("{}", summary(&format!("refused: {why}")));
                Tally::add(&tally.refused, 1);
                continue;
            }
            Merged::Broken(why) => {
                failures.push(Failure {
                    summary: summary(first_line(&why)),
                    details: why,
                });
                continue;
            }
            Merged::Built(objects, changed, groups, decided, _) => {
                Tally::add(&tally.changed, changed);
                Tally::add(&tally.groups, groups);
                (objects, decided)
            }
        };
        Tally::add(&tally.builds, 1);
        let run = match build(
            &format!("merged-{}", mode_name(mode)),
            &objects,
            &main,
            false,
        ) {
            Ok(run) => run,
            Err(e) => {
                failures.push(Failure {
                    summary: summary(&format!(
                        "the merged program does not build: {}",
                        first_line(&e)
                    )),
                    details: format!(
                        "{e}\n--- after clif-merge ---\n{}",
                        objects_clif(&objects, &names)
                    ),
                });
                continue;
            }
        };
        let (expected, got) = keep(&run.stdout);
        if got != expected || run.status != base.status || run.stdout.lines().count() != a.len() {
            let (x, y): (Vec<&str>, Vec<&str>) = (
                expected.iter().map(String::as_str).collect(),
                got.iter().map(String::as_str).collect(),
            );
            let differences = first_differences(&x, &y);
            // The functions named in differing lines, before and after.
            let mut involved: Vec<String> = Vec::new();
            for line in differences.lines() {
                if let Some(rest) = line.split('`').nth(1)
                    && let Some(name) = rest.split('#').next()
                    && !involved.contains(&name.to_string())
                {
                    involved.push(name.to_string());
                }
            }
            // With the functions they refer to.
            for object in originals.iter().chain(&objects) {
                for (func, _) in object {
                    if involved.contains(&symbol_of(&func.name)) {
                        for (callee, _) in referenced_functions(func) {
                            if !involved.contains(&callee) {
                                involved.push(callee);
                            }
                        }
                    }
                }
            }
            let show = |objects: &[Object]| -> String {
                let mut out = String::new();
                for (object, name) in objects.iter().zip(&names) {
                    for (func, linkage) in object {
                        if involved.contains(&symbol_of(&func.name)) {
                            out.push_str(&format!("; {name}, {linkage:?}\n{}\n", func.display()));
                        }
                    }
                }
                out
            };
            failures.push(Failure {
                summary: summary(&format!(
                    "the merged program prints something else: {}",
                    differences.lines().next().unwrap_or("").trim()
                )),
                details: format!(
                    "--- differing lines ---\n{differences}--- status: unmerged {}, merged {} ---\n\
                     --- the functions in differing lines and what they call, before ---\n{}\n\
                     --- after clif-merge ---\n{}\n--- what clif-merge decided ---\n{decided}",
                    base.status,
                    run.status,
                    show(&originals),
                    show(&objects),
                ),
            });
        }
    }
    println!(
        "{label}: checked in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    failures
}

/// The `.clif` files of `filetests/DIR`, sorted.
fn filetest_files(dir: &str) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("filetests")
        .join(dir);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&root)
        .map(|rd| {
            rd.filter_map(|e| e.ok().map(|e| e.path()))
                .filter(|p| p.extension().is_some_and(|e| e == "clif"))
                .collect()
        })
        .unwrap_or_default();
    files.sort();
    files
}

/// `text` without comment lines, every `%name` spelled `%t{tag}_name`.
fn prefixed(text: &str, tag: usize) -> String {
    let mut out = String::new();
    for line in text.lines() {
        if line.trim_start().starts_with(';') {
            continue;
        }
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            out.push(c);
            if c == '%'
                && chars
                    .peek()
                    .is_some_and(|n| n.is_ascii_alphanumeric() || *n == '_')
            {
                out.push_str(&format!("t{tag}_"));
            }
        }
        out.push('\n');
    }
    out
}

/// Whether a file's functions compile for the host on their own.
fn compiles_alone(set: &FunctionSet) -> Result<(), String> {
    let rename = |s: &str| format!("y_{s}");
    catch(|| compile_object(&as_object(set), &rename))
        .map_err(|panic| format!("Cranelift panics: {}", first_line(&panic)))?
        .map(|_| ())
        .map_err(|e| first_line(&e).to_string())
}

/// The filetests of `dirs` as modules: the files that only use `%names` together in
/// one (every name prefixed by its file's number), each file that uses `uN:M` names
/// on its own. Files that do not parse, or do not compile for the host, are left out
/// with a printed reason.
fn filetest_modules(dirs: &[&str]) -> Vec<(String, FunctionSet)> {
    let files: Vec<(usize, String, PathBuf)> = dirs
        .iter()
        .flat_map(|dir| filetest_files(dir).into_iter().map(move |p| (*dir, p)))
        .enumerate()
        .map(|(i, (dir, path))| {
            let name = format!(
                "{dir}/{}",
                path.file_name().unwrap_or_default().to_string_lossy()
            );
            (i + 1, name, path)
        })
        .collect();
    // (name, uses uN:M names, functions) or why the file is left out.
    let loaded: Vec<Result<(String, bool, FunctionSet), String>> = files
        .par_iter()
        .map(|(n, name, path)| {
            let text = std::fs::read_to_string(path).map_err(|e| format!("{name}: {e}"))?;
            let code = || text.lines().filter(|l| !l.trim_start().starts_with(';'));
            let user_names = code().any(|l| l.contains(" u0:") || l.contains("function u"));
            let text = if user_names {
                code().collect::<Vec<_>>().join("\n")
            } else {
                prefixed(&text, *n)
            };
            let functions = cranelift_reader::parse_functions(&text)
                .map_err(|e| format!("{name}: left out: does not parse ({e})"))?;
            let mut set = FunctionSet::new();
            for f in functions {
                let _ = set.push(f, Linkage::Local);
            }
            compiles_alone(&set)
                .map_err(|why| format!("{name}: left out: does not compile for the host: {why}"))?;
            Ok((name.clone(), user_names, set))
        })
        .collect();
    let mut batch = FunctionSet::new();
    let mut alone = Vec::new();
    for file in loaded {
        match file {
            Err(why) => println!("{why}"),
            Ok((name, true, set)) => alone.push((name, set)),
            Ok((_, false, set)) => {
                for (_, def) in set.iter() {
                    let _ = batch.push_shared(def.func.clone(), Linkage::Local);
                }
            }
        }
    }
    let mut out = vec![(format!("filetests/{{{}}} (%names)", dirs.join(",")), batch)];
    out.extend(alone);
    out
}

fn everything_exported(set: &FunctionSet) -> FunctionSet {
    let mut out = set.clone();
    for i in 0..out.len() {
        out.set_linkage(FuncIndex::new(i), Linkage::Export);
    }
    out
}

/// `module` split into `k` parts with the linkage of a real build: the roots (the
/// local functions no other function refers to) are exported, for the C `main` to
/// call; functions called from another part are hidden (`split_module`); the rest
/// stay local.
fn parts_of(label: &str, module: &FunctionSet, k: usize) -> Existing {
    let (_, parts) = split_module(module, k);
    let referenced: HashSet<String> = module
        .iter()
        .flat_map(|(_, def)| {
            let own = symbol_of(&def.func.name);
            referenced_symbols(&def.func)
                .into_iter()
                .filter(move |s| *s != own)
        })
        .collect();
    Existing {
        label: format!("{label} K={k}"),
        parts: parts
            .into_iter()
            .enumerate()
            .map(|(i, mut part)| {
                for f in (0..part.len()).map(FuncIndex::new) {
                    let def = part.get(f);
                    if def.linkage == clif_merge::Linkage::Local
                        && !referenced.contains(&symbol_of(&def.func.name))
                    {
                        part.set_linkage(f, clif_merge::Linkage::Export);
                    }
                }
                (format!("part{i}"), part)
            })
            .collect(),
    }
}

#[test]
fn separate_test_modules_link_and_run_alike() {
    let test = "separate_test_modules_link_and_run_alike";
    if !require_cc(test) {
        return;
    }
    let start = Instant::now();
    let mut programs = Vec::new();
    let bench = cranelift_reader::parse_functions(
        &generator::generate(&generator::GenConfig {
            functions: 300,
            dup_rate: 0.25,
            near_rate: 0.2,
            seed: 1,
        })
        .clif,
    )
    .expect("generated module parses");
    let mut module = FunctionSet::new();
    for f in bench {
        module.push(f, Linkage::Local).expect("unique");
    }
    for k in [2, 4, 8] {
        programs.push(parts_of("generated seed 1 (tests/separate.rs)", &module, k));
    }
    for (label, set) in filetest_modules(&["merge", "nomerge"]) {
        for k in [2, 4] {
            programs.push(parts_of(&label, &set, k));
        }
        programs.push(parts_of(
            &format!("{label} (all exported)"),
            &everything_exported(&set),
            3,
        ));
    }
    println!(
        "brotli (tests/separate.rs): not run natively: its functions are WebAssembly \
         translated by wasmtime, reading the wasm instance (vmctx, linear memory) that only \
         the wasmtime runtime provides"
    );
    let tally = Tally::default();
    let failures: Vec<Failure> = programs
        .par_iter()
        .flat_map(|p| check_existing(p, &merge_separately, &tally))
        .collect();
    assert!(
        tally.changed.load(Ordering::Relaxed) > 0,
        "{test}: nothing merged"
    );
    conclude(test, &tally, failures, start.elapsed());
}

#[test]
fn filetests_run_alike_after_similar_merging() {
    let test = "filetests_run_alike_after_similar_merging";
    if !require_cc(test) {
        return;
    }
    let start = Instant::now();
    let programs: Vec<Existing> = filetest_modules(&["similar", "merge"])
        .into_iter()
        .map(|(label, set)| Existing {
            label: format!("{label} (all exported)"),
            parts: vec![("m".to_string(), everything_exported(&set))],
        })
        .collect();
    let tally = Tally::default();
    let failures: Vec<Failure> = programs
        .par_iter()
        .flat_map(|p| {
            check_existing(
                p,
                &|parts, mode| merge_similar(&parts[0].1, mode, None),
                &tally,
            )
        })
        .collect();
    assert!(
        tally.changed.load(Ordering::Relaxed) > 0,
        "{test}: nothing merged"
    );
    conclude(test, &tally, failures, start.elapsed());
}

// ---------------------------------------------------------------------------
// The `MergingModule` arm: every module through the wrapper, as a compiler does.

/// The wrapper's configurations: both compile modes in both merge modes, each
/// module on its own, and merged across the program's modules
/// (`Separate::Program`: summaries of machine code or of IR, one plan, each module
/// finished with its decisions).
const MODULE_CONFIGS: [(CompileMode, MergeMode, Separate); 8] = [
    (CompileMode::AtDefine, MergeMode::Safe, Separate::No),
    (CompileMode::AtDefine, MergeMode::All, Separate::No),
    (CompileMode::AtFinish, MergeMode::Safe, Separate::No),
    (CompileMode::AtFinish, MergeMode::All, Separate::No),
    (CompileMode::AtDefine, MergeMode::Safe, Separate::Program),
    (CompileMode::AtDefine, MergeMode::All, Separate::Program),
    (CompileMode::AtFinish, MergeMode::Safe, Separate::Program),
    (CompileMode::AtFinish, MergeMode::All, Separate::Program),
];

/// Whether the wrapper also merges across the program's modules.
#[derive(Copy, Clone, PartialEq, Eq)]
enum Separate {
    /// Each module on its own.
    No,
    /// Summarized, planned together, finished with the decisions.
    Program,
}

fn config_name(compile: CompileMode, mode: MergeMode, separate: Separate) -> String {
    let compile = match compile {
        CompileMode::AtDefine => "at-define",
        CompileMode::AtFinish => "at-finish",
        _ => unreachable!("a compile mode this test does not run"),
    };
    let separate = match separate {
        Separate::No => "",
        Separate::Program => "-separate",
    };
    format!("{compile}-{}{separate}", mode_name(mode))
}

/// What the wrapper made of a program's modules.
enum Wrapped {
    /// The object files, how many functions were merged, and what it decided.
    Built(Vec<Vec<u8>>, usize, String),
    /// It refused (an error that is not Cranelift's): not a miscompile.
    Refused(String),
    /// It panicked, or Cranelift (the verifier included) rejected what it was given.
    Broken(String),
}

/// Builds each of `objects` (module `names[i]`) through its own
/// `MergingModule<ObjectModule>` with `options`: declared, defined (functions, data,
/// machine code) and finished with `finish_object`, as a compiler would.
fn merge_through_module(
    objects: &[ObjectSpec],
    names: &[String],
    options: &ModuleMergeOptions,
    separate: Separate,
) -> Wrapped {
    let rename = |s: &str| s.to_string();
    let mut built = Vec::new();
    let mut merged = 0;
    let mut decided = String::new();
    // Stage 1 for every module first when merging across modules, then stage 2.
    let mut decisions: Vec<Option<ModuleDecisions>> = vec![None; objects.len()];
    if separate == Separate::Program {
        let summaries = catch(|| -> Result<Vec<Summary>, String> {
            let mut summaries = Vec::new();
            for (spec, name) in objects.iter().zip(names) {
                let inner = object_module()?;
                let mut module = MergingModule::new(inner, options.clone());
                define_object(&mut module, spec, &rename).map_err(|e| e.message)?;
                let summary = module.summarize(name).map_err(|e| e.to_string())?;
                let read = Summary::from_bytes(&summary.to_bytes()).map_err(|e| e.to_string())?;
                summaries.push(read);
            }
            Ok(summaries)
        });
        let summaries = match summaries {
            Err(panic) => return Wrapped::Broken(format!("summarizing panicked: {panic}")),
            Ok(Err(why)) => return Wrapped::Refused(format!("summarizing: {why}")),
            Ok(Ok(summaries)) => summaries,
        };
        let plan = match catch(|| plan_program(&summaries)) {
            Err(panic) => return Wrapped::Broken(format!("planning panicked: {panic}")),
            Ok(Err(e)) => return Wrapped::Refused(format!("planning: {e}")),
            Ok(Ok(plan)) => plan,
        };
        for d in plan.decisions {
            if let Some(i) = names.iter().position(|n| *n == d.module) {
                decisions[i] = Some(d);
            }
        }
    }
    for ((spec, name), decisions) in objects.iter().zip(names).zip(decisions) {
        let result = catch(|| -> Result<(Vec<u8>, MergeReport), DefineError> {
            let inner = object_module().map_err(|message| DefineError {
                message,
                compilation: false,
            })?;
            let mut module = MergingModule::new(inner, options.clone());
            define_object(&mut module, spec, &rename)?;
            if let Some(decisions) = decisions.clone() {
                module = module.with_decisions(decisions);
            }
            let (product, report) = module.finish_object().map_err(|e| DefineError {
                message: format!("finish_object: {e:?}"),
                compilation: matches!(e, ModuleError::Compilation(_)),
            })?;
            // An object the wrapper finished but that cannot be written is broken,
            // not a refusal.
            let bytes = product.emit().map_err(|e| DefineError {
                message: format!("emitting the object: {e}"),
                compilation: true,
            })?;
            Ok((bytes, report))
        });
        match result {
            Err(panic) => return Wrapped::Broken(format!("module {name}: panicked: {panic}")),
            Ok(Err(e)) if e.compilation => {
                return Wrapped::Broken(format!("module {name}: {}", e.message));
            }
            Ok(Err(e)) => return Wrapped::Refused(format!("module {name}: {}", e.message)),
            Ok(Ok((bytes, report))) => {
                merged += report.merged() + report.cross_module.len();
                for (dup, kept, action) in &report.actions {
                    decided.push_str(&format!("{name}: {action} {dup} -> {kept}\n"));
                }
                for (function, to, action) in &report.cross_module {
                    let action = action.as_str();
                    decided.push_str(&format!("{name}: {action} {function} -> {to}\n"));
                }
                built.push(bytes);
            }
        }
    }
    Wrapped::Built(built, merged, decided)
}

/// Writes `objects` to `dir` and links them with `c_object`; runs the executable.
fn link_objects(
    dir: &Scratch,
    tag: &str,
    objects: &[Vec<u8>],
    c_object: &Path,
) -> Result<Run, String> {
    let mut paths = vec![c_object.to_path_buf()];
    for (i, bytes) in objects.iter().enumerate() {
        paths.push(dir.write(&format!("{tag}-{i}.o"), bytes));
    }
    // The programs run in milliseconds; a merged one still running after 10 s hangs.
    link_and_run(dir, tag, &paths, Duration::from_secs(10))
}

/// Builds `program` unmerged (each module through a plain `ObjectModule`) and
/// through the wrapper in every configuration, runs each, and compares.
fn check_through_module(program: &Program) -> Checked {
    let seed = program.seed;
    let mut checked = Checked::default();
    let dir = Scratch::new(&format!("module{seed}"));
    let c_source = program.c_main();
    let c_object = compile_c(&dir, "main", &c_source)
        .unwrap_or_else(|e| panic!("seed {seed}: the generated C does not compile: {e}"));
    let objects: Vec<ObjectSpec> = (0..program.modules)
        .map(|m| program.module_object(m))
        .collect();
    let names: Vec<String> = (0..program.modules).map(Program::module_name).collect();
    let original_text: String = (0..program.modules)
        .map(|m| format!(";; ---- module m{m} ----\n{}", program.module_clif(m)))
        .collect();
    let unmerged: Vec<Vec<u8>> = objects
        .iter()
        .map(|spec| compile_object_spec(spec, &|s| s.to_string()))
        .collect::<Result<_, _>>()
        .unwrap_or_else(|e| {
            panic!("seed {seed}: the unmerged program does not compile: {e}\n{original_text}")
        });
    let base = link_objects(&dir, "unmerged", &unmerged, &c_object).unwrap_or_else(|e| {
        panic!("seed {seed}: the unmerged program does not build: {e}\n{original_text}")
    });
    assert_eq!(
        base.status, "exit 0",
        "seed {seed}: the unmerged program fails\n{original_text}\n{}",
        base.stdout
    );
    // Compile-at-define also without compiling duplicates
    // (`with_compile_duplicates(false)`): equal functions then share one compile.
    let configs = MODULE_CONFIGS
        .iter()
        .flat_map(|&(compile, mode, separate)| {
            let both: &[bool] = match compile {
                CompileMode::AtDefine => &[true, false],
                _ => &[true],
            };
            both.iter().map(move |&d| (compile, mode, separate, d))
        });
    for (compile, mode, separate, duplicates) in configs {
        let mut config = config_name(compile, mode, separate);
        if !duplicates {
            config.push_str("-no-duplicates");
        }
        let options = ModuleMergeOptions::default()
            .with_compile(compile)
            .with_compile_duplicates(duplicates)
            .with_merge(MergeOptions::default().with_mode(mode));
        let fail = |what: String, decided: &str, outputs: &str| Failure {
            summary: format!("module seed {seed}, {config}: {what}"),
            details: format!(
                "seed {seed}, MergingModule {config}: {what}\n--- the modules (CLIF; linkage, \
                 machine code and data in comments) ---\n{original_text}\n--- what the wrapper \
                 decided ---\n{decided}\n--- C main ---\n{c_source}\n{outputs}"
            ),
        };
        let (merged, decided) = match merge_through_module(&objects, &names, &options, separate) {
            Wrapped::Refused(why) => {
                checked.refused.push(format!("seed {seed} {config}: {why}"));
                continue;
            }
            Wrapped::Broken(why) => {
                checked.failures.push(fail(why, "", ""));
                continue;
            }
            Wrapped::Built(merged, changed, decided) => {
                checked.changed += changed;
                checked.by_config.push((config.clone(), changed));
                (merged, decided)
            }
        };
        checked.builds += 1;
        let run = match link_objects(&dir, &format!("merged-{config}"), &merged, &c_object) {
            Ok(run) => run,
            Err(e) => {
                checked.failures.push(fail(
                    format!("the merged program does not build: {}", first_line(&e)),
                    &decided,
                    &format!(
                        "--- error ---\n{e}\n--- output unmerged ---\n{}",
                        base.stdout
                    ),
                ));
                continue;
            }
        };
        if let Some((what, details)) = difference(&base, &run, mode == MergeMode::Safe) {
            checked.failures.push(fail(what, &decided, &details));
        } else if single_seed() {
            println!(
                "seed {seed}, {config}: same output\n{original_text}\n--- what the wrapper \
                 decided ---\n{decided}\n--- output ---\n{}",
                run.stdout
            );
        }
    }
    checked
}

#[test]
fn generated_programs_link_and_run_alike_through_merging_module() {
    let test = "generated_programs_link_and_run_alike_through_merging_module";
    if !require_cc(test) {
        return;
    }
    // The machine code given with `define_function_bytes` is x86_64's.
    let machine_code = cfg!(target_arch = "x86_64");
    if !machine_code {
        eprintln!();
        eprintln!("==================================================================");
        eprintln!("  {test}: functions given as machine code (define_function_bytes)");
        eprintln!("  are NOT generated: their bytes are x86_64 code, and this host is not");
        eprintln!("==================================================================");
        eprintln!();
    }
    let start = Instant::now();
    let programs: Vec<Program> = seeds(300)
        .into_iter()
        .map(|seed| generate_address_program(seed, machine_code))
        .collect();
    // What the programs exercise, counted so that a generator that stopped making
    // some of it fails here instead of checking less in silence.
    let count = |what: &dyn Fn(&Body) -> bool| -> usize {
        programs
            .iter()
            .flat_map(|p| &p.functions)
            .filter(|f| what(&f.body))
            .count()
    };
    let exercised = [
        (
            "func_addr getters",
            count(&|b| matches!(b, Body::AddrOf(_))),
        ),
        (
            "symbol_value getters",
            count(&|b| matches!(b, Body::SymAddrOf(_))),
        ),
        (
            "data getters",
            count(&|b| matches!(b, Body::LoadAddr { .. })),
        ),
        (
            "machine-code getters",
            count(&|b| matches!(b, Body::Bytes(BytesCode::AddrRet, _))),
        ),
        (
            "machine-code jumps",
            count(&|b| matches!(b, Body::Bytes(BytesCode::Jump, _))),
        ),
        (
            "address comparisons in CLIF",
            count(&|b| matches!(b, Body::AddrEq(..) | Body::MixedEq(..))),
        ),
        (
            "functions passed an address",
            count(&|b| matches!(b, Body::IsAddr { .. } | Body::CallPtr { .. })),
        ),
        (
            "addresses passed by CLIF",
            count(&|b| matches!(b, Body::PassAddr { .. })),
        ),
        (
            "data objects",
            programs.iter().map(|p| p.data.len()).sum::<usize>(),
        ),
    ];
    println!(
        "{test}: the programs hold {}",
        exercised
            .iter()
            .map(|(what, n)| format!("{n} {what}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if !single_seed() {
        for (what, n) in &exercised {
            let machine = what.starts_with("machine-code");
            assert!(
                *n > 0 || (machine && !machine_code),
                "{test}: the generated programs hold no {what}"
            );
        }
    }
    let tally = Tally::default();
    let results: Vec<Checked> = programs
        .par_iter()
        .map(|program| {
            let seed = program.seed;
            catch(|| check_through_module(program))
                .unwrap_or_else(|panic| Checked::panicked(&format!("module seed {seed}"), panic))
        })
        .collect();
    let mut failures = Vec::new();
    let mut reasons: BTreeMap<String, usize> = BTreeMap::new();
    // Per configuration: builds, functions merged.
    let mut configs: BTreeMap<String, (usize, usize)> = MODULE_CONFIGS
        .iter()
        .map(|&(compile, mode, separate)| (config_name(compile, mode, separate), (0, 0)))
        .collect();
    for r in results {
        Tally::add(&tally.programs, 1);
        Tally::add(&tally.builds, r.builds);
        Tally::add(&tally.changed, r.changed);
        Tally::add(&tally.refused, r.refused.len());
        for (config, merged) in r.by_config {
            let entry = configs.entry(config).or_default();
            entry.0 += 1;
            entry.1 += merged;
        }
        for why in r.refused {
            *reasons.entry(why).or_default() += 1;
        }
        failures.extend(r.failures);
    }
    for (why, n) in &reasons {
        println!("  refused {n}x: {why}");
    }
    for (config, (builds, merged)) in &configs {
        println!("  {config}: {builds} builds, {merged} functions merged");
    }
    conclude(test, &tally, failures, start.elapsed());
    // After the failures: a configuration that merged nothing checked nothing.
    for (config, (_, merged)) in &configs {
        assert!(
            single_seed() || *merged > 0,
            "{test}: nothing was merged in {config}: the oracle checked nothing there"
        );
    }
}

/// One function keeps one address across modules in every mode: two modules each
/// have a copy of one function, local or hidden, take its address at two sites
/// (two getters and a comparison), and the getters of one kind are equal across
/// the modules. Merging them while each copy keeps its own address (a thunk: an
/// object file cannot alias another object's symbol) made `is_b(get_b())` false
/// in mode all. Every getter kind, through `MergingModule` in every configuration
/// and, where no getter reads a data object, through the library's separate
/// pipeline and through the `clif-merge` binary's `summarize`, `plan` and `apply`.
#[test]
fn one_function_keeps_one_address_across_modules() {
    let test = "one_function_keeps_one_address_across_modules";
    if !require_cc(test) {
        return;
    }
    let start = Instant::now();
    let tally = Tally::default();
    let mut failures = Vec::new();
    for seed in 0..24 {
        let program = twins_across_modules_program(seed);
        // The library's pipeline builds functions only: data objects go through
        // the wrapper alone.
        let separately = program.data.is_empty().then(|| {
            [
                check_generated(&program, "twins", &merge_separately),
                check_generated(&program, "twins-cli", &merge_through_cli),
            ]
        });
        Tally::add(&tally.programs, 1);
        for checked in separately
            .into_iter()
            .flatten()
            .chain([check_through_module(&program)])
        {
            Tally::add(&tally.builds, checked.builds);
            Tally::add(&tally.changed, checked.changed);
            Tally::add(&tally.refused, checked.refused.len());
            failures.extend(checked.failures);
        }
    }
    let merged = tally.changed.load(Ordering::Relaxed);
    conclude(test, &tally, failures, start.elapsed());
    assert!(
        merged > 0,
        "{test}: nothing was merged: nothing was checked"
    );
}

/// A C archive member that defines a function of its own under the name the
/// promotion of `a`'s local `%h_x` used to get, `h_x_a_promoted`, and calls it:
/// `weak` as a C++ inline function is (the merged build's hidden definition used to
/// win silently and take the member's calls), or a plain definition (the merged
/// build used to fail to link: two definitions).
fn outside_promoted_name_c(weak: bool) -> String {
    let attribute = if weak { "__attribute__((weak)) " } else { "" };
    format!(
        "#include <stdint.h>
{attribute}int64_t h_x_a_promoted(int64_t x) {{ return x + 1000; }}
int64_t c_entry(int64_t x) {{ return h_x_a_promoted(x) * 2; }}
"
    )
}

/// Modules `a` and `b` each have a local `%h_x`, equal, called by an exported entry
/// point: the plan promotes `a`'s and removes `b`'s. The program also links a static
/// archive whose member (pulled in for `c_entry`) defines and calls its own
/// `h_x_a_promoted`, a name no summary mentions. The merged program must print what
/// the unmerged one does: the promoted name must be one no outside object spells.
#[test]
fn promoted_names_do_not_capture_an_archive_member_function() {
    let test = "promoted_names_do_not_capture_an_archive_member_function";
    if !require_cc(test) {
        return;
    }
    let module = |m: &str, k: i64| -> (String, FunctionSet) {
        let text = format!(
            "function %h_x(i64) -> i64 system_v {{
block0(v0: i64):
    v1 = iconst.i64 7
    v2 = imul v0, v1
    v3 = iconst.i64 3
    v4 = iadd v2, v3
    return v4
}}

function %{m}_entry(i64) -> i64 system_v {{
    fn0 = %h_x(i64) -> i64 system_v
block0(v0: i64):
    v1 = call fn0(v0)
    v2 = iconst.i64 {k}
    v3 = iadd v1, v2
    return v3
}}
"
        );
        let mut set = FunctionSet::new();
        for f in cranelift_reader::parse_functions(&text).expect("the module parses") {
            let linkage = if f.name.to_string() == "%h_x" {
                Linkage::Local
            } else {
                Linkage::Export
            };
            set.push(f, linkage).expect("unique names");
        }
        (m.to_string(), set)
    };
    let modules = [module("a", 1), module("b", 2)];
    let main_c = "#include <stdio.h>
#include <stdint.h>
int64_t a_entry(int64_t);
int64_t b_entry(int64_t);
int64_t c_entry(int64_t);
int main(void) {
    int64_t xs[] = {0, 1, 5, -3};
    for (int i = 0; i < 4; i++)
        printf(\"a %lld b %lld c %lld\\n\", (long long)a_entry(xs[i]),
               (long long)b_entry(xs[i]), (long long)c_entry(xs[i]));
    return 0;
}
";
    let originals: Vec<Object> = modules.iter().map(|(_, s)| as_object(s)).collect();
    let same = |s: &str| s.to_string();
    let timeout = Duration::from_secs(60);
    for weak in [true, false] {
        let dir = Scratch::new("promoted-name");
        let main = compile_c(&dir, "main", main_c).expect("main compiles");
        let member = compile_c(&dir, "member", &outside_promoted_name_c(weak))
            .expect("the archive member compiles");
        let archive = dir.path().join("libmember.a");
        let ar = std::process::Command::new("ar")
            .arg("rcs")
            .arg(&archive)
            .arg(&member)
            .output()
            .expect("`ar` runs");
        assert!(
            ar.status.success(),
            "ar rcs: {}",
            String::from_utf8_lossy(&ar.stderr)
        );
        // The archive after `main.o`, which needs its `c_entry`.
        let extra = [main, archive];
        let base = build_and_run(
            &dir,
            "unmerged",
            &originals,
            &[],
            &same,
            &extra,
            false,
            timeout,
        )
        .expect("the unmerged program builds");
        assert_eq!(base.status, "exit 0", "unmerged (weak: {weak})");
        assert!(
            base.stdout.starts_with("a 4 b 5 c 2000\n"),
            "the member calls its own function:\n{}",
            base.stdout
        );
        for mode in MODES {
            let label = format!("weak: {weak}, {}", mode_name(mode));
            let Merged::Built(objects, _, _, decided, _) = merge_separately(&modules, mode) else {
                panic!("{label}: the separate merge did not build");
            };
            let merged =
                build_and_run(&dir, "merged", &objects, &[], &same, &extra, false, timeout)
                    .unwrap_or_else(|e| panic!("{label}: the merged program does not build: {e}"));
            assert_eq!(
                (&merged.stdout, &merged.status),
                (&base.stdout, &base.status),
                "{label}: merging changed what the program does\n{decided}"
            );
            let options = MergeOptions::default().with_mode(mode);
            let summaries: Vec<Summary> = modules
                .iter()
                .map(|(name, set)| summarize(set, name, &options))
                .collect();
            let promoted = format!(
                "a: promote %h_x -> a::%h_x_a_promoted_{:016x}\n",
                program_hash(&summaries)
            );
            assert!(
                decided.contains(&promoted),
                "{label}: `a`'s %h_x is promoted ({promoted}):\n{decided}"
            );
        }
    }
}
