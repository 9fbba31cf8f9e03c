//! Measurements: live heap bytes (a counting allocator), the pass split into its
//! stages, and Cranelift's own compile time for the same functions.

use clif_merge::{
    FunctionSet, MergeOptions, MergePlan, MergeStats, merge_functions, merge_functions_in_place,
};
use cranelift_codegen::Context;
use cranelift_codegen::control::ControlPlane;
use cranelift_codegen::ir::Function;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting live bytes and their high-water mark.
pub struct CountingAllocator;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
/// Counting is switched off for timed runs: two threads updating the same counters
/// on every allocation would slow down exactly what is being measured.
static COUNTING: AtomicBool = AtomicBool::new(true);

unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() && COUNTING.load(Ordering::Relaxed) {
            let live = LIVE.fetch_add(layout.size(), Ordering::Relaxed) + layout.size();
            PEAK.fetch_max(live, Ordering::Relaxed);
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        if COUNTING.load(Ordering::Relaxed) {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = unsafe { System.realloc(ptr, layout, new_size) };
        if !new.is_null() && COUNTING.load(Ordering::Relaxed) {
            if new_size >= layout.size() {
                let grow = new_size - layout.size();
                let live = LIVE.fetch_add(grow, Ordering::Relaxed) + grow;
                PEAK.fetch_max(live, Ordering::Relaxed);
            } else {
                LIVE.fetch_sub(layout.size() - new_size, Ordering::Relaxed);
            }
        }
        new
    }
}

/// Live heap bytes now.
pub fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

/// Starts a new high-water mark at the current live bytes.
pub fn reset_peak() {
    PEAK.store(LIVE.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// The high-water mark since the last [`reset_peak`].
pub fn peak_bytes() -> usize {
    PEAK.load(Ordering::Relaxed)
}

/// One measured run of the pass.
pub struct PassRun {
    /// The pass's own counters and stage times.
    pub stats: MergeStats,
    /// Wall time of the whole pass.
    pub total: Duration,
    /// Heap bytes the pass needed beyond what was live before it, at its peak
    /// (its output included).
    pub peak_extra: usize,
    /// Functions merged away.
    pub merged: usize,
    /// Classes with two or more members.
    pub classes: usize,
}

/// How the pass is run.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Rewrite {
    /// `merge_functions`: the input stays as it is, rewritten functions are copies.
    Copying,
    /// `merge_functions_in_place`: the module is rewritten in place (on a copy
    /// made before the clock starts).
    InPlace,
}

/// A pool of `threads` threads, started and woken once, for every run of
/// [`run_pass`] with that thread count: a compiler that runs the pass (rustc's
/// codegen units, wasmtime's parallel compile) has its pool running already, and
/// a pool built inside a pass of a millisecond would time thread start-up.
pub fn warm_pool(threads: usize) -> anyhow::Result<rayon::ThreadPool> {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    pool.broadcast(|_| ());
    Ok(pool)
}

/// Runs the pass once over `module` on `pool` ([`warm_pool`]). With `count_heap`,
/// the heap is counted (and the run is slower); without, `peak_extra` is 0.
pub fn run_pass(
    module: &FunctionSet,
    options: &MergeOptions,
    pool: &rayon::ThreadPool,
    count_heap: bool,
    rewrite: Rewrite,
) -> PassRun {
    match rewrite {
        Rewrite::InPlace => {
            let mut copy = module.deep_clone();
            measure(pool, count_heap, || {
                let (plan, stats) = merge_functions_in_place(&mut copy, options);
                (plan, stats, ())
            })
        }
        Rewrite::Copying => measure(pool, count_heap, || {
            let outcome = merge_functions(module, options);
            (outcome.plan, outcome.stats, outcome.output)
        }),
    }
}

/// Times `pass` on `pool`, with the peak heap it adds when `count_heap`. `pass` returns the plan, the stats and whatever else it allocated;
/// all of it is freed inside the measurement, so switching counting off and on
/// around it keeps the live count right.
fn measure<T>(
    pool: &rayon::ThreadPool,
    count_heap: bool,
    pass: impl FnOnce() -> (MergePlan, MergeStats, T) + Send,
) -> PassRun {
    pool.install(|| {
        let before = live_bytes();
        reset_peak();
        COUNTING.store(count_heap, Ordering::SeqCst);
        let start = Instant::now();
        let (plan, stats, rest) = pass();
        let total = start.elapsed();
        let peak_extra = peak_bytes().saturating_sub(before);
        let run = PassRun {
            merged: plan.decisions.len(),
            classes: plan.classes.len(),
            stats,
            total,
            peak_extra: if count_heap { peak_extra } else { 0 },
        };
        drop(rest);
        drop(plan);
        COUNTING.store(true, Ordering::SeqCst);
        run
    })
}

/// Cranelift's compile time for every function of `module` (host ISA,
/// `opt_level=speed`), one after the other on one thread, and the code bytes.
pub fn compile_all(module: &FunctionSet) -> anyhow::Result<(Duration, u64)> {
    let isa = host_isa()?;
    let mut total = Duration::ZERO;
    let mut bytes = 0u64;
    let mut ctx = Context::new();
    for (_, def) in module.iter() {
        ctx.clear();
        ctx.func = (*def.func).clone();
        let start = Instant::now();
        bytes += compile_one(&*isa, &mut ctx)?;
        total += start.elapsed();
    }
    Ok((total, bytes))
}

/// Wall time of compiling every function of `module` like [`compile_all`], spread
/// over a pool of `threads` threads (what a compiler that compiles functions in
/// parallel spends).
pub fn compile_all_on(module: &FunctionSet, threads: usize) -> anyhow::Result<Duration> {
    use rayon::prelude::*;
    let isa = host_isa()?;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()?;
    let functions: Vec<&Function> = module.iter().map(|(_, def)| &*def.func).collect();
    pool.install(|| {
        let start = Instant::now();
        functions
            .par_iter()
            .map_init(Context::new, |ctx, &func| {
                ctx.clear();
                ctx.func = func.clone();
                compile_one(&*isa, ctx)
            })
            .collect::<anyhow::Result<Vec<u64>>>()?;
        Ok(start.elapsed())
    })
}

/// The host ISA as compilers that ship Cranelift configure it: `opt_level=speed`,
/// frame pointers kept, and the verifier off (Cranelift's default is on;
/// rustc_codegen_cranelift and wasmtime turn it off unless asked to verify, and
/// it costs a tenth or more of the compile). `CLIF_MERGE_BENCH_VERIFIER=1` keeps it on.
fn host_isa() -> anyhow::Result<cranelift_codegen::isa::OwnedTargetIsa> {
    use cranelift_codegen::settings::{self, Configurable};
    let mut flags = settings::builder();
    flags.set("opt_level", "speed")?;
    flags.set("preserve_frame_pointers", "true")?;
    let verifier = std::env::var_os("CLIF_MERGE_BENCH_VERIFIER").is_some_and(|v| v == "1");
    flags.set("enable_verifier", if verifier { "true" } else { "false" })?;
    Ok(
        cranelift_codegen::isa::lookup(target_lexicon::Triple::host())?
            .finish(settings::Flags::new(flags))?,
    )
}

fn compile_one(
    isa: &dyn cranelift_codegen::isa::TargetIsa,
    ctx: &mut Context,
) -> anyhow::Result<u64> {
    let name = ctx.func.name.to_string();
    let compiled = ctx
        .compile(isa, &mut ControlPlane::default())
        .map_err(|e| anyhow::anyhow!("compiling {name}: {:?}", e.inner))?;
    Ok(compiled.code_buffer().len() as u64)
}
