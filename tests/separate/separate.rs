//! Separate compilation (summaries, whole-program plan, per-module transform) finds
//! exactly what one run over the whole module finds.
//!
//! A module is split into K parts round-robin with the linkage a real build has: a
//! local function referred to from another part becomes hidden, in the whole module
//! too. Each part is summarized on its own (after its own merge), the program is
//! planned from the summaries, and:
//!
//! - the classes the parts' own merges found, joined with the classes of the plan,
//!   must be exactly the classes of the whole module;
//! - the *merges* must be the whole module's: the functions that lose their own
//!   code (removed, aliased or thunked) in the parts' own merges and by the plan's
//!   decisions are exactly those the single run over the parts put together (in
//!   module order, so that "the first defined" means the same) removes, aliases or
//!   thunks.
//!
//! Then every part applies its decisions, every output function passes the
//! verifier, and the parts put together run like the original program in the
//! sandboxed interpreter. The plan must not depend on the order of the summaries,
//! and summaries go through their file format.

#[path = "../support/corpus_program.rs"]
mod corpus_program;
#[path = "../../benches/merge_bench/generator.rs"]
#[allow(dead_code)]
mod generator;
#[path = "../support/skip.rs"]
mod skip;

use clif_merge::Linkage;
use clif_merge::separate::{
    DecisionAction, Summary, apply_decisions, plan_program, program_hash, summarize,
};
use clif_merge::testing::split_module;
use clif_merge::testing::{expand_inputs, load};
use clif_merge::validate::validate_program;
use clif_merge::{FuncIndex, FunctionSet, MergeOptions, merge_functions};
use corpus_program::load_corpus_program;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::settings::{self, Configurable, Flags};
use cranelift_codegen::verify_function;
use std::collections::{BTreeSet, HashMap};
use std::path::Path;

fn parse(text: &str) -> FunctionSet {
    let mut set = FunctionSet::new();
    for f in cranelift_reader::parse_functions(text).expect("parses") {
        set.push(f, Linkage::Local).expect("unique");
    }
    set
}

/// Classes as sets of names.
type Classes = BTreeSet<BTreeSet<String>>;

/// Joins groups of names into classes (union-find over names).
fn join(groups: impl IntoIterator<Item = Vec<String>>) -> Classes {
    let mut parent: HashMap<String, String> = HashMap::new();
    fn find(parent: &mut HashMap<String, String>, x: &str) -> String {
        let p = parent.get(x).cloned().unwrap_or_else(|| x.to_string());
        if p == x {
            return p;
        }
        let root = find(parent, &p);
        parent.insert(x.to_string(), root.clone());
        root
    }
    for group in groups {
        for name in &group {
            parent.entry(name.clone()).or_insert_with(|| name.clone());
        }
        for pair in group.windows(2) {
            let (a, b) = (find(&mut parent, &pair[0]), find(&mut parent, &pair[1]));
            if a != b {
                parent.insert(a, b);
            }
        }
    }
    let names: Vec<String> = parent.keys().cloned().collect();
    let mut classes: HashMap<String, BTreeSet<String>> = HashMap::new();
    for name in names {
        let root = find(&mut parent, &name);
        classes.entry(root).or_default().insert(name);
    }
    classes.into_values().filter(|c| c.len() > 1).collect()
}

fn class_names(module: &FunctionSet, classes: &[Vec<FuncIndex>]) -> Vec<Vec<String>> {
    classes
        .iter()
        .map(|c| c.iter().map(|&f| module.display_name(f)).collect())
        .collect()
}

/// The names of the functions the merge of `module` leaves without code of their
/// own (removed, aliased or thunked).
fn merged_away(module: &FunctionSet, options: &MergeOptions) -> BTreeSet<String> {
    merge_functions(module, options)
        .plan
        .decisions
        .iter()
        .map(|d| module.display_name(d.function))
        .collect()
}

