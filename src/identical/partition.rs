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
//! 3. Refinement (`coarsest_stable`): members of a group are equal but for their
//!    references to module functions (callees, `func_addr` targets, symbols), so a
//!    group is split by the positions of those references in its members' streams
//!    (equal positions are what "equal but for the references" means: a reference
//!    never equals a token that is not one), and then until the members of every
//!    class refer, reference by reference, to functions of one class. Each
//!    reference is a labelled edge of a deterministic automaton (the label is the
//!    reference's rank among its function's references), and the classes are
//!    its coarsest stable partition below the groups, found by Hopcroft's
//!    algorithm (as in DFA minimisation): a worklist of splitter classes,
//!    initially every class; taking a splitter `S` out, every class is split
//!    into the members whose `k`-th reference goes into `S` and the others, for
//!    each label `k` with such a reference; of the two parts of a split class the
//!    smaller takes a new class and joins the worklist (the larger is either on
//!    it already or stable against the union of both, hence against the smaller
//!    part once that is processed, since each function has one `k`-th reference).
//!    A function moves to a new class only into one at most half the size of its
//!    last, so it is read as a member of a splitter O(log N) times, and each
//!    time its callers' references to it are read once: O(M log N) for M
//!    references, hash-free and without comparing pairs. The coarsest stable
//!    partition is unique, so the classes do not depend on the order of work;
//!    self recursion, mutual recursion and transitive chains of equal callees
//!    all end up merged.
//!
//! [`PartitionStats::comparisons`] counts the tree's comparator calls plus the
//! references refinement reads (its unit of work). A refinement round is one
//! generation of the worklist: the splitters queued when it starts; what their
//! splits queue waits for the next round. A difference at the end of a call
//! chain of length `n` takes `n` rounds to climb it.

use super::compare::{CalleeView, ClassId, FunctionComparator};
use super::encoded::EncodedFunctions;
use super::tree::group_equal;
use crate::ir::{FuncIndex, parallel};
use cranelift_codegen::entity::{EntityRef, PrimaryMap, SecondaryMap};
use std::borrow::Cow;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// Counters describing the work done.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PartitionStats {
    /// Functions whose hash was shared with another function.
    pub candidates: usize,
    /// Comparator calls in the tree, plus the references to module functions
    /// that refinement read (one per caller's reference into a splitter class).
    pub comparisons: u64,
    /// Refinement rounds that read at least one reference; a round is one
    /// generation of the worklist (see the module documentation).
    pub refinement_rounds: usize,
}

/// The members of one class: most functions are alone in theirs, and take no
/// allocation.
enum ClassMembers {
    /// A class of one function.
    Alone(FuncIndex),
    /// A class of several functions, in input order.
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

/// Computes the equivalence classes of `functions`, in three phases: the hash
/// filter (`hash_filter`), the tree of uniques with callees read optimistically
/// (`optimistic_groups`), and refinement until every class agrees on the
/// classes of its callees (`coarsest_stable`).
pub fn partition(functions: &EncodedFunctions) -> Partition {
    let start = Instant::now();
    let mut stats = PartitionStats::default();
    let filtered = hash_filter(functions);
    stats.candidates = filtered.candidates.len();
    let groups = optimistic_groups(functions, &filtered, &mut stats);
    let time_tree = start.elapsed();
    let start = Instant::now();
    let groups = split_by_reference_positions(functions, groups);
    let refined = coarsest_stable(functions.len, &groups, |f| {
        functions
            .encoding(f)
            .into_iter()
            .flat_map(|encoding| encoding.callees())
    });
    stats.comparisons += refined.references_read;
    stats.refinement_rounds = refined.rounds;
    let count = functions.len;
    let mut class_of: SecondaryMap<FuncIndex, ClassId> = SecondaryMap::with_capacity(count);
    class_of.resize(count);
    let mut members: PrimaryMap<ClassId, ClassMembers> = PrimaryMap::with_capacity(count);
    let mut merged: SecondaryMap<FuncIndex, bool> = SecondaryMap::with_capacity(count);
    merged.resize(count);
    for class in refined.classes {
        let id = members.next_key();
        for &f in &class {
            class_of[f] = id;
            merged[f] = true;
        }
        members.push(ClassMembers::Several(class));
    }
    for f in (0..count).map(FuncIndex::new).filter(|&f| !merged[f]) {
        class_of[f] = members.push(ClassMembers::Alone(f));
    }
    Partition {
        class_of,
        members,
        stats,
        time_tree,
        time_refine: start.elapsed(),
    }
}

/// What the hash filter leaves: the candidates.
struct Filtered<'f> {
    /// The hash buckets, when the screening did not group them already.
    buckets: Vec<Vec<FuncIndex>>,
    /// Functions sharing a hash with another, in input order.
    candidates: Cow<'f, [FuncIndex]>,
    /// Whether each function is a candidate.
    is_candidate: SecondaryMap<FuncIndex, bool>,
}

