//! [`MergingModule`] itself: recording definitions, running the pass at finish,
//! defining what stays in the inner module.

#[cfg(feature = "separate")]
use super::code_summary::{CodeModule, decision_retargets, resolve_code_decisions, summarize_code};
use super::compile_once::CompileOnce;
use super::compiled::{
    CompiledFunction, DeclaredFunctions, Recorded, Retargets, function_target, plan_recorded,
    record, reference_of,
};
use super::cross_module::{CrossAction, ResolvedDecision, ResolvedDecisions};
use super::data::{DataMerging, fold};
#[cfg(feature = "separate")]
use super::decisions::{DeclaredNames, resolve_decisions};
use super::thunk::{ThunkCode, code_size, define_thunk};
use crate::identical::plan::{MergeAction, MergeDecision, MergePlan};
use crate::identical::rewrite::OutputEntry;
use crate::identical::{MergeOptions, MergeOutcome, merge_functions};
use crate::ir::{FuncIndex, FunctionSet, Reference};
#[cfg(feature = "separate")]
use crate::separate::program::{DecisionAction, ModuleDecisions};
#[cfg(feature = "separate")]
use crate::separate::summary::{OutsideReferences, Summary, SymbolNames, refer_to, summarize_with};
use crate::similar::{SimilarGroupReport, SimilarOptions, SimilarPass};
use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::{self, Function, UserExternalName, UserFuncName};
use cranelift_codegen::isa::TargetIsa;
use cranelift_module::{
    DataDescription, DataId, FuncId, Linkage, Module, ModuleDeclarations, ModuleError, ModuleReloc,
    ModuleRelocTarget, ModuleResult,
};
use std::collections::{HashMap, HashSet};

/// When a [`MergingModule`] compiles the functions defined through it.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum CompileMode {
    /// Each function is compiled when it is defined, in the caller's thread, so
    /// `ctx.compiled_code()` is there afterwards exactly as with the inner module
    /// (what a wrapper that records unwind info needs); the wrapper keeps its
    /// machine code and relocations, no IR, and compares functions by them (lld's
    /// identical code folding). At finish the kept functions' code goes to the
    /// inner module (`define_function_bytes`). With
    /// [`ModuleMergeOptions::compile_once`] (the default) a function equal to one
    /// compiled before is not compiled again.
    #[default]
    AtDefine,
    /// Each function's IR is recorded and only the kept ones are compiled, at
    /// finish: saves the compile time of every duplicate, for a backend that never
    /// reads `ctx.compiled_code()` after a define. Merging similar functions
    /// needs the IR, so it needs this mode ([`ModuleMergeOptions::similar`]
    /// selects it); separate compilation summarizes the IR here, the machine code
    /// in [`CompileMode::AtDefine`].
    AtFinish,
}

/// Options of a [`MergingModule`].
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct ModuleMergeOptions {
    /// The pass's options (mode).
    pub merge: MergeOptions,
    /// When false, every function is compiled as defined (rustc's
    /// `-Z merge-functions=disabled`).
    pub enabled: bool,
    /// Also merge similar functions (constants or callees differ), as the CLI's
    /// `--similar`: each merged body is declared in the inner module as a new local
    /// function, each member keeps its `FuncId` and becomes an entry point. Sizes are
    /// measured on the inner module's ISA. `None` (the default): off. Needs the IR
    /// at finish: with it on, functions are compiled at finish
    /// ([`CompileMode::AtFinish`]) whatever [`Self::compile`] says.
    pub similar: Option<SimilarOptions>,
    /// When functions are compiled (default: as they are defined).
    pub compile: CompileMode,
    /// In [`CompileMode::AtDefine`], compile each equal function once (default:
    /// on): a function that the pass's comparator proves equal to one defined
    /// before (but for value numbers, block order, the names it refers to
    /// (callees, data) and its base source location; for the same ISA and flags)
    /// gets that function's compiled code finished with its own names, through
    /// `Context::compile_with_cache` (the stored stencil is the other function's
    /// compile: equivalent code, not necessarily the bytes a fresh compile of this
    /// one would give), and `ctx.compiled_code()` is there after the define. The
    /// comparison is what every merge already trusts; the crate's cheap keys
    /// choose which functions are compared, and which are stored for it
    /// (docs/module.md). A define that asks for the disassembly
    /// (`ctx.set_disasm(true)`), or whose function carries value labels or debug
    /// tags, is always compiled. Off: every function is compiled.
    pub compile_once: bool,
    /// With [`Self::compile_once`], whether a function equal to one defined
    /// before is compiled at all (default: true, with the other's stencil:
    /// `ctx.compiled_code()` is there after every define). False: a function
    /// equal to one defined before, names and all (the same code and
    /// relocations), is not compiled: `ctx.compiled_code()` is `None` after its
    /// define, and [`MergeReport::not_compiled`] names the function whose code
    /// stands for it. For embedders that read the compiled code only to record
    /// unwind or debug info for code that will exist (skipping a define without
    /// code, as rustc_codegen_cranelift's `UnwindModule` does), and for JITs
    /// and compilers that never read it.
    pub compile_duplicates: bool,
    /// Which read-only data objects may be folded with an identical one (default:
    /// none). Only [`MergingModule::finish_object`](super::MergingModule::finish_object)
    /// folds.
    pub data: DataMerging,
}

impl Default for ModuleMergeOptions {
    fn default() -> Self {
        Self {
            merge: MergeOptions::default(),
            enabled: true,
            similar: None,
            compile: CompileMode::default(),
            compile_once: true,
            compile_duplicates: true,
            data: DataMerging::default(),
        }
    }
}

