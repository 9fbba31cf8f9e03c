//! Symbol names of functions and data, independent of any one function's tables.
//!
//! A CLIF function refers to other functions through function-local handles
//! (`FuncRef` → `ExtFuncData` → `UserExternalNameRef`). To compare references across
//! functions, every name is turned into a [`SymbolName`] (owned, the key of a
//! module's name table) or read as a [`SymbolKey`] (borrowed, no allocation, and
//! usable to search that table).

use cranelift_codegen::ir::{
    ExternalName, Function, KnownSymbol, LibCall, UserExternalName, UserFuncName,
};
use hashbrown::Equivalent;
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
        match name {
            UserFuncName::User(UserExternalName { namespace, index }) => Self::User {
                namespace: *namespace,
                index: *index,
            },
            UserFuncName::Testcase(t) => Self::Testcase(t.raw().into()),
        }
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
    pub fn key(&self) -> SymbolKey<'_> {
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
