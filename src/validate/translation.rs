//! Translation validation: run every merge in `cranelift-interpreter` and compare.
//!
//! For each duplicate, the *original* duplicate runs in the original module and its
//! *replacement* runs in the merged module (the kept function with its calls
//! redirected, or the thunk), on the same inputs: edge values of every parameter type
//! and seeded random values. Results and traps must agree. The comparator is not
//! consulted, so this is an oracle independent of it.
//!
//! Functions run in a [`Sandbox`]: memory behind any pointer, global values, calls
//! that leave the module and indirect calls are all defined there, deterministically
//! and identically for both sides, and what a run leaves in memory (including a trace
//! of the calls that left the module) is part of its result. What the sandbox cannot
//! run (exceptions, reads of machine state, vector parameters) is counted as
//! *unvalidated* with the reason, never as passed. An input on which the original
//! runs out of fuel or hits an interpreter error is inconclusive; once the original
//! finished, the merged side must finish the same way (a panic, an interpreter
//! error, or running out of four times the fuel is a mismatch). A pair with no
//! conclusive input because the original ran out of fuel on every input is run
//! again with ten times the fuel on the inputs that ran out (long loops); a pair
//! with still no conclusive input is unvalidated.

use super::inputs::inputs_for;
use super::progress::{NoProgress, Progress};
use super::sandbox::{
    Ending, FunctionAddresses, Inconclusive, RunOutcome, Sandbox, SandboxWorld, SyntheticCallees,
};
use crate::identical::plan::{MergeAction, MergePlan};
use crate::identical::rewrite::OutputEntry;
use crate::ir::observable::reads_frame;
use crate::ir::{FuncIndex, FunctionSet, panic_message};
use crate::similar::SimilarOutcome;
use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Function, InstructionData};
use cranelift_interpreter::environment::FunctionStore;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// Interpreter steps per run.
const FUEL: u64 = 20_000;

/// A pair none of whose inputs was conclusive because the original ran out of
/// [`FUEL`] on them (long loops) is run again on the first [`PATIENT_INPUTS`] of
/// those inputs with this many times the fuel, both sides. (On the corpus, the
/// only such members, brotli's `u0:134` and `u0:661`, each finish on some inputs
/// with 10 times the fuel; a pair that still finishes on none stays unvalidated.)
const PATIENT_FUEL_FACTOR: u64 = 10;

/// How many out-of-fuel inputs a pair is run again on ([`PATIENT_FUEL_FACTOR`]).
const PATIENT_INPUTS: usize = 32;

/// A merged side that runs out of [`FUEL`] where the original finished is run again
/// with this many times more: thunks and entry points add a few steps per call.
const MERGED_FUEL_FACTOR: u64 = 4;

/// A pair whose two sides disagreed.
#[derive(Clone, Debug)]
pub struct Mismatch {
    /// The duplicate.
    pub function: FuncIndex,
    /// The function it was merged into.
    pub into: FuncIndex,
    /// The input that tells them apart.
    pub input: Vec<DataValue>,
    /// What the original duplicate did.
    pub original: RunOutcome,
    /// What its replacement in the merged module did.
    pub merged: RunOutcome,
}

/// What validation found.
#[derive(Clone, Debug, Default)]
pub struct ValidationReport {
    /// Pairs that agreed on every conclusive input (at least one).
    pub validated: usize,
    /// Pairs that could not be run, with the reason.
    pub unvalidated: Vec<(FuncIndex, UnvalidatedReason)>,
    /// Pairs that disagreed.
    pub mismatches: Vec<Mismatch>,
    /// Inputs run and compared conclusively, over all pairs.
    pub runs: usize,
}

impl ValidationReport {
    /// Unvalidated pairs counted by reason, in reason order (the alphabetical
    /// order of their messages).
    pub fn reasons(&self) -> BTreeMap<UnvalidatedReason, usize> {
        let mut counts = BTreeMap::new();
        for &(_, reason) in &self.unvalidated {
            *counts.entry(reason).or_insert(0) += 1;
        }
        counts
    }