/// Runs the three stages on `module` split into `k` parts and checks them against
/// the whole-module run. Returns (classes, functions merged away, of them across
/// modules).
fn check_separate(name: &str, module: &FunctionSet, k: usize, run: bool) -> (usize, usize, usize) {
    let options = MergeOptions::default();
    let (whole, parts) = split_module(module, k);
    let expected = join(class_names(
        &whole,
        &merge_functions(&whole, &options).plan.classes,
    ));
    // The whole program with the functions in module order (part0's first, ...),
    // as the plan orders them.
    let mut in_module_order = FunctionSet::new();
    for part in &parts {
        for (f, def) in part.iter() {
            let index = in_module_order
                .push_shared(def.func.clone(), def.linkage)
                .expect("unique names");
            if part.address_taken_outside(f) {
                in_module_order.mark_address_taken(index);
            }
        }
    }
    let expected_merges = merged_away(&in_module_order, &options);

    let summaries: Vec<Summary> = parts
        .iter()
        .enumerate()
        .map(|(i, part)| summarize(part, &format!("part{i}"), &options))
        .collect();
    // Through the file format, as the CLI does.
    let summaries: Vec<Summary> = summaries
        .iter()
        .map(|s| Summary::from_bytes(&s.to_bytes()).expect("round trip"))
        .collect();
    let mut reversed = summaries.clone();
    reversed.reverse();
    let plan = plan_program(&summaries).expect("plan");
    let plan_reversed = plan_program(&reversed).expect("plan");
    assert_eq!(
        format!("{:?}", plan.decisions),
        format!("{:?}", plan_reversed.decisions),
        "{name} K={k}: the plan depends on the order of the summaries"
    );

    let own = parts
        .iter()
        .flat_map(|part| class_names(part, &merge_functions(part, &options).plan.classes));
    let program = plan
        .classes
        .iter()
        .map(|c| c.iter().map(|q| q.name.clone()).collect::<Vec<_>>());
    let found = join(own.chain(program));
    if found != expected {
        let missing: Vec<_> = expected.difference(&found).take(3).collect();
        let extra: Vec<_> = found.difference(&expected).take(3).collect();
        panic!("{name} K={k}: classes differ\n  whole only: {missing:?}\n  split only: {extra:?}");
    }
    // The same merges: what the parts' own merges and the plan take away.
    let cross_module: BTreeSet<String> = plan
        .decisions
        .iter()
        .flat_map(|m| &m.decisions)
        .filter(|d| d.action != DecisionAction::Promote)
        .map(|d| d.function.clone())
        .collect();
    let merges: BTreeSet<String> = parts
        .iter()
        .flat_map(|part| merged_away(part, &options))
        .chain(cross_module.iter().cloned())
        .collect();
    if merges != expected_merges {
        let missing: Vec<_> = expected_merges.difference(&merges).take(5).collect();
        let extra: Vec<_> = merges.difference(&expected_merges).take(5).collect();
        panic!(
            "{name} K={k}: merges differ ({} whole, {} split)\n  whole only: {missing:?}\n  split only: {extra:?}",
            expected_merges.len(),
            merges.len()
        );
    }

    // Stage 3, then the parts together must behave like the original. Verified
    // for the host with frame pointers kept, as some filetests' instructions
    // (`get_return_address`) need an ISA.
    let mut flags = settings::builder();
    flags
        .set("preserve_frame_pointers", "true")
        .expect("preserve_frame_pointers");
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("a Cranelift backend for the host")
        .finish(Flags::new(flags))
        .expect("host ISA");
    let mut program = FunctionSet::new();
    // The functions the program knows under another name: promoted
    // representatives, and aliases (which name another function's code).
    let mut renamed: Vec<(String, String)> = Vec::new();
    for (part, decisions) in parts.iter().zip(&plan.decisions) {
        let applied = apply_decisions(part, &options, decisions).expect("apply");
        for alias in &applied.aliases {
            renamed.push((alias.name.to_string(), alias.of.to_string()));
        }
        renamed.extend(
            applied
                .decided
                .iter()
                .flatten()
                .filter(|d| d.decision.action == DecisionAction::Promote)
                .map(|d| (d.name.to_string(), d.decision.to.clone())),
        );
        let out = applied.functions;
        for (_, def) in out.iter() {
            if let Err(e) = verify_function(&def.func, &*isa) {
                panic!("{name} K={k}: {} fails the verifier: {e}", def.func.name);
            }
            program
                .push_shared(def.func.clone(), def.linkage)
                .expect("unique names");
        }
    }
    let decided = cross_module.len();
    if !run {
        println!(
            "{name} K={k}: {} classes, {} merges, {decided} across modules",
            expected.len(),
            merges.len()
        );
        return (expected.len(), merges.len(), decided);
    }
    let renamed = renamed
        .iter()
        .map(|(from, to)| (from.as_str(), to.as_str()));
    let report = validate_program(&whole, &program, renamed).expect("the validator crashed");
    assert!(
        report.mismatches.is_empty(),
        "{name} K={k}: {:?}",
        report.mismatches
    );
    println!(
        "{name} K={k}: {} classes, {} merges, {decided} across modules; {}",
        expected.len(),
        merges.len(),
        report.summary()
    );
    (expected.len(), merges.len(), decided)
}

