//! Finishing a [`MergingModule`] over an `ObjectModule`: the symbol of every erased
//! or aliased duplicate points at the kept function's code, and the symbol of every
//! folded read-only data object at the kept object's bytes.

use super::merging::{MergeReport, MergingModule};
use crate::identical::plan::MergeAction;
use cranelift_module::ModuleResult;
use cranelift_object::{ObjectModule, ObjectProduct};

impl MergingModule<ObjectModule> {
    /// Runs the pass, compiles, finishes the object, and points the symbol of every
    /// erased or aliased duplicate at the kept function's code.
    pub fn finish_object(self) -> ModuleResult<(ObjectProduct, MergeReport)> {
        let (inner, report, merged) = self.merge_and_define(true)?;
        let mut product = inner.finish();
        if let Some(merged) = merged {
            // A function a whole-program decision removed (or promoted to a new
            // name) is local or hidden, and nothing in the program refers to it any
            // more; its symbol becomes local, loses its name and points at some
            // code of the object (an undefined symbol would not link).
            let anchor = merged.ids.iter().find_map(|&id| {
                let symbol = product.object.symbol(product.function_symbol(id));
                matches!(symbol.section, object::write::SymbolSection::Section(_))
                    .then_some(symbol.section)
            });
            for &id in &merged.redirected {
                let symbol = product.function_symbol(id);
                let symbol = product.object.symbol_mut(symbol);
                symbol.name.clear();
                symbol.scope = object::write::SymbolScope::Compilation;
                symbol.weak = false;
                if let Some(section) = anchor {
                    symbol.section = section;
                    symbol.value = 0;
                    symbol.size = 0;
                }
            }
            // A promoted function's old local symbol names its code under the new
            // name, so that aliases of it (below) find that code.
            for &(id, promoted) in &merged.promoted {
                let code = product.function_symbol(promoted);
                let (section, value, size, kind) = {
                    let k = product.object.symbol(code);
                    (k.section, k.value, k.size, k.kind)
                };
                let symbol = product.function_symbol(id);
                let symbol = product.object.symbol_mut(symbol);
                symbol.name.clear();
                symbol.scope = object::write::SymbolScope::Compilation;
                symbol.weak = false;
                (symbol.section, symbol.value, symbol.size, symbol.kind) =
                    (section, value, size, kind);
            }
            // A folded read-only data object names the kept object's bytes.
            for &(dup, kept) in &merged.data_aliases {
                let kept = product.data_symbol(kept);
                let (section, value, size, kind) = {
                    let k = product.object.symbol(kept);
                    (k.section, k.value, k.size, k.kind)
                };
                let dup = product.data_symbol(dup);
                let symbol = product.object.symbol_mut(dup);
                (symbol.section, symbol.value, symbol.size, symbol.kind) =
                    (section, value, size, kind);
            }
            for d in &merged.plan.decisions {
                if d.action == MergeAction::Thunk {
                    continue;
                }
                let kept = product.function_symbol(merged.id(d.into));
                let dup = product.function_symbol(merged.id(d.function));
                let (section, value, size, kind) = {
                    let k = product.object.symbol(kept);
                    (k.section, k.value, k.size, k.kind)
                };
                let symbol = product.object.symbol_mut(dup);
                symbol.section = section;
                symbol.value = value;
                symbol.size = size;
                symbol.kind = kind;
                if d.action == MergeAction::Erase {
                    // An erased function is local and nothing refers to it any more;
                    // the symbol cranelift-object made when it was declared cannot be
                    // deleted, but it can lose its name.
                    symbol.name.clear();
                }
            }
        }
        Ok((product, report))
    }
}
