//! `merge_bench similar-sequence DIR...`: what merging by sequence alignment of
//! whole functions (FMSA, CGO 2019; SalSSA, PLDI 2020) might add to the similar
//! merge on a program. An estimate to decide whether to build it, not a bound.
//!
//! Phases:
//! 1. *Left alone*: the similar merge runs with its defaults; the functions it
//!    merged are set aside.
//! 2. *Sequences*: every other function becomes its instructions in layout
//!    order, each with a shape (opcode and controlling type) and a key (its
//!    text with value and entity numbers left out, a callee by its name).
//! 3. *Partners*: largest first, each function takes, among the functions of
//!    its signature not yet taken, the few with the longest common subsequence
//!    of shapes (bit-parallel, pruned by the shapes' multiset intersection).
//! 4. *Estimate*: each of those is aligned (the common subsequence with its
//!    traceback) and priced in instructions, as FMSA's profitability check
//!    would: an aligned pair costs one instruction, plus one `select` per value
//!    operand that does not name the counterpart of the first's, plus one
//!    parameter if the keys differ; an unaligned instruction costs one, and each
//!    run of them a branch and a jump; each member keeps a thunk of three. The
//!    best partner that saves is taken; instructions become bytes at the pair's
//!    mean predicted bytes per instruction.
//!
//! Optimistic where FMSA pays more: no phis for values defined on one side and
//! used after, no register pressure, branches whose targets differ count as
//! aligned.

use crate::similar_cost::{host_and_model, load_program, program_name};
use clif_merge::similar::SimilarOptions;
use clif_merge::testing::merge_similar_for;
use clif_merge::{FuncIndex, FunctionSet};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Function, InstructionData, Opcode, Type, Value};
use std::collections::HashMap;
use std::path::PathBuf;

/// How many partners, by common subsequence, get the full estimate.
const FULL_ESTIMATES: usize = 3;
/// Alignments larger than this (instructions squared) are not estimated.
const MAX_CELLS: usize = 40_000_000;
/// A member's thunk, in instructions.
const THUNK: i64 = 3;

/// One instruction of a sequence.
struct Inst {
    shape: u32,
    key: u64,
    args: Vec<Value>,
    results: Vec<Value>,
}

/// A pair the estimate takes.
struct EstimatedPair {
    first: FuncIndex,
    second: FuncIndex,
    /// Each member's instructions.
    instructions: (usize, usize),
    /// The estimated saving, in predicted bytes.
    saved: u64,
}

/// How many of each program's largest pairs are listed.
const LISTED: usize = 5;

/// One function as a sequence.
struct Sequence {
    insts: Vec<Inst>,
    /// The parameters of the block each instruction opens, if it opens one.
    opens: Vec<Option<Vec<Value>>>,
    shapes: Vec<u32>,
    histogram: Vec<(u32, u32)>,
}

