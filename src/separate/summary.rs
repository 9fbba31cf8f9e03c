//! Stage 1 of separate compilation: a module's *summary* (GCC's "generate summary",
//! see GCC Internals, "Using summary information in IPA passes",
//! <https://gcc.gnu.org/onlinedocs/gccint/IPA.html>).
//!
//! A summary holds, for every function a module defines after its own merge ran
//! (the summary describes the result), what the comparator needs to decide equality
//! without the body: the walk's token stream, its structural hash, and where it
//! refers to other functions, with those references by *symbol name* instead of by
//! index. Names are module-independent: the walk runs in a special mode
//! ([`WalkOptions::symbols_by_reference`]) in which every user or test-case name a
//! function mentions is written as a reference (a stub stands in for names the
//! module does not define), and [`Summary::symbols`] spells each out. Local
//! functions are summarized too, marked local: other modules cannot call them, but
//! they decide whether two visible functions that call them are equal.
//!
//! Summaries and the decisions of stage 2 ([`super::program`]) are written in the
//! file format of [`super::format`].

use super::format::{FormatError, SUMMARY_MAGIC, checksum, from_bytes, to_bytes};
use super::vocabulary::SummarySource;
use crate::identical::encode::WalkOptions;
use crate::identical::plan::{MergeAction, MergeMode};
use crate::identical::rewrite::OutputEntry;
use crate::identical::screen::hash_and_encode;
use crate::identical::tokens::NAME_EXACT;
use crate::identical::{MergeOptions, merge_functions};
use crate::ir::fnv::Fnv1a;
use crate::ir::{
    FuncIndex, FunctionSet, Linkage, SymbolName, mentioned_names, parallel, reads_machine_state,
};
use cranelift_codegen::entity::{EntityRef, SecondaryMap};
use cranelift_codegen::ir::{ExternalName, Function, Signature, UserExternalName, UserFuncName};
use cranelift_codegen::isa::CallConv;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};

/// How visible a summarized function is: its linkage.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Visibility {
    /// Only its own module can refer to it.
    Local,
    /// Visible to other modules of the program, not outside it.
    Hidden,
    /// Visible everywhere.
    Export,
    /// Visible, and the linker may replace it with another definition.
    Preemptible,
}

impl Visibility {
    /// The visibility of a definition with `linkage`.
    pub fn of(linkage: Linkage) -> Self {
        match linkage {
            Linkage::Local => Self::Local,
            Linkage::Hidden => Self::Hidden,
            Linkage::Preemptible => Self::Preemptible,
            Linkage::Export | Linkage::Import => Self::Export,
        }
    }
}

/// A symbol a summary refers to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SymbolRef {
    /// Its name as the linker sees it (`u0:5`, `%foo` in CLIF; the declared name in
    /// a `cranelift_module::Module`).
    pub name: String,
    /// Whether it is private to the summarized module (the same name in another
    /// module is another symbol).
    pub local: bool,
}

/// The comparator's view of one function, independent of its module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FunctionSummary {
    /// The function's symbol name.
    pub name: String,
    /// Its linkage.
    pub visibility: Visibility,
    /// Whether its own module takes its address (in code or data).
    pub address_taken: bool,
    /// After the module's own merge, this function is a thunk to, or an alias of,
    /// the function this symbol (an index into [`Summary::symbols`]) names: it is
    /// equal to it, and references to it count as references to that one. Such a
    /// function is not compared itself (an alias has no body).
    pub same_as: Option<u32>,
    /// The walk could handle it; if not, it is never merged and has no tokens.
    pub supported: bool,
    /// It reads its return address, frame pointer or stack pointer
    /// (`ir::reads_machine_state`): no module may reach its code through
    /// a thunk, so the program plan only removes members of its class.
    pub reads_machine_state: bool,
    /// Structural hash (the pass's; it skips references).
    pub hash: u64,
    /// Reachable instructions.
    pub instructions: u32,
    /// The walk's token stream; at each reference position, an index into
    /// [`Summary::symbols`].
    pub tokens: Vec<u64>,
    /// Positions of references in [`Self::tokens`], increasing. The token before
    /// each is the reference's tag: by equivalence class, or by exact symbol.
    pub references: Vec<u32>,
}

impl FunctionSummary {
    /// A function of the module's own merge that stands for the function of
    /// symbol `kept` (an alias or thunk of it): no body of its own.
    pub fn standing_for(name: String, visibility: Visibility, kept: u32) -> Self {
        FunctionSummary {
            name,
            visibility,
            address_taken: false,
            same_as: Some(kept),
            supported: false,
            reads_machine_state: false,
            hash: 0,
            instructions: 0,
            tokens: Vec::new(),
            references: Vec::new(),
        }
    }

