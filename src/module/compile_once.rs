//! Compile-once ([`ModuleMergeOptions::compile_once`](super::ModuleMergeOptions::compile_once)):
//! a function equal to one defined before through the same
//! [`MergingModule`](super::MergingModule) is not compiled again.
//!
//! How a define finds an equal function, cheapest first:
//!
//! 1. **Key.** Every function gets a cheap key: its signature and the *table key*
//!    of its instructions (`fingerprint::table_key`, a sum of a word per entry of
//!    the instruction table, about a nanosecond per instruction), neither of
//!    which reads a name, a value number or the block order. A function whose key
//!    no function had before is compiled plainly; only the key is kept, unless
//!    the policy below stores it.
//! 2. **Proof.** A function whose key another has is *encoded*: the comparator's
//!    walk (`identical::encode`, the stream the pass proves functions equal by)
//!    with every user name written by reference, numbered in order of first use
//!    in the walk ([`ReuseSink`]), and each instruction's relative source
//!    location. Two functions with equal streams are equal but for value numbers,
//!    block order and which names their references point to: the first-use order
//!    pairs the references of one with those of the other.
//! 3. **Reuse.** With a stored function of equal stream, a define
//!    - by default ([`ModuleMergeOptions::compile_duplicates`](super::ModuleMergeOptions::compile_duplicates))
//!      gets the stored function's compiled stencil, finished with its own names:
//!      its name references are renumbered to the stored function's ([`remap`])
//!      and `Context::compile_with_cache` is asked with a one-block function
//!      swapped in for the key (so Cranelift's SHA-256 key costs nothing) and a
//!      store that hands over the stored stencil ([`OneStencil`]), which
//!      `try_finish_recompile` finishes with the define's own parameters (base
//!      source location; relocations name references, resolved through the
//!      define's own names). The code is the stored function's compile, not
//!      necessarily what a fresh compile of this function gives (Cranelift's
//!      output depends on value numbers and block order): equivalent code.
//!    - without compiling duplicates, where the names are the same too (so the
//!      machine code and its relocations would be the same), is not compiled at
//!      all: the wrapper records a copy of the stored function's machine code
//!      under this function's id, and `ctx.compiled_code()` is `None`.
//!
//! **When to store.** Storing a function costs its walk and, to hand its stencil
//! over later, a serialization of its stencil and the deserialization that
//! fills `ctx.compiled_code()` ([`CompileOnce::compile_stored`]): about 5% of
//! its compile; it pays only if an equal function follows. Two counts, kept as
//! the module goes, estimate how likely that is: the share of defines whose key
//! repeats an earlier one, and the share of the comparisons with a stored
//! function of the same key that proved the two equal (a key also repeats for
//! functions that differ in what it leaves out, operands and names). While
//! their product (the comparisons' share taken as (equal + 1) / (compared + 1))
//! is at least 1 in [`STORE_FIRST_EVERY`] (1 in [`STORE_FIRST_EVERY_UNCOMPILED`]
//! when duplicates are not compiled, where storing costs only the walk), every
//! new key's function is stored, so the first of a pair already serves the
//! second; below that, a function is stored only when its key repeats (the
//! second of a key serves the third on), and a program with rare duplicates pays
//! the key alone. docs/module.md has the measurements behind the thresholds.

use crate::identical::encode::{TokenSink, WalkOptions, WalkScratch, walk};
use crate::identical::fingerprint::table_key;
use crate::identical::tokens::NAME_BY_REFERENCE;
use crate::ir::{FunctionSet, reads_machine_state};
use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::incremental_cache::{CacheKvStore, serialize_compiled};
use cranelift_codegen::ir::function::FunctionParameters;
use cranelift_codegen::ir::{
    ExternalName, Function, GlobalValueData, Inst, InstBuilder, SourceLoc, UserExternalName,
    UserExternalNameRef,
};
use cranelift_codegen::isa::TargetIsa;
use cranelift_module::{FuncId, ModuleError, ModuleResult};
use rustc_hash::{FxBuildHasher, FxHasher};
use std::borrow::Cow;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};

