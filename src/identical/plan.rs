//! `MergePlan`: what happens to each member of each class of equal functions.
//!
//! Per class one function is kept: the strongest linkage (export, then hidden, then
//! local), then the first defined. A preemptible function is never kept while
//! another member can be, because the linker may replace its body; a class whose
//! members are all preemptible is left alone. Every other member gets an action:
//!
//! * [`MergeAction::Erase`]: local and its address is never taken. It disappears and
//!   every reference goes to the kept function.
//! * [`MergeAction::Alias`]: it must stay a symbol but may share the kept code's
//!   address: a second name for the kept code.
//! * [`MergeAction::Thunk`]: its address must stay distinct (or it is preemptible):
//!   a body that only transfers control to the kept function.
//!
//! A function that reads its return address, frame pointer or stack pointer
//! ([`reads_machine_state`](crate::ir::reads_machine_state)) is never made a
//! thunk: it would read them in the thunk's frame. Where it would be, it stays
//! as it is.
//!
//! An address *matters* when it can be observed: taken in the module (`func_addr`,
//! or a function pointer in data), or visible outside the module (any linkage but
//! `Local`), where other code can take it. In `--mode safe` no two functions whose
//! addresses matter end up at one address; in `--mode all` addresses are not
//! significant (like LLVM's `unnamed_addr`).

use crate::ir::Linkage;
pub use crate::ir::MergeMode;
use crate::ir::{FuncIndex, ModuleFunctions};
use cranelift_codegen::entity::SecondaryMap;
use std::fmt;

/// What becomes of a duplicate.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MergeAction {
    /// Removed; every reference goes to the kept function.
    Erase,
    /// A second name for the kept function's code.
    Alias,
    /// A body that only transfers control to the kept function.
    Thunk,
}

impl MergeAction {
    /// The name used in reports: `erase`, `alias` or `thunk`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Erase => "erase",
            Self::Alias => "alias",
            Self::Thunk => "thunk",
        }
    }
}

impl fmt::Display for MergeAction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The decision for one duplicate.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct MergeDecision {
    /// The duplicate.
    pub function: FuncIndex,
    /// The kept function it merges into.
    pub into: FuncIndex,
    /// What becomes of it.
    pub action: MergeAction,
}

/// The decisions for a whole module.
#[derive(Clone, Debug, Default)]
pub struct MergePlan {
    /// Classes of two or more equal functions, members in input order, ordered by
    /// their first member.
    pub classes: Vec<Vec<FuncIndex>>,
    /// One decision per merged duplicate, in input order of the duplicates.
    pub decisions: Vec<MergeDecision>,
    /// Classes left alone because every member is preemptible.
    pub unmerged_preemptible_classes: usize,
}

impl MergePlan {
    /// Per-function view of the decisions.
    pub fn decision_map(&self) -> SecondaryMap<FuncIndex, Option<MergeDecision>> {
        let mut map = SecondaryMap::new();
        for d in &self.decisions {
            map[d.function] = Some(*d);
        }
        map
    }

    /// Number of duplicates with the given action.
    pub fn count(&self, action: MergeAction) -> usize {
        self.decisions.iter().filter(|d| d.action == action).count()
    }
}

/// Rank for choosing the kept function: lower is stronger.
fn keep_rank(linkage: Linkage) -> u8 {
    match linkage {
        Linkage::Export => 0,
        Linkage::Hidden => 1,
        Linkage::Local => 2,
        Linkage::Import => 3,
        Linkage::Preemptible => 4,
    }
}

/// Builds the plan for `classes` (of two or more equal functions each, as
/// [`Partition::merge_classes`](super::partition::Partition::merge_classes) gives
/// them). `address_taken[f]` says whether `f`'s address is taken anywhere in the
/// module.
pub fn plan<M: ModuleFunctions + ?Sized>(
    module: &M,
    classes: Vec<Vec<FuncIndex>>,
    address_taken: &SecondaryMap<FuncIndex, bool>,
    mode: MergeMode,
) -> MergePlan {
    let mut result = MergePlan {
        classes,
        ..MergePlan::default()
    };
    let linkage = |f: FuncIndex| module.linkage(f);
    let address_matters = |f: FuncIndex| address_taken[f] || linkage(f) != Linkage::Local;
    for class in &result.classes {
        let Some(&kept) = class
            .iter()
            .filter(|&&f| linkage(f) != Linkage::Preemptible)
            .min_by_key(|&&f| (keep_rank(linkage(f)), f))
        else {
            result.unmerged_preemptible_classes += 1;
            continue;
        };
        // The one function whose observable address the kept code carries.
        let mut address_owner = address_matters(kept).then_some(kept);
        // Members are equal, so all or none read machine state: asked once, and
        // only of a class that would get a thunk.
        let mut reads_machine_state = None;
        for &f in class.iter().filter(|&&f| f != kept) {
            let action = if linkage(f) == Linkage::Preemptible {
                MergeAction::Thunk
            } else if linkage(f) == Linkage::Local && !address_taken[f] {
                MergeAction::Erase
            } else if mode == MergeMode::All || address_owner.is_none() {
                address_owner.get_or_insert(f);
                MergeAction::Alias
            } else {
                MergeAction::Thunk
            };
            if action == MergeAction::Thunk
                && *reads_machine_state.get_or_insert_with(|| module.reads_machine_state(kept))
            {
                // A thunk's frame would change the return address (or frame or
                // stack pointer) the kept code reads: the duplicate stays as it is.
                continue;
            }
            result.decisions.push(MergeDecision {
                function: f,
                into: kept,
                action,
            });
        }
    }
    result.decisions.sort_by_key(|d| d.function);
    result
}
