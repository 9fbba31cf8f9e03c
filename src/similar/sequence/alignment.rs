//! What merging by sequence alignment decides for a pair before writing its
//! merged body: the merged body's blocks in order, each paired block with the
//! steps of its instructions, and whether the pair might pay.

use crate::ir::FuncIndex;
use cranelift_codegen::ir::Block;

/// How a pair aligns: the merged body's blocks in order, each with the steps
/// of its instructions (the terminators apart).
#[derive(Clone, Debug)]
pub(crate) struct SequenceAlignment {
    /// The second member.
    pub(crate) second: FuncIndex,
    /// The merged body's blocks, in layout order.
    pub(super) blocks: Vec<MergedBlock>,
}

impl SequenceAlignment {
    /// Whether the pair might pay, counted in instructions before building
    /// it (HyFM's first tier): the instructions the two share must be at
    /// least [`MIN_SHARED_PERCENT`] of the paired blocks' instructions, and
    /// outweigh a branch and two jumps per run of instructions only one has,
    /// an unpaired block's jump, and the entry points' calls. Optimistic: the
    /// `select`s and the values carried through block parameters are not
    /// counted.
    pub(super) fn promising(&self) -> bool {
        let (mut shared, mut one_sided, mut overhead) = (0usize, 0usize, 2 * ENTRY_POINT);
        for block in &self.blocks {
            match block {
                MergedBlock::Paired { steps, .. } => {
                    let mut in_run = false;
                    for step in steps {
                        let alone = !matches!(step, Step::Both(..));
                        if alone && !in_run {
                            overhead += RUN;
                        }
                        in_run = alone;
                        shared += usize::from(!alone);
                        one_sided += usize::from(alone);
                    }
                }
                MergedBlock::First(_) | MergedBlock::Second(_) => overhead += 1,
            }
        }
        shared > overhead && shared * 100 >= MIN_SHARED_PERCENT * (shared + one_sided)
    }
}

/// A pair is built only when at least this percentage of its paired blocks'
/// instructions align. On the corpus every pair that saved had at least 62%,
/// and 301 of the 802 priced that did not save had less than half.
pub const MIN_SHARED_PERCENT: usize = 50;

/// What a run of instructions only one member has adds, in instructions: a
/// branch on the selector and the arms' jumps.
const RUN: usize = 3;

/// What an entry point takes, in instructions (a constant and a call).
const ENTRY_POINT: usize = 3;

/// A block of the merged body.
#[derive(Clone, Debug)]
pub(super) enum MergedBlock {
    /// A block of each member, their instructions aligned.
    Paired {
        first: Block,
        second: Block,
        steps: Vec<Step>,
    },
    /// A block only the first member has.
    First(Block),
    /// A block only the second member has.
    Second(Block),
}

/// One step of a paired block: indices into the two blocks' instructions
/// (terminators apart).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum Step {
    Both(usize, usize),
    First(usize),
    Second(usize),
}