/// While at least one define in this many is estimated to repeat an earlier
/// function, every new key's function is stored with its stencil.
pub(super) const STORE_FIRST_EVERY: u64 = 12;

/// The same when duplicates are not compiled (storing is only the walk).
pub(super) const STORE_FIRST_EVERY_UNCOMPILED: u64 = 40;

/// The token stream of a function for compile-once: the comparator's walk with
/// user names by reference (numbered by first use) and the relative source
/// location of each instruction, LEB128-encoded (an injective, prefix-free
/// encoding: equal bytes are equal tokens).
struct ReuseSink<'a> {
    /// The function walked (for its source locations).
    func: &'a Function,
    /// The stream.
    bytes: Vec<u8>,
    /// Tokens written (the walk's positions).
    tokens: u32,
    /// Each name reference's number plus one (0: not used yet).
    serials: SecondaryMap<UserExternalNameRef, u32>,
    /// The name references in order of first use.
    order: Vec<UserExternalNameRef>,
}

impl TokenSink for ReuseSink<'_> {
    fn push(&mut self, mut token: u64) {
        self.tokens += 1;
        loop {
            let low = (token & 0x7f) as u8;
            token >>= 7;
            if token == 0 {
                self.bytes.push(low);
                return;
            }
            self.bytes.push(low | 0x80);
        }
    }

    fn push_callee(&mut self, index: u64) {
        // Only a walk with module functions calls it; this one has none.
        self.push(index);
    }

    fn position(&self) -> u32 {
        self.tokens
    }

    fn note_inst(&mut self, inst: Inst) {
        // Source locations are not behaviour, but reused code carries the stored
        // function's: they must be the same for its line table to be this one's.
        // Plus one, so that the common "none" (all ones) is one byte.
        let loc = self.func.stencil.srclocs[inst].expand(SourceLoc::new(0));
        self.push(u64::from(loc.bits().wrapping_add(1)));
    }

    fn user_name_by_reference(&mut self, name: UserExternalNameRef) -> bool {
        let serial = match self.serials[name] {
            0 => {
                self.order.push(name);
                let serial = self.order.len() as u32;
                self.serials[name] = serial;
                serial
            }
            serial => serial,
        };
        self.push(NAME_BY_REFERENCE);
        self.push(u64::from(serial));
        true
    }
}

/// A function stored for reuse.
struct Stored {
    /// The function.
    id: FuncId,
    /// Its stream ([`ReuseSink`]).
    stream: Box<[u8]>,
    /// Its name references in order of first use, and the names they point to.
    refs: Box<[UserExternalNameRef]>,
    names: Box<[UserExternalName]>,
    /// Its serialized stencil (compiling duplicates only).
    stencil: Option<Box<[u8]>>,
    /// Whether its optimized IR reads machine state.
    reads_machine_state: bool,
    /// The index of its machine code among the wrapper's compiled functions.
    recorded: usize,
}

/// What a define through compile-once did.
pub(super) enum Outcome {
    /// Compiled (freshly, or with a stored function's stencil), code in the
    /// context; whether the optimized IR reads machine state.
    Compiled {
        /// Whether the optimized IR reads machine state.
        reads_machine_state: bool,
    },
    /// Not compiled: the function is equal, names and all, to the one of this
    /// index among the wrapper's compiled functions.
    SameAs(usize),
}

/// A [`CacheKvStore`] that holds one serialized stencil and gives it for any key:
/// the key `compile_with_cache` asks it with is the one of the small function
/// swapped in, the stencil is the one chosen by the proof.
struct OneStencil<'a>(&'a [u8]);

impl CacheKvStore for OneStencil<'_> {
    fn get(&self, _key: &[u8]) -> Option<Cow<'_, [u8]>> {
        Some(Cow::Borrowed(self.0))
    }

    fn insert(&mut self, _key: &[u8], _val: Vec<u8>) {}
}