    /// `validated: A pairs, B unvalidated (reasons...), C mismatches`.
    pub fn summary(&self) -> String {
        let reasons: Vec<String> = self
            .reasons()
            .iter()
            .map(|(r, n)| format!("{n} {r}"))
            .collect();
        let reasons = if reasons.is_empty() {
            String::new()
        } else {
            format!(" ({})", reasons.join("; "))
        };
        format!(
            "validated: {} pairs, {} unvalidated{reasons}, {} mismatches",
            self.validated,
            self.unvalidated.len(),
            self.mismatches.len()
        )
    }
}

/// Why a pair could not be validated.
///
/// Variants are declared in the alphabetical order of their messages, which is
/// the order reports list them in (checked by a test).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum UnvalidatedReason {
    /// A parameter has a type the inputs do not sample (vectors, for example).
    ParameterTypeNotSampled,
    /// Every input was inconclusive: out of fuel, or something the interpreter
    /// cannot do.
    NoConclusiveRun,
    /// Reads the frame pointer, stack pointer or return address.
    ReadsMachineState,
    /// Uses exceptions (`try_call`).
    UsesExceptions,
}

impl fmt::Display for UnvalidatedReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ParameterTypeNotSampled => "has parameters of a type not sampled",
            Self::NoConclusiveRun => "no input ran to completion in the interpreter",
            Self::ReadsMachineState => "reads machine state",
            Self::UsesExceptions => "uses exceptions",
        })
    }
}

/// Validates every decision of `plan` (applied as `output`) on `module`.
///
/// Runs on a thread with a large stack: the interpreter recurses on the host stack
/// for every CLIF call.
///
/// ```
/// use clif_merge::validate::validate;
/// use clif_merge::{FunctionSet, Linkage, MergeOptions, merge_functions};
///
/// let clif = "
/// function %clamp_a(i32) -> i32 {
/// block0(v0: i32):
///     v1 = iconst.i32 100
///     v2 = smin v0, v1
///     return v2
/// }
///
/// function %clamp_b(i32) -> i32 {
/// block0(v0: i32):
///     v1 = iconst.i32 100
///     v2 = smin v0, v1
///     return v2
/// }
/// ";
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(clif)? {
///     module.push(func, Linkage::Export)?;
/// }
/// let outcome = merge_functions(&module, &MergeOptions::default());
///
/// // `%clamp_b` (now a thunk) and the original `%clamp_b` agree on every input run.
/// let report = validate(&module, &outcome.plan, &outcome.output)?;
/// assert_eq!(report.validated, 1);
/// assert!(report.mismatches.is_empty() && report.unvalidated.is_empty());
/// println!("{}", report.summary());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate(
    module: &FunctionSet,
    plan: &MergePlan,
    output: &[OutputEntry],
) -> Result<ValidationReport, ValidatorCrash> {
    validate_with_progress(module, plan, output, &NoProgress)
}

/// Like [`validate`], telling `progress` how many pairs there are and of each one
/// checked.
pub fn validate_with_progress(
    module: &FunctionSet,
    plan: &MergePlan,
    output: &[OutputEntry],
    progress: &dyn Progress,
) -> Result<ValidationReport, ValidatorCrash> {
    on_big_stack("the validation of the merge", || {
        validate_on_this_thread(module, plan, output, progress)
    })
}

/// The validator itself failed: its thread could not be started, or it panicked.
/// Never a "validated: 0" report: the caller must say what crashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidatorCrash {
    /// What was being validated.
    pub what: &'static str,
    /// The spawn error or the panic's message.
    pub cause: String,
}

impl std::fmt::Display for ValidatorCrash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} crashed: {}", self.what, self.cause)
    }
}

impl std::error::Error for ValidatorCrash {}

/// Stack of the validator's thread: the interpreter recurses on the host stack for
/// every CLIF call.
const VALIDATOR_STACK: usize = 1 << 30;

