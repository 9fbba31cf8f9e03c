//! Compile-at-define mode of [`MergingModule`](super::MergingModule)
//! ([`CompileMode::AtDefine`](super::CompileMode::AtDefine)): each function is
//! compiled in the caller's thread when it is defined, as the inner module would,
//! so `ctx.compiled_code()` is there afterwards for whatever wraps the module
//! (rustc_codegen_cranelift's unwind recording reads it). No IR is kept: the
//! functions are compared by their machine code, as lld's identical code folding
//! (`ICF.cpp`) compares sections.
//!
//! Two functions are equal when their code bytes and alignment are the same, their
//! relocations are the same (offset, kind, addend, and target), where a target that
//! is a function of the module may be any function of the same class (the fixpoint
//! below) when `target_match` says so (a direct call; an address only in mode
//! all, where members of a class share one), and any other target (data, a
//! libcall, a preemptible function, an address in safe mode, one the module does
//! not define) must be the very same symbol, and the metadata a runtime
//! may read from the compiled code is the same ([`Metadata`]: trap codes, call
//! sites and their exception handlers, stack maps, patchable call sites). Equal
//! machine code with equal relocations and metadata runs the same, whatever IR it
//! came from.
//!
//! Phases:
//!
//! 1. *Record* ([`record`]), at define: compile, keep the code, alignment and
//!    relocations, and a hash of the content (function targets left out). With
//!    compile-once (`compile_once.rs`) a function whose IR the comparator's
//!    stream proves equal to one defined before (names by reference) gets that
//!    function's compiled stencil finished with its own names instead of a
//!    compile; or, when duplicates are not compiled and the names are the same
//!    too, is not compiled at all: its record is a copy of the other's
//!    ([`Recorded::SameAs`]).
//! 2. *Classes* ([`classes`]), at finish: functions of one hash are split into
//!    classes of equal content, then classes are split until every member's
//!    function targets are, position by position, in one class (lld's iteration;
//!    splitting only, so it stops at the largest such partition).
//! 3. *Plan* (`identical::plan`, as the pass), then the finish in `merging`: every
//!    kept function's code goes to the inner module with `define_function_bytes`,
//!    relocations retargeted ([`Retargets`]): a reference to an erased or aliased
//!    duplicate goes to the kept function, as does a direct call of a thunk.

use super::compile_once::{CompileOnce, Outcome};
use crate::identical::partition::coarsest_stable;
use crate::identical::plan::{MergeAction, MergeMode, MergePlan, plan};
use crate::ir::{
    FuncIndex, Linkage, ModuleFunctions, Reference, TargetMatch, reads_machine_state, target_match,
};
use cranelift_codegen::Context;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::{
    ExternalName, FuncRef, Function, GlobalValueData, Inst, InstructionData, KnownSymbol, LibCall,
    TrapCode,
};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::{Final, MachBufferFinalized};
use cranelift_module::{
    FuncId, ModuleDeclarations, ModuleError, ModuleReloc, ModuleRelocTarget, ModuleResult,
};
use rustc_hash::FxHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// The module's declared functions as the plan sees them: `FuncIndex` N is the
/// function of `FuncId` N, with its declared linkage.
pub(super) struct DeclaredFunctions<'a> {
    /// The inner module's declarations.
    pub(super) declarations: &'a ModuleDeclarations,
    /// How many functions are declared (`FuncId`s below it are valid).
    pub(super) count: usize,
    /// The functions whose IR read machine state when they were defined.
    pub(super) reads_machine_state: SecondaryMap<FuncIndex, bool>,
}

impl<'a> DeclaredFunctions<'a> {
    /// The declared functions of `declarations` (`count` of them), of which
    /// `recorded` were compiled at define.
    pub(super) fn new(
        declarations: &'a ModuleDeclarations,
        count: usize,
        recorded: &[CompiledFunction],
    ) -> Self {
        let mut reads_machine_state = SecondaryMap::new();
        for function in recorded.iter().filter(|f| f.reads_machine_state) {
            reads_machine_state[FuncIndex::new(function.id.as_u32() as usize)] = true;
        }
        Self {
            declarations,
            count,
            reads_machine_state,
        }
    }
}

