//! Compile-at-define mode of [`MergingModule`](super::MergingModule)
//! ([`CompileMode::AtDefine`](super::CompileMode::AtDefine)): each function is
//! compiled in the caller's thread when it is defined, as the inner module would,
//! so `ctx.compiled_code()` is there afterwards for whatever wraps the module
//! (rustc_codegen_cranelift's unwind recording reads it). No IR is kept.
//!
//! Phases:
//!
//! 1. *Record* ([`record`]), at define: the walk's view of the function (its
//!    structural hash and its encoding, callees by `FuncId`: [`DeclaredFunctions`]),
//!    then its machine code, alignment and relocations.
//! 2. *Partition and plan* ([`plan_recorded`]), at finish: the same partition and
//!    plan the pass runs, over the recorded views, one node per declared function
//!    (an import is a node of its own that equals only itself).
//! 3. *Define* ([`retargeted`] and the finish in `merging`): every kept function's
//!    machine code goes to the inner module with `define_function_bytes`, its
//!    relocations retargeted (a reference to an erased or aliased duplicate goes to
//!    the kept function, as does a direct call of a thunk); thunks and aliases as in
//!    the deferred mode.

use crate::identical::compare::EncodedFunctions;
use crate::identical::encode::{FunctionEncoding, WalkOptions, WalkScratch, encode_function};
use crate::identical::hash::{StructuralHash, hash_function};
use crate::identical::partition::partition;
use crate::identical::plan::{MergeAction, MergeMode, MergePlan, plan};
use crate::ir::{FuncIndex, Linkage, ModuleFunctions, SymbolKey};
use cranelift_codegen::Context;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::Signature;
use cranelift_codegen::isa::TargetIsa;
use cranelift_module::{
    FuncId, ModuleDeclarations, ModuleError, ModuleReloc, ModuleRelocTarget, ModuleResult,
};
use std::collections::HashMap;

/// The module's declared functions as the walk sees them: `u0:N` names the
/// function of `FuncId` N, with its declared linkage.
pub(super) struct DeclaredFunctions<'a> {
    /// The inner module's declarations.
    pub(super) declarations: &'a ModuleDeclarations,
    /// How many functions are declared (`FuncId`s below it are valid).
    pub(super) count: usize,
}

impl ModuleFunctions for DeclaredFunctions<'_> {
    fn lookup_key(&self, key: SymbolKey<'_>) -> Option<FuncIndex> {
        match key {
            SymbolKey::User {
                namespace: 0,
                index,
            } if (index as usize) < self.count => Some(FuncIndex::new(index as usize)),
            _ => None,
        }
    }

    fn linkage(&self, index: FuncIndex) -> Linkage {
        let id = FuncId::from_u32(index.index() as u32);
        self.declarations.get_function_decl(id).linkage.into()
    }
}

/// The walk's view of a defined function: what the pass decides on.
pub(super) struct FunctionView {
    /// Its structural hash.
    hash: StructuralHash,
    /// Its encoding; references to module functions by `FuncId`.
    encoding: FunctionEncoding,
}

/// What the wrapper keeps of a function defined in compile-at-define mode.
pub(super) struct CompiledFunction {
    /// The function.
    pub(super) id: FuncId,
    /// The walk's view; `None` where the walk cannot handle the function (it is
    /// then never merged).
    view: Option<FunctionView>,
    /// Its signature (a thunk needs it).
    pub(super) signature: Signature,
    /// Its machine code.
    pub(super) code: Vec<u8>,
    /// The alignment its code needs.
    pub(super) alignment: u64,
    /// Its relocations, as the inner module would have received them.
    pub(super) relocs: Vec<ModuleReloc>,
}

