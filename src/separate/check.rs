//! The checks a module's decisions pass before stage 3 applies any of them, written
//! once for both appliers: [`super::transform::apply_decisions`] (CLIF text) and
//! `MergingModule::with_decisions` (inside a compiler).
//!
//! [`check_decisions`] runs the module's own merge again (it is deterministic, so it
//! gives the bodies the summary described), summarizes the result as it is, naming
//! symbols as the applier does ([`AppliedNames`]), and checks the decisions against
//! that summary ([`check_summary`], which `MergingModule` also calls with the
//! summary of its machine code) in one fixed order, stopping at the first
//! [`DecisionError`]:
//!
//! 1. the decisions were planned in the module's mode;
//! 2. per decision, in order: it names a function the module defines after its own
//!    merge, whose [`super::summary::Summary::fingerprint`] is the one it had when
//!    summarized, which is no thunk of that merge, with names the applier can
//!    spell, and no other decision names it;
//! 3. the module's [`super::summary::Summary::digest`] is the planned one (every
//!    function as summarized, with a decision or without);
//! 4. no representative of another module has the name of something this module
//!    defines or will define (a promoted name): the name would bind here;
//! 5. per decision, in order: a promoted name is new here (no function, alias,
//!    declaration or reference of the module has it, nor another promotion), and a
//!    representative said to live in this module is one of its functions;
//! 6. per call redirect, in order: its names can be spelled, and a representative
//!    said to live in this module is one of its functions.
//!
//! The result, [`CheckedDecisions`], is the decisions resolved to the merged
//! module's functions with every name spelled, which the appliers carry out.

use super::program::{CallRedirect, Decision, DecisionAction, ModuleDecisions};
use super::summary::{
    ClifNames, MergedModule, OutsideReferences, Summary, SymbolNames, clif_name, merged_module,
    refer_to, summarize_merged,
};
use crate::identical::MergeOptions;
use crate::identical::plan::MergeMode;
use crate::ir::{FuncIndex, FunctionSet, SymbolName, mentioned_names};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::UserFuncName;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Why a module's decisions cannot be applied to it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum DecisionError {
    /// The decisions were planned for another mode.
    ModeMismatch,
    /// A decision names a function the module does not define (after its own
    /// merge).
    UnknownFunction(String),
    /// A function changed since it was summarized.
    Stale(String),
    /// A name of the decisions is not a name the applier can give a function (for
    /// CLIF text, not a CLIF function name).
    BadTarget(String),
    /// The module is not the one the decisions were planned for: its summary
    /// differs from the one the plan read (another module, or this one changed).
    NotPlannedModule(String),
    /// A representative of another module has the name of something this module
    /// defines (a function, an alias, a data object, or a function promoted by its
    /// decisions), so the name would bind to this module's own definition.
    Shadowed(String),
    /// A promoted function's new name is already used by this module (a function,
    /// an alias, a declaration, a reference, or another promotion).
    PromotedNameTaken(String),
    /// A representative said to live in this module is none of its functions (nor a
    /// name its decisions promote a function to).
    NotOwnRepresentative(String),
    /// Two decisions name the same function.
    DuplicateDecision(String),
}

impl fmt::Display for DecisionError {
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
                "the representative `{name}` lives in another module, but this module defines something of that name: the decisions would bind to it"
            ),
            Self::PromotedNameTaken(name) => write!(
                f,
                "the decisions promote a function to the name `{name}`, which this module already uses"
            ),
            Self::NotOwnRepresentative(name) => write!(
                f,
                "the decisions name `{name}` as a representative in this module, but it is none of its functions"
            ),
            Self::DuplicateDecision(name) => {
                write!(f, "the decisions name `{name}` more than once")
            }
        }
    }
}

impl std::error::Error for DecisionError {}

/// How the module that applies decisions names things, beyond how its summary
/// names them ([`SymbolNames`]): the checks count the functions of the summary
/// (after the module's own merge, its aliases included) and the names they refer
/// to themselves, and ask the applier about everything else.
pub trait AppliedNames: SymbolNames {
    /// A function name as the applier spells it.
    type Name;

    /// The name `symbol` (a symbol of the decisions) spells for the applier, or
    /// `None` if no function of its modules can have it.
    fn name(&self, symbol: &str) -> Option<Self::Name>;

    /// Whether a reference to `symbol` made in this module binds to a definition of
    /// its own (a data object, say).
    fn defines(&self, symbol: &str) -> bool;

    /// Whether this module declares `symbol` at all (defined or imported).
    fn declares(&self, symbol: &str) -> bool;
}

/// CLIF text: names are CLIF names, and a module defines and declares nothing but
/// its functions and the names they refer to.
impl AppliedNames for ClifNames {
    type Name = UserFuncName;

    fn name(&self, symbol: &str) -> Option<UserFuncName> {
        clif_name(symbol)
    }

    fn defines(&self, _symbol: &str) -> bool {
        false
    }