impl ModuleFunctions for DeclaredFunctions<'_> {
    fn linkage(&self, index: FuncIndex) -> Linkage {
        let id = FuncId::from_u32(index.index() as u32);
        self.declarations.get_function_decl(id).linkage.into()
    }

    fn reads_machine_state(&self, index: FuncIndex) -> bool {
        self.reads_machine_state[index]
    }
}

/// What the wrapper keeps of a function defined in compile-at-define mode.
pub(super) struct CompiledFunction {
    /// The function.
    pub(super) id: FuncId,
    /// Its machine code.
    pub(super) code: Vec<u8>,
    /// The alignment its code needs.
    pub(super) alignment: u64,
    /// Its relocations, as the inner module would have received them.
    pub(super) relocs: Vec<ModuleReloc>,
    /// The metadata compiled with the code.
    pub(super) metadata: Metadata,
    /// Whether its IR reads machine state (no thunk may front it).
    pub(super) reads_machine_state: bool,
    /// The functions (`FuncId` indices, sorted) whose address its IR may take:
    /// a relocation to any other function comes from a call, even where the code
    /// loads the callee's address first (a call through the GOT).
    pub(super) ir_address_taken: Vec<u32>,
    /// A hash of everything compared but the function targets' identity.
    hash: u64,
}

impl CompiledFunction {
    /// The machine code of this function as function `id`'s: the same code and
    /// relocations (the two are equal, names and all), a reference into this
    /// function's own code made one into `id`'s.
    pub(super) fn copy_for(&self, id: FuncId) -> Self {
        let relocs = self
            .relocs
            .iter()
            .map(|reloc| {
                let mut reloc = reloc.clone();
                if let ModuleRelocTarget::FunctionOffset(target, _) = &mut reloc.name
                    && *target == self.id
                {
                    *target = id;
                }
                reloc
            })
            .collect();
        Self {
            id,
            code: self.code.clone(),
            alignment: self.alignment,
            relocs,
            metadata: self.metadata.clone(),
            reads_machine_state: self.reads_machine_state,
            ir_address_taken: self.ir_address_taken.clone(),
            hash: self.hash,
        }
    }

    /// How each of its relocations uses its target: as [`reference_of`] reads
    /// the code, but a load of the address of a function its IR only calls is a
    /// call (the code calls through the GOT).
    pub(super) fn references(&self) -> Vec<Reference> {
        self.relocs
            .iter()
            .map(
                |reloc| match (reference_of(reloc, &self.code), &reloc.name) {
                    (
                        Reference::Address,
                        ModuleRelocTarget::User {
                            namespace: 0,
                            index,
                        },
                    ) if self.ir_address_taken.binary_search(index).is_err() => Reference::Call,
                    (reference, _) => reference,
                },
            )
            .collect()
    }
}

/// What Cranelift reports beside the code that a runtime may act on: two functions
/// with equal code but another trap code, exception handler or stack map are not
/// equal. (Debug tags and source locations are not compared: they change what a
/// debugger shows, not what the code does.)
#[derive(Clone, Default, PartialEq, Eq, Hash)]
pub(super) struct Metadata {
    /// Trap sites: offset and trap code.
    pub(super) traps: Vec<(u32, TrapCode)>,
    /// The rest, rendered (empty when there is none): the call sites with
    /// exception handlers (return address, frame offset, handlers), user stack maps
    /// and patchable call sites. A call site without handlers adds nothing the
    /// code does not say: its return address and frame follow from the code.
    pub(super) rest: String,
}

