//! Grouping similar functions: which constants, callees and callee-load offsets may
//! become parameters
//! ([`Slot`]s), the stream with them blanked (equal blanked streams make a group),
//! which parameters a group needs (slots whose values agree in every member share
//! one), and how a group is split into subgroups.

use super::align::Alignment;
use super::sequence::SequenceAlignment;
use crate::identical::encode::{
    CallSite, FunctionEncoding, Hole, HoleSite, WalkOptions, WalkScratch, encode_function,
    walk_in_parallel,
};
use crate::identical::fingerprint::{Fingerprint, FingerprintScratch};
use crate::identical::hash::StructuralHash;
use crate::ir::{FuncIndex, FunctionSet, parallel, reads_machine_state};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Type, types};

/// What a parameter of a merged body stands for.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HoleKind {
    /// An integer or float constant; the values are its bits.
    Constant,
    /// The callee of a direct call; the values are the callees' [`FuncIndex`]es. The
    /// merged body calls it with `call_indirect` through the parameter, and each
    /// entry point passes its callee's `func_addr`.
    Callee,
    /// The offset of a load from a function parameter whose result is only an
    /// indirect call's callee or context (wasmtime's call of an imported function;
    /// see the module docs of `similar`); the values are the offsets, sign-extended to
    /// `i64`. The merged body loads from the parameter plus the offset parameter, and
    /// each entry point passes its offset as an `i64` constant.
    CalleeLoadOffset,
    /// Which member runs (merging by alignment, `align.rs`): `0` for the first
    /// member, whose differing stretches the merged body runs when it is zero, `1`
    /// for the second, whose stretches it runs otherwise; in a group of three or
    /// more, each member's position (its stretches run where the selector equals
    /// it). An `i32`.
    Selector,
}

/// A trailing parameter of the merged body: one or more constants, callees or
/// callee-load offsets that differ between the members of a group and agree with
/// each other in every member.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct HoleParameter {
    /// Constant, callee or callee-load offset.
    pub kind: HoleKind,
    /// The parameter's type (the pointer type for a callee).
    pub ty: Type,
    /// Its value in each member, in member order.
    pub values: Vec<u64>,
    /// How many constants, callees or offsets of the body it stands for: more than
    /// one when they hold the same value in every member (a shared parameter).
    pub uses: usize,
}

/// A place in a body that may become a parameter.
#[derive(Copy, Clone, Debug)]
pub(crate) enum Slot {
    /// A constant operand.
    Constant(Hole),
    /// The callee of a direct call.
    Callee(CallSite),
    /// The offset of a callee load.
    LoadOffset(Hole),
}

impl Slot {
    /// Where its token is in the encoding.
    pub(crate) fn position(self) -> u32 {
        match self {
            Slot::Constant(h) | Slot::LoadOffset(h) => h.position,
            Slot::Callee(c) => c.position,
        }
    }

    /// The slot of a hole.
    fn of_hole(hole: Hole) -> Slot {
        match hole.site {
            HoleSite::Constant => Slot::Constant(hole),
            HoleSite::CalleeLoadOffset => Slot::LoadOffset(hole),
        }
    }
}

/// What groups similar functions: equal keys, equal but for the holes.
type GroupKey = (Vec<u64>, Vec<u32>);

/// The key that groups similar functions: the token stream with every hole and
/// direct callee blanked, and the positions of the load-offset holes.
///
/// Which positions hold constants and direct callees is decided by the tokens
/// before them (the grammar is deterministic), so two streams equal once blanked
/// have them at the same positions. Whether a load's offset is a hole is decided by
/// how the load's result is used ([`HoleSite::CalleeLoadOffset`]), which a stream
/// need not show in full (uses in unreachable blocks are not written), so those
/// positions are part of the key: functions whose load-offset holes differ are
/// never grouped, and a merged body (a copy of the first member, with the first
/// member's holes made parameters) never fixes an offset another member has as a
/// hole.
fn blanked(encoding: &FunctionEncoding) -> GroupKey {
    let mut tokens = encoding.tokens().to_vec();
    let mut load_offsets = Vec::new();
    for hole in encoding.holes() {
        tokens[hole.position as usize] = 0;
        if hole.site == HoleSite::CalleeLoadOffset {
            load_offsets.push(hole.position);
        }
    }
    for call in encoding.call_sites() {
        tokens[call.position as usize] = 0;
    }
    (tokens, load_offsets)
}

