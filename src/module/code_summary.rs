//! Separate compilation in compile-at-define mode
//! ([`CompileMode::AtDefine`](super::CompileMode::AtDefine)): the module's summary
//! written from the machine code it kept, and the decisions of a whole-program
//! plan resolved against that code. No IR is needed.
//!
//! The summary describes the module after its own merge (`plan_recorded`), as
//! the IR summary does: a kept function's tokens are its alignment, code size,
//! the SHA-256 of its code bytes and metadata ([`content_digest`]), and its
//! relocations (retargeted as the finish will write them); a relocation to a symbol is a *reference* (an index into
//! [`Summary::symbols`]), by class where `target_match_across_modules` says a
//! call may reach any member of the target's class, by exact symbol otherwise
//! (data, unknown names, a preemptible target, an address in any mode: across
//! modules a merged function whose address is taken keeps its own). A thunk of the
//! module's own merge is summarized as standing for its kept function
//! (`same_as`), an alias likewise after the functions, an erased duplicate not at
//! all. The summary's [`SummarySource`] names the target and its settings, so
//! that machine code is never planned together with IR or with code of another
//! target.
//!
//! Stage 3 summarizes the module again as it is and checks the decisions against
//! that summary with the checker the IR appliers use
//! ([`crate::separate::check::check_summary`]).

use super::compiled::{CompiledFunction, DeclaredFunctions, Retargets, function_target};
use super::cross_module::{CrossAction, ResolvedDecision, ResolvedDecisions};
use super::decisions::{DeclaredNames, decision_error, resolve_checked};
use crate::identical::plan::{MergeAction, MergeMode, MergePlan};
use crate::identical::tokens::{NAME_EXACT, NAME_MODULE};
use crate::ir::fnv::Fnv1a;
use crate::ir::{
    FuncIndex, Linkage, ModuleFunctions, Reference, TargetMatch, target_match_across_modules,
};
use crate::separate::check::check_summary;
use crate::separate::program::ModuleDecisions;
use crate::separate::summary::{FunctionSummary, Summary, SymbolNames, SymbolRef, Visibility};
use crate::separate::vocabulary::SummarySource;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::UserFuncName;
use cranelift_codegen::isa::TargetIsa;
use cranelift_module::{FuncId, Module, ModuleDeclarations, ModuleRelocTarget, ModuleResult};
use sha2::{Digest, Sha256};
use std::collections::{HashMap, HashSet};

// The kinds of relocation target, as the token before a target's tokens.

/// A function of the module or an import: a reference follows.
const TARGET_FUNCTION: u64 = 0;
/// An offset into a function: the offset, then a reference.
const TARGET_FUNCTION_OFFSET: u64 = 1;
/// Any other user name (data): an exact reference follows.
const TARGET_USER: u64 = 2;
/// A libcall: its number follows.
const TARGET_LIBCALL: u64 = 3;
/// A symbol the linker knows: its number follows.
const TARGET_KNOWN: u64 = 4;

/// What the summary and the finish need of a module compiled at define, besides
/// the inner module's declarations.
pub(super) struct CodeModule<'a> {
    /// The compiled functions, in definition order.
    pub(super) recorded: &'a [CompiledFunction],
    /// How many functions are declared (`FuncId`s below it are valid).
    pub(super) count: usize,
    /// The module's own merge.
    pub(super) plan: &'a MergePlan,
    /// How the own merge retargets kept code.
    pub(super) retargets: &'a Retargets,
    /// Functions whose address data or byte-defined code holds, sorted.
    pub(super) address_taken_elsewhere: Vec<FuncId>,
    /// Every function data or byte-defined code refers to, sorted.
    pub(super) held_back_targets: Vec<FuncId>,
    /// The named locals the module defined (`namespace`, `index`), erased ones
    /// too: the summary lists them so that no representative of another module is
    /// named by one.
    pub(super) locals: Vec<(u32, u32)>,
    /// The merge mode.
    pub(super) mode: MergeMode,
}