impl Metadata {
    /// The metadata of `buffer`.
    fn of(buffer: &MachBufferFinalized<Final>) -> Self {
        let traps = buffer.traps().iter().map(|t| (t.offset, t.code)).collect();
        let handlers: Vec<_> = buffer
            .call_sites()
            .filter(|site| !site.exception_handlers.is_empty())
            .map(|site| (site.ret_addr, site.frame_offset, site.exception_handlers))
            .collect();
        let stack_maps = buffer.user_stack_maps();
        let patchable: Vec<_> = buffer.patchable_call_sites().collect();
        let rest = if handlers.is_empty() && stack_maps.is_empty() && patchable.is_empty() {
            String::new()
        } else {
            format!("{handlers:?} {stack_maps:?} {patchable:?}")
        };
        Self { traps, rest }
    }
}

/// A relocation target that is a function of the module (compared by class), with
/// the offset into it for a `FunctionOffset`.
pub(super) fn function_target(target: &ModuleRelocTarget) -> Option<(FuncId, Option<u32>)> {
    match *target {
        ModuleRelocTarget::User {
            namespace: 0,
            index,
        } => Some((FuncId::from_u32(index), None)),
        ModuleRelocTarget::FunctionOffset(id, offset) => Some((id, Some(offset))),
        _ => None,
    }
}

/// A relocation target that must be the very same symbol, as a value that can be
/// compared and hashed (`ModuleRelocTarget` is neither).
#[derive(PartialEq, Eq, Hash)]
pub(super) enum ExactTarget {
    /// A user name that is not a module function (data: namespace 1).
    User(u32, u32),
    /// A libcall.
    LibCall(LibCall),
    /// A symbol the linker knows.
    Known(KnownSymbol),
    /// A function of the module (only as a preemptible or undefined target).
    Function(u32, Option<u32>),
}

impl ExactTarget {
    /// The target as a comparable value.
    pub(super) fn of(target: &ModuleRelocTarget) -> Self {
        match *target {
            ModuleRelocTarget::User { namespace, index } => Self::User(namespace, index),
            ModuleRelocTarget::LibCall(libcall) => Self::LibCall(libcall),
            ModuleRelocTarget::KnownSymbol(known) => Self::Known(known),
            ModuleRelocTarget::FunctionOffset(id, offset) => {
                Self::Function(id.as_u32(), Some(offset))
            }
        }
    }
}

/// Phase 1: compiles `ctx.func` (function `id`) for `isa`, through compile-once
/// if given (`recorded`: the index the function's machine code will have among
/// the recorded ones), leaving the compiled code in `ctx`, and returns what the
/// comparison and the finish need; or, where compile-once compiled nothing, the
/// recorded function whose machine code stands for this one.
pub(super) fn record(
    id: FuncId,
    recorded: usize,
    ctx: &mut Context,
    ctrl_plane: &mut ControlPlane,
    isa: &dyn TargetIsa,
    once: Option<&mut CompileOnce>,
) -> ModuleResult<Recorded> {
    let reads_machine_state = match once {
        Some(once) => match once.define(id, recorded, ctx, ctrl_plane, isa)? {
            Outcome::Compiled {
                reads_machine_state,
            } => reads_machine_state,
            Outcome::SameAs(recorded) => return Ok(Recorded::SameAs(recorded)),
        },
        None => {
            ctx.compile(isa, ctrl_plane)?;
            reads_machine_state(&ctx.func)
        }
    };
    let Some(compiled) = ctx.compiled_code() else {
        return Err(ModuleError::Backend(anyhow::anyhow!(
            "Cranelift compiled {id} but kept no code"
        )));
    };
    let alignment = u64::from(compiled.buffer.alignment);
    let code = compiled.code_buffer().to_vec();
    let relocs: Vec<ModuleReloc> = compiled
        .buffer
        .relocs()
        .iter()
        .map(|reloc| ModuleReloc::from_mach_reloc(reloc, &ctx.func, id))
        .collect();
    let metadata = Metadata::of(&compiled.buffer);
    let hash = content_hash(alignment, &code, &relocs, &metadata);
    Ok(Recorded::Compiled(CompiledFunction {
        id,
        code,
        alignment,
        relocs,
        metadata,
        reads_machine_state,
        ir_address_taken: ir_address_taken(&ctx.func),
        hash,
    }))
}

