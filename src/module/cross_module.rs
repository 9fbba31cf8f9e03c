//! Whole-program decisions as the wrapper applies them: resolved to `FuncId`s of
//! the inner module. Without the `separate` feature there never are any
//! ([`ResolvedDecisions::none`]); the finish is written once for both.

use crate::identical::rewrite::Redirects;
use crate::ir::{FuncIndex, FunctionSet, SymbolName};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::UserFuncName;
use cranelift_module::FuncId;

/// What a whole-program decision does to a function of this module.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    not(feature = "separate"),
    allow(dead_code, reason = "decisions come from separate compilation")
)]
pub(super) enum CrossAction {
    /// Its body becomes a thunk to the representative.
    Thunk,
    /// It gets no code; its calls go to the representative.
    Redirect,
    /// A local representative of functions in other modules: its body is defined
    /// under the target, a new hidden function, and every reference goes there.
    Promote,
}

/// A decision resolved in the inner module: what happens, and the representative's
/// `FuncId` (an import when it lives in another module).
#[derive(Copy, Clone)]
pub(super) struct ResolvedDecision {
    /// What happens to the function.
    pub(super) action: CrossAction,
    /// The representative.
    pub(super) target: FuncId,
}

/// A module's decisions resolved in the inner module.
pub(super) struct ResolvedDecisions {
    /// Per recorded function (indexed like the set), its decision.
    pub(super) per_function: Vec<Option<ResolvedDecision>>,
    /// Imports whose references go to another import: a function of another
    /// module that became a thunk ([`CrossAction::Thunk`]: its direct calls go) or
    /// was removed ([`CrossAction::Redirect`]: every reference goes), and its
    /// representative.
    pub(super) calls: Vec<(FuncId, FuncId, CrossAction)>,
    /// Each representative's `MODULE::NAME`.
    #[cfg(feature = "separate")]
    pub(super) qualified: std::collections::HashMap<FuncId, String>,
}

impl ResolvedDecisions {
    /// What the held-back data and byte-defined code follow: the decisions of
    /// this module's functions (`cross_module`), and every import another module
    /// removed, which goes to its representative.
    pub(super) fn held_back(
        &self,
        cross_module: &[(FuncId, ResolvedDecision)],
    ) -> Vec<(FuncId, ResolvedDecision)> {
        let removed_imports = self
            .calls
            .iter()
            .filter(|(_, _, action)| *action == CrossAction::Redirect)
            .map(|&(import, target, action)| (import, ResolvedDecision { action, target }));
        cross_module
            .iter()
            .copied()
            .chain(removed_imports)
            .collect()
    }

    /// No decision for any of `len` functions.
    pub(super) fn none(len: usize) -> Self {
        Self {
            per_function: vec![None; len],
            calls: Vec::new(),
            #[cfg(feature = "separate")]
            qualified: std::collections::HashMap::new(),
        }
    }

    /// The redirections these decisions make in the functions this module keeps
    /// (the functions of `set`, named `u0:FuncId`): every reference to a removed or
    /// promoted function (of this module, or an import of another's) and every
    /// direct call to a new thunk goes to the representative.
    pub(super) fn redirects(&self, set: &FunctionSet) -> Redirects {
        let own = self.per_function.iter().enumerate().filter_map(|(i, r)| {
            let r = (*r)?;
            let func = &set.get(FuncIndex::new(i)).func;
            Some((SymbolName::of_function(func), r.target, r.action))
        });
        let imports = self.calls.iter().map(|&(import, target, action)| {
            let symbol = SymbolName::User {
                namespace: 0,
                index: import.as_u32(),
            };
            (symbol, target, action)
        });
        let (mut all, mut calls) = (Vec::new(), Vec::new());
        for (symbol, target, action) in own.chain(imports) {
            let target = UserFuncName::user(0, target.as_u32());
            match action {
                CrossAction::Thunk => calls.push((symbol, target)),
                CrossAction::Redirect | CrossAction::Promote => all.push((symbol, target)),
            }
        }
        Redirects::from_maps(all, calls)
    }
}