impl ModuleMergeOptions {
    /// These options with the pass's options `merge`.
    pub fn with_merge(mut self, merge: MergeOptions) -> Self {
        self.merge = merge;
        self
    }

    /// These options with merging on or off.
    pub fn with_enabled(mut self, enabled: bool) -> Self {
        self.enabled = enabled;
        self
    }

    /// These options also merging similar functions (`Some`), or not (`None`).
    pub fn with_similar(mut self, similar: Option<SimilarOptions>) -> Self {
        self.similar = similar;
        self
    }

    /// These options folding the read-only data objects `data` allows.
    pub fn with_data(mut self, data: DataMerging) -> Self {
        self.data = data;
        self
    }

    /// These options compiling functions as `compile` says.
    pub fn with_compile(mut self, compile: CompileMode) -> Self {
        self.compile = compile;
        self
    }

    /// These options compiling each equal function once, or every function
    /// ([`Self::compile_once`]).
    pub fn with_compile_once(mut self, compile_once: bool) -> Self {
        self.compile_once = compile_once;
        self
    }

    /// These options compiling duplicates with an equal function's stencil, or
    /// not compiling them at all ([`Self::compile_duplicates`]).
    ///
    /// ```
    /// use clif_merge::module::ModuleMergeOptions;
    /// let options = ModuleMergeOptions::default().with_compile_duplicates(false);
    /// assert!(options.compile_once && !options.compile_duplicates);
    /// ```
    pub fn with_compile_duplicates(mut self, compile_duplicates: bool) -> Self {
        self.compile_duplicates = compile_duplicates;
        self
    }

    /// When functions are really compiled: at finish when merging similar
    /// functions (which needs the IR), else as [`Self::compile`] says.
    fn effective_compile(&self) -> CompileMode {
        if self.similar.is_some() {
            CompileMode::AtFinish
        } else {
            self.compile
        }
    }
}

/// What the pass did to a module: the same content as the CLI's JSON report, with
/// functions named by their module names. Non-exhaustive: later versions report
/// more.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct MergeReport {
    /// Functions defined through the wrapper.
    pub functions: usize,
    /// Classes of two or more equal functions, by name.
    pub classes: Vec<Vec<String>>,
    /// `(duplicate, kept, action)` per merged duplicate.
    pub actions: Vec<(String, String, MergeAction)>,
    /// Bytes of machine code saved: the compiled size of every duplicate that got
    /// no code of its own, plus for each thunk its compiled size minus the thunk's,
    /// plus what merging similar functions saved (by their groups' sizes: predicted
    /// by the size model or compiled, [`crate::similar::SizeBasis`]).
    pub bytes_saved: u64,
    /// Groups of similar functions merged (with [`ModuleMergeOptions::similar`]).
    pub similar_groups: usize,
    /// Decisions of a whole-program plan applied ([`MergingModule::with_decisions`]):
    /// `(function, representative, action)`, the representative as
    /// `MODULE::NAME`.
    #[cfg(feature = "separate")]
    pub cross_module: Vec<(String, String, DecisionAction)>,
    /// The merged groups of similar functions, by name, when
    /// [`ModuleMergeOptions::similar`] is on.
    pub similar: Option<Vec<SimilarGroupReport>>,
    /// Functions defined through the wrapper that got no code of their own: an
    /// erased or aliased duplicate (its symbol, if it keeps one, names the kept
    /// function's code) or one a whole-program decision removed or promoted. An
    /// embedder that recorded unwind or debug info for the code it saw compiled
    /// at define must drop it for these: the kept function's entry covers the code.
    pub without_code: Vec<FuncId>,
    /// Functions whose code is now a thunk, not the code compiled at define: an
    /// embedder that recorded unwind info for them must describe the thunk's code
    /// instead ([`ThunkCode`]).
    pub thunks: Vec<ThunkCode>,
    /// Defines that reused the compile of an equal function instead of compiling
    /// ([`ModuleMergeOptions::compile_once`]): the length of
    /// [`Self::compiled_from`].
    pub compiles_reused: usize,
    /// Defines that reused the compile of an equal function:
    /// `(function, the function whose compiled stencil it got)`, in define order.
    pub compiled_from: Vec<(FuncId, FuncId)>,
    /// Defines not compiled ([`ModuleMergeOptions::compile_duplicates`] off):
    /// `(function, the function whose code stands for it)`, in define order. The
    /// two are equal, names and all; the function is merged with the other, or
    /// gets a copy of its code.
    pub not_compiled: Vec<(FuncId, FuncId)>,
    /// Local functions a whole-program decision promoted: `(function, promoted)`,
    /// the code of the first now defined under the second, a new hidden function
    /// (the first is in [`Self::without_code`], or in [`Self::thunks`] where the
    /// finish keeps its symbol as a thunk). An embedder that recorded unwind info
    /// for the first's code at define must describe the second with it.
    #[cfg(feature = "separate")]
    pub promoted: Vec<(FuncId, FuncId)>,
    /// Read-only data objects folded into an identical one
    /// ([`ModuleMergeOptions::data`]): `(duplicate, kept)`, by name.
    pub data_folded: Vec<(String, String)>,
    /// Bytes of data the folds saved.
    pub data_bytes_saved: u64,
}

impl MergeReport {
    /// Number of merged duplicates.
    pub fn merged(&self) -> usize {
        self.actions.len()
    }
}

/// A function defined as machine code (`define_function_bytes`), held back until
/// the plan is known.
struct ByteFunction {
    id: FuncId,
    alignment: u64,
    bytes: Vec<u8>,
    relocs: Vec<ModuleReloc>,
}

