//! `FunctionComparator`: a total order over encoded CLIF functions.
//!
//! Functions are ordered by the key `(hash, length, tokens)`, where every token that
//! names a module-defined function is read as that function's current equivalence
//! class. A lexicographic order over a key computed from each function alone is
//! reflexive, antisymmetric and transitive, which is what a `BTreeMap` needs; and
//! since the token grammar is deterministic, `Equal` means the two functions have
//! the same structure with callees in the same classes.

use super::encode::{
    FunctionEncoding, Unsupported, WalkOptions, WalkScratch, encode_for_comparison,
    encode_for_comparison_into, walk_in_parallel,
};
use super::fingerprint::{
    FingerprintScratch, Operands, PREFIX_INSTRUCTIONS, first_look, first_look_and_hole_blind,
    has_address_instructions, hash_function, hash_function_and_callees,
    hash_function_hole_blind_and_callees, hash_function_with_operands, prefix_and_table_key,
    table_key, with_callees,
};
use super::hash::{HashedFunction, StructuralHash};
use super::tree::{FunctionOrder, group_equal};
use crate::ir::{FuncIndex, FunctionSet, Reads, SparseFunctionMap, parallel};
use cranelift_codegen::entity::{EntityRef, SecondaryMap, entity_impl};
use std::cell::Cell;
use std::cmp::Ordering;
use std::time::{Duration, Instant};

/// An equivalence class of functions: how the comparator reads a reference to a
/// module function once classes are known ([`CalleeView::Classes`]).
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct ClassId(u32);
entity_impl!(ClassId, "class");

/// How references to module-defined functions are read.
#[derive(Copy, Clone)]
pub enum CalleeView<'a> {
    /// Every module function is in one class: the optimistic start of refinement.
    Optimistic,
    /// Through the given equivalence classes.
    Classes(&'a SecondaryMap<FuncIndex, ClassId>),
}

/// The encodings of a module's functions with their hashes: everything the
/// comparator reads.
#[derive(Default)]
pub struct EncodedFunctions {
    /// Encoding per function: for every function the walk handled
    /// ([`Self::from_module`]), or only for the functions that share their hash
    /// with another ([`Self::hash_first`]), so kept for those only (an
    /// encoding in place would take 128 bytes per function). The comparator
    /// orders a function without an encoding by index, equal only to itself.
    /// Read with [`Self::encoding`].
    encodings: SparseFunctionMap<FunctionEncoding>,
    /// Structural hash per function the walk handled: with [`Self::hash_first`],
    /// its prefix key unless it was walked whole (`fingerprint::first_look`).
    pub hashes: SecondaryMap<FuncIndex, StructuralHash>,
    /// Whether the walk handled the function.
    pub supported: SecondaryMap<FuncIndex, bool>,
    /// Instructions per function the walk handled: reachable ones, or with
    /// [`Self::hash_first`] the instruction table's length of a function it did not
    /// walk whole (`fingerprint::first_look`).
    pub instruction_counts: SecondaryMap<FuncIndex, u32>,
    /// Whether the function's address is taken anywhere in the module. With
    /// [`Self::hash_first`], the uses in [`Self::unresolved`] functions are left
    /// out until [`Self::resolve_address_taken`] looks for them.
    pub address_taken: SecondaryMap<FuncIndex, bool>,
    /// Functions whose address uses [`Self::hash_first`] did not find, in input
    /// order: those longer than their prefix that it did not walk whole.
    pub unresolved: Vec<FuncIndex>,
    /// Functions the walk could not handle, with the reason.
    pub unsupported: Vec<(FuncIndex, String)>,
    /// Number of functions.
    pub len: usize,
    /// The similar-function merge's fingerprint per function, when
    /// [`Self::hash_first`] was asked for them (empty otherwise).
    pub hole_blind: SecondaryMap<FuncIndex, StructuralHash>,
    /// With [`Self::hash_first`]: the tree's groups, made as each hash bucket
    /// was encoded. The encodings are then callee tokens only
    /// ([`FunctionEncoding::callees_only`]), which only refinement can read.
    pub optimistic_groups: Option<OptimisticGroups>,
}