    /// Whether the reference at `position` must match by exact symbol.
    pub fn is_exact(&self, position: u32) -> bool {
        position > 0 && self.tokens[position as usize - 1] == NAME_EXACT
    }
}

/// Everything stage 2 needs to know about one module.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Summary {
    /// The module's name (unique within a program).
    pub module: String,
    /// What the functions were summarized from (IR, or machine code of one target):
    /// only summaries of one source are planned together.
    pub source: SummarySource,
    /// Whether function addresses are significant (`--mode safe`); all summaries
    /// of a program must agree.
    pub addresses_significant: bool,
    /// Every symbol the functions refer to.
    pub symbols: Vec<SymbolRef>,
    /// The module's functions after its own merge, in definition order.
    pub functions: Vec<FunctionSummary>,
    /// Symbols whose address this module takes (indices into [`Self::symbols`]).
    pub addresses_taken: Vec<u32>,
}

/// What a module refers to from outside its functions (data and byte-defined
/// code, which a summary from IR does not see): every symbol, and those whose
/// address it takes; and the local names it declares beyond its functions'.
#[derive(Clone, Debug, Default)]
pub struct OutsideReferences {
    /// Every symbol referred to.
    pub referenced: Vec<SymbolRef>,
    /// The symbols whose address is taken (stored in data, or a non-call
    /// relocation of byte-defined code).
    pub taken: Vec<SymbolRef>,
    /// Every local name the module declares (functions its own merge erased, data
    /// nothing refers to): in this module such a name binds to its own local, so
    /// the plan must not give it to another module's representative.
    pub locals: Vec<SymbolRef>,
}

/// Adds `outside` to `summary`: its symbols, and the addresses taken, so that
/// the plan neither removes a function whose address the module holds (in safe
/// mode it keeps its own address) nor leaves a reference to one it removes
/// unredirected, nor names a representative by one of the module's locals.
pub fn refer_to(summary: &mut Summary, outside: &OutsideReferences) {
    let index_of = |summary: &mut Summary, symbol: &SymbolRef| -> u32 {
        match summary.symbols.iter().position(|s| s == symbol) {
            Some(index) => index as u32,
            None => {
                summary.symbols.push(symbol.clone());
                (summary.symbols.len() - 1) as u32
            }
        }
    };
    for symbol in outside.referenced.iter().chain(&outside.locals) {
        index_of(summary, symbol);
    }
    for symbol in &outside.taken {
        let index = index_of(summary, symbol);
        if !summary.addresses_taken.contains(&index) {
            summary.addresses_taken.push(index);
        }
    }
}

/// How a module's functions and data are named for the linker, given the names
/// they have inside the module's CLIF.
pub trait SymbolNames: Sync {
    /// The linker's view of `name`, as defined (or referred to) in this module.
    fn symbol(&self, name: &UserFuncName, defined_local: Option<bool>) -> SymbolRef;
}

/// CLIF text naming: a name is its spelling (`u0:5`, `%foo`), the same symbol in
/// every module; a definition is local to its module when its linkage is.
pub struct ClifNames;

impl SymbolNames for ClifNames {
    fn symbol(&self, name: &UserFuncName, defined_local: Option<bool>) -> SymbolRef {
        SymbolRef {
            name: name.to_string(),
            local: defined_local.unwrap_or(false),
        }
    }
}

/// The CLIF name a symbol string spells (`u0:5`, `%foo`), if it is one.
pub fn clif_name(symbol: &str) -> Option<UserFuncName> {
    if let Some(rest) = symbol.strip_prefix('%') {
        return Some(UserFuncName::testcase(rest));
    }
    let (namespace, index) = symbol.strip_prefix('u')?.split_once(':')?;
    Some(UserFuncName::User(UserExternalName::new(
        namespace.parse().ok()?,
        index.parse().ok()?,
    )))
}

/// A module after its own merge, as every stage sees it.
pub struct MergedModule {
    /// The bodies that stayed (kept functions with redirected calls, and thunks),
    /// with their linkage and address-taken marks, in definition order.
    pub set: FunctionSet,
    /// For each function of [`Self::set`] that the module's own merge made a thunk,
    /// the function of `set` it transfers to.
    pub thunk_of: SecondaryMap<FuncIndex, Option<FuncIndex>>,
    /// Aliases the module's own merge made: name, linkage, and the function of
    /// [`Self::set`] whose code the name now stands for.
    pub aliases: Vec<(UserFuncName, Linkage, FuncIndex)>,
}

