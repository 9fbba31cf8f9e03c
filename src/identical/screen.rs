//! Screening: which functions are worth comparing. The pass's first look at
//! every function is cheap (a hash of a prefix of its encoding, or of the whole
//! function in a module of short functions); only functions whose hash another
//! shares are looked at further, and only those whose whole hash another shares
//! are encoded, bucket by bucket, and grouped at once by the tree.

use super::compare::BucketComparator;
use super::encode::{
    FunctionEncoding, Unsupported, UnsupportedReason, WalkOptions, WalkScratch,
    encode_for_comparison, encode_for_comparison_into, walk_in_parallel,
};
use super::encoded::{EncodedFunctions, OptimisticGroups, buckets};
use super::fingerprint::{
    Fingerprint, FingerprintScratch, Operands, PREFIX_INSTRUCTIONS, has_address_instructions,
    prefix_and_table_key, table_key, with_callees,
};
use super::hash::{HashedFunction, StructuralHash};
use super::tree::group_equal;
use crate::ir::{FuncIndex, FunctionSet, Reads, parallel};
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use std::time::{Duration, Instant};

/// One hash bucket, encoded and grouped ([`encode_and_group`]).
struct EncodedBucket {
    /// The members the walk handled, in input order, with their encodings
    /// (callee tokens only).
    encoded: Vec<(FuncIndex, FunctionEncoding)>,
    /// The members it could not handle.
    unsupported: Vec<(FuncIndex, UnsupportedReason)>,
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

/// How the pass takes its first look at a module's functions.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Screening {
    /// A module of short functions: every function walked whole at once, which
    /// is all the pass looks at before encoding.
    WholeWalks,
    /// A first look at a prefix of every function; only the functions whose
    /// prefix key another shares are looked at further.
    PrefixKeys,
}

