//! Stage 3 of separate compilation: a module applies its decisions (GCC's "read
//! optimization summary + transform").
//!
//! [`check_decisions`] runs the module's own merge again and checks every decision
//! (it must name a function of the module with the
//! [`super::summary::Summary::fingerprint`] it had when summarized, which covers its
//! body, the names it refers to and its local callees, so stale decisions are
//! refused instead of applied to changed code; see [`super::check`] for all the
//! checks), and then: a function decided [`DecisionAction::Thunk`] gets a body that
//! tail-calls (or calls and returns) its representative, a function decided
//! [`DecisionAction::Redirect`] is removed, a function decided
//! [`DecisionAction::Promote`] gets its new name and hidden linkage, and every call
//! in the module to any of them goes straight to the representative (which may live
//! in another module: it is then an import), as do the references to other
//! modules' functions that the decisions list.

use super::check::{DecisionError, check_decisions};
use super::program::{Decision, DecisionAction, ModuleDecisions};
use super::summary::{ClifNames, MergedModule};
use crate::identical::MergeOptions;
use crate::identical::rewrite::Redirects;
use crate::identical::thunks::build_thunk;
use crate::ir::{FunctionSet, Linkage, SymbolName};
use cranelift_codegen::ir::UserFuncName;

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

/// A decision that made a function of the output: a thunk, or a promoted
/// representative.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppliedDecision {
    /// The function's name before the decision (a promoted function's old name).
    pub name: UserFuncName,
    /// The decision.
    pub decision: Decision,
}

/// A module after stage 3.
#[derive(Clone)]
#[non_exhaustive]
pub struct AppliedModule {
    /// The functions, in definition order.
    pub functions: FunctionSet,
    /// For each function of [`Self::functions`] (indexed alike), the decision that
    /// made it; `None` for a function the decisions leave as it is.
    pub decided: Vec<Option<AppliedDecision>>,
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
/// use clif_merge::separate::{DecisionError, apply_decisions, plan_program, summarize};
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
/// assert_eq!(refused.err(), Some(DecisionError::ModeMismatch));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn apply_decisions(
    module: &FunctionSet,
    options: &MergeOptions,
    decisions: &ModuleDecisions,
) -> Result<AppliedModule, DecisionError> {
    let checked = check_decisions(module, options, decisions, &ClifNames)?;
    // References to functions of this module or of others that became thunks
    // (direct calls) or were removed or promoted (every reference).
    let (mut all, mut calls) = (Vec::new(), Vec::new());
    let decided = checked
        .decisions
        .iter()
        .map(|d| (d.decision.action, &d.name, &d.to.name));
    let redirected = checked
        .calls
        .iter()
        .map(|c| (c.call.action, &c.symbol, &c.to.name));
    for (action, name, to) in decided.chain(redirected) {
        let name = SymbolName::of_user_func_name(name);
        match action {
            DecisionAction::Redirect | DecisionAction::Promote => all.push((name, to.clone())),
            DecisionAction::Thunk => calls.push((name, to.clone())),
        }
    }
    let redirects = Redirects::from_maps(all, calls);
    let MergedModule {
        set: merged,
        aliases: own_aliases,
        ..
    } = &checked.merged;
    let aliases = own_aliases
        .iter()
        .map(|(name, linkage, kept)| {
            let of = match checked.of(*kept) {
                Some(d) if d.decision.action != DecisionAction::Thunk => d.to.name.clone(),
                _ => merged.get(*kept).func.name.clone(),
            };
            ModuleAlias {
                name: name.clone(),
                linkage: *linkage,
                of,
            }
        })
        .collect();
    let mut out = FunctionSet::new();
    let mut applied = Vec::new();
    for (f, def) in merged.iter() {
        let decision = checked.of(f);
        let (func, linkage) = match decision.map(|d| (d.decision.action, &d.to.name)) {
            Some((DecisionAction::Redirect, _)) => continue,
            Some((DecisionAction::Thunk, to)) => (build_thunk(&def.func, to), def.linkage),
            Some((DecisionAction::Promote, to)) => {
                let mut func = (*def.func).clone();
                redirects.rewrite_in_place(&mut func);
                func.name = to.clone();
                (func, Linkage::Hidden)
            }
            None => {
                let mut func = (*def.func).clone();
                redirects.rewrite_in_place(&mut func);
                (func, def.linkage)
            }
        };
        // Names stay unique: a subset of the merged module's, and promoted names
        // that no function of the module has (checked).
        if out.push(func, linkage).is_ok() {
            applied.push(decision.map(|d| AppliedDecision {
                name: d.name.clone(),
                decision: d.decision.clone(),
            }));
        }
    }
    Ok(AppliedModule {
        functions: out,
        decided: applied,
        aliases,
    })
}
