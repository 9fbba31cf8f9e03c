//! `FunctionComparator`: a total order over encoded CLIF functions.
//!
//! Functions are ordered by the key `(hash, length, tokens)`, where every token that
//! names a module-defined function is read as that function's current equivalence
//! class. A lexicographic order over a key computed from each function alone is
//! reflexive, antisymmetric and transitive, which is what a `BTreeMap` needs; and
//! since the token grammar is deterministic, `Equal` means the two functions have
//! the same structure with callees in the same classes.

use super::encode::FunctionEncoding;
use super::encoded::EncodedFunctions;
use super::tree::FunctionOrder;
use crate::ir::FuncIndex;
use cranelift_codegen::entity::{EntityRef, SecondaryMap, entity_impl};
use std::cell::Cell;
use std::cmp::Ordering;

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
