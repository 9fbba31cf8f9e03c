//! The tree of uniques: functions grouped into runs equal under a total order,
//! through a `BTreeMap` keyed by it (LLVM MergeFunctions' `FnTree`). Each
//! insertion costs O(log N) comparisons. The orders are the comparators of
//! `compare.rs`; `partition.rs` and the encoding of hash buckets
//! (`EncodedFunctions::hash_first`) group with them.

use crate::ir::FuncIndex;
use std::cmp::Ordering;
use std::collections::BTreeMap;
use std::collections::btree_map::Entry;

/// A total order over functions: what a [`FunctionKey`] is ordered by.
pub trait FunctionOrder {
    /// How `a` orders against `b`.
    fn order(&self, a: FuncIndex, b: FuncIndex) -> Ordering;
}

/// A `BTreeMap` key: a function ordered by a comparator.
struct FunctionKey<'c, O> {
    index: FuncIndex,
    comparator: &'c O,
}

impl<O: FunctionOrder> Ord for FunctionKey<'_, O> {
    fn cmp(&self, other: &Self) -> Ordering {
        self.comparator.order(self.index, other.index)
    }
}

impl<O: FunctionOrder> PartialOrd for FunctionKey<'_, O> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<O: FunctionOrder> PartialEq for FunctionKey<'_, O> {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl<O: FunctionOrder> Eq for FunctionKey<'_, O> {}

// The comparators' only interior mutability is their comparison counter, which
// never changes how keys order.
#[allow(clippy::mutable_key_type)]
/// Groups `members` (in input order) into runs equal under `comparator`, through a
/// `BTreeMap` keyed by it. Groups keep input order and are ordered by first member.
pub fn group_equal<O: FunctionOrder>(
    members: impl IntoIterator<Item = FuncIndex>,
    comparator: &O,
) -> Vec<Vec<FuncIndex>> {
    let mut tree: BTreeMap<FunctionKey<'_, O>, usize> = BTreeMap::new();
    let mut groups: Vec<Vec<FuncIndex>> = Vec::new();
    for index in members {
        match tree.entry(FunctionKey { index, comparator }) {
            Entry::Vacant(v) => {
                v.insert(groups.len());
                groups.push(vec![index]);
            }
            Entry::Occupied(o) => groups[*o.get()].push(index),
        }
    }
    groups
}
