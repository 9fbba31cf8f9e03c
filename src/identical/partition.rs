//! Equivalence classes of functions: hash filter, `BTreeMap` of uniques, refinement.
//!
//! 1. Functions whose [`StructuralHash`](super::hash::StructuralHash) no other function shares are singletons and
//!    never enter the tree.
//! 2. The rest are inserted into a `BTreeMap` keyed by the [`FunctionComparator`]
//!    (LLVM's `FnTree`), reading every reference to a module function as "some module
//!    function" (optimistic: GCC ipa-icf starts the same way). Each lookup costs
//!    O(log N) comparisons. The comparator orders by hash first, so that one tree is
//!    the concatenation of one small tree per hash bucket: the buckets are grouped
//!    independently, in parallel, and comparisons never cross buckets (`tree.rs`).
//!    The pass groups each bucket as soon as it is encoded, while its streams are
//!    in cache, and keeps only the callee tokens of its members
//!    (`EncodedFunctions::hash_first`, [`EncodedFunctions::optimistic_groups`]):
//!    refinement reads nothing else of a member of a group, and the candidates'
//!    streams never all live at once. Then this phase only takes those groups.
//! 3. Refinement: a class whose members call (or take the address of) functions in
//!    different classes is split, again with a `BTreeMap` keyed by the comparator, now
//!    reading callees through the current classes: members of a class are equal but
//!    for their callees, so only the callees' classes are read
//!    ([`FunctionComparator::within_classes`]). Only classes containing a caller of
//!    a function that just changed class are looked at again (LLVM's `Deferred` list).
//!    This stops at the coarsest stable partition, which is unique, so the classes do
//!    not depend on the order of work. Self recursion, mutual recursion and transitive
//!    chains of equal callees all end up merged.

use super::compare::{CalleeView, ClassId, EncodedFunctions, FunctionComparator};
use super::tree::group_equal;
use crate::ir::{FuncIndex, parallel};
use cranelift_codegen::entity::{EntityRef, PrimaryMap, SecondaryMap};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

/// Counters describing the work done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PartitionStats {
    /// Functions whose hash was shared with another function.
    pub candidates: usize,
    /// Comparator calls, tree insertion and refinement together.
    pub comparisons: u64,
    /// Refinement rounds that re-examined at least one class.
    pub refinement_rounds: usize,
}

/// The equivalence classes of a module's functions.
pub struct Partition {
    class_of: SecondaryMap<FuncIndex, ClassId>,
    members: PrimaryMap<ClassId, Vec<FuncIndex>>,
    /// What it cost.
    pub stats: PartitionStats,
    /// Time spent on the hash filter and the tree.
    pub time_tree: Duration,
    /// Time spent refining classes by their callees.
    pub time_refine: Duration,
}

impl Partition {
    /// The class of a function.
    pub fn class_of(&self, f: FuncIndex) -> ClassId {
        self.class_of[f]
    }

    /// Members of a class, in input order.
    pub fn members(&self, class: ClassId) -> &[FuncIndex] {
        &self.members[class]
    }

    /// Classes with two or more members, each in input order, ordered by the input
    /// position of their first member.
    pub fn merge_classes(&self) -> Vec<Vec<FuncIndex>> {
        let mut classes: Vec<Vec<FuncIndex>> = self
            .members
            .values()
            .filter(|m| m.len() > 1)
            .cloned()
            .collect();
        classes.sort_by_key(|m| m[0]);
        classes
    }
}

/// Groups each of `sets` into runs equal under a comparator reading callees through
/// `view`, the sets in parallel. Returns every group (members in input order),
/// ordered by first member, and the number of comparisons made.
fn group_sets(
    sets: &[&[FuncIndex]],
    functions: &EncodedFunctions,
    view: CalleeView<'_>,
) -> (Vec<Vec<FuncIndex>>, u64) {
    let results: Vec<(Vec<Vec<FuncIndex>>, u64)> = parallel::map(sets, 1, |set| {
        let comparator = FunctionComparator::new(functions, view);
        let groups = group_equal(set.iter().copied(), &comparator);
        (groups, comparator.comparisons())
    });
    let mut groups = Vec::new();
    let mut comparisons = 0;
    for (set_groups, set_comparisons) in results {
        groups.extend(set_groups);
        comparisons += set_comparisons;
    }
    groups.sort_unstable_by_key(|g| g[0]);
    (groups, comparisons)
}

