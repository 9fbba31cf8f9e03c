//! Property tests of the comparator and hash on generated CLIF functions.
//!
//! Functions are generated as CLIF *text* from a small random program description,
//! so the reader parses them exactly as it parses user input. The space is kept small
//! on purpose, so that equal functions (and near misses) come up often.
//!
//! * Order laws: reflexive, antisymmetric, transitive on triples; equal ⇒ same hash.
//! * A clone with renumbered values and blocks, a shuffled block layout, source
//!   locations and an unreachable block compares Equal and is merged.
//! * Soundness against an independent oracle: a function and a one-change mutant that
//!   the comparator calls Equal must give the same results in
//!   `cranelift-interpreter` on every sampled input.

use clif_merge::Linkage;
use clif_merge::testing::{
    CalleeView, EncodedFunctions, Fingerprint, FingerprintScratch, FunctionComparator, Operands,
    WalkOptions, table_key,
};
use clif_merge::{FuncIndex, FunctionSet, MergeAction, MergeMode, MergeOptions, merge_functions};
use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::Function;
use cranelift_codegen::settings::{self, Flags};
use cranelift_codegen::verify_function;
use cranelift_interpreter::environment::FunctionStore;
use cranelift_interpreter::interpreter::{Interpreter, InterpreterState};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::fmt::Write;

#[derive(Clone, Debug, PartialEq)]
enum Op {
    Const(i64),
    Binary(&'static str, usize, usize),
    Compare(&'static str, usize, usize),
    Select(usize, usize, usize),
    /// Call the callee `k % callees`, passing a value (a constant if no callees).
    Call(usize, usize),
}

#[derive(Clone, Debug, PartialEq)]
enum Terminator {
    Return(usize),
    /// Jump forward by `1 + offset` blocks, passing a value.
    Jump(usize, usize),
    /// Branch on a value to two forward blocks, each passed a value.
    Brif(usize, (usize, usize), (usize, usize)),
}

#[derive(Clone, Debug, PartialEq)]
struct BlockSpec {
    ops: Vec<Op>,
    terminator: Terminator,
}

#[derive(Clone, Debug, PartialEq)]
struct FuncSpec {
    params: usize,
    blocks: Vec<BlockSpec>,
}

/// How a spec is spelled: value and block numbering, layout, noise.
#[derive(Clone, Debug)]
struct Spelling {
    value_offset: usize,
    value_stride: usize,
    block_rotation: usize,
    reverse_layout: bool,
    unreachable_block: bool,
    srclocs: bool,
}

impl Spelling {
    fn plain() -> Self {
        Self {
            value_offset: 0,
            value_stride: 1,
            block_rotation: 0,
            reverse_layout: false,
            unreachable_block: false,
            srclocs: false,
        }
    }
}

const BINARY: [&str; 6] = ["iadd", "isub", "imul", "band", "bxor", "udiv"];
const COMPARE: [&str; 3] = ["eq", "slt", "ult"];

fn op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        (-1i64..3).prop_map(Op::Const),
        (0..BINARY.len(), 0usize..8, 0usize..8).prop_map(|(o, a, b)| Op::Binary(BINARY[o], a, b)),
        (0..COMPARE.len(), 0usize..8, 0usize..8)
            .prop_map(|(o, a, b)| Op::Compare(COMPARE[o], a, b)),
        (0usize..8, 0usize..8, 0usize..8).prop_map(|(c, a, b)| Op::Select(c, a, b)),
    ]
}

/// Ops for module tests: the single-function ops plus calls.
fn module_op_strategy() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => op_strategy(),
        1 => (0usize..4, 0usize..8).prop_map(|(k, a)| Op::Call(k, a)),
    ]
}

/// A `(i32) -> i32` function that may call others.
fn module_spec_strategy() -> impl Strategy<Value = FuncSpec> {
    prop::collection::vec(
        (
            prop::collection::vec(module_op_strategy(), 0..4),
            terminator_strategy(),
        )
            .prop_map(|(ops, terminator)| BlockSpec { ops, terminator }),
        1..3,
    )
    .prop_map(|blocks| FuncSpec { params: 1, blocks })
}