/// A function definition recorded for the pass.
struct RecordedFunction {
    id: FuncId,
    func: Function,
}

/// A `Module` that merges identical functions before compiling them.
///
/// [`MergingModule::new`] wraps the inner module; `finish_object` or `finish_jit`
/// (features `object` and `jit`) run the pass and finish it. The
/// [module documentation](crate::module) has an example.
pub struct MergingModule<M: Module> {
    inner: M,
    options: ModuleMergeOptions,
    /// Functions recorded as IR ([`CompileMode::AtFinish`]).
    recorded: Vec<RecordedFunction>,
    /// Functions compiled as they were defined ([`CompileMode::AtDefine`]).
    compiled: Vec<CompiledFunction>,
    /// Compile-once's state ([`ModuleMergeOptions::compile_once`]).
    once: CompileOnce,
    /// Every function defined through the wrapper.
    defined: HashSet<FuncId>,
    /// How many functions the inner module declares (every `FuncId` below is
    /// valid).
    declared_functions: usize,
    /// The thunks defined at finish.
    thunks: Vec<ThunkCode>,
    /// Functions whose address data or byte-defined code holds.
    address_taken_elsewhere: HashSet<FuncId>,
    /// Data definitions, held back until the plan is known so that their function
    /// addresses can name the kept function where the duplicate has no code.
    data: Vec<(DataId, DataDescription)>,
    /// Functions defined as machine code, held back like data: their relocations
    /// name the kept function where a duplicate has no code.
    bytes: Vec<ByteFunction>,
    /// Stage 3 of separate compilation: this module's decisions, if any.
    #[cfg(feature = "separate")]
    decisions: Option<ModuleDecisions>,
}

impl<M: Module> MergingModule<M> {
    /// Wraps `inner`.
    pub fn new(inner: M, options: ModuleMergeOptions) -> Self {
        let declared_functions = inner.declarations().get_functions().count();
        Self {
            inner,
            once: CompileOnce::new(options.compile_duplicates),
            options,
            recorded: Vec::new(),
            compiled: Vec::new(),
            defined: HashSet::new(),
            declared_functions,
            thunks: Vec::new(),
            address_taken_elsewhere: HashSet::new(),
            data: Vec::new(),
            bytes: Vec::new(),
            #[cfg(feature = "separate")]
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
            if self.address_taken_elsewhere.contains(&r.id) {
                set.mark_address_taken(index);
            }
            ids.push(r.id);
        }
        Ok((set, ids))
    }

    /// Stage 1 of separate compilation: the summary of the functions defined so far
    /// (call it once every function is defined), for
    /// [`crate::separate::plan_program`].
    /// Symbols are named by their declared names; anonymous functions and data are
    /// private to the module. In [`CompileMode::AtDefine`] the summary is written
    /// from the machine code (its [`crate::separate::SummarySource`] names the
    /// target and settings, and it is planned only with summaries of the same
    /// source); in [`CompileMode::AtFinish`] from the IR.
    #[cfg(feature = "separate")]
    pub fn summarize(&self, module_name: &str) -> ModuleResult<Summary> {
        if self.options.enabled && self.options.effective_compile() == CompileMode::AtDefine {
            let (plan, retargets) = self.own_merge(&self.compiled);
            let module = self.code_module(&self.compiled, &plan, &retargets);
            let declarations = self.inner.declarations();
            return Ok(
                summarize_code(&module, declarations, self.inner.isa(), module_name).summary,
            );
        }
        let (set, _) = self.recorded_set()?;
        let mut summary = summarize_with(
            &set,
            module_name,
            &self.options.merge,
            &DeclaredNames(self.inner.declarations()),
        );
        refer_to(&mut summary, &self.held_back_references());
        Ok(summary)
    }

    /// The named locals this wrapper defined, functions and data (`namespace`,
    /// `index`), sorted: a summary lists them all, erased ones too, so that the plan
    /// never names another module's representative by a name that binds to one of
    /// them here. Only its own: an inner module shared by several wrappers (units
    /// defined into one JIT) declares other units' locals too.
    #[cfg(feature = "separate")]
    fn own_locals(&self) -> Vec<(u32, u32)> {
        let mut functions: Vec<FuncId> = self.defined.iter().copied().collect();
        functions.sort_unstable();
        let mut data: Vec<DataId> = self.data.iter().map(|(id, _)| *id).collect();
        data.sort_unstable();
        DeclaredNames(self.inner.declarations()).locals(&functions, &data)
    }

    /// The functions the held-back data and byte-defined code refer to, those
    /// whose address they take, and every local name declared, as a summary from
    /// IR names them (its functions do not show them).
    #[cfg(feature = "separate")]
    fn held_back_references(&self) -> OutsideReferences {
        let names = DeclaredNames(self.inner.declarations());
        let symbol = |id: FuncId| names.symbol(&UserFuncName::user(0, id.as_u32()), None);
        let locals = self
            .own_locals()
            .into_iter()
            .map(|(namespace, index)| names.symbol(&UserFuncName::user(namespace, index), None))
            .collect();
        OutsideReferences {
            referenced: self.held_back_targets().into_iter().map(symbol).collect(),
            taken: self
                .address_taken_by_held_back()
                .into_iter()
                .map(symbol)
                .collect(),
            locals,
        }
    }

    /// The functions whose address held-back data or byte-defined code takes,
    /// sorted.
    #[cfg(feature = "separate")]
    fn address_taken_by_held_back(&self) -> Vec<FuncId> {
        let mut taken: Vec<FuncId> = self.address_taken_elsewhere.iter().copied().collect();
        taken.sort_unstable();
        taken
    }