/// Computes the equivalence classes of `functions`.
pub fn partition(functions: &EncodedFunctions) -> Partition {
    let start = Instant::now();
    let count = functions.len;
    let mut stats = PartitionStats::default();
    let all = (0..count).map(FuncIndex::new);

    // 1. Hash filter: only functions sharing a hash are candidates.
    let buckets = functions.hash_buckets();
    let mut candidates = buckets.concat();
    candidates.sort_unstable();
    let mut is_candidate: SecondaryMap<FuncIndex, bool> = SecondaryMap::with_capacity(count);
    for &f in &candidates {
        is_candidate[f] = true;
    }
    stats.candidates = candidates.len();

    // 2. The tree of uniques, callees read optimistically. The comparator orders by
    //    hash first, so the tree splits into one small tree per hash bucket; the
    //    buckets are independent and grouped in parallel.
    let mut class_of: SecondaryMap<FuncIndex, ClassId> = SecondaryMap::with_capacity(count);
    let mut members: PrimaryMap<ClassId, Vec<FuncIndex>> = PrimaryMap::new();
    {
        let (groups, comparisons) = match &functions.optimistic_groups {
            // Made as the buckets were encoded (`EncodedFunctions::hash_first`).
            // A group left alone in a bucket whose other members the walk could
            // not handle is no candidate: a singleton below.
            Some(made) => (
                made.groups
                    .iter()
                    .filter(|g| is_candidate[g[0]])
                    .cloned()
                    .collect(),
                made.comparisons,
            ),
            None => {
                let buckets: Vec<&[FuncIndex]> = buckets.iter().map(Vec::as_slice).collect();
                group_sets(&buckets, functions, CalleeView::Optimistic)
            }
        };
        for group in groups {
            let id = members.next_key();
            for &f in &group {
                class_of[f] = id;
            }
            members.push(group);
        }
        stats.comparisons += comparisons;
    }
    for f in all.clone().filter(|&f| !is_candidate[f]) {
        class_of[f] = members.push(vec![f]);
    }

    let time_tree = start.elapsed();

    // 3. Refinement until every class agrees on the classes of its callees.
    let start = Instant::now();
    let mut callers: SecondaryMap<FuncIndex, Vec<FuncIndex>> = SecondaryMap::with_capacity(count);
    for &f in &candidates {
        if let Some(enc) = &functions.encodings[f] {
            for callee in enc.callees() {
                if callers[callee].last() != Some(&f) {
                    callers[callee].push(f);
                }
            }
        }
    }
    let mut dirty: BTreeSet<ClassId> = members
        .iter()
        .filter(|(_, m)| {
            m.len() > 1
                && m.iter().any(|&f| {
                    functions.encodings[f]
                        .as_ref()
                        .is_some_and(|e| !e.callee_positions().is_empty())
                })
        })
        .map(|(c, _)| c)
        .collect();
    while !dirty.is_empty() {
        stats.refinement_rounds += 1;
        // Classes are re-examined independently of each other, in parallel.
        let classes: Vec<ClassId> = dirty.iter().copied().collect();
        let current = &class_of;
        let results: Vec<(Vec<Vec<FuncIndex>>, u64)> = parallel::map(&classes, 1, |&class| {
            let comparator = FunctionComparator::within_classes(functions, current);
            let groups = group_equal(members[class].iter().copied(), &comparator);
            (groups, comparator.comparisons())
        });
        let mut splits = Vec::new();
        for (&class, (groups, comparisons)) in classes.iter().zip(results) {
            stats.comparisons += comparisons;
            if groups.len() > 1 {
                splits.push((class, groups));
            }
        }
        let mut moved = Vec::new();
        for (class, mut groups) in splits {
            let rest = groups.split_off(1);
            members[class] = groups.pop().unwrap_or_default();
            for group in rest {
                let id = members.next_key();
                for &f in &group {
                    class_of[f] = id;
                    moved.push(f);
                }
                members.push(group);
            }
        }
        dirty = moved
            .iter()
            .flat_map(|&f| callers[f].iter())
            .map(|&caller| class_of[caller])
            .filter(|&c| members[c].len() > 1)
            .collect();
    }

    Partition {
        class_of,
        members,
        stats,
        time_tree,
        time_refine: start.elapsed(),
    }
}
