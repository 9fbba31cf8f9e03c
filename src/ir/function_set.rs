//! The unit the pass works on: a set of CLIF function definitions with their linkage.

use super::linkage::Linkage;
use super::parallel;
use super::prefetch::{self, Reads};
use super::symbols::{SymbolKey, SymbolName, TableName, mentioned_names};
use cranelift_codegen::entity::{EntityRef, PrimaryMap, SecondaryMap, entity_impl};
use cranelift_codegen::ir::{ExternalName, Function, UserFuncName};
use hashbrown::HashMap;
use rustc_hash::{FxBuildHasher, FxHashSet};
use std::fmt;
use std::sync::Arc;

/// Index of a function definition within a [`FunctionSet`], in input order.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncIndex(u32);
entity_impl!(FuncIndex, "def");

/// One function defined in the module.
#[derive(Clone)]
pub struct DefinedFunction {
    /// The CLIF body, shared: cloning a definition (or a whole [`FunctionSet`])
    /// copies no body, and a body changed in place is copied first only if it is
    /// shared ([`Arc::make_mut`]).
    pub func: Arc<Function>,
    /// How visible the function is outside the module (`Local` unless told otherwise).
    pub linkage: Linkage,
}

/// Why a function cannot join a [`FunctionSet`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum DefinitionError {
    /// Two definitions share a name (spelled as in CLIF).
    Duplicate(String),
    /// A name the function defines or refers to is not UTF-8, so it could not be
    /// printed as CLIF (shown with replacement characters).
    NameNotUtf8(String),
}

impl fmt::Display for DefinitionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Duplicate(name) => write!(f, "function {name} is defined more than once"),
            Self::NameNotUtf8(name) => write!(f, "name {name} is not UTF-8"),
        }
    }
}

impl std::error::Error for DefinitionError {}

/// The first test-case name in `func` (its own, or one it refers to) that is not
/// UTF-8, shown lossily.
fn non_utf8_name(func: &Function) -> Option<String> {
    let own = match &func.name {
        UserFuncName::Testcase(t) => Some(t.raw()),
        UserFuncName::User(_) => None,
    };
    let referenced = mentioned_names(func).filter_map(|name| match name {
        ExternalName::TestCase(t) => Some(t.raw()),
        _ => None,
    });
    own.into_iter()
        .chain(referenced)
        .find(|raw| std::str::from_utf8(raw).is_err())
        .map(|raw| format!("%{}", String::from_utf8_lossy(raw)))
}

/// The functions of one module, in input (definition) order, with a name index.
#[derive(Clone, Default)]
pub struct FunctionSet {
    functions: PrimaryMap<FuncIndex, DefinedFunction>,
    by_name: HashMap<TableName, FuncIndex, FxBuildHasher>,
    address_taken_outside: SecondaryMap<FuncIndex, bool>,
}

impl FunctionSet {
    /// An empty module.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a definition. Names must be unique within the module, and test-case
    /// names must be UTF-8 (CLIF text cannot spell anything else).
    pub fn push(
        &mut self,
        func: Function,
        linkage: impl Into<Linkage>,
    ) -> Result<FuncIndex, DefinitionError> {
        self.push_shared(Arc::new(func), linkage)
    }

    /// Like [`Self::push`], sharing a body another set holds (no copy).
    pub fn push_shared(
        &mut self,
        func: Arc<Function>,
        linkage: impl Into<Linkage>,
    ) -> Result<FuncIndex, DefinitionError> {
        if let Some(name) = non_utf8_name(&func) {
            return Err(DefinitionError::NameNotUtf8(name));
        }
        self.push_accepted(func, linkage.into())
    }

    /// Like [`Self::push_shared`], for a body another set accepted already (the
    /// same `Arc`): its test-case names were checked to be UTF-8 then, so only
    /// the uniqueness of its name in this set is.
    pub(crate) fn push_accepted(
        &mut self,
        func: Arc<Function>,
        linkage: Linkage,
    ) -> Result<FuncIndex, DefinitionError> {
        let name = SymbolName::of_function(&func);
        if self.by_name.contains_key(&name) {
            return Err(DefinitionError::Duplicate(func.name.to_string()));
        }
        let index = self.functions.push(DefinedFunction { func, linkage });
        self.by_name.insert(TableName::new(name), index);
        Ok(index)
    }

