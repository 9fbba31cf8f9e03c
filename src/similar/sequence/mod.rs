//! Merging by sequence alignment: pairs of functions of one signature merged
//! whole, whatever their block structures and whichever values their
//! instructions read (SalSSA, PLDI 2020, on HyFM's block pairing, LCTES 2021).
//! The last round of merging by alignment, off by default
//! ([`SimilarOptions::align_sequence`](super::SimilarOptions::align_sequence)).
//!
//! Every other kind of merging by alignment requires aligned instructions to
//! read the same values (an operand names the definition at the same place).
//! Here two instructions align when they are equal but for their value
//! operands, and an operand that differs is chosen by `select` on the selector.
//!
//! # Phases
//!
//! 1. **Candidates** ([`find_sequence_pairs`], here). The functions left by
//!    the other rounds are bucketed by signature and sorted by size, largest
//!    first; each is compared with the next [`WINDOW`] of at least half its
//!    size by the overlap of their instruction shapes (opcode and controlling
//!    type, as a multiset), and the [`ATTEMPTS`] best, sharing at least
//!    [`MIN_OVERLAP_PERCENT`] of the larger one's shapes, are aligned.
//! 2. **Keys** (`align.rs`, with `import.rs`). Each instruction but the
//!    terminators is imported into the merged body's entities (callees,
//!    signatures, memory flags, constants by content; stack slots by number)
//!    with its values left out, and hashed with its controlling type and
//!    operand types; a constant's value is left out too.
//! 3. **Block pairing** (`align.rs`). The two layouts' blocks are aligned
//!    (Needleman-Wunsch, each pair scored by the keys the two blocks share);
//!    paired blocks have the same parameter types, and the entry blocks pair.
//! 4. **Instruction alignment** (`align.rs`). The keys of each paired block
//!    are aligned by their longest common subsequence, giving the
//!    [`SequenceAlignment`] (`alignment.rs`). A pair is written only when the
//!    instructions it shares outweigh what its arms add
//!    (`SequenceAlignment::promising`); then it is priced (`plan.rs`), and each
//!    function takes the partner that saves the most.
//! 5. **Code generation** ([`build_sequence_body`], `write.rs`). The merged
//!    body is written with `cranelift-frontend`'s SSA builder: every value of
//!    either member is a variable (an aligned instruction's results and a
//!    paired block's parameters are one variable for both, and so are two
//!    *one-sided* values an aligned instruction reads at the same operand:
//!    SalSSA's phi coalescing), so a value one member defines and uses after
//!    the members' paths have joined reaches its use through block parameters
//!    the builder adds.
//!
//! # Why the merged body computes what each member computed
//!
//! The merged body takes the members' parameters and a selector (`0` runs the
//! first, `1` the second). In a paired block, each run of instructions only
//! one member has is an arm behind a branch on the selector, and the arms
//! rejoin; a paired block whose terminators differ (in anything but value
//! operands, their targets compared as merged blocks) branches on the selector
//! to each member's terminator. An unpaired block is a target only of its own
//! member's terminators. So, run as member *k* (the selector is a parameter,
//! constant for a call), the merged body executes exactly *k*'s instructions,
//! aligned or *k*'s own, in *k*'s order, with *k*'s immediates, callees, flags
//! and slots (aligned instructions are equal but for value operands, checked
//! in full when written, not by their hash), and besides them only pure
//! instructions of the other member (no side effect, trap, memory access or
//! call: moved out of the arms), whose values *k* never reads. Each operand
//! reads the variable of *k*'s value: one both members share, or a `select` on
//! the selector of the two members' variables. A variable holds the value of
//! the last definition executed on the path (the SSA builder's contract), and
//! *k*'s path passes *k*'s definition before each of *k*'s uses as in *k*, so
//! it reads what *k* read. A variable two one-sided values share is defined on
//! *k*'s path only by *k*'s instruction; a pure instruction moved out of an
//! arm defines a variable of its own member only. Where a variable has no
//! definition on a path (the other member's), the builder reads a zero that
//! only the other member's `select` arms and block arguments ever see. Stack
//! slot `n` of the merged body is as large and as aligned as both members'
//! slot `n`, which only one member's code uses in a call. A load only one
//! member runs loses `can_move`, so that Cranelift cannot hoist it where the
//! other member's path would run it with that member's placeholder address.
//! Cranelift's verifier checks every merged body.

mod align;
mod alignment;
mod import;
mod write;

pub(crate) use align::align_sequences;
pub(crate) use alignment::SequenceAlignment;
pub(crate) use write::build_sequence_body;

use super::align::blocks::overlap;
use crate::ir::{FuncIndex, FunctionSet, parallel, reads_machine_state};
use cranelift_codegen::ir;
use rustc_hash::{FxHashMap, FxHasher};
use std::hash::{Hash, Hasher};

/// How many functions after a function in its size-sorted bucket are compared
/// with it by shape overlap.
pub const WINDOW: usize = 32;

/// How many of those, best overlap first, are aligned with it.
pub const ATTEMPTS: usize = 3;

/// A candidate shares at least this percentage of the larger function's
/// instruction shapes.
pub const MIN_OVERLAP_PERCENT: usize = 50;

/// What phase 1 reads of a function.
struct Profile {
    func: FuncIndex,
    /// Its instructions' shapes (opcode and controlling type), sorted.
    shapes: Vec<u64>,
}