/// A module's summary from machine code, with the `FuncId` of each of its
/// functions that is no alias (those come first, in definition order).
pub(super) struct CodeSummary {
    /// The summary.
    pub(super) summary: Summary,
    /// The `FuncId` of each of the summary's first functions.
    pub(super) ids: Vec<FuncId>,
}

/// The symbol table being built: each symbol once, by `FuncId` or user name.
struct Symbols<'a> {
    names: DeclaredNames<'a>,
    symbols: Vec<SymbolRef>,
    index: HashMap<(u32, u32), u32>,
}

impl Symbols<'_> {
    /// The index of user name `namespace:index` in the table.
    fn intern(&mut self, namespace: u32, index: u32) -> u32 {
        let Self {
            names,
            symbols,
            index: table,
        } = self;
        *table.entry((namespace, index)).or_insert_with(|| {
            symbols.push(names.symbol(&UserFuncName::user(namespace, index), None));
            (symbols.len() - 1) as u32
        })
    }
}

/// The SHA-256 of a function's code bytes and metadata, as four tokens: what the
/// plan compares of them. Equal digests stand for equal bytes as Cranelift's
/// incremental cache (and compile-once) takes equal SHA-256 keys for equal
/// stencils; the summary then holds 32 bytes per function instead of its code.
fn content_digest(function: &CompiledFunction) -> [u64; 4] {
    let metadata = &function.metadata;
    let mut digest = Sha256::new();
    let mut field = |bytes: &[u8]| {
        digest.update((bytes.len() as u64).to_le_bytes());
        digest.update(bytes);
    };
    field(&function.code);
    field(metadata.rest.as_bytes());
    digest.update((metadata.traps.len() as u64).to_le_bytes());
    for (offset, code) in &metadata.traps {
        digest.update(offset.to_le_bytes());
        digest.update(code.as_raw().get().to_le_bytes());
    }
    let bytes: [u8; 32] = digest.finalize().into();
    std::array::from_fn(|i| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&bytes[i * 8..i * 8 + 8]);
        u64::from_le_bytes(word)
    })
}

/// The tokens of kept function `function` (its relocations retargeted as the
/// finish writes them), the positions of its references, and the functions whose
/// address its code takes.
fn tokens_of(
    function: &CompiledFunction,
    module: &CodeModule<'_>,
    names: &DeclaredFunctions<'_>,
    symbols: &mut Symbols<'_>,
) -> (Vec<u64>, Vec<u32>, Vec<FuncId>) {
    let mut tokens = vec![function.alignment, function.code.len() as u64];
    tokens.extend(content_digest(function));
    let kinds = function.references();
    let relocs = module.retargets.retargeted(&function.relocs, &kinds);
    tokens.push(relocs.len() as u64);
    let mut references = Vec::new();
    let mut taken = Vec::new();
    // How each uses its target is asked of the target the IR named (the own
    // merge may have retargeted it).
    for (reloc, &reference) in relocs.iter().zip(&kinds) {
        tokens.extend([
            u64::from(reloc.offset),
            reloc.kind as u64,
            reloc.addend as u64,
        ]);
        if let Some((target, offset)) = function_target(&reloc.name) {
            if reference == Reference::Address {
                taken.push(target);
            }
            match offset {
                Some(offset) => tokens.extend([TARGET_FUNCTION_OFFSET, u64::from(offset)]),
                None => tokens.push(TARGET_FUNCTION),
            }
            let index = target.as_u32() as usize;
            let exact = index >= names.count
                || target_match_across_modules(reference, names.linkage(FuncIndex::new(index)))
                    == TargetMatch::Exact;
            tokens.push(if exact { NAME_EXACT } else { NAME_MODULE });
            references.push(tokens.len() as u32);
            tokens.push(u64::from(symbols.intern(0, target.as_u32())));
            continue;
        }
        match reloc.name {
            ModuleRelocTarget::User { namespace, index } => {
                tokens.extend([TARGET_USER, NAME_EXACT]);
                references.push(tokens.len() as u32);
                tokens.push(u64::from(symbols.intern(namespace, index)));
            }
            ModuleRelocTarget::LibCall(libcall) => {
                tokens.extend([TARGET_LIBCALL, libcall as u64]);
            }
            ModuleRelocTarget::KnownSymbol(known) => {
                tokens.extend([TARGET_KNOWN, known as u64]);
            }
            // `function_target` took every function offset.
            ModuleRelocTarget::FunctionOffset(..) => {}
        }
    }
    // The summary holds every kept function's tokens at once, about as many bytes
    // as the code: without the slack of the pushes.
    tokens.shrink_to_fit();
    references.shrink_to_fit();
    (tokens, references, taken)
}