/// Phase 1: walks `ctx.func` (function `id`, whose callees `names` resolves),
/// then compiles it for `isa`, leaving the compiled code in `ctx`, and returns
/// what the pass and the finish need.
pub(super) fn record(
    id: FuncId,
    ctx: &mut Context,
    ctrl_plane: &mut ControlPlane,
    isa: &dyn TargetIsa,
    names: &DeclaredFunctions<'_>,
    walk: WalkOptions,
    scratch: &mut WalkScratch,
) -> ModuleResult<CompiledFunction> {
    // Before compiling: the optimizer rewrites `ctx.func` in place.
    let view = hash_function(&ctx.func, names, walk, scratch)
        .and_then(|hashed| {
            let encoding = encode_function(&ctx.func, names, walk, scratch)?;
            Ok(FunctionView {
                hash: hashed.hash,
                encoding,
            })
        })
        .ok();
    let signature = ctx.func.signature.clone();
    ctx.compile(isa, ctrl_plane)?;
    let Some(compiled) = ctx.compiled_code() else {
        return Err(ModuleError::Backend(anyhow::anyhow!(
            "Cranelift compiled {id} but kept no code"
        )));
    };
    let alignment = u64::from(compiled.buffer.alignment);
    let code = compiled.code_buffer().to_vec();
    let relocs = compiled
        .buffer
        .relocs()
        .iter()
        .map(|reloc| ModuleReloc::from_mach_reloc(reloc, &ctx.func, id))
        .collect();
    Ok(CompiledFunction {
        id,
        view,
        signature,
        code,
        alignment,
        relocs,
    })
}

/// Phase 2: the partition and the plan over the recorded views, one node per
/// declared function (`FuncIndex` N is `FuncId` N); the views are consumed.
/// `address_taken_in_data` are the functions whose address a data object holds.
pub(super) fn plan_recorded(
    recorded: &mut [CompiledFunction],
    names: &DeclaredFunctions<'_>,
    address_taken_in_data: impl IntoIterator<Item = FuncId>,
    mode: MergeMode,
) -> MergePlan {
    let mut encoded = EncodedFunctions {
        len: names.count,
        ..EncodedFunctions::default()
    };
    for id in address_taken_in_data {
        encoded.address_taken[FuncIndex::new(id.as_u32() as usize)] = true;
    }
    for function in recorded {
        let f = FuncIndex::new(function.id.as_u32() as usize);
        let Some(view) = function.view.take() else {
            continue;
        };
        for &taken in view.encoding.address_taken() {
            encoded.address_taken[taken] = true;
        }
        // A callee written as a class reference was not preemptible when the
        // function was defined; if its linkage changed since, the function is not
        // compared (conservatively: preemptible code may be replaced).
        let callee_changed = view.encoding.callee_positions().iter().any(|&p| {
            let callee = view.encoding.tokens()[p as usize] as usize;
            names.linkage(FuncIndex::new(callee)) == Linkage::Preemptible
        });
        if callee_changed {
            continue;
        }
        encoded.supported[f] = true;
        encoded.hashes[f] = view.hash;
        encoded.instruction_counts[f] = view.encoding.instructions();
        encoded.encodings[f] = Some(view.encoding);
    }
    let partition = partition(&encoded);
    plan(names, &partition, &encoded.address_taken, mode)
}

/// Whether `kind` is a direct call (or tail call) of its target: one that may go
/// to a thunk's kept function instead of the thunk.
fn is_direct_call(kind: Reloc) -> bool {
    matches!(
        kind,
        Reloc::X86CallPCRel4
            | Reloc::X86CallPLTRel4
            | Reloc::Arm64Call
            | Reloc::RiscvCallPlt
            | Reloc::S390xPLTRel32Dbl
    )
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

    /// `relocs` with their targets retargeted.
    pub(super) fn retargeted(&self, relocs: &[ModuleReloc]) -> Vec<ModuleReloc> {
        relocs
            .iter()
            .map(|reloc| {
                let mut reloc = reloc.clone();
                if let ModuleRelocTarget::User {
                    namespace: 0,
                    index,
                } = &mut reloc.name
                {
                    if let Some(&kept) = self.all.get(index) {
                        *index = kept;
                    } else if is_direct_call(reloc.kind)
                        && let Some(&kept) = self.calls.get(index)
                    {
                        *index = kept;
                    }
                }
                reloc
            })
            .collect()
    }
}