/// The candidates grouped into runs equal with callees read optimistically
/// ([`CalleeView::Optimistic`]), bucket by bucket: the tree's result
/// (`partition.rs`, phase 2), made by [`EncodedFunctions::hash_first`] while each
/// bucket's encodings are at hand.
#[derive(Clone, Debug, Default)]
pub struct OptimisticGroups {
    /// Every group (members in input order), ordered by first member.
    pub groups: Vec<Vec<FuncIndex>>,
    /// The comparisons the grouping made.
    pub comparisons: u64,
    /// The candidates, in input order: the members the walk handled of the
    /// buckets with two or more such members (what [`EncodedFunctions::candidates`]
    /// finds again by sorting every function by hash).
    pub candidates: Vec<FuncIndex>,
    /// Every reference of a candidate to a module function, as (callee,
    /// caller): what `partition::calls_of` finds again by reading every
    /// candidate's encoding.
    pub calls: Vec<(FuncIndex, FuncIndex)>,
}

/// One hash bucket, encoded and grouped ([`encode_and_group`]).
struct EncodedBucket {
    /// The members the walk handled, in input order, with their encodings
    /// (callee tokens only).
    encoded: Vec<(FuncIndex, FunctionEncoding)>,
    /// The members it could not handle.
    unsupported: Vec<(FuncIndex, String)>,
    groups: Vec<Vec<FuncIndex>>,
    comparisons: u64,
}

/// The most rounds [`EncodedFunctions::refine_by_callees`] makes: how far up
/// the calls a difference in the callees is carried before encoding. Real call
/// chains of near-copies are short (resvg's deepest takes four); the
/// comparator sets apart what the rounds leave.
const CALLEE_ROUNDS: usize = 16;

/// Buckets with more members than this have their members encoded in parallel;
/// smaller ones are one task each.
const LARGE_BUCKET: usize = 64;

/// Encodes the members of one hash bucket (with `encode`), groups them with
/// callees read optimistically (the tree: [`group_bucket`]) while their
/// streams are in cache, then keeps a copy of only their callee tokens, which
/// is all refinement reads of a member of a group. So a candidate's whole
/// stream lives only while its bucket is grouped: the whole encodings are
/// returned beside the bucket, for their buffers to serve the next bucket
/// ([`encode_for_comparison_into`]).
fn encode_and_group(
    bucket: &[FuncIndex],
    encode: impl FnOnce(&[FuncIndex]) -> Vec<Result<FunctionEncoding, Unsupported>>,
) -> (EncodedBucket, Vec<FunctionEncoding>) {
    let mut members = Vec::with_capacity(bucket.len());
    let mut encodings = Vec::with_capacity(bucket.len());
    let mut unsupported = Vec::new();
    for (&f, result) in bucket.iter().zip(encode(bucket)) {
        match result {
            Ok(encoding) => {
                members.push(f);
                encodings.push(encoding);
            }
            Err(e) => unsupported.push((f, e.reason)),
        }
    }
    let (groups, comparisons) = group_bucket(&members, &encodings);
    let encoded = members
        .into_iter()
        .zip(encodings.iter().map(FunctionEncoding::callees_only))
        .collect();
    let bucket = EncodedBucket {
        encoded,
        unsupported,
        groups,
        comparisons,
    };
    (bucket, encodings)
}

impl EncodedFunctions {
    /// Walks, encodes and hashes every function of `module` (in parallel:
    /// [`crate::ir::parallel`]).
    pub fn from_module(module: &FunctionSet, options: WalkOptions) -> Self {
        let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
        let encoded = hash_and_encode(module, &all, options);
        let mut out = Self::empty(module);
        for (&f, (hashed, result)) in all.iter().zip(encoded) {
            match result {
                Ok(encoding) => {
                    let hash = hashed.hash;
                    out.record(f, hash, encoding.address_taken(), encoding.instructions());
                    out.set_encoding(f, encoding);
                }
                Err(e) => out.unsupported.push((f, e.reason)),
            }
        }
        out
    }

