//! `StructuralHash`: a cheap fingerprint that agrees with the comparator.
//!
//! Two hashes are computed over functions:
//!
//! * `fingerprint::hash_function`, the pass's first look at every function:
//!   its own walk over the layout, much cheaper than the encoding's, whose result
//!   is a function of the encoding (so `compare(f, g) == Equal` implies
//!   `hash(f) == hash(g)` whatever the classes are, and a function whose hash no
//!   other function shares can be left out of the tree);
//! * [`hole_blind_hash`], the similar merge's bucket key: the encoding's own walk
//!   with a [`HoleBlindHasher`] as the [`TokenSink`], which stores nothing, leaves
//!   out value operands and result types (`TokenSink::OPERANDS`) and the
//!   immediates that may become parameters (constants, and with
//!   `WalkOptions::callee_load_holes` the offsets of callee loads), and mixes in every other token the encoding
//!   writes at the same steps, minus references to module-defined functions (which
//!   the comparator reads through equivalence classes).

use super::encode::{Hole, TokenSink, Unsupported, WalkOptions, WalkScratch, walk};
use crate::ir::{FuncIndex, FunctionSet};
use cranelift_codegen::ir::Function;

/// A 64-bit structural fingerprint of a function. Deterministic: no random seed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StructuralHash(pub u64);

/// Hashes a token stream as it is written: every token but callee references is
/// mixed in (multiply-rotate), and the stream length is folded in at the end with
/// a murmur3-style avalanche.
#[derive(Clone, Debug)]
pub struct StructuralHasher {
    state: u64,
    tokens: u32,
}

impl StructuralHasher {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    /// A hasher that has seen no token.
    pub fn new() -> Self {
        Self {
            state: Self::K,
            tokens: 0,
        }
    }

    /// The hash of the tokens written so far.
    pub fn finish(&self) -> StructuralHash {
        let mut x = self.state ^ u64::from(self.tokens).wrapping_mul(Self::K);
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        StructuralHash(x ^ (x >> 33))
    }
}

impl Default for StructuralHasher {
    fn default() -> Self {
        Self::new()
    }
}

impl TokenSink for StructuralHasher {
    fn push(&mut self, token: u64) {
        self.state = (self.state.rotate_left(23) ^ token).wrapping_mul(Self::K);
        self.tokens += 1;
    }

    fn push_callee(&mut self, _index: u64) {
        self.tokens += 1;
    }

    fn position(&self) -> u32 {
        self.tokens
    }

    const OPERANDS: bool = false;
}

/// The hash of the similar-function merge: like [`StructuralHasher`], but the
/// immediates that may become parameters ([`Hole`]s: constants, and the offsets of
/// callee loads when the walk looks for them) are left out too, so functions that
/// differ only in those share it. It leaves out exactly the tokens the walk writes
/// with `push_hole`, which are the ones the similar merge blanks.
#[derive(Clone, Debug, Default)]
pub struct HoleBlindHasher(StructuralHasher);

impl HoleBlindHasher {
    /// The hash of the tokens written so far, constants left out.
    pub fn finish(&self) -> StructuralHash {
        self.0.finish()
    }
}

impl TokenSink for HoleBlindHasher {
    fn push(&mut self, token: u64) {
        self.0.push(token);
    }

    fn push_callee(&mut self, index: u64) {
        self.0.push_callee(index);
    }

    fn position(&self) -> u32 {
        self.0.position()
    }

    fn push_hole(&mut self, _token: u64, _hole: Hole) {
        self.0.tokens += 1;
    }

    const OPERANDS: bool = false;
}

/// What a hashing walk learns about a function without storing its encoding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashedFunction {
    /// The hash of the function's encoding.
    pub hash: StructuralHash,
    /// As [`FunctionEncoding::address_taken`](super::encode::FunctionEncoding::address_taken).
    pub address_taken: Vec<FuncIndex>,
    /// As [`FunctionEncoding::instructions`](super::encode::FunctionEncoding::instructions).
    pub instructions: u32,
}

/// Walks `func` with the comparator's walk (value operands and types left out),
/// leaving the immediates that may become parameters out of the hash: the bucket
/// key of the similar-function merge. Unlike `fingerprint::hash_function` it is computed by
/// the encoding's own walk, so it agrees with the similar merge's comparison by
/// construction (that comparison masks holes in the encoding).
pub fn hole_blind_hash(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
) -> Result<StructuralHash, Unsupported> {
    let (hasher, _, _) = walk(func, module, options, scratch, HoleBlindHasher::default())?;
    Ok(hasher.finish())
}