fn terminator_strategy() -> impl Strategy<Value = Terminator> {
    prop_oneof![
        (0usize..8).prop_map(Terminator::Return),
        (0usize..2, 0usize..8).prop_map(|(t, v)| Terminator::Jump(t, v)),
        (0usize..8, (0usize..2, 0usize..8), (0usize..2, 0usize..8))
            .prop_map(|(c, a, b)| Terminator::Brif(c, a, b)),
    ]
}

fn spec_strategy() -> impl Strategy<Value = FuncSpec> {
    (
        1usize..3,
        prop::collection::vec(
            (
                prop::collection::vec(op_strategy(), 0..4),
                terminator_strategy(),
            )
                .prop_map(|(ops, terminator)| BlockSpec { ops, terminator }),
            1..4,
        ),
    )
        .prop_map(|(params, blocks)| FuncSpec { params, blocks })
}

fn spelling_strategy() -> impl Strategy<Value = Spelling> {
    (
        0usize..50,
        1usize..4,
        0usize..4,
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(
                value_offset,
                value_stride,
                block_rotation,
                reverse_layout,
                unreachable_block,
                srclocs,
            )| {
                Spelling {
                    value_offset,
                    value_stride,
                    block_rotation,
                    reverse_layout,
                    unreachable_block,
                    srclocs,
                }
            },
        )
}

/// One random change to a spec.
#[derive(Clone, Debug)]
struct Mutation {
    block: usize,
    slot: usize,
    choice: usize,
}

fn mutate(spec: &FuncSpec, m: &Mutation) -> FuncSpec {
    let mut out = spec.clone();
    let b = m.block % out.blocks.len();
    let block = &mut out.blocks[b];
    if block.ops.is_empty() || m.slot % (block.ops.len() + 1) == block.ops.len() {
        block.terminator = match block.terminator.clone() {
            Terminator::Return(v) => Terminator::Return(v + 1 + m.choice % 3),
            Terminator::Jump(t, v) => Terminator::Jump(t, v + 1 + m.choice % 3),
            Terminator::Brif(c, a, b) if m.choice.is_multiple_of(2) => Terminator::Brif(c, b, a),
            Terminator::Brif(c, a, b) => Terminator::Brif(c + 1, a, b),
        };
        return out;
    }
    let i = m.slot % (block.ops.len() + 1);
    block.ops[i] = match block.ops[i].clone() {
        Op::Const(c) => Op::Const(c + 1 + (m.choice % 2) as i64),
        Op::Binary(o, a, b) if m.choice.is_multiple_of(2) => Op::Binary(o, b, a),
        Op::Binary(o, a, b) => {
            let next =
                BINARY[(BINARY.iter().position(|x| *x == o).unwrap_or(0) + 1) % BINARY.len()];
            Op::Binary(next, a, b)
        }
        Op::Compare(o, a, b) if m.choice.is_multiple_of(2) => Op::Compare(o, b, a),
        Op::Compare(o, a, b) => {
            let next =
                COMPARE[(COMPARE.iter().position(|x| *x == o).unwrap_or(0) + 1) % COMPARE.len()];
            Op::Compare(next, a, b)
        }
        Op::Select(c, a, b) => Op::Select(c, b, a),
        Op::Call(k, a) => Op::Call(k + 1, a),
    };
    out
}

/// Renders `spec` as CLIF text named `name`, spelled as `spelling` says.
fn render(spec: &FuncSpec, name: &str, spelling: &Spelling) -> String {
    render_with_callees(spec, name, spelling, &[])
}