    /// What the pass uses: takes a first look at every function
    /// ([`first_look`]: a hash of a prefix of its encoding), hashes whole, with a
    /// walk that stores nothing ([`hash_function`]), only the functions longer
    /// than the prefix whose prefix key another function shares, then encodes
    /// only the functions whose hash another function shares (the only ones the
    /// comparator is asked about). A function's hash is its walk's if it was
    /// walked whole, refined by its callees' hashes ([`with_callees`]), its prefix
    /// key otherwise: equal encodings have equal prefix keys and equal lengths, so
    /// they are walked alike and get equal hashes, and functions of one class call
    /// functions of one class, whose hashes are equal. In a module of short
    /// functions (`prefixes_pay`) every function is walked whole instead, reading
    /// how operands are defined too ([`Operands::Hashed`]: that walk is all the
    /// pass looks at before encoding), and not refined. Address uses are the same as
    /// [`Self::from_module`]'s, and so are the counts of the functions walked
    /// whole (the others count their instruction table: [`first_look`]). The
    /// hashing walks do not look at value uses, so a function using a value
    /// before its definition (which the verifier rejects) is only found
    /// unsupported here if it is a candidate. With `hole_blind` (whether
    /// callee-load offsets are holes), the same looks and walks compute the
    /// similar merge's fingerprints too ([`Self::hole_blind`]): the hole-blind
    /// prefix key of a function, or its whole walk's fingerprint when its
    /// hole-blind prefix key another shares (in a module of short functions,
    /// every function's whole walk's, as
    /// [`hole_blind_fingerprint`](super::fingerprint::hole_blind_fingerprint)
    /// computes it). The candidates are encoded bucket by bucket, and each
    /// bucket is grouped by the tree at once ([`Self::optimistic_groups`]),
    /// after which only its members' callee tokens are kept. Returns the time
    /// the looks and walks took and the time the encoding and grouping took.
    pub fn hash_first(
        module: &FunctionSet,
        options: WalkOptions,
        hole_blind: Option<bool>,
    ) -> (Self, Duration, Duration) {
        let start = Instant::now();
        let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
        let mut out = Self::empty(module);
        match hole_blind {
            Some(callee_loads) if !prefixes_pay(module) => {
                let walked = module.map_walk(
                    &all,
                    Reads::Body,
                    16,
                    FingerprintScratch::default,
                    |s, func| {
                        let operands = Operands::Hashed;
                        hash_function_hole_blind_and_callees(
                            func,
                            module,
                            callee_loads,
                            operands,
                            s,
                        )
                    },
                );
                for (&f, (h, blind, _)) in all.iter().zip(&walked) {
                    out.record(f, h.hash, &h.address_taken, h.instructions);
                    out.hole_blind[f] = *blind;
                }
                // The functions whose hash another shares are refined by their
                // callees' hashes.
                let shared = out.candidates();
                out.refine_by_callees(shared.iter().map(|&f| (f, &walked[f.index()].2[..])));
            }
            Some(callee_loads) => {
                // Both prefix keys in one look; then the functions longer than
                // the prefix whose key of either kind another shares are walked
                // whole, in one walk for both fingerprints.
                let looked = module.map_walk(
                    &all,
                    Reads::Prefix(PREFIX_INSTRUCTIONS),
                    16,
                    FingerprintScratch::default,
                    |s, func| first_look_and_hole_blind(func, module, callee_loads, s),
                );
                for (&f, (look, blind)) in all.iter().zip(&looked) {
                    let h = &look.hashed;
                    out.record(f, h.hash, &h.address_taken, h.instructions);
                    out.hole_blind[f] = *blind;
                }
                let longer = |f: &FuncIndex| !looked[f.index()].0.whole;
                let exact_shared: Vec<FuncIndex> =
                    out.candidates().into_iter().filter(longer).collect();
                let mut shared: Vec<FuncIndex> = buckets(&out.hole_blind, all.iter().copied())
                    .into_iter()
                    .flatten()
                    .filter(longer)
                    .chain(exact_shared.iter().copied())
                    .collect();
                shared.sort_unstable();
                shared.dedup();
                let walked = module.map_walk(
                    &shared,
                    Reads::Body,
                    16,
                    FingerprintScratch::default,
                    |s, func| {
                        let operands = Operands::Skipped;
                        hash_function_hole_blind_and_callees(
                            func,
                            module,
                            callee_loads,
                            operands,
                            s,
                        )
                    },
                );
                for (&f, (h, blind, _)) in shared.iter().zip(&walked) {
                    let exact = exact_shared.binary_search(&f).is_ok();
                    let hash = if exact { h.hash } else { out.hashes[f] };
                    out.record(f, hash, &h.address_taken, h.instructions);
                    out.hole_blind[f] = *blind;
                }
                out.refine_by_callees(
                    shared
                        .iter()
                        .zip(&walked)
                        .filter(|(f, _)| exact_shared.binary_search(f).is_ok())
                        .map(|(&f, (_, _, callees))| (f, &callees[..])),
                );
                out.unresolved = all
                    .iter()
                    .copied()
                    .filter(|f| longer(f) && shared.binary_search(f).is_err())
                    .collect();
            }
            None if !prefixes_pay(module) => {
                let hashed = module.map_walk(
                    &all,
                    Reads::Body,
                    16,
                    FingerprintScratch::default,
                    |s, func| hash_function_with_operands(func, module, s),
                );
                for (&f, h) in all.iter().zip(hashed) {
                    out.record(f, h.hash, &h.address_taken, h.instructions);
                }
            }
            None => {
                let looked = module.map_walk(
                    &all,
                    Reads::Prefix(PREFIX_INSTRUCTIONS),
                    16,
                    FingerprintScratch::default,
                    |s, func| first_look(func, module, s),
                );
                for (&f, look) in all.iter().zip(&looked) {
                    let h = &look.hashed;
                    out.record(f, h.hash, &h.address_taken, h.instructions);
                }
                // Functions longer than the prefix whose prefix key another shares
                // are walked whole if their table key another of them shares too.
                let longer_shared: Vec<FuncIndex> = out
                    .candidates()
                    .into_iter()
                    .filter(|&f| !looked[f.index()].whole)
                    .collect();
                let table_keys = module.map_walk(
                    &longer_shared,
                    Reads::Body,
                    16,
                    || (),
                    |_, func| table_key(func),
                );
                for (&f, &table) in longer_shared.iter().zip(&table_keys) {
                    out.hashes[f] = prefix_and_table_key(out.hashes[f], table);
                }
                let mut shared: Vec<FuncIndex> = buckets(&out.hashes, longer_shared.into_iter())
                    .into_iter()
                    .flatten()
                    .collect();
                shared.sort_unstable();
                out.walk_and_refine(module, &shared);
                let walked_whole = |f: FuncIndex| shared.binary_search(&f).is_ok();
                out.unresolved = all
                    .iter()
                    .copied()
                    .filter(|&f| !looked[f.index()].whole && !walked_whole(f))
                    .collect();
            }
        }
        let buckets = out.hash_buckets();
        let time_hash = start.elapsed();
        let start = Instant::now();
        let (large, small): (Vec<&[FuncIndex]>, Vec<&[FuncIndex]>) = buckets
            .iter()
            .map(Vec::as_slice)
            .partition(|bucket| bucket.len() > LARGE_BUCKET);
        // Per worker: the walk's scratch, and the buffers of the last bucket's
        // encodings, which the next bucket's are written into.
        let worker = || (WalkScratch::default(), Vec::<FunctionEncoding>::new());
        let mut encoded = parallel::map_init_indexed(
            &small,
            1,
            worker,
            |(scratch, buffers), position, bucket| {
                // Buckets hold two or three members: the records of the
                // bucket after next, the bodies of the next.
                let ahead =
                    |distance: usize| small.get(position + distance).copied().unwrap_or_default();
                module.prefetch_ahead(ahead(2), ahead(1), Reads::Body);
                let (encoded, used) = encode_and_group(bucket, |members| {
                    let encode = |&f: &FuncIndex| {
                        let func = &module.get(f).func;
                        let buffer = buffers.pop().unwrap_or_default();
                        encode_for_comparison_into(func, module, options, scratch, buffer)
                    };
                    members.iter().map(encode).collect()
                });
                buffers.extend(used);
                encoded
            },
        );
        for bucket in large {
            encoded.push(
                encode_and_group(bucket, |members| {
                    walk_in_parallel(module, members, |func, scratch| {
                        encode_for_comparison(func, module, options, scratch)
                    })
                })
                .0,
            );
        }
        let mut groups = OptimisticGroups::default();
        for bucket in encoded {
            if bucket.encoded.len() > 1 {
                for (caller, encoding) in &bucket.encoded {
                    groups.candidates.push(*caller);
                    let calls = encoding.callees().map(|callee| (callee, *caller));
                    groups.calls.extend(calls);
                }
            }
            for (f, encoding) in bucket.encoded {
                out.set_encoding(f, encoding);
            }
            // The walk is deterministic, so this cannot happen; if it did, the
            // function would simply never be merged.
            for (f, reason) in bucket.unsupported {
                out.supported[f] = false;
                out.unsupported.push((f, reason));
            }
            groups.groups.extend(bucket.groups);
            groups.comparisons += bucket.comparisons;
        }
        groups.groups.sort_unstable_by_key(|g| g[0]);
        groups.candidates.sort_unstable();
        out.optimistic_groups = Some(groups);
        out.unsupported.sort_by_key(|(f, _)| *f);
        (out, time_hash, start.elapsed())
    }