/// Compile-once's state for one module.
pub(super) struct CompileOnce {
    /// Whether duplicates are compiled (with a stored stencil) or not at all.
    compile_duplicates: bool,
    /// By key: the stored functions of that key (empty: seen, none stored).
    keys: HashMap<u64, Vec<u32>, FxBuildHasher>,
    stored: Vec<Stored>,
    /// Defines so far, and how many of them repeated an earlier key.
    defines: u32,
    repeats: u32,
    /// Defines compared with stored functions of their key, and how many of
    /// them were equal to one.
    compared: u32,
    equal: u32,
    /// The walk's tables, and the (empty) module it reads names against.
    scratch: WalkScratch,
    /// The last stream written ([`ReuseSink`]), its name references' numbers
    /// and its name references in order of first use: buffers kept between
    /// defines.
    stream: Vec<u8>,
    serials: SecondaryMap<UserExternalNameRef, u32>,
    order: Vec<UserExternalNameRef>,
    no_module: FunctionSet,
    /// The stencil swapped in while `compile_with_cache` takes its key: a function
    /// of one block that returns.
    small: Function,
    /// Defines that reused a stored function's compile: (function, stored one).
    pub(super) reused: Vec<(FuncId, FuncId)>,
    /// Defines not compiled: (function, the function whose code stands for it).
    pub(super) not_compiled: Vec<(FuncId, FuncId)>,
}

impl CompileOnce {
    /// Compile-once for one module, compiling duplicates (with a stored stencil)
    /// or not.
    pub(super) fn new(compile_duplicates: bool) -> Self {
        let mut small = Function::new();
        let block = small.dfg.make_block();
        let mut cursor = FuncCursor::new(&mut small);
        cursor.insert_block(block);
        cursor.ins().return_(&[]);
        Self {
            compile_duplicates,
            keys: HashMap::default(),
            stored: Vec::new(),
            defines: 0,
            repeats: 0,
            compared: 0,
            equal: 0,
            scratch: WalkScratch::default(),
            stream: Vec::new(),
            serials: SecondaryMap::new(),
            order: Vec::new(),
            no_module: FunctionSet::new(),
            small,
            reused: Vec::new(),
            not_compiled: Vec::new(),
        }
    }