/// Runs `validation` on a thread with a [`VALIDATOR_STACK`]-byte stack; a failed
/// spawn or a panic is a [`ValidatorCrash`] naming `what`.
fn on_big_stack<T: Send>(
    what: &'static str,
    validation: impl FnOnce() -> T + Send,
) -> Result<T, ValidatorCrash> {
    on_stack(VALIDATOR_STACK, what, validation)
}

fn on_stack<T: Send>(
    stack: usize,
    what: &'static str,
    validation: impl FnOnce() -> T + Send,
) -> Result<T, ValidatorCrash> {
    std::thread::scope(|scope| {
        let handle = std::thread::Builder::new()
            .name("clif-merge validator".into())
            .stack_size(stack)
            .spawn_scoped(scope, validation)
            .map_err(|e| ValidatorCrash {
                what,
                cause: format!("its thread could not be started ({e})"),
            })?;
        handle.join().map_err(|payload| ValidatorCrash {
            what,
            cause: format!("it panicked: {}", panic_message(payload.as_ref())),
        })
    })
}

fn validate_on_this_thread(
    module: &FunctionSet,
    plan: &MergePlan,
    output: &[OutputEntry],
    progress: &dyn Progress,
) -> ValidationReport {
    let originals = runnable(module.iter().map(|(_, d)| &*d.func));
    let merged = runnable(output.iter().filter_map(OutputEntry::body));
    // An erased or aliased duplicate is declared one address with its kept
    // function, in both worlds; a thunk keeps its own.
    let decisions = plan.decision_map();
    let address_identity = |f: FuncIndex| {
        let mut at = f;
        for _ in 0..=plan.decisions.len() {
            match decisions[at] {
                Some(d) if d.action != MergeAction::Thunk => at = d.into,
                _ => break,
            }
        }
        at
    };
    let mut original_addresses = FunctionAddresses::new();
    for (f, d) in module.iter() {
        let name = d.func.name.to_string();
        match address_identity(f) {
            kept if kept == f => original_addresses.own(name, f.index()),
            kept => original_addresses.share(name, kept.index()),
        }
    }
    let mut merged_addresses = FunctionAddresses::new();
    for (f, body) in output.iter().filter_map(OutputEntry::kept) {
        merged_addresses.own(body.name.to_string(), address_identity(f).index());
    }
    let pairs = plan.decisions.iter().map(|d| {
        let dup = &module.get(d.function).func;
        // The output is in input order, one entry per function.
        let replacement = match output.get(d.function.index()) {
            Some(OutputEntry::Thunk { .. }) => dup.name.to_string(),
            _ => module.display_name(d.into),
        };
        Pair {
            function: d.function,
            into: d.into,
            original: dup,
            replacement,
        }
    });
    validate_pairs(
        (&originals, &original_addresses),
        (&merged, &merged_addresses),
        pairs,
        progress,
    )
}

/// Copies of `functions` the interpreter can run: without their stack limit (a
/// check that traps when the native stack is exhausted, which the interpreter does
/// not model). Both sides of every comparison are copied the same way.
fn runnable<'a>(functions: impl Iterator<Item = &'a Function>) -> Vec<Function> {
    functions
        .map(|f| {
            let mut f = f.clone();
            f.stack_limit = None;
            f
        })
        .collect()
}

