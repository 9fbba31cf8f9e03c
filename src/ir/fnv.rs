//! 64-bit FNV-1a: the crate's one fixed, seedless hash for fingerprints that are
//! written to files or printed (a summary file's checksum, an address the sandbox
//! gives an outside function, the digest of a run's memory). Its values are part of
//! those formats: it must never change.

/// An FNV-1a state.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Fnv1a(u64);

impl Fnv1a {
    const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0100_0000_01b3;

    /// The state before any input.
    pub fn new() -> Self {
        Self(Self::OFFSET_BASIS)
    }

    /// Mixes in one word (FNV-1a's step, on a whole word instead of a byte).
    pub fn word(self, word: u64) -> Self {
        Self((self.0 ^ word).wrapping_mul(Self::PRIME))
    }

    /// Mixes in every byte of `bytes`, one step each.
    pub fn bytes(self, bytes: &[u8]) -> Self {
        bytes.iter().fold(self, |h, &b| h.word(u64::from(b)))
    }

    /// The hash so far.
    pub fn finish(self) -> u64 {
        self.0
    }
}

impl Default for Fnv1a {
    fn default() -> Self {
        Self::new()
    }
}

/// The FNV-1a hash of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    Fnv1a::new().bytes(bytes).finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_values() {
        // The published FNV-1a 64 test vectors.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }
}