    /// Stage 3 of separate compilation: apply this module's decisions (from
    /// [`crate::separate::plan_program`]) when finishing. Each decision is checked
    /// against the function it names (its structural hash when summarized), by the
    /// checks [`crate::separate::apply_decisions`] makes: a stale decision is an
    /// error at finish, never applied (a [`crate::separate::DecisionError`] inside
    /// [`ModuleError::Backend`]). A duplicate becomes a
    /// thunk to its representative, imported when it lives in another module; with
    /// [`MergingModule::finish_object`](super::MergingModule::finish_object), a local duplicate whose address is never
    /// taken gets no code at all (other finishes make it a thunk too). In
    /// [`CompileMode::AtDefine`] the checks run against the summary of the machine
    /// code and the decisions are applied to that code (a function that reads
    /// machine state is left as it is where it could only become a thunk). Calls in
    /// this module go straight to the representative. With
    /// [`ModuleMergeOptions::similar`], the similar-function merge runs on the
    /// functions the decisions leave as they are.
    #[cfg(feature = "separate")]
    pub fn with_decisions(mut self, decisions: ModuleDecisions) -> Self {
        self.decisions = Some(decisions);
        self
    }

    /// This module's whole-program decisions resolved against `set` (the recorded
    /// functions); none without the `separate` feature or without
    /// [`Self::with_decisions`].
    #[cfg(feature = "separate")]
    fn resolve_decisions(
        &mut self,
        set: &FunctionSet,
        allow_redirect: bool,
    ) -> ModuleResult<ResolvedDecisions> {
        let held_back = self.held_back_references();
        resolve_decisions(
            &mut self.inner,
            &self.options.merge,
            self.decisions.take(),
            set,
            &held_back,
            allow_redirect,
        )
    }

    /// Without the `separate` feature there are no decisions.
    #[cfg(not(feature = "separate"))]
    fn resolve_decisions(
        &mut self,
        set: &FunctionSet,
        _allow_redirect: bool,
    ) -> ModuleResult<ResolvedDecisions> {
        Ok(ResolvedDecisions::none(set.len()))
    }

    /// Checks that `func` may be defined (declared definable, not defined yet) and
    /// marks it defined, with the errors the inner module would give.
    fn mark_defined(&mut self, func: FuncId) -> ModuleResult<()> {
        let decl = self.inner.declarations().get_function_decl(func);
        if !decl.linkage.is_definable() {
            return Err(ModuleError::InvalidImportDefinition(
                decl.linkage_name(func).into_owned(),
            ));
        }
        if !self.defined.insert(func) {
            return Err(ModuleError::DuplicateDefinition(
                decl.linkage_name(func).into_owned(),
            ));
        }
        Ok(())
    }

    /// The wrapped module.
    pub fn inner(&self) -> &M {
        &self.inner
    }

    /// Defines a thunk for `id` (whose CLIF thunk body is `body`) to `target`,
    /// remembers it for the report, and returns its code size.
    fn define_thunk(&mut self, id: FuncId, body: &Function, target: FuncId) -> ModuleResult<u64> {
        let thunk = define_thunk(&mut self.inner, id, body, target)?;
        let size = thunk.size;
        self.thunks.push(thunk);
        Ok(size)
    }

    /// Compile-at-define: the module's own merge over `recorded`, and how it
    /// retargets the kept code.
    fn own_merge(&self, recorded: &[CompiledFunction]) -> (MergePlan, Retargets) {
        let count = self.declared_functions;
        let names = DeclaredFunctions::new(self.inner.declarations(), count, recorded);
        let plan = plan_recorded(
            recorded,
            &names,
            self.address_taken_elsewhere.iter().copied(),
            self.options.merge.mode,
        );
        let retargets = Retargets::new(&plan, &names);
        (plan, retargets)
    }

