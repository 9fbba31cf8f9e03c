//! Stage 3 of separate compilation: a module applies its decisions (GCC's "read
//! optimization summary + transform").
//!
//! The module's own merge runs again (it is deterministic, so it gives the bodies
//! the summary described), every decision is checked against the function it names
//! (it must exist and have the [`super::summary::Summary::fingerprint`] it had when
//! summarized, which covers its body, the names it refers to and its local callees,
//! so stale decisions are refused instead of applied to changed code), and then: a
//! function decided [`DecisionAction::Thunk`] gets a body that tail-calls (or calls
//! and returns) its representative, a function decided [`DecisionAction::Redirect`]
//! is removed, a function decided [`DecisionAction::Promote`] gets its new name and
//! hidden linkage, and every call in the module to any of them goes straight to the
//! representative (which may live in another module: it is then an import), as do
//! the references to other modules' functions that the decisions list.

use super::program::{DecisionAction, ModuleDecisions};
use super::summary::{ClifNames, MergedModule, clif_name, merged_module, summarize_merged};
use crate::identical::MergeOptions;
use crate::identical::plan::MergeMode;
use crate::identical::rewrite::Redirects;
use crate::identical::thunks::build_thunk;
use crate::ir::{FunctionSet, Linkage, SymbolName};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::UserFuncName;

use std::collections::{HashMap, HashSet};
use std::fmt;

/// Why decisions cannot be applied to a module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TransformError {
    /// The decisions were planned for another mode.
    ModeMismatch,
    /// A decision names a function the module does not define (after its own
    /// merge).
    UnknownFunction(String),
    /// A function changed since it was summarized.
    Stale(String),
    /// A representative's name is not a CLIF name.
    BadTarget(String),
    /// The module is not the one the decisions were planned for: its summary
    /// differs from the one the plan read (another module, or this one changed).
    NotPlannedModule(String),
    /// A representative of another module has the name of a function this module
    /// defines, so the name would bind to this module's own function.
    Shadowed(String),
    /// A promoted function's new name is already the name of a function of this
    /// module.
    PromotedNameTaken(String),
}

impl fmt::Display for TransformError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::ModeMismatch => write!(f, "the decisions were planned in another --mode"),
            Self::UnknownFunction(name) => write!(
                f,
                "the decisions name `{name}`, which this module does not define (after its own merge)"
            ),
            Self::Stale(name) => write!(
                f,
                "`{name}` changed since it was summarized: summarize and plan again"
            ),
            Self::BadTarget(name) => write!(f, "`{name}` is not a CLIF function name"),
            Self::NotPlannedModule(module) => write!(
                f,
                "this is not the module the decisions for `{module}` were planned for: it changed since it was summarized, or the decisions belong to another module (summarize and plan again)"
            ),
            Self::Shadowed(name) => write!(
                f,
                "the representative `{name}` lives in another module, but this module defines a function of that name: the decisions would bind to it"
            ),
            Self::PromotedNameTaken(name) => write!(
                f,
                "the decisions promote a function to the name `{name}`, which this module already uses"
            ),
        }
    }
}

impl std::error::Error for TransformError {}

/// A second name for a function's code, made by the module's own merge
/// (`--mode all`): CLIF has no aliases, so it is returned beside the functions.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModuleAlias {
    /// The alias (a function of the input whose body was merged away).
    pub name: UserFuncName,
    /// Its linkage.
    pub linkage: Linkage,
    /// The function whose code it names (in this module, or the representative it
    /// was redirected to).
    pub of: UserFuncName,
}

/// A module after stage 3.
#[derive(Clone)]
pub struct AppliedModule {
    /// The functions, in definition order.
    pub functions: FunctionSet,
    /// Names that stand for another function's code: they must still be defined
    /// (as symbol aliases, or thunks) wherever the module is emitted.
    pub aliases: Vec<ModuleAlias>,
}

