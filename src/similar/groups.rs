//! Grouping similar functions: which constants and callees may become parameters
//! ([`Slot`]s), the stream with them blanked (equal blanked streams make a group),
//! and the split of a group whose members differ in too many of them.

use crate::identical::encode::{CallSite, FunctionEncoding, Hole};
use crate::ir::FuncIndex;
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::Type;

/// What a parameter of a merged body stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum HoleKind {
    /// An integer or float constant; the values are its bits.
    Constant,
    /// The callee of a direct call; the values are the callees' [`FuncIndex`]es. The
    /// merged body calls it with `call_indirect` through the parameter, and each
    /// entry point passes its callee's `func_addr`.
    Callee,
}

/// A constant or callee that differs between the members of a group: a trailing
/// parameter of the merged body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HoleParameter {
    /// Constant or callee.
    pub kind: HoleKind,
    /// The parameter's type (the pointer type for a callee).
    pub ty: Type,
    /// Its value in each member, in member order.
    pub values: Vec<u64>,
}

/// A place in a body that may become a parameter.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Slot {
    /// A constant operand.
    Constant(Hole),
    /// The callee of a direct call.
    Callee(CallSite),
}

impl Slot {
    /// Where its token is in the encoding.
    pub(crate) fn position(self) -> u32 {
        match self {
            Slot::Constant(h) => h.position,
            Slot::Callee(c) => c.position,
        }
    }
}

/// The token stream with every constant and direct callee blanked. Which positions
/// hold them is decided by the tokens before them (the grammar is deterministic), so
/// two streams equal once blanked have them at the same positions.
pub(crate) fn blanked(encoding: &FunctionEncoding) -> Vec<u64> {
    let mut tokens = encoding.tokens().to_vec();
    for hole in encoding.holes() {
        tokens[hole.position as usize] = 0;
    }
    for call in encoding.call_sites() {
        tokens[call.position as usize] = 0;
    }
    tokens
}

/// Positions (in the first member's tokens; the layout is the same in every
/// member) of the constants and direct callees whose values differ between
/// `members`.
pub(crate) fn differing_positions(
    members: &[FuncIndex],
    encodings: &SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
) -> Vec<u32> {
    let Some(first) = members.first().and_then(|&m| encodings[m].as_ref()) else {
        return Vec::new();
    };
    let mut positions: Vec<u32> = first
        .holes()
        .iter()
        .map(|h| h.position)
        .chain(first.call_sites().iter().map(|c| c.position))
        .filter(|&p| {
            let value = first.tokens()[p as usize];
            members
                .iter()
                .filter_map(|&m| encodings[m].as_ref())
                .any(|e| e.tokens()[p as usize] != value)
        })
        .collect();
    positions.sort_unstable();
    positions
}

/// `members` split into subgroups in which at most `max_holes` constants or callees
/// differ: split by the differing hole with the fewest distinct values (the one
/// most members agree on), recursively; members left alone drop out. A group
/// already within the limit is returned as it is; an empty result means no two
/// members agree on enough.
pub(crate) fn split_to_limit(
    members: Vec<FuncIndex>,
    encodings: &SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    max_holes: usize,
) -> Vec<Vec<FuncIndex>> {
    let differing = differing_positions(&members, encodings);
    if differing.len() <= max_holes {
        return vec![members];
    }
    let value = |m: FuncIndex, p: u32| encodings[m].as_ref().map(|e| e.tokens()[p as usize]);
    let distinct = |p: u32| {
        let mut values: Vec<Option<u64>> = members.iter().map(|&m| value(m, p)).collect();
        values.sort_unstable();
        values.dedup();
        values.len()
    };
    let Some(&split_at) = differing.iter().min_by_key(|&&p| (distinct(p), p)) else {
        return Vec::new();
    };
    // Parts in order of their first member, members in input order.
    let mut parts: Vec<(Option<u64>, Vec<FuncIndex>)> = Vec::new();
    for &m in &members {
        let v = value(m, split_at);
        match parts.iter_mut().find(|(key, _)| *key == v) {
            Some((_, part)) => part.push(m),
            None => parts.push((v, vec![m])),
        }
    }
    parts
        .into_iter()
        .filter(|(_, part)| part.len() > 1)
        .flat_map(|(_, part)| split_to_limit(part, encodings, max_holes))
        .collect()
}
