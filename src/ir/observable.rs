//! What a program can observe of where its code is, written once for every
//! comparator and every plan: whether function addresses are significant
//! ([`MergeMode`]), when two references to different functions of one class are
//! still the same reference ([`target_match`]), and which functions must never be
//! reached through an extra frame ([`reads_machine_state`]).
//!
//! The IR comparator (`identical/encode.rs`) and the machine-code comparison of
//! `MergingModule` (`module/compiled.rs`) ask [`target_match`]; the summaries of
//! separate compilation (IR and machine code) ask
//! [`target_match_across_modules`]; the single-module plan, the whole-program
//! plan and the similar merge all ask [`reads_machine_state`].

use super::linkage::Linkage;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Function, Inst, Opcode};
use std::str::FromStr;

/// Whether function addresses are significant.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum MergeMode {
    /// Distinct functions whose addresses can be observed keep distinct addresses.
    #[default]
    Safe,
    /// Addresses are not significant: duplicates that stay symbols become aliases.
    All,
}

impl FromStr for MergeMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "safe" => Ok(Self::Safe),
            "all" => Ok(Self::All),
            _ => Err(format!("unknown mode `{s}` (expected `safe` or `all`)")),
        }
    }
}

/// What a reference does with the function it names.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Reference {
    /// Transfers control to it (a direct call or tail call): only its code matters.
    Call,
    /// Takes its address (`func_addr`, a function symbol in a global value or in
    /// data, any relocation that is not a direct call): the address is a value
    /// the program can compare.
    Address,
}

/// How two references to functions of the module must agree for their functions
/// to be equal.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum TargetMatch {
    /// Any two functions of one class: both references mean the same thing in the
    /// output.
    ByClass,
    /// Only the very same function.
    Exact,
}

/// How a reference of kind `reference` to a module function of linkage `target`
/// compares, under `mode`. The question behind it: will two different members of
/// one class, so referenced, be the same thing in the output?
///
/// * A preemptible target may be replaced by the linker: only itself is itself.
/// * A call runs the kept function's code whether its target is kept, erased,
///   aliased or a thunk.
/// * An address is the same only if both targets end up at one address. In mode
///   all every member that is not preemptible is erased or aliased into the kept
///   function, so they do. In safe mode at most one member whose address matters
///   shares the kept code's address (`identical::plan`), so two different members
///   whose addresses are taken never do.
pub fn target_match(reference: Reference, target: Linkage, mode: MergeMode) -> TargetMatch {
    match (reference, mode) {
        _ if target == Linkage::Preemptible => TargetMatch::Exact,
        (Reference::Call, _) | (Reference::Address, MergeMode::All) => TargetMatch::ByClass,
        (Reference::Address, MergeMode::Safe) => TargetMatch::Exact,
    }
}

/// How a reference compares in a summary of a separately compiled module, where
/// the whole-program plan may merge it with a function of another module.
///
/// Across modules a merged function whose address is taken stays a symbol with
/// code and an address of its own (a thunk: an object file cannot alias a symbol
/// another object defines), in every mode, and a reference to it keeps naming it.
/// So two members of one class never end up at one address there, and an address
/// matches only the very same function; calls compare as in [`target_match`].
#[cfg(all(feature = "module", feature = "separate"))]
pub fn target_match_across_modules(reference: Reference, target: Linkage) -> TargetMatch {
    match reference {
        _ if target == Linkage::Preemptible => TargetMatch::Exact,
        Reference::Call => TargetMatch::ByClass,
        Reference::Address => TargetMatch::Exact,
    }
}

/// Whether `opcode` reads machine state that depends on the frame it runs in: the
/// return address, the frame pointer or the stack pointer.
pub fn reads_frame(opcode: Opcode) -> bool {
    matches!(
        opcode,
        Opcode::GetReturnAddress | Opcode::GetFramePointer | Opcode::GetStackPointer
    )
}

/// Whether `func` reads its return address, frame pointer or stack pointer. Such
/// a function may be erased or aliased (its callers then call equal code from
/// the same place) but never reached through a thunk or an entry point, whose
/// extra frame would change what it reads.
pub fn reads_machine_state(func: &Function) -> bool {
    (0..func.dfg.num_insts()).map(Inst::new).any(|inst| {
        reads_frame(func.dfg.insts[inst].opcode()) && func.layout.inst_block(inst).is_some()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_calls_of_replaceable_functions_and_shared_addresses_compare_by_class() {
        use Linkage::*;
        for mode in [MergeMode::Safe, MergeMode::All] {
            for linkage in [Local, Hidden, Export] {
                assert_eq!(
                    target_match(Reference::Call, linkage, mode),
                    TargetMatch::ByClass
                );
            }
            for reference in [Reference::Call, Reference::Address] {
                assert_eq!(
                    target_match(reference, Preemptible, mode),
                    TargetMatch::Exact
                );
            }
        }
        for linkage in [Local, Hidden, Export] {
            assert_eq!(
                target_match(Reference::Address, linkage, MergeMode::Safe),
                TargetMatch::Exact
            );
            assert_eq!(
                target_match(Reference::Address, linkage, MergeMode::All),
                TargetMatch::ByClass
            );
        }
    }

    #[test]
    #[cfg(all(feature = "module", feature = "separate"))]
    fn across_modules_only_calls_of_replaceable_functions_compare_by_class() {
        use Linkage::*;
        for linkage in [Local, Hidden, Export] {
            assert_eq!(
                target_match_across_modules(Reference::Call, linkage),
                TargetMatch::ByClass
            );
            assert_eq!(
                target_match_across_modules(Reference::Address, linkage),
                TargetMatch::Exact
            );
        }
        for reference in [Reference::Call, Reference::Address] {
            assert_eq!(
                target_match_across_modules(reference, Preemptible),
                TargetMatch::Exact
            );
            // Summaries walk their IR as in safe mode (`summary_walk`).
            for linkage in [Local, Hidden, Export, Preemptible] {
                assert_eq!(
                    target_match_across_modules(reference, linkage),
                    target_match(reference, linkage, MergeMode::Safe)
                );
            }
        }
    }
}