/// What [`record`] recorded.
pub(super) enum Recorded {
    /// The function's machine code.
    Compiled(CompiledFunction),
    /// Nothing compiled: the function is equal, names and all, to the recorded
    /// function of this index, whose machine code stands for it
    /// ([`CompiledFunction::copy_for`]).
    SameAs(usize),
}

/// A hash of everything [`same_content`] compares.
fn content_hash(alignment: u64, code: &[u8], relocs: &[ModuleReloc], metadata: &Metadata) -> u64 {
    let mut hasher = FxHasher::default();
    (alignment, code, relocs.len(), metadata).hash(&mut hasher);
    for reloc in relocs {
        (reloc.offset, reloc.kind as u32, reloc.addend).hash(&mut hasher);
        match function_target(&reloc.name) {
            Some((_, offset)) => (0u8, offset).hash(&mut hasher),
            None => (1u8, ExactTarget::of(&reloc.name)).hash(&mut hasher),
        }
    }
    hasher.finish()
}

/// The module functions (`FuncId` indices, sorted) whose address `func` may take:
/// those a `func_addr` or a symbol global value names, and any whose function
/// reference is used by no call (so by something else, or by nothing).
fn ir_address_taken(func: &Function) -> Vec<u32> {
    let function = |name: &ExternalName| match name {
        ExternalName::User(r) => func
            .params
            .user_named_funcs()
            .get(*r)
            .filter(|user| user.namespace == 0)
            .map(|user| user.index),
        _ => None,
    };
    let mut called = SecondaryMap::<FuncRef, bool>::new();
    let mut taken = Vec::new();
    for inst in (0..func.dfg.num_insts()).map(Inst::new) {
        match func.dfg.insts[inst] {
            InstructionData::Call { func_ref, .. } | InstructionData::TryCall { func_ref, .. } => {
                called[func_ref] = true;
            }
            InstructionData::FuncAddr { func_ref, .. } => {
                taken.extend(function(&func.dfg.ext_funcs[func_ref].name));
            }
            _ => {}
        }
    }
    for (func_ref, data) in func.dfg.ext_funcs.iter() {
        if !called[func_ref] {
            taken.extend(function(&data.name));
        }
    }
    for gv in func.global_values.values() {
        if let GlobalValueData::Symbol { name, .. } = gv {
            taken.extend(function(name));
        }
    }
    taken.sort_unstable();
    taken.dedup();
    taken
}

/// Whether `a` and `b` are equal but for which functions their function targets
/// are (those must then be in one class, checked by the fixpoint).
fn same_content(a: &CompiledFunction, b: &CompiledFunction) -> bool {
    a.alignment == b.alignment
        && a.code == b.code
        && a.metadata == b.metadata
        && a.relocs.len() == b.relocs.len()
        && a.relocs.iter().zip(&b.relocs).all(|(x, y)| {
            x.offset == y.offset
                && x.kind == y.kind
                && x.addend == y.addend
                && match (function_target(&x.name), function_target(&y.name)) {
                    (Some((_, p)), Some((_, q))) => p == q,
                    (None, None) => ExactTarget::of(&x.name) == ExactTarget::of(&y.name),
                    _ => false,
                }
        })
}

/// Phase 2: the classes of equal functions among `recorded` (two or more members
/// each, members in `FuncId` order, classes by first member), and which functions
/// have their address taken by code (a relocation to a function that is not a
/// direct call).
pub(super) fn classes(
    recorded: &[CompiledFunction],
    names: &DeclaredFunctions<'_>,
    mode: MergeMode,
) -> (Vec<Vec<FuncIndex>>, SecondaryMap<FuncIndex, bool>) {
    let (classes, address_taken, _) = classes_counted(recorded, names, mode);
    (classes, address_taken)
}