    /// Walks `functions` whole ([`hash_function_and_callees`]), records what the
    /// walks find, then refines their hashes by their callees'
    /// ([`Self::refine_by_callees`]).
    fn walk_and_refine(&mut self, module: &FunctionSet, functions: &[FuncIndex]) {
        let walked = module.map_walk(
            functions,
            Reads::Body,
            16,
            FingerprintScratch::default,
            |s, func| hash_function_and_callees(func, module, s),
        );
        for (&f, (h, _)) in functions.iter().zip(&walked) {
            self.record(f, h.hash, &h.address_taken, h.instructions);
        }
        self.refine_by_callees(
            functions
                .iter()
                .zip(&walked)
                .map(|(&f, (_, callees))| (f, &callees[..])),
        );
    }

    /// Refines the hashes of the functions of `walked` (each with its callees,
    /// call by call) by their callees' hashes ([`with_callees`]), round after
    /// round, as lld's ICF propagates hashes along relocations:
    ///
    /// 1. **Group.** The functions of `walked` that share their hash are
    ///    grouped; a function alone in its group is never merged and is left
    ///    as it is.
    /// 2. **Refine.** Every member of a group gets its hash refined by its
    ///    callees' hashes as they stood after the last round (all read before
    ///    any is written).
    /// 3. **Split.** Each group splits by the refined hashes, and members left
    ///    alone leave. The rounds end when one splits no group, or after
    ///    [`CALLEE_ROUNDS`].
    ///
    /// Equal functions stay in one group round after round: they call, call for
    /// call, functions that are equal (so in one group, refined together) or
    /// that were not walked (whose hashes never change). So they keep equal
    /// hashes. Each round carries a difference one call further up: on resvg a
    /// chain of callers of callers that differ only in what they call at the
    /// bottom is set apart in four rounds (60 candidates after one, 12 after
    /// four), before any of it is encoded.
    fn refine_by_callees<'c>(
        &mut self,
        walked: impl Iterator<Item = (FuncIndex, &'c [FuncIndex])>,
    ) {
        // Phase 1: group.
        let mut by_hash: Vec<(StructuralHash, FuncIndex, &[FuncIndex])> = walked
            .map(|(f, callees)| (self.hashes[f], f, callees))
            .collect();
        by_hash.sort_unstable_by_key(|&(hash, f, _)| (hash, f));
        let mut groups: Vec<Vec<(FuncIndex, &[FuncIndex])>> = by_hash
            .chunk_by(|a, b| a.0 == b.0)
            .filter(|group| group.len() > 1)
            .map(|group| group.iter().map(|&(_, f, callees)| (f, callees)).collect())
            .collect();
        for _ in 0..CALLEE_ROUNDS {
            // Phase 2: refine.
            let refined: Vec<StructuralHash> = groups
                .iter()
                .flatten()
                .map(|&(f, callees)| with_callees(self.hashes[f], callees, &self.hashes))
                .collect();
            let members = groups.iter().flatten().map(|&(f, _)| f);
            for (f, &hash) in members.zip(&refined) {
                self.hashes[f] = hash;
            }
            // Phase 3: split.
            let mut split = false;
            let mut next = Vec::with_capacity(groups.len());
            for mut group in groups {
                let first = self.hashes[group[0].0];
                if group.iter().all(|&(f, _)| self.hashes[f] == first) {
                    next.push(group);
                    continue;
                }
                split = true;
                group.sort_by_key(|&(f, _)| self.hashes[f]);
                next.extend(
                    group
                        .chunk_by(|a, b| self.hashes[a.0] == self.hashes[b.0])
                        .filter(|part| part.len() > 1)
                        .map(<[_]>::to_vec),
                );
            }
            if !split {
                break;
            }
            groups = next;
        }
    }

