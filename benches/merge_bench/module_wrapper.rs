//! `module`: the cost of `MergingModule` to a backend, measured as a backend meets
//! it: the input's functions defined one after another through a plain
//! `ObjectModule`, then through `MergingModule<ObjectModule>` in each compile mode
//! (compile-at-define with and without compile-once), all on this thread, each run timed from the first define to the emitted object,
//! with the heap's high-water mark above what was live before the run. Each
//! function's IR is made (cloned from the parsed input) just before its define, as
//! a frontend makes it, and dropped by the define, as a backend drops it. The
//! objects written with and without compile-once must be the same bytes.

use super::measure::{live_bytes, peak_bytes, reset_peak};
use anyhow::Context as _;
use clif_merge::FunctionSet;
use clif_merge::module::{CompileMode, MergingModule, ModuleMergeOptions};
use cranelift_codegen::Context;
use cranelift_codegen::ir::{ExternalName, Function, UserExternalName};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How the functions are defined.
#[derive(Copy, Clone, Debug)]
enum Variant {
    /// A plain `ObjectModule`.
    Plain,
    /// `MergingModule` in a compile mode, compiling each equal function once or
    /// not ([`ModuleMergeOptions::compile_once`], which only compile-at-define
    /// reads).
    Merging(CompileMode, bool),
}

impl std::fmt::Display for Variant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Plain => write!(f, "Plain"),
            Self::Merging(CompileMode::AtDefine, true) => write!(f, "AtDefine+once"),
            Self::Merging(mode, _) => write!(f, "{mode:?}"),
        }
    }
}

/// One run: time, heap, the object, and what the pass merged.
struct Measured {
    time: Duration,
    peak_heap: usize,
    object: Vec<u8>,
    merged: usize,
    /// Defines that reused an equal function's compile.
    reused: usize,
}

/// The functions of `module` as a backend would define them: every callee named
/// `u0:FuncId`, the `FuncId` of each function its index (callees the module does
/// not define are imports, declared after).
fn prepared(module: &FunctionSet) -> (Vec<Function>, Vec<String>) {
    let names: Vec<String> = module
        .iter()
        .map(|(_, d)| d.func.name.to_string())
        .collect();
    let id_of: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut imports: Vec<String> = Vec::new();
    let mut functions = Vec::new();
    for (_, def) in module.iter() {
        let mut func = (*def.func).clone();
        let refs: Vec<_> = func.dfg.ext_funcs.keys().collect();
        for r in refs {
            let name = func.dfg.ext_funcs[r]
                .name
                .display(Some(&func.params))
                .to_string();
            let index = match id_of.get(name.as_str()) {
                Some(&i) => i,
                None => {
                    let i = imports.iter().position(|n| *n == name).unwrap_or_else(|| {
                        imports.push(name.clone());
                        imports.len() - 1
                    });
                    names.len() + i
                }
            };
            let user = func
                .params
                .ensure_user_func_name(UserExternalName::new(0, index as u32));
            func.dfg.ext_funcs[r].name = ExternalName::User(user);
        }
        functions.push(func);
    }
    let mut all_names = names;
    all_names.extend(imports);
    (functions, all_names)
}

/// Defines `functions` (named `names`, the defined ones first) through `variant`
/// and emits the object.
fn run_variant(
    variant: Variant,
    functions: &[Function],
    names: &[String],
) -> anyhow::Result<Measured> {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed")?;
    flags.set("is_pic", "true")?;
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())?
        .finish(settings::Flags::new(flags))?;
    reset_peak();
    let base = live_bytes();
    let start = Instant::now();
    let builder = ObjectBuilder::new(isa, "bench", cranelift_module::default_libcall_names())?;
    let inner = ObjectModule::new(builder);
    let (object, merged, reused) = match variant {
        Variant::Plain => {
            let mut module = inner;
            define_all(&mut module, functions, names, true)?;
            (module.finish().emit()?, 0, 0)
        }
        Variant::Merging(mode, once) => {
            let options = ModuleMergeOptions::default()
                .with_compile(mode)
                .with_compile_once(once);
            let mut module = MergingModule::new(inner, options);
            define_all(&mut module, functions, names, mode == CompileMode::AtDefine)?;
            let (product, report) = module.finish_object()?;
            (product.emit()?, report.merged(), report.compiles_reused)
        }
    };
    Ok(Measured {
        time: start.elapsed(),
        peak_heap: peak_bytes().saturating_sub(base),
        object,
        merged,
        reused,
    })
}

