//! Thunks through `MergingModule`: a `tail` function's thunk (a CLIF `return_call`
//! with frame pointers, a machine jump without) works when called through its
//! pointer (JIT), and on an ISA without a machine-level jump thunk the `call` +
//! `return` fallback compiles (riscv64, not run).

use clif_merge::module::{MergingModule, ModuleMergeOptions};
use clif_merge::{MergeAction, MergeMode, MergeOptions};
use cranelift_codegen::Context;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};
use cranelift_module::{DataDescription, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use object::{Object, ObjectSymbol};
use std::str::FromStr;

/// Declares `name` with `body` (a CLIF function whose own name is `u0:{id}`).
fn define<M: Module>(
    module: &mut M,
    name: &str,
    linkage: Linkage,
    body: &str,
) -> cranelift_module::FuncId {
    let id_guess = module.declarations().get_functions().count();
    let text = format!("function u0:{id_guess}{body}");
    let func = cranelift_reader::parse_functions(&text)
        .unwrap_or_else(|e| panic!("{name}: {e}"))
        .remove(0);
    let id = module
        .declare_function(name, linkage, &func.signature)
        .expect("declare");
    assert_eq!(id.as_u32() as usize, id_guess);
    module
        .define_function(id, &mut Context::for_function(func))
        .expect("define");
    id
}

const TAIL_BODY: &str = "(i64) -> i64 tail {
block0(v0: i64):
    v1 = iconst.i64 5
    v2 = imul v0, v1
    return v2
}";

fn table<M: Module>(module: &mut M, ids: &[cranelift_module::FuncId]) -> cranelift_module::DataId {
    let table = module
        .declare_data("table", Linkage::Export, true, false)
        .expect("declare data");
    let mut desc = DataDescription::new();
    desc.define(vec![0u8; 8 * ids.len()].into_boxed_slice());
    for (i, id) in ids.iter().enumerate() {
        let fref = module.declare_func_in_data(*id, &mut desc);
        desc.write_function_addr(8 * i as u32, fref);
    }
    module.define_data(table, &desc).expect("define data");
    table
}

/// With frame pointers the thunk of a `tail` function is a CLIF `return_call`;
/// without them (Cranelift needs them for tail calls) a machine jump on x86_64 and
/// aarch64. Either way, calling through the thunk's address gives the same result.
#[test]
fn tail_function_thunks_work_with_and_without_frame_pointers() {
    for frame_pointers in ["true", "false"] {
        tail_thunk_round(frame_pointers);
    }
}

fn tail_thunk_round(frame_pointers: &str) {
    let mut results = Vec::new();
    for enabled in [false, true] {
        let mut flags = settings::builder();
        flags
            .set("preserve_frame_pointers", frame_pointers)
            .expect("flag");
        let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
            .expect("host")
            .finish(settings::Flags::new(flags))
            .expect("isa");
        let builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
        let options = ModuleMergeOptions::default()
            .with_merge(MergeOptions::default().with_mode(MergeMode::Safe))
            .with_enabled(enabled);
        let mut module = MergingModule::new(JITModule::new(builder), options);
        let a = define(&mut module, "tail_a", Linkage::Local, TAIL_BODY);
        let b = define(&mut module, "tail_b", Linkage::Local, TAIL_BODY);
        // A system_v entry point that calls a `tail` function through a pointer.
        let via = define(
            &mut module,
            "call_via",
            Linkage::Export,
            "(i64, i64) -> i64 system_v {
    sig0 = (i64) -> i64 tail
block0(v0: i64, v1: i64):
    v2 = call_indirect sig0, v1(v0)
    return v2
}",
        );
        let table = table(&mut module, &[a, b]);
        let (jit, report) = module.finish_jit().expect("finish");
        if enabled {
            assert_eq!(
                report.actions,
                vec![(
                    "tail_b".to_string(),
                    "tail_a".to_string(),
                    MergeAction::Thunk
                )]
            );
        }
        let (ptr, _) = jit.module().get_finalized_data(table);
        // SAFETY: the table holds two code pointers; `call_via` is `(i64, i64) -> i64`
        // in the host's C calling convention.
        let pointers: [i64; 2] = unsafe { std::ptr::read(ptr.cast()) };
        let call_via: extern "C" fn(i64, i64) -> i64 =
            unsafe { std::mem::transmute(jit.get_finalized_function(via)) };
        assert_ne!(pointers[0], pointers[1], "a thunk keeps its own address");
        results.push((call_via(7, pointers[0]), call_via(7, pointers[1])));
    }
    assert_eq!(
        results,
        vec![(35, 35), (35, 35)],
        "frame pointers {frame_pointers}"
    );
}

#[test]
fn other_isas_fall_back_to_a_call_return_thunk() {
    let triple = target_lexicon::Triple::from_str("riscv64gc-unknown-linux-gnu").expect("triple");
    let mut flags = settings::builder();
    flags.set("is_pic", "true").expect("flag");
    let isa = cranelift_codegen::isa::lookup(triple)
        .expect("riscv64 backend compiled in")
        .finish(settings::Flags::new(flags))
        .expect("isa");
    let builder = ObjectBuilder::new(isa, "riscv", cranelift_module::default_libcall_names())
        .expect("builder");
    let mut module = MergingModule::new(ObjectModule::new(builder), ModuleMergeOptions::default());
    let body = "(i64) -> i64 system_v {
block0(v0: i64):
    v1 = iconst.i64 9
    v2 = iadd v0, v1
    return v2
}";
    define(&mut module, "first", Linkage::Export, body);
    define(&mut module, "second", Linkage::Export, body);
    let (product, report) = module.finish_object().expect("finish");
    assert_eq!(
        report.actions,
        vec![(
            "second".to_string(),
            "first".to_string(),
            MergeAction::Thunk
        )]
    );
    let bytes = product.emit().expect("emit");
    let file = object::File::parse(&*bytes).expect("parse");
    let size = |name: &str| {
        file.symbols()
            .find(|s| s.name() == Ok(name))
            .filter(|s| s.section_index().is_some())
            .map(|s| s.size())
            .unwrap_or_else(|| panic!("{name} is not defined"))
    };
    // Snapshot of the riscv64 code (cross-compiled, so the same on any host): the
    // thunk is real code, a call + return with its frame, longer than the single
    // 4-byte jump a machine-level thunk would be. Changes when the thunk's CLIF or
    // Cranelift's riscv64 backend changes; update deliberately.
    assert_eq!(
        (size("first"), size("second")),
        (8, 40),
        "code bytes of first, second (the thunk)"
    );
}
