//! `MergingModule`, the drop-in `cranelift_module::Module` wrapper (`src/module`):
//! AOT objects linked with `cc` and JIT code, run against the unmerged build;
//! compile-once, data merging, thunks, unwinding, function addresses, separate
//! compilation inside a compiler (codegen units, compiling at define), and the
//! examples run as tests.
//!
//! One test binary; each module is one former `tests/*.rs` binary. A test that
//! defines functions through `MergingModule` goes here (`support/define.rs` builds
//! and defines functions, `common/` is the fixture module of the AOT and JIT tests).

// Several modules load the same `tests/support` file with `#[path]`, each its own
// copy, as when every one of them was a test binary of its own.
#![allow(clippy::duplicate_mod)]

mod codegen_units;
mod compile_once;
mod examples_run;
mod jit_units;
mod module_addresses;
mod module_aot;
mod module_data;
mod module_define;
mod module_jit;
mod module_similar;
mod module_thunks;
mod separate_at_define;
mod unwind;
