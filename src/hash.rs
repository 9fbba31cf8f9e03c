//! `StructuralHash`: a cheap fingerprint that agrees with the comparator.
//!
//! It is computed from the same [`FunctionEncoding`] the comparator reads, skipping
//! exactly the tokens the comparator reads through equivalence classes (references
//! to module-defined functions). So `compare(f, g) == Equal` implies
//! `hash(f) == hash(g)` whatever the classes are, and a function whose hash no other
//! function shares can be left out of the tree.

use crate::adapter::FunctionEncoding;

/// A 64-bit structural fingerprint of a function. Deterministic: no random seed.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct StructuralHash(pub u64);

impl StructuralHash {
    /// The hash of an encoding.
    pub fn of(encoding: &FunctionEncoding) -> Self {
        let tokens = encoding.tokens();
        let mut h = Mixer::new(tokens.len() as u64);
        let mut start = 0;
        for &pos in encoding.callee_positions() {
            let pos = pos as usize;
            h.extend(&tokens[start..pos]);
            start = pos + 1;
        }
        h.extend(&tokens[start..]);
        Self(h.finish())
    }
}

/// A fast, seedless 64-bit mixer (multiply-rotate, finished with a murmur3-style
/// avalanche).
struct Mixer(u64);

impl Mixer {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;

    fn new(seed: u64) -> Self {
        Self(seed.wrapping_mul(Self::K))
    }

    fn extend(&mut self, tokens: &[u64]) {
        for &t in tokens {
            self.0 = (self.0.rotate_left(23) ^ t).wrapping_mul(Self::K);
        }
    }

    fn finish(&self) -> u64 {
        let mut x = self.0;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^ (x >> 33)
    }
}
