//! Entry points: each member of a merged group keeps its name, signature and
//! address, and becomes a body that calls the merged body with its own constants
//! and callee addresses (`return_call` where the calling convention allows tail
//! calls and the ISA keeps frame pointers). [`EntryPoints`] holds the
//! members' new bodies by function.

use super::groups::{HoleKind, HoleParameter};
use super::size_model::{Feature, SizeFeatures};
use crate::identical::thunks::{ForwardedArgument, build_forwarding_body};
use crate::ir::{FuncIndex, FunctionSet, SparseFunctionMap};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Function, types};

/// Each merged member's new body (its entry point), by function.
///
/// Kept for the members only (a sparse map inside), as a `Function` in place per
/// function of the module would take 960 bytes each, a megabyte for a program of
/// a thousand functions, mostly empty and all written once.
#[derive(Clone, Debug, Default)]
pub struct EntryPoints(SparseFunctionMap<Function>);

impl EntryPoints {
    /// The entry point of function `f`, if `f` became one.
    pub fn get(&self, f: FuncIndex) -> Option<&Function> {
        self.0.get(f)
    }

    /// The entry point of function `f`, to change in place, if `f` became one.
    pub fn get_mut(&mut self, f: FuncIndex) -> Option<&mut Function> {
        self.0.get_mut(f)
    }

    /// Makes room for `additional` more entry points.
    pub(crate) fn reserve(&mut self, additional: usize) {
        self.0.reserve(additional);
    }

    /// Makes `entry` the entry point of function `f`.
    pub(crate) fn insert(&mut self, f: FuncIndex, entry: Function) {
        self.0.insert(f, entry);
    }

    /// Every function that became an entry point, with its new body, in function
    /// order.
    pub fn iter(&self) -> impl Iterator<Item = (FuncIndex, &Function)> {
        self.0.iter()
    }

    /// Keeps the entry points of the functions `keep` accepts and drops the
    /// others' (whose bodies are then their own again): what leaving groups out
    /// of an outcome takes.
    pub fn retain(&mut self, mut keep: impl FnMut(FuncIndex) -> bool) {
        let mut kept = SparseFunctionMap::default();
        for (f, entry) in self.0.iter().filter(|&(f, _)| keep(f)) {
            kept.insert(f, entry.clone());
        }
        self.0 = kept;
    }

    /// How many functions became entry points.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether no function became one.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// One entry point per member of `members` (in member order), each calling
/// `merged` with its own values of `parameters`. `frame_pointers`: whether the
/// target keeps them (Cranelift compiles `return_call` only then).
pub(crate) fn build_entry_points(
    module: &FunctionSet,
    members: &[FuncIndex],
    parameters: &[HoleParameter],
    merged: &Function,
    frame_pointers: bool,
) -> Vec<Function> {
    members
        .iter()
        .enumerate()
        .map(|(i, &m)| {
            let func = &module.get(m).func;
            let extra: Vec<ForwardedArgument> = parameters
                .iter()
                .map(|p| match p.kind {
                    HoleKind::Constant | HoleKind::CalleeLoadOffset | HoleKind::Selector => {
                        ForwardedArgument::Constant(p.ty, p.values[i])
                    }
                    HoleKind::Callee => {
                        let callee = &module.get(FuncIndex::new(p.values[i] as usize)).func;
                        ForwardedArgument::FunctionAddress {
                            name: callee.name.clone(),
                            signature: callee.signature.clone(),
                            pointer: p.ty,
                        }
                    }
                })
                .collect();
            let tail_call = tail_calls(func, frame_pointers);
            build_forwarding_body(func, &merged.name, &merged.signature, &extra, tail_call)
        })
        .collect()
}

/// Whether `func`'s entry point ends in `return_call`.
fn tail_calls(func: &Function, frame_pointers: bool) -> bool {
    func.signature.call_conv.supports_tail_calls() && frame_pointers
}

/// The size-model features of the entry points `build_entry_points` builds (in
/// member order), counted without building them: a block whose parameters are
/// the member's, one constant (`iconst`, `f32const`, `f64const`) or `func_addr`
/// per parameter of the merged body, and a `return_call`, or a `call` and a
/// `return`, passing all of them. `tests/passes/parallel.rs` checks them against
/// [`SizeFeatures::of`] the built entry points.
pub fn entry_point_features(
    module: &FunctionSet,
    members: &[FuncIndex],
    parameters: &[HoleParameter],
    frame_pointers: bool,
) -> Vec<SizeFeatures> {
    members
        .iter()
        .enumerate()
        .map(|(i, &m)| {
            let func = &module.get(m).func;
            let mut features = SizeFeatures::default();
            let params = func.signature.params.len();
            features.add(Feature::Function, 1);
            features.add(Feature::Params, params);
            features.add(Feature::StackParams, params.saturating_sub(6));
            features.add(Feature::Blocks, 1);
            for p in parameters {
                let feature = match p.kind {
                    HoleKind::Callee => Feature::Addresses,
                    _ if p.ty == types::F32 || p.ty == types::F64 => Feature::FloatConstants,
                    // `iconst` keeps the value as given (`bits as i64`).
                    _ if i32::try_from(p.values[i] as i64).is_ok() => Feature::SmallConstants,
                    _ => Feature::LargeConstants,
                };
                features.add(feature, 1);
            }
            features.add(Feature::Calls, 1);
            features.add(Feature::CallArguments, params + parameters.len());
            if !tail_calls(func, frame_pointers) {
                features.add(Feature::Returns, 1);
            }
            features
        })
        .collect()
}
