//! Stage 3 of separate compilation inside a compiler: a module's decisions
//! (from [`crate::separate::plan_program`]) checked by
//! [`crate::separate::check`] against the functions a
//! [`MergingModule`](super::MergingModule) recorded and resolved to `FuncId`s of
//! the inner module, and the linker names its summaries and the checks use
//! ([`DeclaredNames`]).

use super::cross_module::{CrossAction, ResolvedDecision, ResolvedDecisions};
use crate::identical::MergeOptions;
use crate::ir::{FuncIndex, FunctionSet, SymbolName};
use crate::separate::check::{
    AppliedNames, CheckedDecisions, DecisionError, check_decisions_referring,
};
use crate::separate::program::{DecisionAction, ModuleDecisions};
use crate::separate::summary::{OutsideReferences, SymbolNames, SymbolRef};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Function, Signature, UserExternalName, UserFuncName};
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

impl DeclaredNames<'_> {
    /// The user names (`namespace`, `index`: 0 for functions, 1 for data) of those
    /// of `functions` and `data` declared with a name and local linkage, in the
    /// order given.
    pub(super) fn locals(&self, functions: &[FuncId], data: &[DataId]) -> Vec<(u32, u32)> {
        let functions = functions
            .iter()
            .map(|&id| self.0.get_function_decl(id))
            .zip(functions)
            .filter(|(decl, _)| decl.name.is_some() && decl.linkage == Linkage::Local)
            .map(|(_, id)| (0, id.as_u32()));
        let data = data
            .iter()
            .map(|&id| self.0.get_data_decl(id))
            .zip(data)
            .filter(|(decl, _)| decl.name.is_some() && decl.linkage == Linkage::Local)
            .map(|(_, id)| (1, id.as_u32()));
        functions.chain(data).collect()
    }
}

/// `MergingModule`: a symbol of the decisions is a declared name, and a module
/// defines (or declares) whatever its declarations say.
impl AppliedNames for DeclaredNames<'_> {
    type Name = String;

    fn name(&self, symbol: &str) -> Option<String> {
        Some(symbol.to_string())
    }

    fn defines(&self, symbol: &str) -> bool {
        match self.0.get_name(symbol) {
            Some(FuncOrDataId::Func(id)) => self.0.get_function_decl(id).linkage != Linkage::Import,
            Some(FuncOrDataId::Data(id)) => self.0.get_data_decl(id).linkage != Linkage::Import,
            None => false,
        }
    }

    fn declares(&self, symbol: &str) -> bool {
        self.0.get_name(symbol).is_some()
    }
}

/// The `FuncId` of a recorded function (recorded functions are named
/// `u0:FuncId`).
fn recorded_id(func: &Function) -> Option<FuncId> {
    match SymbolName::of_function(func) {
        SymbolName::User {
            namespace: 0,
            index,
        } => Some(FuncId::from_u32(index)),
        _ => None,
    }
}

/// Resolves this module's decisions against `set` (the recorded functions): checks
/// them ([`check_decisions_referring`], with the symbols `held_back` data and
/// byte-defined code refer to; a [`DecisionError`] is returned as
/// [`ModuleError::Backend`], from which it can be downcast) and declares every
/// representative that lives elsewhere as an import, and every promoted name.
/// Indexed like `set`.
pub(super) fn resolve_decisions<M: Module>(
    inner: &mut M,
    merge: &MergeOptions,
    decisions: Option<ModuleDecisions>,
    set: &FunctionSet,
    held_back: &OutsideReferences,
    allow_redirect: bool,
) -> ModuleResult<ResolvedDecisions> {
    let Some(decisions) = decisions else {
        return Ok(ResolvedDecisions::none(set.len()));
    };
    let names = DeclaredNames(inner.declarations());
    let checked = check_decisions_referring(set, merge, &decisions, &names, held_back)
        .map_err(decision_error)?;
    let merged = &checked.merged.set;
    let (per_id, calls, qualified) = resolve_checked(
        inner,
        &checked,
        &decisions.module,
        |f| recorded_id(&merged.get(f).func),
        |_: &M, f| merged.get(f).func.signature.clone(),
        allow_redirect,
    )?;
    let mut resolved = vec![None; set.len()];
    for (id, decision) in per_id {
        let symbol = SymbolName::User {
            namespace: 0,
            index: id.as_u32(),
        };
        if let Some(original) = set.lookup(&symbol) {
            resolved[original.index()] = Some(decision);
        }
    }
    Ok(ResolvedDecisions {
        per_function: resolved,
        calls,
        qualified,
    })
}

