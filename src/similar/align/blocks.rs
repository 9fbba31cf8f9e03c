//! Merging by block pairing: aligned pairs whose block structures differ
//! (HyFM-style, LCTES 2021), the alignment round after the others.
//!
//! Merging by alignment (`align.rs`) pairs blocks by position in the walk, so
//! both functions need the same blocks. Here the two walks' block sequences are
//! aligned first; blocks left without a partner are kept as they are, each
//! reached only from its own function's code.
//!
//! # Phases
//!
//! 1. **Profiles.** Each function left by the earlier rounds that has another of
//!    its signature within [`SIZE_FACTOR`] of its size (read from the layout) is
//!    walked into a [`SpannedEncoding`] (`align.rs`, phase 1) and profiled: its
//!    signature key, its instructions' shapes (sorted, a multiset) and, per block
//!    in walk order, its parameter types and instruction shapes.
//! 2. **Candidates.** Functions with the same signature are sorted by size; each
//!    is compared with the next [`WINDOW`] of at most [`SIZE_FACTOR`] times its
//!    size by the overlap of their shape multisets (at least
//!    [`MIN_OVERLAP_PERCENT`] of its own), and the [`ATTEMPTS`] best are tried:
//!    near-linear however large the program.
//! 3. **Block pairing** ([`pair_blocks`]). The block sequences are aligned
//!    (Needleman-Wunsch, each pair scored by the instructions the two blocks'
//!    common prefix and suffix of equal shapes could match); paired blocks have
//!    the same parameter types, and the entry blocks pair.
//! 4. **Alignment** (`Aligner::attempt_paired`). Within each paired block, the
//!    prefix, suffix and stretch of `align.rs`, the terminators allowed to differ
//!    as across CFGs (the rest of the block a stretch of its own). A terminator
//!    that names blocks (`jump`, `brif`) matches only when its targets pair,
//!    compared by block, not by the walk's block numbers (which differ once a
//!    block has no partner), and its arguments aligned (checked after the
//!    common suffix, which may define them); any other terminator naming
//!    blocks never matches.
//!    The pairs are then taken greedily, as `align.rs` does, each function with
//!    the partner that aligns with the most common instructions, when those pay
//!    for the stretches (`promising`); the planner prices them (`mod.rs`).
//!
//! # Why a merged pair computes what its members computed
//!
//! The merged body (`splice.rs`) is the first function with its stretches spliced
//! in and a copy of each of the second function's unpaired blocks. An unpaired
//! block of function *k* is entered only from function *k*'s own code: a matched
//! terminator branches only to paired blocks (checked by block), so an unpaired
//! block is a target only of a terminator in an arm of function *k* (a stretch
//! ending its block) or of another of its unpaired blocks. The entry blocks pair
//! and the selector is constant for a call, so run as function *k* the merged
//! body takes *k*'s arm at every branch on the selector and executes exactly
//! *k*'s instructions in *k*'s order. The second's unpaired blocks are copied
//! with each value mapped to the first function's aligned definition, to a copy,
//! or (an escape) to the join's parameter; they may name no stack slot, table or
//! global value, and their terminators are `jump`, `brif`, `br_table`, `return`
//! or `trap`. A stretch of function *k* may use a value of an unpaired block of
//! *k* (of a type with a placeholder): where the definition does not dominate
//! the use in the merged body, the use reads it through block parameters that
//! *k*'s edges fill with the value and the other's with a placeholder zero
//! (`splice/repair.rs`); run as *k*, *k*'s path passed the definition, so the
//! use reads what *k* read, and the other function never runs the use.
//! Stack slots are numbered by the walk by position, which unpaired blocks shift,
//! so the matched instructions must name their slots one to one, with equal
//! slots. Dominance is not assumed: Cranelift's verifier runs on every merged
//! body (a value of an arm that an unpaired block uses does not dominate it
//! after a join) and the pair is refused if it fails.

use super::anchors::{self, Anchored};
use super::{
    AlignScratch, Aligner, Alignment, BlockParts, Escape, MAX_STRETCHES, Refusal, Rules,
    STRETCH_COST, SpannedEncoding, Stretch, UNALIGNED, block_bound, can_copy, copyable_terminator,
    encode_spanned, has_placeholder, probe, shapes_of, signature_key, written_in,
};
use crate::identical::encode::walk_in_parallel;
use crate::ir::{FuncIndex, FunctionSet, parallel};
use cranelift_codegen::ir::{self, Block, BlockCall, Function, Inst, StackSlot};
use rustc_hash::{FxHashMap, FxHashSet, FxHasher};
use std::hash::{Hash, Hasher};
use std::ops::Range;

/// How many larger functions of the same signature each function is compared
/// with (by shape overlap) in its size-sorted bucket.
pub const WINDOW: usize = 32;

/// How many of those, best overlap first, are aligned with it.
pub const ATTEMPTS: usize = 3;

/// A partner at most this many times the function's instructions.
pub const SIZE_FACTOR: usize = 2;

/// At most this many differing stretches per pair (a block whose terminators
/// differ has one more; [`MAX_STRETCHES`] is for pairs of equal blocks).
pub const MAX_PAIRED_STRETCHES: usize = 4 * MAX_STRETCHES;

/// A candidate shares at least this percentage of the smaller function's
/// instruction shapes (the group is sorted by size, so the function itself).
pub const MIN_OVERLAP_PERCENT: usize = 50;