/// Checks the similar-function merge: every member of every group, run in the
/// original module, against its entry point (which calls the merged body) run in
/// the merged module. `module` is the module the similar merge ran on
/// ([`SimilarPass::module`](crate::similar::SimilarPass::module)). Runs on a thread
/// with a large stack, like [`validate`]. An outcome that is not a similar merge
/// of `module`, whole or with whole groups left out, is refused
/// ([`check_similar_outcome`]).
///
/// ```
/// use clif_merge::similar::{SimilarOptions, SimilarPass};
/// use clif_merge::validate::validate_similar;
/// use clif_merge::{FunctionSet, Linkage, MergeOptions, merge_functions};
///
/// // Equal but for one constant (sizes in instructions: no ISA).
/// let function = |name: &str, constant: i64| {
///     format!(
///         "function %{name}(i64, i64) -> i64 {{
/// block0(v0: i64, v1: i64):
///     v2 = iconst.i64 {constant}
///     v3 = imul v0, v2
///     v4 = iadd v3, v1
///     v5 = bxor v4, v0
///     v6 = imul v5, v3
///     v7 = isub v6, v4
///     v8 = band v7, v5
///     v9 = bor v8, v6
///     v10 = imul v9, v9
///     return v10
/// }}
/// "
///     )
/// };
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(&(function("f", 3) + &function("g", 5)))? {
///     module.push(func, Linkage::Export)?;
/// }
/// let identical = merge_functions(&module, &MergeOptions::default());
/// let similar = SimilarPass::after(&module, &identical, &SimilarOptions::default(), None);
/// assert_eq!(similar.outcome.groups.len(), 1);
///
/// let report = validate_similar(&similar.module, &similar.outcome)?;
/// assert_eq!(report.validated, 2); // each member against its entry point
/// assert!(report.mismatches.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate_similar(
    module: &FunctionSet,
    outcome: &SimilarOutcome,
) -> Result<ValidationReport, SimilarValidationError> {
    validate_similar_with_progress(module, outcome, &NoProgress)
}

/// Why [`validate_similar`] gave no report.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimilarValidationError {
    /// The outcome is not a similar merge of the module, whole or with whole
    /// groups left out ([`check_similar_outcome`]): run as it is, a member's
    /// callee could call a merged body that is not there, which would show as a
    /// mismatch the merge did not cause.
    Inconsistent(String),
    /// The validator itself crashed.
    Crashed(ValidatorCrash),
}

impl fmt::Display for SimilarValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SimilarValidationError::Inconsistent(why) => {
                write!(f, "the similar outcome cannot be validated: {why}")
            }
            SimilarValidationError::Crashed(crash) => crash.fmt(f),
        }
    }
}

impl std::error::Error for SimilarValidationError {}

/// Checks that `outcome` is what the similar merge of `module` made, or that
/// with whole groups left out (each with its merged body and its members' entry
/// points): every group has the merged body of its name at its own position,
/// every member is a function of `module` in one group only and has an entry
/// point, and every entry point is a member's.
pub fn check_similar_outcome(module: &FunctionSet, outcome: &SimilarOutcome) -> Result<(), String> {
    if outcome.groups.len() != outcome.merged_bodies.len() {
        return Err(format!(
            "{} groups but {} merged bodies",
            outcome.groups.len(),
            outcome.merged_bodies.len()
        ));
    }
    let mut grouped = HashSet::new();
    for (group, merged) in outcome.groups.iter().zip(&outcome.merged_bodies) {
        if group.merged_name != merged.name {
            return Err(format!(
                "the group of merged body {} holds the body of {}",
                group.merged_name, merged.name
            ));
        }
        for &member in &group.members {
            if member.index() >= module.len() {
                return Err(format!("{member} is not a function of the module"));
            }
            let name = &module.get(member).func.name;
            if !grouped.insert(member) {
                return Err(format!("{name} is a member of two groups"));
            }
            if outcome.entry_points.get(member).is_none() {
                return Err(format!("member {name} has no entry point"));
            }
        }
    }
    match outcome
        .entry_points
        .iter()
        .find(|(f, _)| !grouped.contains(f))
    {
        Some((_, entry)) => Err(format!(
            "{} has an entry point but is a member of no group",
            entry.name
        )),
        None => Ok(()),
    }
}

