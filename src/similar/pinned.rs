//! Memory accesses that run for some members of a merge only keep their place.
//!
//! A load flagged `can_move` promises that it may run anywhere in its function
//! where its operands are available (Cranelift's egraph hoists such loads, out
//! of loops among others). In a merged body with a selector parameter, a block
//! that runs for some members only (an arm, an unpaired block) holds one
//! member's loads, whose operands are, run as another member, that member's
//! values: the promise was made for the first member's values only. So every
//! memory access in such a block loses `can_move` (the rest of its flags is
//! kept), and Cranelift leaves it where it is.
//!
//! Which blocks run for which members is read from the merged body itself: the
//! selector is a parameter, constant for a call, so run as member `k`, a `brif`
//! on the selector goes only to its first target when `k` is nonzero and only
//! to its second when `k` is zero, a `brif` on the selector compared for
//! equality with a constant (a group's dispatch) only where the comparison
//! sends `k`, and a `br_table` on it only to entry `k` (the default past the
//! table). A block reached for some members but not all is *one-sided*.

use super::splice::NotSpliced;
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{self, Block, Function, InstructionData, Value};

/// Clears `can_move` from every memory access of `merged` in a block that runs
/// for some but not all of the `members` selector values (`0..members`) of
/// `selector`; an error when some flags cannot be rewritten.
pub(crate) fn pin_one_sided(
    merged: &mut Function,
    selector: Value,
    members: usize,
) -> Result<(), NotSpliced> {
    let Some(entry) = merged.layout.entry_block() else {
        return Ok(());
    };
    let selector = merged.dfg.resolve_aliases(selector);
    // How many members run each block: one walk per member, `seen` holding
    // the last member whose walk reached the block (plus one).
    let mut runs_for = SecondaryMap::<Block, usize>::new();
    let mut seen = SecondaryMap::<Block, usize>::new();
    let mut stack = Vec::new();
    for member in 0..members {
        stack.push(entry);
        seen[entry] = member + 1;
        while let Some(block) = stack.pop() {
            runs_for[block] += 1;
            for_successors(merged, block, selector, member, |target| {
                if seen[target] != member + 1 {
                    seen[target] = member + 1;
                    stack.push(target);
                }
            });
        }
    }
    // Each distinct set of flags is pinned once.
    let mut pinned_flags: Vec<(ir::MemFlags, ir::MemFlags)> = Vec::new();
    let mut block = merged.layout.entry_block();
    while let Some(b) = block {
        block = merged.layout.next_block(b);
        if runs_for[b] == 0 || runs_for[b] == members {
            continue;
        }
        let mut inst = merged.layout.first_inst(b);
        while let Some(i) = inst {
            inst = merged.layout.next_inst(i);
            let Some(flags) = merged.dfg.insts[i].memflags() else {
                continue;
            };
            let pinned = match pinned_flags.iter().find(|&&(from, _)| from == flags) {
                Some(&(_, to)) => to,
                None => {
                    let data = merged.dfg.mem_flags[flags];
                    let to = if data.can_move() {
                        let pinned = without_can_move(data).ok_or_else(|| {
                            NotSpliced("memory flags whose can_move cannot be cleared".into())
                        })?;
                        merged.dfg.mem_flags.insert(pinned).map_err(|_| {
                            NotSpliced("more memory flags than a function can hold".into())
                        })?
                    } else {
                        flags
                    };
                    pinned_flags.push((flags, to));
                    to
                }
            };
            if let Some(slot) = merged.dfg.insts[i].memflags_mut() {
                *slot = pinned;
            }
        }
    }
    Ok(())
}

/// Calls `visit` with each block `block` of `func` may branch to when run as
/// `member`.
fn for_successors(
    func: &Function,
    block: Block,
    selector: Value,
    member: usize,
    mut visit: impl FnMut(Block),
) {
    let Some(terminator) = func.layout.last_inst(block) else {
        return;
    };
    let dfg = &func.dfg;
    let pool = &dfg.value_lists;
    match dfg.insts[terminator] {
        InstructionData::Brif {
            arg,
            blocks: [then, otherwise],
            ..
        } => match selector_test(func, arg, selector, member) {
            Some(true) => visit(then.block(pool)),
            Some(false) => visit(otherwise.block(pool)),
            None => {
                visit(then.block(pool));
                visit(otherwise.block(pool));
            }
        },
        InstructionData::BranchTable { arg, table, .. } if dfg.resolve_aliases(arg) == selector => {
            let table = &dfg.jump_tables[table];
            let taken = table
                .as_slice()
                .get(member)
                .copied()
                .unwrap_or_else(|| table.default_block());
            visit(taken.block(pool));
        }
        ref data => {
            for call in data.branch_destination(&dfg.jump_tables, &dfg.exception_tables) {
                visit(call.block(pool));
            }
        }
    }
}