    /// Every function the held-back data and byte-defined code refer to, sorted.
    #[cfg(feature = "separate")]
    fn held_back_targets(&self) -> Vec<FuncId> {
        let bytes = self
            .bytes
            .iter()
            .flat_map(|f| f.relocs.iter())
            .filter_map(|reloc| function_target(&reloc.name).map(|(id, _)| id));
        let data = self
            .data
            .iter()
            .flat_map(|(_, desc)| desc.function_decls.values())
            .filter_map(|target| match *target {
                ModuleRelocTarget::User {
                    namespace: 0,
                    index,
                } => Some(FuncId::from_u32(index)),
                _ => None,
            });
        let mut ids: Vec<FuncId> = bytes.chain(data).collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// The compiled module as its machine-code summary sees it: `recorded` after
    /// the own merge `plan` and its `retargets`, with what this wrapper holds
    /// besides (copied, so that it borrows nothing of the wrapper, whose inner
    /// module the finish then resolves decisions in).
    #[cfg(feature = "separate")]
    fn code_module<'a>(
        &self,
        recorded: &'a [CompiledFunction],
        plan: &'a MergePlan,
        retargets: &'a Retargets,
    ) -> CodeModule<'a> {
        CodeModule {
            recorded,
            count: self.declared_functions,
            plan,
            retargets,
            address_taken_elsewhere: self.address_taken_by_held_back(),
            held_back_targets: self.held_back_targets(),
            locals: self.own_locals(),
            mode: self.options.merge.mode,
        }
    }

    /// Compile-at-define: this module's whole-program decisions checked against its
    /// machine code and resolved (indexed by `FuncId`), with how they retarget the
    /// kept code; none without decisions.
    #[cfg(feature = "separate")]
    fn resolve_compiled(
        &mut self,
        recorded: &[CompiledFunction],
        plan: &MergePlan,
        retargets: &Retargets,
        allow_redirect: bool,
    ) -> ModuleResult<(ResolvedDecisions, Option<Retargets>)> {
        let Some(decisions) = self.decisions.take() else {
            return Ok((ResolvedDecisions::none(self.declared_functions), None));
        };
        let module = self.code_module(recorded, plan, retargets);
        let resolved =
            resolve_code_decisions(&mut self.inner, &module, &decisions, allow_redirect)?;
        let cross = decision_retargets(&resolved);
        Ok((resolved, Some(cross)))
    }

    /// Without the `separate` feature there are no decisions.
    #[cfg(not(feature = "separate"))]
    fn resolve_compiled(
        &mut self,
        _recorded: &[CompiledFunction],
        _plan: &MergePlan,
        _retargets: &Retargets,
        _allow_redirect: bool,
    ) -> ModuleResult<(ResolvedDecisions, Option<Retargets>)> {
        Ok((ResolvedDecisions::none(self.declared_functions), None))
    }

    /// A thunk body for function `id`: only its declared signature matters.
    fn declared_thunk_body(&self, id: FuncId) -> Function {
        let name = UserFuncName::user(0, id.as_u32());
        let signature = self
            .inner
            .declarations()
            .get_function_decl(id)
            .signature
            .clone();
        Function::with_name_signature(name, signature)
    }

    /// Compile-at-define: partitions the recorded views, applies the
    /// whole-program decisions if any, defines the kept functions' machine code
    /// (relocations retargeted), the thunks and the data.
    fn finish_compiled(
        mut self,
        allow_redirect: bool,
    ) -> ModuleResult<(M, MergeReport, Option<Merged>)> {
        let recorded = std::mem::take(&mut self.compiled);
        // No function is compiled any more: the stored functions' memory goes
        // back now.
        self.once.release();
        let compiled_from = std::mem::take(&mut self.once.reused);
        let not_compiled = std::mem::take(&mut self.once.not_compiled);
        let count = self.declared_functions;
        let (plan, retargets) = self.own_merge(&recorded);
        let (resolved, cross) =
            self.resolve_compiled(&recorded, &plan, &retargets, allow_redirect)?;
        let retargeted = |function: &CompiledFunction| {
            let references = function.references();
            let relocs = retargets.retargeted(&function.relocs, &references);
            match &cross {
                Some(cross) => cross.retargeted(&relocs, &references),
                None => relocs,
            }
        };
        let decision_of = plan.decision_map();
        let (mut duplicate_bytes, mut thunk_bytes) = (0u64, 0u64);
        let defined = recorded.len();
        // Each function's code is dropped once the inner module has it.
        for function in recorded {
            let index = FuncIndex::new(function.id.as_u32() as usize);
            if let Some(r) = resolved.per_function[index.index()] {
                match r.action {
                    CrossAction::Promote => {
                        // The code under its new hidden name; the old local name
                        // keeps no code of its own where it may be removed.
                        let relocs = retargeted(&function);
                        self.inner.define_function_bytes(
                            r.target,
                            function.alignment,
                            &function.code,
                            &relocs,
                        )?;
                        if !allow_redirect {
                            let body = self.declared_thunk_body(function.id);
                            self.define_thunk(function.id, &body, r.target)?;
                        }
                    }
                    CrossAction::Thunk => {
                        duplicate_bytes += function.code.len() as u64;
                        let body = self.declared_thunk_body(function.id);
                        thunk_bytes += self.define_thunk(function.id, &body, r.target)?;
                    }
                    CrossAction::Redirect => duplicate_bytes += function.code.len() as u64,
                }
                continue;
            }
            let Some(d) = decision_of[index] else {
                let relocs = retargeted(&function);
                self.inner.define_function_bytes(
                    function.id,
                    function.alignment,
                    &function.code,
                    &relocs,
                )?;
                continue;
            };
            duplicate_bytes += function.code.len() as u64;
            if d.action == MergeAction::Thunk {
                // The kept function may itself go to a representative elsewhere.
                let kept = resolved.per_function[d.into.index()]
                    .map_or(FuncId::from_u32(d.into.index() as u32), |r| r.target);
                let body = self.declared_thunk_body(function.id);
                thunk_bytes += self.define_thunk(function.id, &body, kept)?;
            }
        }
        let ids = (0..count as u32).map(FuncId::from_u32).collect();
        let (mut merged, cross_module) = Merged::new(ids, plan, &resolved, allow_redirect);
        let held_back = resolved.held_back(&cross_module);
        self.define_held_back(&mut merged, &held_back, allow_redirect)?;
        let mut report = self.report(&merged, &cross_module, &resolved, None);
        report.functions = defined;
        report.compiles_reused = compiled_from.len();
        report.compiled_from = compiled_from;
        report.not_compiled = not_compiled;
        report.bytes_saved = duplicate_bytes.saturating_sub(thunk_bytes);
        self.complete_report(&merged, &mut report);
        Ok((self.inner, report, Some(merged)))
    }

    /// Adds to `report` what both finishes report alike: the functions without code
    /// of their own, the thunks, and the folded data objects (by name).
    fn complete_report(&mut self, merged: &Merged, report: &mut MergeReport) {
        report.without_code = merged.without_code();
        report.thunks = std::mem::take(&mut self.thunks);
        let name = |id: DataId| {
            self.inner
                .declarations()
                .get_data_decl(id)
                .linkage_name(id)
                .into_owned()
        };
        report.data_folded = merged
            .data_aliases
            .iter()
            .map(|&(dup, kept)| (name(dup), name(kept)))
            .collect();
        report.data_bytes_saved = merged.data_bytes_saved;
    }

    /// A function's name in reports: its declared name (`u0:N` if anonymous).
    fn report_name(&self, id: FuncId) -> String {
        match &self.inner.declarations().get_function_decl(id).name {
            Some(name) => name.clone(),
            None => format!("u0:{}", id.as_u32()),
        }
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
                let Some(entry) = outcome.entry_points.get_mut(member) else {
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
    pub(super) fn merge_and_define(
        mut self,
        allow_redirect: bool,
    ) -> ModuleResult<(M, MergeReport, Option<Merged>)> {
        if !self.options.enabled {
            return Ok((self.define_unmerged()?, MergeReport::default(), None));
        }
        if self.options.effective_compile() == CompileMode::AtDefine {
            return self.finish_compiled(allow_redirect);
        }
        let (set, ids) = self.recorded_set()?;
        self.recorded.clear();
        let resolved = self.resolve_decisions(&set, allow_redirect)?;
        let merge_options = self
            .options
            .merge
            .clone()
            .with_similar_fingerprints(self.options.similar.is_some());
        let outcome = merge_functions(&set, &merge_options);
        let similar = match &self.options.similar {
            Some(options) => {
                // Only what the whole-program decisions leave as it is.
                let undecided: Vec<OutputEntry<'_>> = outcome
                    .output
                    .iter()
                    .filter(|entry| resolved.per_function[entry.function().index()].is_none())
                    .cloned()
                    .collect();
                Some(self.declare_merged_bodies(SimilarPass::after_merging(
                    &set,
                    &undecided,
                    outcome.similar_fingerprints.as_ref(),
                    options,
                    Some(self.inner.isa()),
                ))?)
            }
            None => None,
        };
        let (duplicate_bytes, thunk_bytes) = self.define_output(
            &set,
            &ids,
            &outcome,
            similar.as_ref(),
            &resolved,
            allow_redirect,
        )?;
        let (mut merged, cross_module) = Merged::new(ids, outcome.plan, &resolved, allow_redirect);
        let held_back = resolved.held_back(&cross_module);
        self.define_held_back(&mut merged, &held_back, allow_redirect)?;
        let mut report = self.report(&merged, &cross_module, &resolved, similar.as_ref());
        report.bytes_saved += duplicate_bytes.saturating_sub(thunk_bytes);
        self.complete_report(&merged, &mut report);
        Ok((self.inner, report, Some(merged)))
    }

    /// Merging is off: every function and data object as defined.
    fn define_unmerged(mut self) -> ModuleResult<M> {
        for r in std::mem::take(&mut self.recorded) {
            let mut ctx = Context::for_function(r.func);
            self.inner.define_function(r.id, &mut ctx)?;
        }
        for (id, desc) in std::mem::take(&mut self.data) {
            self.inner.define_data(id, &desc)?;
        }
        Ok(self.inner)
    }

    /// Defines what the pass's `outcome` keeps of `set` (whose functions have the
    /// `FuncId`s `ids`): kept functions with calls redirected, thunks, the merged
    /// bodies and entry points of `similar`, and what `resolved` (a whole-program
    /// plan) decides. Returns the code bytes the merged duplicates would have
    /// taken (the compiled size of the kept function each is equal to, or, where
    /// that is not known, its own size compiled only to measure) and the bytes of
    /// their thunks.
    fn define_output(
        &mut self,
        set: &FunctionSet,
        ids: &[FuncId],
        outcome: &MergeOutcome<'_>,
        similar: Option<&SimilarPass>,
        resolved: &ResolvedDecisions,
        allow_redirect: bool,
    ) -> ModuleResult<(u64, u64)> {
        let cross_redirects = resolved.redirects(set);
        let mut duplicate_bytes = 0u64;
        // Compiled size of each kept function, as the inner module compiled it.
        let mut kept_size: SecondaryMap<FuncIndex, Option<u64>> = SecondaryMap::new();
        let mut thunk_bytes = 0u64;
        let id_of = |f: FuncIndex| ids[f.index()];
        for entry in &outcome.output {
            let function = entry.function();
            if let Some(similar) = similar {
                // Their calls to functions the whole-program decisions removed
                // or made thunks go to the representatives, as in every body.
                if let Some((_, merged)) = similar.merged_before(function)
                    && let UserFuncName::User(name) = &merged.name
                {
                    let merged = cross_redirects.rewrite(merged).into_owned();
                    let mut ctx = Context::for_function(merged);
                    self.inner
                        .define_function(FuncId::from_u32(name.index), &mut ctx)?;
                }
                if let Some(entry_point) = similar.entry_point(function) {
                    let entry_point = cross_redirects.rewrite(entry_point).into_owned();
                    let mut ctx = Context::for_function(entry_point);
                    self.inner.define_function(id_of(function), &mut ctx)?;
                    continue;
                }
            }
            // A decision of the whole-program plan.
            if let Some(r) = resolved.per_function[function.index()] {
                let func = &set.get(function).func;
                match r.action {
                    CrossAction::Promote => {
                        // The body under its new hidden name; the old local
                        // name keeps no code of its own where it may be removed.
                        let body = cross_redirects.rewrite(func);
                        let mut ctx = Context::for_function(body.into_owned());
                        self.inner.define_function(r.target, &mut ctx)?;
                        if !allow_redirect {
                            self.define_thunk(id_of(function), func, r.target)?;
                        }
                    }
                    CrossAction::Thunk => {
                        duplicate_bytes += code_size(self.inner.isa(), func)?;
                        thunk_bytes += self.define_thunk(id_of(function), func, r.target)?;
                    }
                    CrossAction::Redirect => {
                        duplicate_bytes += code_size(self.inner.isa(), func)?;
                    }
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
                    let target =
                        resolved.per_function[into.index()].map_or(id_of(*into), |r| r.target);
                    thunk_bytes += self.define_thunk(id_of(*function), body, target)?;
                    continue;
                }
                OutputEntry::Removed { .. } => continue,
            };
            let func = cross_redirects.rewrite(func);
            let mut ctx = Context::for_function(func.into_owned());
            self.inner.define_function(id_of(index), &mut ctx)?;
            kept_size[index] = ctx.compiled_code().map(|c| c.code_buffer().len() as u64);
        }
        // A duplicate is equal to its kept function: the same code, the same size.
        for d in &outcome.plan.decisions {
            duplicate_bytes += match kept_size[d.into] {
                Some(size) => size,
                None => code_size(self.inner.isa(), &set.get(d.function).func)?,
            };
        }
        Ok((duplicate_bytes, thunk_bytes))
    }

    /// Defines the held-back data objects and byte-defined functions. Function
    /// references in them: an erased or aliased duplicate (or one a whole-program
    /// decision removed) has no code of its own, so they name the kept function.
    fn define_held_back(
        &mut self,
        merged: &mut Merged,
        cross_module: &[(FuncId, ResolvedDecision)],
        fold_data: bool,
    ) -> ModuleResult<()> {
        let redirects: HashMap<u32, u32> = merged
            .codeless()
            .map(|d| (merged.id(d.function).as_u32(), merged.id(d.into).as_u32()))
            .chain(
                cross_module
                    .iter()
                    .filter(|(_, r)| {
                        matches!(r.action, CrossAction::Redirect | CrossAction::Promote)
                    })
                    .map(|(id, r)| (id.as_u32(), r.target.as_u32())),
            )
            .collect();
        // A duplicate's kept function may itself be removed or promoted by a
        // decision: its references go where the kept function's go.
        let redirects: HashMap<u32, u32> = redirects
            .iter()
            .map(|(&from, &to)| (from, redirects.get(&to).copied().unwrap_or(to)))
            .collect();
        let retargets = Retargets::codeless_only(redirects);
        for function in std::mem::take(&mut self.bytes) {
            let references: Vec<Reference> = function
                .relocs
                .iter()
                .map(|reloc| reference_of(reloc, &function.bytes))
                .collect();
            let relocs = retargets.retargeted(&function.relocs, &references);
            self.inner.define_function_bytes(
                function.id,
                function.alignment,
                &function.bytes,
                &relocs,
            )?;
        }
        let mut data = std::mem::take(&mut self.data);
        for (_, desc) in &mut data {
            for target in desc.function_decls.values_mut() {
                if let ModuleRelocTarget::User {
                    namespace: 0,
                    index,
                } = target
                    && let Some(kept) = retargets.codeless(*index)
                {
                    *index = kept;
                }
            }
        }
        // Read-only data folding, where the finish can alias data symbols.
        if fold_data {
            merged.data_aliases = fold(&data, self.inner.declarations(), &self.options.data);
        }
        let folded: HashSet<DataId> = merged.data_aliases.iter().map(|&(dup, _)| dup).collect();
        for (id, desc) in data {
            if folded.contains(&id) {
                merged.data_bytes_saved += desc.init.size() as u64;
                continue;
            }
            self.inner.define_data(id, &desc)?;
        }
        Ok(())
    }

    /// The report of a finished merge, functions named by their declared names
    /// (anonymous ones as `u0:N`); `bytes_saved` counts only what the similar
    /// merge saved (the caller adds the duplicates').
    fn report(
        &self,
        merged: &Merged,
        cross_module: &[(FuncId, ResolvedDecision)],
        resolved: &ResolvedDecisions,
        similar: Option<&SimilarPass>,
    ) -> MergeReport {
        let names: Vec<String> = merged.ids.iter().map(|&id| self.report_name(id)).collect();
        let mut report = report_of(&names, &merged.plan);
        #[cfg(feature = "separate")]
        {
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
                    let into = resolved
                        .qualified
                        .get(&r.target)
                        .cloned()
                        .unwrap_or_else(|| declared(r.target));
                    (declared(*id), into, r.action.into())
                })
                .collect();
            report.promoted = cross_module
                .iter()
                .filter(|(_, r)| r.action == CrossAction::Promote)
                .map(|(id, r)| (*id, r.target))
                .collect();
        }
        #[cfg(not(feature = "separate"))]
        let _ = (cross_module, resolved);
        if let Some(similar) = similar {
            let groups = &similar.outcome.groups;
            report.similar_groups = groups.len();
            report.bytes_saved += groups
                .iter()
                .filter(|g| g.size_basis.in_bytes())
                .map(|g| g.size_before.saturating_sub(g.size_after))
                .sum::<u64>();
            report.similar = Some(similar.group_reports());
        }
        report
    }

    /// Runs the pass, defines what stays in the inner module and returns it with the
    /// report. Erased and aliased duplicates are left undefined in the inner module,
    /// and nothing refers to them any more from merged code; use a backend-specific
    /// finish ([`MergingModule::finish_object`](super::MergingModule::finish_object)) to give aliases their symbol.
    pub fn finish(self) -> ModuleResult<(M, MergeReport)> {
        let (inner, report, _) = self.merge_and_define(false)?;
        Ok((inner, report))
    }
}