/// A hash of `tokens` with the references left out (equal functions must hash
/// alike whichever members of a class they refer to).
fn hash_of(tokens: &[u64], references: &[u32]) -> u64 {
    let mut references = references.iter().peekable();
    let mut hash = Fnv1a::new();
    for (position, &token) in tokens.iter().enumerate() {
        if references.next_if(|&&p| p as usize == position).is_none() {
            hash = hash.word(token);
        }
    }
    hash.finish()
}

/// The summary of `module` (named `module_name`, its code compiled for `isa`), its
/// symbols named by their `declarations`.
pub(super) fn summarize_code(
    module: &CodeModule<'_>,
    declarations: &ModuleDeclarations,
    isa: &dyn TargetIsa,
    module_name: &str,
) -> CodeSummary {
    let names = &DeclaredFunctions::new(declarations, module.count, module.recorded);
    let mut symbols = Symbols {
        names: DeclaredNames(names.declarations),
        symbols: Vec::new(),
        index: HashMap::new(),
    };
    let decision_of = module.plan.decision_map();
    let declared = |id: FuncId| {
        let linkage = names.linkage(FuncIndex::new(id.as_u32() as usize));
        let symbol = DeclaredNames(names.declarations).symbol(
            &UserFuncName::user(0, id.as_u32()),
            Some(linkage == Linkage::Local),
        );
        (symbol.name, Visibility::of(linkage))
    };
    let mut taken: HashSet<FuncId> = HashSet::new();
    for &id in &module.address_taken_elsewhere {
        taken.insert(id);
        // Data naming an erased or aliased duplicate names the kept function.
        if let Some(kept) = module.retargets.codeless(id.as_u32()) {
            taken.insert(FuncId::from_u32(kept));
        }
    }
    let mut functions = Vec::new();
    let mut ids = Vec::new();
    let mut aliases = Vec::new();
    for function in module.recorded {
        let index = FuncIndex::new(function.id.as_u32() as usize);
        let (name, visibility) = declared(function.id);
        let mut summary = FunctionSummary {
            name,
            visibility,
            address_taken: false,
            same_as: None,
            supported: true,
            reads_machine_state: function.reads_machine_state,
            hash: 0,
            instructions: 0,
            tokens: Vec::new(),
            references: Vec::new(),
        };
        match decision_of[index].map(|d| (d.action, d.into)) {
            Some((MergeAction::Erase, _)) => continue,
            Some((MergeAction::Alias, into)) => {
                aliases.push((function.id, into));
                continue;
            }
            Some((MergeAction::Thunk, into)) => {
                summary.same_as = Some(symbols.intern(0, into.index() as u32));
            }
            None => {
                let (tokens, references, address_taken) =
                    tokens_of(function, module, names, &mut symbols);
                taken.extend(address_taken);
                summary.hash = hash_of(&tokens, &references);
                summary.instructions = u32::try_from(function.code.len()).unwrap_or(u32::MAX);
                summary.tokens = tokens;
                summary.references = references;
            }
        }
        functions.push(summary);
        ids.push(function.id);
    }
    for (summary, id) in functions.iter_mut().zip(&ids) {
        summary.address_taken = taken.contains(id);
    }
    for (id, into) in aliases {
        let (name, visibility) = declared(id);
        let kept = symbols.intern(0, into.index() as u32);
        functions.push(FunctionSummary::standing_for(name, visibility, kept));
    }
    // Data and byte-defined code refer to these too: the plan must know the module
    // refers to them (a removed function's references are redirected here).
    for &id in &module.held_back_targets {
        symbols.intern(0, id.as_u32());
    }
    // In this module these names are its own: no representative of another
    // module may be named by one (an erased local is in no function's summary).
    for &(namespace, index) in &module.locals {
        symbols.intern(namespace, index);
    }
    let mut taken: Vec<FuncId> = taken.into_iter().collect();
    taken.sort_unstable();
    let addresses_taken = taken
        .into_iter()
        .map(|id| symbols.intern(0, id.as_u32()))
        .collect();
    CodeSummary {
        summary: Summary {
            module: module_name.to_string(),
            source: SummarySource::machine_code(isa),
            addresses_significant: module.mode == MergeMode::Safe,
            symbols: symbols.symbols,
            functions,
            addresses_taken,
        },
        ids,
    }
}

