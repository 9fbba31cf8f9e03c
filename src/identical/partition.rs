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

use super::compare::{CalleeView, ClassId, FunctionComparator};
use super::encoded::EncodedFunctions;
use super::tree::group_equal;
use crate::ir::{FuncIndex, parallel};
use cranelift_codegen::entity::{EntityRef, PrimaryMap, SecondaryMap};
use std::borrow::Cow;
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

/// The members of one class: most functions are alone in theirs, and take no
/// allocation.
enum ClassMembers {
    /// A class of one function.
    Alone(FuncIndex),
    /// A class of several functions (or, between refinement's steps, of any
    /// number), in input order.
    Several(Vec<FuncIndex>),
}

impl ClassMembers {
    /// The members, in input order.
    fn as_slice(&self) -> &[FuncIndex] {
        match self {
            Self::Alone(f) => std::slice::from_ref(f),
            Self::Several(members) => members,
        }
    }
}

/// The equivalence classes of a module's functions.
pub struct Partition {
    class_of: SecondaryMap<FuncIndex, ClassId>,
    members: PrimaryMap<ClassId, ClassMembers>,
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
        self.members[class].as_slice()
    }

    /// Classes with two or more members, each in input order, ordered by the input
    /// position of their first member.
    pub fn merge_classes(&self) -> Vec<Vec<FuncIndex>> {
        let mut classes: Vec<Vec<FuncIndex>> = self
            .members
            .values()
            .map(ClassMembers::as_slice)
            .filter(|m| m.len() > 1)
            .map(<[FuncIndex]>::to_vec)
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

/// The candidates that call each function, for refinement to find the classes
/// to look at again: one array of callers in a run per callee (compressed
/// rows), sorted out of the list of calls without an allocation per function.
/// A caller appears once per call.
#[derive(Default)]
struct Callers {
    /// Where the run of each function's callers starts in `callers`, and (the
    /// last entry) where the runs end. Empty when no class is refined: then
    /// no function has a caller.
    starts: Vec<u32>,
    callers: Vec<FuncIndex>,
}

impl Callers {
    /// The callers of each of the `count` functions in `calls` (callee, caller).
    fn new(calls: &[(FuncIndex, FuncIndex)], count: usize) -> Self {
        // Every callee has a run, even one numbered past `count`.
        let count = calls
            .iter()
            .map(|&(callee, _)| callee.index() + 1)
            .fold(count, usize::max);
        // Each run's end, then (filled from the back) its start.
        let mut starts = vec![0u32; count + 1];
        for &(callee, _) in calls {
            starts[callee.index()] += 1;
        }
        let mut end = 0;
        for start in &mut starts[..count] {
            end += *start;
            *start = end;
        }
        starts[count] = end;
        let mut callers = vec![FuncIndex::new(0); calls.len()];
        for &(callee, caller) in calls {
            starts[callee.index()] -= 1;
            callers[starts[callee.index()] as usize] = caller;
        }
        Self { starts, callers }
    }

    /// The callers of `f` (none if it is called by no candidate).
    fn of_function(&self, f: FuncIndex) -> &[FuncIndex] {
        match (self.starts.get(f.index()), self.starts.get(f.index() + 1)) {
            (Some(&start), Some(&end)) => &self.callers[start as usize..end as usize],
            _ => &[],
        }
    }
}

/// Every reference of each of `candidates` to a module function (callee,
/// caller), as its encoding lists them
/// ([`FunctionEncoding::callees`](super::encode::FunctionEncoding::callees)).
fn calls_of(functions: &EncodedFunctions, candidates: &[FuncIndex]) -> Vec<(FuncIndex, FuncIndex)> {
    candidates
        .iter()
        .filter_map(|&caller| Some((caller, functions.encoding(caller)?)))
        .flat_map(|(caller, encoding)| encoding.callees().map(move |callee| (callee, caller)))
        .collect()
}

/// Computes the equivalence classes of `functions`, in three phases: the hash
/// filter (`hash_filter`), the tree of uniques with callees read optimistically
/// (`optimistic_classes`), and refinement until every class agrees on the
/// classes of its callees (`refine`).
pub fn partition(functions: &EncodedFunctions) -> Partition {
    let start = Instant::now();
    let mut stats = PartitionStats::default();
    let filtered = hash_filter(functions);
    stats.candidates = filtered.candidates.len();
    let (mut class_of, mut members) = optimistic_classes(functions, &filtered, &mut stats);
    let time_tree = start.elapsed();
    let start = Instant::now();
    refine(
        functions,
        &filtered.calls,
        &mut class_of,
        &mut members,
        &mut stats,
    );
    Partition {
        class_of,
        members,
        stats,
        time_tree,
        time_refine: start.elapsed(),
    }
}

/// What the hash filter leaves: the candidates and the calls between them.
struct Filtered<'f> {
    /// The hash buckets, when the screening did not group them already.
    buckets: Vec<Vec<FuncIndex>>,
    /// Functions sharing a hash with another, in input order.
    candidates: Cow<'f, [FuncIndex]>,
    /// Every reference of a candidate to a module function, as (callee, caller).
    calls: Cow<'f, [(FuncIndex, FuncIndex)]>,
    /// Whether each function is a candidate.
    is_candidate: SecondaryMap<FuncIndex, bool>,
}