    /// Finds the address uses of the [`Self::unresolved`] functions among
    /// `naming` (those naming one of a set of functions, `FunctionSet::naming`)
    /// that have a `func_addr` or global-value instruction, by walking them
    /// whole: afterwards [`Self::address_taken`] is exact for every function of
    /// that set (for the pass, the members of its classes: the only functions
    /// whose address being taken changes the plan). A function that names none
    /// of them, or has no such instruction (`has_address_instructions`), cannot
    /// take their address, and is not walked.
    pub fn resolve_address_taken(
        &mut self,
        module: &FunctionSet,
        naming: &SecondaryMap<FuncIndex, bool>,
    ) {
        if self.unresolved.is_empty() {
            return;
        }
        let to_walk: Vec<FuncIndex> = std::mem::take(&mut self.unresolved)
            .into_iter()
            .filter(|&f| naming[f] && has_address_instructions(&module.get(f).func))
            .collect();
        let walked = module.map_walk(
            &to_walk,
            Reads::Body,
            16,
            FingerprintScratch::default,
            |s, func| hash_function(func, module, s),
        );
        for h in walked {
            for &target in &h.address_taken {
                self.address_taken[target] = true;
            }
        }
    }

    fn empty(module: &FunctionSet) -> Self {
        let mut out = Self {
            len: module.len(),
            ..Self::default()
        };
        for (f, _) in module.iter() {
            out.address_taken[f] = module.address_taken_outside(f);
        }
        out
    }