/// Like [`validate_similar`], telling `progress` how many members there are and
/// of each one checked.
pub fn validate_similar_with_progress(
    module: &FunctionSet,
    outcome: &SimilarOutcome,
    progress: &dyn Progress,
) -> Result<ValidationReport, SimilarValidationError> {
    check_similar_outcome(module, outcome).map_err(SimilarValidationError::Inconsistent)?;
    on_big_stack("the validation of the similar merge", || {
        let originals = runnable(module.iter().map(|(_, d)| &*d.func));
        let merged = runnable(
            module
                .iter()
                .map(|(f, d)| outcome.entry_points.get(f).unwrap_or(&d.func))
                .chain(&outcome.merged_bodies),
        );
        // An entry point has its member's address; a merged body is a new
        // function, with a fresh address after the module's.
        let mut original_addresses = FunctionAddresses::new();
        for (f, d) in module.iter() {
            original_addresses.own(d.func.name.to_string(), f.index());
        }
        let mut merged_addresses = FunctionAddresses::new();
        for (identity, func) in merged.iter().enumerate() {
            merged_addresses.own(func.name.to_string(), identity);
        }
        let pairs = outcome.groups.iter().flat_map(|group| {
            group.members.iter().map(|&m| {
                let original = &module.get(m).func;
                Pair {
                    function: m,
                    into: group.members[0],
                    original,
                    replacement: original.name.to_string(),
                }
            })
        });
        validate_pairs(
            (&originals, &original_addresses),
            (&merged, &merged_addresses),
            pairs,
            progress,
        )
    })
    .map_err(SimilarValidationError::Crashed)
}

/// Checks a whole-program transformation (separate compilation's stage 3 applied
/// to every module, the results put together): every function of `original` whose
/// body differs in `transformed` (a thunk, or calls redirected) is run in both and
/// must agree. A function removed from `transformed` is checked through its
/// callers. Runs on a thread with a large stack, like [`validate`].
///
/// `renamed` lists the functions of `original` that `transformed` knows under
/// another name, as (name in `original`, name in `transformed`): a local
/// representative separate compilation promoted (a `DecisionAction::Promote`
/// decision, from its `function` to its `to`) is the same function under its new
/// name; an alias a module's own merge made (`ModuleAlias`, from its `name` to the
/// function it is `of`) is declared one address with the function whose code it
/// names, in both programs, and is checked against it. Otherwise a function keeps
/// its address by name; references to a removed function go to its
/// representative, and so have the representative's address where the original
/// had its own; a function only `transformed` has gets a fresh address.
///
/// ```
/// use clif_merge::validate::validate_program;
/// use clif_merge::{FunctionSet, Linkage};
///
/// let parse = |clif: &str| -> Result<FunctionSet, Box<dyn std::error::Error>> {
///     let mut module = FunctionSet::new();
///     for func in cranelift_reader::parse_functions(clif)? {
///         module.push(func, Linkage::Export)?;
///     }
///     Ok(module)
/// };
/// let double = "function %double(i64) -> i64 {
/// block0(v0: i64):
///     v1 = iadd v0, v0
///     return v1
/// }
/// ";
/// let original = parse(&format!(
///     "{double}
/// function %twice(i64) -> i64 {{
/// block0(v0: i64):
///     v1 = iadd v0, v0
///     return v1
/// }}"
/// ))?;
/// // `%twice` made a thunk to `%double`, as a whole-program decision would.
/// let transformed = parse(&format!(
///     "{double}
/// function %twice(i64) -> i64 {{
///     fn0 = %double(i64) -> i64
/// block0(v0: i64):
///     v1 = call fn0(v0)
///     return v1
/// }}"
/// ))?;
///
/// let report = validate_program(&original, &transformed, [])?;
/// assert_eq!(report.validated, 1);
/// assert!(report.mismatches.is_empty());
///
/// // A wrong transformation is caught: `%twice` sent to a function that differs.
/// let wrong = parse(
///     "function %twice(i64) -> i64 {
///     fn0 = %square(i64) -> i64
/// block0(v0: i64):
///     v1 = call fn0(v0)
///     return v1
/// }
///
/// function %square(i64) -> i64 {
/// block0(v0: i64):
///     v1 = imul v0, v0
///     return v1
/// }",
/// )?;
/// let report = validate_program(&original, &wrong, [])?;
/// assert_eq!(report.mismatches.len(), 1);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate_program<'r>(
    original: &FunctionSet,
    transformed: &FunctionSet,
    renamed: impl IntoIterator<Item = (&'r str, &'r str)>,
) -> Result<ValidationReport, ValidatorCrash> {
    let renamed: FxHashMap<String, String> = renamed
        .into_iter()
        .map(|(from, to)| (from.to_string(), to.to_string()))
        .collect();
    on_big_stack("the validation of the program", || {
        let originals = runnable(original.iter().map(|(_, d)| &*d.func));
        let merged = runnable(transformed.iter().map(|(_, d)| &*d.func));
        // A function has its address by name, or by the name it had before it was
        // renamed; a function only `transformed` has is new, with a fresh address.
        let by_name: FxHashMap<String, FuncIndex> = original
            .iter()
            .map(|(f, d)| (d.func.name.to_string(), f))
            .collect();
        let was_named: FxHashMap<&str, &str> = renamed
            .iter()
            .map(|(from, to)| (to.as_str(), from.as_str()))
            .collect();
        // An alias (renamed to another function of `original`) is declared one
        // address with that function, in both worlds.
        let mut identity: FxHashMap<&str, FuncIndex> = FxHashMap::default();
        let mut original_addresses = FunctionAddresses::new();
        for (name, &f) in &by_name {
            match renamed.get(name).and_then(|to| by_name.get(to)) {
                Some(&to) if to != f => {
                    original_addresses.share(name.clone(), to.index());
                    identity.insert(name, to);
                }
                _ => {
                    original_addresses.own(name.clone(), f.index());
                    identity.insert(name, f);
                }
            }
        }
        let mut merged_addresses = FunctionAddresses::new();
        for (t, d) in transformed.iter() {
            let name = d.func.name.to_string();
            let known = identity
                .get(name.as_str())
                .or_else(|| identity.get(*was_named.get(name.as_str())?));
            merged_addresses.own(
                name,
                known.map_or(original.len() + t.index(), |f| f.index()),
            );
        }
        let mut now_named: FxHashMap<String, &Function> = FxHashMap::default();
        for (_, d) in transformed.iter() {
            now_named.entry(d.func.name.to_string()).or_insert(&d.func);
        }
        let pairs = original.iter().filter_map(|(f, d)| {
            let name = d.func.name.to_string();
            let replacement = renamed.get(&name).cloned().unwrap_or(name);
            let now = now_named.get(&replacement)?;
            let changed = now.display().to_string() != d.func.display().to_string();
            changed.then_some(Pair {
                function: f,
                into: f,
                original: &d.func,
                replacement,
            })
        });
        validate_pairs(
            (&originals, &original_addresses),
            (&merged, &merged_addresses),
            pairs,
            &NoProgress,
        )
    })
}

