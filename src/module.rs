//! The unit the pass works on: a set of CLIF function definitions with their linkage.

use crate::symbols::SymbolName;
use cranelift_codegen::entity::{PrimaryMap, entity_impl};
use cranelift_codegen::ir::Function;
use cranelift_module::Linkage;
use std::collections::HashMap;
use std::fmt;

/// Index of a function definition within a [`FunctionSet`], in input order.
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct FuncIndex(u32);
entity_impl!(FuncIndex, "def");

/// One function defined in the module.
#[derive(Clone)]
pub struct DefinedFunction {
    /// The CLIF body.
    pub func: Function,
    /// How visible the function is outside the module (`Local` unless told otherwise).
    pub linkage: Linkage,
}

/// Error when two definitions share a name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DuplicateDefinition {
    /// The name defined twice, spelled as in CLIF.
    pub name: String,
}

impl fmt::Display for DuplicateDefinition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "function {} is defined more than once", self.name)
    }
}

impl std::error::Error for DuplicateDefinition {}

/// The functions of one module, in input (definition) order, with a name index.
#[derive(Default)]
pub struct FunctionSet {
    functions: PrimaryMap<FuncIndex, DefinedFunction>,
    by_name: HashMap<SymbolName, FuncIndex>,
}

impl FunctionSet {
    /// An empty module.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a definition; names must be unique within the module.
    pub fn push(
        &mut self,
        func: Function,
        linkage: Linkage,
    ) -> Result<FuncIndex, DuplicateDefinition> {
        let name = SymbolName::of_function(&func);
        if self.by_name.contains_key(&name) {
            return Err(DuplicateDefinition {
                name: func.name.to_string(),
            });
        }
        let index = self.functions.push(DefinedFunction { func, linkage });
        self.by_name.insert(name, index);
        Ok(index)
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

    /// Mutable access to the definition at `index`.
    pub fn get_mut(&mut self, index: FuncIndex) -> &mut DefinedFunction {
        &mut self.functions[index]
    }

    /// All definitions in input order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = (FuncIndex, &DefinedFunction)> {
        self.functions.iter()
    }

    /// The definition named `name`, if the module defines it.
    pub fn lookup(&self, name: &SymbolName) -> Option<FuncIndex> {
        self.by_name.get(name).copied()
    }

    /// Sets the linkage of a defined function.
    pub fn set_linkage(&mut self, index: FuncIndex, linkage: Linkage) {
        self.functions[index].linkage = linkage;
    }

    /// The function's name spelled as in CLIF text (`%foo`, `u0:12`).
    pub fn display_name(&self, index: FuncIndex) -> String {
        self.functions[index].func.name.to_string()
    }
}