/// Like [`render`]; `Op::Call` calls one of `callees` (all `(i32) -> i32`).
fn render_with_callees(
    spec: &FuncSpec,
    name: &str,
    spelling: &Spelling,
    callees: &[String],
) -> String {
    let n = spec.blocks.len();
    // Logical value k is spelled v(offset + k * stride).
    let mut next_value = 0usize;
    let mut fresh = || {
        let k = next_value;
        next_value += 1;
        format!("v{}", spelling.value_offset + k * spelling.value_stride)
    };
    let block_name = |b: usize| format!("block{}", (b + spelling.block_rotation) % (n + 1));
    let mut bodies: Vec<String> = Vec::new();
    let mut srcloc = 1u32;
    for (b, block) in spec.blocks.iter().enumerate() {
        let mut text = String::new();
        let mut scope: Vec<String> = Vec::new();
        if b == 0 {
            let params: Vec<String> = (0..spec.params)
                .map(|_| {
                    let v = fresh();
                    scope.push(v.clone());
                    format!("{v}: i32")
                })
                .collect();
            let _ = writeln!(text, "{}({}):", block_name(b), params.join(", "));
        } else {
            let v = fresh();
            let _ = writeln!(text, "{}({v}: i32):", block_name(b));
            scope.push(v);
        }
        let pick = |scope: &Vec<String>, i: usize| scope[i % scope.len()].clone();
        let mut loc = || {
            srcloc += 1;
            if spelling.srclocs {
                format!("@{srcloc:04x} ")
            } else {
                String::new()
            }
        };
        for op in &block.ops {
            let line = match op {
                Op::Const(c) => {
                    let v = fresh();
                    let s = format!("{}{v} = iconst.i32 {c}", loc());
                    scope.push(v);
                    s
                }
                Op::Binary(o, a, c) => {
                    let (a, c) = (pick(&scope, *a), pick(&scope, *c));
                    let v = fresh();
                    let s = format!("{}{v} = {o} {a}, {c}", loc());
                    scope.push(v);
                    s
                }
                Op::Compare(o, a, c) => {
                    let (a, c) = (pick(&scope, *a), pick(&scope, *c));
                    let flag = fresh();
                    let v = fresh();
                    let s = format!(
                        "{l1}{flag} = icmp {o} {a}, {c}\n    {l2}{v} = uextend.i32 {flag}",
                        l1 = loc(),
                        l2 = loc()
                    );
                    scope.push(v);
                    s
                }
                Op::Select(c, a, d) => {
                    let (c, a, d) = (pick(&scope, *c), pick(&scope, *a), pick(&scope, *d));
                    let v = fresh();
                    let s = format!("{}{v} = select {c}, {a}, {d}", loc());
                    scope.push(v);
                    s
                }
                Op::Call(k, a) => {
                    let a = pick(&scope, *a);
                    let v = fresh();
                    let s = if callees.is_empty() {
                        format!("{}{v} = iconst.i32 {}", loc(), k % 3)
                    } else {
                        format!("{}{v} = call fn{}({a})", loc(), k % callees.len())
                    };
                    scope.push(v);
                    s
                }
            };
            let _ = writeln!(text, "    {line}");
        }
        // Forward targets only; past the last block means return.
        let target = |off: usize, v: usize| -> Option<(String, String)> {
            let t = b + 1 + off;
            (t < n).then(|| (block_name(t), pick(&scope, v)))
        };
        let term = match &block.terminator {
            Terminator::Return(v) => format!("return {}", pick(&scope, *v)),
            Terminator::Jump(off, v) => match target(*off, *v) {
                Some((t, a)) => format!("jump {t}({a})"),
                None => format!("return {}", pick(&scope, *v)),
            },
            Terminator::Brif(c, (o1, v1), (o2, v2)) => match (target(*o1, *v1), target(*o2, *v2)) {
                (Some((t1, a1)), Some((t2, a2))) => {
                    format!("brif {}, {t1}({a1}), {t2}({a2})", pick(&scope, *c))
                }
                _ => format!("return {}", pick(&scope, *c)),
            },
        };
        let _ = writeln!(text, "    {}{term}", loc());
        bodies.push(text);
    }
    let params = vec!["i32"; spec.params].join(", ");
    let mut out = format!("function {name}({params}) -> i32 {{\n");
    for (i, callee) in callees.iter().enumerate() {
        let _ = writeln!(out, "    fn{i} = {callee}(i32) -> i32");
    }
    out.push_str(&bodies[0]);
    let mut rest: Vec<String> = bodies[1..].to_vec();
    if spelling.unreachable_block {
        let dead = block_name(n);
        rest.push(format!(
            "{dead}(v9999: i32):\n    v9998 = iconst.i32 77\n    return v9998\n"
        ));
    }
    if spelling.reverse_layout {
        rest.reverse();
    }
    for body in rest {
        out.push('\n');
        out.push_str(&body);
    }
    out.push_str("}\n");
    out
}

fn parse(text: &str) -> Vec<Function> {
    cranelift_reader::parse_functions(text).unwrap_or_else(|e| panic!("{e}\n{text}"))
}

