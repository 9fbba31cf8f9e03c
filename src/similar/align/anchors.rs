//! Several differing stretches in one block: the differing middle of a block is
//! cut at runs of common instructions (*anchors*), the instruction alignment
//! within a block of FMSA (CGO 2019) and HyFM (LCTES 2021), on top of the
//! common prefix and suffix of `align.rs`.
//!
//! # Phases
//!
//! 1. **Common subsequence** ([`common_subsequence`]). The longest common
//!    subsequence of the two middles' instruction shapes (`SpannedEncoding::shapes`), by
//!    dynamic programming over at most [`MAX_CELLS`] cells; a larger middle
//!    stays one stretch.
//! 2. **Runs.** The subsequence's pairs, in order, cut into runs of instructions
//!    consecutive on both sides.
//! 3. **Anchors** ([`Aligner::split_middle`]). Each run in turn is matched the
//!    way the common prefix is (`Aligner::matches`), with the stretch before it
//!    open so that values the stretch defines may escape into the run, up to
//!    the first instruction that fails. When at least [`MIN_ANCHOR`] match,
//!    they become common code and close that stretch; otherwise they are undone
//!    and stay in the stretch, since a shorter anchor saves fewer instructions
//!    than the stretch it adds costs (a branch and two jumps). The instruction
//!    that failed stays in the next stretch, and the rest of the run is tried
//!    the same way.
//!
//! # Why a merged pair computes what its members computed
//!
//! An anchor is matched by exactly the checks of the common prefix, each value
//! operand naming aligned definitions or an escape of a stretch before it, so
//! what `align.rs` argues for the prefix, the suffix and the escapes holds for
//! every piece of the block. The runs are taken in order on both sides, so run
//! as either member the merged body executes that member's instructions in its
//! own order: the prefix, its first stretch, the first anchor, its second
//! stretch, and so on to the suffix.

use super::{Aligner, Alignment, BlockParts, Refusal, STRETCH_COST, Stretch, shapes_of};
use cranelift_codegen::ir::Inst;

/// The fewest instructions of a run that make it an anchor: each anchor adds a
/// stretch, which costs a branch on the selector and two jumps.
pub(super) const MIN_ANCHOR: usize = 4;

/// At most this many anchors per pair: each adds a stretch, and the bound keeps
/// the work on pairs that differ almost everywhere in check (the differing
/// blocks have their own bounds, `MAX_STRETCHES` and `MAX_PAIRED_STRETCHES`).
pub(super) const MAX_ANCHORS: usize = 128;

/// At most this many cells in the table of [`common_subsequence`] (a middle of
/// 512 instructions against one of 512).
const MAX_CELLS: usize = 1 << 18;

/// The index pairs of a longest common subsequence of `a` and `b`, in order, or
/// `None` when the table would exceed [`MAX_CELLS`].
fn common_subsequence(a: &[u64], b: &[u64]) -> Option<Vec<(usize, usize)>> {
    let (n, m) = (a.len(), b.len());
    if n.checked_mul(m)? > MAX_CELLS {
        return None;
    }
    // longest[i * width + j]: the longest common subsequence of a[i..] and b[j..].
    let width = m + 1;
    let mut longest = vec![0u32; (n + 1) * width];
    for i in (0..n).rev() {
        for j in (0..m).rev() {
            longest[i * width + j] = if a[i] == b[j] {
                longest[(i + 1) * width + j + 1] + 1
            } else {
                longest[(i + 1) * width + j].max(longest[i * width + j + 1])
            };
        }
    }
    let mut pairs = Vec::with_capacity(longest[0] as usize);
    let (mut i, mut j) = (0, 0);
    while i < n && j < m {
        if a[i] == b[j] {
            pairs.push((i, j));
            i += 1;
            j += 1;
        } else if longest[(i + 1) * width + j] >= longest[i * width + j + 1] {
            i += 1;
        } else {
            j += 1;
        }
    }
    Some(pairs)
}

/// Whether `alignment` has a stretch long enough on both sides to hold an
/// anchor (aligning again with anchors may then duplicate less).
fn may_cut(alignment: &Alignment) -> bool {
    alignment
        .stretches
        .iter()
        .any(|s| s.suffix.is_some() && s.first.len().min(s.second.len()) > MIN_ANCHOR)
}

/// The instructions a merged body of `alignment` holds beyond the first
/// function's common code: both sides of every stretch, each stretch's branch
/// and jumps, and a placeholder per one-sided escape.
fn duplicated(alignment: &Alignment) -> usize {
    alignment
        .stretches
        .iter()
        .map(|s| {
            s.first.len()
                + s.second.len()
                + STRETCH_COST as usize
                + s.first_only.len()
                + s.second_only.len()
        })
        .sum()
}

impl Aligner<'_> {
    /// `whole` (an alignment this aligner found) with [`Alignment::cut`] set to
    /// the pair aligned again by `attempt` with stretches cut at anchors, when
    /// `whole` has a stretch long enough to cut and the cut duplicates fewer
    /// instructions.
    pub(super) fn offer_cut(
        &mut self,
        mut whole: Alignment,
        attempt: impl FnOnce(&mut Self) -> Result<Alignment, Refusal>,
    ) -> Alignment {
        if !may_cut(&whole) {
            return whole;
        }
        self.split = true;
        let cut = attempt(self);
        self.split = false;
        whole.cut = cut
            .ok()
            .filter(|cut| duplicated(cut) < duplicated(&whole))
            .map(Box::new);
        whole
    }
}

/// Where an attempt stood before a block's middle was cut at anchors: the
/// alignments it had recorded and the stretches it had found, so that a cut
/// not kept can be taken back ([`Aligner::take_back_cut`]).
#[derive(Copy, Clone)]
pub(super) struct BeforeCut {
    log: usize,
    stretches: usize,
}