/// Runs the module's own merge: what every stage starts from.
pub fn merged_module(module: &FunctionSet, options: &MergeOptions) -> MergedModule {
    let outcome = merge_functions(module, options);
    let mut set = FunctionSet::new();
    let mut index_in_set: SecondaryMap<FuncIndex, Option<FuncIndex>> = SecondaryMap::new();
    for (function, body) in outcome.output.iter().filter_map(OutputEntry::kept) {
        // Names are unique in `module`, hence in any subset of its bodies.
        if let Ok(index) = set.push(body.clone(), module.get(function).linkage) {
            index_in_set[function] = Some(index);
            if module.address_taken_outside(function) {
                set.mark_address_taken(index);
            }
        }
    }
    let mut thunk_of = SecondaryMap::new();
    let mut aliases = Vec::new();
    for entry in &outcome.output {
        match entry {
            OutputEntry::Thunk { function, into, .. } => {
                if let (Some(f), Some(into)) = (index_in_set[*function], index_in_set[*into]) {
                    thunk_of[f] = Some(into);
                }
            }
            OutputEntry::Removed {
                function,
                into,
                action: MergeAction::Alias,
            } => {
                if let Some(into) = index_in_set[*into] {
                    let def = module.get(*function);
                    aliases.push((def.func.name.clone(), def.linkage, into));
                }
            }
            _ => {}
        }
    }
    MergedModule {
        set,
        thunk_of,
        aliases,
    }
}

/// `module` with a stub (import linkage, no body) for every user or test-case name
/// its functions mention but do not define, so that the summary walk can write
/// every such name as a reference. Returns the set and the number of real
/// functions (the stubs follow them).
fn with_stubs(module: &FunctionSet) -> (FunctionSet, usize) {
    let mut set = module.clone();
    let real = set.len();
    let mut missing: Vec<UserFuncName> = Vec::new();
    let mut seen: HashSet<SymbolName> = HashSet::new();
    for (_, def) in module.iter() {
        let func = &def.func;
        for name in mentioned_names(func) {
            let user = match name {
                ExternalName::User(r) => match func.params.user_named_funcs().get(*r) {
                    Some(user) => UserFuncName::User(user.clone()),
                    None => continue,
                },
                ExternalName::TestCase(t) => UserFuncName::Testcase(t.clone()),
                ExternalName::LibCall(_) | ExternalName::KnownSymbol(_) => continue,
            };
            let symbol = SymbolName::of_user_func_name(&user);
            if module.lookup(&symbol).is_none() && seen.insert(symbol) {
                missing.push(user);
            }
        }
    }
    for name in missing {
        let stub = Function::with_name_signature(name, Signature::new(CallConv::Fast));
        // Names are unique: each missing one once, none defined.
        let _ = set.push(stub, Linkage::Import);
    }
    (set, real)
}

/// Summarizes `module` (named `module_name`), after running its own merge with
/// `options`, naming symbols as CLIF text does ([`ClifNames`]).
///
/// ```
/// use clif_merge::separate::{Summary, Visibility, summarize};
/// use clif_merge::{FunctionSet, Linkage, MergeOptions};
///
/// let clif = "
/// function %triple(i64) -> i64 {
/// block0(v0: i64):
///     v1 = iconst.i64 3
///     v2 = imul v0, v1
///     return v2
/// }
/// ";
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(clif)? {
///     module.push(func, Linkage::Export)?;
/// }
///
/// let summary = summarize(&module, "a", &MergeOptions::default());
/// assert_eq!(summary.module, "a");
/// assert_eq!(summary.functions[0].name, "%triple");
/// assert_eq!(summary.functions[0].visibility, Visibility::Export);
/// // Summaries travel as files between the stages.
/// assert_eq!(Summary::from_bytes(&summary.to_bytes())?, summary);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn summarize(module: &FunctionSet, module_name: &str, options: &MergeOptions) -> Summary {
    summarize_with(module, module_name, options, &ClifNames)
}

/// The walk options of summaries. Addresses are significant in every mode: a
/// summary is compared with other modules' functions, and across modules an
/// address matches only the very same function
/// (`target_match_across_modules` in `src/ir/observable.rs`).
pub fn summary_walk() -> WalkOptions {
    WalkOptions {
        addresses_significant: true,
        symbols_by_reference: true,
        callee_load_holes: false,
    }
}

/// Like [`summarize`], with the module's own naming of symbols.
pub fn summarize_with(
    module: &FunctionSet,
    module_name: &str,
    options: &MergeOptions,
    names: &dyn SymbolNames,
) -> Summary {
    let merged = merged_module(module, options);
    summarize_merged(&merged, module_name, options.mode, names)
}