/// Phase 1 and the alignments: pairs of `functions` (of `module`) merged by
/// sequence alignment, each function in at most one, as `price` plans them.
/// Readers of machine state and functions without a body are left out. In
/// each bucket of one signature, largest first, a function not yet taken is
/// aligned with the [`ATTEMPTS`] best of the next [`WINDOW`] by shape overlap
/// (the first member of a pair is the one first in the module), each pair is
/// priced, and it takes the partner whose plan saves the most (`price`
/// returns what a plan saves, if anything). A function no partner pays for
/// gives the plan of its first attempt (a refusal, with its reason).
pub(crate) fn find_sequence_pairs<P: Send>(
    module: &FunctionSet,
    functions: &[FuncIndex],
    price: impl Fn(FuncIndex, &SequenceAlignment) -> (Option<u64>, P) + Sync,
) -> Vec<P> {
    let mut buckets: FxHashMap<&ir::Signature, Vec<Profile>> = FxHashMap::default();
    for &f in functions {
        let func = &*module.get(f).func;
        if func.layout.entry_block().is_none() || reads_machine_state(func) {
            continue;
        }
        let mut shapes: Vec<u64> = func
            .layout
            .blocks()
            .flat_map(|b| func.layout.block_insts(b))
            .map(|inst| {
                let mut hasher = FxHasher::default();
                func.dfg.insts[inst].opcode().hash(&mut hasher);
                func.dfg.ctrl_typevar(inst).hash(&mut hasher);
                hasher.finish()
            })
            .collect();
        shapes.sort_unstable();
        buckets
            .entry(&func.signature)
            .or_default()
            .push(Profile { func: f, shapes });
    }
    let mut buckets: Vec<Vec<Profile>> = buckets
        .into_values()
        .filter(|bucket| bucket.len() > 1)
        .collect();
    for bucket in &mut buckets {
        bucket.sort_by_key(|p| (std::cmp::Reverse(p.shapes.len()), p.func));
    }
    buckets.sort_by_key(|bucket| bucket[0].func);
    parallel::map(&buckets, 1, |bucket| pair_bucket(module, bucket, &price))
        .into_iter()
        .flatten()
        .collect()
}

/// The plans of one bucket of [`find_sequence_pairs`], sorted largest first.
fn pair_bucket<P>(
    module: &FunctionSet,
    bucket: &[Profile],
    price: &impl Fn(FuncIndex, &SequenceAlignment) -> (Option<u64>, P),
) -> Vec<P> {
    let mut taken = vec![false; bucket.len()];
    let mut plans = Vec::new();
    for i in 0..bucket.len() {
        if taken[i] {
            continue;
        }
        let size = bucket[i].shapes.len();
        let mut candidates: Vec<(usize, usize)> = (i + 1..bucket.len().min(i + 1 + WINDOW))
            .filter(|&j| !taken[j] && bucket[j].shapes.len() * 2 >= size)
            .map(|j| (overlap(&bucket[i].shapes, &bucket[j].shapes), j))
            .filter(|&(overlap, _)| overlap * 100 >= MIN_OVERLAP_PERCENT * size)
            .collect();
        candidates.sort_by_key(|&(overlap, j)| (std::cmp::Reverse(overlap), j));
        let mut best: Option<(u64, usize, P)> = None;
        let mut refused = None;
        for &(_, j) in candidates.iter().take(ATTEMPTS) {
            let (a, b) = (bucket[i].func, bucket[j].func);
            let (first, second) = if a < b { (a, b) } else { (b, a) };
            let aligned =
                align_sequences(&module.get(first).func, &module.get(second).func, second);
            let Some(alignment) = aligned.ok().filter(SequenceAlignment::promising) else {
                continue;
            };
            match price(first, &alignment) {
                (Some(saved), plan) => {
                    if best.as_ref().is_none_or(|&(most, _, _)| saved > most) {
                        best = Some((saved, j, plan));
                    }
                }
                (None, plan) => {
                    refused.get_or_insert(plan);
                }
            }
        }
        match (best, refused) {
            (Some((_, j, plan)), _) => {
                taken[i] = true;
                taken[j] = true;
                plans.push(plan);
            }
            (None, Some(plan)) => plans.push(plan),
            (None, None) => {}
        }
    }
    plans
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::similar::similar_filetests;
    use crate::similar::splice::NotSpliced;
    use cranelift_codegen::ir::UserFuncName;

    /// Every pair of functions of one signature in the similar filetests is
    /// aligned and its merged body built: the body verifies (checked by the
    /// builder) or the pair is refused with a reason; most are built.
    #[test]
    fn filetest_pairs_build_or_are_refused() {
        let (mut built, mut refused) = (0, 0);
        for (path, module) in similar_filetests("") {
            let functions: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
            for (k, &a) in functions.iter().enumerate() {
                for &b in &functions[k + 1..] {
                    let (fa, fb) = (&module.get(a).func, &module.get(b).func);
                    if fa.signature != fb.signature {
                        continue;
                    }
                    let result = align_sequences(fa, fb, b).and_then(|alignment| {
                        build_sequence_body(
                            &module,
                            fa,
                            UserFuncName::testcase("merged"),
                            &alignment,
                        )
                    });
                    match result {
                        Ok(_) => built += 1,
                        Err(NotSpliced(reason)) => {
                            eprintln!("{}: {a} {b}: {reason}", path.display());
                            refused += 1;
                        }
                    }
                }
            }
        }
        eprintln!("built {built}, refused {refused}");
        assert!(built > 0 && built > refused);
    }
}
