//! The examples are programs in their own right: each builds its program with and
//! without merging, runs both, and fails if merging changed what the program does.
//! Running them here makes the AOT (two more programs, linked with `cc`) and JIT
//! end-to-end checks part of `cargo test`.

// `aot` and `jit` each include `examples/shared/program.rs`, as separate example
// crates do; here they share one test crate, so the file is loaded twice.
#![allow(clippy::duplicate_mod)]

#[path = "../../examples/aot.rs"]
mod aot;
#[path = "../../examples/jit.rs"]
mod jit;
#[path = "../../examples/multi_object.rs"]
mod multi_object;
#[path = "../../examples/toylang/main.rs"]
mod toylang;

#[test]
fn aot_example_program_behaves_the_same_merged() {
    aot::main().expect("aot example");
}

#[test]
fn jit_example_program_behaves_the_same_merged() {
    jit::main().expect("jit example");
}

#[test]
fn toylang_program_behaves_the_same_merged() {
    toylang::main().expect("toylang example");
}

#[test]
fn multi_object_example_links_and_behaves_the_same_merged() {
    multi_object::main().expect("multi_object example");
}
