//! `MergingModule` under the way rustc_codegen_cranelift drives `Module`: codegen
//! units on threads, each an `ObjectModule` under an unwind-recording wrapper
//! written here after cg_clif's `UnwindModule` (`src/unwind_module.rs`): it
//! forwards every definition, then reads `ctx.compiled_code()` to record the
//! function's unwind info, and writes `.eh_frame` with gimli when the object is
//! finished; like cg_clif's, its `define_function_bytes` cannot record anything.
//!
//! The stacking that works is `UnwindModule<MergingModule<ObjectModule>>`:
//! `MergingModule` compiles each function as it is defined
//! ([`CompileMode::AtDefine`], the default), so the wrapper above it finds the
//! compiled code; at finish `MergingModule` defines the kept code with
//! `define_function_bytes`, which the inner `ObjectModule` takes. The other order,
//! `MergingModule<UnwindModule<ObjectModule>>`, cannot work: the kept code reaches
//! the unwind wrapper as bytes, for which it has no unwind info (cg_clif's
//! `define_function_bytes` is `unimplemented!()`).
//!
//! The wrapper uses the report to get unwinding right: no entry for a function
//! without code of its own (`MergeReport::without_code`: its symbol names the kept
//! function's code, whose entry covers it), and for a thunk an entry over the
//! thunk's own code (`MergeReport::thunks`), not the compiled body's.
//!
//! Each unit's code reaches a C callback through an erased duplicate, an aliased
//! one (called through its address) and a thunk; the callback walks the stack
//! with `_Unwind_Backtrace` and says whether the walk reached `main`. Linked with
//! `cc` and run, the merged build prints what the unmerged one prints, the walk
//! reaches `main` from every call, and `.text` is smaller.
//!
//! The same units through one `JITModule` (`jit`): the wrapper registers the
//! `.eh_frame` it writes for the finalized code with libgcc (`__register_frame`),
//! every entry and `run` are called, and every stack walk from the callback must
//! reach the Rust function that called into the JIT code (without the
//! registration none does).

#![allow(clippy::result_large_err)]

#[path = "../support/define.rs"]
mod define_support;
#[path = "../../examples/shared/native.rs"]
#[allow(dead_code)]
mod native;

use clif_merge::module::{MergeReport, MergingModule, ModuleMergeOptions};
use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::gimli;
use cranelift_codegen::gimli::write::{
    Address, EhFrame, EndianVec, FrameDescriptionEntry, FrameTable, RelocateWriter, Relocation,
    RelocationTarget,
};
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder, Signature};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::isa::unwind::UnwindInfo;
use cranelift_module::{
    DataDescription, DataId, FuncId, Linkage, Module, ModuleDeclarations, ModuleReloc, ModuleResult,
};
use cranelift_object::{ObjectBuilder, ObjectModule, ObjectProduct};
use object::write::{Relocation as ObjectRelocation, StandardSection};
use object::{RelocationEncoding, RelocationFlags, RelocationKind};
use std::collections::HashSet;

/// Codegen units.
const UNITS: usize = 3;

// ---------------------------------------------------------------------------------
// The unwind-recording wrapper, after cg_clif's `UnwindModule`.
// ---------------------------------------------------------------------------------

/// Records every defined function's unwind info from `ctx.compiled_code()`.
struct UnwindModule<T: Module> {
    module: T,
    recorded: Vec<(FuncId, UnwindInfo)>,
}

impl<T: Module> UnwindModule<T> {
    fn new(module: T) -> Self {
        Self {
            module,
            recorded: Vec::new(),
        }
    }
}

impl<T: Module> Module for UnwindModule<T> {
    fn isa(&self) -> &dyn TargetIsa {
        self.module.isa()
    }

    fn declarations(&self) -> &ModuleDeclarations {
        self.module.declarations()
    }

    fn declare_function(
        &mut self,
        name: &str,
        linkage: Linkage,
        signature: &Signature,
    ) -> ModuleResult<FuncId> {
        self.module.declare_function(name, linkage, signature)
    }

    fn declare_anonymous_function(&mut self, signature: &Signature) -> ModuleResult<FuncId> {
        self.module.declare_anonymous_function(signature)
    }

    fn declare_data(
        &mut self,
        name: &str,
        linkage: Linkage,
        writable: bool,
        tls: bool,
    ) -> ModuleResult<DataId> {
        self.module.declare_data(name, linkage, writable, tls)
    }

    fn declare_anonymous_data(&mut self, writable: bool, tls: bool) -> ModuleResult<DataId> {
        self.module.declare_anonymous_data(writable, tls)
    }

