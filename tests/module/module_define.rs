//! `MergingModule`'s contract with the code that drives it, in both compile modes:
//!
//! - with [`CompileMode::AtDefine`] (the default) `ctx.compiled_code()` is there
//!   after every define, as with the inner module; with `AtFinish` it is not;
//! - a kept function's machine code in the object is byte-identical to what the
//!   plain `ObjectModule` emits for it, and so are its relocations, but for those
//!   retargeted from an erased duplicate to the kept function;
//! - the rest of the `Module` trait goes through: anonymous functions and data,
//!   data holding function and data addresses (a function address of an erased
//!   duplicate becomes the kept function's), thread-local data, `get_name`. The
//!   program is linked with `cc` and run against the unmerged build.

#![allow(clippy::result_large_err)]

#[path = "../support/define.rs"]
mod define_support;
#[path = "../../examples/shared/native.rs"]
#[allow(dead_code)]
mod native;

use clif_merge::module::{CompileMode, MergingModule, ModuleMergeOptions};
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder};
use cranelift_module::{DataDescription, FuncId, FuncOrDataId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SymbolKind};

const MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern int64_t entry(int64_t);
extern int64_t (*table[3])(int64_t);
extern int64_t *pointer_to_value;
int main(void) {
    for (int64_t x = -2; x < 3; x++)
        printf("entry(%lld) = %lld\n", (long long)x, (long long)entry(x));
    for (int i = 0; i < 3; i++)
        printf("table[%d](4) = %lld\n", i, (long long)table[i](4));
    printf("*pointer_to_value = %lld\n", (long long)*pointer_to_value);
    return 0;
}
"#;

use define_support::{call_unary as call, define_unary as define};

/// The program: `entry` calls `twice` and its erased copy `twice_copy` (local,
/// anonymous) and `scale`; `table` holds the addresses of `scale`, `twice_copy`
/// and `twice`; `pointer_to_value` the address of `value`; `counter` is
/// thread-local. Returns the object and, per define, whether compiled code was
/// left in the context.
fn build(options: ModuleMergeOptions) -> (Vec<u8>, Vec<bool>) {
    let isa = native::pic_host_isa().expect("host ISA");
    let builder = ObjectBuilder::new(isa, "define", cranelift_module::default_libcall_names())
        .expect("builder");
    let mut m = MergingModule::new(ObjectModule::new(builder), options);
    let (compiled, _) = define_program(&mut m, true);
    let (product, _) = m.finish_object().expect("finish");
    (product.emit().expect("emit"), compiled)
}

/// The ids of the program's functions and data a caller reads.
struct ProgramIds {
    entry: FuncId,
    table: cranelift_module::DataId,
    pointer: cranelift_module::DataId,
}

/// Declares and defines the program of [`build`] in `m` (the thread-local
/// `counter` only with `tls`). Per define, whether compiled code was left in the
/// context; and the ids.
fn define_program<M: Module>(m: &mut M, tls: bool) -> (Vec<bool>, ProgramIds) {
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    let twice = m
        .declare_function("twice", Linkage::Local, &sig)
        .expect("declare");
    let twice_copy = m.declare_anonymous_function(&sig).expect("declare");
    let scale = m
        .declare_function("scale", Linkage::Export, &sig)
        .expect("declare");
    let entry = m
        .declare_function("entry", Linkage::Export, &sig)
        .expect("declare");
    assert_eq!(m.get_name("entry"), Some(FuncOrDataId::Func(entry)));
    let mut compiled = Vec::new();
    for id in [twice, twice_copy] {
        compiled.push(define(m, id, &sig, |_, b, x| {
            let y = b.ins().iadd(x, x);
            b.ins().iadd_imm_s(y, 3)
        }));
    }
    compiled.push(define(m, scale, &sig, |_, b, x| b.ins().imul_imm_s(x, 7)));
    compiled.push(define(m, entry, &sig, |m, b, x| {
        let a = call(m, b, twice, x);
        let c = call(m, b, twice_copy, a);
        let s = call(m, b, scale, c);
        b.ins().iadd(s, a)
    }));
    // Function addresses in data, a data address in data, thread-local data.
    let table = m
        .declare_data("table", Linkage::Export, true, false)
        .expect("declare");
    let mut desc = DataDescription::new();
    desc.define(vec![0u8; 24].into_boxed_slice());
    for (i, f) in [scale, twice_copy, twice].into_iter().enumerate() {
        let f = m.declare_func_in_data(f, &mut desc);
        desc.write_function_addr(8 * i as u32, f);
    }
    m.define_data(table, &desc).expect("define table");
    let value = m.declare_anonymous_data(false, false).expect("declare");
    let mut desc = DataDescription::new();
    desc.define(42i64.to_le_bytes().to_vec().into_boxed_slice());
    m.define_data(value, &desc).expect("define value");
    let pointer = m
        .declare_data("pointer_to_value", Linkage::Export, false, false)
        .expect("declare");
    let mut desc = DataDescription::new();
    desc.define(vec![0u8; 8].into_boxed_slice());
    let value_ref = m.declare_data_in_data(value, &mut desc);
    desc.write_data_addr(0, value_ref, 0);
    m.define_data(pointer, &desc).expect("define pointer");
    if tls {
        let counter = m
            .declare_data("counter", Linkage::Export, true, true)
            .expect("declare");
        let mut desc = DataDescription::new();
        desc.define(vec![0u8; 8].into_boxed_slice());
        m.define_data(counter, &desc).expect("define counter");
    }
    (
        compiled,
        ProgramIds {
            entry,
            table,
            pointer,
        },
    )
}