/// One check: `original` (named as in the original module) against the function
/// named `replacement` in the merged module.
struct Pair<'a> {
    function: FuncIndex,
    into: FuncIndex,
    original: &'a Function,
    replacement: String,
}

/// Runs every pair of `pairs`, `originals` against `merged`, telling `progress`
/// how many there are and of each one checked.
fn validate_pairs<'a>(
    (originals, original_addresses): (&[Function], &FunctionAddresses),
    (merged, merged_addresses): (&[Function], &FunctionAddresses),
    pairs: impl Iterator<Item = Pair<'a>>,
    progress: &dyn Progress,
) -> ValidationReport {
    // Collected first so that `progress` learns the total before the first check.
    let pairs: Vec<Pair<'a>> = pairs.collect();
    progress.start(pairs.len());
    let original_store = store_of(originals);
    let merged_store = store_of(merged);
    let callees = SyntheticCallees::for_functions(originals.iter().chain(merged));
    let original_world = SandboxWorld {
        store: &original_store,
        callees: &callees,
        addresses: original_addresses,
    };
    let merged_world = SandboxWorld {
        store: &merged_store,
        callees: &callees,
        addresses: merged_addresses,
    };
    let mut report = ValidationReport::default();
    for pair in &pairs {
        check_pair(pair, (&original_world, &merged_world), &mut report);
        progress.step();
    }
    report
}