/// The positions [`blanked`] blanks in one encoding, in stream order, and
/// those of its load-offset holes: what [`blanked_equal`] compares without
/// building the blanked stream.
struct BlankedPositions {
    blanked: Vec<u32>,
    load_offsets: Vec<u32>,
}

impl BlankedPositions {
    fn of(encoding: &FunctionEncoding) -> Self {
        // Holes and call sites are each recorded in stream order.
        let (holes, calls) = (encoding.holes(), encoding.call_sites());
        let mut blanked = Vec::with_capacity(holes.len() + calls.len());
        let (mut h, mut c) = (0, 0);
        while h < holes.len() || c < calls.len() {
            let hole = holes.get(h).map_or(u32::MAX, |hole| hole.position);
            let call = calls.get(c).map_or(u32::MAX, |call| call.position);
            if hole <= call {
                blanked.push(hole);
                h += 1;
            } else {
                blanked.push(call);
                c += 1;
            }
        }
        let load_offsets = holes
            .iter()
            .filter(|hole| hole.site == HoleSite::CalleeLoadOffset)
            .map(|hole| hole.position)
            .collect();
        Self {
            blanked,
            load_offsets,
        }
    }
}

/// Whether `a` and `b` (with their [`BlankedPositions`]) have equal
/// [`blanked`] keys: equal load-offset positions, and equal tokens at every
/// position once each stream's blanked positions read 0. Compares the runs
/// between blanked positions whole.
fn blanked_equal(
    a: &FunctionEncoding,
    a_positions: &BlankedPositions,
    b: &FunctionEncoding,
    b_positions: &BlankedPositions,
) -> bool {
    let (ta, tb) = (a.tokens(), b.tokens());
    if ta.len() != tb.len() || a_positions.load_offsets != b_positions.load_offsets {
        return false;
    }
    let (sa, sb) = (&a_positions.blanked, &b_positions.blanked);
    let end = ta.len() as u32;
    let (mut i, mut j, mut from) = (0, 0, 0u32);
    loop {
        let next_a = sa.get(i).copied().unwrap_or(end);
        let next_b = sb.get(j).copied().unwrap_or(end);
        let next = next_a.min(next_b);
        if ta[from as usize..next as usize] != tb[from as usize..next as usize] {
            return false;
        }
        if next == end {
            return true;
        }
        let (blank_a, blank_b) = (next_a == next, next_b == next);
        let token = |t: &[u64], blank: bool| if blank { 0 } else { t[next as usize] };
        if token(ta, blank_a) != token(tb, blank_b) {
            return false;
        }
        i += usize::from(blank_a);
        j += usize::from(blank_b);
        from = next + 1;
    }
}

/// The groups of similar functions of a module, and what they were found from.
pub(crate) struct Candidates {
    /// The encodings of the functions that share their constant-blind hash with
    /// another (the others are `None`).
    pub(crate) encodings: SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    /// Groups of similar functions (equal but for constants and callees), members
    /// in input order, ordered by first member. How many parameters a group needs is
    /// not looked at here: the caller splits groups ([`split_by_parameter`]).
    pub(crate) groups: Vec<Vec<FuncIndex>>,
}

