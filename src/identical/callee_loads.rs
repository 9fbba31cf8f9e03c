//! The loads whose offsets the similar merge may make parameters ([`CalleeLoads`]):
//! how wasmtime calls an imported function, found by one pass over a function's
//! instructions before the encoding's walk.

use crate::ir::insts_by_number;
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{Function, Inst, InstructionData, Opcode, Value, ValueDef, types};

/// The loads whose offsets are [`HoleSite::CalleeLoadOffset`](super::encode::HoleSite::CalleeLoadOffset) holes, found by one
/// pass over the function's instructions before the walk.
///
/// A `load` (the opcode `load`, not an extending load) qualifies when its address
/// operand is an `i64` parameter of the entry block, and either
///
/// * every use of its result is as the callee of an indirect call (`call_indirect`,
///   `return_call_indirect`, `try_call_indirect`): a *code-pointer load*; or
/// * every use of its result is as a further argument (not the callee) of indirect
///   calls whose callees are all code-pointer loads: a *context load*;
///
/// with at least one use. That is how wasmtime calls an imported function: the
/// callee's `vmctx` and code pointer are loaded from constant offsets of the caller's
/// `vmctx`, then `call_indirect`. Every other load, and a load whose result is
/// also used as data, keeps its offset as an ordinary token.
///
/// Uses are looked for in every block of the layout, reachable or not, so the
/// answer can depend on code the walk does not write. That costs merges, never
/// soundness: the similar merge groups two functions only when their holes are at
/// the same positions, and the merged body computes the same address as the
/// member whatever the uses are.
#[derive(Default)]
pub(crate) struct CalleeLoads {
    /// Per load result: how it is used (a result absent is not a candidate).
    uses: SecondaryMap<Value, LoadUse>,
    /// The qualifying loads, sorted.
    loads: Vec<Inst>,
    /// Indirect calls seen, for the second look at context loads.
    calls: Vec<Inst>,
}

/// How the result of a candidate load is used, over all its uses.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
enum LoadUse {
    /// Not the result of a candidate load.
    #[default]
    NotCandidate,
    /// A candidate not used (yet).
    Unused,
    /// Only as the callee of indirect calls.
    Callee,
    /// Only as a further argument of indirect calls.
    Context,
    /// Some other way, or both ways.
    Other,
}

impl LoadUse {
    /// The state after one more use of kind `use_`.
    fn and(self, use_: LoadUse) -> LoadUse {
        match (self, use_) {
            (LoadUse::NotCandidate, _) => LoadUse::NotCandidate,
            (LoadUse::Unused, u) => u,
            (a, b) if a == b => a,
            _ => LoadUse::Other,
        }
    }
}

impl CalleeLoads {
    pub(crate) fn clear(&mut self) {
        self.uses.clear();
        self.loads.clear();
        self.calls.clear();
    }

    /// Whether `inst` is a qualifying load of the function [`Self::find`] saw last.
    pub(crate) fn contains(&self, inst: Inst) -> bool {
        self.loads.binary_search(&inst).is_ok()
    }

    /// Finds the qualifying loads of `func`.
    pub(crate) fn find(&mut self, func: &Function) {
        self.clear();
        let dfg = &func.dfg;
        let Some(entry) = func.layout.entry_block() else {
            return;
        };
        // Candidates: `load`s from an `i64` entry block parameter. The indirect calls
        // are noted on the way: unless one of them calls through a candidate, no
        // load qualifies, and the scan of every use below (the expensive part) is
        // skipped; most functions call nothing indirectly. Each pass reads the
        // instructions in the order of their numbers (`insts_by_number`): what it
        // finds does not depend on the order.
        let mut any = false;
        for inst in insts_by_number(func) {
            let data = &dfg.insts[inst];
            if matches!(
                data,
                InstructionData::CallIndirect { .. } | InstructionData::TryCallIndirect { .. }
            ) {
                self.calls.push(inst);
                continue;
            }
            let InstructionData::Load {
                opcode: Opcode::Load,
                arg,
                ..
            } = *data
            else {
                continue;
            };
            let base = dfg.resolve_aliases(arg);
            let from_entry_parameter =
                matches!(dfg.value_def(base), ValueDef::Param(b, _) if b == entry);
            if from_entry_parameter
                && dfg.value_type(base) == types::I64
                && let [result] = dfg.inst_results(inst)
            {
                self.uses[*result] = LoadUse::Unused;
                any = true;
            }
        }
        let calls_through_a_candidate = self.calls.iter().any(|&call| {
            dfg.inst_args(call).first().is_some_and(|&callee| {
                self.uses[dfg.resolve_aliases(callee)] != LoadUse::NotCandidate
            })
        });
        self.calls.clear();
        if !any || !calls_through_a_candidate {
            self.clear();
            return;
        }
        // Uses.
        for inst in insts_by_number(func) {
            let data = &dfg.insts[inst];
            // `inst_values` indexes the jump and exception tables: an undeclared
            // one (IR the walk reports unsupported) ends the search.
            let tables_declared = match *data {
                InstructionData::BranchTable { table, .. } => dfg.jump_tables.get(table).is_some(),
                _ => data
                    .exception_table()
                    .is_none_or(|et| dfg.exception_tables.get(et).is_some()),
            };
            if !tables_declared {
                self.clear();
                return;
            }
            let indirect = matches!(
                data,
                InstructionData::CallIndirect { .. } | InstructionData::TryCallIndirect { .. }
            );
            if indirect {
                self.calls.push(inst);
            }
            for (i, value) in dfg.inst_values(inst).enumerate() {
                let value = dfg.resolve_aliases(value);
                let use_ = match (indirect, i, i < dfg.inst_args(inst).len()) {
                    (true, 0, _) => LoadUse::Callee,
                    (true, _, true) => LoadUse::Context,
                    _ => LoadUse::Other,
                };
                self.uses[value] = self.uses[value].and(use_);
            }
        }
        // A context load qualifies only if every call it is an argument of calls a
        // code-pointer load.
        for &call in &self.calls {
            let args = dfg.inst_args(call);
            let Some(&callee) = args.first() else {
                continue;
            };
            if self.uses[dfg.resolve_aliases(callee)] == LoadUse::Callee {
                continue;
            }
            for &arg in &args[1..] {
                let arg = dfg.resolve_aliases(arg);
                if self.uses[arg] == LoadUse::Context {
                    self.uses[arg] = LoadUse::Other;
                }
            }
        }
        for inst in insts_by_number(func) {
            if let InstructionData::Load {
                opcode: Opcode::Load,
                ..
            } = dfg.insts[inst]
                && let [result] = dfg.inst_results(inst)
                && matches!(self.uses[*result], LoadUse::Callee | LoadUse::Context)
            {
                self.loads.push(inst);
            }
        }
        self.loads.sort_unstable();
    }
}