/// Runs the original and the replacement of `pair` and adds what they did to
/// `report`: validated, unvalidated with the reason, or a mismatch.
fn check_pair(
    pair: &Pair<'_>,
    (original_world, merged_world): (&SandboxWorld<'_>, &SandboxWorld<'_>),
    report: &mut ValidationReport,
) {
    let dup_name = pair.original.name.to_string();
    let replacement = &pair.replacement;
    if let Err(reason) = interpretable(&dup_name, original_world.store)
        .and_then(|()| interpretable(replacement, merged_world.store))
    {
        report.unvalidated.push((pair.function, reason));
        return;
    }
    let Some(inputs) = inputs_for(pair.original, pair.function.index() as u64) else {
        report
            .unvalidated
            .push((pair.function, UnvalidatedReason::ParameterTypeNotSampled));
        return;
    };
    // Every input with the usual fuel; if none was conclusive because the
    // original ran out of fuel, a few of those inputs again with far more.
    let worlds = (original_world, merged_world);
    let mut runs = run_inputs(worlds, pair, &dup_name, &inputs, 0..inputs.len(), FUEL);
    if runs.conclusive == 0 && runs.mismatch.is_none() && !runs.out_of_fuel.is_empty() {
        let retried = std::mem::take(&mut runs.out_of_fuel);
        runs = run_inputs(
            worlds,
            pair,
            &dup_name,
            &inputs,
            retried.into_iter().take(PATIENT_INPUTS),
            FUEL * PATIENT_FUEL_FACTOR,
        );
    }
    let RunsOutcome {
        conclusive,
        mismatch,
        ..
    } = runs;
    report.runs += conclusive;
    if let Some(m) = mismatch {
        report.mismatches.push(m);
    } else if conclusive == 0 {
        report
            .unvalidated
            .push((pair.function, UnvalidatedReason::NoConclusiveRun));
    } else {
        report.validated += 1;
    }
}

/// What running one pair on some inputs found.
struct RunsOutcome {
    /// Inputs on which both sides finished alike.
    conclusive: usize,
    /// The first input on which they did not.
    mismatch: Option<Mismatch>,
    /// Indices of the inputs on which the original ran out of fuel.
    out_of_fuel: Vec<usize>,
}

/// Runs the original and the replacement of `pair` on the inputs at `indices` of
/// `inputs` (each with the seed of its index), the original with `fuel` steps,
/// until the first mismatch. Only what the original does decides whether an input
/// is conclusive: once it finished, the merged side must finish the same way.
fn run_inputs(
    (original_world, merged_world): (&SandboxWorld<'_>, &SandboxWorld<'_>),
    pair: &Pair<'_>,
    dup_name: &str,
    inputs: &[Vec<DataValue>],
    indices: impl IntoIterator<Item = usize>,
    fuel: u64,
) -> RunsOutcome {
    let mut outcome = RunsOutcome {
        conclusive: 0,
        mismatch: None,
        out_of_fuel: Vec::new(),
    };
    let replacement = pair.replacement.as_str();
    for i in indices {
        let input = &inputs[i];
        let seed = (pair.function.index() as u64) << 16 | i as u64;
        let original = match run(original_world, dup_name, input, seed, fuel) {
            Ok(original) => original,
            Err(Failure::Inconclusive(Inconclusive::OutOfFuel)) => {
                outcome.out_of_fuel.push(i);
                continue;
            }
            Err(_) => continue,
        };
        let merged = match run(merged_world, replacement, input, seed, fuel) {
            // Thunks and entry points take a few steps more: more fuel, once.
            Err(Failure::Inconclusive(Inconclusive::OutOfFuel)) => run(
                merged_world,
                replacement,
                input,
                seed,
                fuel * MERGED_FUEL_FACTOR,
            ),
            other => other,
        };
        let merged = match merged {
            Ok(b) if b == original => {
                outcome.conclusive += 1;
                continue;
            }
            Ok(b) => b,
            Err(failure) => RunOutcome {
                ending: Ending::Stopped(failure.to_string()),
                memory: Vec::new(),
            },
        };
        outcome.mismatch = Some(Mismatch {
            function: pair.function,
            into: pair.into,
            input: input.clone(),
            original,
            merged,
        });
        break;
    }
    outcome
}