/// Phase 1, the hash filter: only functions sharing a hash are candidates (found
/// as the buckets were encoded, when `EncodedFunctions::hash_first` made them).
fn hash_filter(functions: &EncodedFunctions) -> Filtered<'_> {
    let count = functions.len;
    let (buckets, candidates) = match &functions.optimistic_groups {
        Some(made) => (Vec::new(), Cow::Borrowed(&made.candidates[..])),
        None => {
            let buckets = functions.hash_buckets();
            let mut candidates = buckets.concat();
            candidates.sort_unstable();
            (buckets, Cow::Owned(candidates))
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
        is_candidate,
    }
}

/// Phase 2, the tree of uniques, callees read optimistically. The comparator
/// orders by hash first, so the tree splits into one small tree per hash bucket;
/// the buckets are independent and grouped in parallel. Returns the groups of
/// candidates with two or more members (in input order), ordered by first member;
/// every other function is a class alone.
fn optimistic_groups(
    functions: &EncodedFunctions,
    filtered: &Filtered<'_>,
    stats: &mut PartitionStats,
) -> Vec<Vec<FuncIndex>> {
    let is_candidate = &filtered.is_candidate;
    let (groups, comparisons) = match &functions.optimistic_groups {
        // Made as the buckets were encoded (`EncodedFunctions::hash_first`).
        // A group left alone in a bucket whose other members the walk could
        // not handle is no candidate: a singleton.
        Some(made) => (
            made.groups
                .iter()
                .filter(|g| g.len() > 1 && is_candidate[g[0]])
                .cloned()
                .collect(),
            made.comparisons,
        ),
        None => {
            let buckets: Vec<&[FuncIndex]> = filtered.buckets.iter().map(Vec::as_slice).collect();
            let (groups, comparisons) = group_sets(&buckets, functions, CalleeView::Optimistic);
            let groups = groups.into_iter().filter(|g| g.len() > 1).collect();
            (groups, comparisons)
        }
    };
    stats.comparisons += comparisons;
    groups
}

/// Phase 3's first step: `groups` split by the positions of their members'
/// references to module functions, each part in input order, the parts with
/// two or more members ordered by first member. The tree's order reads a
/// reference as equal to a token that is not one only when that token is 0,
/// which a deterministic token grammar never puts where the other function has
/// a reference; a part is what "equal but for the references" means.
fn split_by_reference_positions(
    functions: &EncodedFunctions,
    groups: Vec<Vec<FuncIndex>>,
) -> Vec<Vec<FuncIndex>> {
    let positions = |f: FuncIndex| functions.encoding(f).map(|e| e.callee_positions());
    let mut parts = Vec::with_capacity(groups.len());
    for group in groups {
        let first = positions(group[0]);
        if first.is_some() && group.iter().all(|&f| positions(f) == first) {
            parts.push(group);
            continue;
        }
        // A function without an encoding equals only itself: it is left alone.
        let mut by_positions: HashMap<&[u32], usize> = HashMap::new();
        let mut split: Vec<Vec<FuncIndex>> = Vec::new();
        for f in group {
            if let Some(at) = positions(f) {
                let part = *by_positions.entry(at).or_insert_with(|| {
                    split.push(Vec::new());
                    split.len() - 1
                });
                split[part].push(f);
            }
        }
        parts.extend(split.into_iter().filter(|p| p.len() > 1));
    }
    parts.sort_unstable_by_key(|p| p[0]);
    parts
}