    /// The encoding of `f`, if it has one.
    pub fn encoding(&self, f: FuncIndex) -> Option<&FunctionEncoding> {
        self.encodings.get(f)
    }

    /// Sets the encoding of `f`.
    pub fn set_encoding(&mut self, f: FuncIndex, encoding: FunctionEncoding) {
        self.encodings.insert(f, encoding);
    }

    fn record(&mut self, f: FuncIndex, hash: StructuralHash, taken: &[FuncIndex], insts: u32) {
        self.supported[f] = true;
        self.hashes[f] = hash;
        self.instruction_counts[f] = insts;
        for &target in taken {
            self.address_taken[target] = true;
        }
    }

    /// The functions the walk handled, grouped by hash: one bucket per hash that
    /// two or more of them share, each in input order, the buckets ordered by hash.
    pub fn hash_buckets(&self) -> Vec<Vec<FuncIndex>> {
        let handled = (0..self.len)
            .map(FuncIndex::new)
            .filter(|&f| self.supported[f]);
        buckets(&self.hashes, handled)
    }

    /// Functions the walk handled whose hash at least one other such function
    /// shares, in input order: the only functions that can be equal to another.
    pub fn candidates(&self) -> Vec<FuncIndex> {
        let mut candidates = self.hash_buckets().concat();
        candidates.sort_unstable();
        candidates
    }

    /// Instructions of `f`, as [`Self::instruction_counts`] (0 if the walk could
    /// not handle it).
    pub fn instructions(&self, f: FuncIndex) -> u64 {
        u64::from(self.instruction_counts[f])
    }
}

/// `functions` grouped by their key in `keys`: one bucket per key that two or more
/// of them share, each in the order given, the buckets ordered by key.
fn buckets(
    keys: &SecondaryMap<FuncIndex, StructuralHash>,
    functions: impl Iterator<Item = FuncIndex>,
) -> Vec<Vec<FuncIndex>> {
    // Plain pairs sort faster than indices keyed through the map.
    let mut by_key: Vec<(StructuralHash, FuncIndex)> = functions.map(|f| (keys[f], f)).collect();
    by_key.sort_unstable();
    by_key
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|run| run.len() > 1)
        .map(|run| run.iter().map(|&(_, f)| f).collect())
        .collect()
}

/// Whether first looks at prefixes ([`first_look`]) are worth taking in `module`:
/// whether at least two thirds of its instructions lie beyond the functions'
/// first `PREFIX_INSTRUCTIONS` (by the length of their instruction tables). A
/// prefix saves walking the rest of a function whose prefix key no other shares,
/// and costs a second look at the functions whose key another does; in a module
/// of short functions there is little rest to save. On the corpus programs
/// 89–97% of the instructions lie beyond the prefixes (the pass is 1.6–4.4×
/// faster with them); on the generated modules of 10k functions (5–200
/// instructions each, 62–74% of them candidates) 47%, where prefixes made
/// the pass about 20% slower.
fn prefixes_pay(module: &FunctionSet) -> bool {
    let (mut total, mut beyond) = (0u64, 0u64);
    for (_, def) in module.iter() {
        let length = def.func.dfg.num_insts() as u64;
        total += length;
        beyond += length.saturating_sub(u64::from(PREFIX_INSTRUCTIONS));
    }
    3 * beyond >= 2 * total
}