/// The pass's result with the `FuncId` of each of its functions.
pub(super) struct Merged {
    /// The `FuncId` of each function of the pass, by index.
    pub(super) ids: Vec<FuncId>,
    /// The pass's decisions.
    pub(super) plan: MergePlan,
    /// Functions a whole-program decision removed (their calls go elsewhere); only
    /// an object file has symbols to fix for them.
    #[cfg_attr(not(feature = "object"), allow(dead_code))]
    pub(super) redirected: Vec<FuncId>,
    /// Local functions a whole-program decision promoted, with the hidden function
    /// their code was defined under, where they got no code of their own.
    #[cfg_attr(not(feature = "object"), allow(dead_code))]
    pub(super) promoted: Vec<(FuncId, FuncId)>,
    /// Read-only data objects folded into an identical one: (duplicate, kept).
    /// The duplicate is not defined; an object file's finish aliases its symbol.
    pub(super) data_aliases: Vec<(DataId, DataId)>,
    /// Bytes of data the folds saved.
    pub(super) data_bytes_saved: u64,
}

impl Merged {
    /// The outcome for the functions of `ids` (the pass's functions, in order):
    /// the module's own `plan` and the whole-program decisions `resolved`, which
    /// it returns by function too. A promotion counts only where the finish can
    /// redirect (`allow_redirect`).
    fn new(
        ids: Vec<FuncId>,
        plan: MergePlan,
        resolved: &ResolvedDecisions,
        allow_redirect: bool,
    ) -> (Self, Vec<(FuncId, ResolvedDecision)>) {
        let cross_module: Vec<(FuncId, ResolvedDecision)> = resolved
            .per_function
            .iter()
            .enumerate()
            .filter_map(|(i, r)| Some((ids[i], (*r)?)))
            .collect();
        let merged = Merged {
            ids,
            plan,
            redirected: cross_module
                .iter()
                .filter(|(_, r)| r.action == CrossAction::Redirect)
                .map(|(id, _)| *id)
                .collect(),
            promoted: cross_module
                .iter()
                .filter(|(_, r)| r.action == CrossAction::Promote && allow_redirect)
                .map(|(id, r)| (*id, r.target))
                .collect(),
            data_aliases: Vec::new(),
            data_bytes_saved: 0,
        };
        (merged, cross_module)
    }

