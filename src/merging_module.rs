//! `MergingModule`: function merging for any `cranelift_module::Module`.
//!
//! Wrap the module a compiler already uses and keep using the `Module` trait:
//!
//! ```ignore
//! let mut module = MergingModule::new(ObjectModule::new(builder), MergeOptions::default());
//! // ... declare and define functions and data exactly as before ...
//! let (product, report) = module.finish_object()?;
//! ```
//!
//! Declarations go to the inner module at once, so every `FuncId` and `DataId` stays
//! valid. `define_function` records a copy of the function's IR instead of compiling
//! it; `define_data` is recorded too, and every function address it holds counts as
//! address-taken (data is defined at the end, with the address of an erased or aliased
//! duplicate replaced by the kept function's). `define_function_bytes` is forwarded untouched. At the end the pass
//! runs over everything recorded and the inner module compiles the kept functions
//! (with calls to erased and aliased duplicates redirected) and the thunks.
//!
//! An erased or aliased duplicate is not compiled. For an `ObjectModule`,
//! [`MergingModule::finish_object`] then points its symbol at the kept function's
//! code: same section, same offset, the duplicate's own name, scope and weak flag (an
//! erased, local duplicate is never referenced, so its symbol is harmless). For a
//! `JITModule`, [`MergingModule::finish_jit`] finalizes and returns a [`MergedJit`]
//! whose `get_finalized_function` resolves such a duplicate to the kept code.

// `ModuleResult` is cranelift-module's own error type, which the `Module` trait
// returns everywhere; the wrapper returns the same.
#![allow(clippy::result_large_err)]

use crate::apply::{OutputEntry, Redirects, build_thunk_with};
use crate::driver::{MergeOptions, merge_functions};
use crate::module::{FuncIndex, FunctionSet};
use crate::plan::{MergeAction, MergePlan};
use crate::program::{DecisionAction, ModuleDecisions};
use crate::similar::{SimilarOptions, SimilarPass};
use crate::summary::{
    Summary, SymbolNames, SymbolRef, merged_module, summarize_merged, summarize_with,
};
use crate::symbols::SymbolName;
use cranelift_codegen::Context;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{self, Function, UserExternalName, UserFuncName};
use cranelift_codegen::isa::TargetIsa;
use cranelift_jit::JITModule;
use cranelift_module::{
    DataDescription, DataId, FuncId, FuncOrDataId, Linkage, Module, ModuleDeclarations,
    ModuleError, ModuleReloc, ModuleRelocTarget, ModuleResult,
};
use cranelift_object::{ObjectModule, ObjectProduct};
use std::collections::{HashMap, HashSet};
use target_lexicon::Architecture;

/// Options of a [`MergingModule`].
#[derive(Clone, Debug)]
pub struct ModuleMergeOptions {
    /// The pass's options (mode).
    pub merge: MergeOptions,
    /// When false, every function is compiled as defined (rustc's
    /// `-Z merge-functions=disabled`).
    pub enabled: bool,
    /// Also merge similar functions (constants or callees differ), as the CLI's
    /// `--similar`: each merged body is declared in the inner module as a new local
    /// function, each member keeps its `FuncId` and becomes an entry point. Sizes are
    /// measured on the inner module's ISA. `None` (the default): off.
    pub similar: Option<SimilarOptions>,
}

impl Default for ModuleMergeOptions {
    fn default() -> Self {
        Self {
            merge: MergeOptions::default(),
            enabled: true,
            similar: None,
        }
    }
}

/// What the pass did to a module: the same content as the CLI's JSON report, with
/// functions named by their module names.
#[derive(Clone, Debug, Default)]
pub struct MergeReport {
    /// Functions defined through the wrapper.
    pub functions: usize,
    /// Classes of two or more equal functions, by name.
    pub classes: Vec<Vec<String>>,
    /// `(duplicate, kept, action)` per merged duplicate.
    pub actions: Vec<(String, String, MergeAction)>,
    /// Bytes of machine code saved: the compiled size of every duplicate that got
    /// no code of its own, plus for each thunk its compiled size minus the thunk's,
    /// plus what merging similar functions saved.
    pub bytes_saved: u64,
    /// Groups of similar functions merged (with [`ModuleMergeOptions::similar`]).
    pub similar_groups: usize,
    /// Decisions of a whole-program plan applied ([`MergingModule::with_decisions`]):
    /// `(function, representative, action)`, the representative as
    /// `MODULE::NAME`.
    pub cross_module: Vec<(String, String, DecisionAction)>,
    /// The report as JSON (`functions`, `merged`, `classes`, `actions`,
    /// `bytes_saved`).
    pub json: serde_json::Value,
}