/// Finds the groups of similar functions of `module`: buckets of functions
/// sharing the hash that leaves the holes out, then runs of equal blanked
/// streams.
pub(crate) fn find_groups(
    module: &FunctionSet,
    walk: WalkOptions,
    known: &KnownFingerprints,
) -> Candidates {
    let all: Vec<FuncIndex> = module.iter().map(|(f, _)| f).collect();
    let hashes = parallel::map_init(&all, 16, FingerprintScratch::default, |scratch, &f| {
        let func = &module.get(f).func;
        Some(known[f].unwrap_or_else(|| {
            Fingerprint::hole_blind(walk.callee_load_holes)
                .walk(func, module, scratch)
                .hashed
                .hash
        }))
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
    // A member becomes an entry point that calls the merged body, whose extra
    // frame would change what a reader of machine state reads.
    let candidates: Vec<FuncIndex> = buckets
        .iter()
        .flat_map(|b| b.iter().map(|e| e.1))
        .filter(|&f| !reads_machine_state(&module.get(f).func))
        .collect();
    let encoded = walk_in_parallel(module, &candidates, |func, scratch| {
        encode_function(func, module, walk, scratch).ok()
    });
    let mut encodings: SecondaryMap<FuncIndex, Option<FunctionEncoding>> = SecondaryMap::new();
    for (&f, e) in candidates.iter().zip(encoded) {
        encodings[f] = e;
    }

    let mut groups: Vec<Vec<FuncIndex>> = Vec::new();
    // Groups: equal encodings with the constants blanked out. A bucket's
    // members come in input order; each joins the first run whose first member
    // it equals (blanked equality is an equivalence), so every run is in input
    // order, as sorting by key would leave it.
    for bucket in buckets {
        // Each run: its first member's encoding and blanked positions, and its members.
        let mut runs: Vec<(&FunctionEncoding, BlankedPositions, Vec<FuncIndex>)> = Vec::new();
        for &(_, f) in bucket {
            let Some(encoding) = encodings[f].as_ref() else {
                continue;
            };
            let positions = BlankedPositions::of(encoding);
            let run = runs.iter_mut().find(|(first, first_positions, _)| {
                blanked_equal(first, first_positions, encoding, &positions)
            });
            match run {
                Some((_, _, members)) => members.push(f),
                None => runs.push((encoding, positions, vec![f])),
            }
        }
        groups.extend(
            runs.into_iter()
                .map(|(_, _, members)| members)
                .filter(|members| members.len() > 1),
        );
    }
    groups.sort_by_key(|g| g[0]);
    Candidates { encodings, groups }
}

/// Hole-blind fingerprints already known, per function of the module the similar
/// merge runs on (computed by the identical merge's walk:
/// [`MergeOptions::similar_fingerprints`](crate::MergeOptions::similar_fingerprints)).
pub(crate) type KnownFingerprints = SecondaryMap<FuncIndex, Option<StructuralHash>>;

/// The walk of the similar merge: function addresses are significant (the first
/// pass already merged what may share one) and callee-load offsets are holes.
pub(crate) fn similar_walk() -> WalkOptions {
    WalkOptions {
        addresses_significant: true,
        callee_load_holes: true,
        ..WalkOptions::default()
    }
}

/// Pairs of functions of `module` whose streams with the holes blanked are equal
/// (the key that makes a group of similar functions, under the similar merge's
/// walk) but whose hole-blind fingerprints differ: similar functions the buckets
/// would keep apart. Every function is encoded, not only those sharing a bucket,
/// so this checks the bucketing independently of it; empty when the hash agrees
/// with the grouping.
pub fn hole_blind_disagreements(module: &FunctionSet) -> Vec<(FuncIndex, FuncIndex)> {
    let walk = similar_walk();
    let mut walk_scratch = WalkScratch::default();
    let mut hash_scratch = FingerprintScratch::default();
    let mut keyed: Vec<(GroupKey, StructuralHash, FuncIndex)> = module
        .iter()
        .filter_map(|(f, def)| {
            let func = &def.func;
            let encoding = encode_function(func, module, walk, &mut walk_scratch).ok()?;
            let hash = Fingerprint::hole_blind(walk.callee_load_holes)
                .walk(func, module, &mut hash_scratch)
                .hashed
                .hash;
            Some((blanked(&encoding), hash, f))
        })
        .collect();
    keyed.sort();
    keyed
        .chunk_by(|a, b| a.0 == b.0)
        .flat_map(|run| {
            run.windows(2)
                .filter(|w| w[0].1 != w[1].1)
                .map(|w| (w[0].2, w[1].2))
        })
        .collect()
}

/// `members` split by the values of `parameter` (one of their parameters): one part
/// per distinct value, in order of first member, members in input order; parts of
/// one member are left out.
pub(crate) fn split_by_parameter(
    members: &[FuncIndex],
    parameter: &HoleParameter,
) -> Vec<Vec<FuncIndex>> {
    let mut parts: Vec<(u64, Vec<FuncIndex>)> = Vec::new();
    for (&m, &v) in members.iter().zip(&parameter.values) {
        match parts.iter_mut().find(|(key, _)| *key == v) {
            Some((_, part)) => part.push(m),
            None => parts.push((v, vec![m])),
        }
    }
    parts
        .into_iter()
        .map(|(_, part)| part)
        .filter(|part| part.len() > 1)
        .collect()
}

/// The parameter to split a group by: the one with the fewest distinct values (the
/// one most members agree on), the first in walk order among equals. `None` when
/// nothing differs.
pub(crate) fn split_parameter(parameters: &[HoleParameter]) -> Option<&HoleParameter> {
    let distinct = |p: &HoleParameter| {
        let mut values = p.values.clone();
        values.sort_unstable();
        values.dedup();
        values.len()
    };
    parameters
        .iter()
        .enumerate()
        .min_by_key(|&(i, p)| (distinct(p), i))
        .map(|(_, p)| p)
}

/// The constants, callees and offsets that differ between the members of a group,
/// in the walk order of the body.
#[derive(Clone)]
pub(crate) struct Differing {
    /// The parameters of the merged body, in order of their first slot: one per
    /// distinct kind, type and tuple of member values, with its value in every member.
    pub(crate) parameters: Vec<HoleParameter>,
    /// Each differing slot of the first member, in walk order, with the index in
    /// [`Self::parameters`] of the parameter that replaces it.
    pub(crate) slots: Vec<(Slot, usize)>,
    /// For an aligned pair, how the second member aligns with the first: the
    /// merged body runs its stretches where the [`HoleKind::Selector`] parameter is
    /// nonzero.
    pub(crate) alignment: Option<Alignment>,
    /// For an aligned group of three or more members: how each member after the
    /// second aligns with the first, at the same places as the second
    /// ([`Alignment::same_places`]); the merged body runs the `j`-th one's
    /// stretches where the selector is `j + 2`. Empty for a pair.
    pub(crate) joined: Vec<Alignment>,
    /// For a pair merged by sequence alignment: how the second member aligns
    /// with the first, the merged body written whole from both
    /// (`sequence/`).
    pub(crate) sequence: Option<SequenceAlignment>,
}

impl Differing {
    /// What differs between the two members of an aligned pair: their stretches,
    /// chosen by one selector parameter.
    pub(crate) fn aligned(alignment: Alignment) -> Self {
        Self::grouped(alignment, Vec::new())
    }

    /// What differs between the members of an aligned group: the first, the
    /// second of `alignment`, then the second of each of `joined` (each aligned
    /// with the first at the same places as `alignment`), their stretches chosen
    /// by one selector parameter whose value is the member's position.
    pub(crate) fn grouped(alignment: Alignment, joined: Vec<Alignment>) -> Self {
        Self {
            parameters: vec![HoleParameter {
                kind: HoleKind::Selector,
                ty: types::I32,
                values: (0..2 + joined.len() as u64).collect(),
                uses: alignment.stretches.len(),
            }],
            slots: Vec::new(),
            alignment: Some(alignment),
            joined,
            sequence: None,
        }
    }

    /// What differs between the two members of a pair merged by sequence
    /// alignment: everything the alignment did not pair, chosen by one
    /// selector parameter.
    pub(crate) fn sequence(alignment: SequenceAlignment) -> Self {
        Self {
            parameters: vec![HoleParameter {
                kind: HoleKind::Selector,
                ty: types::I32,
                values: vec![0, 1],
                uses: 1,
            }],
            slots: Vec::new(),
            alignment: None,
            joined: Vec::new(),
            sequence: Some(alignment),
        }
    }
}

/// What differs between `members` (a callee becomes a function address of
/// `pointer_type`). Slots whose values agree in every member (the same tuple across
/// the members), of the same kind and type, share one parameter; slots that agree
/// in some members only do not. `None` if a member has no encoding.
pub(crate) fn differing_parameters(
    members: &[FuncIndex],
    encodings: &SecondaryMap<FuncIndex, Option<FunctionEncoding>>,
    pointer_type: Type,
) -> Option<Differing> {
    let member_encodings: Vec<&FunctionEncoding> = members
        .iter()
        .map(|&m| encodings[m].as_ref())
        .collect::<Option<_>>()?;
    let first = member_encodings.first()?;
    let mut slots: Vec<Slot> = first
        .holes()
        .iter()
        .map(|&h| Slot::of_hole(h))
        .chain(first.call_sites().iter().map(|&c| Slot::Callee(c)))
        .collect();
    slots.sort_by_key(|s| s.position());
    let mut parameters: Vec<HoleParameter> = Vec::new();
    let mut differing: Vec<(Slot, usize)> = Vec::new();
    for slot in slots {
        // Most slots hold the same value in every member: compared in place,
        // so that only a differing slot allocates its values.
        let position = slot.position() as usize;
        let value = first.tokens()[position];
        if member_encodings
            .iter()
            .all(|e| e.tokens()[position] == value)
        {
            continue;
        }
        let values: Vec<u64> = member_encodings
            .iter()
            .map(|e| e.tokens()[position])
            .collect();
        let (kind, ty) = match slot {
            Slot::Constant(h) => (HoleKind::Constant, h.ty),
            Slot::Callee(_) => (HoleKind::Callee, pointer_type),
            Slot::LoadOffset(h) => (HoleKind::CalleeLoadOffset, h.ty),
        };
        let shared = parameters
            .iter()
            .position(|p| p.kind == kind && p.ty == ty && p.values == values);
        let index = match shared {
            Some(index) => {
                parameters[index].uses += 1;
                index
            }
            None => {
                parameters.push(HoleParameter {
                    kind,
                    ty,
                    values,
                    uses: 1,
                });
                parameters.len() - 1
            }
        };
        differing.push((slot, index));
    }
    Some(Differing {
        parameters,
        slots: differing,
        alignment: None,
        joined: Vec::new(),
        sequence: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identical::encode::WalkScratch;
    use crate::ir::Linkage;
    use cranelift_codegen::entity::EntityRef;

    /// The walk of the similar merge.
    const WALK: WalkOptions = WalkOptions {
        addresses_significant: true,
        symbols_by_reference: false,
        callee_load_holes: true,
    };

    /// A call of an imported function through loads from `vmctx` at `ctx` and
    /// `code`, followed by `extra` (blocks after the entry block).
    fn caller(name: &str, ctx: u32, code: u32, extra: &str) -> String {
        format!(
            "function %{name}(i64 vmctx, i32) -> i32 tail {{
                sig0 = (i64 vmctx, i64, i32) -> i32 tail
            block0(v0: i64, v1: i32):
                v2 = load.i64 notrap aligned readonly can_move v0+{ctx}
                v3 = load.i64 notrap aligned readonly can_move v0+{code}
                v4 = call_indirect sig0, v3(v2, v0, v1)
                return v4
            {extra}
            }}\n"
        )
    }

    fn module(text: &str) -> FunctionSet {
        let mut module = FunctionSet::new();
        for f in cranelift_reader::parse_functions(text).expect("parses") {
            module.push(f, Linkage::Local).expect("unique names");
        }
        module
    }

    fn encoding(module: &FunctionSet, i: usize, walk: WalkOptions) -> FunctionEncoding {
        let func = &module.get(FuncIndex::new(i)).func;
        encode_function(func, module, walk, &mut WalkScratch::default()).expect("encodes")
    }

    fn hashes(
        module: &FunctionSet,
        i: usize,
        walk: WalkOptions,
    ) -> (StructuralHash, StructuralHash) {
        let func = &module.get(FuncIndex::new(i)).func;
        let mut scratch = FingerprintScratch::default();
        let blind = Fingerprint::hole_blind(walk.callee_load_holes)
            .walk(func, module, &mut scratch)
            .hashed
            .hash;
        let full = Fingerprint::EXACT
            .walk(func, module, &mut FingerprintScratch::default())
            .hashed;
        (blind, full.hash)
    }

    #[test]
    fn callee_load_offsets_are_holes_the_hole_blind_hash_leaves_out() {
        let text = caller("f", 608, 592, "") + &caller("g", 704, 688, "");
        let module = module(&text);
        let sites: Vec<HoleSite> = encoding(&module, 0, WALK)
            .holes()
            .iter()
            .map(|h| h.site)
            .collect();
        assert_eq!(sites, [HoleSite::CalleeLoadOffset; 2]);
        let (f_blind, f_full) = hashes(&module, 0, WALK);
        let (g_blind, g_full) = hashes(&module, 1, WALK);
        assert_eq!(f_blind, g_blind);
        assert_ne!(f_full, g_full);
        assert_eq!(
            find_groups(&module, WALK, &KnownFingerprints::new())
                .groups
                .len(),
            1
        );
        // Without the option (the identical merge's walk), offsets are plain tokens.
        let plain = WalkOptions {
            callee_load_holes: false,
            ..WALK
        };
        assert!(encoding(&module, 0, plain).holes().is_empty());
        assert_ne!(hashes(&module, 0, plain).0, hashes(&module, 1, plain).0);
        assert!(
            find_groups(&module, plain, &KnownFingerprints::new())
                .groups
                .is_empty()
        );
    }

    #[test]
    fn load_offset_holes_at_other_positions_never_group() {
        // In %f the code pointer is also used in a block the walk never reaches, so
        // neither load is a callee load and the offsets (0) are written; in %g they
        // are holes. The blanked streams are equal, the keys are not.
        let unreachable = "block1:
                v5 = ireduce.i32 v3
                return v5";
        let text = caller("f", 0, 0, unreachable) + &caller("g", 8, 16, "");
        let module = module(&text);
        let f = encoding(&module, 0, WALK);
        let g = encoding(&module, 1, WALK);
        assert!(f.holes().is_empty());
        assert_eq!(g.holes().len(), 2);
        assert_eq!(blanked(&f).0, blanked(&g).0);
        assert_ne!(blanked(&f), blanked(&g));
        let (pf, pg) = (BlankedPositions::of(&f), BlankedPositions::of(&g));
        assert!(!blanked_equal(&f, &pf, &g, &pg));
        assert!(
            find_groups(&module, WALK, &KnownFingerprints::new())
                .groups
                .is_empty()
        );
    }

    /// `blanked_equal` says what comparing the built keys says, on every pair
    /// of functions of the filetests with streams of one length (similar
    /// functions among them: the similar filetests' members).
    #[test]
    fn blanked_equal_agrees_with_the_keys() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
        let mut encodings = Vec::new();
        for kind in ["merge", "nomerge", "similar"] {
            let mut paths: Vec<_> = std::fs::read_dir(root.join(kind))
                .expect("filetests")
                .map(|e| e.expect("entry").path())
                .collect();
            paths.sort();
            for path in paths {
                let text = std::fs::read_to_string(&path).expect("reads");
                let Ok(functions) = cranelift_reader::parse_functions(&text) else {
                    continue;
                };
                let mut module = FunctionSet::new();
                for f in functions {
                    if module.push(f, Linkage::Local).is_err() {
                        break;
                    }
                }
                for (f, def) in module.iter() {
                    let mut scratch = WalkScratch::default();
                    if let Ok(e) = encode_function(&def.func, &module, WALK, &mut scratch) {
                        encodings.push((format!("{}:{f}", path.display()), e));
                    }
                }
            }
        }
        let (mut equal, mut compared) = (0, 0);
        for (i, (name_a, a)) in encodings.iter().enumerate() {
            let pa = BlankedPositions::of(a);
            for (name_b, b) in &encodings[i + 1..] {
                if a.tokens().len() != b.tokens().len() {
                    continue;
                }
                let pb = BlankedPositions::of(b);
                let keys_equal = blanked(a) == blanked(b);
                assert_eq!(
                    blanked_equal(a, &pa, b, &pb),
                    keys_equal,
                    "{name_a} and {name_b}"
                );
                compared += 1;
                equal += usize::from(keys_equal);
            }
        }
        // Both answers occur, so the check is not vacuous.
        assert!(equal > 50 && compared > equal, "{equal} of {compared}");
    }
}
