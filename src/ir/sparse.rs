//! [`SparseFunctionMap`]: a value for a few functions of a module (the
//! candidates' encodings, the rewritten functions' renames, the merged members'
//! entry points), found through four bytes per function instead of a slot of
//! the value's size per function, most of them empty.

use super::function_set::FuncIndex;
use cranelift_codegen::entity::packed_option::PackedOption;
use cranelift_codegen::entity::{PrimaryMap, SecondaryMap, entity_impl};

/// The place of a value among those of a [`SparseFunctionMap`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
struct ValueId(u32);
entity_impl!(ValueId);

/// A value for some functions of a module: the values in the order they were
/// first set, and per function where its value is, if it has one.
#[derive(Clone, Debug)]
pub struct SparseFunctionMap<T> {
    of: SecondaryMap<FuncIndex, PackedOption<ValueId>>,
    values: PrimaryMap<ValueId, T>,
}

impl<T> Default for SparseFunctionMap<T> {
    fn default() -> Self {
        Self {
            of: SecondaryMap::new(),
            values: PrimaryMap::new(),
        }
    }
}

impl<T> SparseFunctionMap<T> {
    /// An empty map whose index already spans `functions` functions (so
    /// setting values does not grow it).
    pub fn for_functions(functions: usize) -> Self {
        let mut map = Self::default();
        map.of.resize(functions);
        map
    }

    /// Makes room for `additional` more values, so that setting them does not
    /// move the ones set before (a value may be large: a whole `Function`).
    pub fn reserve(&mut self, additional: usize) {
        self.values.reserve(additional);
    }

    /// The value of `f`, if it has one.
    pub fn get(&self, f: FuncIndex) -> Option<&T> {
        Some(&self.values[self.of[f].expand()?])
    }

    /// The value of `f`, to change in place, if it has one.
    pub fn get_mut(&mut self, f: FuncIndex) -> Option<&mut T> {
        Some(&mut self.values[self.of[f].expand()?])
    }

    /// Makes `value` the value of `f`, replacing the one it had.
    pub fn insert(&mut self, f: FuncIndex, value: T) {
        match self.of[f].expand() {
            Some(at) => self.values[at] = value,
            None => self.of[f] = self.values.push(value).into(),
        }
    }

    /// Every function with a value, with it, in function order.
    pub fn iter(&self) -> impl Iterator<Item = (FuncIndex, &T)> {
        self.of
            .iter()
            .filter_map(|(f, at)| Some((f, &self.values[at.expand()?])))
    }

    /// How many functions have a value.
    pub fn len(&self) -> usize {
        self.values.len()
    }

    /// Whether no function has one.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::SparseFunctionMap;
    use crate::ir::FuncIndex;
    use cranelift_codegen::entity::EntityRef;

    #[test]
    fn found_by_function_replaced_in_place_listed_in_function_order() {
        let mut map = SparseFunctionMap::default();
        assert!(map.is_empty());
        map.insert(FuncIndex::new(7), "g");
        map.insert(FuncIndex::new(2), "f");
        map.insert(FuncIndex::new(7), "h");
        assert_eq!(map.len(), 2);
        assert!(map.get(FuncIndex::new(3)).is_none());
        assert!(map.get(FuncIndex::new(100)).is_none());
        assert_eq!(map.get(FuncIndex::new(7)), Some(&"h"));
        let listed: Vec<(usize, &str)> = map.iter().map(|(f, &v)| (f.index(), v)).collect();
        assert_eq!(listed, [(2, "f"), (7, "h")]);
        if let Some(value) = map.get_mut(FuncIndex::new(2)) {
            *value = "e";
        }
        assert_eq!(map.get(FuncIndex::new(2)), Some(&"e"));
        let presized: SparseFunctionMap<&str> = SparseFunctionMap::for_functions(10);
        assert!(presized.is_empty() && presized.iter().next().is_none());
    }
}