    /// Compiles `ctx.func` (function `id`, whose machine code will be the
    /// wrapper's compiled function `recorded`) as [`Context::compile`] would, or
    /// reuses an equal stored function's compile or code (module docs).
    pub(super) fn define(
        &mut self,
        id: FuncId,
        recorded: usize,
        ctx: &mut Context,
        ctrl_plane: &mut ControlPlane,
        isa: &dyn TargetIsa,
    ) -> ModuleResult<Outcome> {
        if !reusable(ctx, isa) {
            return compile_plainly(ctx, ctrl_plane, isa);
        }
        let mut hasher = FxHasher::default();
        ctx.func.signature.hash(&mut hasher);
        table_key(&ctx.func).hash(&mut hasher);
        let key = hasher.finish();
        let every = if self.compile_duplicates {
            STORE_FIRST_EVERY
        } else {
            STORE_FIRST_EVERY_UNCOMPILED
        };
        // repeats / defines * (equal + 1) / (compared + 1) >= 1 / every.
        let store_first = u64::from(self.repeats) * u64::from(self.equal + 1) * every
            >= u64::from(self.defines) * u64::from(self.compared + 1);
        self.defines += 1;
        let candidates = match self.keys.get(&key) {
            Some(stored) => {
                self.repeats += 1;
                stored.clone()
            }
            None if store_first => Vec::new(),
            None => {
                self.keys.insert(key, Vec::new());
                return compile_plainly(ctx, ctrl_plane, isa);
            }
        };
        if !self.encode(&ctx.func) {
            return compile_plainly(ctx, ctrl_plane, isa);
        }
        let (stream, order) = (&self.stream, &self.order);
        if !candidates.is_empty() {
            self.compared += 1;
            if candidates
                .iter()
                .any(|&index| *self.stored[index as usize].stream == **stream)
            {
                self.equal += 1;
            }
        }
        for &index in &candidates {
            let stored = &self.stored[index as usize];
            if *stored.stream != **stream {
                continue;
            }
            if !self.compile_duplicates {
                let same_names = stored
                    .names
                    .iter()
                    .zip(order)
                    .all(|(name, &r)| ctx.func.params.user_named_funcs().get(r) == Some(name));
                if same_names {
                    self.not_compiled.push((id, stored.id));
                    clear_compiled_code(ctx);
                    return Ok(Outcome::SameAs(stored.recorded));
                }
            } else if let Some(stencil) = &stored.stencil
                && finish_stored(
                    &mut self.small,
                    ctx,
                    ctrl_plane,
                    isa,
                    stencil,
                    &stored.refs,
                    order,
                )
            {
                let reads_machine_state = stored.reads_machine_state;
                self.reused.push((id, stored.id));
                return Ok(Outcome::Compiled {
                    reads_machine_state,
                });
            }
        }
        // No stored function is equal: compile, and store this one.
        let (stencil, reads) = if self.compile_duplicates {
            self.compile_stored(ctx, ctrl_plane, isa)?
        } else {
            let Outcome::Compiled {
                reads_machine_state,
            } = compile_plainly(ctx, ctrl_plane, isa)?
            else {
                unreachable!("a plain compile compiles")
            };
            (None, reads_machine_state)
        };
        let names = self
            .order
            .iter()
            .map(|&r| ctx.func.params.user_named_funcs()[r].clone())
            .collect();
        self.keys
            .entry(key)
            .or_default()
            .push(self.stored.len() as u32);
        self.stored.push(Stored {
            id,
            stream: self.stream.as_slice().into(),
            refs: self.order.as_slice().into(),
            names,
            stencil,
            reads_machine_state: reads,
            recorded,
        });
        Ok(Outcome::Compiled {
            reads_machine_state: reads,
        })
    }

    /// Writes the stream of `func` and its name references in order of first
    /// use into [`Self::stream`] and [`Self::order`]; false if the walk cannot
    /// encode it.
    fn encode(&mut self, func: &Function) -> bool {
        let mut bytes = std::mem::take(&mut self.stream);
        bytes.clear();
        // Whether value labels are collected (the table is empty, `reusable`):
        // it decides whether the compile computes their ranges.
        bytes.push(u8::from(func.dfg.values_labels.is_some()));
        // About ten tokens an instruction, most of one byte: no regrowth.
        bytes.reserve(16 * func.dfg.num_insts());
        let mut serials = std::mem::take(&mut self.serials);
        serials.clear();
        let mut order = std::mem::take(&mut self.order);
        order.clear();
        let sink = ReuseSink {
            func,
            bytes,
            tokens: 0,
            serials,
            order,
        };
        let walked = walk(
            func,
            &self.no_module,
            WalkOptions::default(),
            &mut self.scratch,
            sink,
        );
        let (sink, encoded) = match walked {
            Ok((sink, _, _)) => (sink, true),
            Err(_) => return false,
        };
        self.stream = sink.bytes;
        self.serials = sink.serials;
        self.order = sink.order;
        encoded
    }