/// The block pairing's table is at most this many cells (blocks times blocks);
/// larger pairs are not tried.
const MAX_CELLS: usize = 1 << 16;

/// The same for the census, which also measures what larger pairs hold.
const CENSUS_MAX_CELLS: usize = 1 << 22;

/// What phase 2 and 3 read of a function.
pub(crate) struct Profile<'e> {
    /// The function.
    pub(crate) func: FuncIndex,
    encoding: &'e SpannedEncoding,
    /// Its signature's key (the stream before the first block).
    signature: u64,
    /// Each instruction's shape, in stream order.
    shapes: Vec<u64>,
    /// The same, sorted.
    sorted: Vec<u64>,
    /// Per block in walk order: its parameter types' key and its instructions
    /// (indices of `shapes`).
    blocks: Vec<(u64, Range<usize>)>,
}

impl<'e> Profile<'e> {
    fn new(func: FuncIndex, encoding: &'e SpannedEncoding) -> Option<Self> {
        let first = encoding.blocks.first()?;
        let hash = |tokens: &[u64]| {
            let mut h = FxHasher::default();
            tokens.hash(&mut h);
            h.finish()
        };
        let signature = hash(&encoding.tokens[..first.start as usize]);
        let shapes = shapes_of(encoding).to_vec();
        let mut sorted = shapes.clone();
        sorted.sort_unstable();
        let blocks = (0..encoding.blocks.len())
            .map(|k| {
                let parts = encoding.block(k);
                let header =
                    &encoding.tokens[parts.header.start as usize..parts.header.end as usize];
                (hash(header), parts.insts)
            })
            .collect();
        Some(Self {
            func,
            encoding,
            signature,
            shapes,
            sorted,
            blocks,
        })
    }

    /// Its instructions.
    fn size(&self) -> usize {
        self.shapes.len()
    }
}

/// How many shapes the two sorted multisets share.
pub(crate) fn overlap(a: &[u64], b: &[u64]) -> usize {
    let (mut i, mut j, mut n) = (0, 0, 0);
    while i < a.len() && j < b.len() {
        match a[i].cmp(&b[j]) {
            std::cmp::Ordering::Less => i += 1,
            std::cmp::Ordering::Greater => j += 1,
            std::cmp::Ordering::Equal => {
                n += 1;
                i += 1;
                j += 1;
            }
        }
    }
    n
}

/// Phase 3: the pairing of `a`'s and `b`'s blocks (walk indices, in order) that
/// maximises the summed [`block_bound`] of paired blocks, entry blocks paired,
/// only blocks of equal parameter types and a positive bound paired otherwise;
/// with that bound. `None` when the entries' parameters differ or the table would
/// have more than `max_cells` cells.
pub(crate) fn pair_blocks(
    a: &Profile<'_>,
    b: &Profile<'_>,
    max_cells: usize,
) -> Option<(Vec<(usize, usize)>, usize)> {
    let (n, m) = (a.blocks.len(), b.blocks.len());
    if n == 0 || m == 0 || a.blocks[0].0 != b.blocks[0].0 || n * m > max_cells {
        return None;
    }
    let score = |i: usize, j: usize| {
        let ((ka, ra), (kb, rb)) = (&a.blocks[i], &b.blocks[j]);
        if ka != kb || ra.is_empty() || rb.is_empty() {
            return None;
        }
        // Most cells differ in the first and the last instruction (the bound is 0).
        let (sa, sb) = (&a.shapes, &b.shapes);
        if sa[ra.start] != sb[rb.start] && sa[ra.end - 1] != sb[rb.end - 1] {
            return None;
        }
        let bound = block_bound(&sa[ra.clone()], &sb[rb.clone()]);
        (bound > 0).then_some(bound)
    };
    let entry = score(0, 0).unwrap_or(0);
    // best[i][j]: the best over blocks 1..=i of a and 1..=j of b (row-major,
    // (n) x (m), index 0 standing for "none").
    let mut best = vec![0usize; n * m];
    let at = |i: usize, j: usize| i * m + j;
    for i in 1..n {
        for j in 1..m {
            let diagonal = score(i, j).map(|s| best[at(i - 1, j - 1)] + s);
            let skip = best[at(i - 1, j)].max(best[at(i, j - 1)]);
            best[at(i, j)] = diagonal.map_or(skip, |d| d.max(skip));
        }
    }
    let mut pairs = Vec::new();
    let (mut i, mut j) = (n - 1, m - 1);
    while i > 0 && j > 0 {
        let here = best[at(i, j)];
        if here == best[at(i - 1, j)] {
            i -= 1;
        } else if here == best[at(i, j - 1)] {
            j -= 1;
        } else {
            pairs.push((i, j));
            i -= 1;
            j -= 1;
        }
    }
    pairs.push((0, 0));
    pairs.reverse();
    Some((pairs, entry + best[at(n - 1, m - 1)]))
}

/// Phases 1 and 2: the profiles of `functions` (those the walk supports),
/// grouped by signature, each group sorted by size.
fn profiles<'e>(
    functions: &[FuncIndex],
    encoded: &'e [Option<SpannedEncoding>],
) -> Vec<Vec<Profile<'e>>> {
    let mut all: Vec<Profile<'e>> = functions
        .iter()
        .zip(encoded)
        .filter_map(|(&f, e)| e.as_ref().and_then(|e| Profile::new(f, e)))
        .collect();
    all.sort_unstable_by_key(|p| (p.signature, p.size(), p.func));
    let mut groups: Vec<Vec<Profile<'e>>> = Vec::new();
    let mut last = None;
    for p in all {
        if last != Some(p.signature) {
            groups.push(Vec::new());
            last = Some(p.signature);
        }
        if let Some(group) = groups.last_mut() {
            group.push(p);
        }
    }
    groups.retain(|g| g.len() > 1);
    groups
}