    /// A copy that shares no body with `self`, as a compiler that owns its
    /// functions holds them (`clone` shares the bodies, so that rewriting a copy in
    /// place copies each body it changes).
    pub fn deep_clone(&self) -> Self {
        let mut copy = self.clone();
        for def in copy.functions.values_mut() {
            def.func = Arc::new((*def.func).clone());
        }
        copy
    }

    /// Number of definitions.
    pub fn len(&self) -> usize {
        self.functions.len()
    }

    /// True when the module defines no function.
    pub fn is_empty(&self) -> bool {
        self.functions.is_empty()
    }

    /// The definition at `index`.
    pub fn get(&self, index: FuncIndex) -> &DefinedFunction {
        &self.functions[index]
    }

    /// `walk` over the bodies of `functions`, results in the order given; in
    /// parallel in chunks of at least `min_len` functions, with a scratch state
    /// per worker made by `init` (`parallel::map_init`). While one function is
    /// walked, the memory of the next ones (their records and the start of the
    /// arrays that `reads` says the walk reads) is asked for (`ir::prefetch`):
    /// the walk to use for reading every function of a list once.
    pub(crate) fn map_walk<S, R>(
        &self,
        functions: &[FuncIndex],
        reads: Reads,
        min_len: usize,
        init: impl Fn() -> S + Sync + Send,
        walk: impl Fn(&mut S, &Function) -> R + Sync + Send,
    ) -> Vec<R>
    where
        R: Send,
    {
        parallel::map_init_indexed(functions, min_len, init, |state, position, &f| {
            let ahead = |distance| functions.get(position + distance).map(std::slice::from_ref);
            self.prefetch_ahead(
                ahead(prefetch::RECORD_AHEAD).unwrap_or_default(),
                ahead(prefetch::ARRAYS_AHEAD).unwrap_or_default(),
                reads,
            );
            walk(state, &self.functions[f].func)
        })
    }

    /// Asks for what a walk reading `reads` reads of the functions it comes to
    /// next: the parts of the `Function` records of `records`, and the start of
    /// the arrays of `arrays`, whose records were asked for before
    /// (`Reads::prefetch_record`, `Reads::prefetch_arrays`).
    pub(crate) fn prefetch_ahead(&self, records: &[FuncIndex], arrays: &[FuncIndex], reads: Reads) {
        for &f in records {
            reads.prefetch_record(&self.functions[f].func);
        }
        for &f in arrays {
            reads.prefetch_arrays(&self.functions[f].func);
        }
    }

    /// Mutable access to the definition at `index`. The body must keep the
    /// name it was pushed with, and every test-case name it holds must stay
    /// UTF-8, as [`Self::push`] checked: the name index and the passes rely on
    /// both (a body shared with a set built from this one is not checked again).
    pub fn get_mut(&mut self, index: FuncIndex) -> &mut DefinedFunction {
        &mut self.functions[index]
    }

    /// Runs `f` on every definition, in parallel (with the `parallel` feature). `f` must
    /// not rename the function (the name index would no longer match).
    pub(crate) fn par_for_each_mut(&mut self, f: impl Fn(FuncIndex, &mut DefinedFunction) + Sync) {
        let mut definitions: Vec<(FuncIndex, &mut DefinedFunction)> =
            self.functions.iter_mut().collect();
        parallel::for_each_mut(&mut definitions, 32, |(index, def)| f(*index, def));
    }

