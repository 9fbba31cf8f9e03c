//! Fuzzes the comparator's laws on generated functions: reflexive, antisymmetric,
//! transitive on triples; equal functions have equal hashes, and equal prefix keys
//! when their instruction tables are as long; a respelled clone (values
//! renumbered, non-entry blocks in another order) is equal.

#![no_main]

use arbitrary::{Result, Unstructured};
use clif_merge::Linkage;
use clif_merge::testing::{
    CalleeView, EncodedFunctions, Fingerprint, FingerprintScratch, FunctionComparator, Operands,
    WalkOptions, table_key,
};
use clif_merge::{FuncIndex, FunctionSet};
use cranelift_codegen::entity::EntityRef;
use libfuzzer_sys::fuzz_target;
use std::cmp::Ordering;
use std::fmt::Write;

const BINARY: [&str; 8] = [
    "iadd", "isub", "imul", "band", "bor", "bxor", "ishl", "udiv",
];
const CONDS: [&str; 4] = ["eq", "ne", "slt", "ult"];

/// A function description: per block, a list of (opcode choice, operand picks).
#[derive(Clone)]
struct Shape {
    blocks: Vec<(Vec<(u8, u8, u8)>, u8)>,
}

fn shape(u: &mut Unstructured<'_>) -> Result<Shape> {
    let n = u.int_in_range(1..=4)?;
    let mut blocks = Vec::new();
    for _ in 0..n {
        let ops = u.int_in_range(0..=5)?;
        let mut list = Vec::new();
        for _ in 0..ops {
            list.push((u.arbitrary()?, u.arbitrary()?, u.arbitrary()?));
        }
        blocks.push((list, u.arbitrary()?));
    }
    Ok(Shape { blocks })
}

/// Renders a shape; `offset` renumbers values, `reverse` lays out non-entry blocks
/// in reverse.
fn render(s: &Shape, name: &str, offset: usize, reverse: bool) -> String {
    let n = s.blocks.len();
    let mut next = 0;
    let mut bodies = Vec::new();
    for (b, (ops, term)) in s.blocks.iter().enumerate() {
        let mut fresh = || {
            next += 1;
            format!("v{}", next - 1 + offset)
        };
        let mut text = String::new();
        let mut scope = vec![fresh(), fresh()];
        let _ = writeln!(text, "block{b}({}: i32, {}: i32):", scope[0], scope[1]);
        for &(op, a, c) in ops {
            let (a, c) = (
                scope[a as usize % scope.len()].clone(),
                scope[c as usize % scope.len()].clone(),
            );
            let v = fresh();
            match op % 3 {
                0 => {
                    let _ = writeln!(text, "    {v} = iconst.i32 {}", op as i8 as i32 - 100);
                }
                1 => {
                    let _ = writeln!(
                        text,
                        "    {v} = {} {a}, {c}",
                        BINARY[op as usize / 3 % BINARY.len()]
                    );
                }
                _ => {
                    let f = fresh();
                    let _ = writeln!(
                        text,
                        "    {f} = icmp {} {a}, {c}",
                        CONDS[op as usize / 3 % CONDS.len()]
                    );
                    let _ = writeln!(text, "    {v} = uextend.i32 {f}");
                }
            }
            scope.push(v);
        }
        let last = scope[*term as usize % scope.len()].clone();
        let first = scope[0].clone();
        if b + 1 < n && term % 2 == 0 {
            let t = b + 1 + (*term as usize / 2) % (n - b - 1);
            let _ = writeln!(
                text,
                "    brif {last}, block{t}({first}, {last}), block{}({last}, {first})",
                n - 1
            );
        } else if b + 1 < n {
            let _ = writeln!(text, "    jump block{}({last}, {first})", b + 1);
        } else {
            let _ = writeln!(text, "    return {last}");
        }
        bodies.push(text);
    }
    let mut out = format!("function {name}(i32, i32) -> i32 {{\n");
    out.push_str(&bodies[0]);
    let mut rest = bodies[1..].to_vec();
    if reverse {
        rest.reverse();
    }
    for body in rest {
        out.push_str(&body);
    }
    out.push_str("}\n");
    out
}

fuzz_target!(|data: &[u8]| {
    let mut u = Unstructured::new(data);
    let Ok(a) = shape(&mut u) else { return };
    let Ok(b) = shape(&mut u) else { return };
    let clone_a: bool = u.arbitrary().unwrap_or(false);
    let text = [
        render(&a, "%a", 0, false),
        render(&b, "%b", 0, false),
        render(if clone_a { &a } else { &b }, "%c", 37, true),
    ]
    .join("\n");
    let Ok(functions) = cranelift_reader::parse_functions(&text) else {
        panic!("generator wrote CLIF the reader rejects:\n{text}");
    };
    let mut module = FunctionSet::new();
    for f in functions {
        module.push(f, Linkage::Local).expect("unique names");
    }
    let encoded = EncodedFunctions::from_module(&module, WalkOptions::default());
    let cmp = FunctionComparator::new(&encoded, CalleeView::Optimistic);
    let prefix_key = |i: usize| {
        let func = &module.get(FuncIndex::new(i)).func;
        Fingerprint::EXACT
            .first_look(func, &module, &mut FingerprintScratch::default())
            .0
            .hashed
            .hash
    };
    let operand_hash = |i: usize| {
        let func = &module.get(FuncIndex::new(i)).func;
        Fingerprint::EXACT
            .with_operands(Operands::Hashed)
            .walk(func, &module, &mut FingerprintScratch::default())
            .hashed
            .hash
    };
    let m: Vec<Vec<Ordering>> = (0..3)
        .map(|i| {
            (0..3)
                .map(|j| cmp.compare(FuncIndex::new(i), FuncIndex::new(j)))
                .collect()
        })
        .collect();
    for i in 0..3 {
        assert_eq!(m[i][i], Ordering::Equal);
        for j in 0..3 {
            assert_eq!(m[i][j], m[j][i].reverse());
            if m[i][j] == Ordering::Equal {
                assert_eq!(
                    encoded.hashes[FuncIndex::new(i)],
                    encoded.hashes[FuncIndex::new(j)]
                );
                // A prefix key reads the length of the instruction table too
                // (one-sided: `fingerprint.rs`), which equal functions share
                // unless their unreachable code differs.
                let table = |i: usize| module.get(FuncIndex::new(i)).func.dfg.num_insts();
                if table(i) == table(j) {
                    assert_eq!(
                        prefix_key(i),
                        prefix_key(j),
                        "equal, prefix keys differ:\n{text}"
                    );
                }
                assert_eq!(
                    operand_hash(i),
                    operand_hash(j),
                    "equal, operand hashes differ:\n{text}"
                );
                // A table key reads every entry of the instruction table (one-sided
                // too): equal functions share it when their tables hold only their
                // reachable instructions.
                let only_reachable =
                    |i: usize| encoded.instructions(FuncIndex::new(i)) == table(i) as u64;
                if only_reachable(i) && only_reachable(j) {
                    let key = |i: usize| table_key(&module.get(FuncIndex::new(i)).func);
                    assert_eq!(key(i), key(j), "equal, table keys differ:\n{text}");
                }
            }
            for k in 0..3 {
                if m[i][j] != Ordering::Greater && m[j][k] != Ordering::Greater {
                    assert_ne!(m[i][k], Ordering::Greater, "not transitive:\n{text}");
                }
            }
        }
    }
    let original = if clone_a { 0 } else { 1 };
    assert_eq!(
        m[original][2],
        Ordering::Equal,
        "respelled clone differs:\n{text}"
    );
});