/// Phase 2 in one signature group (sorted by size): for entry `i`, the
/// candidates among the next [`WINDOW`] within [`SIZE_FACTOR`] of its size
/// (`taken` ones left out), best shape overlap first, at most `limit`.
fn candidates(group: &[Profile<'_>], i: usize, taken: &[bool], limit: usize) -> Vec<usize> {
    let p = &group[i];
    let mut ranked: Vec<(usize, usize)> = (i + 1..group.len())
        .filter(|&j| !taken[j])
        .take(WINDOW)
        .take_while(|&j| group[j].size() <= SIZE_FACTOR * p.size().max(1))
        .map(|j| (overlap(&p.sorted, &group[j].sorted), j))
        // A pair shares at most its overlap; below half of the smaller
        // function's instructions the selector's branches and the entry points
        // eat what it could save.
        .filter(|&(o, _)| o > 0 && MIN_OVERLAP_PERCENT * p.size() <= 100 * o)
        .collect();
    ranked.sort_unstable_by_key(|&(o, j)| (std::cmp::Reverse(o), j));
    ranked.truncate(limit);
    ranked.into_iter().map(|(_, j)| j).collect()
}

/// Instructions a merge of two adds besides its stretches (the selector
/// parameter, the entry points' calls).
const PAIR_COST: u32 = 8;

/// Whether `alignment` has enough in common to pay for its stretches, in
/// instructions: the planner builds, verifies and prices only those (what a
/// pair saves is about the second's common code).
fn promising(alignment: &Alignment) -> bool {
    let stretches = u32::try_from(alignment.stretches.len()).unwrap_or(u32::MAX);
    alignment.common
        >= STRETCH_COST
            .saturating_mul(stretches)
            .saturating_add(PAIR_COST)
}

/// The functions of `functions` that another of the same signature could pair
/// with (within [`SIZE_FACTOR`] of its instruction count), read from the
/// layout: the only ones phase 1 walks.
fn with_partner(module: &FunctionSet, functions: &[FuncIndex]) -> Vec<FuncIndex> {
    let mut keyed: Vec<(u64, usize, FuncIndex)> = functions
        .iter()
        .map(|&f| {
            let func = &module.get(f).func;
            (signature_key(func), func.dfg.num_insts(), f)
        })
        .collect();
    keyed.sort_unstable();
    let mut keep = vec![false; keyed.len()];
    for i in 0..keyed.len() {
        let (key, size, _) = keyed[i];
        if let Some((next, bigger, _)) = keyed.get(i + 1)
            && *next == key
            && *bigger <= SIZE_FACTOR * size.max(1)
        {
            keep[i] = true;
            keep[i + 1] = true;
        }
    }
    let mut walked: Vec<FuncIndex> = keyed
        .iter()
        .zip(&keep)
        .filter(|(_, k)| **k)
        .map(|(e, _)| e.2)
        .collect();
    walked.sort_unstable();
    walked
}

/// Aligns two profiled functions with paired blocks (a table of at most
/// `max_cells`), the one first in input order as the first (its body is the one
/// a merge copies).
fn align_profiles(
    module: &FunctionSet,
    x: &Profile<'_>,
    y: &Profile<'_>,
    scratch: &mut AlignScratch,
    rules: Rules,
    max_cells: usize,
) -> Result<Alignment, Refusal> {
    let (first, second) = if x.func < y.func { (x, y) } else { (y, x) };
    let (pairing, _) = pair_blocks(first, second, max_cells).ok_or(Refusal::Structure)?;
    let fa = &module.get(first.func).func;
    let fb = &module.get(second.func).func;
    let mut aligner = Aligner::new(first.encoding, fa, second.encoding, fb, scratch, rules);
    let whole = aligner.attempt_paired(second.func, &pairing);
    aligner.undo(0);
    // As `Aligner::align` does: cut at anchors too, offered to the planner
    // when it duplicates less.
    match whole {
        Ok(whole) if rules.anchors => Ok(aligner.offer_cut(whole, |aligner| {
            let cut = aligner.attempt_paired(second.func, &pairing);
            aligner.undo(0);
            cut
        })),
        whole => whole,
    }
}

/// The round of merging by block pairing: pairs of `functions` (of `module`)
/// that align with paired blocks, each once, the first of a pair before the
/// second in input order, ordered by first.
pub(crate) fn find_paired_pairs(
    module: &FunctionSet,
    functions: &[FuncIndex],
    rules: Rules,
) -> Vec<(FuncIndex, Alignment)> {
    let walked = with_partner(module, functions);
    let encoded = walk_in_parallel(module, &walked, |func, scratch| {
        encode_spanned(func, module, scratch)
    });
    let groups = profiles(&walked, &encoded);
    let rules = Rules { cfg: true, ..rules };
    let mut pairs: Vec<(FuncIndex, Alignment)> = parallel::map(&groups, 1, |group| {
        let mut taken = vec![false; group.len()];
        let mut scratch = AlignScratch::default();
        let mut pairs = Vec::new();
        for i in 0..group.len() {
            if taken[i] {
                continue;
            }
            let mut best: Option<(usize, Alignment)> = None;
            for j in candidates(group, i, &taken, ATTEMPTS) {
                let Ok(alignment) =
                    align_profiles(module, &group[i], &group[j], &mut scratch, rules, MAX_CELLS)
                else {
                    continue;
                };
                if best
                    .as_ref()
                    .is_none_or(|(_, b)| alignment.common > b.common)
                {
                    best = Some((j, alignment));
                }
            }
            if let Some((j, alignment)) = best
                && promising(&alignment)
            {
                taken[i] = true;
                taken[j] = true;
                pairs.push((group[i].func.min(group[j].func), alignment));
            }
        }
        pairs
    })
    .into_iter()
    .flatten()
    .collect();
    pairs.sort_by_key(|(first, _)| *first);
    pairs
}

/// One function of the census of block pairing ([`census`]).
#[derive(Copy, Clone, Debug)]
pub(crate) struct PairingCensus {
    /// The function.
    pub(crate) func: FuncIndex,
    /// Its best partner by shape overlap among functions of its signature within
    /// [`SIZE_FACTOR`] of its size, if any, taken greedily (each once).
    pub(crate) partner: Option<FuncIndex>,
    /// Of the partner and it, the smaller one's instructions.
    pub(crate) smaller: usize,
    /// The instructions the paired blocks' common prefixes and suffixes could
    /// match ([`pair_blocks`]'s bound): an upper bound of what aligns.
    pub(crate) bound: usize,
    /// With a partner: whether the two align with paired blocks (and are
    /// [`promising`] then), or what refused them.
    pub(crate) attempt: Option<Result<bool, Refusal>>,
}

/// The census of block pairing on `functions`: for each of `of` (in `functions`),
/// largest first, its best untaken partner (all of `functions` are candidates)
/// and the bound of what pairing blocks could match. Diagnostics only.
pub(crate) fn census(
    module: &FunctionSet,
    functions: &[FuncIndex],
    of: &[FuncIndex],
    escapes: bool,
    one_sided: bool,
) -> Vec<PairingCensus> {
    let mut scratch = AlignScratch::default();
    let rules = Rules {
        escapes,
        one_sided,
        cfg: true,
        anchors: false,
    };
    let encoded = walk_in_parallel(module, functions, |func, scratch| {
        encode_spanned(func, module, scratch)
    });
    let mut wanted = cranelift_codegen::entity::SecondaryMap::<FuncIndex, bool>::new();
    for &f in of {
        wanted[f] = true;
    }
    let mut out = Vec::new();
    let mut seen = cranelift_codegen::entity::SecondaryMap::<FuncIndex, bool>::new();
    for group in profiles(functions, &encoded) {
        let mut taken = vec![false; group.len()];
        let mut order: Vec<usize> = (0..group.len())
            .filter(|&i| wanted[group[i].func])
            .collect();
        order.sort_by_key(|&i| std::cmp::Reverse(group[i].size()));
        for i in order {
            if taken[i] {
                continue;
            }
            taken[i] = true;
            seen[group[i].func] = true;
            // Either side within the size factor: smaller partners too.
            let p = &group[i];
            let mut best: Option<(usize, usize)> = None;
            for j in (0..group.len()).filter(|&j| !taken[j]) {
                let q = &group[j];
                if q.size() > SIZE_FACTOR * p.size().max(1)
                    || p.size() > SIZE_FACTOR * q.size().max(1)
                {
                    continue;
                }
                let o = overlap(&p.sorted, &q.sorted);
                if o > 0 && best.is_none_or(|(b, _)| o > b) {
                    best = Some((o, j));
                }
            }
            let row = match best {
                Some((_, j)) => {
                    taken[j] = true;
                    let (x, y) = if p.func < group[j].func {
                        (p, &group[j])
                    } else {
                        (&group[j], p)
                    };
                    let bound = pair_blocks(x, y, CENSUS_MAX_CELLS).map_or(0, |(_, b)| b);
                    let attempt =
                        align_profiles(module, x, y, &mut scratch, rules, CENSUS_MAX_CELLS)
                            .map(|alignment| promising(&alignment));
                    PairingCensus {
                        func: p.func,
                        partner: Some(group[j].func),
                        smaller: p.size().min(group[j].size()),
                        bound,
                        attempt: Some(attempt),
                    }
                }
                None => PairingCensus {
                    func: p.func,
                    partner: None,
                    smaller: p.size(),
                    bound: 0,
                    attempt: None,
                },
            };
            out.push(row);
        }
    }
    for &f in of {
        if !seen[f] {
            out.push(PairingCensus {
                func: f,
                partner: None,
                smaller: 0,
                bound: 0,
                attempt: None,
            });
        }
    }
    out
}

/// The stack slots `inst` names, or `None` if it names a dynamic one.
fn slots_of(func: &Function, inst: Inst) -> Option<Vec<StackSlot>> {
    // Dynamic slots are refused outright: the check is for sized ones.
    let probe = probe(func, inst);
    (!probe.dynamic_stack_slot).then_some(probe.stack_slots)
}

/// Whether the matched instruction pairs `matched` name stack slots one to one
/// (a bijection, each slot equal to its partner): the walk numbers a slot by the
/// position of its first use, which unpaired blocks shift, so equal tokens alone
/// do not say the slots correspond.
fn slots_correspond(fa: &Function, fb: &Function, matched: &[(Inst, Inst)]) -> bool {
    let mut a_to_b: FxHashMap<StackSlot, StackSlot> = FxHashMap::default();
    let mut b_to_a: FxHashMap<StackSlot, StackSlot> = FxHashMap::default();
    for &(ia, ib) in matched {
        let (Some(sa), Some(sb)) = (slots_of(fa, ia), slots_of(fb, ib)) else {
            return false;
        };
        if sa.len() != sb.len() {
            return false;
        }
        for (x, y) in sa.into_iter().zip(sb) {
            if *a_to_b.entry(x).or_insert(y) != y || *b_to_a.entry(y).or_insert(x) != x {
                return false;
            }
            let (dx, dy) = (&fa.sized_stack_slots[x], &fb.sized_stack_slots[y]);
            if dx.kind != dy.kind
                || dx.size != dy.size
                || dx.align_shift != dy.align_shift
                || dx.key != dy.key
            {
                return false;
            }
        }
    }
    true
}

/// [`slots_correspond`] for an alignment of functions with the same blocks
/// (`align.rs`): the instructions outside the stretches of each block, paired in
/// order. A stack slot's token after its first use is the stream position of
/// that first use, and differing stretches shift positions, so a first use of
/// one slot in the first function and of another in the second can fall at the
/// same position, and later uses of the two then have equal tokens although
/// they name slots that do not correspond (a miscompile this refuses).
pub(crate) fn same_cfg_slots_correspond(
    a: &SpannedEncoding,
    fa: &Function,
    b: &SpannedEncoding,
    fb: &Function,
    alignment: &Alignment,
) -> bool {
    // Without stack slots no instruction names one (the walk refuses undeclared
    // ones), so nothing can collide: the common case, checked for free.
    let no_slots =
        |f: &Function| f.sized_stack_slots.is_empty() && f.dynamic_stack_slots.is_empty();
    if no_slots(fa) && no_slots(fb) {
        return true;
    }
    let mut in_stretch_a: FxHashSet<Inst> = FxHashSet::default();
    let mut in_stretch_b: FxHashSet<Inst> = FxHashSet::default();
    for stretch in &alignment.stretches {
        in_stretch_a.extend(&stretch.first);
        in_stretch_b.extend(&stretch.second);
    }
    if a.blocks.len() != b.blocks.len() {
        return false;
    }
    let mut matched = Vec::new();
    for k in 0..a.blocks.len() {
        let outside = |e: &SpannedEncoding, skip: &FxHashSet<Inst>| -> Vec<Inst> {
            e.insts[e.block(k).insts]
                .iter()
                .map(|&(_, i)| i)
                .filter(|i| !skip.contains(i))
                .collect()
        };
        let (xa, xb) = (outside(a, &in_stretch_a), outside(b, &in_stretch_b));
        if xa.len() != xb.len() {
            return false;
        }
        matched.extend(xa.into_iter().zip(xb));
    }
    slots_correspond(fa, fb, &matched)
}

/// The block pairing as [`Aligner::branches_match`] reads it.
struct Walks {
    /// For each of the first function's walk indices, the second's paired one.
    b_of_a: Vec<Option<usize>>,
    /// Each block of the first function walked, with its walk index.
    walk_a: FxHashMap<Block, usize>,
    /// The same for the second function.
    walk_b: FxHashMap<Block, usize>,
}

impl Aligner<'_> {
    /// The end of phase 4, as `align.rs` does it after its block loop
    /// (`escapes_and_values`): each stretch's escapes and one-sided escapes, and
    /// the aligned values its second side uses; fails if a stretch uses a value
    /// no rule allows.
    fn stretch_values(
        &mut self,
        second: FuncIndex,
        mut stretches: Vec<Stretch>,
        common: u32,
    ) -> Result<Alignment, Refusal> {
        // Kept: the unpaired blocks' one-sided escapes are found in them next.
        let spans = self.spans.clone();
        let values = self.escapes_and_values(&spans, &mut stretches)?;
        Ok(Alignment {
            second,
            stretches,
            values,
            common,
            blocks: Vec::new(),
            unpaired: Vec::new(),
            first_unpaired: Vec::new(),
            cut: None,
        })
    }

    /// Whether terminators `ta` (of `a`) and `tb` (of `b`), each a `jump` or
    /// `brif`, have the same opcode, branch to paired blocks (`b_of_a`: for each
    /// of `a`'s walk indices, `b`'s paired one), pass the same number of block
    /// arguments, all values, and name aligned values in the same places; no
    /// escape is aligned here. The walk's block numbers are not compared: they
    /// differ once a block has no partner.
    fn branches_match(
        &self,
        ta: (Inst, Range<u32>),
        tb: (Inst, Range<u32>),
        walks: &Walks,
    ) -> bool {
        self.branches_compare(ta, tb, walks, false)
    }

    /// As [`Self::branches_match`], but an operand pair may also be two values
    /// aligned with nothing yet (which a common suffix not matched yet may
    /// align): whether the terminators can match once it is.
    fn branches_may_match(
        &self,
        ta: (Inst, Range<u32>),
        tb: (Inst, Range<u32>),
        walks: &Walks,
    ) -> bool {
        self.branches_compare(ta, tb, walks, true)
    }

    /// [`Self::branches_match`], or with `lenient` [`Self::branches_may_match`].
    fn branches_compare(
        &self,
        (ta, ra): (Inst, Range<u32>),
        (tb, rb): (Inst, Range<u32>),
        walks: &Walks,
        lenient: bool,
    ) -> bool {
        let Walks {
            b_of_a,
            walk_a,
            walk_b,
        } = walks;
        use ir::Opcode;
        let (da, db) = (&self.fa.dfg, &self.fb.dfg);
        let op = da.insts[ta].opcode();
        if op != db.insts[tb].opcode() || !matches!(op, Opcode::Jump | Opcode::Brif) {
            return false;
        }
        let calls_a = da.insts[ta].branch_destination(&da.jump_tables, &da.exception_tables);
        let calls_b = db.insts[tb].branch_destination(&db.jump_tables, &db.exception_tables);
        if calls_a.len() != calls_b.len() {
            return false;
        }
        for (ca, cb) in calls_a.iter().zip(calls_b) {
            let (ba, bb) = (ca.block(&da.value_lists), cb.block(&db.value_lists));
            let (Some(&ia), Some(&ib)) = (walk_a.get(&ba), walk_b.get(&bb)) else {
                return false;
            };
            if b_of_a[ia] != Some(ib) || ca.len(&da.value_lists) != cb.len(&db.value_lists) {
                return false;
            }
            let all_values = |c: &BlockCall, pool: &ir::ValueListPool| {
                c.args(pool)
                    .all(|arg| matches!(arg, ir::BlockArg::Value(_)))
            };
            if !all_values(ca, &da.value_lists) || !all_values(cb, &db.value_lists) {
                return false;
            }
        }
        // Same opcode and argument counts: the walk wrote the same grammar, so
        // the value operands correspond in order.
        let operands_a = ra.filter(|&p| self.a.is_operand[p as usize]);
        let operands_b: Vec<u32> = rb.filter(|&p| self.b.is_operand[p as usize]).collect();
        let operands_a: Vec<u32> = operands_a.collect();
        operands_a.len() == operands_b.len()
            && operands_a.iter().zip(&operands_b).all(|(&pa, &pb)| {
                match (self.a.operand_target(pa), self.b.operand_target(pb)) {
                    (Some(x), Some(y)) => {
                        self.scratch.a_to_b[x as usize] == y
                            || (lenient
                                && self.scratch.a_to_b[x as usize] == UNALIGNED
                                && self.scratch.b_to_a[y as usize] == UNALIGNED)
                    }
                    _ => false,
                }
            })
    }

    /// Phase 4: the alignment of the two functions with their blocks paired as
    /// `pairing` says (walk indices of `a` and `b`, in order, the entries first).
    /// Leaves what it aligned in the scratch (the caller undoes it).
    pub(crate) fn attempt_paired(
        &mut self,
        second: FuncIndex,
        pairing: &[(usize, usize)],
    ) -> Result<Alignment, Refusal> {
        let (a, b) = (self.a, self.b);
        if pairing.first() != Some(&(0, 0)) {
            return Err(Refusal::Structure);
        }
        if !self.matches(0..a.blocks[0].start, 0..b.blocks[0].start) {
            return Err(Refusal::Structure);
        }
        let mut b_of_a = vec![None; a.blocks.len()];
        let mut a_of_b = vec![None; b.blocks.len()];
        for &(i, j) in pairing {
            b_of_a[i] = Some(j);
            a_of_b[j] = Some(i);
        }
        // Each block's index in its function's walk.
        let walk_index = |e: &SpannedEncoding| -> FxHashMap<Block, usize> {
            e.blocks
                .iter()
                .enumerate()
                .map(|(k, s)| (s.block, k))
                .collect()
        };
        let (walk_a, walk_b) = (walk_index(a), walk_index(b));
        let walks = Walks {
            b_of_a: b_of_a.clone(),
            walk_a,
            walk_b,
        };
        let mut stretches = Vec::new();
        // Stretches closed by anchors (`anchors.rs`), apart from those of the
        // differing blocks.
        let mut anchors = 0;
        let mut matched: Vec<(Inst, Inst)> = Vec::new();
        self.spans.clear();
        self.ends.clear();
        let mut common = 0;
        for &(ka, kb) in pairing {
            let (pa, pb): (BlockParts, BlockParts) = (a.block(ka), b.block(kb));
            if !self.matches(pa.header.clone(), pb.header.clone()) {
                return Err(Refusal::Structure);
            }
            let (na, nb) = (pa.insts.len(), pb.insts.len());
            if na == 0 || nb == 0 {
                return Err(Refusal::Structure);
            }
            let inst_a = |i: usize| a.inst_span(pa.insts.start + i, &pa);
            let inst_b = |i: usize| b.inst_span(pb.insts.start + i, &pb);
            let at_a = |i: usize| a.insts[pa.insts.start + i].1;
            let at_b = |i: usize| b.insts[pb.insts.start + i].1;
            let (term_a, term_b) = (at_a(na - 1), at_b(nb - 1));
            // A terminator naming blocks matches only by `branches_match`; one
            // naming none (a return, a trap) by its tokens.
            let names_blocks = |func: &Function, t: Inst| {
                !func.dfg.insts[t]
                    .branch_destination(&func.dfg.jump_tables, &func.dfg.exception_tables)
                    .is_empty()
                    || func.dfg.insts[t].opcode().is_branch()
            };
            let branches = names_blocks(self.fa, term_a) || names_blocks(self.fb, term_b);
            // The terminators are left out of the prefix: matched last, below.
            let mut prefix = 0;
            while prefix < (na - 1).min(nb - 1) && self.matches(inst_a(prefix), inst_b(prefix)) {
                matched.push((at_a(prefix), at_b(prefix)));
                prefix += 1;
            }
            let terminators_equal = |this: &mut Self| {
                if branches {
                    this.branches_match((term_a, inst_a(na - 1)), (term_b, inst_b(nb - 1)), &walks)
                } else {
                    this.terminators_match(&inst_a, &inst_b, na, nb)
                }
            };
            let whole = prefix == na - 1 && prefix == nb - 1;
            let term_equal = terminators_equal(self);
            if whole && term_equal && (branches || self.matches(inst_a(na - 1), inst_b(nb - 1))) {
                matched.push((term_a, term_b));
                common += na as u32;
                self.progress = common;
                continue;
            }
            self.progress = common + prefix as u32;
            // Where the terminators differ, the block ends in a stretch of the
            // two terminators alone (`Stretch::suffix` `None`); what differs
            // before them is a stretch with a join like any other, so that its
            // values may escape.
            // A branch whose operands the common suffix defines cannot match
            // before the suffix is aligned: when it would match but for those
            // (`branches_may_match`), the suffix is tried with the terminators
            // matched last, strictly, and if they fail there the block ends in
            // a stretch of the terminators after all.
            let lenient = branches
                && !term_equal
                && !whole
                && self.branches_may_match(
                    (term_a, inst_a(na - 1)),
                    (term_b, inst_b(nb - 1)),
                    &walks,
                );
            let mut ending = !(term_equal || lenient) || whole;
            'block: loop {
                let (la, lb) = if ending { (na - 1, nb - 1) } else { (na, nb) };
                if la > prefix || lb > prefix {
                    if stretches.len() - anchors >= MAX_PAIRED_STRETCHES {
                        return Err(Refusal::TooManyStretches);
                    }
                    // A common suffix of equal shape (with matching terminators, the
                    // terminator last, matched by `branches_match` when it names
                    // blocks), shrunk past any instruction that fails.
                    let room = la.min(lb) - prefix;
                    let mut suffix = usize::from(!ending);
                    while suffix < room
                        && self.same_shape(&inst_a(la - 1 - suffix), &inst_b(lb - 1 - suffix))
                    {
                        suffix += 1;
                    }
                    // What the anchors add, taken back if the block is tried
                    // again as ending in a stretch.
                    let (before_anchors, matched_before) =
                        (self.before_cut(&stretches), matched.len());
                    let anchored = if self.split {
                        self.split_middle(
                            (&pa, &pb),
                            (prefix, prefix),
                            (la - suffix, lb - suffix),
                            &mut stretches,
                            Some(&mut matched),
                            anchors::MAX_ANCHORS - anchors,
                        )?
                    } else {
                        Anchored::none((prefix, prefix))
                    };
                    let (start_a, start_b) = anchored.open_from;
                    loop {
                        let mark = self.scratch.log.len();
                        self.open = Some((
                            inst_a(start_a).start..inst_a(la - suffix).start,
                            inst_b(start_b).start..inst_b(lb - suffix).start,
                        ));
                        let plain = if ending { suffix } else { suffix - 1 };
                        let failed = (0..plain).position(|j| {
                            !self.matches(inst_a(la - suffix + j), inst_b(lb - suffix + j))
                        });
                        let failed = failed.or_else(|| {
                            if ending {
                                return None;
                            }
                            let last = if branches {
                                terminators_equal(self)
                            } else {
                                self.matches(inst_a(na - 1), inst_b(nb - 1))
                            };
                            (!last).then_some(suffix - 1)
                        });
                        match failed {
                            None => break,
                            Some(j) if ending || j + 1 < suffix => {
                                self.undo(mark);
                                suffix -= j + 1;
                            }
                            Some(_) => {
                                // The terminator itself fails (it uses a value of the
                                // stretch in a way no escape allows).
                                self.undo(mark);
                                self.open = None;
                                if lenient && !ending {
                                    self.take_back_cut(before_anchors, &mut stretches);
                                    matched.truncate(matched_before);
                                    ending = true;
                                    continue 'block;
                                }
                                return Err(self.why_differ(&inst_a(na - 1), &inst_b(nb - 1)));
                            }
                        }
                    }
                    self.open = None;
                    for j in 0..suffix {
                        matched.push((at_a(la - suffix + j), at_b(lb - suffix + j)));
                    }
                    common += (prefix + suffix) as u32 + anchored.common;
                    anchors += anchored.closed;
                    let (ea, eb) = (la - suffix, lb - suffix);
                    let tokens_a = inst_a(start_a).start..inst_a(ea).start;
                    let tokens_b = inst_b(start_b).start..inst_b(eb).start;
                    let insts_a: Vec<Inst> = (start_a..ea).map(at_a).collect();
                    let insts_b: Vec<Inst> = (start_b..eb).map(at_b).collect();
                    if !insts_a.is_empty() || !insts_b.is_empty() {
                        let block = a.blocks[ka].block;
                        stretches.push(self.joined_stretch(block, insts_a, at_a(ea), insts_b)?);
                        self.spans.push((tokens_a, tokens_b));
                        self.ends.push(false);
                    }
                } else {
                    common += prefix as u32;
                }
                if ending {
                    if stretches.len() - anchors >= MAX_PAIRED_STRETCHES {
                        return Err(Refusal::TooManyStretches);
                    }
                    if !copyable_terminator(self.fb, term_b) {
                        return Err(Refusal::TerminatorNotCopied);
                    }
                    stretches.push(Stretch {
                        block: a.blocks[ka].block,
                        first: vec![term_a],
                        suffix: None,
                        second: vec![term_b],
                        escapes: Vec::new(),
                        first_only: Vec::new(),
                        second_only: Vec::new(),
                    });
                    self.spans
                        .push((inst_a(na - 1).start..pa.end, inst_b(nb - 1).start..pb.end));
                    self.ends.push(true);
                }
                break;
            }
        }
        if !slots_correspond(self.fa, self.fb, &matched) {
            return Err(Refusal::StretchNamesEntity);
        }
        // The second's unpaired blocks, copied: what they name must be copyable.
        let unpaired: Vec<usize> = (0..b.blocks.len())
            .filter(|&k| a_of_b[k].is_none())
            .collect();
        for &k in &unpaired {
            let parts = b.block(k);
            let n = parts.insts.len();
            for i in parts.insts.clone() {
                let inst = b.insts[i].1;
                let ok = if i + 1 == parts.insts.start + n {
                    copyable_terminator(self.fb, inst)
                } else {
                    can_copy(self.fb, inst)
                };
                if !ok {
                    return Err(Refusal::TerminatorNotCopied);
                }
            }
        }
        if stretches.is_empty() && unpaired.is_empty() {
            return Err(Refusal::Structure);
        }
        // Each function's unpaired blocks, whose values its stretches may use.
        let ranges = |e: &SpannedEncoding, partner: &[Option<usize>]| -> Vec<Range<u32>> {
            (0..e.blocks.len())
                .filter(|&k| partner[k].is_none())
                .map(|k| e.blocks[k].start..e.block(k).end)
                .collect()
        };
        self.unpaired = [ranges(a, &b_of_a), ranges(b, &a_of_b)];
        let alignment = self.stretch_values(second, stretches, common);
        self.unpaired = [Vec::new(), Vec::new()];
        let mut alignment = alignment?;
        // The aligned values the second's unpaired blocks use (values of its own
        // unpaired blocks and of its arms are mapped when copied).
        let other = Refusal::ValueEscapes(Escape::Other);
        for &k in &unpaired {
            let parts = b.block(k);
            for p in parts.header.start..parts.end {
                if !b.is_operand[p as usize] {
                    continue;
                }
                let d = b.operand_target(p).ok_or(other)?;
                let da = self.scratch.b_to_a[d as usize];
                if da != UNALIGNED {
                    let pair = b.defined_at(d).zip(a.defined_at(da));
                    alignment.values.push(pair.ok_or(other)?);
                }
            }
        }
        // Values a stretch with a join defines that an unpaired block of the same
        // function uses: one-sided escapes through the join (`splice.rs` accepts
        // their uses in that function's unpaired blocks, which run under the
        // same selector value as its arms).
        let first_unpaired: Vec<usize> = (0..a.blocks.len())
            .filter(|&k| b_of_a[k].is_none())
            .collect();
        for (first, blocks) in [(true, &first_unpaired), (false, &unpaired)] {
            let encoding = if first { a } else { b };
            for &k in blocks {
                let parts = encoding.block(k);
                for p in parts.header.start..parts.end {
                    if !encoding.is_operand[p as usize] {
                        continue;
                    }
                    let d = encoding.operand_target(p).ok_or(other)?;
                    let aligned = if first {
                        self.scratch.a_to_b[d as usize]
                    } else {
                        self.scratch.b_to_a[d as usize]
                    };
                    if aligned != UNALIGNED {
                        continue;
                    }
                    let Some(j) = self
                        .spans
                        .iter()
                        .position(|(ra, rb)| written_in(if first { ra } else { rb }, d))
                    else {
                        // Defined in an unpaired block of its own: kept or copied.
                        continue;
                    };
                    if self.ends[j] {
                        // In an arm that branches on: the verifier decides.
                        continue;
                    }
                    let value = encoding.defined_at(d).ok_or(other)?;
                    let func = if first { self.fa } else { self.fb };
                    if !self.escapes
                        || !self.one_sided
                        || !has_placeholder(func.dfg.value_type(value))
                    {
                        return Err(Refusal::ValueEscapes(Escape::IntoLaterStretch));
                    }
                    let stretch = &mut alignment.stretches[j];
                    let list = if first {
                        &mut stretch.first_only
                    } else {
                        &mut stretch.second_only
                    };
                    if !list.contains(&value) {
                        list.push(value);
                    }
                }
            }
        }
        self.spans.clear();
        alignment.values.sort_unstable();
        alignment.values.dedup();
        alignment.first_unpaired = first_unpaired.iter().map(|&k| a.blocks[k].block).collect();
        alignment.blocks = pairing
            .iter()
            .map(|&(i, j)| (b.blocks[j].block, a.blocks[i].block))
            .collect();
        alignment.unpaired = unpaired.iter().map(|&k| b.blocks[k].block).collect();
        Ok(alignment)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlap_counts_the_multiset_intersection() {
        assert_eq!(overlap(&[1, 1, 2, 5], &[1, 2, 2, 5, 7]), 3);
        assert_eq!(overlap(&[], &[1]), 0);
    }

    #[test]
    fn block_bound_is_at_most_the_shorter_block() {
        assert_eq!(block_bound(&[1, 2, 3], &[1, 9, 3]), 2);
        assert_eq!(block_bound(&[1, 1], &[1, 1, 1]), 2);
    }
}