/// Declares every function of `names` (the first `functions.len()` exported, the
/// rest imports), then defines `functions` in order, checking that each define
/// left its compiled code in the context if `compiles` (every mode but
/// compile-at-finish).
fn define_all<M: Module>(
    module: &mut M,
    functions: &[Function],
    names: &[String],
    compiles: bool,
) -> anyhow::Result<()> {
    for (i, name) in names.iter().enumerate() {
        let (linkage, sig) = match functions.get(i) {
            Some(f) => (Linkage::Export, &f.signature),
            None => (Linkage::Import, &functions[0].signature),
        };
        let id = module.declare_function(name, linkage, sig)?;
        anyhow::ensure!(id.as_u32() as usize == i, "declaration order");
    }
    for (i, func) in functions.iter().enumerate() {
        let mut ctx = Context::for_function(func.clone());
        module
            .define_function(FuncId::from_u32(i as u32), &mut ctx)
            .with_context(|| names[i].clone())?;
        // What an embedder reads after every define (unwind info): compile-once
        // must leave it too.
        anyhow::ensure!(
            !compiles || ctx.compiled_code().is_some(),
            "no compiled code after defining {}",
            names[i]
        );
    }
    Ok(())
}

/// Runs every variant on `module` `repeat` times, interleaved (so that a slow
/// spell of a shared machine hits every variant alike), and prints one line each
/// with the median time, then the ratios of the medians.
pub fn module_bench(label: &str, module: &FunctionSet, repeat: usize) -> anyhow::Result<()> {
    let variants = [
        Variant::Plain,
        Variant::Merging(CompileMode::AtDefine, true),
        Variant::Merging(CompileMode::AtDefine, false),
        Variant::Merging(CompileMode::AtFinish, true),
    ];
    let (functions, names) = prepared(module);
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    let mut last: Vec<Measured> = Vec::new();
    for _ in 0..repeat.max(1) {
        last.clear();
        for (i, &variant) in variants.iter().enumerate() {
            let m = run_variant(variant, &functions, &names)?;
            times[i].push(m.time);
            last.push(m);
        }
        // Compile-once reuses only what a fresh compile would give: the same object.
        anyhow::ensure!(
            last[1].object == last[2].object,
            "{label}: the object with compile-once differs from the one without"
        );
    }
    let median = |t: &mut Vec<Duration>| {
        t.sort_unstable();
        t[t.len() / 2]
    };
    let medians: Vec<Duration> = times.iter_mut().map(median).collect();
    for ((variant, m), time) in variants.iter().zip(&last).zip(&medians) {
        println!(
            "{label}: {variant}: {} functions, {:.1} ms (median of {}), peak heap {:.1} MB, object {} bytes, {} merged, {} compiles reused",
            module.len(),
            time.as_secs_f64() * 1e3,
            repeat.max(1),
            m.peak_heap as f64 / 1e6,
            m.object.len(),
            m.merged,
            m.reused
        );
    }
    let (plain, plain_time) = (&last[0], medians[0]);
    for ((variant, m), time) in variants.iter().zip(&last).zip(&medians).skip(1) {
        println!(
            "{label}: {variant} / Plain: time {:.3}x, peak heap {:.3}x, object {:.3}x; merged {:.1}% of the functions",
            time.as_secs_f64() / plain_time.as_secs_f64(),
            m.peak_heap as f64 / plain.peak_heap.max(1) as f64,
            m.object.len() as f64 / plain.object.len().max(1) as f64,
            100.0 * m.merged as f64 / module.len().max(1) as f64,
        );
    }
    println!("{label}: AtDefine+once object = AtDefine object (byte for byte, every run)");
    Ok(())
}
