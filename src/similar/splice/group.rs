//! Splicing an aligned group of three or more members: one arm per member at
//! each stretch, chosen by the selector.
//!
//! Every member after the first aligns with the first at the same places
//! ([`Alignment::same_places`]): the same stretches of the first's
//! instructions, with the same first's values escaping. So the merged body is
//! the pair's (`splice.rs`) with more arms: at each stretch, the block's prefix
//! ends in a dispatch on the selector to the first's stretch (selector 0) or a
//! copy of member `m`'s (selector `m`), and every arm jumps to the same join,
//! passing its own member's escaping values:
//!
//! ```text
//! B:      prefix                         B:      prefix
//!         first's stretch         =>             brif selector, d2, arm0
//!         suffix                         d2:     one = iconst.i32 1
//!                                                c = icmp eq selector, one
//!                                                brif c, arm1, arm2
//!                                        arm0:   first's stretch; jump join(..)
//!                                        arm1:   second's stretch, copied; jump join(..)
//!                                        arm2:   third's stretch, copied; jump join(..)
//!                                        join(..): suffix
//! ```
//!
//! (one more compare and dispatch block per further member; a chain of
//! compares is smaller than a `br_table` for the few members groups have). An
//! empty stretch gets no arm: its dispatch target is the join itself. Run as
//! member `m`, the selector is `m` for the whole call, so the body runs the
//! prefix, exactly member `m`'s stretch, and the suffix at every stretch: what
//! the pair's argument (`align.rs`) gives for the first and member `m`, as each
//! member's alignment with the first is checked on its own. The join's
//! parameters hold member `m`'s escaping values, which its alignment pairs
//! with the first's values every later use reads. The body is checked by
//! Cranelift's verifier.

use super::{Copier, NotSpliced, replace_escapes, verify};
use crate::similar::align::{Alignment, Stretch};
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::{Block, FuncRef, Function, InstBuilder, SigRef, Value};
use cranelift_codegen::ir::{Inst, SourceLoc, types};
use rustc_hash::FxHashMap;

/// What the copier needs of one member it copies arms from: the function, its
/// values mapped into the merged body, and its callees and signatures declared
/// there.
struct Source<'a> {
    func: &'a Function,
    values: FxHashMap<Value, Value>,
    func_refs: FxHashMap<FuncRef, FuncRef>,
    sig_refs: FxHashMap<SigRef, SigRef>,
}

/// Splices the stretches of `alignment` (the first and second members) and of
/// `joined` (each further member with its alignment) into `merged`.
pub(super) fn splice_group(
    merged: &mut Function,
    selector: Value,
    second: &Function,
    alignment: &Alignment,
    joined: &[(&Function, &Alignment)],
) -> Result<(), NotSpliced> {
    let mut sources: Vec<Source<'_>> = joined
        .iter()
        .map(|&(func, a)| Source {
            func,
            values: a.values.iter().copied().collect(),
            func_refs: FxHashMap::default(),
            sig_refs: FxHashMap::default(),
        })
        .collect();
    // A group's alignments are simple: no stretch ends its block, so no block
    // of the second is mapped.
    let mut copier = Copier::new(merged, second, alignment);
    let mut escaped: FxHashMap<Value, (Value, Block)> = FxHashMap::default();
    for (i, stretch) in alignment.stretches.iter().enumerate() {
        let others: Vec<&Stretch> = joined
            .iter()
            .map(|(_, a)| a.stretches.get(i))
            .collect::<Option<_>>()
            .ok_or_else(|| NotSpliced("a member of the group has fewer stretches".into()))?;
        copier.splice_arms(selector, stretch, &others, &mut sources, &mut escaped)?;
    }
    if !escaped.is_empty() {
        replace_escapes(merged, &escaped);
    }
    verify(merged)
}

impl<'a> Copier<'a> {
    /// Makes `source` the member copied from, and the one copied from before
    /// `source`.
    fn swap_source(&mut self, source: &mut Source<'a>) {
        std::mem::swap(&mut self.second, &mut source.func);
        std::mem::swap(&mut self.values, &mut source.values);
        std::mem::swap(&mut self.func_refs, &mut source.func_refs);
        std::mem::swap(&mut self.sig_refs, &mut source.sig_refs);
    }