/// [`classes`], and the references the fixpoint read (its unit of work).
fn classes_counted(
    recorded: &[CompiledFunction],
    names: &DeclaredFunctions<'_>,
    mode: MergeMode,
) -> (Vec<Vec<FuncIndex>>, SecondaryMap<FuncIndex, bool>, u64) {
    let references: Vec<Vec<Reference>> = recorded.iter().map(|f| f.references()).collect();
    let mut address_taken: SecondaryMap<FuncIndex, bool> = SecondaryMap::new();
    for (function, references) in recorded.iter().zip(&references) {
        for (reloc, &reference) in function.relocs.iter().zip(references) {
            if let Some((target, _)) = function_target(&reloc.name)
                && reference == Reference::Address
            {
                address_taken[FuncIndex::new(target.as_u32() as usize)] = true;
            }
        }
    }
    // Each function target, as the fixpoint reads it: `None` where any function
    // of the target's class will do, the very function where the reference must
    // match exactly (`target_match`: an address in safe mode, a preemptible
    // target, a function not declared).
    let targets = |i: usize| {
        recorded[i]
            .relocs
            .iter()
            .zip(&references[i])
            .filter_map(|(reloc, &reference)| Some((reference, function_target(&reloc.name)?.0)))
            .map(move |(reference, target)| {
                let index = target.as_u32() as usize;
                let exact = index >= names.count
                    || target_match(reference, names.linkage(FuncIndex::new(index)), mode)
                        == TargetMatch::Exact;
                (exact.then_some(target.as_u32()), FuncIndex::new(index))
            })
    };
    // Functions of one hash, split by content (a hash collision is the only
    // way to a second content in a bucket), then by the exact targets and the
    // positions of the others.
    let mut by_hash: HashMap<u64, Vec<usize>> = HashMap::new();
    for (i, function) in recorded.iter().enumerate() {
        by_hash.entry(function.hash).or_default().push(i);
    }
    let mut buckets: Vec<Vec<usize>> = by_hash.into_values().filter(|b| b.len() > 1).collect();
    buckets.sort_unstable();
    let mut groups: Vec<Vec<FuncIndex>> = Vec::new();
    for bucket in buckets {
        let mut split: Vec<Vec<usize>> = Vec::new();
        for i in bucket {
            match split
                .iter_mut()
                .find(|g| same_content(&recorded[g[0]], &recorded[i]))
            {
                Some(group) => group.push(i),
                None => split.push(vec![i]),
            }
        }
        for group in split.into_iter().filter(|g| g.len() > 1) {
            let mut by_exact: HashMap<Vec<Option<u32>>, usize> = HashMap::new();
            let first = groups.len();
            for i in group {
                let exact: Vec<Option<u32>> = targets(i).map(|(exact, _)| exact).collect();
                let at = *by_exact.entry(exact).or_insert_with(|| {
                    groups.push(Vec::new());
                    groups.len() - 1
                });
                groups[at].push(FuncIndex::new(recorded[i].id.as_u32() as usize));
            }
            let kept: Vec<Vec<FuncIndex>> = groups.drain(first..).filter(|g| g.len() > 1).collect();
            groups.extend(kept);
        }
    }
    // The fixpoint: split until every member's other targets are, position by
    // position, in one class (Hopcroft's refinement, `partition::coarsest_stable`:
    // O(M log N) for M such targets).
    let by_id: HashMap<u32, usize> = recorded
        .iter()
        .enumerate()
        .map(|(i, f)| (f.id.as_u32(), i))
        .collect();
    let refined = coarsest_stable(names.count, &groups, |f| {
        let i = by_id.get(&(f.index() as u32)).copied();
        i.into_iter()
            .flat_map(targets)
            .filter(|(exact, _)| exact.is_none())
            .map(|(_, target)| target)
    });
    (refined.classes, address_taken, refined.references_read)
}