/// A [`DecisionError`] as the `Module` trait returns errors (downcast it from
/// [`ModuleError::Backend`]).
pub(super) fn decision_error(error: DecisionError) -> ModuleError {
    ModuleError::Backend(anyhow::Error::new(error))
}

/// Decisions resolved to `FuncId`s: per decided function, its decision; the
/// redirected imports (import, representative, action); each representative's
/// `MODULE::NAME`.
pub(super) type Resolved = (
    Vec<(FuncId, ResolvedDecision)>,
    Vec<(FuncId, FuncId, CrossAction)>,
    HashMap<FuncId, String>,
);

/// Resolves `checked` (decisions of module `module` that passed the checks) in
/// `inner`: declares every representative that lives elsewhere as an import, and
/// every promoted name, hidden. `id_of` gives the `FuncId` of a function of the
/// checked summary (none for a function the module does not define itself), and
/// `signature_of` its signature (read from `inner`, or from the IR). Without `allow_redirect` a removal becomes a
/// thunk (the finish cannot leave a symbol without code).
pub(super) fn resolve_checked<M: Module, X>(
    inner: &mut M,
    checked: &CheckedDecisions<'_, String, X>,
    module: &str,
    id_of: impl Fn(FuncIndex) -> Option<FuncId>,
    signature_of: impl Fn(&M, FuncIndex) -> Signature,
    allow_redirect: bool,
) -> ModuleResult<Resolved> {
    let mut resolved = Vec::with_capacity(checked.decisions.len());
    let mut qualified = HashMap::new();
    for c in &checked.decisions {
        let d = c.decision;
        let Some(function) = id_of(c.function) else {
            continue;
        };
        let signature = signature_of(inner, c.function);
        let own = c.to.function.and_then(&id_of);
        let target = if d.action == DecisionAction::Promote {
            inner.declare_function(&d.to, Linkage::Hidden, &signature)?
        } else if let Some(id) = own {
            id
        } else if d.to_module == module {
            match inner.declarations().get_name(&d.to) {
                Some(FuncOrDataId::Func(id)) => id,
                // Checked: an alias of the module's own merge, or a name a decision
                // promotes a function to (maybe a later one, which then finds this
                // declaration).
                _ => inner.declare_function(&d.to, Linkage::Hidden, &signature)?,
            }
        } else if let Some(FuncOrDataId::Func(id)) = inner.declarations().get_name(&d.to) {
            // Already imported (checked: not defined here), maybe under another
            // signature where machine code of two conventions came out equal.
            id
        } else {
            inner.declare_function(&d.to, Linkage::Import, &signature)?
        };
        let action = match d.action {
            DecisionAction::Redirect if allow_redirect => CrossAction::Redirect,
            DecisionAction::Redirect | DecisionAction::Thunk => CrossAction::Thunk,
            DecisionAction::Promote => CrossAction::Promote,
        };
        resolved.push((function, ResolvedDecision { action, target }));
        qualified.insert(target, format!("{}::{}", d.to_module, d.to));
    }
    // References to other modules' functions that became thunks (direct calls) or
    // were removed (every reference).
    let mut calls = Vec::new();
    for c in &checked.calls {
        let Some(FuncOrDataId::Func(import)) = inner.declarations().get_name(&c.symbol) else {
            continue;
        };
        let signature = inner
            .declarations()
            .get_function_decl(import)
            .signature
            .clone();
        let own = c.to.function.and_then(&id_of);
        let target = match (own, inner.declarations().get_name(&c.to.name)) {
            (Some(id), _) | (None, Some(FuncOrDataId::Func(id))) => id,
            _ => inner.declare_function(&c.to.name, Linkage::Import, &signature)?,
        };
        let action = match c.call.action {
            DecisionAction::Thunk => CrossAction::Thunk,
            DecisionAction::Redirect | DecisionAction::Promote => CrossAction::Redirect,
        };
        calls.push((import, target, action));
    }
    Ok((resolved, calls, qualified))
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