/// `similar-sequence`: per program, the estimate of the module doc as a
/// markdown table, then each program's largest estimated pairs.
pub fn sequence_command(inputs: &[PathBuf]) -> anyhow::Result<()> {
    let (isa, model) = host_and_model(inputs)?;
    println!(
        "| program | predicted bytes | left alone (functions: bytes) | pairs that save | estimated saving | share of program |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    let mut largest = Vec::new();
    for input in inputs {
        let module = load_program(input)?;
        let size = |f: FuncIndex| model.predict(&module.get(f).func);
        let program: u64 = module.iter().map(|(f, _)| size(f)).sum();
        let outcome = merge_similar_for(&module, &SimilarOptions::default(), Some(&*isa));
        let mut merged = SecondaryMap::<FuncIndex, bool>::new();
        for group in &outcome.groups {
            for &m in &group.members {
                merged[m] = true;
            }
        }
        let left: Vec<FuncIndex> = module
            .iter()
            .map(|(f, _)| f)
            .filter(|&f| !merged[f])
            .collect();
        let mut pairs = estimate(&module, &left, &size);
        let saving: u64 = pairs.iter().map(|p| p.saved).sum();
        let left_bytes: u64 = left.iter().map(|&f| size(f)).sum();
        println!(
            "| {} | {program} | {}: {left_bytes} | {} | {saving} | {:.2}% |",
            program_name(input),
            left.len(),
            pairs.len(),
            100.0 * saving as f64 / program.max(1) as f64
        );
        pairs.sort_by_key(|p| std::cmp::Reverse(p.saved));
        for p in pairs.iter().take(LISTED) {
            let name = |f: FuncIndex| module.get(f).func.name.to_string();
            largest.push(format!(
                "| {} | {} ({} instructions, {} B) | {} ({} instructions, {} B) | {} |",
                program_name(input),
                name(p.first),
                p.instructions.0,
                size(p.first),
                name(p.second),
                p.instructions.1,
                size(p.second),
                p.saved
            ));
        }
    }
    println!();
    println!("| program | function | partner | estimated saving |");
    println!("|---|---|---|---:|");
    for row in largest {
        println!("{row}");
    }
    Ok(())
}

/// Pairs `left` greedily, largest first, and sums the estimated savings, in
/// predicted bytes.
fn estimate(
    module: &FunctionSet,
    left: &[FuncIndex],
    size: &dyn Fn(FuncIndex) -> u64,
) -> Vec<EstimatedPair> {
    let mut symbols = HashMap::<(Opcode, Type), u32>::new();
    let sequences: HashMap<FuncIndex, Sequence> = left
        .iter()
        .map(|&f| (f, sequence(&module.get(f).func, &mut symbols)))
        .collect();
    let mut order = left.to_vec();
    order.sort_by_key(|&f| (std::cmp::Reverse(sequences[&f].insts.len()), f));
    let mut taken = SecondaryMap::<FuncIndex, bool>::new();
    let mut pairs = Vec::new();
    for &f in &order {
        if taken[f] {
            continue;
        }
        let a = &sequences[&f];
        let signature = &module.get(f).func.signature;
        let mut candidates: Vec<(usize, FuncIndex)> = left
            .iter()
            .copied()
            .filter(|&g| g != f && !taken[g] && module.get(g).func.signature == *signature)
            .map(|g| (intersection(&a.histogram, &sequences[&g].histogram), g))
            .filter(|&(bound, _)| bound > 0)
            .collect();
        candidates.sort_by_key(|&(bound, g)| (std::cmp::Reverse(bound), g));
        let masks = Masks::new(&a.shapes);
        let mut best: Vec<(usize, FuncIndex)> = Vec::new();
        for (bound, g) in candidates {
            if best.len() == FULL_ESTIMATES && best[FULL_ESTIMATES - 1].0 >= bound {
                break;
            }
            let common = masks.lcs(&sequences[&g].shapes);
            best.push((common, g));
            best.sort_by_key(|&(c, g)| (std::cmp::Reverse(c), g));
            best.truncate(FULL_ESTIMATES);
        }
        let chosen = best
            .iter()
            .filter_map(|&(_, g)| {
                let b = &sequences[&g];
                let saved = saved_instructions(a, b)?;
                let per_inst = (size(f) + size(g)) as f64 / (a.insts.len() + b.insts.len()) as f64;
                (saved > 0).then_some(((saved as f64 * per_inst) as u64, g))
            })
            .max_by_key(|&(bytes, g)| (bytes, std::cmp::Reverse(g)));
        if let Some((bytes, g)) = chosen {
            taken[f] = true;
            taken[g] = true;
            pairs.push(EstimatedPair {
                first: f,
                second: g,
                instructions: (a.insts.len(), sequences[&g].insts.len()),
                saved: bytes,
            });
        }
    }
    pairs
}

/// `func` as a sequence, its shapes named by `symbols`.
fn sequence(func: &Function, symbols: &mut HashMap<(Opcode, Type), u32>) -> Sequence {
    let mut insts = Vec::new();
    let mut opens = Vec::new();
    for block in func.layout.blocks() {
        let mut first = true;
        for inst in func.layout.block_insts(block) {
            let key = (func.dfg.insts[inst].opcode(), func.dfg.ctrl_typevar(inst));
            let next = symbols.len() as u32;
            let shape = *symbols.entry(key).or_insert(next);
            insts.push(Inst {
                shape,
                key: text_key(func, inst),
                args: func.dfg.inst_values(inst).collect(),
                results: func.dfg.inst_results(inst).to_vec(),
            });
            opens.push(first.then(|| func.dfg.block_params(block).to_vec()));
            first = false;
        }
    }
    let shapes: Vec<u32> = insts.iter().map(|i| i.shape).collect();
    let histogram = histogram(&shapes);
    Sequence {
        insts,
        opens,
        shapes,
        histogram,
    }
}

/// The instruction's text without its numbers of values and entities, a
/// callee by its name, hashed.
fn text_key(func: &Function, inst: cranelift_codegen::ir::Inst) -> u64 {
    use std::hash::{Hash, Hasher};
    let text = func.dfg.display_inst(inst).to_string();
    // Words like v3, block2, fn1, gv0, ss4 lose their numbers.
    let mut out = String::with_capacity(text.len());
    for (k, word) in text.split(|c: char| !c.is_ascii_alphanumeric()).enumerate() {
        if k > 0 {
            out.push(' ');
        }
        let prefix = word.trim_end_matches(|c: char| c.is_ascii_digit());
        let entity = matches!(
            prefix,
            "v" | "block" | "fn" | "sig" | "gv" | "ss" | "dss" | "jt" | "mt" | "const"
        ) && prefix.len() < word.len();
        out.push_str(if entity { prefix } else { word });
    }
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    out.hash(&mut hasher);
    if let InstructionData::Call { func_ref, .. } = func.dfg.insts[inst] {
        func.dfg.ext_funcs[func_ref]
            .name
            .display(Some(&func.params))
            .to_string()
            .hash(&mut hasher);
    }
    hasher.finish()
}

/// The instructions a merge of `a` and `b` saves by the estimate of the module
/// doc, or `None` when the alignment is too large to estimate.
fn saved_instructions(a: &Sequence, b: &Sequence) -> Option<i64> {
    let pairs = lcs_pairs(&a.shapes, &b.shapes)?;
    // b's values that stand for a's: block parameters of blocks opened by an
    // aligned pair, and results of aligned pairs, position by position.
    let mut counterpart = HashMap::<Value, Value>::new();
    let mut cost = 2 * THUNK;
    let (mut next_a, mut next_b) = (0usize, 0usize);
    for &(i, j) in &pairs {
        if i > next_a || j > next_b {
            // A run of unaligned instructions on either side: kept, behind a
            // branch and a jump.
            cost += (i - next_a + j - next_b) as i64 + 2;
        }
        let (x, y) = (&a.insts[i], &b.insts[j]);
        if let (Some(pa), Some(pb)) = (&a.opens[i], &b.opens[j]) {
            for (&va, &vb) in pa.iter().zip(pb) {
                counterpart.insert(vb, va);
            }
        }
        cost += 1;
        cost += y
            .args
            .iter()
            .zip(&x.args)
            .filter(|&(vb, va)| counterpart.get(vb) != Some(va))
            .count() as i64;
        cost += i64::from(x.key != y.key || x.args.len() != y.args.len());
        for (&vb, &va) in y.results.iter().zip(&x.results) {
            counterpart.insert(vb, va);
        }
        next_a = i + 1;
        next_b = j + 1;
    }
    if next_a < a.insts.len() || next_b < b.insts.len() {
        cost += (a.insts.len() - next_a + b.insts.len() - next_b) as i64 + 2;
    }
    Some((a.insts.len() + b.insts.len()) as i64 - cost)
}

/// The aligned pairs of a longest common subsequence of `a` and `b`, by the
/// textbook table and its traceback; `None` when the table is too large.
fn lcs_pairs(a: &[u32], b: &[u32]) -> Option<Vec<(usize, usize)>> {
    let (n, m) = (a.len(), b.len());
    if n * m > MAX_CELLS {
        return None;
    }
    let width = m + 1;
    let mut table = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            table[i * width + j] = if a[i] == b[j] {
                table[(i + 1) * width + j + 1] + 1
            } else {
                table[(i + 1) * width + j].max(table[i * width + j + 1])
            };
        }
    }
    let (mut i, mut j, mut pairs) = (0, 0, Vec::new());
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if table[(i + 1) * width + j] >= table[i * width + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    Some(pairs)
}