/// The machine code of the function named `name` in `object`, and its
/// relocations as (offset in the function, kind, target symbol name).
fn code_of(object: &[u8], name: &str) -> (Vec<u8>, Vec<(u64, String, String)>) {
    let file = object::File::parse(object).expect("an object");
    let symbol = file
        .symbols()
        .find(|s| s.name() == Ok(name))
        .unwrap_or_else(|| panic!("no symbol {name}"));
    let section = file
        .section_by_index(symbol.section_index().expect("defined"))
        .expect("section");
    let data = section.data().expect("data");
    let (start, end) = (symbol.address(), symbol.address() + symbol.size());
    let code =
        data[(start - section.address()) as usize..(end - section.address()) as usize].to_vec();
    let relocs = section
        .relocations()
        .filter(|(offset, _)| (start..end).contains(offset))
        .map(|(offset, reloc)| {
            let target = match reloc.target() {
                RelocationTarget::Symbol(index) => file
                    .symbol_by_index(index)
                    .map(|s| s.name().unwrap_or("").to_string())
                    .unwrap_or_default(),
                other => format!("{other:?}"),
            };
            (offset - start, format!("{:?}", reloc.flags()), target)
        })
        .collect();
    (code, relocs)
}

#[test]
fn compiled_code_is_there_after_define_in_compile_at_define_mode() {
    let (_, at_define) = build(ModuleMergeOptions::default());
    assert_eq!(at_define, [true; 4]);
    let (_, at_finish) = build(ModuleMergeOptions::default().with_compile(CompileMode::AtFinish));
    assert_eq!(at_finish, [false; 4]);
    let (_, unmerged) = build(ModuleMergeOptions::default().with_enabled(false));
    assert_eq!(unmerged, [true; 4]);
}

#[test]
fn kept_code_is_byte_identical_to_the_plain_module_but_for_retargeted_relocations() {
    let (plain, _) = build(ModuleMergeOptions::default().with_enabled(false));
    let (merged, _) = build(ModuleMergeOptions::default());
    for name in ["twice", "scale"] {
        assert_eq!(code_of(&merged, name), code_of(&plain, name), "{name}");
    }
    let (plain_code, plain_relocs) = code_of(&plain, "entry");
    let (merged_code, merged_relocs) = code_of(&merged, "entry");
    assert_eq!(merged_code, plain_code, "entry's bytes");
    assert_eq!(merged_relocs.len(), plain_relocs.len());
    let mut retargeted = 0;
    for (m, p) in merged_relocs.iter().zip(&plain_relocs) {
        assert_eq!((m.0, &m.1), (p.0, &p.1), "offset and kind");
        if m.2 != p.2 {
            // The anonymous copy's call now goes to the kept `twice`.
            assert_eq!(m.2, "twice", "{p:?} -> {m:?}");
            retargeted += 1;
        }
    }
    assert_eq!(retargeted, 1, "{plain_relocs:?} -> {merged_relocs:?}");
    // The thread-local object stays thread-local.
    let file = object::File::parse(&*merged).expect("an object");
    let counter = file
        .symbols()
        .find(|s| s.name() == Ok("counter"))
        .expect("counter");
    assert_eq!(counter.kind(), SymbolKind::Tls);
}

#[test]
fn the_whole_trait_links_and_runs_alike_in_both_modes() {
    let (plain, _) = build(ModuleMergeOptions::default().with_enabled(false));
    let plain_run = native::link_and_run(&plain, MAIN_C, "define-plain").expect("links");
    assert_eq!(plain_run.code, 0, "{}", plain_run.stdout);
    for mode in [CompileMode::AtDefine, CompileMode::AtFinish] {
        let (merged, _) = build(ModuleMergeOptions::default().with_compile(mode));
        let run = native::link_and_run(&merged, MAIN_C, "define-merged").expect("links");
        assert_eq!(
            (&run.stdout, run.code),
            (&plain_run.stdout, plain_run.code),
            "{mode:?}"
        );
        assert!(
            native::text_bytes(&merged).expect("object")
                < native::text_bytes(&plain).expect("object"),
            "{mode:?}: .text is smaller"
        );
    }
}