    /// All definitions in input order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (FuncIndex, &DefinedFunction)> {
        self.functions.iter()
    }

    /// The definition named `name`, if the module defines it.
    pub fn lookup(&self, name: &SymbolName) -> Option<FuncIndex> {
        self.by_name.get(name).copied()
    }

    /// The definition a borrowed name refers to, if the module defines it.
    pub(crate) fn lookup_key(&self, key: SymbolKey<'_>) -> Option<FuncIndex> {
        self.by_name.get(&key).copied()
    }

    /// The definition an external name inside `func` refers to, if the module
    /// defines it ([`SymbolKey::of_external`], then [`Self::lookup_key`]).
    pub(crate) fn lookup_external(
        &self,
        func: &Function,
        name: &ExternalName,
    ) -> Option<FuncIndex> {
        self.lookup_key(SymbolKey::of_external(func, name)?)
    }

    /// Which functions may name (in an import or a symbol: [`mentioned_names`])
    /// one of `named`: the only functions whose references to them can change,
    /// and the only ones that can take their address. One scan of every
    /// function, in parallel. When every function of `named` has a user name
    /// (`uN:M`, as compilers name functions), only the functions' tables of user
    /// names are read, an array of pairs per function; a function with an entry
    /// that nothing refers to may then be said to name one when it does not.
    pub(crate) fn naming(&self, named: &[FuncIndex]) -> SecondaryMap<FuncIndex, bool> {
        let mut naming: SecondaryMap<FuncIndex, bool> = SecondaryMap::with_capacity(self.len());
        if named.is_empty() {
            return naming;
        }
        // What a name is checked against: the members' user names when every
        // member has one, else the members themselves by index.
        enum Wanted {
            UserNames(FxHashSet<(u32, u32)>),
            Functions(SecondaryMap<FuncIndex, bool>),
        }
        let user_names: Option<FxHashSet<(u32, u32)>> = named
            .iter()
            .map(|&f| match &self.functions[f].func.name {
                UserFuncName::User(user) => Some((user.namespace, user.index)),
                UserFuncName::Testcase(_) => None,
            })
            .collect();
        let wanted = match user_names {
            Some(user_names) => Wanted::UserNames(user_names),
            None => {
                let mut functions = SecondaryMap::with_capacity(self.len());
                for &f in named {
                    functions[f] = true;
                }
                Wanted::Functions(functions)
            }
        };
        let functions: Vec<FuncIndex> = self.functions.keys().collect();
        let reads = match wanted {
            Wanted::UserNames(_) => Reads::UserNames,
            Wanted::Functions(_) => Reads::Names,
        };
        let names_one = self.map_walk(
            &functions,
            reads,
            64,
            || (),
            |_, func| match &wanted {
                Wanted::UserNames(user_names) => func
                    .params
                    .user_named_funcs()
                    .values()
                    .any(|user| user_names.contains(&(user.namespace, user.index))),
                Wanted::Functions(wanted) => mentioned_names(func)
                    .any(|name| self.lookup_external(func, name).is_some_and(|f| wanted[f])),
            },
        );
        for (f, names_one) in names_one.into_iter().enumerate() {
            naming[FuncIndex::new(f)] = names_one;
        }
        naming
    }

    /// Sets the linkage of a defined function.
    pub fn set_linkage(&mut self, index: FuncIndex, linkage: impl Into<Linkage>) {
        self.functions[index].linkage = linkage.into();
    }

    /// Records that `index`'s address is taken outside the functions of this set
    /// (for example a function pointer in a data object).
    pub fn mark_address_taken(&mut self, index: FuncIndex) {
        self.address_taken_outside[index] = true;
    }

    /// Whether [`Self::mark_address_taken`] was called for `index`.
    pub fn address_taken_outside(&self, index: FuncIndex) -> bool {
        self.address_taken_outside[index]
    }

    /// The function's name spelled as in CLIF text (`%foo`, `u0:12`).
    pub fn display_name(&self, index: FuncIndex) -> String {
        self.functions[index].func.name.to_string()
    }
}

/// What the plan needs to know of a module's functions: their linkage, and
/// whether they read machine state. A [`FunctionSet`] knows it of its functions; a module that keeps only the
/// compiled code of each function (`MergingModule`) knows it from its
/// declarations.
pub trait ModuleFunctions {
    /// The linkage of module function `index`.
    fn linkage(&self, index: FuncIndex) -> Linkage;

    /// Whether module function `index` reads its return address, frame pointer
    /// or stack pointer ([`reads_machine_state`](super::observable::reads_machine_state)):
    /// then no thunk may front it.
    fn reads_machine_state(&self, index: FuncIndex) -> bool;
}

impl ModuleFunctions for FunctionSet {
    fn linkage(&self, index: FuncIndex) -> Linkage {
        self.get(index).linkage
    }

    fn reads_machine_state(&self, index: FuncIndex) -> bool {
        super::observable::reads_machine_state(&self.get(index).func)
    }
}
