//! [`EncodedFunctions`]: what the screening (`screen.rs`) leaves for the
//! comparator and the partition: per function its structural hash, whether the
//! walk handled it, its instruction count and address uses, and, for the
//! functions worth comparing, its encoding.

use super::encode::{FunctionEncoding, UnsupportedReason};
use super::hash::StructuralHash;
use crate::ir::{FuncIndex, FunctionSet, SparseFunctionMap};
use cranelift_codegen::entity::{EntityRef, SecondaryMap};

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
    pub unsupported: Vec<(FuncIndex, UnsupportedReason)>,
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

impl EncodedFunctions {
    /// Nothing known yet of `module`'s functions but the addresses taken
    /// outside it.
    pub(super) fn empty(module: &FunctionSet) -> Self {
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

    /// Records what a walk of `f` found: its hash, the functions whose address
    /// it takes and its instruction count.
    pub(super) fn record(
        &mut self,
        f: FuncIndex,
        hash: StructuralHash,
        taken: &[FuncIndex],
        insts: u32,
    ) {
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
pub(super) fn buckets(
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