    fn declares(&self, _symbol: &str) -> bool {
        false
    }
}

/// A representative named by a decision or a call redirect that passed the checks.
pub struct Representative<N> {
    /// Its name, spelled by the applier (for [`DecisionAction::Promote`], the
    /// function's new name).
    pub name: N,
    /// The function of this module it is, when it is one (not a promoted name), in
    /// [`CheckedDecisions::merged`].
    #[cfg_attr(
        not(feature = "module"),
        allow(dead_code, reason = "read by `MergingModule`'s applier")
    )]
    pub function: Option<FuncIndex>,
}

/// A decision that passed the checks.
pub struct CheckedDecision<'d, N> {
    /// The decision.
    pub decision: &'d Decision,
    /// The function it names, in [`CheckedDecisions::merged`].
    #[cfg_attr(
        not(feature = "module"),
        allow(dead_code, reason = "read by `MergingModule`'s applier")
    )]
    pub function: FuncIndex,
    /// The function's name, spelled by the applier.
    pub name: N,
    /// Its representative.
    pub to: Representative<N>,
}

/// A call redirect that passed the checks.
pub struct CheckedCall<'d, N> {
    /// The redirect.
    pub call: &'d CallRedirect,
    /// The referenced symbol, spelled by the applier.
    pub symbol: N,
    /// Its representative.
    pub to: Representative<N>,
}

/// A module's decisions after the checks: what the appliers carry out. `M` is
/// the module they are about: the IR after the module's own merge, or what the
/// machine-code applier needs.
pub struct CheckedDecisions<'d, N, M = MergedModule> {
    /// The module after its own merge, which the decisions are about.
    pub merged: M,
    /// The decisions, in the order given.
    pub decisions: Vec<CheckedDecision<'d, N>>,
    /// The call redirects, in the order given.
    pub calls: Vec<CheckedCall<'d, N>>,
    /// For each function of [`Self::merged`], the index of its decision in
    /// [`Self::decisions`].
    by_function: Vec<Option<usize>>,
}

impl<'d, N, M> CheckedDecisions<'d, N, M> {
    /// The decision about function `function` of [`Self::merged`], if any.
    pub fn of(&self, function: FuncIndex) -> Option<&CheckedDecision<'d, N>> {
        let index = self.by_function.get(function.index()).copied().flatten()?;
        self.decisions.get(index)
    }
}

/// Checks `decisions` against `module` (the functions as the applier has them,
/// merged with `options` as when summarized), naming symbols with `names`: see the
/// module documentation for the checks and their order.
pub fn check_decisions<'d, N: AppliedNames>(
    module: &FunctionSet,
    options: &MergeOptions,
    decisions: &'d ModuleDecisions,
    names: &N,
) -> Result<CheckedDecisions<'d, N::Name>, DecisionError> {
    check_decisions_referring(
        module,
        options,
        decisions,
        names,
        &OutsideReferences::default(),
    )
}

/// [`check_decisions`] for a module that also refers to symbols from outside its
/// functions (data, byte-defined code), as its summary said
/// ([`super::summary::refer_to`]).
pub fn check_decisions_referring<'d, N: AppliedNames>(
    module: &FunctionSet,
    options: &MergeOptions,
    decisions: &'d ModuleDecisions,
    names: &N,
    outside: &OutsideReferences,
) -> Result<CheckedDecisions<'d, N::Name>, DecisionError> {
    if decisions.addresses_significant != (options.mode == MergeMode::Safe) {
        return Err(DecisionError::ModeMismatch);
    }
    let merged = merged_module(module, options);
    let mut summary = summarize_merged(&merged, &decisions.module, options.mode, names);
    refer_to(&mut summary, outside);
    // The summary lists the merged module's functions first, in the same order, then
    // the aliases of its own merge.
    let compared = merged.set.len();
    check_summary(&summary, compared, merged, decisions, names, |merged| {
        referenced_names(merged, names)
    })
}

