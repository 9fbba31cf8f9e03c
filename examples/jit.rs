//! Just-in-time compilation through `MergingModule<JITModule>`: the program in
//! `shared/program.rs` is compiled in memory without and with merging, and every
//! function is called, including through the pointer `get_finalized_function` gives
//! for an erased or aliased duplicate, and through the callback table.
//!
//! Run with `cargo run --example jit`.

#[path = "shared/program.rs"]
mod program;

use clif_merge::module::{MergedJit, MergingModule, ModuleMergeOptions};
use cranelift_codegen::settings;
use cranelift_jit::{JITBuilder, JITModule};

fn compile(
    enabled: bool,
) -> Result<(MergedJit, program::Program, usize), Box<dyn std::error::Error>> {
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())?
        .finish(settings::Flags::new(settings::builder()))?;
    let builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    let options = ModuleMergeOptions::default().with_enabled(enabled);
    let mut module = MergingModule::new(JITModule::new(builder), options);
    let program = program::build(&mut module);
    let (jit, report) = module.finish_jit()?;
    if enabled {
        println!(
            "merged {} of {} functions:",
            report.merged(),
            report.functions
        );
        for (function, into, action) in &report.actions {
            println!("  {function} -> {into}: {action}");
        }
    }
    Ok((jit, program, report.merged()))
}

/// Every function's results on 0..6, and the callbacks' results on 1.
fn call_everything(jit: &MergedJit, program: &program::Program) -> Vec<String> {
    let mut lines = Vec::new();
    for (name, id) in &program.functions {
        let code = jit.get_finalized_function(*id);
        // SAFETY: every function of the program has the signature `(i64) -> i64` in
        // the host's default calling convention, which is `extern "C"`.
        let f: extern "C" fn(i64) -> i64 = unsafe { std::mem::transmute(code) };
        let results: Vec<i64> = (0..6i64).map(|x| f(x)).collect();
        lines.push(format!("{name:>11} at {code:p}: {results:?}"));
    }
    let (table, _) = jit.module().get_finalized_data(program.table);
    // SAFETY: the table holds two `(i64) -> i64` function pointers.
    let callbacks: [extern "C" fn(i64) -> i64; 2] = unsafe { std::ptr::read(table.cast()) };
    lines.push(format!(
        "  callbacks: {} {} (same address: {})",
        callbacks[0](1),
        callbacks[1](1),
        callbacks[0] as usize == callbacks[1] as usize
    ));
    lines
}

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (plain, plain_program, _) = compile(false)?;
    let (merged, merged_program, _) = compile(true)?;
    let before = call_everything(&plain, &plain_program);
    let after = call_everything(&merged, &merged_program);
    println!("\nwith merging (erased and aliased duplicates share the kept code):");
    for line in &after {
        println!("{line}");
    }
    let strip = |lines: &[String]| -> Vec<String> {
        lines
            .iter()
            .map(|l| match l.find(" at ") {
                Some(at) => format!("{}{}", &l[..at], &l[l.find(':').unwrap_or(at)..]),
                None => l.clone(),
            })
            .collect()
    };
    let same = strip(&before) == strip(&after);
    println!(
        "\nevery function returns what it returns without merging: {}",
        if same { "yes" } else { "NO" }
    );
    if !same {
        return Err("merging changed results".into());
    }
    Ok(())
}