/// Summarizes a module whose own merge already ran ([`merged_module`]): stage 3
/// needs both the merged module and its summary, and runs the merge once.
pub fn summarize_merged(
    merged: &MergedModule,
    module_name: &str,
    mode: MergeMode,
    names: &dyn SymbolNames,
) -> Summary {
    let (set, real) = with_stubs(&merged.set);
    let walk = summary_walk();
    let all: Vec<FuncIndex> = (0..real).map(FuncIndex::new).collect();
    let walked = hash_and_encode(&set, &all, walk)
        .into_iter()
        .map(|(hashed, encoding)| Some((hashed.hash.0, encoding.ok()?)));

    let mut symbols: Vec<SymbolRef> = Vec::new();
    let mut symbol_of: HashMap<FuncIndex, u32> = HashMap::new();
    let mut intern = |f: FuncIndex| -> u32 {
        *symbol_of.entry(f).or_insert_with(|| {
            let def = set.get(f);
            let defined_local = (f.index() < real).then_some(def.linkage == Linkage::Local);
            symbols.push(names.symbol(&def.func.name, defined_local));
            (symbols.len() - 1) as u32
        })
    };
    let mut taken: HashSet<FuncIndex> = HashSet::new();
    let mut functions = Vec::with_capacity(real);
    for (&f, walked) in all.iter().zip(walked) {
        let def = set.get(f);
        let own = names.symbol(&def.func.name, Some(def.linkage == Linkage::Local));
        let mut summary = FunctionSummary {
            name: own.name,
            visibility: Visibility::of(def.linkage),
            address_taken: false,
            same_as: None,
            supported: false,
            reads_machine_state: reads_machine_state(&def.func),
            hash: 0,
            instructions: 0,
            tokens: Vec::new(),
            references: Vec::new(),
        };
        if let Some(kept) = merged.thunk_of[f] {
            summary.same_as = Some(intern(kept));
        }
        if set.address_taken_outside(f) {
            taken.insert(f);
        }
        if let Some((hash, encoding)) = walked {
            let mut tokens = encoding.tokens().to_vec();
            for &p in encoding.callee_positions() {
                let target = FuncIndex::new(tokens[p as usize] as usize);
                tokens[p as usize] = u64::from(intern(target));
            }
            taken.extend(encoding.address_taken().iter().copied());
            summary.supported = true;
            summary.hash = hash;
            summary.instructions = encoding.instructions();
            summary.references = encoding.callee_positions().to_vec();
            summary.tokens = tokens;
        }
        functions.push(summary);
    }
    for (f, summary) in all.iter().zip(&mut functions) {
        summary.address_taken = taken.contains(f);
    }
    for (name, linkage, kept) in &merged.aliases {
        functions.push(FunctionSummary::standing_for(
            names.symbol(name, Some(*linkage == Linkage::Local)).name,
            Visibility::of(*linkage),
            intern(*kept),
        ));
    }
    let mut taken: Vec<FuncIndex> = taken.into_iter().collect();
    taken.sort_unstable();
    let addresses_taken = taken.into_iter().map(&mut intern).collect();
    Summary {
        module: module_name.to_string(),
        source: SummarySource::Ir,
        addresses_significant: mode == MergeMode::Safe,
        symbols,
        functions,
        addresses_taken,
    }
}

impl Summary {
    /// A fingerprint of function `index` as summarized: its name, linkage,
    /// address-taken flag, tokens with each reference spelled as the symbol it
    /// names, and what it stands for. Stage 3 recomputes it from the module as it
    /// is and refuses a decision whose function changed, naming it; a change
    /// anywhere else in the module (a local callee, a representative other
    /// modules rely on) changes the module's [`Self::digest`], which stage 3
    /// checks too. 64-bit FNV-1a over the words of the summary: fixed by this
    /// crate, not by any `Hash` implementation. Linear in the function's tokens.
    pub fn fingerprint(&self, index: usize) -> u64 {
        let Some(f) = self.functions.get(index) else {
            return 0;
        };
        let symbol = |hash: Fnv1a, s: Option<&SymbolRef>| match s {
            Some(s) => hash
                .word(1)
                .bytes(s.name.as_bytes())
                .word(u64::from(s.local)),
            None => hash.word(0),
        };
        let mut hash = Fnv1a::new()
            .bytes(f.name.as_bytes())
            .word(f.visibility as u64)
            .word(u64::from(f.address_taken))
            .word(u64::from(f.supported))
            .word(f.tokens.len() as u64);
        let mut references = f.references.iter().peekable();
        for (position, &token) in f.tokens.iter().enumerate() {
            hash = if references.next_if(|&&p| p as usize == position).is_some() {
                symbol(hash, self.symbols.get(token as usize))
            } else {
                hash.word(token)
            };
        }
        symbol(hash, f.same_as.and_then(|s| self.symbols.get(s as usize))).finish()
    }
}