    fn define_function_with_control_plane(
        &mut self,
        func: FuncId,
        ctx: &mut Context,
        ctrl_plane: &mut ControlPlane,
    ) -> ModuleResult<()> {
        self.module
            .define_function_with_control_plane(func, ctx, ctrl_plane)?;
        // What cg_clif does right after forwarding the definition; a define
        // without compiled code (`with_compile_duplicates(false)`: a duplicate
        // not compiled) gets no entry, as cg_clif's `UnwindModule` skips it: the
        // code that stands for it (`MergeReport::not_compiled`) has its own.
        let Some(compiled) = ctx.compiled_code() else {
            return Ok(());
        };
        if let Some(info) = compiled
            .create_unwind_info(self.module.isa())
            .expect("unwind info")
        {
            self.recorded.push((func, info));
        }
        Ok(())
    }

    fn define_function_bytes(
        &mut self,
        _func_id: FuncId,
        _alignment: u64,
        _bytes: &[u8],
        _relocs: &[ModuleReloc],
    ) -> ModuleResult<()> {
        unimplemented!("no unwind info for code given as bytes (as in cg_clif)")
    }

    fn define_data(&mut self, data_id: DataId, data: &DataDescription) -> ModuleResult<()> {
        self.module.define_data(data_id, data)
    }
}

impl UnwindModule<MergingModule<ObjectModule>> {
    /// Finishes the object and adds `.eh_frame`: an entry per function with code
    /// of its own, thunks described by their own code.
    fn finish(self) -> (ObjectProduct, MergeReport) {
        let cie = self
            .module
            .isa()
            .create_systemv_cie()
            .expect("a System V target");
        let (mut product, report) = self.module.finish_object().expect("finish");
        let without_code: HashSet<FuncId> = report.without_code.iter().copied().collect();
        let thunks: HashSet<FuncId> = report.thunks.iter().map(|t| t.function).collect();
        let mut table = FrameTable::default();
        let cie = table.add_cie(cie);
        let mut symbols = Vec::new();
        let mut address = |id: FuncId| {
            symbols.push(product.function_symbol(id));
            Address::Symbol {
                symbol: symbols.len() - 1,
                addend: 0,
            }
        };
        // A promoted function's code is now defined under its promoted name.
        #[cfg(feature = "separate")]
        let promoted: std::collections::HashMap<FuncId, FuncId> =
            report.promoted.iter().copied().collect();
        for (id, info) in self.recorded {
            #[cfg(feature = "separate")]
            let id = match promoted.get(&id) {
                Some(&to) => to,
                None => id,
            };
            if without_code.contains(&id) || thunks.contains(&id) {
                continue;
            }
            let UnwindInfo::SystemV(info) = info else {
                continue;
            };
            table.add_fde(cie, info.to_fde(address(id)));
        }
        for thunk in &report.thunks {
            let fde = match &thunk.unwind {
                Some(UnwindInfo::SystemV(info)) => info.to_fde(address(thunk.function)),
                // One jump: no frame, the CIE's initial rules hold throughout.
                _ => FrameDescriptionEntry::new(address(thunk.function), thunk.size as u32),
            };
            table.add_fde(cie, fde);
        }
        let mut eh_frame = EhFrame(Section {
            writer: EndianVec::new(gimli::RunTimeEndian::Little),
            relocations: Vec::new(),
        });
        table.write_eh_frame(&mut eh_frame).expect("eh_frame");
        let EhFrame(Section {
            writer,
            relocations,
        }) = eh_frame;
        let section = product.object.section_id(StandardSection::EhFrame);
        product
            .object
            .append_section_data(section, &writer.into_vec(), 8);
        for reloc in relocations {
            let RelocationTarget::Symbol(index) = reloc.target else {
                panic!("a section-relative relocation in .eh_frame");
            };
            let pcrel = reloc
                .eh_pe
                .is_some_and(|pe| pe.application() == gimli::constants::DW_EH_PE_pcrel);
            let kind = if pcrel {
                RelocationKind::Relative
            } else {
                RelocationKind::Absolute
            };
            product
                .object
                .add_relocation(
                    section,
                    ObjectRelocation {
                        offset: reloc.offset as u64,
                        symbol: symbols[index],
                        addend: reloc.addend,
                        flags: RelocationFlags::Generic {
                            kind,
                            encoding: RelocationEncoding::Generic,
                            size: reloc.size * 8,
                        },
                    },
                )
                .expect("relocation");
        }
        (product, report)
    }
}

/// `.eh_frame` being written: the bytes and the relocations gimli asks for.
struct Section {
    writer: EndianVec<gimli::RunTimeEndian>,
    relocations: Vec<Relocation>,
}

impl RelocateWriter for Section {
    type Writer = EndianVec<gimli::RunTimeEndian>;

