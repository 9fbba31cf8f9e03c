//! Symbol names of functions and data, independent of any one function's tables.
//!
//! A CLIF function refers to other functions through function-local handles
//! (`FuncRef` → `ExtFuncData` → `UserExternalNameRef`). To compare references across
//! functions, every name is turned into a [`SymbolName`] (owned, the key of a
//! module's name table) or read as a [`SymbolKey`] (borrowed, no allocation, and
//! usable to search that table).

use cranelift_codegen::ir::{
    ExternalName, Function, GlobalValueData, KnownSymbol, LibCall, UserExternalName, UserFuncName,
};
use hashbrown::{Equivalent, HashSet};
use std::fmt;
use std::hash::{Hash, Hasher};

/// A symbol name as seen from outside any function: what a linker would see.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SymbolName {
    /// `uN:M`: a user-defined name (namespace, index).
    User {
        /// The namespace (`N` in `uN:M`).
        namespace: u32,
        /// The index within the namespace (`M` in `uN:M`).
        index: u32,
    },
    /// `%name`: a test-case name, kept as raw bytes (it may not be UTF-8).
    Testcase(Box<[u8]>),
    /// A well-known runtime library function.
    LibCall(LibCall),
    /// A well-known symbol.
    Known(KnownSymbol),
}

impl SymbolName {
    /// The name a function definition declares for itself.
    pub fn of_function(func: &Function) -> Self {
        Self::of_user_func_name(&func.name)
    }

    /// The symbol of a function's own name.
    pub fn of_user_func_name(name: &UserFuncName) -> Self {
        SymbolKey::of_user_func_name(name).to_name()
    }

    /// The symbol an external name inside `func` refers to.
    ///
    /// Returns `None` for a `User` reference that is missing from the function's
    /// name table (only possible in unverified IR).
    pub fn of_external(func: &Function, name: &ExternalName) -> Option<Self> {
        SymbolKey::of_external(func, name).map(SymbolKey::to_name)
    }
}

/// A borrowed [`SymbolName`]: what a reference inside a function names, read
/// without allocating. It hashes like the owned name, so a table of owned names can
/// be searched with it.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash)]
pub enum SymbolKey<'a> {
    /// `uN:M`.
    User {
        /// The namespace.
        namespace: u32,
        /// The index within the namespace.
        index: u32,
    },
    /// `%name`, as raw bytes.
    Testcase(&'a [u8]),
    /// A runtime library function.
    LibCall(LibCall),
    /// A well-known symbol.
    Known(KnownSymbol),
}

impl<'a> SymbolKey<'a> {
    /// The symbol an external name inside `func` refers to; `None` for a `User`
    /// reference missing from the function's name table (unverified IR only).
    pub fn of_external(func: &'a Function, name: &'a ExternalName) -> Option<Self> {
        Some(match name {
            ExternalName::User(r) => {
                let user = func.params.user_named_funcs().get(*r)?;
                Self::User {
                    namespace: user.namespace,
                    index: user.index,
                }
            }
            ExternalName::TestCase(t) => Self::Testcase(t.raw()),
            ExternalName::LibCall(l) => Self::LibCall(*l),
            ExternalName::KnownSymbol(k) => Self::Known(*k),
        })
    }

    /// The symbol of a function's own name.
    pub fn of_user_func_name(name: &'a UserFuncName) -> Self {
        match name {
            UserFuncName::User(UserExternalName { namespace, index }) => Self::User {
                namespace: *namespace,
                index: *index,
            },
            UserFuncName::Testcase(t) => Self::Testcase(t.raw()),
        }
    }

    /// The owned name.
    pub fn to_name(self) -> SymbolName {
        match self {
            Self::User { namespace, index } => SymbolName::User { namespace, index },
            Self::Testcase(raw) => SymbolName::Testcase(raw.into()),
            Self::LibCall(l) => SymbolName::LibCall(l),
            Self::Known(k) => SymbolName::Known(k),
        }
    }
}

impl SymbolName {
    /// The borrowed view of this name.
    pub(crate) fn key(&self) -> SymbolKey<'_> {
        match self {
            Self::User { namespace, index } => SymbolKey::User {
                namespace: *namespace,
                index: *index,
            },
            Self::Testcase(raw) => SymbolKey::Testcase(raw),
            Self::LibCall(l) => SymbolKey::LibCall(*l),
            Self::Known(k) => SymbolKey::Known(*k),
        }
    }
}

impl Hash for SymbolName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl Equivalent<SymbolName> for SymbolKey<'_> {
    fn equivalent(&self, name: &SymbolName) -> bool {
        *self == name.key()
    }
}

/// The key of a module's name table (`FunctionSet`): a [`SymbolName`], with a
/// short test-case name kept in the key itself, so that a lookup compares it
/// without reading a cache line of its own. (On a generated module of 100k
/// `%f…` functions, that read was a third of the time the encoding took.) It
/// hashes and compares like the name.
#[derive(Clone, Debug)]
pub(crate) enum TableName {
    /// A test-case name of at most [`INLINE_NAME_BYTES`] bytes.
    Inline {
        /// How many of `bytes` are the name.
        len: u8,
        /// The name, padded with zeros.
        bytes: [u8; INLINE_NAME_BYTES],
    },
    /// Any other name.
    Other(SymbolName),
}