fn module_of(functions: Vec<Function>) -> FunctionSet {
    let mut set = FunctionSet::new();
    for f in functions {
        set.push(f, Linkage::Local).expect("distinct names");
    }
    set
}

/// Compares every pair of a module's functions (callees read optimistically).
fn order_matrix(set: &FunctionSet) -> (Vec<Vec<Ordering>>, EncodedFunctions) {
    let encoded = EncodedFunctions::from_module(set, WalkOptions::default());
    let n = set.len();
    let cmp = FunctionComparator::new(&encoded, CalleeView::Optimistic);
    let matrix = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| cmp.compare(FuncIndex::new(i), FuncIndex::new(j)))
                .collect()
        })
        .collect();
    (matrix, encoded)
}

fn run_interpreter(func: &Function, args: &[DataValue]) -> String {
    run_in_module(std::slice::from_ref(func), &func.name.to_string(), args)
}

/// Runs `name` in the interpreter with every function of `module` callable.
fn run_in_module(module: &[Function], name: &str, args: &[DataValue]) -> String {
    let mut store = FunctionStore::default();
    for f in module {
        store.add(f.name.to_string(), f);
    }
    let state = InterpreterState::default().with_function_store(store);
    let mut interpreter = Interpreter::new(state).with_fuel(Some(10_000));
    match interpreter.call_by_name(name, args) {
        Ok(flow) => format!("{flow:?}"),
        Err(e) => format!("error: {e}"),
    }
}

