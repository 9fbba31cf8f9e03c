//! `StructuralHash`: a cheap fingerprint that agrees with the comparator.
//!
//! It is computed by the same walk that writes the comparator's encoding
//! ([`hash_function`]), with a [`StructuralHasher`] as the
//! [`TokenSink`]: nothing is stored, and the walk leaves out value operands and
//! result types (`TokenSink::OPERANDS`), reading only the instructions themselves,
//! like LLVM's `FunctionHash`. The tokens it does write are exactly those the
//! encoding writes at the same steps, minus references to module-defined functions
//! (which the comparator reads through equivalence classes). So
//! `compare(f, g) == Equal` implies `hash(f) == hash(g)` whatever the classes are,
//! and a function whose hash no other function shares can be left out of the tree.

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

/// The hash of the similar-function merge: like [`StructuralHasher`], but constants
/// that may become parameters ([`Hole`]s) are left out too, so functions that differ
/// only in those constants share it.
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

/// Walks `func` like [`encode_function`](super::encode::encode_function) but keeps only the hash, the address uses
/// and the instruction count: the cheap first look at every function.
pub fn hash_function(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
) -> Result<HashedFunction, Unsupported> {
    let (hasher, address_taken, instructions) =
        walk(func, module, options, scratch, StructuralHasher::new())?;
    Ok(HashedFunction {
        hash: hasher.finish(),
        address_taken,
        instructions,
    })
}

/// Walks `func` like [`hash_function`], leaving the constants that may become
/// parameters out of the hash: the bucket key of the similar-function merge.
pub fn hole_blind_hash(
    func: &Function,
    module: &FunctionSet,
    options: WalkOptions,
    scratch: &mut WalkScratch,
) -> Result<StructuralHash, Unsupported> {
    let (hasher, _, _) = walk(func, module, options, scratch, HoleBlindHasher::default())?;
    Ok(hasher.finish())
}