/// Phase 2 and the plan: what becomes of each recorded function.
/// `address_taken_elsewhere` are the functions whose address a data object or
/// byte-defined code holds.
pub(super) fn plan_recorded(
    recorded: &[CompiledFunction],
    names: &DeclaredFunctions<'_>,
    address_taken_elsewhere: impl IntoIterator<Item = FuncId>,
    mode: MergeMode,
) -> MergePlan {
    let (classes, mut address_taken) = classes(recorded, names, mode);
    for id in address_taken_elsewhere {
        address_taken[FuncIndex::new(id.as_u32() as usize)] = true;
    }
    plan(names, classes, &address_taken, mode)
}

/// What `reloc` (a relocation of `code`) does with its target: a direct call (or
/// tail call), or anything else, which takes its address. x86_64 relocates a
/// `lea` of a near symbol with the same kind as a call (`X86CallPCRel4`), so
/// there the opcode before the displacement tells: `call rel32` (`e8`) or
/// `jmp rel32` (`e9`), where a `lea` has a ModRM byte that is neither.
pub(super) fn reference_of(reloc: &ModuleReloc, code: &[u8]) -> Reference {
    let opcode = || {
        (reloc.offset as usize)
            .checked_sub(1)
            .and_then(|at| code.get(at))
            .copied()
    };
    let call = match reloc.kind {
        Reloc::X86CallPCRel4 | Reloc::X86CallPLTRel4 => matches!(opcode(), Some(0xe8 | 0xe9)),
        Reloc::Arm64Call | Reloc::RiscvCallPlt | Reloc::S390xPLTRel32Dbl => true,
        _ => false,
    };
    if call {
        Reference::Call
    } else {
        Reference::Address
    }
}

/// Where the relocations of kept code go instead: every reference to an erased or
/// aliased duplicate goes to the kept function (they share its address), and a
/// direct call of a thunk (not of a preemptible one) goes to the kept function.
pub(super) struct Retargets {
    /// Erased and aliased duplicates.
    all: HashMap<u32, u32>,
    /// Thunks whose direct calls may skip them.
    calls: HashMap<u32, u32>,
}

impl Retargets {
    /// The retargeting `plan` (over `names`) makes.
    pub(super) fn new(plan: &MergePlan, names: &DeclaredFunctions<'_>) -> Self {
        let (mut all, mut calls) = (HashMap::new(), HashMap::new());
        let id = |f: FuncIndex| f.index() as u32;
        for d in &plan.decisions {
            match d.action {
                MergeAction::Erase | MergeAction::Alias => {
                    all.insert(id(d.function), id(d.into));
                }
                MergeAction::Thunk if names.linkage(d.function) != Linkage::Preemptible => {
                    calls.insert(id(d.function), id(d.into));
                }
                MergeAction::Thunk => {}
            }
        }
        Self { all, calls }
    }

    /// Every reference to a key of `all` goes to its value, and every direct call
    /// of a key of `calls` (whole-program decisions, after the module's own merge).
    #[cfg(feature = "separate")]
    pub(super) fn from_maps(all: HashMap<u32, u32>, calls: HashMap<u32, u32>) -> Self {
        Self { all, calls }
    }

    /// Only the retargeting of duplicates without code of their own: every
    /// reference to a key of `all` goes to its value (for machine code the pass
    /// did not compile, whose calls of thunks stay as they are).
    pub(super) fn codeless_only(all: HashMap<u32, u32>) -> Self {
        Self {
            all,
            calls: HashMap::new(),
        }
    }

    /// The function whose code `function` (a `FuncId`'s index) shares, if it has
    /// none of its own.
    pub(super) fn codeless(&self, function: u32) -> Option<u32> {
        self.all.get(&function).copied()
    }

