//! Finishing a [`MergingModule`] over an `ObjectModule`: the symbol of every erased
//! or aliased duplicate points at the kept function's code, and the symbol of every
//! folded read-only data object at the kept object's bytes.

use super::merging::{MergeReport, MergingModule};
use crate::identical::plan::MergeAction;
use cranelift_module::ModuleResult;
use cranelift_object::{ObjectModule, ObjectProduct};
use object::write::{Object, SymbolId, SymbolScope, SymbolSection};

/// Points symbol `to` at what symbol `from` names: its section, offset, size and
/// kind (`to` keeps its name, scope and weak flag).
fn point_at(object: &mut Object<'_>, to: SymbolId, from: SymbolId) {
    let (section, value, size, kind) = {
        let from = object.symbol(from);
        (from.section, from.value, from.size, from.kind)
    };
    let symbol = object.symbol_mut(to);
    (symbol.section, symbol.value, symbol.size, symbol.kind) = (section, value, size, kind);
}

/// Makes symbol `id` nameless and local: nothing refers to it any more, and the
/// symbol cranelift-object made when it was declared cannot be deleted.
fn retire(object: &mut Object<'_>, id: SymbolId) {
    let symbol = object.symbol_mut(id);
    symbol.name.clear();
    symbol.scope = SymbolScope::Compilation;
    symbol.weak = false;
}

impl MergingModule<ObjectModule> {
    /// Runs the pass, compiles, finishes the object, and points the symbol of every
    /// erased or aliased duplicate at the kept function's code.
    pub fn finish_object(self) -> ModuleResult<(ObjectProduct, MergeReport)> {
        let (inner, report, merged) = self.merge_and_define(true)?;
        let mut product = inner.finish();
        let Some(merged) = merged else {
            return Ok((product, report));
        };
        // A function a whole-program decision removed is local or hidden, and
        // nothing in the program refers to it any more; its symbol is retired and
        // points at some code of the object (an undefined symbol would not link).
        let anchor = merged.ids.iter().find_map(|&id| {
            let symbol = product.function_symbol(id);
            matches!(
                product.object.symbol(symbol).section,
                SymbolSection::Section(_)
            )
            .then_some(symbol)
        });
        for &id in &merged.redirected {
            let symbol = product.function_symbol(id);
            retire(&mut product.object, symbol);
            if let Some(anchor) = anchor {
                point_at(&mut product.object, symbol, anchor);
                product.object.symbol_mut(symbol).size = 0;
            }
        }
        // A promoted function's old local symbol names its code under the new
        // name, so that aliases of it (below) find that code.
        for &(id, promoted) in &merged.promoted {
            let (symbol, code) = (
                product.function_symbol(id),
                product.function_symbol(promoted),
            );
            retire(&mut product.object, symbol);
            point_at(&mut product.object, symbol, code);
        }
        // A folded read-only data object names the kept object's bytes.
        for &(dup, kept) in &merged.data_aliases {
            let (dup, kept) = (product.data_symbol(dup), product.data_symbol(kept));
            point_at(&mut product.object, dup, kept);
        }
        for d in merged.codeless() {
            let kept = product.function_symbol(merged.id(d.into));
            let dup = product.function_symbol(merged.id(d.function));
            point_at(&mut product.object, dup, kept);
            if d.action == MergeAction::Erase {
                // An erased function is local and nothing refers to it any more.
                product.object.symbol_mut(dup).name.clear();
            }
        }
        Ok((product, report))
    }
}
