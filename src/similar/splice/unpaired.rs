//! Copying the second function's unpaired blocks into a merged body (merging by
//! block pairing, `align/blocks.rs`).
//!
//! Two steps: before the stretches are spliced, each unpaired block gets an
//! empty block of the merged body with parameters of the same types (so that a
//! copied terminator, in a stretch or an unpaired block, can branch to it); after
//! them, each block's instructions are copied in walk order (a block after its
//! dominators, so every value a copy uses from another unpaired block or from a
//! second arm is already mapped). Values the alignment aligned become the first
//! function's; an escape becomes the join's parameter through the first
//! function's value, as in the stretches. Whether each copy's values dominate
//! their uses is left to Cranelift's verifier, which runs on every such body.

use super::{Copier, NotSpliced};
use cranelift_codegen::ir::Block;

impl Copier<'_> {
    /// Makes the merged body's block for each of `unpaired` (the second
    /// function's), with its parameters, and returns them in order.
    pub(super) fn make_unpaired(&mut self, unpaired: &[Block]) -> Vec<(Block, Block)> {
        let mut made = Vec::with_capacity(unpaired.len());
        for &block in unpaired {
            let copy = self.merged.dfg.make_block();
            self.merged.layout.append_block(copy);
            for &param in self.second.dfg.block_params(block) {
                let ty = self.second.dfg.value_type(param);
                let mapped = self.merged.dfg.append_block_param(copy, ty);
                self.values.insert(param, mapped);
            }
            self.blocks.insert(block, copy);
            made.push((block, copy));
        }
        made
    }

    /// Copies each of the second function's blocks of `made` (with its copy) in
    /// order.
    pub(super) fn copy_unpaired(&mut self, made: &[(Block, Block)]) -> Result<(), NotSpliced> {
        let second = self.second;
        for &(block, copy) in made {
            for inst in second.layout.block_insts(block) {
                self.copy(inst, copy)?;
            }
        }
        Ok(())
    }

    /// Counts each unpaired block as an arm of its function for the check of
    /// one-sided escapes: the second's copies (`made`) and the first's own
    /// (`first`), each entered only from its function's arms and unpaired
    /// blocks, so run only under that function's selector value.
    pub(super) fn own_unpaired(&mut self, made: &[(Block, Block)], first: &[Block]) {
        for &(_, copy) in made {
            self.arms.insert(copy, false);
        }
        for &block in first {
            self.arms.insert(block, true);
        }
    }
}
