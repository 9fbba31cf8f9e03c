//! Stage 3 of separate compilation inside a compiler: a module's decisions
//! (from [`crate::separate::plan_program`]) resolved against the functions a
//! [`MergingModule`](super::MergingModule) recorded, and the linker names its
//! summaries use.

use super::cross_module::{CrossAction, ResolvedDecision, ResolvedDecisions};
use crate::identical::MergeOptions;
use crate::identical::plan::MergeMode;
use crate::ir::{FuncIndex, FunctionSet, SymbolName};
use crate::separate::program::{DecisionAction, ModuleDecisions};
use crate::separate::summary::{SymbolNames, SymbolRef, merged_module, summarize_merged};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{UserExternalName, UserFuncName};
use cranelift_module::{
    DataId, FuncId, FuncOrDataId, Linkage, Module, ModuleDeclarations, ModuleError, ModuleResult,
};
use std::collections::HashMap;

/// How a module's functions and data are named for the linker: by their declared
/// names; anonymous ones are private to the module.
pub(super) struct DeclaredNames<'a>(pub(super) &'a ModuleDeclarations);

impl SymbolNames for DeclaredNames<'_> {
    fn symbol(&self, name: &UserFuncName, defined_local: Option<bool>) -> SymbolRef {
        let declared = match name {
            UserFuncName::User(UserExternalName {
                namespace: 0,
                index,
            }) if (*index as usize) < self.0.get_functions().count() => {
                let decl = self.0.get_function_decl(FuncId::from_u32(*index));
                Some((decl.name.clone(), decl.linkage))
            }
            UserFuncName::User(UserExternalName {
                namespace: 1,
                index,
            }) if (*index as usize) < self.0.get_data_objects().count() => {
                let decl = self.0.get_data_decl(DataId::from_u32(*index));
                Some((decl.name.clone(), decl.linkage))
            }
            _ => None,
        };
        match declared {
            Some((Some(name), linkage)) => SymbolRef {
                name,
                local: linkage == Linkage::Local,
            },
            // Anonymous: only this module can name it.
            Some((None, _)) => SymbolRef {
                name: name.to_string(),
                local: true,
            },
            None => SymbolRef {
                name: name.to_string(),
                local: defined_local.unwrap_or(true),
            },
        }
    }
}