    /// Splices one stretch of the group: `stretch` of the pair, and the same
    /// stretch of each further member (`others`, copied from `sources`).
    fn splice_arms(
        &mut self,
        selector: Value,
        stretch: &Stretch,
        others: &[&Stretch],
        sources: &mut [Source<'a>],
        escaped: &mut FxHashMap<Value, (Value, Block)>,
    ) -> Result<(), NotSpliced> {
        let Some(suffix) = stretch.suffix else {
            return Err(NotSpliced("a group's stretch ends its block".into()));
        };
        if others
            .iter()
            .any(|o| o.suffix != stretch.suffix || o.first != stretch.first)
        {
            return Err(NotSpliced("a group's stretches are at other places".into()));
        }
        let srcloc = self.merged.srcloc(suffix);
        // Where the stretch is now (an earlier stretch of its block moved it).
        let block = self
            .merged
            .layout
            .inst_block(suffix)
            .unwrap_or(stretch.block);
        let join = self.merged.dfg.make_block();
        self.merged.layout.split_block(join, suffix);
        let firsts: Vec<Value> = stretch.escapes.iter().map(|e| e.0).collect();
        for &first in &firsts {
            let ty = self.merged.dfg.value_type(first);
            self.merged.dfg.append_block_param(join, ty);
        }
        let mut targets = Vec::with_capacity(2 + others.len());
        match stretch.first.first() {
            Some(&start) => {
                let arm = self.merged.dfg.make_block();
                self.merged.layout.split_block(arm, start);
                self.jump(arm, join, &firsts, srcloc);
                targets.push(arm);
            }
            None if firsts.is_empty() => targets.push(join),
            None => return Err(NotSpliced("a value escapes an empty stretch".into())),
        }
        let seconds: Vec<Value> = stretch.escapes.iter().map(|e| e.1).collect();
        targets.push(self.arm(join, &stretch.second, &seconds, srcloc)?);
        for (other, source) in others.iter().zip(sources.iter_mut()) {
            // The member's value escaping in place of each of the first's.
            let own: Vec<Value> = firsts
                .iter()
                .map(|&first| other.escapes.iter().find(|e| e.0 == first).map(|e| e.1))
                .collect::<Option<_>>()
                .ok_or_else(|| NotSpliced("a group's stretches escape other values".into()))?;
            self.swap_source(source);
            let arm = self.arm(join, &other.second, &own, srcloc);
            self.swap_source(source);
            targets.push(arm?);
        }
        let params = self.merged.dfg.block_params(join).to_vec();
        for (&(first, second), &param) in stretch.escapes.iter().zip(&params) {
            escaped.insert(first, (param, targets[0]));
            // Later arms of every member read the join's parameter: through
            // the first's value, which becomes it.
            self.values.insert(second, first);
        }
        for (other, source) in others.iter().zip(sources.iter_mut()) {
            for &(first, own) in &other.escapes {
                source.values.insert(own, first);
            }
        }
        self.dispatch(block, selector, &targets, join, srcloc);
        Ok(())
    }

    /// The arm running a copy of `insts` (of the member copied from) and
    /// jumping to `join` with the copies of `escapes`, inserted before `join`;
    /// `join` itself for an empty stretch (which defines nothing to pass).
    fn arm(
        &mut self,
        join: Block,
        insts: &[Inst],
        escapes: &[Value],
        srcloc: SourceLoc,
    ) -> Result<Block, NotSpliced> {
        if insts.is_empty() {
            if !escapes.is_empty() {
                return Err(NotSpliced("a value escapes an empty stretch".into()));
            }
            return Ok(join);
        }
        let arm = self.merged.dfg.make_block();
        self.merged.layout.insert_block(arm, join);
        for &inst in insts {
            self.copy(inst, arm)?;
        }
        let args = escapes
            .iter()
            .map(|&v| self.copied(v))
            .collect::<Result<Vec<Value>, _>>()?;
        self.jump(arm, join, &args, srcloc);
        Ok(arm)
    }

    /// Ends `block` with a branch to `targets[m]` where `selector` is `m`: a
    /// `brif` on the selector itself (0 or not), then one dispatch block per
    /// further member comparing it with `m` (an `iconst` and an `icmp`,
    /// inserted before `join`), the last member taking what is left: the
    /// selector is one of the members' positions.
    fn dispatch(
        &mut self,
        block: Block,
        selector: Value,
        targets: &[Block],
        join: Block,
        srcloc: SourceLoc,
    ) {
        let last = targets.len() - 1;
        let mut from = block;
        for m in 0..last {
            let next = if m + 1 == last {
                targets[last]
            } else {
                let d = self.merged.dfg.make_block();
                self.merged.layout.insert_block(d, join);
                d
            };
            let mut pos = FuncCursor::new(self.merged).at_bottom(from);
            pos.set_srcloc(srcloc);
            if m == 0 {
                pos.ins().brif(selector, next, &[], targets[0], &[]);
            } else {
                let value = pos.ins().iconst(types::I32, m as i64);
                let equal = pos.ins().icmp(IntCC::Equal, selector, value);
                pos.ins().brif(equal, targets[m], &[], next, &[]);
            }
            from = next;
        }
    }
}
