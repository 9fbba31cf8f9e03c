//! Rewriting CLIF according to a [`MergePlan`].
//!
//! * References to erased and aliased functions (calls, `func_addr`, symbols in
//!   global values) are renamed to the kept function.
//! * Direct calls to a thunked, non-preemptible function go straight to the kept
//!   function; its address (`func_addr`) still names the thunk, which keeps it
//!   distinct. References to preemptible functions are never changed.
//! * A thunk is a new body with the duplicate's name and signature that transfers to
//!   the kept function ([`super::thunks`]).

use super::plan::{MergeAction, MergePlan};
use super::thunks::{build_thunk, external_name};
use crate::ir::symbols::TableName;
use crate::ir::{
    DefinedFunction, FuncIndex, FunctionSet, Linkage, Reads, SparseFunctionMap, SymbolKey,
    SymbolName, parallel, prefetch,
};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::{
    ExtFuncData, FuncRef, Function, GlobalValue, GlobalValueData, InstructionData, UserFuncName,
};
use rustc_hash::FxBuildHasher;
use rustc_hash::FxHashMap as HashMap;

/// A table of names looked up by borrowed [`SymbolKey`]s, which hash like the owned
/// names: no name is built to look one up, and a short test-case name is kept
/// in its key ([`TableName`]), so none is allocated to build the table either.
type NameMap<V> = hashbrown::HashMap<TableName, V, FxBuildHasher>;
use std::borrow::Cow;
use std::sync::Arc;

/// One entry of the merged module, in input order.
///
/// A function that refers to no merged duplicate is borrowed from the input, not
/// copied.
#[derive(Clone)]
pub enum OutputEntry<'a> {
    /// A function that stays (kept, or not merged), with references redirected.
    Function(FuncIndex, Cow<'a, Function>),
    /// A duplicate that no longer has a body of its own (erased or aliased).
    Removed {
        /// The duplicate.
        function: FuncIndex,
        /// The kept function it now stands for.
        into: FuncIndex,
        /// `Erase` or `Alias`.
        action: MergeAction,
    },
    /// A duplicate whose body became a thunk to the kept function.
    Thunk {
        /// The duplicate.
        function: FuncIndex,
        /// The kept function it transfers to.
        into: FuncIndex,
        /// The thunk's body.
        body: Function,
    },
}

impl OutputEntry<'_> {
    /// The function of the input module this entry stands for.
    pub fn function(&self) -> FuncIndex {
        match self {
            OutputEntry::Function(f, _) => *f,
            OutputEntry::Thunk { function, .. } | OutputEntry::Removed { function, .. } => {
                *function
            }
        }
    }

    /// The function and the body this entry emits (`None` for a removed
    /// duplicate): what stays of the module.
    pub fn kept(&self) -> Option<(FuncIndex, &Function)> {
        Some((self.function(), self.body()?))
    }

    /// The body this entry emits: the function (redirected) or the thunk; `None`
    /// for a removed duplicate.
    pub fn body(&self) -> Option<&Function> {
        match self {
            OutputEntry::Function(_, func) => Some(func),
            OutputEntry::Thunk { body, .. } => Some(body),
            OutputEntry::Removed { .. } => None,
        }
    }
}

/// Applies `plan` to `module` and returns the merged module in input order.
/// Functions are rewritten in parallel (with the `parallel` feature); the result does
/// not depend on the number of threads.
pub fn apply<'a>(module: &'a FunctionSet, plan: &MergePlan) -> Vec<OutputEntry<'a>> {
    apply_among(module, plan, None)
}

/// [`apply`], where a function that `naming` (when given) says names no member
/// of a class (`FunctionSet::naming`) is known to have nothing to redirect,
/// and its names are not read again.
pub(crate) fn apply_among<'a>(
    module: &'a FunctionSet,
    plan: &MergePlan,
    naming: Option<&SecondaryMap<FuncIndex, bool>>,
) -> Vec<OutputEntry<'a>> {
    let redirects = Redirects::new(module, plan);
    let decisions = plan.decision_map();
    let functions: Vec<(FuncIndex, &'a DefinedFunction)> = module.iter().collect();
    parallel::map(&functions, 32, |&(index, def)| match decisions[index] {
        Some(d) if d.action == MergeAction::Thunk => OutputEntry::Thunk {
            function: index,
            into: d.into,
            body: build_thunk(&def.func, &module.get(d.into).func.name),
        },
        Some(d) => OutputEntry::Removed {
            function: index,
            into: d.into,
            action: d.action,
        },
        None if naming.is_some_and(|naming| !naming[index]) => {
            OutputEntry::Function(index, Cow::Borrowed(&*def.func))
        }
        None => OutputEntry::Function(index, redirects.rewrite(&def.func)),
    })
}