    /// `relocs` with their targets retargeted; `references` says how each uses
    /// its target ([`CompiledFunction::references`], or [`reference_of`] for code
    /// the wrapper did not compile).
    pub(super) fn retargeted(
        &self,
        relocs: &[ModuleReloc],
        references: &[Reference],
    ) -> Vec<ModuleReloc> {
        relocs
            .iter()
            .zip(references)
            .map(|(original, &reference)| {
                let mut reloc = original.clone();
                match &mut reloc.name {
                    ModuleRelocTarget::User {
                        namespace: 0,
                        index,
                    } => {
                        if let Some(kept) = self.codeless(*index) {
                            *index = kept;
                        } else if reference == Reference::Call
                            && let Some(&kept) = self.calls.get(index)
                        {
                            *index = kept;
                        }
                    }
                    // An offset into an erased or aliased duplicate is the same
                    // offset into the kept function's (equal) code.
                    ModuleRelocTarget::FunctionOffset(id, _) => {
                        if let Some(kept) = self.codeless(id.as_u32()) {
                            *id = FuncId::from_u32(kept);
                        }
                    }
                    _ => {}
                }
                reloc
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::ir::Signature;
    use cranelift_codegen::isa::CallConv;

    /// One chain `c0 -> c1 -> ... -> c{n-1}` of direct calls per leaf code in
    /// `leaves`, chain after chain: every function but the last calls the
    /// next with the same code, the last is its leaf code.
    fn chains(n: usize, leaves: &[u8]) -> (ModuleDeclarations, Vec<CompiledFunction>) {
        let mut declarations = ModuleDeclarations::default();
        let signature = Signature::new(CallConv::SystemV);
        let mut recorded = Vec::new();
        for (chain, &leaf) in leaves.iter().enumerate() {
            for i in 0..n {
                let name = format!("f{chain}_{i}");
                let (id, _) = declarations
                    .declare_function(&name, cranelift_module::Linkage::Local, &signature)
                    .expect("declared");
                let (code, relocs) = if i + 1 < n {
                    let callee = FuncId::from_u32(id.as_u32() + 1);
                    let call = ModuleReloc {
                        offset: 4,
                        kind: Reloc::Arm64Call,
                        name: ModuleRelocTarget::user(0, callee.as_u32()),
                        addend: 0,
                    };
                    (vec![0xaa; 8], vec![call])
                } else {
                    (vec![leaf; 8], Vec::new())
                };
                let metadata = Metadata::default();
                let hash = content_hash(4, &code, &relocs, &metadata);
                recorded.push(CompiledFunction {
                    id,
                    code,
                    alignment: 4,
                    relocs,
                    metadata,
                    reads_machine_state: false,
                    ir_address_taken: Vec::new(),
                    hash,
                });
            }
        }
        (declarations, recorded)
    }

    #[test]
    fn call_chains_refine_in_n_log_n() {
        // Chains 0 and 2 end in equal leaves, chain 1 in another: the i-th
        // functions of chains 0 and 2 are equal, and nothing else.
        let run = |n: usize| {
            let (declarations, recorded) = chains(n, &[1, 2, 1]);
            let names = DeclaredFunctions::new(&declarations, recorded.len(), &recorded);
            let (classes, _, read) = classes_counted(&recorded, &names, MergeMode::Safe);
            let expected: Vec<Vec<FuncIndex>> = (0..n)
                .map(|i| vec![FuncIndex::new(i), FuncIndex::new(2 * n + i)])
                .collect();
            assert_eq!(classes, expected, "classes at n = {n}");
            read
        };
        let (small, large) = (run(250), run(2000));
        // Eight times the functions may cost at most 11 times the work (n log n);
        // a fixpoint that reads every member each round costs 64 times.
        assert!(
            large <= 11 * small,
            "references read: {small} at 250, {large} at 2000"
        );
    }
}