    /// Compiles `ctx.func` to a stencil, serializes it for later defines, and
    /// fills `ctx.compiled_code()` with it; returns the serialized stencil (if it
    /// serializes) and whether the optimized IR reads machine state.
    fn compile_stored(
        &mut self,
        ctx: &mut Context,
        ctrl_plane: &mut ControlPlane,
        isa: &dyn TargetIsa,
    ) -> ModuleResult<(Option<Box<[u8]>>, bool)> {
        let stencil = ctx
            .compile_stencil(isa, ctrl_plane)
            .map_err(ModuleError::Compilation)?;
        let reads = reads_machine_state(&ctx.func);
        let (_, serialized) = serialize_compiled(stencil);
        if let Ok(blob) = serialized
            && fill(&mut self.small, ctx, ctrl_plane, isa, &blob)
        {
            return Ok((Some(blob.into_boxed_slice()), reads));
        }
        // Unreachable in practice: compile the (optimized) function again.
        ctx.compile(isa, ctrl_plane)?;
        Ok((None, reads))
    }

    /// The memory of the stored functions goes back (no function is defined any
    /// more); what was reused stays for the report.
    pub(super) fn release(&mut self) {
        self.keys = HashMap::default();
        self.stored = Vec::new();
    }
}

/// Fills `ctx.compiled_code()` with `stencil` (a stored function's, whose
/// name references in order of first use are `stored_refs`) finished with
/// the parameters of `ctx.func` (whose references in that order are `refs`),
/// which it renumbers to the stored function's. Returns false, leaving
/// `ctx.func` as it was, if it cannot (then the caller compiles).
#[allow(clippy::too_many_arguments)]
fn finish_stored(
    small: &mut Function,
    ctx: &mut Context,
    ctrl_plane: &mut ControlPlane,
    isa: &dyn TargetIsa,
    stencil: &[u8],
    stored_refs: &[UserExternalNameRef],
    refs: &[UserExternalNameRef],
) -> bool {
    let renumbered = if refs == stored_refs {
        None
    } else {
        match remap(&ctx.func, refs, stored_refs) {
            Some(remapped) => Some(remapped),
            None => return false,
        }
    };
    if !fill(small, ctx, ctrl_plane, isa, stencil) {
        return false;
    }
    // Every name the code refers to must be one the proof paired.
    let paired = ctx.compiled_code().is_some_and(|code| {
        code.buffer
            .relocs()
            .iter()
            .all(|reloc| match &reloc.target {
                cranelift_codegen::FinalizedRelocTarget::ExternalName(ExternalName::User(r)) => {
                    stored_refs.contains(r)
                }
                _ => true,
            })
    });
    if !paired {
        clear_compiled_code(ctx);
        return false;
    }
    if let Some((params, map)) = renumbered {
        rename_references(&mut ctx.func, &map);
        ctx.func.params = params;
    }
    true
}

/// Sets `ctx.compiled_code()` to `stencil` finished with `ctx.func`'s
/// parameters, through `compile_with_cache` with the small function's stencil
/// swapped in for the key; false if Cranelift did not take it (then the code
/// it compiled, the small function's, is cleared).
fn fill(
    small: &mut Function,
    ctx: &mut Context,
    ctrl_plane: &mut ControlPlane,
    isa: &dyn TargetIsa,
    stencil: &[u8],
) -> bool {
    std::mem::swap(&mut ctx.func.stencil, &mut small.stencil);
    let reused = matches!(
        ctx.compile_with_cache(isa, &mut OneStencil(stencil), ctrl_plane),
        Ok((_, true))
    );
    std::mem::swap(&mut ctx.func.stencil, &mut small.stencil);
    if reused {
        return true;
    }
    clear_compiled_code(ctx);
    false
}

/// Compiles `ctx.func` with [`Context::compile`].
fn compile_plainly(
    ctx: &mut Context,
    ctrl_plane: &mut ControlPlane,
    isa: &dyn TargetIsa,
) -> ModuleResult<Outcome> {
    ctx.compile(isa, ctrl_plane)?;
    Ok(Outcome::Compiled {
        reads_machine_state: reads_machine_state(&ctx.func),
    })
}