/// Phase 1, the hash filter: only functions sharing a hash are candidates (found
/// as the buckets were encoded, when `EncodedFunctions::hash_first` made them),
/// with every reference of a candidate to a module function, for refinement.
fn hash_filter(functions: &EncodedFunctions) -> Filtered<'_> {
    let count = functions.len;
    let (buckets, candidates, calls) = match &functions.optimistic_groups {
        Some(made) => (
            Vec::new(),
            Cow::Borrowed(&made.candidates[..]),
            Cow::Borrowed(&made.calls[..]),
        ),
        None => {
            let buckets = functions.hash_buckets();
            let mut candidates = buckets.concat();
            candidates.sort_unstable();
            let calls = calls_of(functions, &candidates);
            (buckets, Cow::Owned(candidates), Cow::Owned(calls))
        }
    };
    let mut is_candidate: SecondaryMap<FuncIndex, bool> = SecondaryMap::with_capacity(count);
    is_candidate.resize(count);
    for &f in candidates.iter() {
        is_candidate[f] = true;
    }
    Filtered {
        buckets,
        candidates,
        calls,
        is_candidate,
    }
}

/// Phase 2, the tree of uniques, callees read optimistically. The comparator
/// orders by hash first, so the tree splits into one small tree per hash bucket;
/// the buckets are independent and grouped in parallel. Every function not a
/// candidate is a class alone.
fn optimistic_classes(
    functions: &EncodedFunctions,
    filtered: &Filtered<'_>,
    stats: &mut PartitionStats,
) -> (
    SecondaryMap<FuncIndex, ClassId>,
    PrimaryMap<ClassId, ClassMembers>,
) {
    let count = functions.len;
    let is_candidate = &filtered.is_candidate;
    let mut class_of: SecondaryMap<FuncIndex, ClassId> = SecondaryMap::with_capacity(count);
    class_of.resize(count);
    let mut members: PrimaryMap<ClassId, ClassMembers> = PrimaryMap::with_capacity(count);
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
            let buckets: Vec<&[FuncIndex]> = filtered.buckets.iter().map(Vec::as_slice).collect();
            group_sets(&buckets, functions, CalleeView::Optimistic)
        }
    };
    for group in groups {
        let id = members.next_key();
        for &f in &group {
            class_of[f] = id;
        }
        members.push(ClassMembers::Several(group));
    }
    stats.comparisons += comparisons;
    for f in (0..count).map(FuncIndex::new).filter(|&f| !is_candidate[f]) {
        class_of[f] = members.push(ClassMembers::Alone(f));
    }
    (class_of, members)
}

