//! Whole-program decisions as the wrapper applies them: resolved to `FuncId`s of
//! the inner module. Without the `separate` feature there never are any
//! ([`ResolvedDecisions::none`]); the finish is written once for both.

use cranelift_module::FuncId;
use std::collections::HashMap;

/// What a whole-program decision does to a function of this module.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(super) enum CrossAction {
    /// Its body becomes a thunk to the representative.
    Thunk,
    /// It gets no code; its calls go to the representative.
    Redirect,
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
    /// Imports whose direct calls go to another import (a function of another
    /// module that became a thunk, and its representative).
    pub(super) calls: Vec<(FuncId, FuncId)>,
    /// Each representative's `MODULE::NAME`.
    pub(super) qualified: HashMap<FuncId, String>,
}

impl ResolvedDecisions {
    /// No decision for any of `len` functions.
    pub(super) fn none(len: usize) -> Self {
        Self {
            per_function: vec![None; len],
            calls: Vec::new(),
            qualified: HashMap::new(),
        }
    }
}