/// Whether `condition` is nonzero when run as `member`, if it depends on the
/// selector alone: the selector itself, or the selector compared for equality
/// with a constant (the dispatch of a group of three or more).
fn selector_test(
    func: &Function,
    condition: Value,
    selector: Value,
    member: usize,
) -> Option<bool> {
    let dfg = &func.dfg;
    let condition = dfg.resolve_aliases(condition);
    if condition == selector {
        return Some(member != 0);
    }
    let inst = dfg.value_def(condition).inst()?;
    let constant = |v: Value| -> Option<i64> {
        match dfg.insts[dfg.value_def(dfg.resolve_aliases(v)).inst()?] {
            InstructionData::UnaryImm {
                opcode: ir::Opcode::Iconst,
                imm,
            } => Some(imm.bits()),
            _ => None,
        }
    };
    let (cond, compared) = match dfg.insts[inst] {
        InstructionData::IntCompare { cond, args, .. } => {
            let [a, b] = args.map(|v| dfg.resolve_aliases(v));
            match (a == selector, b == selector) {
                (true, false) => (cond, constant(b)?),
                (false, true) => (cond, constant(a)?),
                _ => return None,
            }
        }
        _ => return None,
    };
    let equal = i64::try_from(member).ok()? == compared;
    match cond {
        ir::condcodes::IntCC::Equal => Some(equal),
        ir::condcodes::IntCC::NotEqual => Some(!equal),
        _ => None,
    }
}

/// `data` without `can_move`: its flags set again by name but that one,
/// checked to differ from `data` in nothing else.
pub(crate) fn without_can_move(data: ir::MemFlagsData) -> Option<ir::MemFlagsData> {
    let mut pinned = ir::MemFlagsData::new().with_alias_region(data.alias_region());
    let text = data.with_alias_region(None).to_string();
    for name in text.split_whitespace().filter(|&n| n != "can_move") {
        if !pinned.set_by_name(name).ok()? {
            return None;
        }
    }
    (pinned.with_can_move() == data && !pinned.can_move()).then_some(pinned)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The function of `text` with its one-sided blocks pinned, its second
    /// parameter the selector of `members`.
    fn pinned(text: &str, members: usize) -> Function {
        let mut func = cranelift_reader::parse_functions(text)
            .expect("parses")
            .remove(0);
        let selector = func
            .dfg
            .block_params(func.layout.entry_block().expect("entry"))[1];
        pin_one_sided(&mut func, selector, members).expect("pins");
        func
    }

    /// Whether each memory access of `func`'s block `block` may move.
    fn can_move(func: &Function, block: u32) -> Vec<bool> {
        func.layout
            .block_insts(Block::from_u32(block))
            .filter_map(|inst| func.dfg.insts[inst].memflags())
            .map(|flags| func.dfg.mem_flags[flags].can_move())
            .collect()
    }

    /// In a three-member dispatch (`brif` on the selector, then the selector
    /// compared with 1), each arm's `can_move` load is pinned, and the loads
    /// every member runs (before the dispatch, after the join) keep the flag.
    #[test]
    fn arms_of_a_dispatch_are_pinned_and_shared_code_is_not() {
        let text = "function %m(i64, i32) -> i32 {
        block0(v0: i64, v1: i32):
            v2 = load.i32 notrap aligned readonly can_move v0
            brif v1, block2, block1
        block1:
            v3 = load.i32 notrap aligned readonly can_move v0+4
            jump block4(v3)
        block2:
            v4 = iconst.i32 1
            v5 = icmp eq v1, v4
            brif v5, block3, block5
        block3:
            v6 = load.i32 notrap aligned readonly can_move v0+8
            jump block4(v6)
        block5:
            v7 = load.i32 notrap aligned readonly can_move v0+12
            jump block4(v7)
        block4(v8: i32):
            v9 = load.i32 notrap aligned readonly can_move v0+16
            v10 = iadd v8, v9
            v11 = iadd v10, v2
            return v11
        }";
        let func = pinned(text, 3);
        assert_eq!(can_move(&func, 0), [true]);
        assert_eq!(can_move(&func, 1), [false]);
        assert_eq!(can_move(&func, 3), [false]);
        assert_eq!(can_move(&func, 5), [false]);
        assert_eq!(can_move(&func, 4), [true]);

        // Two members told apart by a comparison alone: each side is one
        // member's.
        let text = "function %m(i64, i32) -> i32 {
        block0(v0: i64, v1: i32):
            v2 = iconst.i32 1
            v3 = icmp ne v2, v1
            brif v3, block1, block2
        block1:
            v4 = load.i32 notrap aligned readonly can_move v0
            return v4
        block2:
            v5 = load.i32 notrap aligned readonly can_move v0+4
            return v5
        }";
        let func = pinned(text, 2);
        assert_eq!(can_move(&func, 1), [false]);
        assert_eq!(can_move(&func, 2), [false]);
    }

    /// `without_can_move` clears `can_move` and keeps every other flag, the
    /// trap code and the alias region.
    #[test]
    fn can_move_is_cleared_alone() {
        let mut regions = ir::AliasRegionSet::new();
        let region = regions.insert(ir::AliasRegionData {
            user_id: 7,
            description: "a region".into(),
        });
        for names in [
            &["notrap", "aligned", "readonly", "can_move"][..],
            &["aligned", "can_move", "big"][..],
            &["heap_oob", "can_move"][..],
        ] {
            let mut data = ir::MemFlagsData::new().with_alias_region(Some(region));
            for name in names {
                assert_eq!(data.set_by_name(name), Ok(true), "{name}");
            }
            let pinned = without_can_move(data).expect("clears");
            assert!(!pinned.can_move());
            assert_eq!(pinned.with_can_move(), data);
        }
    }
}
