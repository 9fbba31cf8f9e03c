//! Ahead-of-time compilation through `MergingModule<ObjectModule>`: the program in
//! `shared/program.rs` is compiled for the host twice (without and with merging),
//! each object is linked with the system `cc` against a small C `main` and run, and
//! the example prints what was merged, both programs' output and the `.text` sizes.
//!
//! Run with `cargo run --example aot`.

#[path = "shared/native.rs"]
mod native;
#[path = "shared/program.rs"]
mod program;

use clif_merge::module::{MergeReport, MergingModule, ModuleMergeOptions};
use cranelift_object::{ObjectBuilder, ObjectModule};

const MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern int64_t run(int64_t);
extern int64_t api_v1(int64_t);
extern int64_t api_v2(int64_t);
extern int64_t (*callbacks[2])(int64_t);
int main(void) {
    for (int64_t x = 0; x < 4; x++)
        printf("run(%lld) = %lld\n", (long long)x, (long long)run(x));
    printf("api_v1(6) = %lld, api_v2(6) = %lld\n", (long long)api_v1(6), (long long)api_v2(6));
    printf("callbacks: %lld %lld, same address: %d\n", (long long)callbacks[0](1),
           (long long)callbacks[1](1), callbacks[0] == callbacks[1]);
    printf("api_v1 and api_v2 share an address: %d\n", (void *)&api_v1 == (void *)&api_v2);
    return 0;
}
"#;

fn compile(enabled: bool) -> Result<(Vec<u8>, MergeReport), Box<dyn std::error::Error>> {
    let isa = native::pic_host_isa()?;
    let builder = ObjectBuilder::new(isa, "program", cranelift_module::default_libcall_names())?;
    let options = ModuleMergeOptions::default().with_enabled(enabled);
    let mut module = MergingModule::new(ObjectModule::new(builder), options);
    program::build(&mut module);
    let (product, report) = module.finish_object()?;
    Ok((product.emit()?, report))
}

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (plain, _) = compile(false)?;
    let (merged, report) = compile(true)?;
    println!(
        "merged {} of {} functions:",
        report.merged(),
        report.functions
    );
    for (function, into, action) in &report.actions {
        println!("  {function} -> {into}: {action}");
    }
    println!(
        "machine code saved (measured by compiling the duplicates): {} bytes",
        report.bytes_saved
    );
    let plain_output = native::link_and_run(&plain, MAIN_C, "aot-plain")?.stdout;
    let merged_output = native::link_and_run(&merged, MAIN_C, "aot-merged")?.stdout;
    println!("\nprogram output without merging:\n{plain_output}");
    println!("program output with merging:\n{merged_output}");
    println!(
        "identical output: {}",
        if plain_output == merged_output {
            "yes"
        } else {
            "NO"
        }
    );
    println!(
        ".text: {} bytes without merging, {} bytes with merging",
        native::text_bytes(&plain)?,
        native::text_bytes(&merged)?
    );
    if plain_output != merged_output {
        return Err("merging changed the program's output".into());
    }
    Ok(())
}
