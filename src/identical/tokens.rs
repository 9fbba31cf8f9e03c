//! The grammar of the token stream: every tag the walk ([`super::encode`]) writes,
//! by name, in one table.
//!
//! # Equal streams ⇒ equal functions
//!
//! The stream is read from its start, and what each token means is decided by the
//! tokens before it, so it can be parsed back into the function's structure:
//!
//! * **every variable-length part is length-prefixed**: signature parameters and
//!   returns, block parameters, instruction results, value lists, block-call
//!   arguments, jump-table entries, constant-pool and shuffle-mask bytes (then
//!   packed eight to a token), test-case names, exception-table items, user stack
//!   map entries (an instruction's result count and whether it has a user stack
//!   map are packed with its opcode into one header token,
//!   [`instruction_header`]). The one exception is a block's instructions, which
//!   end with [`END_OF_BLOCK`]: an instruction starts with its header, and no
//!   header is `u64::MAX`;
//! * **every choice is tagged**: wherever the walk writes one of several
//!   alternatives, it first writes a tag from the table below, and the tags of one
//!   choice are distinct ([`CHOICES`], checked at compile time);
//! * **an instruction's opcode decides its format**, so the operands that follow
//!   need no format tag, and the controlling type is implied by the types written
//!   (the first result's, or an operand's at its definition);
//! * **references are written by content or by a position-independent number**:
//!   values, blocks and stack slots by the serial of their first appearance in the
//!   walk (a value's serial is the token position of its definition, so the
//!   serials of two walks agree exactly when the structures before them do);
//!   memory flags, signatures, global values, constants, jump tables and exception
//!   tables by content; names outside the module by content; functions of the
//!   module by index, which the comparator reads through their equivalence class
//!   (or, after [`NAME_EXACT`], as that exact symbol).
//!
//! So two functions whose streams are equal, with module references read through
//! the same classes, have the same signature, the same reachable CFG walked in the
//! same order, and the same instructions with the same operands, immediates,
//! flags and referenced entities: they compute the same thing. The converse fails
//! only where two spellings of one computation are written differently (see
//! below), which costs a merge, never soundness.
//!
//! # What is deliberately not compared, and why
//!
//! * Source locations, comments, value labels and debug tags: they do not change
//!   what the code computes.
//! * The numbering of values, blocks and stack slots, and the order of blocks in
//!   the layout: renaming and reordering do not change behaviour (serials of first
//!   appearance instead).
//! * Unreachable blocks: they never run. The walk only visits blocks reachable from
//!   the entry.
//! * The index of an entity in the function's own tables (memory flags, signatures,
//!   global values, constants, jump tables, exception tables, alias regions,
//!   user-name table entries): only what it holds matters. Entries nothing uses are
//!   not written at all.
//! * The controlling type variable: it is implied by the types that are written.
//! * The names of module-defined functions (callees, `func_addr`, symbols): they are
//!   compared by equivalence class, which is what lets recursive and mutually
//!   recursive duplicates merge. Exceptions, compared by exact name: preemptible
//!   functions (the linker may replace them) and, when addresses are significant,
//!   address uses (two equal functions may keep distinct addresses).
//! * The function's own name and linkage: they decide what becomes of a duplicate
//!   (erase, alias, thunk; `plan`), not whether it is one.
//! * Value aliases: a use is written as the value it resolves to.
//!
//! Left for future work (each only costs merges): commutative operands in the other
//! order (`iadd v1, v2` against `iadd v2, v1`), the same constant materialized
//! differently, equal code in a different but equivalent CFG shape, and
//! functions differing only in dead instructions.

/// The first token of an instruction in the comparator's stream: its opcode (bits
/// 0–15), its number of results (bits 16–47) and whether a user stack map follows
/// (bit 48). The fields are bounded (fewer than 2¹⁶ opcodes, fewer than 2³² results),
/// so the token is injective; the result types follow the operands, then the stack
/// map's entries, length-prefixed, if the bit is set. (The hashing walks write the
/// opcode alone.)
pub fn instruction_header(opcode: u64, results: usize, stack_map: bool) -> u64 {
    debug_assert!(opcode < 1 << 16);
    opcode | ((results as u64) & 0xffff_ffff) << 16 | u64::from(stack_map) << 48
}