/// What [`coarsest_stable`] found.
pub(crate) struct Refined {
    /// The classes with two or more members, members in index order, classes
    /// ordered by first member.
    pub(crate) classes: Vec<Vec<FuncIndex>>,
    /// References read: one per reference of a caller into a splitter class.
    pub(crate) references_read: u64,
    /// Rounds (generations of the worklist) that read at least one reference.
    pub(crate) rounds: usize,
}

/// The coarsest partition below `classes` (disjoint, each of two or more
/// members; every other function is a class alone) in which the members of
/// each class refer, reference by reference, to functions of one class: the
/// `k`-th item of `references(f)` is `f`'s reference labelled `k`, asked once
/// for each member of `classes`. Hopcroft's algorithm, as the module
/// documentation describes: O(M log N) for M references among N functions. A
/// reference to a function numbered `count` or more is to a function alone in
/// its class.
pub(crate) fn coarsest_stable<I: IntoIterator<Item = FuncIndex>>(
    count: usize,
    classes: &[Vec<FuncIndex>],
    mut references: impl FnMut(FuncIndex) -> I,
) -> Refined {
    // Every reference of a member of a class, as (target, caller, label); only
    // members of classes can be split, so nobody else's references matter.
    let mut edges: Vec<(u32, u32, u32)> = Vec::new();
    let mut nodes = count;
    for &f in classes.iter().flatten() {
        for (label, target) in references(f).into_iter().enumerate() {
            nodes = nodes.max(target.index() + 1);
            edges.push((target.index() as u32, f.index() as u32, label as u32));
        }
    }
    let callers = Callers::new(&edges, nodes);
    drop(edges);
    let mut blocks = Blocks::new(nodes, classes);
    let mut refined = Refined {
        classes: Vec::new(),
        references_read: 0,
        rounds: 0,
    };
    // The worklist: this round's splitters and the next round's. Only a new
    // class ever joins it, once, so neither holds a class twice.
    let mut current: Vec<u32> = (0..blocks.len() as u32)
        .filter(|&b| blocks.members(b).iter().any(|&g| callers.has_any(g)))
        .collect();
    let mut next: Vec<u32> = Vec::new();
    // Scratch space: the splitter's members, its callers by label, the labels
    // met in order, the classes touched by one label.
    let mut splitter: Vec<u32> = Vec::new();
    let mut by_label: Vec<Vec<u32>> = Vec::new();
    let mut labels: Vec<u32> = Vec::new();
    let mut touched: Vec<u32> = Vec::new();
    while !current.is_empty() {
        let read_before = refined.references_read;
        for &b in &current {
            splitter.clear();
            splitter.extend_from_slice(blocks.members(b));
            for &g in &splitter {
                for &(f, label) in callers.of(g) {
                    let label = label as usize;
                    if by_label.len() <= label {
                        by_label.resize_with(label + 1, Vec::new);
                    }
                    if by_label[label].is_empty() {
                        labels.push(label as u32);
                    }
                    by_label[label].push(f);
                    refined.references_read += 1;
                }
            }
            for label in labels.drain(..) {
                for f in by_label[label as usize].drain(..) {
                    blocks.mark(f, &mut touched);
                }
                for c in touched.drain(..) {
                    next.extend(blocks.split(c));
                }
            }
        }
        if refined.references_read > read_before {
            refined.rounds += 1;
        }
        current.clear();
        std::mem::swap(&mut current, &mut next);
    }
    for b in 0..blocks.len() as u32 {
        let members = blocks.members(b);
        if members.len() > 1 {
            let mut class: Vec<FuncIndex> = members
                .iter()
                .map(|&f| FuncIndex::new(f as usize))
                .collect();
            class.sort_unstable();
            refined.classes.push(class);
        }
    }
    refined.classes.sort_unstable_by_key(|c| c[0]);
    refined
}