/// The sorted (symbol, count) pairs of a sequence.
fn histogram(sequence: &[u32]) -> Vec<(u32, u32)> {
    let mut sorted = sequence.to_vec();
    sorted.sort_unstable();
    let mut out: Vec<(u32, u32)> = Vec::new();
    for s in sorted {
        match out.last_mut() {
            Some((last, count)) if *last == s => *count += 1,
            _ => out.push((s, 1)),
        }
    }
    out
}

/// The size of the multiset intersection of two histograms: a bound of the
/// longest common subsequence.
fn intersection(a: &[(u32, u32)], b: &[(u32, u32)]) -> usize {
    let (mut i, mut j, mut total) = (0, 0, 0usize);
    while i < a.len() && j < b.len() {
        match a[i].0.cmp(&b[j].0) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                total += a[i].1.min(b[j].1) as usize;
                i += 1;
                j += 1;
            }
        }
    }
    total
}

/// One sequence's match masks for the bit-parallel longest common subsequence
/// (Allison and Dix 1986, Hyyrö 2004): per symbol, the bits of its positions.
struct Masks {
    len: usize,
    by_symbol: HashMap<u32, Vec<u64>>,
}

impl Masks {
    fn new(a: &[u32]) -> Self {
        let words = a.len().div_ceil(64);
        let mut by_symbol = HashMap::<u32, Vec<u64>>::new();
        for (i, &s) in a.iter().enumerate() {
            by_symbol.entry(s).or_insert_with(|| vec![0; words])[i / 64] |= 1 << (i % 64);
        }
        Masks {
            len: a.len(),
            by_symbol,
        }
    }

    /// The length of the longest common subsequence with `b`: `v` has a zero
    /// bit per matched position, and each symbol of `b` sets
    /// `v = (v + u) | (v - u)` with `u = v & mask`.
    fn lcs(&self, b: &[u32]) -> usize {
        let words = self.len.div_ceil(64);
        let mut v = vec![u64::MAX; words];
        for s in b {
            let Some(mask) = self.by_symbol.get(s) else {
                continue;
            };
            let (mut carry, mut borrow) = (false, false);
            for w in 0..words {
                let u = v[w] & mask[w];
                let (sum, c1) = v[w].overflowing_add(u);
                let (sum, c2) = sum.overflowing_add(u64::from(carry));
                carry = c1 || c2;
                let (diff, b1) = v[w].overflowing_sub(u);
                let (diff, b2) = diff.overflowing_sub(u64::from(borrow));
                borrow = b1 || b2;
                v[w] = sum | diff;
            }
        }
        // Carries and borrows move up only: the bits past the end never reach
        // the sequence's own.
        (0..self.len)
            .filter(|&i| v[i / 64] >> (i % 64) & 1 == 0)
            .count()
    }
}
