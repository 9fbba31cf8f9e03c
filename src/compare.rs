//! `FunctionComparator`: a total order over encoded CLIF functions.
//!
//! Functions are ordered by the key `(hash, length, tokens)`, where every token that
//! names a module-defined function is read as that function's current equivalence
//! class. A lexicographic order over a key computed from each function alone is
//! reflexive, antisymmetric and transitive, which is what a `BTreeMap` needs; and
//! since the token grammar is deterministic, `Equal` means the two functions have
//! the same structure with callees in the same classes.

use crate::adapter::{FunctionEncoding, WalkOptions, encode_module};
use crate::hash::StructuralHash;
use crate::module::{FuncIndex, FunctionSet};
use crate::partition::ClassId;
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use std::cell::Cell;
use std::cmp::Ordering;

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
    /// Encoding per function; `None` for functions the walk could not handle.
    pub encodings: SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    /// Structural hash per encoded function.
    pub hashes: SecondaryMap<FuncIndex, StructuralHash>,
    /// Whether the function's address is taken anywhere in the module.
    pub address_taken: SecondaryMap<FuncIndex, bool>,
    /// Functions the walk could not handle, with the reason.
    pub unsupported: Vec<(FuncIndex, String)>,
    /// Number of functions.
    pub len: usize,
}

impl EncodedFunctions {
    /// Walks and hashes every function of `module`.
    pub fn from_module(module: &FunctionSet, options: WalkOptions) -> Self {
        let (results, _symbols) = encode_module(module, options);
        let mut out = Self {
            len: module.len(),
            ..Self::default()
        };
        for (f, _) in module.iter() {
            out.address_taken[f] = module.address_taken_outside(f);
        }
        for (f, result) in results {
            match result {
                Ok(encoding) => {
                    out.hashes[f] = StructuralHash::of(&encoding);
                    for &target in encoding.address_taken() {
                        out.address_taken[target] = true;
                    }
                    out.encodings[f] = Some(encoding);
                }
                Err(e) => out.unsupported.push((f, e.reason)),
            }
        }
        out
    }

    /// Reachable instructions of `f` (0 if it was not encoded).
    pub fn instructions(&self, f: FuncIndex) -> u64 {
        self.encodings[f]
            .as_ref()
            .map_or(0, |e| u64::from(e.instructions()))
    }
}

/// Compares encoded functions; see the module documentation for the order.
pub struct FunctionComparator<'a> {
    functions: &'a EncodedFunctions,
    view: CalleeView<'a>,
    comparisons: Cell<u64>,
}

impl<'a> FunctionComparator<'a> {
    /// A comparator reading callees through `view`.
    pub fn new(functions: &'a EncodedFunctions, view: CalleeView<'a>) -> Self {
        Self {
            functions,
            view,
            comparisons: Cell::new(0),
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
        let (ea, eb) = match (&self.functions.encodings[a], &self.functions.encodings[b]) {
            (Some(ea), Some(eb)) => (ea, eb),
            (None, None) => return a.cmp(&b),
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
        };
        self.functions.hashes[a]
            .cmp(&self.functions.hashes[b])
            .then_with(|| ea.tokens().len().cmp(&eb.tokens().len()))
            .then_with(|| self.compare_tokens(ea, eb))
    }

    fn mapped(&self, token: u64) -> u64 {
        match self.view {
            CalleeView::Optimistic => 0,
            CalleeView::Classes(classes) => classes[FuncIndex::new(token as usize)].index() as u64,
        }
    }

    /// Lexicographic comparison of two equally long token streams, reading callee
    /// positions through the view. Runs between callee positions are compared as
    /// slices.
    fn compare_tokens(&self, a: &FunctionEncoding, b: &FunctionEncoding) -> Ordering {
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
                self.mapped(ta[end])
            } else {
                ta[end]
            };
            let vb = if next_b == end {
                nb = pb.next();
                self.mapped(tb[end])
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
}