/// Hashes ([`hash_function`]) and encodes for the comparator
/// ([`encode_for_comparison`]) each of `functions` of `module`, in parallel
/// ([`crate::ir::parallel`]), keeping their order, with one scratch of each walk per
/// worker.
pub fn hash_and_encode(
    module: &FunctionSet,
    functions: &[FuncIndex],
    options: WalkOptions,
) -> Vec<(HashedFunction, Result<FunctionEncoding, Unsupported>)> {
    let scratches = || (WalkScratch::default(), FingerprintScratch::default());
    module.map_walk(
        functions,
        Reads::Body,
        16,
        scratches,
        |(walk, hash), func| {
            let hashed = hash_function(func, module, hash);
            (hashed, encode_for_comparison(func, module, options, walk))
        },
    )
}

/// Compares encoded functions; see the module documentation for the order.
pub struct FunctionComparator<'a> {
    functions: &'a EncodedFunctions,
    view: CalleeView<'a>,
    /// Whether every pair compared is known equal with callees read
    /// optimistically ([`Self::within_classes`]).
    within_classes: bool,
    comparisons: Cell<u64>,
}

impl<'a> FunctionComparator<'a> {
    /// A comparator reading callees through `view`.
    pub fn new(functions: &'a EncodedFunctions, view: CalleeView<'a>) -> Self {
        Self {
            functions,
            view,
            within_classes: false,
            comparisons: Cell::new(0),
        }
    }

    /// A comparator reading callees through `classes`, for refinement: it
    /// compares only functions of one class of the tree or a split of one, which
    /// are equal with callees read optimistically ([`CalleeView::Optimistic`]).
    /// Such functions have equal hashes and lengths and equal tokens but at
    /// their callee positions, so when those positions are the same the order
    /// is decided by the classes of the callees alone, and only those are read
    /// (in a debug build, checked against the whole comparison).
    pub fn within_classes(
        functions: &'a EncodedFunctions,
        classes: &'a SecondaryMap<FuncIndex, ClassId>,
    ) -> Self {
        Self {
            within_classes: true,
            ..Self::new(functions, CalleeView::Classes(classes))
        }
    }

    /// Number of comparisons made so far.
    pub fn comparisons(&self) -> u64 {
        self.comparisons.get()
    }