#[test]
fn separate_compilation_finds_the_whole_module_classes_on_generated_modules() {
    let seed = 1;
    let module = parse(
        &generator::generate(&generator::GenConfig {
            functions: 300,
            dup_rate: 0.25,
            near_rate: 0.2,
            seed,
        })
        .clif,
    );
    let found: Vec<(usize, usize, usize, usize)> = [1, 2, 4, 8]
        .into_iter()
        .map(|k| {
            // Running is the slow part (loops): once per module.
            let (classes, merges, across) =
                check_separate(&format!("generated seed {seed}"), &module, k, k == 4);
            (k, classes, merges, across)
        })
        .collect();
    // Snapshot of (K, whole-module classes, functions merged away, of them across
    // modules) for this seed: classes and merges are the same for every K (each
    // checked against the whole module); with one part nothing crosses modules.
    // Changes when the generator, the comparator or the split changes; update
    // deliberately.
    assert_eq!(
        found,
        [
            (1, 49, 75, 0),
            (2, 49, 75, 29),
            (4, 49, 75, 52),
            (8, 49, 75, 65)
        ],
        "(K, classes, merges, across modules), generated seed {seed}"
    );
}

#[test]
fn separate_compilation_finds_the_whole_module_classes_on_filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/merge");
    let mut files = expand_inputs(&[root]).expect("filetests");
    files.sort();
    for file in &files {
        // Every filetest loads (tests/cli/filetests.rs runs them all): one that does
        // not is a failure here too, not a file to skip.
        let loaded = load(std::slice::from_ref(file))
            .unwrap_or_else(|e| panic!("{}: does not load: {e}", file.display()));
        // Files that set linkage or mode through arguments keep their defaults here.
        for k in [1, 2, 4, 8] {
            check_separate(&file.display().to_string(), &loaded.functions, k, true);
        }
    }
}

#[test]
fn separate_compilation_finds_the_whole_module_classes_on_a_corpus_program() {
    let Some(module) = load_corpus_program("brotli", "separate") else {
        return;
    };
    for k in [1, 2, 4, 8] {
        check_separate("brotli", &module, k, true);
    }
}