impl MergeReport {
    /// Number of merged duplicates.
    pub fn merged(&self) -> usize {
        self.actions.len()
    }
}

/// A function definition recorded for the pass.
struct RecordedFunction {
    id: FuncId,
    func: Function,
}

/// A `Module` that merges identical functions before compiling them.
pub struct MergingModule<M: Module> {
    inner: M,
    options: ModuleMergeOptions,
    recorded: Vec<RecordedFunction>,
    address_taken_in_data: HashSet<FuncId>,
    /// Data definitions, held back until the plan is known so that their function
    /// addresses can name the kept function where the duplicate has no code.
    data: Vec<(DataId, DataDescription)>,
    /// Stage 3 of separate compilation: this module's decisions, if any.
    decisions: Option<ModuleDecisions>,
}

/// How a module's functions and data are named for the linker: by their declared
/// names; anonymous ones are private to the module.
struct DeclaredNames<'a>(&'a ModuleDeclarations);

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

/// A decision resolved in the inner module: what happens, and the representative's
/// `FuncId` (an import when it lives in another module).
#[derive(Copy, Clone)]
struct ResolvedDecision {
    action: DecisionAction,
    target: FuncId,
}

/// A module's decisions resolved in the inner module.
struct ResolvedDecisions {
    /// Per recorded function (indexed like the set), its decision.
    per_function: Vec<Option<ResolvedDecision>>,
    /// Imports whose direct calls go to another import (a function of another
    /// module that became a thunk, and its representative).
    calls: Vec<(FuncId, FuncId)>,
    /// Each representative's `MODULE::NAME`.
    qualified: HashMap<FuncId, String>,
}

impl<M: Module> MergingModule<M> {
    /// Wraps `inner`.
    pub fn new(inner: M, options: ModuleMergeOptions) -> Self {
        Self {
            inner,
            options,
            recorded: Vec::new(),
            address_taken_in_data: HashSet::new(),
            data: Vec::new(),
            decisions: None,
        }
    }

    /// The functions defined so far as a set (named `u0:FuncId`, with their
    /// declared linkage and address-taken marks), with their ids.
    fn recorded_set(&self) -> ModuleResult<(FunctionSet, Vec<FuncId>)> {
        let mut set = FunctionSet::new();
        let mut ids = Vec::with_capacity(self.recorded.len());
        for r in &self.recorded {
            let linkage = self.inner.declarations().get_function_decl(r.id).linkage;
            let index = set
                .push(r.func.clone(), linkage)
                .map_err(|e| ModuleError::Backend(anyhow::Error::new(e)))?;
            if self.address_taken_in_data.contains(&r.id) {
                set.mark_address_taken(index);
            }
            ids.push(r.id);
        }
        Ok((set, ids))
    }

    /// Stage 1 of separate compilation: the summary of the functions defined so far
    /// (call it once every function is defined), for [`crate::program::plan_program`].
    /// Symbols are named by their declared names; anonymous functions and data are
    /// private to the module.
    pub fn summarize(&self, module_name: &str) -> ModuleResult<Summary> {
        let (set, _) = self.recorded_set()?;
        Ok(summarize_with(
            &set,
            module_name,
            &self.options.merge,
            &DeclaredNames(self.inner.declarations()),
        ))
    }