/// The longest test-case name a [`TableName`] holds inline.
const INLINE_NAME_BYTES: usize = 22;

impl TableName {
    /// A short test-case name, inline.
    fn inline(raw: &[u8]) -> Option<Self> {
        (raw.len() <= INLINE_NAME_BYTES).then(|| {
            let mut bytes = [0; INLINE_NAME_BYTES];
            bytes[..raw.len()].copy_from_slice(raw);
            Self::Inline {
                len: raw.len() as u8,
                bytes,
            }
        })
    }

    /// The key of the name `key` borrows, allocating only for a long one.
    pub(crate) fn of_key(key: SymbolKey<'_>) -> Self {
        match key {
            SymbolKey::Testcase(raw) => Self::inline(raw),
            _ => None,
        }
        .unwrap_or_else(|| Self::Other(key.to_name()))
    }

    /// The key of `name`.
    pub(crate) fn new(name: SymbolName) -> Self {
        match &name {
            SymbolName::Testcase(raw) => Self::inline(raw),
            _ => None,
        }
        .unwrap_or(Self::Other(name))
    }

    /// The name, borrowed.
    pub(crate) fn key(&self) -> SymbolKey<'_> {
        match self {
            Self::Inline { len, bytes } => SymbolKey::Testcase(&bytes[..usize::from(*len)]),
            Self::Other(name) => name.key(),
        }
    }
}

impl Hash for TableName {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl PartialEq for TableName {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl Eq for TableName {}

impl Equivalent<TableName> for SymbolKey<'_> {
    fn equivalent(&self, name: &TableName) -> bool {
        *self == name.key()
    }
}

impl Equivalent<TableName> for SymbolName {
    fn equivalent(&self, name: &TableName) -> bool {
        self.key() == name.key()
    }
}

impl fmt::Display for SymbolName {
    /// Spells the name as CLIF text does after `function `, e.g. `%foo` or `u0:12`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::User { namespace, index } => write!(f, "u{namespace}:{index}"),
            Self::Testcase(raw) => write!(f, "%{}", String::from_utf8_lossy(raw)),
            Self::LibCall(l) => write!(f, "%{l}"),
            Self::Known(k) => write!(f, "%{k}"),
        }
    }
}

/// Every external name `func` mentions: the names of the functions it imports (for
/// calls and `func_addr`) and of the symbols its global values refer to, in table
/// order. The one place that knows where a function can mention a name.
pub fn mentioned_names(func: &Function) -> impl Iterator<Item = &ExternalName> {
    let functions = func.dfg.ext_funcs.values().map(|data| &data.name);
    let globals = func.global_values.values().filter_map(|gv| match gv {
        GlobalValueData::Symbol { name, .. } => Some(name),
        _ => None,
    });
    functions.chain(globals)
}

/// The names a module uses, so that a pass that invents a name (the merged body of
/// similar functions) never picks one that already means something: a function the
/// module defines, a function or symbol it only declares (an import), a name an
/// earlier pass left behind (an alias), or a name the caller reserves. Invented
/// names are reserved as they are handed out, and the search for a free `uN:M`
/// index wraps around instead of saturating, so it always ends on a free one.
#[derive(Clone, Debug, Default)]
pub struct NameAuthority {
    taken: HashSet<SymbolName>,
}

impl NameAuthority {
    /// An authority that knows no name yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reserves `name`; returns whether it was free.
    pub fn reserve(&mut self, name: SymbolName) -> bool {
        self.taken.insert(name)
    }

    /// Reserves the name `func` defines and every name it mentions, including
    /// entries of its user-name table that nothing refers to.
    pub fn reserve_function(&mut self, func: &Function) {
        self.reserve(SymbolName::of_function(func));
        // A user name is an entry of the user-name table, reserved below.
        for name in mentioned_names(func).filter(|name| !matches!(name, ExternalName::User(_))) {
            if let Some(key) = SymbolKey::of_external(func, name) {
                self.reserve(key.to_name());
            }
        }
        for (_, user) in func.params.user_named_funcs().iter() {
            self.reserve(SymbolName::User {
                namespace: user.namespace,
                index: user.index,
            });
        }
    }

    /// The first free test-case name of `base_merged`, `base_merged1`, ...,
    /// reserved.
    pub fn fresh_testcase(&mut self, base: &str, suffix: &str) -> UserFuncName {
        for k in 0u64.. {
            let name = match k {
                0 => format!("{base}{suffix}"),
                k => format!("{base}{suffix}{k}"),
            };
            if self.reserve(SymbolName::Testcase(name.as_bytes().into())) {
                return UserFuncName::testcase(name);
            }
        }
        unreachable!("the module uses finitely many names")
    }

    /// The first free `namespace:index` at or after `start` (wrapping around past
    /// the largest index), reserved.
    pub fn fresh_user(&mut self, namespace: u32, start: u32) -> UserFuncName {
        let mut index = start;
        loop {
            if self.reserve(SymbolName::User { namespace, index }) {
                return UserFuncName::User(UserExternalName::new(namespace, index));
            }
            index = index.wrapping_add(1);
            // A namespace has 2^32 indices and a module uses far fewer names.
            debug_assert_ne!(index, start, "namespace {namespace} is full");
        }
    }
}
