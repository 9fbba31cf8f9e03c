//! Prefetching: asking the CPU for the memory a walk over functions reads next.
//!
//! A walk over a module's functions reads each function's `Function` record and
//! the start of its arrays (instructions, layout, values, value lists) once. The
//! hardware prefetcher follows a stream within one array, not the pointers from
//! one function to the next, so in a module larger than the caches every
//! function starts with a run of misses, each waited for in turn. While one
//! function is walked, [`FunctionSet::map_walk`](super::FunctionSet::map_walk)
//! asks for the record of the function [`RECORD_AHEAD`] places further on and
//! for the start of the arrays of the one [`ARRAYS_AHEAD`] places on, whose
//! record was asked for two steps earlier, so that reading where its arrays are
//! does not wait either: the parts of each that the walk reads ([`Reads`]).
//!
//! This module holds the crate's only `unsafe` code: `_mm_prefetch` takes a raw
//! pointer. Every pointer given to it here is made from a reference to live data
//! and points inside that data; a prefetch is a hint that never faults and has
//! no effect on what the program computes, only on how fast. Targets other than
//! x86_64 are not prefetched for.

#![allow(
    unsafe_code,
    reason = "_mm_prefetch takes a raw pointer; see the module docs"
)]

use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Function, Inst, MemFlags, UserFuncName};

/// How many places ahead of the function being walked its record is asked for.
pub const RECORD_AHEAD: usize = 4;

/// How many places ahead of the function being walked the start of its arrays
/// is asked for.
pub const ARRAYS_AHEAD: usize = 2;

/// The most bytes asked for at the start of one array: the walk reads on from
/// there in order, which the hardware prefetcher follows.
const ARRAY_BYTES: usize = 1024;

/// The size of a cache line on the targets prefetched for.
const LINE: usize = 64;

/// Asks for the cache lines of the first `max_bytes` of `items`.
fn slice_lines<T>(items: &[T], max_bytes: usize) {
    let bytes = std::mem::size_of_val(items).min(max_bytes);
    let start = items.as_ptr().cast::<u8>();
    for offset in (0..bytes).step_by(LINE) {
        line(start.wrapping_add(offset));
    }
}

/// Asks for one cache line.
#[inline(always)]
fn line(address: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint: it reads nothing into the program, never
    // faults, and `address` lies within live data (see the module docs).
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(address.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = address;
}

/// Asks for the lines of a function's `Function` record that hold `fields`
/// (reading nothing of it).
fn record_lines<T>(fields: &T) {
    slice_lines(std::slice::from_ref(fields), usize::MAX);
}

/// What a walk reads of each function: which parts of its record and of its
/// arrays [`FunctionSet::map_walk`](super::FunctionSet::map_walk) asks for ahead.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reads {
    /// Its body: instructions, signature, values ([`body_start`]).
    Body,
    /// The first instructions of its body, as many as given ([`body_start`]).
    Prefix(u32),
    /// Only its tables of names: imports, global values and user names
    /// ([`names`]).
    Names,
    /// Only its table of user names ([`user_names`]).
    UserNames,
    /// Only its own name, and the bytes of a test-case name ([`own_name`]).
    OwnName,
}

impl Reads {
    /// Asks for the lines of `func`'s record that a walk reading `self` reads
    /// (reading nothing of it): all of it for a body, the headers of the name
    /// tables otherwise.
    pub fn prefetch_record(self, func: &Function) {
        match self {
            Reads::Body | Reads::Prefix(_) => record_lines(func),
            Reads::Names => {
                record_lines(&func.dfg.ext_funcs);
                record_lines(&func.global_values);
                record_lines(&func.params);
            }
            Reads::UserNames => record_lines(&func.params),
            Reads::OwnName => record_lines(&func.name),
        }
    }

    /// Asks for the start of the arrays of `func` that a walk reading `self`
    /// reads first. Reads `func`'s record (ask for it first:
    /// [`Self::prefetch_record`]).
    pub fn prefetch_arrays(self, func: &Function) {
        match self {
            Reads::Body => body_start(func, usize::MAX),
            Reads::Prefix(instructions) => body_start(func, instructions as usize),
            Reads::Names => names(func),
            Reads::UserNames => user_names(func),
            Reads::OwnName => own_name(func),
        }
    }
}

/// Asks for the start of the arrays a walk over `func`'s body reads first: its
/// instruction table (at most `instructions` entries of it), its signature's
/// parameters, its imported functions and signatures (which calls read), its
/// tables of memory flags and alias regions (which memory accesses read: each
/// was a miss waited for in the first access of every function, about a tenth
/// of the first look on sqljs), and the value lists its entry block's
/// parameters are in. Reads
/// `func`'s record (ask for it first: [`Reads::prefetch_record`]).
pub fn body_start(func: &Function, instructions: usize) {
    let dfg = &func.dfg;
    // The instruction table is one array, reachable only entry by entry: one
    // entry per cache line.
    let entry_bytes = std::mem::size_of::<cranelift_codegen::ir::InstructionData>();
    let entries = dfg
        .num_insts()
        .min(instructions)
        .min(ARRAY_BYTES / entry_bytes);
    for index in (0..entries).step_by((LINE / entry_bytes).max(1)) {
        line(std::ptr::from_ref(&dfg.insts[Inst::new(index)]).cast::<u8>());
    }
    slice_lines(&func.signature.params, ARRAY_BYTES);
    slice_lines(dfg.ext_funcs.values().as_slice(), ARRAY_BYTES);
    slice_lines(dfg.signatures.values().as_slice(), ARRAY_BYTES);
    let first_flags = MemFlags::new(0);
    if dfg.mem_flags.is_valid(first_flags) {
        line(std::ptr::from_ref(&dfg.mem_flags[first_flags]).cast::<u8>());
    }
    if let Some((_, region)) = dfg.alias_regions.iter().next() {
        line(std::ptr::from_ref(region).cast::<u8>());
    }
    if let Some(entry) = func.layout.entry_block() {
        slice_lines(dfg.block_params(entry), ARRAY_BYTES);
    }
}

/// Asks for `func`'s table of user names (the `uN:M` names its imports and
/// symbols use). Reads `func`'s record (ask for it first: [`Reads::prefetch_record`]).
pub fn user_names(func: &Function) {
    slice_lines(
        func.params.user_named_funcs().values().as_slice(),
        ARRAY_BYTES,
    );
}

/// Asks for the bytes of `func`'s own name when it is a test-case name (a
/// `uN:M` name has none outside the record). Reads `func`'s record (ask for it
/// first: [`Reads::prefetch_record`]).
pub fn own_name(func: &Function) {
    if let UserFuncName::Testcase(name) = &func.name {
        slice_lines(name.raw(), ARRAY_BYTES);
    }
}

/// Asks for `func`'s tables of names (what `ir::mentioned_names` reads): its
/// imported functions, its global values and its user names. Reads `func`'s
/// record (ask for it first: [`Reads::prefetch_record`]).
pub fn names(func: &Function) {
    slice_lines(func.dfg.ext_funcs.values().as_slice(), ARRAY_BYTES);
    slice_lines(func.global_values.values().as_slice(), ARRAY_BYTES);
    user_names(func);
}