/// Applies `plan` to `module` in place, without copying any function: references
/// are redirected, and each thunked duplicate's body becomes its thunk. Erased and
/// aliased duplicates keep their (now unreferenced) bodies: skip them by the plan.
/// In parallel (with the `parallel` feature).
///
/// A function that `naming` (when given) says names no member of a class
/// (`FunctionSet::naming`) is known to have nothing to redirect, and its names
/// are not read again.
pub fn apply_in_place(
    module: &mut FunctionSet,
    plan: &MergePlan,
    naming: Option<&SecondaryMap<FuncIndex, bool>>,
) {
    let redirects = Redirects::new(module, plan);
    let decisions = plan.decision_map();
    // The kept names the thunks transfer to (only thunks need one).
    let kept_names: HashMap<FuncIndex, UserFuncName> = plan
        .decisions
        .iter()
        .filter(|d| d.action == MergeAction::Thunk)
        .map(|d| (d.function, module.get(d.into).func.name.clone()))
        .collect();
    // What to redirect in each function, found by a walk that only reads their
    // tables of names (and so can ask for the next ones ahead); kept only for
    // the functions with something to redirect.
    let renames: SparseFunctionMap<Renames<'_>> = if redirects.is_empty() {
        SparseFunctionMap::default()
    } else {
        let undecided: Vec<FuncIndex> = module
            .iter()
            .map(|(index, _)| index)
            .filter(|&index| decisions[index].is_none())
            .filter(|&index| naming.is_none_or(|naming| naming[index]))
            .collect();
        let found = module.map_walk(
            &undecided,
            Reads::Names,
            32,
            || (),
            |_, func| redirects.renames(func),
        );
        let mut renames = SparseFunctionMap::for_functions(module.len());
        for (index, found) in undecided.into_iter().zip(found) {
            if !found.is_empty() {
                renames.insert(index, found);
            }
        }
        renames
    };
    module.par_for_each_mut(|index, def| match decisions[index] {
        Some(d) if d.action == MergeAction::Thunk => {
            if let Some(kept) = kept_names.get(&index) {
                def.func = Arc::new(build_thunk(&def.func, kept));
            }
        }
        Some(_) => {}
        // Only a body with something to redirect is written, so only such a
        // body is copied when it is shared.
        None => {
            if let Some(renames) = renames.get(index) {
                redirects.apply(Arc::make_mut(&mut def.func), renames);
            }
        }
    });
}

/// What redirecting one function's references changes
/// ([`Redirects::renames`]), to make with [`Redirects::apply`].
#[derive(Debug, Default)]
pub struct Renames<'r> {
    /// Imports renamed to the kept function's name.
    imports: Vec<(FuncRef, &'r UserFuncName)>,
    /// Symbols renamed to the kept function's name.
    globals: Vec<(GlobalValue, &'r UserFuncName)>,
    /// Whether it names a function whose direct calls go to another: then its
    /// calls are looked at.
    calls: bool,
}

impl Renames<'_> {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.imports.is_empty() && self.globals.is_empty() && !self.calls
    }
}

/// Which names are replaced by which kept function's name.
pub struct Redirects {
    /// Every reference (erased and aliased duplicates).
    all: NameMap<UserFuncName>,
    /// Direct calls only (thunked, non-preemptible duplicates).
    calls: NameMap<UserFuncName>,
}