/// Checks `decisions` against `module` as it is (summarized again, with the checks
/// of [`check_summary`]; a [`crate::separate::DecisionError`] is returned inside
/// `ModuleError::Backend`) and resolves them in `inner`: per function (indexed by
/// `FuncId`, `count` of them) its decision, and the redirected imports. A
/// function that reads machine state is never made a thunk: where the finish
/// cannot remove it (`allow_redirect` false), it stays as it is.
pub(super) fn resolve_code_decisions<M: Module>(
    inner: &mut M,
    module: &CodeModule<'_>,
    decisions: &ModuleDecisions,
    allow_redirect: bool,
) -> ModuleResult<ResolvedDecisions> {
    let count = module.count;
    let declarations = inner.declarations();
    let CodeSummary { summary, ids } =
        summarize_code(module, declarations, inner.isa(), &decisions.module);
    let reads: HashSet<FuncId> = module
        .recorded
        .iter()
        .filter(|f| f.reads_machine_state)
        .map(|f| f.id)
        .collect();
    let names = DeclaredNames(declarations);
    // Every name the module's code refers to is a symbol of its summary.
    let referenced =
        |_: &()| -> HashSet<String> { summary.symbols.iter().map(|s| s.name.clone()).collect() };
    let checked = check_summary(&summary, ids.len(), (), decisions, &names, referenced)
        .map_err(decision_error)?;
    let (per_id, calls, qualified) = resolve_checked(
        inner,
        &checked,
        &decisions.module,
        |f| ids.get(f.index()).copied(),
        |inner: &M, f| {
            let id = ids[f.index()];
            inner.declarations().get_function_decl(id).signature.clone()
        },
        allow_redirect,
    )?;
    let mut per_function: Vec<Option<ResolvedDecision>> = vec![None; count];
    for (id, decision) in per_id {
        if decision.action == CrossAction::Thunk && reads.contains(&id) {
            continue;
        }
        if let Some(slot) = per_function.get_mut(id.as_u32() as usize) {
            *slot = Some(decision);
        }
    }
    Ok(ResolvedDecisions {
        per_function,
        calls,
        qualified,
    })
}

/// How the decisions retarget the relocations of this module's code, after the
/// module's own merge retargeted them: every reference to a removed or promoted
/// function (of this module, or an import another module removed) goes to its
/// representative, and every direct call of a new thunk too.
pub(super) fn decision_retargets(resolved: &ResolvedDecisions) -> Retargets {
    let own = resolved
        .per_function
        .iter()
        .enumerate()
        .filter_map(|(i, r)| Some((i as u32, (*r)?.target.as_u32(), (*r)?.action)));
    let imports = resolved
        .calls
        .iter()
        .map(|&(import, target, action)| (import.as_u32(), target.as_u32(), action));
    let (mut all, mut calls) = (HashMap::new(), HashMap::new());
    for (function, target, action) in own.chain(imports) {
        match action {
            CrossAction::Thunk => calls.insert(function, target),
            CrossAction::Redirect | CrossAction::Promote => all.insert(function, target),
        };
    }
    Retargets::from_maps(all, calls)
}
