//! Using clif-merge as a library: parse CLIF, run the pass, print what it merged.
//!
//! Run with `cargo run --example library`.

use clif_merge::{FunctionSet, Linkage, MergeOptions, OutputEntry, merge_functions};

const MODULE: &str = r#"
function %square_i32(i32) -> i32 {
block0(v0: i32):
    v1 = imul v0, v0
    return v1
}

function %square_again(i32) -> i32 {
block0(v10: i32):
    v11 = imul v10, v10
    return v11
}

function %sum_of_squares(i32, i32) -> i32 {
    fn0 = %square_i32(i32) -> i32
    fn1 = %square_again(i32) -> i32
block0(v0: i32, v1: i32):
    v2 = call fn0(v0)
    v3 = call fn1(v1)
    v4 = iadd v2, v3
    return v4
}
"#;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut module = FunctionSet::new();
    for func in cranelift_reader::parse_functions(MODULE)? {
        let linkage = if func.name.to_string() == "%sum_of_squares" {
            Linkage::Export
        } else {
            Linkage::Local
        };
        module.push(func, linkage)?;
    }
    let outcome = merge_functions(&module, &MergeOptions::default());
    for d in &outcome.plan.decisions {
        println!(
            "{} -> {} ({})",
            module.display_name(d.function),
            module.display_name(d.into),
            d.action
        );
    }
    println!();
    // The merged module, in input order.
    for entry in &outcome.output {
        match entry {
            OutputEntry::Function(_, func) => println!("{}", func.display()),
            OutputEntry::Thunk {
                function,
                into,
                body,
            } => {
                let (f, k) = (module.display_name(*function), module.display_name(*into));
                println!("; {f}: thunk to {k}\n{}", body.display());
            }
            OutputEntry::Removed {
                function,
                into,
                action,
            } => {
                let (f, k) = (module.display_name(*function), module.display_name(*into));
                println!("; {f}: {action} into {k}\n");
            }
        }
    }
    Ok(())
}