    /// The `FuncId` of function `f` of the pass.
    pub(super) fn id(&self, f: FuncIndex) -> FuncId {
        self.ids[cranelift_codegen::entity::EntityRef::index(f)]
    }

    /// The decisions of duplicates that get no code of their own (erased and
    /// aliased ones: they share the kept function's code and address).
    pub(super) fn codeless(&self) -> impl Iterator<Item = &MergeDecision> {
        self.plan
            .decisions
            .iter()
            .filter(|d| d.action != MergeAction::Thunk)
    }

    /// The functions that got no code of their own, sorted.
    fn without_code(&self) -> Vec<FuncId> {
        let mut ids: Vec<FuncId> = self
            .codeless()
            .map(|d| self.id(d.function))
            .chain(self.redirected.iter().copied())
            .chain(self.promoted.iter().map(|&(id, _)| id))
            .collect();
        ids.sort_unstable();
        ids
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
    MergeReport {
        functions: names.len(),
        classes,
        actions,
        bytes_saved: 0,
        similar_groups: 0,
        #[cfg(feature = "separate")]
        cross_module: Vec::new(),
        #[cfg(feature = "separate")]
        promoted: Vec::new(),
        similar: None,
        without_code: Vec::new(),
        thunks: Vec::new(),
        compiles_reused: 0,
        compiled_from: Vec::new(),
        not_compiled: Vec::new(),
        data_folded: Vec::new(),
        data_bytes_saved: 0,
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
        let id = self.inner.declare_function(name, linkage, signature)?;
        self.declared_functions = self.declared_functions.max(id.as_u32() as usize + 1);
        Ok(id)
    }

    fn declare_anonymous_function(&mut self, signature: &ir::Signature) -> ModuleResult<FuncId> {
        let id = self.inner.declare_anonymous_function(signature)?;
        self.declared_functions = self.declared_functions.max(id.as_u32() as usize + 1);
        Ok(id)
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
        ctrl_plane: &mut ControlPlane,
    ) -> ModuleResult<()> {
        self.mark_defined(func)?;
        if !self.options.enabled {
            // Nothing to merge: the inner module compiles it now.
            return self
                .inner
                .define_function_with_control_plane(func, ctx, ctrl_plane);
        }
        if self.options.effective_compile() == CompileMode::AtDefine {
            let once = self.options.compile_once.then_some(&mut self.once);
            let recorded = self.compiled.len();
            let compiled = match record(func, recorded, ctx, ctrl_plane, self.inner.isa(), once)? {
                Recorded::Compiled(compiled) => compiled,
                Recorded::SameAs(index) => self.compiled[index].copy_for(func),
            };
            self.compiled.push(compiled);
            return Ok(());
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
        if !self.options.enabled {
            return self
                .inner
                .define_function_bytes(func_id, alignment, bytes, relocs);
        }
        self.mark_defined(func_id)?;
        // The pass cannot compare or rewrite machine code it did not compile: a
        // function it takes the address of keeps its own address, and every
        // reference is retargeted at finish like the data's.
        for reloc in relocs {
            if let Some((target, _)) = function_target(&reloc.name)
                && reference_of(reloc, bytes) == Reference::Address
            {
                self.address_taken_elsewhere.insert(target);
            }
        }
        self.bytes.push(ByteFunction {
            id: func_id,
            alignment,
            bytes: bytes.to_vec(),
            relocs: relocs.to_vec(),
        });
        Ok(())
    }

    fn define_data(&mut self, data_id: DataId, data: &DataDescription) -> ModuleResult<()> {
        for target in data.function_decls.values() {
            if let ModuleRelocTarget::User {
                namespace: 0,
                index,
            } = target
            {
                self.address_taken_elsewhere
                    .insert(FuncId::from_u32(*index));
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