impl Redirects {
    /// Redirects from explicit maps: names whose every reference (calls, addresses,
    /// symbols) goes to another name, and names whose direct calls do.
    #[cfg_attr(
        not(any(feature = "separate", feature = "module")),
        allow(dead_code, reason = "used by separate compilation and MergingModule")
    )]
    pub fn from_maps(
        all: impl IntoIterator<Item = (SymbolName, UserFuncName)>,
        calls: impl IntoIterator<Item = (SymbolName, UserFuncName)>,
    ) -> Self {
        let table = |(name, target)| (TableName::new(name), target);
        Self {
            all: all.into_iter().map(table).collect(),
            calls: calls.into_iter().map(table).collect(),
        }
    }

    fn new(module: &FunctionSet, plan: &MergePlan) -> Self {
        // Sized once: most decisions land in `all`.
        let mut all = NameMap::with_capacity_and_hasher(plan.decisions.len(), FxBuildHasher);
        let mut calls = NameMap::default();
        // Each decision reads two names that are rarely in cache: the
        // duplicate's and the kept function's, asked for ahead as a walk does.
        for (position, d) in plan.decisions.iter().enumerate() {
            let ahead = |distance: usize| {
                let d = plan.decisions.get(position + distance);
                d.map(|d| [d.function, d.into])
            };
            let (records, arrays) = (ahead(prefetch::RECORD_AHEAD), ahead(prefetch::ARRAYS_AHEAD));
            module.prefetch_ahead(
                records.as_ref().map_or(&[][..], |pair| &pair[..]),
                arrays.as_ref().map_or(&[][..], |pair| &pair[..]),
                Reads::OwnName,
            );
            let name = SymbolKey::of_user_func_name(&module.get(d.function).func.name);
            let name = TableName::of_key(name);
            let target = module.get(d.into).func.name.clone();
            match d.action {
                MergeAction::Erase | MergeAction::Alias => {
                    all.insert(name, target);
                }
                MergeAction::Thunk if module.get(d.function).linkage != Linkage::Preemptible => {
                    calls.insert(name, target);
                }
                MergeAction::Thunk => {}
            }
        }
        Self { all, calls }
    }

    /// What redirecting `func`'s references changes, found by reading its tables
    /// of names once (the imports and symbols it mentions:
    /// [`mentioned_names`](crate::ir::symbols::mentioned_names)).
    pub fn renames(&self, func: &Function) -> Renames<'_> {
        let mut renames = Renames::default();
        if self.is_empty() {
            return renames;
        }
        let symbol = |name| SymbolKey::of_external(func, name);
        for (fref, data) in func.dfg.ext_funcs.iter() {
            let Some(symbol) = symbol(&data.name) else {
                continue;
            };
            if let Some(target) = self.all.get(&symbol) {
                renames.imports.push((fref, target));
            } else if self.calls.contains_key(&symbol) {
                renames.calls = true;
            }
        }
        for (gv, data) in func.global_values.iter() {
            let GlobalValueData::Symbol { name, .. } = data else {
                continue;
            };
            let Some(symbol) = symbol(name) else {
                continue;
            };
            if let Some(target) = self.all.get(&symbol) {
                renames.globals.push((gv, target));
            } else if self.calls.contains_key(&symbol) {
                renames.calls = true;
            }
        }
        renames
    }

    /// `func` with its references redirected: borrowed when nothing changes.
    pub fn rewrite<'f>(&self, func: &'f Function) -> Cow<'f, Function> {
        let renames = self.renames(func);
        if renames.is_empty() {
            return Cow::Borrowed(func);
        }
        let mut func = func.clone();
        self.apply(&mut func, &renames);
        Cow::Owned(func)
    }

    /// Whether nothing is redirected.
    pub fn is_empty(&self) -> bool {
        self.all.is_empty() && self.calls.is_empty()
    }

    /// Redirects the references of `func`.
    #[cfg_attr(
        not(feature = "separate"),
        allow(dead_code, reason = "used by separate compilation")
    )]
    pub fn rewrite_in_place(&self, func: &mut Function) {
        let renames = self.renames(func);
        if !renames.is_empty() {
            self.apply(func, &renames);
        }
    }

    /// Makes the changes [`Self::renames`] found in `func`.
    pub fn apply(&self, func: &mut Function, renames: &Renames<'_>) {
        // Rename whole imports and symbols of erased/aliased functions.
        for &(fref, target) in &renames.imports {
            func.dfg.ext_funcs[fref].name = external_name(func, target);
        }
        for &(gv, target) in &renames.globals {
            let new_name = external_name(func, target);
            if let GlobalValueData::Symbol { name, .. } = &mut func.global_values[gv] {
                *name = new_name;
            }
        }
        // Point direct calls to thunked functions at the kept function.
        if renames.calls {
            let mut call_refs: HashMap<FuncRef, Option<FuncRef>> = HashMap::default();
            let insts: Vec<_> = func
                .layout
                .blocks()
                .flat_map(|b| func.layout.block_insts(b))
                .collect();
            for inst in insts {
                let old = match func.dfg.insts[inst] {
                    InstructionData::Call { func_ref, .. }
                    | InstructionData::TryCall { func_ref, .. } => func_ref,
                    _ => continue,
                };
                let new = *call_refs
                    .entry(old)
                    .or_insert_with(|| self.call_target(func, old));
                if let Some(new) = new {
                    match &mut func.dfg.insts[inst] {
                        InstructionData::Call { func_ref, .. }
                        | InstructionData::TryCall { func_ref, .. } => *func_ref = new,
                        _ => {}
                    }
                }
            }
        }
    }

    /// A new import of the kept function for calls through `old`, if `old` names a
    /// thunked function.
    fn call_target(&self, func: &mut Function, old: FuncRef) -> Option<FuncRef> {
        let data = func.dfg.ext_funcs[old].clone();
        let target = self.calls.get(&SymbolKey::of_external(func, &data.name)?)?;
        let name = external_name(func, target);
        Some(func.import_function(ExtFuncData { name, ..data }))
    }
}