    /// Compares two functions. Functions without an encoding are ordered by index
    /// and equal only to themselves.
    pub fn compare(&self, a: FuncIndex, b: FuncIndex) -> Ordering {
        self.comparisons.set(self.comparisons.get() + 1);
        let (ea, eb) = match (self.functions.encoding(a), self.functions.encoding(b)) {
            (Some(ea), Some(eb)) => (ea, eb),
            (None, None) => return a.cmp(&b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
        };
        // Callee tokens alone order two functions only where the rest of their
        // streams is known equal: within a class of the tree.
        assert!(
            self.within_classes || !(ea.is_callees_only() || eb.is_callees_only()),
            "encodings reduced to their callees compared outside refinement"
        );
        if self.within_classes && ea.callee_positions() == eb.callee_positions() {
            let order = self.compare_callees(ea, eb);
            debug_assert_eq!(order, self.compare_whole(a, b, ea, eb));
            return order;
        }
        self.compare_whole(a, b, ea, eb)
    }

    /// The order of the module documentation: hash, length, tokens.
    fn compare_whole(
        &self,
        a: FuncIndex,
        b: FuncIndex,
        ea: &FunctionEncoding,
        eb: &FunctionEncoding,
    ) -> Ordering {
        self.functions.hashes[a]
            .cmp(&self.functions.hashes[b])
            .then_with(|| ea.tokens().len().cmp(&eb.tokens().len()))
            .then_with(|| self.compare_tokens(ea, eb))
    }

    /// The tokens at the callee positions, which `a` and `b` share, read through
    /// the view, in order.
    fn compare_callees(&self, a: &FunctionEncoding, b: &FunctionEncoding) -> Ordering {
        let (ta, tb) = (a.tokens(), b.tokens());
        for &position in a.callee_positions() {
            let position = position as usize;
            match self.mapped(ta[position]).cmp(&self.mapped(tb[position])) {
                Ordering::Equal => {}
                order => return order,
            }
        }
        Ordering::Equal
    }

    fn mapped(&self, token: u64) -> u64 {
        match self.view {
            CalleeView::Optimistic => 0,
            CalleeView::Classes(classes) => classes[FuncIndex::new(token as usize)].index() as u64,
        }
    }

    /// [`compare_tokens`] with callee positions read through the view.
    fn compare_tokens(&self, a: &FunctionEncoding, b: &FunctionEncoding) -> Ordering {
        compare_tokens(a, b, |token| self.mapped(token))
    }
}

/// Lexicographic comparison of two equally long token streams, reading callee
/// positions through `mapped`. Runs between callee positions are compared as
/// slices.
fn compare_tokens(
    a: &FunctionEncoding,
    b: &FunctionEncoding,
    mapped: impl Fn(u64) -> u64,
) -> Ordering {
    let (ta, tb) = (a.tokens(), b.tokens());
    let len = ta.len();
    debug_assert_eq!(len, tb.len());
    let (mut pa, mut pb) = (a.callee_positions().iter(), b.callee_positions().iter());
    let (mut na, mut nb) = (pa.next(), pb.next());
    let mut start = 0;
    loop {
        let next_a = na.map_or(len, |&p| p as usize);
        let next_b = nb.map_or(len, |&p| p as usize);
        let end = next_a.min(next_b);
        match ta[start..end].cmp(&tb[start..end]) {
            Ordering::Equal => {}
            order => return order,
        }
        if end == len {
            return Ordering::Equal;
        }
        let va = if next_a == end {
            na = pa.next();
            mapped(ta[end])
        } else {
            ta[end]
        };
        let vb = if next_b == end {
            nb = pb.next();
            mapped(tb[end])
        } else {
            tb[end]
        };
        match va.cmp(&vb) {
            Ordering::Equal => {}
            order => return order,
        }
        start = end + 1;
    }
}

/// The order of [`FunctionComparator`] with [`CalleeView::Optimistic`] among the
/// members of one hash bucket, read from their encodings at hand (`members` in
/// input order, `encodings` beside them): length, then tokens, callees all equal.
pub(crate) struct BucketComparator<'a> {
    members: &'a [FuncIndex],
    encodings: &'a [FunctionEncoding],
    comparisons: Cell<u64>,
}

impl<'a> BucketComparator<'a> {
    /// A comparator among `members`, whose encodings are `encodings`.
    pub fn new(members: &'a [FuncIndex], encodings: &'a [FunctionEncoding]) -> Self {
        debug_assert_eq!(members.len(), encodings.len());
        Self {
            members,
            encodings,
            comparisons: Cell::new(0),
        }
    }

    /// Number of comparisons made so far.
    pub fn comparisons(&self) -> u64 {
        self.comparisons.get()
    }

    fn encoding(&self, f: FuncIndex) -> &FunctionEncoding {
        let at = self.members.binary_search(&f);
        &self.encodings[at.expect("a member of the bucket")]
    }

    /// Compares two members of the bucket.
    pub fn compare(&self, a: FuncIndex, b: FuncIndex) -> Ordering {
        self.comparisons.set(self.comparisons.get() + 1);
        let (ea, eb) = (self.encoding(a), self.encoding(b));
        ea.tokens()
            .len()
            .cmp(&eb.tokens().len())
            .then_with(|| compare_tokens(ea, eb, |_| 0))
    }
}

impl FunctionOrder for FunctionComparator<'_> {
    fn order(&self, a: FuncIndex, b: FuncIndex) -> Ordering {
        self.compare(a, b)
    }
}

impl FunctionOrder for BucketComparator<'_> {
    fn order(&self, a: FuncIndex, b: FuncIndex) -> Ordering {
        self.compare(a, b)
    }
}

/// Phase 2 for one hash bucket whose encodings are at hand: `members` (in input
/// order, `encodings` beside them) grouped into runs equal with callees read
/// optimistically, ordered by first member, and the comparisons made. The same
/// groups and count as the tree over the bucket with [`FunctionComparator`].
fn group_bucket(
    members: &[FuncIndex],
    encodings: &[FunctionEncoding],
) -> (Vec<Vec<FuncIndex>>, u64) {
    let comparator = BucketComparator::new(members, encodings);
    let groups = group_equal(members.iter().copied(), &comparator);
    (groups, comparator.comparisons())
}
