//! A function's layout read in the order of entity numbers: the blocks and
//! instructions the layout holds, through the tables that hold them, rather
//! than by following the layout's links (`Layout::blocks`, `block_insts`), where
//! each read waits for the one before. For whatever does not depend on the order
//! (a count, a sum, a set, a property of each instruction on its own).

use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Block, Function, Inst};

/// The blocks of `func`'s layout, in the order of their numbers.
pub(crate) fn blocks_by_number(func: &Function) -> impl Iterator<Item = Block> + '_ {
    (0..func.dfg.num_blocks())
        .map(Block::new)
        .filter(|&block| func.layout.is_block_inserted(block))
}

/// The instructions of `func`'s layout (every one in a block, reachable or
/// not), in the order of their numbers.
pub(crate) fn insts_by_number(func: &Function) -> impl Iterator<Item = Inst> + '_ {
    (0..func.dfg.num_insts())
        .map(Inst::new)
        .filter(|&inst| func.layout.inst_block(inst).is_some())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same blocks and instructions as the layout's links, unreachable
    /// ones included, and none that is not in the layout.
    #[test]
    fn the_layout_by_number_is_the_layout() {
        let text = "function %f(i32) -> i32 {
            block0(v0: i32):
                brif v0, block2, block1
            block2:
                v3 = iconst.i32 1
                v1 = iadd v0, v3
                return v1
            block1:
                return v0
            block3:
                v2 = iconst.i32 7
                return v2
            }";
        let mut func = cranelift_reader::parse_functions(text)
            .expect("parses")
            .remove(0);
        let detached = func.dfg.make_block();
        let mut linked: Vec<Block> = func.layout.blocks().collect();
        let mut numbered: Vec<Block> = blocks_by_number(&func).collect();
        linked.sort();
        numbered.sort();
        assert_eq!(linked, numbered);
        assert!(!numbered.contains(&detached));
        let mut linked: Vec<Inst> = func
            .layout
            .blocks()
            .flat_map(|b| func.layout.block_insts(b))
            .collect();
        linked.sort();
        let removed = linked[0];
        func.layout.remove_inst(removed);
        linked.remove(0);
        assert_eq!(insts_by_number(&func).collect::<Vec<_>>(), linked);
    }
}