/// Phase 3, refinement until every class agrees on the classes of its callees:
/// the classes whose members call are re-examined (in parallel, each on its own)
/// with the comparator reading callees through the current classes; a class that
/// splits marks the classes of its members' callers for the next round.
fn refine(
    functions: &EncodedFunctions,
    calls: &[(FuncIndex, FuncIndex)],
    class_of: &mut SecondaryMap<FuncIndex, ClassId>,
    members: &mut PrimaryMap<ClassId, ClassMembers>,
    stats: &mut PartitionStats,
) {
    let count = functions.len;
    let mut calling: SecondaryMap<FuncIndex, bool> = SecondaryMap::with_capacity(count);
    calling.resize(count);
    for &(_, caller) in calls {
        calling[caller] = true;
    }
    let mut dirty: BTreeSet<ClassId> = members
        .iter()
        .filter(|(_, m)| {
            let m = m.as_slice();
            m.len() > 1 && m.iter().any(|&f| calling[f])
        })
        .map(|(c, _)| c)
        .collect();
    let callers = if dirty.is_empty() {
        Callers::default()
    } else {
        Callers::new(calls, count)
    };
    while !dirty.is_empty() {
        stats.refinement_rounds += 1;
        // Classes are re-examined independently of each other, in parallel.
        let classes: Vec<ClassId> = dirty.iter().copied().collect();
        let current = &*class_of;
        let members_now = &*members;
        let results: Vec<(Vec<Vec<FuncIndex>>, u64)> = parallel::map(&classes, 1, |&class| {
            let comparator = FunctionComparator::within_classes(functions, current);
            let groups = group_equal(members_now[class].as_slice().iter().copied(), &comparator);
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
            members[class] = ClassMembers::Several(groups.pop().unwrap_or_default());
            for group in rest {
                let id = members.next_key();
                for &f in &group {
                    class_of[f] = id;
                    moved.push(f);
                }
                members.push(ClassMembers::Several(group));
            }
        }
        dirty = moved
            .iter()
            .flat_map(|&f| callers.of_function(f))
            .map(|&caller| class_of[caller])
            .filter(|&c| members[c].as_slice().len() > 1)
            .collect();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identical::encode::WalkOptions;
    use crate::ir::{FunctionSet, Linkage};
    use std::fmt::Write as _;

    /// One chain `%{name}0 -> %{name}1 -> ... -> %{name}{n-1}` per `(name, k)`,
    /// whose last function returns its argument plus `k`, chain after chain.
    fn chains(n: usize, chains: &[(&str, i64)]) -> FunctionSet {
        let mut text = String::new();
        for &(name, k) in chains {
            for i in 0..n - 1 {
                let _ = write!(
                    text,
                    "function %{name}{i}(i32) -> i32 {{\n    fn0 = %{name}{}(i32) -> i32\nblock0(v0: i32):\n    v1 = call fn0(v0)\n    return v1\n}}\n",
                    i + 1
                );
            }
            let _ = write!(
                text,
                "function %{name}{}(i32) -> i32 {{\nblock0(v0: i32):\n    v1 = iconst.i32 {k}\n    v2 = iadd v0, v1\n    return v2\n}}\n",
                n - 1
            );
        }
        let mut module = FunctionSet::new();
        for func in cranelift_reader::parse_functions(&text).expect("parses") {
            module.push(func, Linkage::Local).expect("unique names");
        }
        module
    }

    /// The classes (as indices) and the counters of the partition of `module`,
    /// encoded as the pass encodes it.
    fn classes_of(module: &FunctionSet) -> (Vec<Vec<usize>>, PartitionStats) {
        let (functions, _, _) = EncodedFunctions::hash_first(module, WalkOptions::default(), None);
        let partition = partition(&functions);
        let classes = partition
            .merge_classes()
            .iter()
            .map(|class| class.iter().map(|f| f.index()).collect())
            .collect();
        (classes, partition.stats)
    }

    #[test]
    fn call_chains_refine_in_n_log_n() {
        // Chains c and e end in equal leaves, d in another: every c_i merges with
        // e_i and nothing else, which takes one split per function of the chains.
        let run = |n: usize| {
            let (classes, stats) = classes_of(&chains(n, &[("c", 5), ("d", 6), ("e", 5)]));
            let expected: Vec<Vec<usize>> = (0..n).map(|i| vec![i, 2 * n + i]).collect();
            assert_eq!(classes, expected, "classes at n = {n}");
            stats
        };
        let (small, large) = (run(250), run(2000));
        // Eight times the functions may cost at most 11 times the work: n log n
        // grows by 8 * log(8n) / log(n), under 11 here; quadratic work by 64.
        assert!(
            large.comparisons <= 11 * small.comparisons,
            "comparisons: {} at 250, {} at 2000",
            small.comparisons,
            large.comparisons
        );
    }
}