/// In compile-at-define mode functions are compared by machine code and
/// relocations and metadata: equal code that calls unequal functions, reads
/// another data object, or traps with another code must not merge; equal code
/// calling equal functions merges, callees and callers alike.
#[test]
fn equal_code_with_unequal_targets_does_not_merge() {
    let isa = native::pic_host_isa().expect("host ISA");
    let builder = ObjectBuilder::new(isa, "targets", cranelift_module::default_libcall_names())
        .expect("builder");
    let mut m = MergingModule::new(ObjectModule::new(builder), ModuleMergeOptions::default());
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    let declare = |m: &mut MergingModule<ObjectModule>, name: &str| {
        m.declare_function(name, Linkage::Export, &sig)
            .expect("declare")
    };
    // c1 != c2 (constants), d1 == d2.
    let [c1, c2, d1, d2] = ["c1", "c2", "d1", "d2"].map(|n| declare(&mut m, n));
    for (id, k) in [(c1, 3), (c2, 4), (d1, 5), (d2, 5)] {
        define(&mut m, id, &sig, |_, b, x| b.ins().imul_imm_s(x, k));
    }
    // p1/p2 call c1/c2; q1/q2 call d1/d2; r1/r2 read data objects one and two.
    let [p1, p2, q1, q2, r1, r2] = ["p1", "p2", "q1", "q2", "r1", "r2"].map(|n| declare(&mut m, n));
    for (id, callee) in [(p1, c1), (p2, c2), (q1, d1), (q2, d2)] {
        define(&mut m, id, &sig, |m, b, x| {
            let y = call(m, b, callee, x);
            b.ins().iadd_imm_s(y, 1)
        });
    }
    let data: Vec<_> = ["one", "two"]
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let id = m
                .declare_data(name, Linkage::Export, false, false)
                .expect("declare");
            let mut desc = DataDescription::new();
            desc.define((i as i64 + 1).to_le_bytes().to_vec().into_boxed_slice());
            m.define_data(id, &desc).expect("define");
            id
        })
        .collect();
    for (id, object) in [(r1, data[0]), (r2, data[1])] {
        define(&mut m, id, &sig, |m, b, x| {
            let gv = m.declare_data_in_func(object, b.func);
            let address = b.ins().symbol_value(I64, gv);
            let value = b.ins().load(
                I64,
                cranelift_codegen::ir::MemFlagsData::trusted(),
                address,
                0,
            );
            b.ins().iadd(value, x)
        });
    }
    // t1/t2: the same code, another trap code.
    let [t1, t2] = ["t1", "t2"].map(|n| declare(&mut m, n));
    for (id, code) in [(t1, 1), (t2, 2)] {
        define(&mut m, id, &sig, |_, b, x| {
            let code = cranelift_codegen::ir::TrapCode::user(code).expect("a user trap code");
            b.ins().trapz(x, code);
            x
        });
    }
    let (_, report) = m.finish_object().expect("finish");
    let classes: Vec<Vec<String>> = report.classes.clone();
    assert_eq!(
        classes,
        [
            vec!["d1".to_string(), "d2".to_string()],
            vec!["q1".to_string(), "q2".to_string()]
        ],
        "only the d and q pairs merge"
    );
}

/// The same program (without thread-local data, which cranelift-jit does not
/// support) through `MergingModule<JITModule>` in both compile modes, against the
/// plain `JITModule`: `entry`, every function in `table` and `*pointer_to_value`
/// give the same values.
#[test]
fn the_whole_trait_runs_alike_in_a_jit() {
    use clif_merge::module::MergedJit;
    fn run(options: ModuleMergeOptions) -> Vec<i64> {
        let mut m = define_support::merging_jit(options);
        let (_, ids) = define_program(&mut m, false);
        let (jit, _): (MergedJit, _) = m.finish_jit().expect("finish");
        let call = |code: *const u8, x: i64| -> i64 {
            // SAFETY: finalized `(i64) -> i64` code in the host's calling convention.
            let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
            f(x)
        };
        let mut values: Vec<i64> = (-2..3)
            .map(|x| call(jit.get_finalized_function(ids.entry), x))
            .collect();
        let (table, _) = jit.module().get_finalized_data(ids.table);
        for i in 0..3 {
            // SAFETY: the table holds three function addresses.
            let code = unsafe { *(table as *const *const u8).add(i) };
            values.push(call(code, 4));
        }
        let (pointer, _) = jit.module().get_finalized_data(ids.pointer);
        // SAFETY: `pointer_to_value` holds the address of an `i64`.
        values.push(unsafe { **(pointer as *const *const i64) });
        values
    }
    let plain = run(ModuleMergeOptions::default().with_enabled(false));
    assert_eq!(plain.last(), Some(&42));
    for mode in [CompileMode::AtDefine, CompileMode::AtFinish] {
        assert_eq!(
            run(ModuleMergeOptions::default().with_compile(mode)),
            plain,
            "{mode:?}"
        );
    }
}