/// Ends the instructions of a block: no opcode or instruction header is `u64::MAX`.
pub const END_OF_BLOCK: u64 = u64::MAX;

/// Written for a value used before its definition (only in IR the verifier
/// rejects): no serial is `u64::MAX`, and the function is reported unsupported.
pub const UNDEFINED_VALUE: u64 = u64::MAX;

// Optional parts: the stack limit, the entry block, a stack slot's key.

/// The optional part is absent.
pub const ABSENT: u64 = 0;
/// The optional part follows.
pub const PRESENT: u64 = 1;

// A block call's arguments.

/// A value follows.
pub const BLOCK_ARG_VALUE: u64 = 0;
/// The index of a `try_call` return value follows.
pub const BLOCK_ARG_TRY_CALL_RET: u64 = 1;
/// The index of a `try_call` exception payload follows.
pub const BLOCK_ARG_TRY_CALL_EXN: u64 = 2;

// The purpose of an ABI parameter or return (then its extension is written).

/// `ArgumentPurpose::Normal`.
pub const PURPOSE_NORMAL: u64 = 0;
/// `ArgumentPurpose::StructArgument`; its size follows.
pub const PURPOSE_STRUCT_ARGUMENT: u64 = 1;
/// `ArgumentPurpose::StructReturn`.
pub const PURPOSE_STRUCT_RETURN: u64 = 2;
/// `ArgumentPurpose::VMContext`.
pub const PURPOSE_VMCONTEXT: u64 = 3;

// A reference to a symbol (a callee, a `func_addr` target, a symbol global value).

/// By content: a name outside the module (and, in a single-module walk, a
/// preemptible function or a significant address); a [`SYMBOL_USER`]..
/// [`SYMBOL_KNOWN`] name follows.
pub const NAME_EXTERNAL: u64 = 0;
/// A module function read through its equivalence class; its index follows.
pub const NAME_MODULE: u64 = 1;
/// In a summary walk, a symbol the comparator must match exactly; its index
/// follows, like a class reference.
pub const NAME_EXACT: u64 = 2;
/// For a sink that writes user names by reference
/// (`TokenSink::user_name_by_reference`, compile-once in `module/compiled.rs`):
/// the name's `UserExternalNameRef` follows, numbered as the sink says.
pub const NAME_BY_REFERENCE: u64 = 3;

// A symbol name by content.

/// `uN:M`: namespace and index follow.
pub const SYMBOL_USER: u64 = 0;
/// `%name`: its bytes follow, length-prefixed.
pub const SYMBOL_TESTCASE: u64 = 1;
/// A runtime library function: its code follows.
pub const SYMBOL_LIBCALL: u64 = 2;
/// A well-known symbol: its code follows.
pub const SYMBOL_KNOWN: u64 = 3;

// A link of a global value's chain, followed to its end.

/// `vmctx`: ends the chain.
pub const GLOBAL_VMCONTEXT: u64 = 0;
/// `load`: offset, type and memory flags follow, then the base.
pub const GLOBAL_LOAD: u64 = 1;
/// `iadd_imm`: offset and type follow, then the base.
pub const GLOBAL_IADD_IMM: u64 = 2;
/// `symbol`: the name reference, offset, `colocated` and `tls` follow; ends the
/// chain.
pub const GLOBAL_SYMBOL: u64 = 3;
/// `dyn_scale_target_const`: the vector type follows; ends the chain.
pub const GLOBAL_DYN_SCALE: u64 = 4;

// A stack slot (sized or dynamic).

