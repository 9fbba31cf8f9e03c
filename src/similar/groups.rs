//! Grouping similar functions: which constants and callees may become parameters
//! ([`Slot`]s), the stream with them blanked (equal blanked streams make a group),
//! and the split of a group whose members differ in too many of them.

use crate::identical::encode::{
    CallSite, FunctionEncoding, Hole, WalkOptions, encode_function, walk_in_parallel,
};
use crate::identical::hash::{StructuralHash, hole_blind_hash};
use crate::ir::{FuncIndex, FunctionSet};
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
fn blanked(encoding: &FunctionEncoding) -> Vec<u64> {
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
fn differing_positions(
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
fn split_to_limit(
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

/// The groups of similar functions of a module, and what they were found from.
pub(crate) struct Candidates {
    /// The encodings of the functions that share their constant-blind hash with
    /// another (the others are `None`).
    pub(crate) encodings: SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    /// Groups of similar functions within the hole limit, members in input order,
    /// ordered by first member.
    pub(crate) groups: Vec<Vec<FuncIndex>>,
    /// Groups that could not be brought within the limit, with the reason.
    pub(crate) rejected: Vec<(Vec<FuncIndex>, String)>,
}

/// Finds the groups of similar functions of `module`: buckets of functions
/// sharing the hash that leaves the holes out, then runs of equal blanked
/// streams, each split until at most `max_holes` constants or callees differ.
pub(crate) fn find_groups(module: &FunctionSet, walk: WalkOptions, max_holes: usize) -> Candidates {
    let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
    let hashes = walk_in_parallel(module, &all, |func, scratch| {
        hole_blind_hash(func, module, walk, scratch).ok()
    });

    // Buckets of functions sharing the constant-blind hash.
    let mut by_hash: Vec<(StructuralHash, FuncIndex)> = all
        .iter()
        .zip(&hashes)
        .filter_map(|(&f, h)| h.map(|h| (h, f)))
        .collect();
    by_hash.sort_unstable();
    let buckets: Vec<&[(StructuralHash, FuncIndex)]> = by_hash
        .chunk_by(|a, b| a.0 == b.0)
        .filter(|run| run.len() > 1)
        .collect();
    let candidates: Vec<FuncIndex> = buckets.iter().flat_map(|b| b.iter().map(|e| e.1)).collect();
    let encoded = walk_in_parallel(module, &candidates, |func, scratch| {
        encode_function(func, module, walk, scratch).ok()
    });
    let mut encodings: SecondaryMap<FuncIndex, Option<FunctionEncoding>> = SecondaryMap::new();
    for (&f, e) in candidates.iter().zip(encoded) {
        encodings[f] = e;
    }

    // Groups: equal encodings with the constants blanked out.
    let mut groups: Vec<Vec<FuncIndex>> = Vec::new();
    let mut rejected = Vec::new();
    for bucket in buckets {
        let mut keyed: Vec<(Vec<u64>, FuncIndex)> = bucket
            .iter()
            .filter_map(|&(_, f)| encodings[f].as_ref().map(|e| (blanked(e), f)))
            .collect();
        keyed.sort();
        for run in keyed.chunk_by(|a, b| a.0 == b.0) {
            if run.len() > 1 {
                groups.push(run.iter().map(|e| e.1).collect());
            }
        }
    }
    // A group with more differing holes than allowed is split into subgroups that
    // agree on enough of them.
    let mut within_limit = Vec::new();
    for members in groups {
        let parts = split_to_limit(members.clone(), &encodings, max_holes);
        if parts.is_empty() {
            let differing = differing_positions(&members, &encodings).len();
            rejected.push((
                members,
                format!(
                    "{differing} constants or callees differ (at most {max_holes}), and no two members agree on enough of them"
                ),
            ));
        }
        within_limit.extend(parts);
    }
    within_limit.sort_by_key(|g| g[0]);
    Candidates {
        encodings,
        groups: within_limit,
        rejected,
    }
}

/// The constants and callees that differ between the members of a group, in the
/// walk order of the body.
pub(crate) struct Differing {
    /// Each as a parameter of the merged body, with its value in every member.
    pub(crate) parameters: Vec<HoleParameter>,
    /// Each as the slot of the first member it replaces, with the parameter's type.
    pub(crate) slots: Vec<(Slot, Type)>,
}

/// What differs between `members` (a callee becomes a function address of
/// `pointer_type`). `None` if the first member has no encoding.
pub(crate) fn differing_parameters(
    members: &[FuncIndex],
    encodings: &SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    pointer_type: Type,
) -> Option<Differing> {
    let first = encodings[members[0]].as_ref()?;
    let mut slots: Vec<Slot> = first
        .holes()
        .iter()
        .map(|&h| Slot::Constant(h))
        .chain(first.call_sites().iter().map(|&c| Slot::Callee(c)))
        .collect();
    slots.sort_by_key(|s| s.position());
    let mut parameters = Vec::new();
    let mut differing: Vec<(Slot, Type)> = Vec::new();
    for slot in slots {
        let values: Vec<u64> = members
            .iter()
            .filter_map(|&m| encodings[m].as_ref())
            .map(|e| e.tokens()[slot.position() as usize])
            .collect();
        if values.iter().all(|&v| v == values[0]) {
            continue;
        }
        let (kind, ty) = match slot {
            Slot::Constant(h) => (HoleKind::Constant, h.ty),
            Slot::Callee(_) => (HoleKind::Callee, pointer_type),
        };
        parameters.push(HoleParameter { kind, ty, values });
        differing.push((slot, ty));
    }
    Some(Differing {
        parameters,
        slots: differing,
    })
}
