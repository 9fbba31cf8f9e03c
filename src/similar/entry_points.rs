//! Entry points: each member of a merged group keeps its name, signature and
//! address, and becomes a body that calls the merged body with its own constants
//! and callee addresses (`return_call` where the calling convention allows tail
//! calls and the ISA keeps frame pointers). [`EntryPoints`] holds the
//! members' new bodies by function.

use super::groups::{HoleKind, HoleParameter};
use super::size_model::{Feature, SizeFeatures};
use crate::identical::thunks::{ForwardedArgument, build_forwarding_body};
use crate::ir::{FuncIndex, FunctionSet};
use cranelift_codegen::entity::packed_option::PackedOption;
use cranelift_codegen::entity::{EntityRef, PrimaryMap, SecondaryMap, entity_impl};
use cranelift_codegen::ir::{Function, types};

/// The place of an entry point among the bodies of [`EntryPoints`].
#[derive(Copy, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Debug)]
struct EntryPointId(u32);
entity_impl!(EntryPointId);

/// Each merged member's new body (its entry point), by function. Four bytes
/// per function of the module and the bodies of the members only: a
/// `Function` in place per function would take 960 bytes each, a megabyte for
/// a program of a thousand functions, mostly empty and all written once.
#[derive(Clone, Default)]
pub struct EntryPoints {
    of: SecondaryMap<FuncIndex, PackedOption<EntryPointId>>,
    bodies: PrimaryMap<EntryPointId, Function>,
}

impl EntryPoints {
    /// The entry point of `f`, if `f` is a merged member.
    pub fn get(&self, f: FuncIndex) -> Option<&Function> {
        Some(&self.bodies[self.of[f].expand()?])
    }

    /// The entry point of `f`, to change in place, if `f` is a merged member.
    pub fn get_mut(&mut self, f: FuncIndex) -> Option<&mut Function> {
        Some(&mut self.bodies[self.of[f].expand()?])
    }

    /// Makes `body` the entry point of `f`, replacing the one it had.
    pub fn insert(&mut self, f: FuncIndex, body: Function) {
        match self.of[f].expand() {
            Some(at) => self.bodies[at] = body,
            None => self.of[f] = self.bodies.push(body).into(),
        }
    }

    /// Every entry point with its function, in function order.
    pub fn iter(&self) -> impl Iterator<Item = (FuncIndex, &Function)> {
        self.of
            .iter()
            .filter_map(|(f, at)| Some((f, &self.bodies[at.expand()?])))
    }

    /// How many functions have an entry point.
    pub fn len(&self) -> usize {
        self.bodies.len()
    }

    /// Whether no function has one.
    pub fn is_empty(&self) -> bool {
        self.bodies.is_empty()
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
/// `return`, passing all of them. `tests/parallel.rs` checks them against
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

#[cfg(test)]
mod tests {
    use super::EntryPoints;
    use crate::ir::FuncIndex;
    use cranelift_codegen::entity::EntityRef;
    use cranelift_codegen::ir::{Function, UserFuncName};

    fn body(name: &str) -> Function {
        Function::with_name_signature(
            UserFuncName::testcase(name),
            cranelift_codegen::ir::Signature::new(cranelift_codegen::isa::CallConv::SystemV),
        )
    }

    #[test]
    fn found_by_function_replaced_in_place_listed_in_function_order() {
        let mut entry_points = EntryPoints::default();
        assert!(entry_points.is_empty());
        entry_points.insert(FuncIndex::new(7), body("g"));
        entry_points.insert(FuncIndex::new(2), body("f"));
        entry_points.insert(FuncIndex::new(7), body("h"));
        assert_eq!(entry_points.len(), 2);
        assert!(entry_points.get(FuncIndex::new(3)).is_none());
        assert!(entry_points.get(FuncIndex::new(100)).is_none());
        let name = |f: &Function| f.name.to_string();
        assert_eq!(
            entry_points.get(FuncIndex::new(7)).map(name).as_deref(),
            Some("%h")
        );
        let listed: Vec<(usize, String)> = entry_points
            .iter()
            .map(|(f, body)| (f.index(), name(body)))
            .collect();
        assert_eq!(listed, [(2, "%f".to_string()), (7, "%h".to_string())]);
        if let Some(body) = entry_points.get_mut(FuncIndex::new(2)) {
            body.name = UserFuncName::testcase("e");
        }
        assert_eq!(
            entry_points.get(FuncIndex::new(2)).map(name).as_deref(),
            Some("%e")
        );
    }
}