    fn writer(&self) -> &Self::Writer {
        &self.writer
    }

    fn writer_mut(&mut self) -> &mut Self::Writer {
        &mut self.writer
    }

    fn relocate(&mut self, relocation: Relocation) {
        self.relocations.push(relocation);
    }
}

// ---------------------------------------------------------------------------------
// The program.
// ---------------------------------------------------------------------------------

/// The C side: `callback` walks the stack and says whether the walk reaches
/// `main`; `main` calls `run(5)` and each of `entries` (exported CLIF functions)
/// with its argument.
fn main_c(entries: &[(&str, i64)]) -> String {
    let declarations: Vec<String> = entries
        .iter()
        .map(|(name, _)| format!("{name}(int64_t)"))
        .collect();
    let calls: String = entries
        .iter()
        .map(|(name, arg)| {
            format!("    printf(\"{name}({arg}) = %lld\\n\", (long long){name}({arg}));\n")
        })
        .collect();
    format!(
        r#"
#include <stdio.h>
#include <stdint.h>
#include <unwind.h>
extern int64_t run(int64_t);
extern int64_t {declarations};
int main(void);
struct walk {{ int reached_main; }};
static _Unwind_Reason_Code step(struct _Unwind_Context *context, void *arg) {{
    struct walk *walk = arg;
    uintptr_t ip = _Unwind_GetIP(context);
    if (ip && _Unwind_FindEnclosingFunction((void *)(ip - 1)) == (void *)main)
        walk->reached_main = 1;
    return _URC_NO_REASON;
}}
int64_t callback(int64_t x) {{
    struct walk walk = {{0}};
    _Unwind_Backtrace(step, &walk);
    printf("callback(%lld): the walk %s main\n", (long long)x,
           walk.reached_main ? "reaches" : "DOES NOT reach");
    return x * 3 + 1;
}}
int main(void) {{
    printf("run(5) = %lld\n", (long long)run(5));
{calls}    return 0;
}}
"#,
        declarations = declarations.join(", ")
    )
}

use define_support::{call_unary as call, define_unary as define};

/// Builds unit `unit`: `mid` calls the callback through `leaf_a`, its erased copy
/// `leaf_b` and its aliased copy `leaf_c` (called through its address); the
/// exported `cguN_entry` and its copy `cguN_entry2` (a thunk) call `mid`. The
/// local names start with `local_prefix` (units that share one module need their
/// own).
fn build_unit<M: Module>(m: &mut M, unit: usize, local_prefix: &str) {
    let mut sig = m.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    let callback = m
        .declare_function("callback", Linkage::Import, &sig)
        .expect("declare");
    let leaves: Vec<FuncId> = ["leaf_a", "leaf_b", "leaf_c"]
        .iter()
        .map(|name| {
            m.declare_function(&format!("{local_prefix}{name}"), Linkage::Local, &sig)
                .expect("declare")
        })
        .collect();
    for &leaf in &leaves {
        define(m, leaf, &sig, |m, b, x| {
            let x = b.ins().iadd_imm_s(x, 100 * unit as i64);
            let y = call(m, b, callback, x);
            b.ins().iadd_imm_s(y, 1)
        });
    }
    let mid = m
        .declare_function(&format!("{local_prefix}mid"), Linkage::Local, &sig)
        .expect("declare");
    define(m, mid, &sig, |m, b, x| {
        let y = call(m, b, leaves[0], x);
        let z = call(m, b, leaves[1], y);
        let leaf_c = m.declare_func_in_func(leaves[2], b.func);
        let pointer = b.ins().func_addr(I64, leaf_c);
        let sig_ref = b.import_signature(sig.clone());
        let call = b.ins().call_indirect(sig_ref, pointer, &[z]);
        b.inst_results(call)[0]
    });
    let entries: Vec<FuncId> = ["entry", "entry2"]
        .iter()
        .map(|name| {
            m.declare_function(&format!("cgu{unit}_{name}"), Linkage::Export, &sig)
                .expect("declare")
        })
        .collect();
    for &entry in &entries {
        define(m, entry, &sig, |m, b, x| {
            let y = call(m, b, mid, x);
            b.ins().imul_imm_s(y, 2)
        });
    }
    if unit == 0 {
        let run = m
            .declare_function("run", Linkage::Export, &sig)
            .expect("declare");
        let callees: Vec<FuncId> = (0..UNITS)
            .map(|u| {
                let name = format!("cgu{u}_entry2");
                let linkage = if u == unit {
                    Linkage::Export
                } else {
                    Linkage::Import
                };
                m.declare_function(&name, linkage, &sig).expect("declare")
            })
            .collect();
        define(m, run, &sig, |m, b, x| {
            let mut total = b.ins().iconst(I64, 0);
            for callee in callees {
                let value = call(m, b, callee, x);
                total = b.ins().iadd(total, value);
            }
            total
        });
    }
}

