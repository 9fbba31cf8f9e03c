//! `StructuralHash`: a cheap fingerprint that agrees with the comparator.
//!
//! Three hashes are computed over functions by the hashing walks
//! (`fingerprint.rs`), which are much cheaper than the encoding's:
//!
//! * `fingerprint::first_look`, the pass's first look at every function: a hash
//!   of the beginning of its encoding (its *prefix key*), so that only functions
//!   whose prefix key another shares are hashed whole;
//! * `fingerprint::Fingerprint::walk`, the whole function's hash,
//!   whose result is a function of the encoding (so `compare(f, g) == Equal`
//!   implies `hash(f) == hash(g)` whatever the classes are, and a function whose
//!   hash no other function shares can be left out of the tree);
//! * `fingerprint::Chains::HoleBlind`, the similar merge's bucket key: the
//!   same walk leaving out the immediates that may become parameters (constants,
//!   and with `WalkOptions::callee_load_holes` the offsets of loads that may be
//!   callee loads), so that streams equal once their holes are blanked share it.

use crate::ir::FuncIndex;

/// A 64-bit structural fingerprint of a function. Deterministic: no random seed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StructuralHash(pub u64);

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