const SAMPLES: [i32; 8] = [0, 1, -1, 2, 7, i32::MIN, i32::MAX, 12345];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn comparator_is_a_total_order_and_hash_agrees(
        specs in prop::collection::vec(spec_strategy(), 3),
        clone_of in prop::collection::vec(0usize..4, 3),
        spellings in prop::collection::vec(spelling_strategy(), 3),
    ) {
        // Some members are respelled clones of earlier ones, so Equal comes up.
        let mut chosen: Vec<FuncSpec> = Vec::new();
        for (i, spec) in specs.iter().enumerate() {
            let s = if i > 0 && clone_of[i] < i { chosen[clone_of[i]].clone() } else { spec.clone() };
            chosen.push(s);
        }
        let text: String = chosen
            .iter()
            .enumerate()
            .map(|(i, s)| render(s, &format!("%f{i}"), &spellings[i]))
            .collect();
        let set = module_of(parse(&text));
        let (m, encoded) = order_matrix(&set);
        let prefix_keys: Vec<_> = (0..3)
            .map(|i| {
                let func = &set.get(FuncIndex::new(i)).func;
                Fingerprint::EXACT
                    .first_look(func, &set, &mut FingerprintScratch::default())
                    .0
            })
            .collect();
        let operand_hashes: Vec<_> = (0..3)
            .map(|i| {
                let func = &set.get(FuncIndex::new(i)).func;
                Fingerprint::EXACT
                    .with_operands(Operands::Hashed)
                    .walk(func, &set, &mut FingerprintScratch::default())
                    .hashed
                    .hash
            })
            .collect();
        for i in 0..3 {
            prop_assert_eq!(m[i][i], Ordering::Equal, "not reflexive");
            for j in 0..3 {
                prop_assert_eq!(m[i][j], m[j][i].reverse(), "not antisymmetric");
                if m[i][j] == Ordering::Equal {
                    prop_assert_eq!(
                        encoded.hashes[FuncIndex::new(i)],
                        encoded.hashes[FuncIndex::new(j)],
                        "equal functions with different hashes"
                    );
                    // A prefix key reads the length of the instruction table
                    // too (one-sided: `fingerprint.rs`), which equal functions
                    // share unless their unreachable code differs.
                    let table = |i: usize| set.get(FuncIndex::new(i)).func.dfg.num_insts();
                    if table(i) == table(j) {
                        prop_assert_eq!(
                            prefix_keys[i].hashed.hash,
                            prefix_keys[j].hashed.hash,
                            "equal functions with different prefix keys"
                        );
                    }
                    prop_assert_eq!(
                        operand_hashes[i],
                        operand_hashes[j],
                        "equal functions with different hashes of their operands"
                    );
                    // A table key reads every entry of the instruction table
                    // (one-sided too): equal functions share it when their
                    // tables hold only their reachable instructions.
                    let only_reachable = |i: usize| {
                        encoded.instructions(FuncIndex::new(i)) == table(i) as u64
                    };
                    if only_reachable(i) && only_reachable(j) {
                        let key = |i: usize| table_key(&set.get(FuncIndex::new(i)).func);
                        prop_assert_eq!(key(i), key(j), "equal functions with different table keys");
                    }
                }
                for k in 0..3 {
                    if m[i][j] != Ordering::Greater && m[j][k] != Ordering::Greater {
                        prop_assert_ne!(m[i][k], Ordering::Greater, "not transitive");
                    }
                    if m[i][j] == Ordering::Equal && m[j][k] == Ordering::Equal {
                        prop_assert_eq!(m[i][k], Ordering::Equal, "equality not transitive");
                    }
                }
            }
        }
        // Respelled clones must be Equal.
        for i in 1..3 {
            if clone_of[i] < i {
                prop_assert_eq!(m[clone_of[i]][i], Ordering::Equal, "clone not equal:\n{}", text);
            }
        }
    }

    #[test]
    fn respelled_clone_is_equal_and_merged(spec in spec_strategy(), spelling in spelling_strategy()) {
        let text = format!(
            "{}\n{}",
            render(&spec, "%original", &Spelling::plain()),
            render(&spec, "%clone", &spelling)
        );
        let set = module_of(parse(&text));
        let (m, _) = order_matrix(&set);
        prop_assert_eq!(m[0][1], Ordering::Equal, "clone not equal:\n{}", text);
        let outcome = merge_functions(&set, &MergeOptions::default());
        prop_assert_eq!(outcome.plan.decisions.len(), 1);
        prop_assert_eq!(outcome.plan.decisions[0].function, FuncIndex::new(1));
    }

    #[test]
    fn equal_verdicts_agree_with_the_interpreter(
        spec in spec_strategy(),
        mutation in (0usize..4, 0usize..5, 0usize..6).prop_map(|(block, slot, choice)| Mutation { block, slot, choice }),
        spelling in spelling_strategy(),
    ) {
        let mutant = mutate(&spec, &mutation);
        let text = format!(
            "{}\n{}",
            render(&spec, "%original", &Spelling::plain()),
            render(&mutant, "%mutant", &spelling)
        );
        let functions = parse(&text);
        let set = module_of(functions.clone());
        let (m, _) = order_matrix(&set);
        let mut distinguished = false;
        for &a in &SAMPLES {
            for &b in &SAMPLES[..4] {
                let args: Vec<DataValue> = [a, b][..spec.params].iter().map(|&x| DataValue::I32(x)).collect();
                let r0 = run_interpreter(&functions[0], &args);
                let r1 = run_interpreter(&functions[1], &args);
                if r0 != r1 {
                    distinguished = true;
                }
            }
        }
        if distinguished {
            prop_assert_ne!(m[0][1], Ordering::Equal, "comparator merged functions the interpreter tells apart:\n{}", text);
        }
    }
}

