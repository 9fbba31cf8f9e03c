//! The *vocabulary* a summary is written in, and its id.
//!
//! A summary's tokens are numbers whose meaning this build fixes: Cranelift's
//! opcode numbering (`opcode as u64`), type codes (`Type::index`), the numbering of
//! calling conventions, condition codes, libcalls and atomic operations, and this
//! crate's own token tags and walk. Another build may number them differently, and
//! then equal numbers no longer mean equal functions. So every summary and
//! decisions file carries the [`Vocabulary::id`] of the build that wrote it, and a
//! file of another vocabulary is refused (see [`super::format`]).
//!
//! The id is 64-bit FNV-1a over: this crate's version, Cranelift's version, every
//! opcode's name with its number, every type's name with its code, every other
//! Cranelift enumeration the walk writes as a number, and the source text of the
//! walk, the hash, the tags and the summary (so a change to how a function is written into
//! a summary changes the id even where no version number changed).
//!
//! A summary is written from IR or from machine code ([`SummarySource`]): tokens
//! of machine code are the bytes of one target compiled with one set of settings,
//! so every summary also names its source, and only summaries of one source are
//! planned together.

use crate::identical::tokens::every_type;
use crate::ir::fnv::Fnv1a;
use cranelift_codegen::ir::KnownSymbol;
use cranelift_codegen::ir::condcodes::{FloatCC, IntCC};
use cranelift_codegen::ir::{ArgumentExtension, ArgumentPurpose, AtomicRmwOp, LibCall, Opcode};
use cranelift_codegen::isa::CallConv;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::OnceLock;

/// The source files whose text decides what a summary's tokens and hashes mean.
const WALK_SOURCES: [&str; 8] = [
    include_str!("../identical/encode.rs"),
    include_str!("../identical/callee_loads.rs"),
    include_str!("../identical/instruction.rs"),
    include_str!("../identical/fingerprint.rs"),
    include_str!("../identical/tokens.rs"),
    include_str!("summary.rs"),
    include_str!("../module/compiled.rs"),
    include_str!("../module/code_summary.rs"),
];

/// Every calling convention, by name (Cranelift has no list of them).
const CALL_CONVS: [&str; 8] = [
    "fast",
    "tail",
    "system_v",
    "windows_fastcall",
    "apple_aarch64",
    "probestack",
    "winch",
    "preserve_all",
];

/// What a build's summaries are written in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Vocabulary {
    /// This crate's version.
    pub clif_merge: &'static str,
    /// Cranelift's version.
    pub cranelift: &'static str,
    /// A hash of the token vocabulary (Cranelift's numbering of opcodes, types and
    /// the other enumerations the walk writes, and the walk's own source).
    pub tokens: u64,
}

impl Vocabulary {
    /// The vocabulary of this build (computed once).
    pub fn of_this_build() -> &'static Self {
        static THIS_BUILD: OnceLock<Vocabulary> = OnceLock::new();
        THIS_BUILD.get_or_init(|| Self {
            clif_merge: env!("CARGO_PKG_VERSION"),
            cranelift: cranelift_codegen_shared::VERSION,
            tokens: token_vocabulary(),
        })
    }

    /// The id written into every summary and decisions file.
    pub fn id(&self) -> u64 {
        Fnv1a::new()
            .bytes(self.clif_merge.as_bytes())
            .word(0)
            .bytes(self.cranelift.as_bytes())
            .word(0)
            .word(self.tokens)
            .finish()
    }
}

impl fmt::Display for Vocabulary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:016x} (clif-merge {}, Cranelift {}, tokens {:016x})",
            self.id(),
            self.clif_merge,
            self.cranelift,
            self.tokens
        )
    }
}

/// Mixes in `name` and the number it is written as.
fn named(hash: Fnv1a, name: impl fmt::Display, number: u64) -> Fnv1a {
    hash.bytes(name.to_string().as_bytes()).word(number)
}

/// The hash of the token vocabulary.
fn token_vocabulary() -> u64 {
    let mut hash = Fnv1a::new();
    for &opcode in Opcode::all() {
        hash = named(hash, opcode, opcode as u64);
    }
    for ty in every_type() {
        hash = named(hash, ty, ty.index() as u64);
    }
    for name in CALL_CONVS {
        let number = name.parse::<CallConv>().map_or(u64::MAX, |cc| cc as u64);
        hash = named(hash, name, number);
    }
    for &cc in IntCC::all() {
        hash = named(hash, cc, cc as u64);
    }
    for &cc in FloatCC::all() {
        hash = named(hash, cc, cc as u64);
    }
    for &op in AtomicRmwOp::all() {
        hash = named(hash, op, op as u64);
    }
    for &libcall in LibCall::all_libcalls() {
        hash = named(hash, libcall, libcall as u64);
    }
    for known in [KnownSymbol::ElfGlobalOffsetTable, KnownSymbol::CoffTlsIndex] {
        hash = named(hash, format_args!("{known:?}"), known as u64);
    }
    for extension in [
        ArgumentExtension::None,
        ArgumentExtension::Uext,
        ArgumentExtension::Sext,
    ] {
        hash = named(hash, format_args!("{extension:?}"), extension as u64);
    }
    for purpose in [
        ArgumentPurpose::Normal,
        ArgumentPurpose::StructReturn,
        ArgumentPurpose::VMContext,
    ] {
        hash = named(hash, purpose, 0);
    }
    for source in WALK_SOURCES {
        hash = hash.bytes(source.as_bytes()).word(0);
    }
    hash.finish()
}

/// What a summary's functions were summarized from, which decides what its tokens
/// mean: the IR walk of this build, or machine code of one target and settings
/// (`MergingModule` compiling at define). Summaries of different sources are never
/// planned together ([`super::PlanError::MixedSources`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SummarySource {
    /// The IR walk ([`Vocabulary`]'s tokens).
    Ir,
    /// Machine code: code bytes, relocations and metadata as compiled.
    MachineCode {
        /// The target triple.
        target: String,
        /// FNV-1a of every shared and target-specific setting, by name and value.
        settings: u64,
    },
}

impl SummarySource {
    /// The source of machine code compiled for `isa`.
    #[cfg(feature = "module")]
    pub fn machine_code(isa: &dyn cranelift_codegen::isa::TargetIsa) -> Self {
        let settings = isa
            .flags()
            .iter()
            .chain(isa.isa_flags())
            .fold(Fnv1a::new(), |hash, value| {
                hash.bytes(value.to_string().as_bytes()).word(0)
            });
        Self::MachineCode {
            target: isa.triple().to_string(),
            settings: settings.finish(),
        }
    }

    /// A number that differs between sources: the build's [`Vocabulary::id`], a
    /// tag, and for machine code the target and the settings' hash.
    pub fn id(&self) -> u64 {
        let build = Fnv1a::new().word(Vocabulary::of_this_build().id());
        match self {
            Self::Ir => build.word(0).finish(),
            Self::MachineCode { target, settings } => build
                .word(1)
                .bytes(target.as_bytes())
                .word(0)
                .word(*settings)
                .finish(),
        }
    }
}

impl fmt::Display for SummarySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Ir => write!(f, "IR (source id {:016x})", self.id()),
            Self::MachineCode { target, settings } => write!(
                f,
                "machine code for {target}, settings {settings:016x} (source id {:016x})",
                self.id()
            ),
        }
    }
}