/// Every unit built on its own thread into an object with `.eh_frame`; with the
/// merge on or off. The objects, and the reports.
fn build_program(merge: bool) -> Vec<(Vec<u8>, MergeReport)> {
    build_program_with(ModuleMergeOptions::default().with_enabled(merge))
}

/// [`build_program`] with the wrapper's `options`.
fn build_program_with(options: ModuleMergeOptions) -> Vec<(Vec<u8>, MergeReport)> {
    std::thread::scope(|scope| {
        let threads: Vec<_> = (0..UNITS)
            .map(|unit| {
                let options = options.clone();
                scope.spawn(move || {
                    let isa = native::pic_host_isa().expect("host ISA");
                    let builder = ObjectBuilder::new(
                        isa,
                        format!("cgu{unit}"),
                        cranelift_module::default_libcall_names(),
                    )
                    .expect("object builder");
                    let mut module =
                        UnwindModule::new(MergingModule::new(ObjectModule::new(builder), options));
                    build_unit(&mut module, unit, "");
                    let (product, report) = module.finish();
                    (product.emit().expect("emit"), report)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("a codegen thread panicked"))
            .collect()
    })
}

#[test]
fn unwinding_walks_through_erased_aliased_and_thunked_functions() {
    if target_lexicon::Triple::host().binary_format != target_lexicon::BinaryFormat::Elf {
        // The wrapper writes ELF `.eh_frame` (as cranelift-object's own does).
        panic!("this test needs an ELF host");
    }
    let plain = build_program(false);
    let merged = build_program(true);
    for (unit, (_, report)) in merged.iter().enumerate() {
        // leaf_b erased, leaf_c aliased, cguN_entry2 a thunk.
        let actions: Vec<String> = report
            .actions
            .iter()
            .map(|(dup, kept, action)| format!("{dup}->{kept}:{action}"))
            .collect();
        assert_eq!(
            actions,
            [
                "leaf_b->leaf_a:erase".to_string(),
                "leaf_c->leaf_a:alias".to_string(),
                format!("cgu{unit}_entry2->cgu{unit}_entry:thunk"),
            ],
            "cgu{unit}"
        );
        assert_eq!(report.without_code.len(), 2, "cgu{unit}");
        assert_eq!(report.thunks.len(), 1, "cgu{unit}");
    }
    let objects = |units: &[(Vec<u8>, MergeReport)]| -> Vec<Vec<u8>> {
        units.iter().map(|(o, _)| o.clone()).collect()
    };
    let (plain_objects, merged_objects) = (objects(&plain), objects(&merged));
    let plain_refs: Vec<&[u8]> = plain_objects.iter().map(Vec::as_slice).collect();
    let merged_refs: Vec<&[u8]> = merged_objects.iter().map(Vec::as_slice).collect();
    let main_c = main_c(&[("cgu1_entry", 7), ("cgu2_entry2", 9)]);
    let plain_run = native::link_all_and_run(&plain_refs, &main_c, "unwind-plain").expect("links");
    let merged_run =
        native::link_all_and_run(&merged_refs, &main_c, "unwind-merged").expect("links");
    print!("{}", merged_run.stdout);
    assert_eq!(plain_run.code, 0, "{}", plain_run.stdout);
    assert!(
        !plain_run.stdout.contains("DOES NOT") && plain_run.stdout.contains("reaches main"),
        "the unmerged build's walk must reach main:\n{}",
        plain_run.stdout
    );
    assert_eq!(
        (&merged_run.stdout, merged_run.code),
        (&plain_run.stdout, plain_run.code),
        "merging changed what the program does (or where its stack walk ends)"
    );
    let text = |objects: &[&[u8]]| -> u64 {
        objects
            .iter()
            .map(|o| native::text_bytes(o).expect("an object"))
            .sum()
    };
    let (before, after) = (text(&plain_refs), text(&merged_refs));
    println!(".text: {before} bytes unmerged, {after} merged");
    assert!(after < before, ".text {before} -> {after}");
}

/// With duplicates not compiled, `leaf_b`, `leaf_c` and `cguN_entry2` (equal to
/// `leaf_a` and `cguN_entry`, callees and all) leave no compiled code at their
/// define; the wrapper records nothing for them, and the program runs and
/// unwinds as the unmerged one.
#[test]
fn unwinding_walks_through_functions_never_compiled() {
    if target_lexicon::Triple::host().binary_format != target_lexicon::BinaryFormat::Elf {
        panic!("this test needs an ELF host");
    }
    let plain = build_program(false);
    let merged = build_program_with(ModuleMergeOptions::default().with_compile_duplicates(false));
    for (unit, (_, report)) in merged.iter().enumerate() {
        // leaf_b and leaf_c stand for leaf_a's code, cguN_entry2 for cguN_entry's.
        assert_eq!(
            report.not_compiled.len(),
            3,
            "cgu{unit}: {:?}",
            report.not_compiled
        );
        let actions: Vec<String> = report
            .actions
            .iter()
            .map(|(dup, kept, action)| format!("{dup}->{kept}:{action}"))
            .collect();
        assert_eq!(
            actions,
            [
                "leaf_b->leaf_a:erase".to_string(),
                "leaf_c->leaf_a:alias".to_string(),
                format!("cgu{unit}_entry2->cgu{unit}_entry:thunk"),
            ],
            "cgu{unit}"
        );
    }
    let objects = |units: &[(Vec<u8>, MergeReport)]| -> Vec<Vec<u8>> {
        units.iter().map(|(o, _)| o.clone()).collect()
    };
    let (plain_objects, merged_objects) = (objects(&plain), objects(&merged));
    let plain_refs: Vec<&[u8]> = plain_objects.iter().map(Vec::as_slice).collect();
    let merged_refs: Vec<&[u8]> = merged_objects.iter().map(Vec::as_slice).collect();
    let main_c = main_c(&[("cgu1_entry", 7), ("cgu2_entry2", 9)]);
    let plain_run =
        native::link_all_and_run(&plain_refs, &main_c, "unwind-plain-nc").expect("links");
    let merged_run =
        native::link_all_and_run(&merged_refs, &main_c, "unwind-not-compiled").expect("links");
    assert_eq!(plain_run.code, 0, "{}", plain_run.stdout);
    assert_eq!(
        (&merged_run.stdout, merged_run.code),
        (&plain_run.stdout, plain_run.code),
        "not compiling duplicates changed what the program does (or where its stack walk ends)"
    );
}

// ---------------------------------------------------------------------------------
// The same program through `JITModule`, unwind info registered with libgcc.
// ---------------------------------------------------------------------------------

mod jit {
    use super::*;
    use clif_merge::module::MergedJit;
    use cranelift_jit::{JITBuilder, JITModule};
    use std::ffi::c_void;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicUsize, Ordering};

    unsafe extern "C" {
        fn __register_frame(begin: *const u8);
        fn __deregister_frame(begin: *const u8);
        fn _Unwind_Backtrace(
            trace: extern "C" fn(*mut c_void, *mut c_void) -> i32,
            arg: *mut c_void,
        ) -> i32;
        fn _Unwind_GetIP(context: *mut c_void) -> usize;
        fn _Unwind_FindEnclosingFunction(pc: *mut c_void) -> *mut c_void;
    }

    /// Walks that reached [`call_jit`], and all walks.
    static REACHED: AtomicUsize = AtomicUsize::new(0);
    static WALKS: AtomicUsize = AtomicUsize::new(0);
    /// The JIT tests run one at a time (the counters are global).
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

    extern "C" fn step(context: *mut c_void, reached: *mut c_void) -> i32 {
        // SAFETY: called by `_Unwind_Backtrace` with its context.
        let ip = unsafe { _Unwind_GetIP(context) };
        let start = if ip == 0 {
            std::ptr::null_mut()
        } else {
            // SAFETY: a lookup by address.
            unsafe { _Unwind_FindEnclosingFunction((ip - 1) as *mut c_void) }
        };
        if start == call_jit as *const () as *mut c_void {
            // SAFETY: `reached` points at the walk's flag.
            unsafe { *(reached as *mut bool) = true };
        }
        0 // _URC_NO_REASON
    }

    /// What the JIT code calls: walks the stack.
    extern "C" fn callback(x: i64) -> i64 {
        let mut reached = false;
        // SAFETY: `step` matches the trace callback's signature.
        unsafe { _Unwind_Backtrace(step, &mut reached as *mut bool as *mut c_void) };
        WALKS.fetch_add(1, Ordering::Relaxed);
        if reached {
            REACHED.fetch_add(1, Ordering::Relaxed);
        }
        x * 3 + 1
    }

    /// Calls JIT code at `code` with `x`: the frame every walk must reach.
    #[inline(never)]
    extern "C" fn call_jit(code: *const u8, x: i64) -> i64 {
        // SAFETY: `code` is a finalized `(i64) -> i64` function in the host's
        // default calling convention.
        let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
        std::hint::black_box(f(x))
    }

    impl UnwindModule<MergingModule<JITModule>> {
        /// Finalizes and registers `.eh_frame` for the code: an entry per function
        /// with code of its own, thunks described by their own code. Returns the
        /// module and the registered bytes (to deregister).
        fn finish_jit(self) -> (MergedJit, Vec<u8>, MergeReport) {
            let cie = self
                .module
                .isa()
                .create_systemv_cie()
                .expect("a System V target");
            let (jit, report) = self.module.finish_jit().expect("finish");
            let skip: HashSet<FuncId> = report
                .without_code
                .iter()
                .copied()
                .chain(report.thunks.iter().map(|t| t.function))
                .collect();
            let mut table = FrameTable::default();
            let cie = table.add_cie(cie);
            let address = |id: FuncId| Address::Constant(jit.get_finalized_function(id) as u64);
            for (id, info) in &self.recorded {
                if let (false, UnwindInfo::SystemV(info)) = (skip.contains(id), info) {
                    table.add_fde(cie, info.to_fde(address(*id)));
                }
            }
            for thunk in &report.thunks {
                let fde = match &thunk.unwind {
                    Some(UnwindInfo::SystemV(info)) => info.to_fde(address(thunk.function)),
                    _ => FrameDescriptionEntry::new(address(thunk.function), thunk.size as u32),
                };
                table.add_fde(cie, fde);
            }
            let mut eh_frame = EhFrame(EndianVec::new(gimli::RunTimeEndian::Little));
            table.write_eh_frame(&mut eh_frame).expect("eh_frame");
            let mut bytes = eh_frame.0.into_vec();
            // libgcc reads entries until a zero length.
            bytes.extend_from_slice(&[0; 4]);
            // SAFETY: a complete `.eh_frame` with a terminator, alive until
            // deregistered.
            unsafe { __register_frame(bytes.as_ptr()) };
            (jit, bytes, report)
        }
    }

    /// The program's three units in one JIT module (one thread), every entry and
    /// `run` called on a few inputs: (name, results), and the report.
    fn run_program(merge: bool) -> (Vec<(String, Vec<i64>)>, MergeReport) {
        // cranelift-jit wants code that is not position-independent.
        let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
            .expect("host ISA")
            .finish(cranelift_codegen::settings::Flags::new(
                cranelift_codegen::settings::builder(),
            ))
            .expect("ISA");
        let mut builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
        builder.symbol("callback", callback as *const u8);
        let options = ModuleMergeOptions::default().with_enabled(merge);
        let mut module = UnwindModule::new(MergingModule::new(JITModule::new(builder), options));
        for unit in 0..UNITS {
            build_unit(&mut module, unit, &format!("cgu{unit}_"));
        }
        let mut names = vec!["run".to_string()];
        for unit in 0..UNITS {
            names.push(format!("cgu{unit}_entry"));
            names.push(format!("cgu{unit}_entry2"));
        }
        let ids: Vec<FuncId> = names
            .iter()
            .map(|n| match module.get_name(n) {
                Some(cranelift_module::FuncOrDataId::Func(id)) => id,
                other => panic!("{n}: {other:?}"),
            })
            .collect();
        let (jit, eh_frame, report) = module.finish_jit();
        let results = names
            .iter()
            .zip(ids)
            .map(|(name, id)| {
                let code = jit.get_finalized_function(id);
                let values = [0, 5, -7].iter().map(|&x| call_jit(code, x)).collect();
                (name.clone(), values)
            })
            .collect();
        // SAFETY: registered above, not yet deregistered.
        unsafe { __deregister_frame(eh_frame.as_ptr()) };
        // The code stays mapped (the module is not freed): a leak, in a test.
        std::mem::forget(jit);
        (results, report)
    }

    #[test]
    fn unwinding_walks_through_merged_jit_code() {
        let _one = ONE_AT_A_TIME.lock().expect("lock");
        let before = (
            WALKS.load(Ordering::Relaxed),
            REACHED.load(Ordering::Relaxed),
        );
        let (plain, _) = run_program(false);
        let (merged, report) = run_program(true);
        let walks = WALKS.load(Ordering::Relaxed) - before.0;
        let reached = REACHED.load(Ordering::Relaxed) - before.1;
        assert_eq!(merged, plain, "merging changed what the JIT code computes");
        // Per unit: leaf_b erased, leaf_c aliased, entry2 a thunk; `leaf_*` and
        // `mid` are local with one name per unit, so in one module they are the
        // three units' own (anonymous to each other).
        assert!(
            !report.thunks.is_empty() && !report.without_code.is_empty(),
            "{report:?}"
        );
        assert!(walks > 0);
        assert_eq!(
            reached, walks,
            "every stack walk from the callback reaches the caller of the JIT code"
        );
        println!(
            "{walks} stack walks, all reaching call_jit; {} merged",
            report.merged()
        );
    }
}

// ---------------------------------------------------------------------------------
// Separate compilation compiled at define: the units summarized from machine code.
// ---------------------------------------------------------------------------------

/// Three units on threads, each `UnwindModule<MergingModule<ObjectModule>>`
/// compiling at define, summarized from their machine code, planned together, and
/// each finished with its decisions: the local `leaf` and `mid` of every unit are
/// equal, so `cgu0`'s are promoted and the others removed, and the exported
/// `cguN_entry` of units 1 and 2 become thunks to `cgu0_entry`. The callback's
/// stack walk goes through the promoted code and the thunks and must still reach
/// `main`.
#[cfg(feature = "separate")]
mod separate {
    use super::*;
    use clif_merge::module::CompileMode;
    use clif_merge::separate::{ModuleDecisions, PlanCounts, Summary, plan_program};
    use std::sync::mpsc::channel;

    /// Builds unit `unit`: local `leaf` (calls the callback) and `mid` (calls
    /// `leaf`), the same in every unit, and the exported `cguN_entry` (calls
    /// `mid`); unit 0 also exports `run`, which calls every unit's entry.
    fn build_unit<M: Module>(m: &mut M, unit: usize) {
        let mut sig = m.make_signature();
        sig.params.push(AbiParam::new(I64));
        sig.returns.push(AbiParam::new(I64));
        let callback = m
            .declare_function("callback", Linkage::Import, &sig)
            .expect("declare");
        let leaf = m
            .declare_function("leaf", Linkage::Local, &sig)
            .expect("declare");
        define(m, leaf, &sig, |m, b, x| {
            let x = b.ins().iadd_imm_s(x, 1);
            let y = call(m, b, callback, x);
            b.ins().iadd_imm_s(y, 1)
        });
        let mid = m
            .declare_function("mid", Linkage::Local, &sig)
            .expect("declare");
        define(m, mid, &sig, |m, b, x| {
            let y = call(m, b, leaf, x);
            b.ins().imul_imm_s(y, 2)
        });
        let entry = m
            .declare_function(&format!("cgu{unit}_entry"), Linkage::Export, &sig)
            .expect("declare");
        define(m, entry, &sig, |m, b, x| {
            let y = call(m, b, mid, x);
            b.ins().iadd_imm_s(y, 3)
        });
        if unit == 0 {
            let run = m
                .declare_function("run", Linkage::Export, &sig)
                .expect("declare");
            let callees: Vec<FuncId> = (0..UNITS)
                .map(|u| {
                    let name = format!("cgu{u}_entry");
                    let linkage = if u == unit {
                        Linkage::Export
                    } else {
                        Linkage::Import
                    };
                    m.declare_function(&name, linkage, &sig).expect("declare")
                })
                .collect();
            define(m, run, &sig, |m, b, x| {
                let mut total = b.ins().iconst(I64, 0);
                for callee in callees {
                    let value = call(m, b, callee, x);
                    total = b.ins().imul_imm_s(total, 7);
                    total = b.ins().iadd(total, value);
                }
                total
            });
        }
    }

    /// A `MergingModule` for unit `unit` compiling as `compile` says.
    fn merging(unit: usize, compile: CompileMode, merge: bool) -> MergingModule<ObjectModule> {
        let isa = native::pic_host_isa().expect("host ISA");
        let builder = ObjectBuilder::new(
            isa,
            format!("cgu{unit}"),
            cranelift_module::default_libcall_names(),
        )
        .expect("object builder");
        let options = ModuleMergeOptions::default()
            .with_compile(compile)
            .with_enabled(merge);
        MergingModule::new(ObjectModule::new(builder), options)
    }

    /// Every unit on its own thread, unwind-recorded and compiled at define; with
    /// `merge`, through the three stages. The objects with their reports, and the
    /// plan's counts.
    fn build_program(merge: bool) -> (Vec<(Vec<u8>, MergeReport)>, PlanCounts) {
        std::thread::scope(|scope| {
            let (summary_tx, summary_rx) = channel::<Vec<u8>>();
            let mut decision_txs = Vec::new();
            let threads: Vec<_> = (0..UNITS)
                .map(|unit| {
                    let summary_tx = summary_tx.clone();
                    let (decision_tx, decision_rx) = channel::<Vec<u8>>();
                    decision_txs.push(decision_tx);
                    scope.spawn(move || {
                        let mut module =
                            UnwindModule::new(merging(unit, CompileMode::AtDefine, merge));
                        build_unit(&mut module, unit);
                        if merge {
                            let name = format!("cgu{unit}");
                            let summary = module.module.summarize(&name).expect("summary");
                            summary_tx.send(summary.to_bytes()).expect("planner");
                            drop(summary_tx);
                            let bytes = decision_rx.recv().expect("decisions");
                            let decisions = ModuleDecisions::from_bytes(&bytes).expect("read");
                            let UnwindModule {
                                module: inner,
                                recorded,
                            } = module;
                            module = UnwindModule {
                                module: inner.with_decisions(decisions),
                                recorded,
                            };
                        }
                        let (product, report) = module.finish();
                        (product.emit().expect("emit"), report)
                    })
                })
                .collect();
            drop(summary_tx);
            let mut counts = PlanCounts::default();
            if merge {
                let summaries: Vec<Summary> = summary_rx
                    .iter()
                    .map(|bytes| Summary::from_bytes(&bytes).expect("summary file"))
                    .collect();
                let plan = plan_program(&summaries).expect("plan");
                counts = plan.counts();
                for decisions in &plan.decisions {
                    let unit: usize = decisions.module["cgu".len()..].parse().expect("unit");
                    decision_txs[unit]
                        .send(decisions.to_bytes())
                        .expect("unit thread");
                }
            }
            drop(decision_txs);
            let units = threads
                .into_iter()
                .map(|t| t.join().expect("a codegen thread panicked"))
                .collect();
            (units, counts)
        })
    }

    /// The plan of the same program summarized from IR (compiled at finish).
    fn counts_at_finish() -> PlanCounts {
        let summaries: Vec<Summary> = (0..UNITS)
            .map(|unit| {
                let mut module = merging(unit, CompileMode::AtFinish, true);
                build_unit(&mut module, unit);
                module.summarize(&format!("cgu{unit}")).expect("summary")
            })
            .collect();
        plan_program(&summaries).expect("plan").counts()
    }

    #[test]
    fn unwinding_walks_through_code_merged_across_units_compiled_at_define() {
        if target_lexicon::Triple::host().binary_format != target_lexicon::BinaryFormat::Elf {
            // The wrapper writes ELF `.eh_frame` (as cranelift-object's own does).
            panic!("this test needs an ELF host");
        }
        let (plain, _) = build_program(false);
        let (merged, counts) = build_program(true);
        // leaf and mid: promoted in cgu0, removed in cgu1 and cgu2; cgu1_entry and
        // cgu2_entry: thunks to cgu0_entry, which `run` calls directly.
        assert_eq!(
            counts,
            PlanCounts::default()
                .with_removed(4)
                .with_thunked(2)
                .with_promoted(2)
                .with_redirected(2)
        );
        assert_eq!(counts, counts_at_finish(), "AtDefine vs AtFinish");
        for (unit, (_, report)) in merged.iter().enumerate() {
            let expected = if unit == 0 { 2 } else { 3 };
            assert_eq!(report.cross_module.len(), expected, "cgu{unit}: applied");
            assert_eq!(
                report.promoted.len(),
                2 * usize::from(unit == 0),
                "cgu{unit}"
            );
        }
        let objects = |units: &[(Vec<u8>, MergeReport)]| -> Vec<Vec<u8>> {
            units.iter().map(|(o, _)| o.clone()).collect()
        };
        let (plain_objects, merged_objects) = (objects(&plain), objects(&merged));
        let plain_refs: Vec<&[u8]> = plain_objects.iter().map(Vec::as_slice).collect();
        let merged_refs: Vec<&[u8]> = merged_objects.iter().map(Vec::as_slice).collect();
        let main_c = main_c(&[("cgu1_entry", 7), ("cgu2_entry", 9)]);
        let plain_run =
            native::link_all_and_run(&plain_refs, &main_c, "unwind-sep-plain").expect("links");
        let merged_run =
            native::link_all_and_run(&merged_refs, &main_c, "unwind-sep-merged").expect("links");
        print!("{}", merged_run.stdout);
        assert_eq!(plain_run.code, 0, "{}", plain_run.stdout);
        assert!(
            !plain_run.stdout.contains("DOES NOT") && plain_run.stdout.contains("reaches main"),
            "the unmerged build's walk must reach main:\n{}",
            plain_run.stdout
        );
        assert_eq!(
            (&merged_run.stdout, merged_run.code),
            (&plain_run.stdout, plain_run.code),
            "merging changed what the program does (or where its stack walk ends)"
        );
        let text = |objects: &[&[u8]]| -> u64 {
            objects
                .iter()
                .map(|o| native::text_bytes(o).expect("an object"))
                .sum()
        };
        let (before, after) = (text(&plain_refs), text(&merged_refs));
        println!(".text: {before} bytes unmerged, {after} merged");
        assert!(after < before, ".text {before} -> {after}");
    }
}