/// The oracle itself works: the interpreter runs generated functions and tells a
/// mutant apart, so the property above is not vacuous.
#[test]
fn interpreter_oracle_distinguishes_a_known_mutant() {
    let spec = FuncSpec {
        params: 2,
        blocks: vec![BlockSpec {
            ops: vec![Op::Binary("isub", 0, 1)],
            terminator: Terminator::Return(2),
        }],
    };
    let mutant = mutate(
        &spec,
        &Mutation {
            block: 0,
            slot: 0,
            choice: 0,
        },
    );
    let text = format!(
        "{}\n{}",
        render(&spec, "%a", &Spelling::plain()),
        render(&mutant, "%b", &Spelling::plain())
    );
    let functions = parse(&text);
    let args = [DataValue::I32(5), DataValue::I32(3)];
    let (ra, rb) = (
        run_interpreter(&functions[0], &args),
        run_interpreter(&functions[1], &args),
    );
    assert!(ra.contains("Return") && ra.contains('2'), "{ra}");
    assert_ne!(ra, rb);
    let (m, _) = order_matrix(&module_of(functions));
    assert_ne!(m[0][1], Ordering::Equal);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    /// Translation validation on generated modules with calls: members of a class
    /// behave alike, and the rewritten module (erased functions gone, calls
    /// redirected, thunks) behaves like the original, function by function.
    #[test]
    fn merged_modules_behave_like_the_original(
        shapes in prop::collection::vec(module_spec_strategy(), 3),
        picks in prop::collection::vec(0usize..3, 4..9),
        spellings in prop::collection::vec(spelling_strategy(), 9),
        mode_all in any::<bool>(),
    ) {
        let (names, text) = generated_module(&shapes, &picks, &spellings);
        let text = text.join("\n");
        let functions = parse(&text);
        let set = module_of(functions.clone());
        let mode = if mode_all { MergeMode::All } else { MergeMode::Safe };
        let outcome = merge_functions(&set, &MergeOptions::default().with_mode(mode));
        let flags = Flags::new(settings::builder());
        let mut output: Vec<Function> = Vec::new();
        for entry in &outcome.output {
            if let Some(f) = entry.body() {
                prop_assert!(verify_function(f, &flags).is_ok(), "output fails the verifier:\n{}", f.display());
                output.push(f.clone());
            }
        }
        let decisions = outcome.plan.decision_map();
        for &x in &SAMPLES {
            let args = [DataValue::I32(x)];
            let before: Vec<String> = names.iter().map(|name| run_in_module(&functions, name, &args)).collect();
            for class in &outcome.plan.classes {
                for &member in class {
                    prop_assert_eq!(&before[member.index()], &before[class[0].index()],
                        "class members disagree on {}:\n{}", x, text);
                }
            }
            for (i, name) in names.iter().enumerate() {
                let callee = match decisions[FuncIndex::new(i)] {
                    Some(d) if d.action != MergeAction::Thunk => &names[d.into.index()],
                    _ => name,
                };
                let after = run_in_module(&output, callee, &args);
                prop_assert_eq!(&after, &before[i], "{} changed behaviour on {}:\n{}", name, x, text);
            }
        }
    }
}

/// A module of functions `%m0..%mN`: function `i` has shape `shapes[picks[i]]`,
/// spelled as `spellings[i]`, and may call the functions after it.
fn generated_module(
    shapes: &[FuncSpec],
    picks: &[usize],
    spellings: &[Spelling],
) -> (Vec<String>, Vec<String>) {
    let n = picks.len();
    let names: Vec<String> = (0..n).map(|i| format!("%m{i}")).collect();
    let texts = (0..n)
        .map(|i| render_with_callees(&shapes[picks[i]], &names[i], &spellings[i], &names[i + 1..]))
        .collect();
    (names, texts)
}

/// Classes as sets of names, for comparing runs over differently ordered inputs.
fn class_names(set: &FunctionSet, classes: &[Vec<FuncIndex>]) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = classes
        .iter()
        .map(|c| {
            let mut names: Vec<String> = c.iter().map(|&f| set.display_name(f)).collect();
            names.sort();
            names
        })
        .collect();
    out.sort();
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// The classes do not depend on input order, and a second run gives the same
    /// output text.
    #[test]
    fn classes_do_not_depend_on_input_order(
        shapes in prop::collection::vec(module_spec_strategy(), 3),
        picks in prop::collection::vec(0usize..3, 4..9),
        spellings in prop::collection::vec(spelling_strategy(), 9),
        rotation in 1usize..8,
    ) {
        let (_, texts) = generated_module(&shapes, &picks, &spellings);
        let n = texts.len();
        let forward = module_of(parse(&texts.join("\n")));
        let mut reordered_texts = texts.clone();
        reordered_texts.rotate_left(rotation % n);
        reordered_texts.reverse();
        let reordered = module_of(parse(&reordered_texts.join("\n")));
        let options = MergeOptions::default();
        let (a, b) = (merge_functions(&forward, &options), merge_functions(&reordered, &options));
        prop_assert_eq!(class_names(&forward, &a.plan.classes), class_names(&reordered, &b.plan.classes));
        let again = merge_functions(&forward, &options);
        prop_assert_eq!(
            clif_merge::testing::clif_text(&forward, &a, None, ""),
            clif_merge::testing::clif_text(&forward, &again, None, "")
        );
    }
}