fn store_of(functions: &[Function]) -> FunctionStore<'_> {
    let mut store = FunctionStore::default();
    let mut seen = HashSet::new();
    for f in functions {
        let name = f.name.to_string();
        if seen.insert(name.clone()) {
            store.add(name, f);
        }
    }
    store
}

/// Checks statically that `name` and everything it calls in the store can run in
/// the [`Sandbox`]: no exceptions, no reads of machine state (stack, frame pointer,
/// return address). Everything else (memory through pointers, global values, calls
/// leaving the store, indirect calls) the sandbox makes total.
fn interpretable(name: &str, store: &FunctionStore<'_>) -> Result<(), UnvalidatedReason> {
    let mut pending = vec![name.to_string()];
    let mut seen: HashSet<String> = HashSet::new();
    while let Some(name) = pending.pop() {
        if !seen.insert(name.clone()) {
            continue;
        }
        // A callee outside the store runs as a synthetic callee.
        let Some(func) = store.get_by_name(&name) else {
            continue;
        };
        for block in func.layout.blocks() {
            for inst in func.layout.block_insts(block) {
                let data = &func.dfg.insts[inst];
                match data {
                    InstructionData::Call { func_ref, .. }
                    | InstructionData::FuncAddr { func_ref, .. } => {
                        let callee = &func.dfg.ext_funcs[*func_ref];
                        pending.push(callee.name.display(Some(&func.params)).to_string());
                    }
                    InstructionData::TryCall { .. } | InstructionData::TryCallIndirect { .. } => {
                        return Err(UnvalidatedReason::UsesExceptions);
                    }
                    _ if reads_frame(data.opcode()) => {
                        return Err(UnvalidatedReason::ReadsMachineState);
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(())
}

/// How a run that did not finish ended.
#[derive(Clone, Debug)]
enum Failure {
    /// Out of fuel, or something the interpreter cannot do.
    Inconclusive(Inconclusive),
    /// The interpreter panicked.
    Panic(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Inconclusive(Inconclusive::OutOfFuel) => write!(
                f,
                "did not finish within {MERGED_FUEL_FACTOR} times the steps the original took at most"
            ),
            Self::Inconclusive(Inconclusive::Unsupported(what)) => {
                write!(f, "stopped in the interpreter: {what}")
            }
            Self::Panic(message) => write!(f, "the interpreter panicked: {message}"),
        }
    }
}

/// Runs `name` on `input` in a fresh [`Sandbox`] whose memory is given by `seed`,
/// with `fuel` steps.
fn run(
    world: &SandboxWorld<'_>,
    name: &str,
    input: &[DataValue],
    seed: u64,
    fuel: u64,
) -> Result<RunOutcome, Failure> {
    catch_unwind(AssertUnwindSafe(|| {
        Sandbox::new(world, seed, fuel).run(name, input)
    }))
    .map_err(|payload| Failure::Panic(panic_message(payload.as_ref())))?
    .map_err(Failure::Inconclusive)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panicking_validator_is_a_crash_that_names_it() {
        let crash = on_big_stack("the test validation", || -> ValidationReport {
            panic!("boom")
        })
        .expect_err("a panic is no report");
        assert_eq!(crash.what, "the test validation");
        assert!(crash.to_string().contains("panicked: boom"), "{crash}");
    }

    #[test]
    fn a_validator_thread_that_cannot_start_is_a_crash() {
        let crash = on_stack(usize::MAX, "the test validation", ValidationReport::default)
            .expect_err("no thread has a stack of usize::MAX bytes");
        assert!(
            crash.to_string().contains("could not be started"),
            "{crash}"
        );
    }
}

#[cfg(test)]
mod reason_tests {
    use super::UnvalidatedReason::*;

    #[test]
    fn reasons_are_declared_in_the_order_of_their_messages() {
        let reasons = [
            ParameterTypeNotSampled,
            NoConclusiveRun,
            ReadsMachineState,
            UsesExceptions,
        ];
        for pair in reasons.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].to_string() < pair[1].to_string());
        }
    }
}