/// First use: its content follows (kind, size and alignment, key; or kind,
/// vector type and scale).
pub const SLOT_FIRST_USE: u64 = 0;
/// A slot used before: its serial follows.
pub const SLOT_SEEN: u64 = 1;

// An exception table item.

/// A tag and its handler's block call follow.
pub const EXCEPTION_TAG: u64 = 0;
/// The default handler's block call follows.
pub const EXCEPTION_DEFAULT: u64 = 1;
/// The context value follows.
pub const EXCEPTION_CONTEXT: u64 = 2;

// The memory-flags token packs its fields: bits 0-1 endianness, 2 aligned,
// 3 readonly, 4 can_move, 5 notrap, 8 and up the trap code (0: none). The
// alias-region token is 0 for none, else 1 + the region's user id.

/// No explicit endianness.
pub const ENDIAN_NATIVE: u64 = 0;
/// Explicitly little-endian.
pub const ENDIAN_LITTLE: u64 = 1;
/// Explicitly big-endian.
pub const ENDIAN_BIG: u64 = 2;
/// Memory flags without an alias region.
pub const NO_ALIAS_REGION: u64 = 0;

/// The tags of each choice, by choice: tags must be distinct within a choice.
pub const CHOICES: &[&[u64]] = &[
    &[ABSENT, PRESENT],
    &[
        BLOCK_ARG_VALUE,
        BLOCK_ARG_TRY_CALL_RET,
        BLOCK_ARG_TRY_CALL_EXN,
    ],
    &[
        PURPOSE_NORMAL,
        PURPOSE_STRUCT_ARGUMENT,
        PURPOSE_STRUCT_RETURN,
        PURPOSE_VMCONTEXT,
    ],
    &[NAME_EXTERNAL, NAME_MODULE, NAME_EXACT, NAME_BY_REFERENCE],
    &[SYMBOL_USER, SYMBOL_TESTCASE, SYMBOL_LIBCALL, SYMBOL_KNOWN],
    &[
        GLOBAL_VMCONTEXT,
        GLOBAL_LOAD,
        GLOBAL_IADD_IMM,
        GLOBAL_SYMBOL,
        GLOBAL_DYN_SCALE,
    ],
    &[SLOT_FIRST_USE, SLOT_SEEN],
    &[EXCEPTION_TAG, EXCEPTION_DEFAULT, EXCEPTION_CONTEXT],
    &[ENDIAN_NATIVE, ENDIAN_LITTLE, ENDIAN_BIG],
];

/// Whether the tags of every choice are distinct.
const fn choices_are_distinct(choices: &[&[u64]]) -> bool {
    let mut c = 0;
    while c < choices.len() {
        let tags = choices[c];
        let mut i = 0;
        while i < tags.len() {
            let mut j = i + 1;
            while j < tags.len() {
                if tags[i] == tags[j] {
                    return false;
                }
                j += 1;
            }
            i += 1;
        }
        c += 1;
    }
    true
}

const _: () = assert!(
    choices_are_distinct(CHOICES),
    "two tags of one choice are equal"
);

/// Every type the walk can meet, each written as its type code (`Type::index`):
/// the scalars, their vectors of 2 to 256 lanes, and those as dynamic vectors. The
/// vocabulary id of summaries covers their codes.
#[cfg_attr(
    not(feature = "separate"),
    allow(dead_code, reason = "the vocabulary id and the type-code test use it")
)]
pub(crate) fn every_type() -> Vec<cranelift_codegen::ir::Type> {
    use cranelift_codegen::ir::types;
    let scalars = [
        types::I8,
        types::I16,
        types::I32,
        types::I64,
        types::I128,
        types::F16,
        types::F32,
        types::F64,
        types::F128,
    ];
    let mut all = Vec::new();
    for scalar in scalars {
        all.push(scalar);
        for lanes in (1..=8).map(|shift| 1u32 << shift) {
            if let Some(vector) = scalar.by(lanes) {
                all.push(vector);
                all.extend(vector.vector_to_dynamic());
            }
        }
    }
    all
}