/// Resolves this module's decisions against `set` (the recorded functions):
/// checks them and declares every representative that lives elsewhere as an
/// import. Indexed like `set`.
pub(super) fn resolve_decisions<M: Module>(
    inner: &mut M,
    merge: &MergeOptions,
    decisions: Option<ModuleDecisions>,
    set: &FunctionSet,
    allow_redirect: bool,
) -> ModuleResult<ResolvedDecisions> {
    let mut resolved = vec![None; set.len()];
    let mut qualified = HashMap::new();
    let Some(decisions) = decisions else {
        return Ok(ResolvedDecisions::none(set.len()));
    };
    let error = |message: String| ModuleError::Backend(anyhow::anyhow!(message));
    let significant = merge.mode == MergeMode::Safe;
    if decisions.addresses_significant != significant {
        return Err(error(format!(
            "decisions for `{}` were planned in another merge mode",
            decisions.module
        )));
    }
    let merged = merged_module(set, merge);
    let names = DeclaredNames(inner.declarations());
    let summary = summarize_merged(&merged, &decisions.module, merge.mode, &names);
    // The summary lists the merged set's functions first, in the same order.
    let mut by_symbol: HashMap<String, (FuncIndex, u64)> = HashMap::new();
    for ((index, _), (i, f)) in merged.set.iter().zip(summary.functions.iter().enumerate()) {
        by_symbol.insert(f.name.clone(), (index, summary.fingerprint(i)));
    }
    // Every decision names a function of this module as it was summarized.
    for d in &decisions.decisions {
        match by_symbol.get(&d.function) {
            None => {
                return Err(error(format!(
                    "decisions for `{}` name `{}`, which this module does not define",
                    decisions.module, d.function
                )));
            }
            Some(&(_, fingerprint)) if fingerprint != d.fingerprint => {
                return Err(error(format!(
                    "`{}` changed since it was summarized: summarize and plan again",
                    d.function
                )));
            }
            Some(_) => {}
        }
    }
    // Every function, with a decision or without (a representative other
    // modules' thunks rely on), must be as it was summarized.
    if summary.digest() != decisions.module_digest {
        return Err(error(format!(
            "this is not the module the decisions for `{}` were planned for: it changed since it was summarized, or the decisions belong to another module (summarize and plan again)",
            decisions.module
        )));
    }
    // A representative of another module is reached by its name: a function of
    // this module declared under that name (a local, or one defined here) would
    // take the call instead.
    let binds_here = |declarations: &ModuleDeclarations, name: &str| match declarations
        .get_name(name)
    {
        Some(FuncOrDataId::Func(id)) => {
            declarations.get_function_decl(id).linkage != Linkage::Import
        }
        Some(FuncOrDataId::Data(id)) => declarations.get_data_decl(id).linkage != Linkage::Import,
        None => false,
    };
    let decision_targets = decisions.decisions.iter().map(|d| (&d.to, &d.to_module));
    let call_targets = decisions.calls.iter().map(|c| (&c.to, &c.to_module));
    for (to, to_module) in decision_targets.chain(call_targets) {
        if *to_module != decisions.module && binds_here(inner.declarations(), to) {
            return Err(error(format!(
                "the representative `{to_module}::{to}` has the name of a function or data object `{}` declares itself: the decisions would bind to it",
                decisions.module
            )));
        }
    }
    for d in &decisions.decisions {
        // Checked above: every decision names a function of `by_symbol`.
        let Some(&(index, _)) = by_symbol.get(&d.function) else {
            continue;
        };
        let func = &merged.set.get(index).func;
        let Some(original) = set.lookup(&SymbolName::of_function(func)) else {
            continue;
        };
        let target = if d.action == DecisionAction::Promote {
            if inner.declarations().get_name(&d.to).is_some() {
                return Err(error(format!(
                    "the decisions promote `{}` to the name `{}`, which `{}` already declares",
                    d.function, d.to, decisions.module
                )));
            }
            inner.declare_function(&d.to, Linkage::Hidden, &func.signature)?
        } else if d.to_module == decisions.module {
            match inner.declarations().get_name(&d.to) {
                Some(FuncOrDataId::Func(id)) => id,
                _ => {
                    return Err(error(format!(
                        "the representative `{}` is not a function of `{}`",
                        d.to, decisions.module
                    )));
                }
            }
        } else {
            inner.declare_function(&d.to, Linkage::Import, &func.signature)?
        };
        let action = match d.action {
            DecisionAction::Redirect if allow_redirect => CrossAction::Redirect,
            DecisionAction::Redirect | DecisionAction::Thunk => CrossAction::Thunk,
            DecisionAction::Promote => CrossAction::Promote,
        };
        resolved[original.index()] = Some(ResolvedDecision { action, target });
        qualified.insert(target, format!("{}::{}", d.to_module, d.to));
    }
    // References to other modules' functions that became thunks (direct calls) or
    // were removed (every reference).
    let mut calls = Vec::new();
    for c in &decisions.calls {
        let Some(FuncOrDataId::Func(import)) = inner.declarations().get_name(&c.symbol) else {
            continue;
        };
        let signature = inner
            .declarations()
            .get_function_decl(import)
            .signature
            .clone();
        let target = match inner.declarations().get_name(&c.to) {
            Some(FuncOrDataId::Func(id)) => id,
            _ => inner.declare_function(&c.to, Linkage::Import, &signature)?,
        };
        let action = match c.action {
            DecisionAction::Thunk => CrossAction::Thunk,
            DecisionAction::Redirect | DecisionAction::Promote => CrossAction::Redirect,
        };
        calls.push((import, target, action));
    }
    Ok(ResolvedDecisions {
        per_function: resolved,
        calls,
        qualified,
    })
}

impl From<CrossAction> for DecisionAction {
    fn from(action: CrossAction) -> Self {
        match action {
            CrossAction::Thunk => Self::Thunk,
            CrossAction::Redirect => Self::Redirect,
            CrossAction::Promote => Self::Promote,
        }
    }
}