/// Whether compile-once may reuse anything for `ctx`: not when it asks for the
/// disassembly (not in the stored stencil), under Cranelift's chaos mode (whose
/// control plane has state and changes the code; without it `ControlPlane` is
/// zero-sized), with value labels or debug tags (which the stream leaves out and
/// the compiled code carries; an empty table of value labels, which
/// rustc_codegen_cranelift asks for on every function, is one bit of the
/// stream), or when the ISA asks `compile_with_cache` to check
/// every reuse by compiling (it would compile the swapped-in function).
fn reusable(ctx: &Context, isa: &dyn TargetIsa) -> bool {
    !ctx.want_disasm
        && std::mem::size_of::<ControlPlane>() == 0
        && ctx
            .func
            .dfg
            .values_labels
            .as_ref()
            .is_none_or(|labels| labels.is_empty())
        && ctx.func.stencil.debug_tags.is_empty()
        && !isa.flags().enable_incremental_compilation_cache_checks()
}

/// Leaves `ctx` without compiled code, its function and settings as they were.
fn clear_compiled_code(ctx: &mut Context) {
    let func = std::mem::replace(&mut ctx.func, Function::new());
    let want_disasm = ctx.want_disasm;
    ctx.clear();
    ctx.func = func;
    ctx.want_disasm = want_disasm;
}

/// A renumbering of name references (every one of a function's table has one).
type Renumbering = SecondaryMap<UserExternalNameRef, Option<UserExternalNameRef>>;

/// Parameters for `func` whose name references are renumbered so that its
/// reference `refs[k]` becomes `to[k]` (its others take the free numbers), and
/// the renumbering; `None` if that leaves a number of `to` without a name or
/// `func`'s table names one function twice.
fn remap(
    func: &Function,
    refs: &[UserExternalNameRef],
    to: &[UserExternalNameRef],
) -> Option<(FunctionParameters, Renumbering)> {
    let table = func.params.user_named_funcs();
    let mut map = Renumbering::new();
    let len = to
        .iter()
        .map(|r| r.as_u32() as usize + 1)
        .max()
        .unwrap_or(0);
    let mut slots: Vec<Option<UserExternalNameRef>> = vec![None; len];
    for (&from, &into) in refs.iter().zip(to) {
        map[from] = Some(into);
        slots[into.as_u32() as usize] = Some(from);
    }
    let mut free = slots
        .iter()
        .enumerate()
        .filter(|(_, s)| s.is_none())
        .map(|(i, _)| i);
    let mut next = len;
    let mut unpaired = Vec::new();
    for (r, _) in table.iter() {
        if map[r].is_none() {
            unpaired.push(r);
        }
    }
    let mut placed: Vec<(usize, UserExternalNameRef)> = Vec::new();
    for r in unpaired {
        let slot = free.next().unwrap_or_else(|| {
            next += 1;
            next - 1
        });
        placed.push((slot, r));
    }
    for (slot, r) in placed {
        if slot >= slots.len() {
            slots.resize(slot + 1, None);
        }
        slots[slot] = Some(r);
        map[r] = Some(UserExternalNameRef::from_u32(slot as u32));
    }
    let mut params = FunctionParameters::new();
    if func.params.base_srcloc() != SourceLoc::default() {
        params.ensure_base_srcloc(func.params.base_srcloc());
    }
    for (slot, from) in slots.iter().enumerate() {
        let name = table.get((*from)?)?.clone();
        if params.ensure_user_func_name(name).as_u32() as usize != slot {
            return None;
        }
    }
    Some((params, map))
}

/// Renumbers the name references of `func`'s imported functions and symbol
/// global values by `map`.
fn rename_references(func: &mut Function, map: &Renumbering) {
    for data in func.stencil.dfg.ext_funcs.values_mut() {
        if let ExternalName::User(r) = &mut data.name {
            *r = map[*r].unwrap_or(*r);
        }
    }
    for data in func.stencil.global_values.values_mut() {
        if let GlobalValueData::Symbol {
            name: ExternalName::User(r),
            ..
        } = data
        {
            *r = map[*r].unwrap_or(*r);
        }
    }
}