impl Aligner<'_> {
    /// Where the attempt stands, with `stretches` found so far.
    pub(super) fn before_cut(&self, stretches: &[Stretch]) -> BeforeCut {
        BeforeCut {
            log: self.scratch.log.len(),
            stretches: stretches.len(),
        }
    }

    /// Forgets what was aligned and found since `before`: the alignments, and
    /// the stretches with their spans.
    pub(super) fn take_back_cut(&mut self, before: BeforeCut, stretches: &mut Vec<Stretch>) {
        self.undo(before.log);
        stretches.truncate(before.stretches);
        self.spans.truncate(before.stretches);
        self.ends.truncate(before.stretches);
    }
}

/// What [`Aligner::split_middle`] found in a block's middle.
pub(super) struct Anchored {
    /// Instructions of the first function the anchors matched.
    pub(super) common: u32,
    /// Where the stretch still open starts, in the first's and the second's block.
    pub(super) open_from: (usize, usize),
    /// How many stretches the anchors closed (pushed).
    pub(super) closed: usize,
}

impl Anchored {
    /// Nothing anchored: the stretch open from `from` covers the whole middle.
    pub(super) fn none(from: (usize, usize)) -> Self {
        Self {
            common: 0,
            open_from: from,
            closed: 0,
        }
    }
}

impl Aligner<'_> {
    /// Phase 3: cuts the middle of a block (instructions `from.0..to.0` of `a`'s
    /// block `pa`, `from.1..to.1` of `b`'s `pb`) at anchors, pushing each stretch
    /// an anchor closes onto `stretches` (at most `room` of them) and, when
    /// asked (block pairing checks their stack slots), each anchor's
    /// instruction pairs onto `matched`. Leaves the anchors aligned.
    pub(super) fn split_middle(
        &mut self,
        (pa, pb): (&BlockParts, &BlockParts),
        from: (usize, usize),
        to: (usize, usize),
        stretches: &mut Vec<Stretch>,
        mut matched: Option<&mut Vec<(Inst, Inst)>>,
        room: usize,
    ) -> Result<Anchored, Refusal> {
        let (a, b) = (self.a, self.b);
        let mut anchored = Anchored::none(from);
        if to.0.saturating_sub(from.0).min(to.1.saturating_sub(from.1)) < MIN_ANCHOR {
            return Ok(anchored);
        }
        let (sa, sb) = (shapes_of(a), shapes_of(b));
        let middle_a = &sa[pa.insts.start + from.0..pa.insts.start + to.0];
        let middle_b = &sb[pb.insts.start + from.1..pb.insts.start + to.1];
        let Some(pairs) = common_subsequence(middle_a, middle_b) else {
            return Ok(anchored);
        };
        let inst_a = |i: usize| a.inst_span(pa.insts.start + i, pa);
        let inst_b = |i: usize| b.inst_span(pb.insts.start + i, pb);
        let at_a = |i: usize| a.insts[pa.insts.start + i].1;
        let at_b = |i: usize| b.insts[pb.insts.start + i].1;
        let mut k = 0;
        while k < pairs.len() {
            // Phase 2: the run starting at pair `k`.
            let (i0, j0) = (from.0 + pairs[k].0, from.1 + pairs[k].1);
            let mut run = 1;
            while pairs
                .get(k + run)
                .is_some_and(|&(x, y)| from.0 + x == i0 + run && from.1 + y == j0 + run)
            {
                run += 1;
            }
            k += run;
            // Phase 3: anchors in the run, each as long as its instructions
            // match; one that fails stays in the stretch after the anchor
            // before it, and the rest of the run is tried again.
            let mut offset = 0;
            while offset + MIN_ANCHOR <= run && anchored.closed < room {
                let (i, j) = (i0 + offset, j0 + offset);
                let (ca, cb) = anchored.open_from;
                let mark = self.scratch.log.len();
                self.open = Some((
                    inst_a(ca).start..inst_a(i).start,
                    inst_b(cb).start..inst_b(j).start,
                ));
                let mut matching = 0;
                while offset + matching < run
                    && self.matches(inst_a(i + matching), inst_b(j + matching))
                {
                    matching += 1;
                }
                self.open = None;
                // Past the instruction that failed (or the end of the run).
                offset += matching + 1;
                if matching < MIN_ANCHOR {
                    self.undo(mark);
                    continue;
                }
                if i > ca || j > cb {
                    let block = self.fa.layout.inst_block(at_a(i));
                    let block = block.ok_or(Refusal::Structure)?;
                    let first = (ca..i).map(at_a).collect();
                    let second = (cb..j).map(at_b).collect();
                    stretches.push(self.joined_stretch(block, first, at_a(i), second)?);
                    self.spans.push((
                        inst_a(ca).start..inst_a(i).start,
                        inst_b(cb).start..inst_b(j).start,
                    ));
                    self.ends.push(false);
                    anchored.closed += 1;
                }
                if let Some(matched) = matched.as_deref_mut() {
                    matched.extend((0..matching).map(|x| (at_a(i + x), at_b(j + x))));
                }
                anchored.common += matching as u32;
                anchored.open_from = (i + matching, j + matching);
            }
        }
        Ok(anchored)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_subsequence_is_longest_and_in_order() {
        let pairs = common_subsequence(&[1, 2, 3, 4, 5, 6], &[9, 2, 3, 7, 5, 6, 8]);
        assert_eq!(pairs, Some(vec![(1, 1), (2, 2), (4, 4), (5, 5)]));
        assert_eq!(common_subsequence(&[], &[1]), Some(Vec::new()));
        let long = vec![0u64; 1024];
        assert_eq!(common_subsequence(&long, &long), None);
    }
}