/// Summarizes several modules (name, functions) at once, in parallel over the
/// modules (with the `parallel` feature; each module's own walk is parallel too).
/// The summaries are in the order of `modules`.
pub fn summarize_modules(
    modules: &[(String, FunctionSet)],
    options: &MergeOptions,
) -> Vec<Summary> {
    parallel::map(modules, 1, |(name, module)| {
        summarize(module, name, options)
    })
}

/// Splits `module` into `parts` modules, function `i` into part `i mod parts`, the
/// way a compiler splits a crate into codegen units: every local function referred
/// to from another part (called, or its address taken) gets hidden linkage, as
/// rustc gives them, and the rest keep theirs. Returns the module with those
/// linkages and the parts (for tests and benchmarks of separate compilation: the
/// parts together are the module).
pub fn split_module(module: &FunctionSet, parts: usize) -> (FunctionSet, Vec<FunctionSet>) {
    let parts = parts.max(1);
    let part = |f: FuncIndex| f.index() % parts;
    let mut whole = module.clone();
    for (f, def) in module.iter() {
        let func = &def.func;
        for name in mentioned_names(func) {
            if let Some(callee) =
                SymbolName::of_external(func, name).and_then(|symbol| module.lookup(&symbol))
                && part(callee) != part(f)
                && module.get(callee).linkage == Linkage::Local
            {
                whole.set_linkage(callee, Linkage::Hidden);
            }
        }
    }
    let mut split: Vec<FunctionSet> = (0..parts).map(|_| FunctionSet::new()).collect();
    for (f, def) in whole.iter() {
        if let Ok(index) = split[part(f)].push_shared(def.func.clone(), def.linkage)
            && whole.address_taken_outside(f)
        {
            split[part(f)].mark_address_taken(index);
        }
    }
    (whole, split)
}

impl Summary {
    /// A digest of everything the summary says about the module's functions (its
    /// symbols, every function's tokens, linkage and address marks, and the
    /// module's own thunks and aliases; not the module's name): stage 2 writes it
    /// into the module's decisions, and stage 3 applies them only to a module whose
    /// summary has the same digest. So decisions are never applied to another
    /// module, nor to one that changed since it was summarized, in a function that
    /// has a decision or in one that has none (a representative that other modules'
    /// thunks rely on). 64-bit FNV-1a of the `postcard` encoding: fixed by this
    /// crate's format, not by any `Hash` implementation.
    pub fn digest(&self) -> u64 {
        let contents = (
            &self.source,
            self.addresses_significant,
            &self.symbols,
            &self.functions,
            &self.addresses_taken,
        );
        // Serializing plain data into a growing vector cannot fail.
        checksum(&postcard::to_allocvec(&contents).unwrap_or_default())
    }

    /// The summary as a file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        to_bytes(SUMMARY_MAGIC, self)
    }

    /// Reads a summary file's bytes, checking kind, version and consistency.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        let summary: Self = from_bytes(SUMMARY_MAGIC, "summary", bytes)?;
        summary.check()?;
        Ok(summary)
    }

    /// Checks what the rest of the pipeline relies on (references in bounds and
    /// increasing), so that a crafted file is an error, not a panic.
    fn check(&self) -> Result<(), FormatError> {
        let symbols = self.symbols.len() as u64;
        for f in &self.functions {
            let mut previous = None;
            for &p in &f.references {
                let Some(&token) = f.tokens.get(p as usize) else {
                    return Err(FormatError::Corrupt(format!(
                        "{}: reference position {p} beyond its tokens",
                        f.name
                    )));
                };
                if token >= symbols || previous.is_some_and(|q| q >= p) {
                    return Err(FormatError::Corrupt(format!(
                        "{}: bad reference at {p}",
                        f.name
                    )));
                }
                previous = Some(p);
            }
        }
        if self
            .functions
            .iter()
            .filter_map(|f| f.same_as)
            .chain(self.addresses_taken.iter().copied())
            .any(|s| u64::from(s) >= symbols)
        {
            return Err(FormatError::Corrupt(
                "address-taken symbol out of range".into(),
            ));
        }
        Ok(())
    }
}
