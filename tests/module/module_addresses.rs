//! `MergingModule` must not change a function address a linked program can
//! observe, in either compile mode, through either finish.
//!
//! - Functions equal but for *which* function's address they take
//!   (`func_addr`, `symbol_value` of a function, a comparison with one) are
//!   different in safe mode: `retg() { return &g; }` must keep returning `&g`
//!   although `f` and `g` merge (`g` a thunk with its own address).
//! - A function whose address only machine code given to
//!   `define_function_bytes` takes keeps its own address: it is not erased into
//!   an equal function whose address is taken elsewhere, and a byte-defined
//!   function's call of an erased function still reaches equal code.
//!
//! Each program is linked with `cc` (or run in a JIT) and compared with the
//! unmerged build.

#![allow(clippy::result_large_err)]

#[path = "../support/define.rs"]
mod define_support;
#[path = "../../examples/shared/native.rs"]
#[allow(dead_code)]
mod native;

use clif_merge::MergeMode;
use clif_merge::MergeOptions;
use clif_merge::module::{CompileMode, MergedJit, MergingModule, ModuleMergeOptions};
use cranelift_codegen::ir::condcodes::IntCC;
use cranelift_codegen::ir::immediates::Imm64;
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{
    AbiParam, ExternalName, GlobalValueData, InstBuilder, Signature, UserExternalName,
};
use cranelift_frontend::FunctionBuilder;
use cranelift_module::{FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use define_support::{define_function, merging_jit};

/// The functions of the address program, by name.
struct AddressProgram {
    ids: Vec<(&'static str, FuncId)>,
}

impl AddressProgram {
    fn id(&self, name: &str) -> FuncId {
        self.ids
            .iter()
            .find(|(n, _)| *n == name)
            .map(|&(_, id)| id)
            .unwrap_or_else(|| panic!("no function {name}"))
    }
}

/// `x * 3 + 1`.
fn body(b: &mut FunctionBuilder, x: cranelift_codegen::ir::Value) -> cranelift_codegen::ir::Value {
    let y = b.ins().imul_imm_s(x, 3);
    b.ins().iadd_imm_s(y, 1)
}

/// The address of function `id` as `symbol_value` of a function symbol.
fn symbol_value_of(b: &mut FunctionBuilder, id: FuncId) -> cranelift_codegen::ir::Value {
    let name = b
        .func
        .declare_imported_user_function(UserExternalName::new(0, id.as_u32()));
    let gv = b.func.create_global_value(GlobalValueData::Symbol {
        name: ExternalName::user(name),
        offset: Imm64::new(0),
        colocated: true,
        tls: false,
    });
    b.ins().symbol_value(I64, gv)
}

/// Exported `f` and `g` (equal, `x * 3 + 1`); `retf`/`retg` return their
/// addresses by `func_addr`, `symf`/`symg` by `symbol_value`; `is_f(p)`/`is_g(p)`
/// say whether `p` is that address. Every pair is equal but for the function
/// whose address it takes.
fn define_address_program<M: Module>(m: &mut M) -> AddressProgram {
    let mut unary = m.make_signature();
    unary.params.push(AbiParam::new(I64));
    unary.returns.push(AbiParam::new(I64));
    let mut nullary = m.make_signature();
    nullary.returns.push(AbiParam::new(I64));
    let declare = |m: &mut M, name: &'static str, sig: &Signature| {
        let id = m
            .declare_function(name, Linkage::Export, sig)
            .expect("declare");
        (name, id)
    };
    let ids: Vec<(&'static str, FuncId)> = [
        ("f", &unary),
        ("g", &unary),
        ("retf", &nullary),
        ("retg", &nullary),
        ("symf", &nullary),
        ("symg", &nullary),
        ("is_f", &unary),
        ("is_g", &unary),
    ]
    .into_iter()
    .map(|(name, sig)| declare(m, name, sig))
    .collect();
    let program = AddressProgram { ids };
    let (f, g) = (program.id("f"), program.id("g"));
    for id in [f, g] {
        define_function(m, id, &unary, |_, b, p| vec![body(b, p[0])]);
    }
    for (name, target) in [("retf", f), ("retg", g)] {
        define_function(m, program.id(name), &nullary, |m, b, _| {
            let callee = m.declare_func_in_func(target, b.func);
            vec![b.ins().func_addr(I64, callee)]
        });
    }
    for (name, target) in [("symf", f), ("symg", g)] {
        define_function(m, program.id(name), &nullary, |_, b, _| {
            vec![symbol_value_of(b, target)]
        });
    }
    for (name, target) in [("is_f", f), ("is_g", g)] {
        define_function(m, program.id(name), &unary, |m, b, p| {
            let callee = m.declare_func_in_func(target, b.func);
            let address = b.ins().func_addr(I64, callee);
            let same = b.ins().icmp(IntCC::Equal, p[0], address);
            vec![b.ins().uextend(I64, same)]
        });
    }
    program
}

const ADDRESS_MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern int64_t f(int64_t), g(int64_t);
extern void *retf(void), *retg(void), *symf(void), *symg(void);
extern int64_t is_f(void *), is_g(void *);
int main(void) {
    printf("f(4) = %lld, g(4) = %lld\n", (long long)f(4), (long long)g(4));
    printf("retf() == &f: %d, retg() == &g: %d, retf() == retg(): %d\n",
           retf() == (void *)f, retg() == (void *)g, retf() == retg());
    printf("symf() == &f: %d, symg() == &g: %d\n", symf() == (void *)f, symg() == (void *)g);
    printf("is_f(&f) = %lld, is_f(&g) = %lld, is_g(&g) = %lld, is_g(&f) = %lld\n",
           (long long)is_f((void *)f), (long long)is_f((void *)g),
           (long long)is_g((void *)g), (long long)is_g((void *)f));
    int64_t (*through)(int64_t) = (int64_t (*)(int64_t))retg();
    printf("retg()(5) = %lld, &f == &g: %d\n", (long long)through(5), (void *)f == (void *)g);
    return 0;
}
"#;

/// The object of `define` through a `MergingModule` with `options`, and its report.
fn object_of(
    options: ModuleMergeOptions,
    tag: &str,
    define: impl FnOnce(&mut MergingModule<ObjectModule>),
) -> (Vec<u8>, clif_merge::module::MergeReport) {
    let isa = native::pic_host_isa().expect("host ISA");
    let builder =
        ObjectBuilder::new(isa, tag, cranelift_module::default_libcall_names()).expect("builder");
    let mut m = MergingModule::new(ObjectModule::new(builder), options);
    define(&mut m);
    let (product, report) = m.finish_object().expect("finish");
    (product.emit().expect("emit"), report)
}

/// The options of each merged build: both compile modes, safe mode.
fn merged_options() -> [(CompileMode, ModuleMergeOptions); 2] {
    [CompileMode::AtDefine, CompileMode::AtFinish].map(|mode| {
        (
            mode,
            ModuleMergeOptions::default()
                .with_compile(mode)
                .with_merge(MergeOptions::default().with_mode(MergeMode::Safe)),
        )
    })
}

/// Links the unmerged build and each merged build of `define` with `main_c`, and
/// checks they print the same; returns the reports of the merged builds.
fn links_and_runs_alike(
    tag: &str,
    main_c: &str,
    define: impl Fn(&mut MergingModule<ObjectModule>),
) -> Vec<clif_merge::module::MergeReport> {
    let (plain, _) = object_of(
        ModuleMergeOptions::default().with_enabled(false),
        tag,
        &define,
    );
    let expected = native::link_and_run(&plain, main_c, tag).expect("links");
    assert_eq!(expected.code, 0, "{}", expected.stdout);
    let mut reports = Vec::new();
    for (mode, options) in merged_options() {
        let (merged, report) = object_of(options, tag, &define);
        let run = native::link_and_run(&merged, main_c, tag).expect("links");
        assert_eq!(
            (&run.stdout, run.code),
            (&expected.stdout, expected.code),
            "{mode:?}: the merged program prints otherwise; report: {report:?}"
        );
        reports.push(report);
    }
    reports
}

#[test]
fn a_function_address_taken_in_code_keeps_naming_its_function() {
    let reports = links_and_runs_alike("addresses", ADDRESS_MAIN_C, |m| {
        define_address_program(m);
    });
    for report in reports {
        // `f` and `g` still merge (`g` a thunk with its own address); nothing
        // that takes `f`'s address merges with what takes `g`'s (names end in
        // the function whose address they take).
        assert!(
            report
                .classes
                .contains(&vec!["f".to_string(), "g".to_string()]),
            "{report:?}"
        );
        for class in report.classes.iter().filter(|c| c[0] != "f") {
            assert!(
                class
                    .iter()
                    .all(|n| n.ends_with(&class[0][class[0].len() - 1..])),
                "{class:?} takes the addresses of different functions"
            );
        }
    }
}

/// `ca` and `cb` call `fa` and `fb` (equal) through references that are not
/// colocated, so position-independent code loads each callee's address from the
/// GOT and calls it: a relocation that, read from the code alone, takes an
/// address. The IR only calls them, so in safe mode the callers still merge (as
/// they do from IR), and the program runs as before.
#[test]
fn a_call_through_the_got_is_a_call_not_an_address_use() {
    const MAIN_C: &str = r#"
#include <stdint.h>
#include <stdio.h>
int64_t fa(int64_t); int64_t fb(int64_t); int64_t ca(int64_t); int64_t cb(int64_t);
int main(void) {
    printf("%lld %lld %lld %lld\n", (long long)fa(2), (long long)fb(2),
           (long long)ca(2), (long long)cb(2));
    return 0;
}
"#;
    let reports = links_and_runs_alike("got_calls", MAIN_C, |m| {
        let mut sig = m.make_signature();
        sig.params.push(AbiParam::new(I64));
        sig.returns.push(AbiParam::new(I64));
        let declare = |m: &mut MergingModule<ObjectModule>, name| {
            m.declare_function(name, Linkage::Export, &sig)
                .expect("declare")
        };
        let (fa, fb) = (declare(m, "fa"), declare(m, "fb"));
        for f in [fa, fb] {
            define_function(m, f, &sig, |_, b, p| vec![body(b, p[0])]);
        }
        for (caller, callee) in [("ca", fa), ("cb", fb)] {
            let id = declare(m, caller);
            define_function(m, id, &sig, |m, b, p| {
                let callee = m.declare_func_in_func(callee, b.func);
                b.func.dfg.ext_funcs[callee].colocated = false;
                let call = b.ins().call(callee, &[p[0]]);
                let result = b.inst_results(call)[0];
                vec![b.ins().iadd_imm_s(result, 1)]
            });
        }
    });
    for report in reports {
        assert!(
            report
                .classes
                .contains(&vec!["ca".to_string(), "cb".to_string()]),
            "{report:?}"
        );
    }
}

/// Calls finalized `() -> i64` code.
fn call0(code: *const u8) -> i64 {
    // SAFETY: finalized `() -> i64` code in the host's calling convention.
    let f: extern "C" fn() -> i64 = unsafe { std::mem::transmute(code) };
    f()
}

/// Calls finalized `(i64) -> i64` code.
fn call1(code: *const u8, x: i64) -> i64 {
    // SAFETY: finalized `(i64) -> i64` code in the host's calling convention.
    let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
    f(x)
}

#[test]
fn a_function_address_taken_in_code_keeps_naming_its_function_in_a_jit() {
    fn observe(options: ModuleMergeOptions) -> Vec<i64> {
        let mut m = merging_jit(options);
        let program = define_address_program(&mut m);
        let (jit, _): (MergedJit, _) = m.finish_jit().expect("finish");
        let code = |name: &str| jit.get_finalized_function(program.id(name));
        let (f, g) = (code("f") as i64, code("g") as i64);
        let (retf, retg) = (call0(code("retf")), call0(code("retg")));
        let (symf, symg) = (call0(code("symf")), call0(code("symg")));
        vec![
            call1(code("f"), 4),
            call1(code("g"), 4),
            i64::from(retf == f),
            i64::from(retg == g),
            i64::from(retf == retg),
            i64::from(symf == f),
            i64::from(symg == g),
            call1(code("is_f"), f),
            call1(code("is_f"), g),
            call1(code("is_g"), g),
            call1(code("is_g"), f),
            call1(retg as *const u8, 5),
        ]
    }
    let plain = observe(ModuleMergeOptions::default().with_enabled(false));
    assert_eq!(plain, [13, 13, 1, 1, 0, 1, 1, 1, 0, 1, 0, 16]);
    for (mode, options) in merged_options() {
        assert_eq!(observe(options), plain, "{mode:?}");
    }
}

/// x86_64 machine code for the byte-defined functions: `lea rax, [rip + f]; ret`
/// (returns `&f`) and `jmp f` (tail-calls `f`), with their relocations.
#[cfg(target_arch = "x86_64")]
mod bytes {
    use cranelift_codegen::binemit::Reloc;
    use cranelift_module::{FuncId, ModuleReloc, ModuleRelocTarget};

    /// `lea rax, [rip + target]; ret`.
    pub fn address_of(target: FuncId) -> (Vec<u8>, Vec<ModuleReloc>) {
        let reloc = ModuleReloc {
            offset: 3,
            kind: Reloc::X86PCRel4,
            name: ModuleRelocTarget::user(0, target.as_u32()),
            addend: -4,
        };
        (vec![0x48, 0x8d, 0x05, 0, 0, 0, 0, 0xc3], vec![reloc])
    }

    /// `jmp target`.
    pub fn tail_call(target: FuncId) -> (Vec<u8>, Vec<ModuleReloc>) {
        let reloc = ModuleReloc {
            offset: 1,
            kind: Reloc::X86CallPCRel4,
            name: ModuleRelocTarget::user(0, target.as_u32()),
            addend: -4,
        };
        (vec![0xe9, 0, 0, 0, 0], vec![reloc])
    }
}

/// Local `f` and `g` (equal); `retf` returns `&f` (`func_addr`); the byte-defined
/// `bytes_g` returns `&g` and `jump_g` tail-calls `g`; `call_g` calls `g` from
/// CLIF. Only machine code the wrapper did not compile takes `g`'s address.
#[cfg(target_arch = "x86_64")]
fn define_byte_program<M: Module>(m: &mut M) -> AddressProgram {
    let mut unary = m.make_signature();
    unary.params.push(AbiParam::new(I64));
    unary.returns.push(AbiParam::new(I64));
    let mut nullary = m.make_signature();
    nullary.returns.push(AbiParam::new(I64));
    let mut ids = Vec::new();
    for (name, linkage, sig) in [
        ("f", Linkage::Local, &unary),
        ("g", Linkage::Local, &unary),
        ("retf", Linkage::Export, &nullary),
        ("bytes_g", Linkage::Export, &nullary),
        ("jump_g", Linkage::Export, &unary),
        ("call_g", Linkage::Export, &unary),
    ] {
        let id = m.declare_function(name, linkage, sig).expect("declare");
        ids.push((name, id));
    }
    let program = AddressProgram { ids };
    let (f, g) = (program.id("f"), program.id("g"));
    for id in [f, g] {
        define_function(m, id, &unary, |_, b, p| vec![body(b, p[0])]);
    }
    define_function(m, program.id("retf"), &nullary, |m, b, _| {
        let callee = m.declare_func_in_func(f, b.func);
        vec![b.ins().func_addr(I64, callee)]
    });
    define_function(m, program.id("call_g"), &unary, |m, b, p| {
        vec![define_support::call(m, b, g, &[p[0]])]
    });
    for (name, (code, relocs)) in [
        ("bytes_g", bytes::address_of(g)),
        ("jump_g", bytes::tail_call(g)),
    ] {
        m.define_function_bytes(program.id(name), 16, &code, &relocs)
            .expect("define bytes");
    }
    program
}

#[cfg(target_arch = "x86_64")]
const BYTES_MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern void *retf(void), *bytes_g(void);
extern int64_t jump_g(int64_t), call_g(int64_t);
int main(void) {
    printf("&f == &g: %d\n", retf() == bytes_g());
    int64_t (*f)(int64_t) = (int64_t (*)(int64_t))retf();
    int64_t (*g)(int64_t) = (int64_t (*)(int64_t))bytes_g();
    printf("f(4) = %lld, g(4) = %lld, jump_g(5) = %lld, call_g(6) = %lld\n",
           (long long)f(4), (long long)g(4), (long long)jump_g(5), (long long)call_g(6));
    return 0;
}
"#;

#[cfg(target_arch = "x86_64")]
#[test]
fn an_address_only_byte_defined_code_takes_stays_distinct() {
    let reports = links_and_runs_alike("bytes", BYTES_MAIN_C, |m| {
        define_byte_program(m);
    });
    for report in reports {
        // `f` and `g` are equal and merge, but `g` keeps its own address (a
        // thunk: both addresses matter).
        assert_eq!(
            report.classes,
            [vec!["f".to_string(), "g".to_string()]],
            "{report:?}"
        );
        assert!(
            report
                .actions
                .iter()
                .all(|(_, _, action)| *action == clif_merge::MergeAction::Thunk),
            "{report:?}"
        );
    }
}

#[cfg(target_arch = "x86_64")]
#[test]
fn an_address_only_byte_defined_code_takes_stays_distinct_in_a_jit() {
    fn observe(options: ModuleMergeOptions) -> Vec<i64> {
        let mut m = merging_jit(options);
        let program = define_byte_program(&mut m);
        let (jit, _): (MergedJit, _) = m.finish_jit().expect("finish");
        let code = |name: &str| jit.get_finalized_function(program.id(name));
        let (f, g) = (call0(code("retf")), call0(code("bytes_g")));
        vec![
            i64::from(f == g),
            call1(f as *const u8, 4),
            call1(g as *const u8, 4),
            call1(code("jump_g"), 5),
            call1(code("call_g"), 6),
        ]
    }
    let plain = observe(ModuleMergeOptions::default().with_enabled(false));
    assert_eq!(plain, [0, 13, 13, 16, 19]);
    for (mode, options) in merged_options() {
        assert_eq!(observe(options), plain, "{mode:?}");
    }
}