impl Screening {
    /// The screening that pays for `module` ([`prefixes_pay`]).
    fn of(module: &FunctionSet) -> Self {
        if prefixes_pay(module) {
            Self::PrefixKeys
        } else {
            Self::WholeWalks
        }
    }
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
    /// ([`Fingerprint::first_look`]: a hash of a prefix of its encoding), hashes whole, with a
    /// walk that stores nothing ([`Fingerprint::walk`]), only the functions longer
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
    /// whole (the others count their instruction table: [`Fingerprint::first_look`]). The
    /// hashing walks do not look at value uses, so a function using a value
    /// before its definition (which the verifier rejects) is only found
    /// unsupported here if it is a candidate. With `hole_blind` (whether
    /// callee-load offsets are holes), the same looks and walks compute the
    /// similar merge's fingerprints too ([`Self::hole_blind`]): the hole-blind
    /// prefix key of a function, or its whole walk's fingerprint when its
    /// hole-blind prefix key another shares (in a module of short functions,
    /// every function's whole walk's, as
    /// the hole-blind walk ([`Fingerprint::hole_blind`])
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
        match (Screening::of(module), hole_blind) {
            (Screening::WholeWalks, None) => out.walk_all(module, &all),
            (Screening::PrefixKeys, None) => out.look_at_prefixes(module, &all),
            (Screening::WholeWalks, Some(callee_loads)) => {
                out.walk_all_with_fingerprints(module, &all, callee_loads)
            }
            (Screening::PrefixKeys, Some(callee_loads)) => {
                out.look_at_prefixes_with_fingerprints(module, &all, callee_loads)
            }
        }
        let buckets = out.hash_buckets();
        let time_hash = start.elapsed();
        let start = Instant::now();
        out.encode_buckets(module, options, &buckets);
        (out, time_hash, start.elapsed())
    }

    /// [`Screening::WholeWalks`]: every function walked whole, how its operands
    /// are defined hashed too ([`Operands::Hashed`]), not refined.
    fn walk_all(&mut self, module: &FunctionSet, all: &[FuncIndex]) {
        let hashed = module.map_walk(
            all,
            Reads::Body,
            16,
            FingerprintScratch::default,
            |s, func| {
                let walk = Fingerprint::EXACT.with_operands(Operands::Hashed);
                walk.walk(func, module, s).hashed
            },
        );
        for (&f, h) in all.iter().zip(hashed) {
            self.record(f, h.hash, &h.address_taken, h.instructions);
        }
    }

    /// [`Screening::PrefixKeys`]: a first look at every function; the functions
    /// longer than the prefix whose prefix key and table key others share are
    /// walked whole and refined by their callees.
    fn look_at_prefixes(&mut self, module: &FunctionSet, all: &[FuncIndex]) {
        let looked = module.map_walk(
            all,
            Reads::Prefix(PREFIX_INSTRUCTIONS),
            16,
            FingerprintScratch::default,
            |s, func| Fingerprint::EXACT.first_look(func, module, s).0,
        );
        for (&f, look) in all.iter().zip(&looked) {
            let h = &look.hashed;
            self.record(f, h.hash, &h.address_taken, h.instructions);
        }
        // Functions longer than the prefix whose prefix key another shares
        // are walked whole if their table key another of them shares too.
        let longer_shared: Vec<FuncIndex> = self
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
            self.hashes[f] = prefix_and_table_key(self.hashes[f], table);
        }
        let mut shared: Vec<FuncIndex> = buckets(&self.hashes, longer_shared.into_iter())
            .into_iter()
            .flatten()
            .collect();
        shared.sort_unstable();
        self.walk_and_refine(module, &shared);
        let walked_whole = |f: FuncIndex| shared.binary_search(&f).is_ok();
        self.unresolved = all
            .iter()
            .copied()
            .filter(|&f| !looked[f.index()].whole && !walked_whole(f))
            .collect();
    }

    /// [`Self::walk_all`], computing the similar merge's fingerprints
    /// ([`Self::hole_blind`]) in the same walks, and refining the functions
    /// whose hash another shares by their callees.
    fn walk_all_with_fingerprints(
        &mut self,
        module: &FunctionSet,
        all: &[FuncIndex],
        callee_loads: bool,
    ) {
        let walked = module.map_walk(
            all,
            Reads::Body,
            16,
            FingerprintScratch::default,
            |s, func| walk_both(func, module, callee_loads, Operands::Hashed, s),
        );
        for (&f, (h, blind, _)) in all.iter().zip(&walked) {
            self.record(f, h.hash, &h.address_taken, h.instructions);
            self.hole_blind[f] = *blind;
        }
        // The functions whose hash another shares are refined by their
        // callees' hashes.
        let shared = self.candidates();
        self.refine_by_callees(shared.iter().map(|&f| (f, &walked[f.index()].2[..])));
    }

    /// [`Self::look_at_prefixes`], computing the similar merge's fingerprints
    /// ([`Self::hole_blind`]) in the same looks and walks: both prefix keys in
    /// one look, then one whole walk for both fingerprints of every function
    /// longer than the prefix whose key of either kind another shares.
    fn look_at_prefixes_with_fingerprints(
        &mut self,
        module: &FunctionSet,
        all: &[FuncIndex],
        callee_loads: bool,
    ) {
        // Both prefix keys in one look; then the functions longer than
        // the prefix whose key of either kind another shares are walked
        // whole, in one walk for both fingerprints.
        let looked = module.map_walk(
            all,
            Reads::Prefix(PREFIX_INSTRUCTIONS),
            16,
            FingerprintScratch::default,
            |s, func| {
                let (look, blind) = Fingerprint::both(callee_loads).first_look(func, module, s);
                (
                    look,
                    blind.expect("both chains give the hole-blind prefix key"),
                )
            },
        );
        for (&f, (look, blind)) in all.iter().zip(&looked) {
            let h = &look.hashed;
            self.record(f, h.hash, &h.address_taken, h.instructions);
            self.hole_blind[f] = *blind;
        }
        let longer = |f: &FuncIndex| !looked[f.index()].0.whole;
        let exact_shared: Vec<FuncIndex> = self.candidates().into_iter().filter(longer).collect();
        let mut shared: Vec<FuncIndex> = buckets(&self.hole_blind, all.iter().copied())
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
            |s, func| walk_both(func, module, callee_loads, Operands::Skipped, s),
        );
        for (&f, (h, blind, _)) in shared.iter().zip(&walked) {
            let exact = exact_shared.binary_search(&f).is_ok();
            let hash = if exact { h.hash } else { self.hashes[f] };
            self.record(f, hash, &h.address_taken, h.instructions);
            self.hole_blind[f] = *blind;
        }
        self.refine_by_callees(
            shared
                .iter()
                .zip(&walked)
                .filter(|(f, _)| exact_shared.binary_search(f).is_ok())
                .map(|(&f, (_, _, callees))| (f, &callees[..])),
        );
        self.unresolved = all
            .iter()
            .copied()
            .filter(|f| longer(f) && shared.binary_search(f).is_err())
            .collect();
    }

    /// Encodes the members of `buckets` (the functions sharing a hash), groups
    /// each bucket at once ([`encode_and_group`]; small buckets in parallel with
    /// one another, large ones each in parallel) and keeps the groups
    /// ([`Self::optimistic_groups`]) and the members' callee tokens.
    fn encode_buckets(
        &mut self,
        module: &FunctionSet,
        options: WalkOptions,
        buckets: &[Vec<FuncIndex>],
    ) {
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
                self.set_encoding(f, encoding);
            }
            // The walk is deterministic, so this cannot happen; if it did, the
            // function would simply never be merged.
            for (f, reason) in bucket.unsupported {
                self.supported[f] = false;
                self.unsupported.push((f, reason));
            }
            groups.groups.extend(bucket.groups);
            groups.comparisons += bucket.comparisons;
        }
        groups.groups.sort_unstable_by_key(|g| g[0]);
        groups.candidates.sort_unstable();
        self.optimistic_groups = Some(groups);
        self.unsupported.sort_by_key(|(f, _)| *f);
    }

    /// Walks `functions` whole ([`Fingerprint::walk`] with [`Fingerprint::callees`]), records what the
    /// walks find, then refines their hashes by their callees'
    /// ([`Self::refine_by_callees`]).
    fn walk_and_refine(&mut self, module: &FunctionSet, functions: &[FuncIndex]) {
        let walked = module.map_walk(
            functions,
            Reads::Body,
            16,
            FingerprintScratch::default,
            |s, func| {
                let walked = Fingerprint::EXACT.with_callees().walk(func, module, s);
                (walked.hashed, walked.callees)
            },
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
            |s, func| Fingerprint::EXACT.walk(func, module, s).hashed,
        );
        for h in walked {
            for &target in &h.address_taken {
                self.address_taken[target] = true;
            }
        }
    }
}

/// Whether first looks at prefixes ([`Fingerprint::first_look`]) are worth taking in `module`:
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

/// Hashes ([`Fingerprint::walk`]) and encodes for the comparator
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
            let hashed = Fingerprint::EXACT.walk(func, module, hash).hashed;
            (hashed, encode_for_comparison(func, module, options, walk))
        },
    )
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

/// Both fingerprints of `func` and the callees of its direct calls, in one whole
/// walk ([`Fingerprint::both`]), the first fingerprint reading `operands`.
fn walk_both(
    func: &cranelift_codegen::ir::Function,
    module: &FunctionSet,
    callee_loads: bool,
    operands: Operands,
    scratch: &mut FingerprintScratch,
) -> (HashedFunction, StructuralHash, Vec<FuncIndex>) {
    let walked = Fingerprint::both(callee_loads)
        .with_operands(operands)
        .with_callees()
        .walk(func, module, scratch);
    let blind = walked
        .hole_blind
        .expect("both chains give the hole-blind fingerprint");
    (walked.hashed, blind, walked.callees)
}
