//! The file format of summaries and decisions: a magic number, a format version,
//! the [`Vocabulary::id`] of the build that wrote it, a checksum of the contents,
//! then the `postcard` encoding. Reading a file of another kind, version or
//! vocabulary, or a truncated or corrupt one, is a [`FormatError`], never a panic
//! or a wrong merge.

use super::vocabulary::Vocabulary;
use crate::ir::fnv::fnv1a;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The version of the summary and decision formats; bumped on every change.
pub const FORMAT_VERSION: u32 = 5;
/// The first bytes of a summary file.
pub const SUMMARY_MAGIC: [u8; 8] = *b"CLIFMSUM";
/// The first bytes of a decisions file.
pub const DECISIONS_MAGIC: [u8; 8] = *b"CLIFMDEC";

/// Why a summary or decisions file could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// The file does not start with the expected magic number.
    NotThisKind {
        /// What was expected (`summary`, `decisions`).
        expected: &'static str,
    },
    /// Written by another version of the format.
    Version {
        /// The version in the file.
        found: u32,
    },
    /// Written by a build whose token vocabulary may differ (another version of
    /// clif-merge or Cranelift, or another walk): its numbers may mean other things.
    Vocabulary {
        /// The vocabulary id in the file.
        found: u64,
    },
    /// Truncated or corrupt.
    Corrupt(String),
}

impl fmt::Display for FormatError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::NotThisKind { expected } => write!(f, "not a clif-merge {expected} file"),
            Self::Version { found } => write!(
                f,
                "written by format version {found}; this clif-merge reads version {FORMAT_VERSION}"
            ),
            Self::Vocabulary { found } => write!(
                f,
                "written by a build with vocabulary id {found:016x}; this build has vocabulary id {}: summarize and plan again with one build",
                Vocabulary::of_this_build()
            ),
            Self::Corrupt(why) => write!(f, "truncated or corrupt: {why}"),
        }
    }
}

impl std::error::Error for FormatError {}

/// A checksum of a file's payload (64-bit FNV-1a): a corrupted file is refused
/// even where the corruption still decodes.
pub(crate) fn checksum(payload: &[u8]) -> u64 {
    fnv1a(payload)
}

/// The length of the header: magic, version, vocabulary id, checksum.
const HEADER: usize = 8 + 4 + 8 + 8;

/// `value` as bytes: `magic`, [`FORMAT_VERSION`] (little-endian `u32`), this
/// build's [`Vocabulary::id`] (little-endian `u64`), a checksum of the payload
/// (little-endian `u64`), then the payload: the `postcard` encoding.
pub fn to_bytes<T: Serialize>(magic: [u8; 8], value: &T) -> Vec<u8> {
    // Sized first, so that the file takes its own length and no more (a summary of
    // machine code is about as large as the code).
    let size = postcard::to_extend(value, Counter(0)).map_or(0, |c| c.0);
    let mut header = Vec::with_capacity(HEADER + size);
    header.extend_from_slice(&magic);
    header.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    header.extend_from_slice(&Vocabulary::of_this_build().id().to_le_bytes());
    // The checksum's place, filled in below.
    header.extend_from_slice(&[0; 8]);
    // The payload is encoded straight after the header: the file is never held
    // twice.
    // Serializing plain data into a growing vector cannot fail.
    let Ok(mut bytes) = postcard::to_extend(value, header) else {
        return Vec::new();
    };
    let sum = checksum(&bytes[HEADER..]).to_le_bytes();
    bytes[HEADER - 8..HEADER].copy_from_slice(&sum);
    bytes
}

/// Counts the bytes written to it.
struct Counter(usize);

impl Extend<u8> for Counter {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        self.0 += bytes.into_iter().count();
    }
}

/// Reads what [`to_bytes`] wrote; `kind` names the expected kind in errors.
pub fn from_bytes<T: for<'de> Deserialize<'de>>(
    magic: [u8; 8],
    kind: &'static str,
    bytes: &[u8],
) -> Result<T, FormatError> {
    if bytes.len() < 12 || bytes[..8] != magic {
        return Err(FormatError::NotThisKind { expected: kind });
    }
    let version = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
    if version != FORMAT_VERSION {
        return Err(FormatError::Version { found: version });
    }
    let short = || {
        FormatError::Corrupt(format!(
            "{} bytes, shorter than the {HEADER}-byte header",
            bytes.len()
        ))
    };
    let (vocabulary, rest) = bytes[12..].split_first_chunk::<8>().ok_or_else(short)?;
    let vocabulary = u64::from_le_bytes(*vocabulary);
    if vocabulary != Vocabulary::of_this_build().id() {
        return Err(FormatError::Vocabulary { found: vocabulary });
    }
    let (sum, payload) = rest.split_first_chunk::<8>().ok_or_else(short)?;
    if u64::from_le_bytes(*sum) != checksum(payload) {
        return Err(FormatError::Corrupt(
            "the checksum does not match the contents".into(),
        ));
    }
    match postcard::take_from_bytes::<T>(payload) {
        Ok((value, [])) => Ok(value),
        Ok((_, rest)) => Err(FormatError::Corrupt(format!(
            "{} bytes after the end",
            rest.len()
        ))),
        Err(e) => Err(FormatError::Corrupt(e.to_string())),
    }
}