/// Applies `decisions` to `module` (CLIF naming): returns the module's functions
/// after its own merge and the decisions, in definition order, and the aliases its
/// own merge made.
///
/// The decisions are those [`plan_program`](super::plan_program) made for this
/// module, from summaries of every module made with the same `options`; the
/// [module example](super) runs all three stages. Here modules `a` and `b` export
/// the same function, and `b`'s becomes a thunk to `a`'s:
///
/// ```
/// use clif_merge::separate::{TransformError, apply_decisions, plan_program, summarize};
/// use clif_merge::{FunctionSet, Linkage, MergeMode, MergeOptions};
///
/// let module = |name: &str| -> Result<FunctionSet, Box<dyn std::error::Error>> {
///     let clif = format!(
///         "function %{name}(i64) -> i64 {{
/// block0(v0: i64):
///     v1 = iconst.i64 7
///     v2 = iadd v0, v1
///     return v2
/// }}"
///     );
///     let mut module = FunctionSet::new();
///     for func in cranelift_reader::parse_functions(&clif)? {
///         module.push(func, Linkage::Export)?;
///     }
///     Ok(module)
/// };
/// let (a, b) = (module("add_seven_a")?, module("add_seven_b")?);
/// let options = MergeOptions::default();
/// let plan = plan_program(&[summarize(&a, "a", &options), summarize(&b, "b", &options)])?;
///
/// let applied = apply_decisions(&b, &options, &plan.decisions[1])?;
/// // `%add_seven_b` keeps its name and address; its body calls `%add_seven_a`.
/// let (index, thunk) = applied.functions.iter().next().unwrap();
/// assert_eq!(applied.functions.display_name(index), "%add_seven_b");
/// assert!(thunk.func.display().to_string().contains("%add_seven_a"));
///
/// // Decisions are refused where they do not fit: here, planned in another mode.
/// let all = MergeOptions::default().with_mode(MergeMode::All);
/// let refused = apply_decisions(&b, &all, &plan.decisions[1]);
/// assert_eq!(refused.err(), Some(TransformError::ModeMismatch));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn apply_decisions(
    module: &FunctionSet,
    options: &MergeOptions,
    decisions: &ModuleDecisions,
) -> Result<AppliedModule, TransformError> {
    if decisions.addresses_significant != (options.mode == MergeMode::Safe) {
        return Err(TransformError::ModeMismatch);
    }
    let merged = merged_module(module, options);
    let summary = summarize_merged(&merged, &decisions.module, options.mode, &ClifNames);
    let MergedModule {
        set: merged,
        aliases: own_aliases,
        ..
    } = merged;
    let by_name: HashMap<String, usize> = merged
        .iter()
        .enumerate()
        .map(|(i, (_, def))| (def.func.name.to_string(), i))
        .collect();
    let fingerprints: HashMap<&str, u64> = summary
        .functions
        .iter()
        .enumerate()
        .map(|(i, f)| (f.name.as_str(), summary.fingerprint(i)))
        .collect();
    let mut action_of: Vec<Option<(DecisionAction, UserFuncName)>> = vec![None; merged.len()];
    let (mut all, mut calls) = (Vec::new(), Vec::new());
    for d in &decisions.decisions {
        let &i = by_name
            .get(&d.function)
            .ok_or_else(|| TransformError::UnknownFunction(d.function.clone()))?;
        if fingerprints.get(d.function.as_str()) != Some(&d.fingerprint) {
            return Err(TransformError::Stale(d.function.clone()));
        }
        let to = clif_name(&d.to).ok_or_else(|| TransformError::BadTarget(d.to.clone()))?;
        let name = clif_name(&d.function)
            .map(|n| SymbolName::of_user_func_name(&n))
            .ok_or_else(|| TransformError::BadTarget(d.function.clone()))?;
        match d.action {
            DecisionAction::Redirect | DecisionAction::Promote => all.push((name, to.clone())),
            DecisionAction::Thunk => calls.push((name, to.clone())),
        }
        action_of[i] = Some((d.action, to));
    }
    // Every function, with a decision or without (a representative other modules'
    // thunks rely on), must be as it was summarized.
    if summary.digest() != decisions.module_digest {
        return Err(TransformError::NotPlannedModule(decisions.module.clone()));
    }
    // Names this module gives its own functions, aliases of its own merge included.
    let alias_names: HashSet<String> = own_aliases.iter().map(|(a, _, _)| a.to_string()).collect();
    let own_name = |name: &str| by_name.contains_key(name) || alias_names.contains(name);
    let decision_targets = decisions.decisions.iter().map(|d| (&d.to, &d.to_module));
    let call_targets = decisions.calls.iter().map(|c| (&c.to, &c.to_module));
    let cross_module_targets = decision_targets
        .chain(call_targets)
        .filter(|(_, module)| **module != decisions.module)
        .map(|(to, _)| to);
    for to in cross_module_targets {
        if own_name(to) {
            return Err(TransformError::Shadowed(to.clone()));
        }
    }
    // A promoted function's new name must be new here too.
    for d in &decisions.decisions {
        if d.action == DecisionAction::Promote && own_name(&d.to) {
            return Err(TransformError::PromotedNameTaken(d.to.clone()));
        }
    }
    // References to other modules' functions that became thunks (direct calls) or
    // were removed (every reference).
    for c in &decisions.calls {
        let to = clif_name(&c.to).ok_or_else(|| TransformError::BadTarget(c.to.clone()))?;
        let name = clif_name(&c.symbol)
            .map(|n| SymbolName::of_user_func_name(&n))
            .ok_or_else(|| TransformError::BadTarget(c.symbol.clone()))?;
        match c.action {
            DecisionAction::Thunk => calls.push((name, to)),
            DecisionAction::Redirect | DecisionAction::Promote => all.push((name, to)),
        }
    }
    let redirects = Redirects::from_maps(all, calls);
    let aliases = own_aliases
        .into_iter()
        .map(|(name, linkage, kept)| {
            let of = match &action_of[kept.index()] {
                Some((DecisionAction::Redirect | DecisionAction::Promote, to)) => to.clone(),
                _ => merged.get(kept).func.name.clone(),
            };
            ModuleAlias { name, linkage, of }
        })
        .collect();
    let mut out = FunctionSet::new();
    for ((_, def), action) in merged.iter().zip(action_of) {
        let (func, linkage) = match action {
            Some((DecisionAction::Redirect, _)) => continue,
            Some((DecisionAction::Thunk, to)) => (build_thunk(&def.func, &to), def.linkage),
            Some((DecisionAction::Promote, to)) => {
                let mut func = (*def.func).clone();
                redirects.rewrite_in_place(&mut func);
                func.name = to;
                (func, Linkage::Hidden)
            }
            None => {
                let mut func = (*def.func).clone();
                redirects.rewrite_in_place(&mut func);
                (func, def.linkage)
            }
        };
        // Names stay unique: a subset of the merged module's, and promoted names
        // that no function of the module has (checked above).
        let _ = out.push(func, linkage);
    }
    Ok(AppliedModule {
        functions: out,
        aliases,
    })
}