/// Flipping any single byte of a summary or decisions file is caught (the
/// checksum), so a corrupted file can never make a wrong merge.
#[test]
fn every_corrupted_byte_of_a_summary_is_refused() {
    let module = parse(
        "
function %f(i32) -> i32 {
block0(v0: i32):
    v1 = iconst.i32 7
    v2 = imul v0, v1
    return v2
}
function %g(i32) -> i32 {
    fn0 = %f(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    return v1
}
",
    );
    let summary = summarize(&module, "m", &MergeOptions::default());
    let bytes = summary.to_bytes();
    assert_eq!(Summary::from_bytes(&bytes).as_ref(), Ok(&summary));
    for i in 0..bytes.len() {
        for flip in [1u8, 0x80] {
            let mut corrupt = bytes.clone();
            corrupt[i] ^= flip;
            assert!(
                Summary::from_bytes(&corrupt).is_err(),
                "flipping bit {flip:#x} of byte {i} went unnoticed"
            );
        }
    }
    let plan = plan_program(&[summary]).expect("plan");
    let decisions = &plan.decisions[0];
    let bytes = decisions.to_bytes();
    for i in 0..bytes.len() {
        let mut corrupt = bytes.clone();
        corrupt[i] ^= 1;
        assert!(clif_merge::separate::ModuleDecisions::from_bytes(&corrupt).is_err());
    }
}

/// Functions that read their return address (or frame or stack pointer) are
/// never made thunks across modules, nor promoted (a finish may keep the old
/// name as a thunk); a member that can be removed still is.
#[test]
fn readers_of_machine_state_are_never_thunked_across_modules() {
    let reader = |name: &str| {
        format!(
            "function %{name}(i64) -> i64 {{\nblock0(v0: i64):\n    v1 = get_return_address.i64\n    v2 = iadd v0, v1\n    return v2\n}}\n"
        )
    };
    let module = |names: &[(&str, Linkage)]| -> FunctionSet {
        let text = format!(
            "set preserve_frame_pointers=true\ntarget x86_64\n{}",
            names.iter().map(|(n, _)| reader(n)).collect::<String>()
        );
        let mut set = FunctionSet::new();
        let functions = cranelift_reader::parse_test(&text, Default::default())
            .expect("parses")
            .functions;
        for ((func, _), (_, linkage)) in functions.into_iter().zip(names) {
            set.push(func, *linkage).expect("unique");
        }
        set
    };
    let options = MergeOptions::default();
    let plan = |modules: &[(&str, FunctionSet)]| {
        let summaries: Vec<Summary> = modules
            .iter()
            .map(|(name, set)| summarize(set, name, &options))
            .collect();
        plan_program(&summaries).expect("plans")
    };
    // Exported in two modules: the second would be a thunk.
    let exported = plan(&[
        ("a", module(&[("f", Linkage::Export)])),
        ("b", module(&[("g", Linkage::Export)])),
    ]);
    assert_eq!(exported.classes.len(), 1, "{:?}", exported.classes);
    assert_eq!(exported.counts().merged(), 0, "{:?}", exported.decisions);
    // Local in two modules: the representative would be promoted.
    let local = plan(&[
        ("a", module(&[("f", Linkage::Local)])),
        ("b", module(&[("g", Linkage::Local)])),
    ]);
    assert_eq!(local.counts().promoted, 0, "{:?}", local.decisions);
    assert_eq!(local.counts().merged(), 0, "{:?}", local.decisions);
    // Hidden in one module, local in another: the local one is removed.
    let hidden = plan(&[
        ("a", module(&[("f", Linkage::Hidden)])),
        ("b", module(&[("g", Linkage::Local)])),
    ]);
    assert_eq!(hidden.counts().removed, 1, "{:?}", hidden.decisions);
    assert_eq!(hidden.counts().thunked, 0, "{:?}", hidden.decisions);
}

/// Module `m`: a local `%helper` multiplying by `mul`, and `%entry_N` (exported;
/// N the bytes of `m` in hex) calling it and adding `k`.
fn helper_module(m: &str, mul: i32, k: i32) -> Summary {
    let entry: String = m.bytes().map(|b| format!("{b:02x}")).collect();
    let mut module = parse(&format!(
        "
function %helper(i32) -> i32 {{
block0(v0: i32):
    v1 = iconst.i32 {mul}
    v2 = imul v0, v1
    return v2
}}
function %entry_{entry}(i32) -> i32 {{
    fn0 = %helper(i32) -> i32
block0(v0: i32):
    v1 = call fn0(v0)
    v2 = iconst.i32 {k}
    v3 = iadd v1, v2
    return v3
}}
"
    ));
    module.set_linkage(FuncIndex::new(1), Linkage::Export);
    summarize(&module, m, &MergeOptions::default())
}

/// The names the plan of `summaries` promotes to, sorted.
fn promoted_names(summaries: &[Summary]) -> Vec<String> {
    let plan = plan_program(summaries).expect("plan");
    let mut names: Vec<String> = plan
        .decisions
        .iter()
        .flat_map(|m| &m.decisions)
        .filter(|d| d.action == DecisionAction::Promote)
        .map(|d| d.to.clone())
        .collect();
    names.sort();
    names
}

/// A promoted name is `%NAME_MODULE_promoted_` and the program hash in 16 hex
/// digits: the same whatever the order of the summaries, another when any summary
/// changes (a constant of one function, a module's name); a second promotion to
/// the same name gets `_2` appended.
#[test]
fn promoted_names_carry_the_program_hash() {
    let program = [helper_module("p", 5, 2), helper_module("q", 5, 3)];
    let hash = program_hash(&program);
    assert_eq!(
        promoted_names(&program),
        [format!("%helper_p_promoted_{hash:016x}")]
    );
    let reversed = [program[1].clone(), program[0].clone()];
    assert_eq!(program_hash(&reversed), hash, "the summaries' order");
    assert_eq!(promoted_names(&reversed), promoted_names(&program));

    let changed = [helper_module("p", 5, 2), helper_module("q", 5, 4)];
    assert_ne!(program_hash(&changed), hash, "a constant of q");
    assert_eq!(
        promoted_names(&changed),
        [format!(
            "%helper_p_promoted_{:016x}",
            program_hash(&changed)
        )]
    );
    let renamed = [helper_module("p", 5, 2), helper_module("r", 5, 3)];
    assert_ne!(program_hash(&renamed), hash, "a module's name");

    // `p-1` and `p_1` spell one CLIF word: two classes promote `%helper` of each.
    let clash = [
        helper_module("p-1", 5, 2),
        helper_module("p_1", 6, 2),
        helper_module("q", 5, 3),
        helper_module("r", 6, 3),
    ];
    let base = format!("%helper_p_1_promoted_{:016x}", program_hash(&clash));
    assert_eq!(promoted_names(&clash), [base.clone(), format!("{base}_2")]);
}