/// For each function, the references to it from members of classes, as
/// (caller, label): one array of runs, one run per function (compressed rows),
/// sorted out of the list of references without an allocation per function.
struct Callers {
    /// Where the run of each function starts in `callers`, and (the last entry)
    /// where the runs end.
    starts: Vec<u32>,
    callers: Vec<(u32, u32)>,
}

impl Callers {
    /// The callers of each of the `count` functions in `edges` (target, caller,
    /// label), every target below `count`.
    fn new(edges: &[(u32, u32, u32)], count: usize) -> Self {
        // Each run's end, then (filled from the back) its start.
        let mut starts = vec![0u32; count + 1];
        for &(target, _, _) in edges {
            starts[target as usize] += 1;
        }
        let mut end = 0;
        for start in &mut starts[..count] {
            end += *start;
            *start = end;
        }
        starts[count] = end;
        let mut callers = vec![(0, 0); edges.len()];
        for &(target, caller, label) in edges {
            starts[target as usize] -= 1;
            callers[starts[target as usize] as usize] = (caller, label);
        }
        Self { starts, callers }
    }

    /// The references to `f`, as (caller, label).
    fn of(&self, f: u32) -> &[(u32, u32)] {
        let f = f as usize;
        &self.callers[self.starts[f] as usize..self.starts[f + 1] as usize]
    }

    /// Whether anything refers to `f`.
    fn has_any(&self, f: u32) -> bool {
        let f = f as usize;
        self.starts[f] < self.starts[f + 1]
    }
}

/// A partition of the functions `0..count` that can be refined in place
/// (Valmari and Lehtinen's refinable partition): the members of each class lie
/// in one range of `elements`, the marked ones first.
struct Blocks {
    /// The functions, class by class.
    elements: Vec<u32>,
    /// Where each function is in `elements`.
    position: Vec<u32>,
    /// The class of each function.
    class: Vec<u32>,
    /// Per class: where its range starts, where its marked members end, and
    /// where its range ends.
    start: Vec<u32>,
    marked: Vec<u32>,
    end: Vec<u32>,
}

impl Blocks {
    /// `classes`, then every other function of `0..count` alone.
    fn new(count: usize, classes: &[Vec<FuncIndex>]) -> Self {
        let mut blocks = Self {
            elements: Vec::with_capacity(count),
            position: vec![u32::MAX; count],
            class: vec![0; count],
            start: Vec::new(),
            marked: Vec::new(),
            end: Vec::new(),
        };
        for class in classes {
            blocks.push(class.iter().map(|f| f.index() as u32));
        }
        for f in 0..count as u32 {
            if blocks.position[f as usize] == u32::MAX {
                blocks.push(std::iter::once(f));
            }
        }
        blocks
    }

    /// Adds a class of `members` (none of them in a class yet).
    fn push(&mut self, members: impl Iterator<Item = u32>) {
        let id = self.start.len() as u32;
        let start = self.elements.len() as u32;
        for f in members {
            debug_assert_eq!(self.position[f as usize], u32::MAX, "in two classes");
            self.position[f as usize] = self.elements.len() as u32;
            self.class[f as usize] = id;
            self.elements.push(f);
        }
        self.start.push(start);
        self.marked.push(start);
        self.end.push(self.elements.len() as u32);
    }

    /// Number of classes.
    fn len(&self) -> usize {
        self.start.len()
    }

    /// The members of class `b`.
    fn members(&self, b: u32) -> &[u32] {
        let b = b as usize;
        &self.elements[self.start[b] as usize..self.end[b] as usize]
    }

    /// Marks `f`, noting its class in `touched` when it is the first marked.
    fn mark(&mut self, f: u32, touched: &mut Vec<u32>) {
        let b = self.class[f as usize] as usize;
        let at = self.position[f as usize];
        let marked = self.marked[b];
        if at < marked {
            return;
        }
        if marked == self.start[b] {
            touched.push(b as u32);
        }
        let other = self.elements[marked as usize];
        self.elements.swap(at as usize, marked as usize);
        self.position[other as usize] = at;
        self.position[f as usize] = marked;
        self.marked[b] = marked + 1;
    }