/// The checks of [`check_decisions`] against `summary`, the summary of the module
/// as it is now (from IR or from machine code), whose first `compared` functions
/// are the module's own after its own merge (the rest: aliases of that merge).
/// `module` is what the applier carries out the decisions on, and `referenced`
/// lists every name its functions refer to (asked only when a function is
/// promoted).
pub fn check_summary<'d, N: AppliedNames, M>(
    summary: &Summary,
    compared: usize,
    module: M,
    decisions: &'d ModuleDecisions,
    names: &N,
    referenced: impl FnOnce(&M) -> HashSet<String>,
) -> Result<CheckedDecisions<'d, N::Name, M>, DecisionError> {
    if decisions.addresses_significant != summary.addresses_significant {
        return Err(DecisionError::ModeMismatch);
    }
    let functions: HashMap<&str, FuncIndex> = summary
        .functions
        .iter()
        .take(compared)
        .enumerate()
        .map(|(i, f)| (f.name.as_str(), FuncIndex::new(i)))
        .collect();
    // A symbol of the decisions as the applier spells it.
    let spell = |symbol: &String| {
        names
            .name(symbol)
            .ok_or_else(|| DecisionError::BadTarget(symbol.clone()))
    };
    // A representative, which is a function of this module if it lives `here` and
    // is not a promoted name.
    let representative = |name: N::Name, symbol: &str, here: bool| Representative {
        name,
        function: functions.get(symbol).copied().filter(|_| here),
    };
    let mut by_function: Vec<Option<usize>> = vec![None; compared];
    let mut checked = Vec::with_capacity(decisions.decisions.len());
    for d in &decisions.decisions {
        let &function = functions
            .get(d.function.as_str())
            .ok_or_else(|| DecisionError::UnknownFunction(d.function.clone()))?;
        if summary.fingerprint(function.index()) != d.fingerprint {
            return Err(DecisionError::Stale(d.function.clone()));
        }
        // The plan compares no thunk of the module's own merge, so it decides none.
        if summary.functions[function.index()].same_as.is_some() {
            return Err(DecisionError::UnknownFunction(d.function.clone()));
        }
        let to = spell(&d.to)?;
        let name = spell(&d.function)?;
        // Two decisions about one function could contradict each other.
        if by_function[function.index()]
            .replace(checked.len())
            .is_some()
        {
            return Err(DecisionError::DuplicateDecision(d.function.clone()));
        }
        let here = d.action != DecisionAction::Promote && d.to_module == decisions.module;
        checked.push(CheckedDecision {
            decision: d,
            function,
            name,
            to: representative(to, &d.to, here),
        });
    }
    // Every function, with a decision or without (a representative other modules'
    // thunks rely on), must be as it was summarized.
    if summary.digest() != decisions.module_digest {
        return Err(DecisionError::NotPlannedModule(decisions.module.clone()));
    }
    // Names of this module's own functions once the decisions are applied: those it
    // defines (aliases of its own merge included) and the new names of its promoted
    // functions.
    let defined: HashSet<&str> = summary.functions.iter().map(|f| f.name.as_str()).collect();
    let promoted: HashSet<&str> = decisions
        .decisions
        .iter()
        .filter(|d| d.action == DecisionAction::Promote)
        .map(|d| d.to.as_str())
        .collect();
    let own = |name: &str| defined.contains(name) || promoted.contains(name);
    let decision_targets = decisions.decisions.iter().map(|d| (&d.to, &d.to_module));
    let call_targets = decisions.calls.iter().map(|c| (&c.to, &c.to_module));
    for (to, to_module) in decision_targets.chain(call_targets) {
        if *to_module != decisions.module && (own(to) || names.defines(to)) {
            return Err(DecisionError::Shadowed(to.clone()));
        }
    }
    // Only built when a function is promoted: a walk over every function.
    let mut referenced = Some(referenced);
    let mut referenced_set: Option<HashSet<String>> = None;
    let mut promoted_so_far: HashSet<&str> = HashSet::new();
    for d in &decisions.decisions {
        if d.action == DecisionAction::Promote {
            let referenced = referenced_set.get_or_insert_with(|| {
                referenced
                    .take()
                    .map(|list| list(&module))
                    .unwrap_or_default()
            });
            if defined.contains(d.to.as_str())
                || names.declares(&d.to)
                || referenced.contains(&d.to)
                || !promoted_so_far.insert(d.to.as_str())
            {
                return Err(DecisionError::PromotedNameTaken(d.to.clone()));
            }
        } else if d.to_module == decisions.module && !own(&d.to) {
            return Err(DecisionError::NotOwnRepresentative(d.to.clone()));
        }
    }
    let mut calls = Vec::with_capacity(decisions.calls.len());
    for c in &decisions.calls {
        let to = spell(&c.to)?;
        let symbol = spell(&c.symbol)?;
        let here = c.to_module == decisions.module;
        if here && !own(&c.to) {
            return Err(DecisionError::NotOwnRepresentative(c.to.clone()));
        }
        calls.push(CheckedCall {
            call: c,
            symbol,
            to: representative(to, &c.to, here),
        });
    }
    Ok(CheckedDecisions {
        merged: module,
        decisions: checked,
        calls,
        by_function,
    })
}

/// Every name the functions of `merged` refer to, as `names` spells it (library
/// calls and known symbols are no module's names).
fn referenced_names(merged: &MergedModule, names: &dyn SymbolNames) -> HashSet<String> {
    let mut referenced = HashSet::new();
    for (_, def) in merged.set.iter() {
        let func = &def.func;
        for name in mentioned_names(func) {
            let name = match SymbolName::of_external(func, name) {
                Some(SymbolName::User { namespace, index }) => UserFuncName::user(namespace, index),
                Some(SymbolName::Testcase(raw)) => UserFuncName::testcase(raw),
                _ => continue,
            };
            referenced.insert(names.symbol(&name, None).name);
        }
    }
    referenced
}