    /// Stage 3 of separate compilation: apply this module's decisions (from
    /// [`crate::program::plan_program`]) when finishing. Each decision is checked
    /// against the function it names (its structural hash when summarized): a
    /// stale decision is an error at finish, never applied. A duplicate becomes a
    /// thunk to its representative, imported when it lives in another module; with
    /// [`MergingModule::finish_object`], a local duplicate whose address is never
    /// taken is not compiled at all (other finishes make it a thunk too). Calls in
    /// this module go straight to the representative. Similar-function merging is
    /// not combined with decisions.
    pub fn with_decisions(mut self, decisions: ModuleDecisions) -> Self {
        self.decisions = Some(decisions);
        self
    }

    /// Resolves this module's decisions against `set` (the recorded functions):
    /// checks them and declares every representative that lives elsewhere as an
    /// import. Indexed like `set`.
    fn resolve_decisions(
        &mut self,
        set: &FunctionSet,
        allow_redirect: bool,
    ) -> ModuleResult<ResolvedDecisions> {
        let mut resolved = vec![None; set.len()];
        let mut qualified = HashMap::new();
        let Some(decisions) = self.decisions.take() else {
            return Ok(ResolvedDecisions {
                per_function: resolved,
                calls: Vec::new(),
                qualified,
            });
        };
        let error = |message: String| ModuleError::Backend(anyhow::anyhow!(message));
        let significant = self.options.merge.mode == crate::plan::MergeMode::Safe;
        if decisions.addresses_significant != significant {
            return Err(error(format!(
                "decisions for `{}` were planned in another merge mode",
                decisions.module
            )));
        }
        let merged = merged_module(set, &self.options.merge);
        let names = DeclaredNames(self.inner.declarations());
        let summary = summarize_merged(&merged, &decisions.module, self.options.merge.mode, &names);
        let mut by_symbol: HashMap<String, (FuncIndex, u64)> = HashMap::new();
        for (index, def) in merged.set.iter() {
            let symbol = names.symbol(&def.func.name, Some(def.linkage == Linkage::Local));
            if let Some(i) = summary.functions.iter().position(|f| f.name == symbol.name) {
                by_symbol.insert(symbol.name, (index, summary.fingerprint(i)));
            }
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
        let binds_here =
            |declarations: &ModuleDeclarations, name: &str| match declarations.get_name(name) {
                Some(FuncOrDataId::Func(id)) => {
                    declarations.get_function_decl(id).linkage != Linkage::Import
                }
                Some(FuncOrDataId::Data(id)) => {
                    declarations.get_data_decl(id).linkage != Linkage::Import
                }
                None => false,
            };
        let decision_targets = decisions.decisions.iter().map(|d| (&d.to, &d.to_module));
        let call_targets = decisions.calls.iter().map(|c| (&c.to, &c.to_module));
        for (to, to_module) in decision_targets.chain(call_targets) {
            if *to_module != decisions.module && binds_here(self.inner.declarations(), to) {
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
            let target = if d.to_module == decisions.module {
                match self.inner.declarations().get_name(&d.to) {
                    Some(FuncOrDataId::Func(id)) => id,
                    _ => {
                        return Err(error(format!(
                            "the representative `{}` is not a function of `{}`",
                            d.to, decisions.module
                        )));
                    }
                }
            } else {
                self.inner
                    .declare_function(&d.to, Linkage::Import, &func.signature)?
            };
            let action = match d.action {
                DecisionAction::Redirect if allow_redirect => DecisionAction::Redirect,
                _ => DecisionAction::Thunk,
            };
            resolved[original.index()] = Some(ResolvedDecision { action, target });
            qualified.insert(target, format!("{}::{}", d.to_module, d.to));
        }
        // Direct calls to other modules' functions that became thunks.
        let mut calls = Vec::new();
        for c in &decisions.calls {
            let Some(FuncOrDataId::Func(import)) = self.inner.declarations().get_name(&c.symbol)
            else {
                continue;
            };
            let signature = self
                .inner
                .declarations()
                .get_function_decl(import)
                .signature
                .clone();
            let target = match self.inner.declarations().get_name(&c.to) {
                Some(FuncOrDataId::Func(id)) => id,
                _ => self
                    .inner
                    .declare_function(&c.to, Linkage::Import, &signature)?,
            };
            calls.push((import, target));
        }
        Ok(ResolvedDecisions {
            per_function: resolved,
            calls,
            qualified,
        })
    }

    /// Defines a thunk for `id` (whose CLIF thunk body is `body`) that transfers to
    /// `target`; returns its code size.
    fn define_thunk(&mut self, id: FuncId, body: &Function, target: FuncId) -> ModuleResult<u64> {
        let isa = self.inner.isa();
        let tail = body.signature.call_conv.supports_tail_calls();
        let target_name = UserFuncName::user(0, target.as_u32());
        // Cranelift compiles `return_call` only with frame pointers.
        if tail && isa.flags().preserve_frame_pointers() {
            let thunk = build_thunk_with(body, &target_name, true);
            let bytes = compiled_size(isa, &thunk)?;
            let mut ctx = Context::for_function(thunk);
            self.inner.define_function(id, &mut ctx)?;
            Ok(bytes)
        } else if let Some((bytes, kind)) = machine_thunk(isa) {
            // x86_64 `jmp rel32`: the displacement is at byte 1, relative to its own
            // end; aarch64 `b imm26`: the whole word.
            let (offset, addend, alignment) = match kind {
                Reloc::X86CallPCRel4 => (1, -4, 1),
                _ => (0, 0, 4),
            };
            let reloc = ModuleReloc {
                offset,
                kind,
                name: ModuleRelocTarget::user(0, target.as_u32()),
                addend,
            };
            self.inner
                .define_function_bytes(id, alignment, &bytes, &[reloc])?;
            Ok(bytes.len() as u64)
        } else {
            let thunk = build_thunk_with(body, &target_name, false);
            let bytes = compiled_size(isa, &thunk)?;
            let mut ctx = Context::for_function(thunk);
            self.inner.define_function(id, &mut ctx)?;
            Ok(bytes)
        }
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Declares each merged body of `similar` as a new local function of the inner
    /// module, renames it to its `FuncId`, and points the entry points at it.
    fn declare_merged_bodies(&mut self, mut similar: SimilarPass) -> ModuleResult<SimilarPass> {
        let outcome = &mut similar.outcome;
        for (group, body) in outcome.groups.iter_mut().zip(&mut outcome.merged_bodies) {
            let id = self.inner.declare_anonymous_function(&body.signature)?;
            let name = UserExternalName::new(0, id.as_u32());
            let old = std::mem::replace(&mut group.merged_name, UserFuncName::User(name.clone()));
            body.name = group.merged_name.clone();
            for &member in &group.members {
                let Some(entry) = outcome.entry_points[member].as_mut() else {
                    continue;
                };
                let refs: Vec<_> = entry
                    .params
                    .user_named_funcs()
                    .iter()
                    .filter(|(_, n)| UserFuncName::User((*n).clone()) == old)
                    .map(|(r, _)| r)
                    .collect();
                for r in refs {
                    entry.params.reset_user_func_name(r, name.clone());
                }
            }
        }
        Ok(similar)
    }

    /// Runs the pass and defines the kept functions and thunks in the inner module.
    /// Returns the inner module, the report, and the pass's outcome with the
    /// `FuncId` of every function of the pass (for backend-specific finishing).
    fn merge_and_define(
        mut self,
        allow_redirect: bool,
    ) -> ModuleResult<(M, MergeReport, Option<Merged>)> {
        if !self.options.enabled {
            for r in std::mem::take(&mut self.recorded) {
                let mut ctx = Context::for_function(r.func);
                self.inner.define_function(r.id, &mut ctx)?;
            }
            for (id, desc) in std::mem::take(&mut self.data) {
                self.inner.define_data(id, &desc)?;
            }
            return Ok((self.inner, MergeReport::default(), None));
        }
        let (set, ids) = self.recorded_set()?;
        self.recorded.clear();
        let ResolvedDecisions {
            per_function: resolved,
            calls: call_redirects,
            qualified,
        } = self.resolve_decisions(&set, allow_redirect)?;
        let set_ref = &set;
        let resolved_ref = &resolved;
        let decided = |action: DecisionAction| {
            resolved_ref
                .iter()
                .enumerate()
                .filter_map(move |(i, r)| {
                    let r = (*r)?;
                    (r.action == action).then(|| {
                        let func = &set_ref.get(FuncIndex::new(i)).func;
                        (
                            SymbolName::of_function(func),
                            UserFuncName::user(0, r.target.as_u32()),
                        )
                    })
                })
                .collect::<Vec<_>>()
        };
        let imports = call_redirects.iter().map(|&(import, target)| {
            (
                SymbolName::User {
                    namespace: 0,
                    index: import.as_u32(),
                },
                UserFuncName::user(0, target.as_u32()),
            )
        });
        let cross_redirects = Redirects::from_maps(
            decided(DecisionAction::Redirect),
            decided(DecisionAction::Thunk).into_iter().chain(imports),
        );
        let has_decisions = resolved.iter().any(Option::is_some);
        let outcome = merge_functions(&set, &self.options.merge);
        let similar = match &self.options.similar {
            Some(options) if !has_decisions => Some(self.declare_merged_bodies(
                SimilarPass::after_for(&set, &outcome.output, options, Some(self.inner.isa())),
            )?),
            _ => None,
        };
        // What each duplicate would have cost: compile it once, only to measure.
        let mut duplicate_bytes = 0u64;
        for d in &outcome.plan.decisions {
            duplicate_bytes += compiled_size(self.inner.isa(), &set.get(d.function).func)?;
        }
        let mut thunk_bytes = 0u64;
        let id_of = |f: FuncIndex| ids[cranelift_codegen::entity::EntityRef::index(f)];
        for entry in &outcome.output {
            let function = match entry {
                OutputEntry::Function(f, _) => *f,
                OutputEntry::Thunk { function, .. } | OutputEntry::Removed { function, .. } => {
                    *function
                }
            };
            if let Some(similar) = &similar {
                if let Some((_, merged)) = similar.merged_before(function)
                    && let UserFuncName::User(name) = &merged.name
                {
                    let mut ctx = Context::for_function(merged.clone());
                    self.inner
                        .define_function(FuncId::from_u32(name.index), &mut ctx)?;
                }
                if let Some(entry_point) = similar.entry_point(function) {
                    let mut ctx = Context::for_function(entry_point.clone());
                    self.inner.define_function(id_of(function), &mut ctx)?;
                    continue;
                }
            }
            // A decision of the whole-program plan.
            if let Some(r) = resolved[function.index()] {
                let func = &set.get(function).func;
                duplicate_bytes += compiled_size(self.inner.isa(), func)?;
                if r.action == DecisionAction::Thunk {
                    thunk_bytes += self.define_thunk(id_of(function), func, r.target)?;
                }
                continue;
            }
            let (index, func) = match entry {
                OutputEntry::Function(index, func) => (*index, &**func),
                OutputEntry::Thunk {
                    function,
                    into,
                    body,
                } => {
                    // The kept function may itself go to a representative elsewhere.
                    let target = resolved[into.index()].map_or(id_of(*into), |r| r.target);
                    thunk_bytes += self.define_thunk(id_of(*function), body, target)?;
                    continue;
                }
                OutputEntry::Removed { .. } => continue,
            };
            let func = cross_redirects.rewrite(func);
            let mut ctx = Context::for_function(func.into_owned());
            self.inner.define_function(id_of(index), &mut ctx)?;
        }
        let cross_module: Vec<(FuncId, ResolvedDecision)> = resolved
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((id_of(FuncIndex::new(i)), (*r)?)))
            .collect();
        let merged = Merged {
            ids,
            plan: outcome.plan,
            redirected: cross_module
                .iter()
                .filter(|(_, r)| r.action == DecisionAction::Redirect)
                .map(|(id, _)| *id)
                .collect(),
        };
        // Function addresses in data: an erased or aliased duplicate has no code of
        // its own, so its address is the kept function's.
        let redirects: HashMap<u32, u32> = merged
            .plan
            .decisions
            .iter()
            .filter(|d| d.action != MergeAction::Thunk)
            .map(|d| (merged.id(d.function).as_u32(), merged.id(d.into).as_u32()))
            .chain(
                cross_module
                    .iter()
                    .filter(|(_, r)| r.action == DecisionAction::Redirect)
                    .map(|(id, r)| (id.as_u32(), r.target.as_u32())),
            )
            .collect();
        for (id, mut desc) in std::mem::take(&mut self.data) {
            for target in desc.function_decls.values_mut() {
                if let ModuleRelocTarget::User {
                    namespace: 0,
                    index,
                } = target
                    && let Some(&kept) = redirects.get(index)
                {
                    *index = kept;
                }
            }
            self.inner.define_data(id, &desc)?;
        }
        let names: Vec<String> = merged
            .ids
            .iter()
            .map(|&id| {
                let decl = self.inner.declarations().get_function_decl(id);
                match &decl.name {
                    Some(name) => name.clone(),
                    None => format!("u0:{}", id.as_u32()),
                }
            })
            .collect();
        let mut report = report_of(&names, &merged.plan);
        report.bytes_saved = duplicate_bytes.saturating_sub(thunk_bytes);
        let declared = |id: FuncId| {
            self.inner
                .declarations()
                .get_function_decl(id)
                .linkage_name(id)
                .into_owned()
        };
        report.cross_module = cross_module
            .iter()
            .map(|(id, r)| {
                let into = qualified
                    .get(&r.target)
                    .cloned()
                    .unwrap_or_else(|| declared(r.target));
                (declared(*id), into, r.action)
            })
            .collect();
        if !report.cross_module.is_empty() {
            report.json["cross_module"] = report
                .cross_module
                .iter()
                .map(|(f, to, action)| {
                    serde_json::json!({"function": f, "into": to, "action": action.as_str()})
                })
                .collect();
        }
        if let Some(similar) = &similar {
            let groups = &similar.outcome.groups;
            report.similar_groups = groups.len();
            report.bytes_saved += groups
                .iter()
                .filter(|g| g.sizes_in_bytes)
                .map(|g| g.size_before.saturating_sub(g.size_after))
                .sum::<u64>();
            report.json["similar"] = similar.json();
        }
        report.json["bytes_saved"] = report.bytes_saved.into();
        Ok((self.inner, report, Some(merged)))
    }

    /// Runs the pass, defines what stays in the inner module and returns it with the
    /// report. Erased and aliased duplicates are left undefined in the inner module,
    /// and nothing refers to them any more from merged code; use a backend-specific
    /// finish ([`MergingModule::finish_object`]) to give aliases their symbol.
    pub fn finish(self) -> ModuleResult<(M, MergeReport)> {
        let (inner, report, _) = self.merge_and_define(false)?;
        Ok((inner, report))
    }
}

/// The pass's result with the `FuncId` of each of its functions.
struct Merged {
    ids: Vec<FuncId>,
    plan: MergePlan,
    /// Functions a whole-program decision removed (their calls go elsewhere).
    redirected: Vec<FuncId>,
}

impl Merged {
    fn id(&self, f: FuncIndex) -> FuncId {
        self.ids[cranelift_codegen::entity::EntityRef::index(f)]
    }
}

impl MergingModule<ObjectModule> {
    /// Runs the pass, compiles, finishes the object, and points the symbol of every
    /// erased or aliased duplicate at the kept function's code.
    pub fn finish_object(self) -> ModuleResult<(ObjectProduct, MergeReport)> {
        let (inner, report, merged) = self.merge_and_define(true)?;
        let mut product = inner.finish();
        if let Some(merged) = merged {
            // A function a whole-program decision removed is local and nothing
            // refers to it any more; its symbol loses its name and points at some
            // code of the object (an undefined local symbol would not link).
            let anchor = merged.ids.iter().find_map(|&id| {
                let symbol = product.object.symbol(product.function_symbol(id));
                matches!(symbol.section, object::write::SymbolSection::Section(_))
                    .then_some(symbol.section)
            });
            for &id in &merged.redirected {
                let symbol = product.function_symbol(id);
                let symbol = product.object.symbol_mut(symbol);
                symbol.name.clear();
                if let Some(section) = anchor {
                    symbol.section = section;
                    symbol.value = 0;
                    symbol.size = 0;
                }
            }
            for d in &merged.plan.decisions {
                if d.action == MergeAction::Thunk {
                    continue;
                }
                let kept = product.function_symbol(merged.id(d.into));
                let dup = product.function_symbol(merged.id(d.function));
                let (section, value, size, kind) = {
                    let k = product.object.symbol(kept);
                    (k.section, k.value, k.size, k.kind)
                };
                let symbol = product.object.symbol_mut(dup);
                symbol.section = section;
                symbol.value = value;
                symbol.size = size;
                symbol.kind = kind;
                if d.action == MergeAction::Erase {
                    // An erased function is local and nothing refers to it any more;
                    // the symbol cranelift-object made when it was declared cannot be
                    // deleted, but it can lose its name.
                    symbol.name.clear();
                }
            }
        }
        Ok((product, report))
    }
}

impl MergingModule<JITModule> {
    /// Runs the pass, compiles and finalizes. In the returned [`MergedJit`], the
    /// `FuncId` of an erased or aliased duplicate resolves to the kept function's code.
    pub fn finish_jit(self) -> ModuleResult<(MergedJit, MergeReport)> {
        let (mut module, report, merged) = self.merge_and_define(false)?;
        module.finalize_definitions()?;
        let redirects = merged
            .map(|m| {
                m.plan
                    .decisions
                    .iter()
                    .filter(|d| d.action != MergeAction::Thunk)
                    .map(|d| (m.id(d.function), m.id(d.into)))
                    .collect()
            })
            .unwrap_or_default();
        Ok((MergedJit { module, redirects }, report))
    }
}

/// A finalized `JITModule` after merging.
pub struct MergedJit {
    module: JITModule,
    redirects: HashMap<FuncId, FuncId>,
}

impl MergedJit {
    /// The address of a function's code; for an erased or aliased duplicate, the
    /// kept function's code (a thunk has code of its own).
    pub fn get_finalized_function(&self, id: FuncId) -> *const u8 {
        let id = self.redirects.get(&id).copied().unwrap_or(id);
        self.module.get_finalized_function(id)
    }

    /// The finalized module.
    pub fn module(&self) -> &JITModule {
        &self.module
    }

    /// The finalized module, for example to free its memory.
    pub fn into_inner(self) -> JITModule {
        self.module
    }
}

/// Code bytes Cranelift emits for `func` on `isa`.
pub fn compiled_size(isa: &dyn TargetIsa, func: &Function) -> ModuleResult<u64> {
    let mut ctx = Context::for_function(func.clone());
    let compiled = ctx
        .compile(isa, &mut ControlPlane::default())
        .map_err(|e| ModuleError::Compilation(e.inner))?;
    Ok(compiled.code_buffer().len() as u64)
}

/// A thunk as one machine jump to the kept function. The signatures are identical,
/// so a jump leaves arguments, return address and stack exactly as the caller set
/// them, whatever the calling convention. x86_64: `jmp rel32`; aarch64: `b imm26`
/// (not with BTI, where an indirect call must land on a `bti` instruction). Elsewhere
/// the thunk is CLIF: `return_call` for the `tail` convention when the ISA keeps frame
/// pointers (Cranelift needs them for tail calls), `call` + `return` otherwise.
fn machine_thunk(isa: &dyn TargetIsa) -> Option<(Vec<u8>, Reloc)> {
    match isa.triple().architecture {
        Architecture::X86_64 => Some((vec![0xe9, 0, 0, 0, 0], Reloc::X86CallPCRel4)),
        Architecture::Aarch64(_) => {
            let bti = isa
                .isa_flags()
                .iter()
                .any(|f| f.name == "use_bti" && f.as_bool() == Some(true));
            (!bti).then(|| (0x1400_0000u32.to_le_bytes().to_vec(), Reloc::Arm64Call))
        }
        _ => None,
    }
}

/// The report, naming functions by their names in the module (anonymous ones as
/// `u0:N`).
fn report_of(names: &[String], plan: &MergePlan) -> MergeReport {
    let name = |f: FuncIndex| names[cranelift_codegen::entity::EntityRef::index(f)].clone();
    let classes: Vec<Vec<String>> = plan
        .classes
        .iter()
        .map(|c| c.iter().map(|&f| name(f)).collect())
        .collect();
    let actions: Vec<(String, String, MergeAction)> = plan
        .decisions
        .iter()
        .map(|d| (name(d.function), name(d.into), d.action))
        .collect();
    let json = serde_json::json!({
        "functions": names.len(),
        "merged": actions.len(),
        "classes": classes,
        "actions": actions
            .iter()
            .map(|(f, k, a)| serde_json::json!({"function": f, "into": k, "action": a.as_str()}))
            .collect::<Vec<_>>(),
    });
    MergeReport {
        functions: names.len(),
        classes,
        actions,
        bytes_saved: 0,
        similar_groups: 0,
        cross_module: Vec::new(),
        json,
    }
}

impl<M: Module> Module for MergingModule<M> {
    fn isa(&self) -> &dyn TargetIsa {
        self.inner.isa()
    }

    fn declarations(&self) -> &ModuleDeclarations {
        self.inner.declarations()
    }

    fn declare_function(
        &mut self,
        name: &str,
        linkage: Linkage,
        signature: &ir::Signature,
    ) -> ModuleResult<FuncId> {
        self.inner.declare_function(name, linkage, signature)
    }

    fn declare_anonymous_function(&mut self, signature: &ir::Signature) -> ModuleResult<FuncId> {
        self.inner.declare_anonymous_function(signature)
    }

    fn declare_data(
        &mut self,
        name: &str,
        linkage: Linkage,
        writable: bool,
        tls: bool,
    ) -> ModuleResult<DataId> {
        self.inner.declare_data(name, linkage, writable, tls)
    }

    fn declare_anonymous_data(&mut self, writable: bool, tls: bool) -> ModuleResult<DataId> {
        self.inner.declare_anonymous_data(writable, tls)
    }

    fn define_function_with_control_plane(
        &mut self,
        func: FuncId,
        ctx: &mut Context,
        _ctrl_plane: &mut ControlPlane,
    ) -> ModuleResult<()> {
        let decl = self.inner.declarations().get_function_decl(func);
        if !decl.linkage.is_definable() {
            return Err(ModuleError::InvalidImportDefinition(
                decl.linkage_name(func).into_owned(),
            ));
        }
        if self.recorded.iter().any(|r| r.id == func) {
            return Err(ModuleError::DuplicateDefinition(
                decl.linkage_name(func).into_owned(),
            ));
        }
        let mut copy = ctx.func.clone();
        // The module names definitions by id (`u0:N`), as `declare_func_in_func`
        // names references; the pass matches calls to definitions by that name.
        copy.name = UserFuncName::user(0, func.as_u32());
        self.recorded.push(RecordedFunction {
            id: func,
            func: copy,
        });
        Ok(())
    }

    fn define_function_bytes(
        &mut self,
        func_id: FuncId,
        alignment: u64,
        bytes: &[u8],
        relocs: &[ModuleReloc],
    ) -> ModuleResult<()> {
        self.inner
            .define_function_bytes(func_id, alignment, bytes, relocs)
    }

    fn define_data(&mut self, data_id: DataId, data: &DataDescription) -> ModuleResult<()> {
        for target in data.function_decls.values() {
            if let ModuleRelocTarget::User {
                namespace: 0,
                index,
            } = target
            {
                self.address_taken_in_data.insert(FuncId::from_u32(*index));
            }
        }
        let decl = self.inner.declarations().get_data_decl(data_id);
        if !decl.linkage.is_definable() {
            return Err(ModuleError::InvalidImportDefinition(
                decl.linkage_name(data_id).into_owned(),
            ));
        }
        if self.data.iter().any(|(id, _)| *id == data_id) {
            return Err(ModuleError::DuplicateDefinition(
                decl.linkage_name(data_id).into_owned(),
            ));
        }
        self.data.push((data_id, data.clone()));
        Ok(())
    }
}