    /// Splits class `b` into its marked and unmarked members, unmarking them:
    /// the smaller part (the marked one on a tie) becomes a new class, returned;
    /// nothing if all are marked.
    fn split(&mut self, b: u32) -> Option<u32> {
        let b = b as usize;
        let (start, marked, end) = (self.start[b], self.marked[b], self.end[b]);
        self.marked[b] = start;
        if marked == end {
            return None;
        }
        let id = self.start.len() as u32;
        let (from, to) = if marked - start <= end - marked {
            self.start[b] = marked;
            self.marked[b] = marked;
            (start, marked)
        } else {
            self.end[b] = marked;
            (marked, end)
        };
        for &f in &self.elements[from as usize..to as usize] {
            self.class[f as usize] = id;
        }
        self.start.push(from);
        self.marked.push(from);
        self.end.push(to);
        Some(id)
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

    /// The coarsest stable partition by the definition: split every class by
    /// its members' references read through the current classes until nothing
    /// splits.
    fn naive_coarsest_stable(
        count: usize,
        classes: &[Vec<FuncIndex>],
        references: &[Vec<FuncIndex>],
    ) -> Vec<Vec<FuncIndex>> {
        let nodes = references
            .iter()
            .flatten()
            .map(|f| f.index() + 1)
            .fold(count, usize::max);
        let mut class: Vec<usize> = (0..nodes).map(|f| nodes + f).collect();
        for (c, members) in classes.iter().enumerate() {
            for f in members {
                class[f.index()] = c;
            }
        }
        loop {
            let mut keys: HashMap<(usize, Vec<usize>), usize> = HashMap::new();
            let next: Vec<usize> = (0..nodes)
                .map(|f| {
                    let refs = references.get(f).map_or(&[][..], Vec::as_slice);
                    let key = (class[f], refs.iter().map(|t| class[t.index()]).collect());
                    let id = keys.len();
                    *keys.entry(key).or_insert(id)
                })
                .collect();
            let before: std::collections::HashSet<usize> = class.iter().copied().collect();
            let done = keys.len() == before.len();
            class = next;
            if done {
                break;
            }
        }
        let mut by_class: HashMap<usize, Vec<FuncIndex>> = HashMap::new();
        for (f, &c) in class.iter().enumerate() {
            by_class.entry(c).or_default().push(FuncIndex::new(f));
        }
        let mut out: Vec<Vec<FuncIndex>> = by_class.into_values().filter(|c| c.len() > 1).collect();
        out.sort_unstable_by_key(|c| c[0]);
        out
    }

    #[test]
    fn hopcroft_finds_the_coarsest_stable_partition() {
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut random = |below: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state % below as u64) as usize
        };
        for _ in 0..300 {
            let count = 2 + random(40);
            let colours = 1 + random(4);
            let degree_per_colour: Vec<usize> = (0..colours).map(|_| random(4)).collect();
            // Colour 0 is alone; a member of another colour refers to as many
            // functions as its colour says, or rarely one more.
            let colour: Vec<usize> = (0..count).map(|_| random(colours + 1)).collect();
            let mut classes: Vec<Vec<FuncIndex>> = vec![Vec::new(); colours + 1];
            let mut references: Vec<Vec<FuncIndex>> = vec![Vec::new(); count];
            for f in 0..count {
                if colour[f] == 0 {
                    continue;
                }
                classes[colour[f]].push(FuncIndex::new(f));
                let degree = degree_per_colour[colour[f] - 1] + usize::from(random(10) == 0);
                // Targets past `count` are functions alone.
                references[f] = (0..degree)
                    .map(|_| FuncIndex::new(random(count + 2)))
                    .collect();
            }
            let classes: Vec<Vec<FuncIndex>> =
                classes.into_iter().filter(|c| c.len() > 1).collect();
            let refined = coarsest_stable(count, &classes, |f| references[f.index()].clone());
            assert_eq!(
                refined.classes,
                naive_coarsest_stable(count, &classes, &references),
                "{classes:?} {references:?}"
            );
        }
    }
}
