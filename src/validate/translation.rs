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
//! again with ten times the fuel on the inputs that ran out (long loops); when its
//! first eight inputs all ran out, the rest go straight to those patient runs. A
//! pair with still no conclusive input is unvalidated.
//!
//! Every pair has a budget of interpreter steps over all its runs
//! ([`ValidationOptions::pair_steps`]); a run the budget cuts short decides
//! nothing, and a pair that used its budget up before any input was conclusive is
//! unvalidated for it ([`UnvalidatedReason::Budget`]), so no pair holds the
//! validation longer than its budget of steps takes (the sandbox charges a call
//! for the frame it makes, so that steps bound time). Pairs are checked in
//! parallel on threads with large stacks; each pair's runs are seeded by the pair,
//! so the report does not depend on the number of threads.

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
use cranelift_codegen::ir::{Function, InstructionData, UserFuncName};
use cranelift_interpreter::environment::FunctionStore;
use rustc_hash::FxHashMap;
use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

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

/// How many inputs run with [`FUEL`] before a pair whose original ran out of fuel
/// on every one of them goes on with patient runs only.
const PROBE_INPUTS: usize = 8;

/// A merged side that runs out of [`FUEL`] where the original finished is run again
/// with this many times more: thunks and entry points add a few steps per call.
const MERGED_FUEL_FACTOR: u64 = 4;

/// The default of [`ValidationOptions::pair_steps`]: every input with the steps
/// of one run on both sides, and room for a few patient runs.
pub const DEFAULT_PAIR_STEPS: u64 = 4_000_000;

/// How many of the pairs that took the most steps a report keeps
/// ([`ValidationCost::slowest`]).
const SLOWEST_PAIRS: usize = 5;

/// How much interpreting a validation may do.
///
/// A run takes at most 20,000 interpreter steps (a merged side four times
/// that, a patient rerun ten times), and all runs of one pair together at most
/// [`Self::pair_steps`]: no pair holds the validation longer than that many
/// steps take. Pairs are checked on [`Self::threads`] threads with the
/// `parallel` feature; the report is the same whatever their number.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ValidationOptions {
    /// Interpreter steps all runs of one pair may take together. A pair that used
    /// them up before any input was conclusive is unvalidated
    /// ([`UnvalidatedReason::Budget`]); one that had conclusive inputs is
    /// validated on those.
    pub pair_steps: u64,
    /// Threads checking pairs at once; 0 (the default) for as many as the
    /// global `rayon` pool has (`RAYON_NUM_THREADS`, else one per core). One
    /// thread without the `parallel` feature.
    pub threads: usize,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        Self {
            pair_steps: DEFAULT_PAIR_STEPS,
            threads: 0,
        }
    }
}

impl ValidationOptions {
    /// These options with a budget of `steps` interpreter steps per pair.
    ///
    /// ```
    /// use clif_merge::validate::ValidationOptions;
    /// let patient = ValidationOptions::default().with_pair_steps(100_000_000);
    /// assert_eq!(patient.pair_steps, 100_000_000);
    /// ```
    pub fn with_pair_steps(mut self, steps: u64) -> Self {
        self.pair_steps = steps;
        self
    }

    /// These options with pairs checked on `threads` threads (0: as many as the
    /// global `rayon` pool has).
    pub fn with_threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }
}

/// What a validation cost.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ValidationCost {
    /// Wall-clock time of the checks, all threads together.
    pub time: Duration,
    /// Interpreter steps over all pairs.
    pub steps: u64,
    /// Runs cut short because their pair's budget was used up.
    pub budget_stops: usize,
    /// Time spent in pairs that ended unvalidated for their budget, summed over
    /// the threads that checked them.
    pub budget_time: Duration,
    /// The pairs that took the most steps, most first (at most five).
    pub slowest: Vec<PairCost>,
}

/// What checking one pair cost.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct PairCost {
    /// The duplicate (or member) checked.
    pub function: FuncIndex,
    /// Interpreter steps over all its runs, both sides.
    pub steps: u64,
    /// Time its check took on its thread.
    pub time: Duration,
}

/// A pair whose two sides disagreed.
#[derive(Clone, Debug)]
#[non_exhaustive]
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
#[non_exhaustive]
pub struct ValidationReport {
    /// Pairs that agreed on every conclusive input (at least one).
    pub validated: usize,
    /// Pairs that could not be run, with the reason.
    pub unvalidated: Vec<(FuncIndex, UnvalidatedReason)>,
    /// Pairs that disagreed.
    pub mismatches: Vec<Mismatch>,
    /// Inputs run and compared conclusively, over all pairs.
    pub runs: usize,
    /// What the checks cost.
    pub cost: ValidationCost,
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

    /// The report's `Display`, as a string (what the tests print beside their
    /// assertions).
    pub fn summary(&self) -> String {
        self.to_string()
    }
}

/// `validated: A pairs, B unvalidated (reasons...), C mismatches`, the line the CLI
/// prints ([`validate`]'s example prints one).
impl fmt::Display for ValidationReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "validated: {} pairs, {} unvalidated",
            self.validated,
            self.unvalidated.len()
        )?;
        let reasons = self.reasons();
        for (i, (reason, n)) in reasons.iter().enumerate() {
            let open = if i == 0 { " (" } else { "; " };
            write!(f, "{open}{n} {reason}")?;
        }
        if !reasons.is_empty() {
            f.write_str(")")?;
        }
        write!(f, ", {} mismatches", self.mismatches.len())
    }
}

/// Why a pair could not be validated.
///
/// Variants are declared in the alphabetical order of their messages, which is
/// the order reports list them in (checked by a test).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum UnvalidatedReason {
    /// A parameter has a type the inputs do not sample (vectors, for example).
    ParameterTypeNotSampled,
    /// Every input was inconclusive: out of fuel, or something the interpreter
    /// cannot do.
    NoConclusiveRun,
    /// The pair used up its budget of interpreter steps
    /// ([`ValidationOptions::pair_steps`]) before any input was conclusive.
    Budget,
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
            Self::Budget => "ran out of its budget of interpreter steps",
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
/// println!("{report}");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate(
    module: &FunctionSet,
    plan: &MergePlan,
    output: &[OutputEntry],
) -> Result<ValidationReport, ValidatorCrash> {
    validate_with_progress(
        module,
        plan,
        output,
        &ValidationOptions::default(),
        &NoProgress,
    )
}

/// Like [`validate`], within the budget of `options`, telling `progress` how many
/// pairs there are and of each one checked.
pub fn validate_with_progress(
    module: &FunctionSet,
    plan: &MergePlan,
    output: &[OutputEntry],
    options: &ValidationOptions,
    progress: &dyn Progress,
) -> Result<ValidationReport, ValidatorCrash> {
    on_big_stack("the validation of the merge", || {
        validate_on_this_thread(module, plan, output, options, progress)
    })
}

/// The validator itself failed: its thread could not be started, or it panicked.
/// Never a "validated: 0" report: the caller must say what crashed.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
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
    options: &ValidationOptions,
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
        options,
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
/// assert_eq!(similar.outcome().groups.len(), 1);
///
/// let report = validate_similar(similar.module(), similar.outcome())?;
/// assert_eq!(report.validated, 2); // each member against its entry point
/// assert!(report.mismatches.is_empty());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn validate_similar(
    module: &FunctionSet,
    outcome: &SimilarOutcome,
) -> Result<ValidationReport, SimilarValidationError> {
    validate_similar_with_progress(module, outcome, &ValidationOptions::default(), &NoProgress)
}

/// Why [`validate_similar`] gave no report.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum SimilarValidationError {
    /// The outcome is not a similar merge of the module, whole or with whole
    /// groups left out ([`check_similar_outcome`]): run as it is, a member's
    /// callee could call a merged body that is not there, which would show as a
    /// mismatch the merge did not cause.
    Inconsistent(SimilarOutcomeError),
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

/// Why an outcome is not a similar merge of a module ([`check_similar_outcome`]).
/// Its `Display` is the message the CLI prints.
///
/// ```
/// use clif_merge::similar::SimilarOutcome;
/// use clif_merge::validate::{SimilarOutcomeError, check_similar_outcome};
/// use clif_merge::{FunctionSet, Linkage};
///
/// let clif = "
/// function %f(i32) -> i32 {
/// block0(v0: i32):
///     return v0
/// }
/// ";
/// let mut module = FunctionSet::new();
/// for func in cranelift_reader::parse_functions(clif)? {
///     module.push(func, Linkage::Export)?;
/// }
/// // Nothing merged is a merge; a merged body without its group is not.
/// let mut outcome = SimilarOutcome::default();
/// assert_eq!(check_similar_outcome(&module, &outcome), Ok(()));
/// outcome.merged_bodies.push(cranelift_codegen::ir::Function::new());
/// let error = check_similar_outcome(&module, &outcome).unwrap_err();
/// assert_eq!(
///     error,
///     SimilarOutcomeError::BodyCount { groups: 0, merged_bodies: 1 }
/// );
/// assert_eq!(error.to_string(), "0 groups but 1 merged bodies");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SimilarOutcomeError {
    /// The numbers of groups and of merged bodies differ.
    BodyCount {
        /// Groups.
        groups: usize,
        /// Merged bodies.
        merged_bodies: usize,
    },
    /// A group's merged body (at its position) has another name than the group's.
    WrongBody {
        /// The name the group gives its merged body.
        group: UserFuncName,
        /// The name of the body at the group's position.
        body: UserFuncName,
    },
    /// A member is not a function of the module.
    NotInModule(FuncIndex),
    /// A member is a member of two groups.
    InTwoGroups(UserFuncName),
    /// A member has no entry point.
    NoEntryPoint(UserFuncName),
    /// An entry point is a member's of no group.
    Ungrouped(UserFuncName),
}

impl fmt::Display for SimilarOutcomeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::BodyCount {
                groups,
                merged_bodies,
            } => write!(f, "{groups} groups but {merged_bodies} merged bodies"),
            Self::WrongBody { group, body } => write!(
                f,
                "the group of merged body {group} holds the body of {body}"
            ),
            Self::NotInModule(member) => write!(f, "{member} is not a function of the module"),
            Self::InTwoGroups(name) => write!(f, "{name} is a member of two groups"),
            Self::NoEntryPoint(name) => write!(f, "member {name} has no entry point"),
            Self::Ungrouped(name) => {
                write!(f, "{name} has an entry point but is a member of no group")
            }
        }
    }
}

impl std::error::Error for SimilarOutcomeError {}

/// Checks that `outcome` is what the similar merge of `module` made, or that
/// with whole groups left out (each with its merged body and its members' entry
/// points): every group has the merged body of its name at its own position,
/// every member is a function of `module` in one group only and has an entry
/// point, and every entry point is a member's.
pub fn check_similar_outcome(
    module: &FunctionSet,
    outcome: &SimilarOutcome,
) -> Result<(), SimilarOutcomeError> {
    if outcome.groups.len() != outcome.merged_bodies.len() {
        return Err(SimilarOutcomeError::BodyCount {
            groups: outcome.groups.len(),
            merged_bodies: outcome.merged_bodies.len(),
        });
    }
    let mut grouped = HashSet::new();
    for (group, merged) in outcome.groups.iter().zip(&outcome.merged_bodies) {
        if group.merged_name != merged.name {
            return Err(SimilarOutcomeError::WrongBody {
                group: group.merged_name.clone(),
                body: merged.name.clone(),
            });
        }
        for &member in &group.members {
            if member.index() >= module.len() {
                return Err(SimilarOutcomeError::NotInModule(member));
            }
            let name = &module.get(member).func.name;
            if !grouped.insert(member) {
                return Err(SimilarOutcomeError::InTwoGroups(name.clone()));
            }
            if outcome.entry_points.get(member).is_none() {
                return Err(SimilarOutcomeError::NoEntryPoint(name.clone()));
            }
        }
    }
    match outcome
        .entry_points
        .iter()
        .find(|(f, _)| !grouped.contains(f))
    {
        Some((_, entry)) => Err(SimilarOutcomeError::Ungrouped(entry.name.clone())),
        None => Ok(()),
    }
}

/// Like [`validate_similar`], within the budget of `options`, telling `progress`
/// how many members there are and of each one checked.
pub fn validate_similar_with_progress(
    module: &FunctionSet,
    outcome: &SimilarOutcome,
    options: &ValidationOptions,
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
            options,
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
            &ValidationOptions::default(),
            &NoProgress,
        )
    })
}

/// Runs every pair of `pairs`, `originals` against `merged`, within the budget
/// of `options`, on the threads of the current `rayon` pool, telling `progress`
/// how many there are and of each one checked. The report lists pairs in the
/// order given, whatever the threads.
fn validate_pairs<'a>(
    (originals, original_addresses): (&[Function], &FunctionAddresses),
    (merged, merged_addresses): (&[Function], &FunctionAddresses),
    pairs: impl Iterator<Item = Pair<'a>>,
    options: &ValidationOptions,
    progress: &dyn Progress,
) -> ValidationReport {
    let start = Instant::now();
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
    let original_runnable = Interpretable::of(originals);
    let merged_runnable = Interpretable::of(merged);
    let checks = on_validator_threads(options.threads, &pairs, |pair| {
        let check = check_pair(
            pair,
            (&original_world, &merged_world),
            (&original_runnable, &merged_runnable),
            options.pair_steps,
        );
        progress.step();
        check
    });
    let mut report = ValidationReport::default();
    let mut costs = Vec::with_capacity(checks.len());
    for (pair, check) in pairs.iter().zip(checks) {
        report.runs += check.conclusive;
        report.cost.steps += check.steps;
        report.cost.budget_stops += usize::from(check.budget_stop);
        match check.verdict {
            Verdict::Validated => report.validated += 1,
            Verdict::Unvalidated(reason) => {
                if reason == UnvalidatedReason::Budget {
                    report.cost.budget_time += check.time;
                }
                report.unvalidated.push((pair.function, reason));
            }
            Verdict::Mismatch(mismatch) => report.mismatches.push(*mismatch),
        }
        costs.push(PairCost {
            function: pair.function,
            steps: check.steps,
            time: check.time,
        });
    }
    // By steps, which do not depend on the machine, then by position.
    costs.sort_by_key(|c| std::cmp::Reverse(c.steps));
    costs.truncate(SLOWEST_PAIRS);
    report.cost.slowest = costs;
    report.cost.time = start.elapsed();
    report
}

/// `check` over `pairs`, results in their order: on a pool of `threads` threads
/// (0: as many as the global `rayon` pool has), each with the validator's large
/// stack (the interpreter recurses on the host stack for every CLIF call), with
/// the `parallel` feature; on this thread otherwise, or if no such pool can be
/// made.
fn on_validator_threads<T: Sync, R: Send>(
    threads: usize,
    pairs: &[T],
    check: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    #[cfg(feature = "parallel")]
    {
        use rayon::prelude::*;
        let threads = if threads == 0 {
            rayon::current_num_threads()
        } else {
            threads
        };
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .stack_size(VALIDATOR_STACK)
            .thread_name(|i| format!("clif-merge validator {i}"))
            .build();
        if let Ok(pool) = pool {
            // One pair at a time per thread: pairs differ in cost by orders of
            // magnitude.
            return pool.install(|| pairs.par_iter().with_max_len(1).map(&check).collect());
        }
    }
    #[cfg(not(feature = "parallel"))]
    let _ = threads;
    pairs.iter().map(check).collect()
}

/// One check: `original` (named as in the original module) against the function
/// named `replacement` in the merged module.
struct Pair<'a> {
    function: FuncIndex,
    into: FuncIndex,
    original: &'a Function,
    replacement: String,
}

/// What a pair's check concluded.
enum Verdict {
    Validated,
    Unvalidated(UnvalidatedReason),
    Mismatch(Box<Mismatch>),
}

/// What checking one pair found and cost.
struct PairCheck {
    verdict: Verdict,
    /// Inputs on which both sides finished alike.
    conclusive: usize,
    /// Interpreter steps over all its runs.
    steps: u64,
    /// Whether a run was cut short by the pair's budget.
    budget_stop: bool,
    /// Time the check took on its thread.
    time: Duration,
}

/// The interpreter steps a pair may still take.
struct Budget {
    left: u64,
    /// Whether a run was cut short because `left` was less than its fuel.
    stopped: bool,
}

impl Budget {
    /// The fuel of a run that wants `fuel` steps: at most what is left.
    fn fuel(&self, fuel: u64) -> u64 {
        fuel.min(self.left)
    }

    fn spend(&mut self, steps: u64) {
        self.left = self.left.saturating_sub(steps);
    }
}

/// Runs the original and the replacement of `pair` within `pair_steps`
/// interpreter steps: validated, unvalidated with the reason, or a mismatch.
fn check_pair(
    pair: &Pair<'_>,
    worlds: (&SandboxWorld<'_>, &SandboxWorld<'_>),
    (original_runnable, merged_runnable): (&Interpretable, &Interpretable),
    pair_steps: u64,
) -> PairCheck {
    let start = Instant::now();
    let mut budget = Budget {
        left: pair_steps,
        stopped: false,
    };
    let verdict = judge_pair(
        pair,
        worlds,
        (original_runnable, merged_runnable),
        &mut budget,
    );
    let (verdict, conclusive) = match verdict {
        Ok(conclusive) => (Verdict::Validated, conclusive),
        Err(verdict) => (verdict, 0),
    };
    PairCheck {
        verdict,
        conclusive,
        steps: pair_steps - budget.left,
        budget_stop: budget.stopped,
        time: start.elapsed(),
    }
}

/// The runs of [`check_pair`]: `Ok` with the number of conclusive inputs when
/// validated, else the verdict.
fn judge_pair(
    pair: &Pair<'_>,
    worlds: (&SandboxWorld<'_>, &SandboxWorld<'_>),
    (original_runnable, merged_runnable): (&Interpretable, &Interpretable),
    budget: &mut Budget,
) -> Result<usize, Verdict> {
    let dup_name = pair.original.name.to_string();
    original_runnable
        .check(&dup_name)
        .and_then(|()| merged_runnable.check(&pair.replacement))
        .map_err(Verdict::Unvalidated)?;
    let inputs = inputs_for(pair.original, pair.function.index() as u64).ok_or(
        Verdict::Unvalidated(UnvalidatedReason::ParameterTypeNotSampled),
    )?;
    // Every input with the usual fuel; if none was conclusive because the
    // original ran out of fuel, a few of those inputs again with far more. When
    // the first inputs all run out of fuel, the others go straight to the patient
    // runs: a long loop would spend the budget on short runs.
    let probed = inputs.len().min(PROBE_INPUTS);
    let mut runs = run_inputs(worlds, pair, &dup_name, &inputs, 0..probed, FUEL, budget);
    let long_running = runs.conclusive == 0 && runs.out_of_fuel.len() == probed;
    if !long_running && runs.mismatch.is_none() && !budget.stopped {
        let rest = run_inputs(
            worlds,
            pair,
            &dup_name,
            &inputs,
            probed..inputs.len(),
            FUEL,
            budget,
        );
        runs.conclusive += rest.conclusive;
        runs.mismatch = rest.mismatch;
        runs.out_of_fuel.extend(rest.out_of_fuel);
    }
    if runs.conclusive == 0
        && runs.mismatch.is_none()
        && !runs.out_of_fuel.is_empty()
        && !budget.stopped
    {
        let unprobed = if long_running {
            probed..inputs.len()
        } else {
            0..0
        };
        let retried = std::mem::take(&mut runs.out_of_fuel);
        runs = run_inputs(
            worlds,
            pair,
            &dup_name,
            &inputs,
            retried.into_iter().chain(unprobed).take(PATIENT_INPUTS),
            FUEL * PATIENT_FUEL_FACTOR,
            budget,
        );
    }
    if let Some(m) = runs.mismatch {
        return Err(Verdict::Mismatch(Box::new(m)));
    }
    match runs.conclusive {
        0 if budget.stopped => Err(Verdict::Unvalidated(UnvalidatedReason::Budget)),
        0 => Err(Verdict::Unvalidated(UnvalidatedReason::NoConclusiveRun)),
        conclusive => Ok(conclusive),
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
/// until the first mismatch or until `budget` is used up. Only what the original
/// does decides whether an input is conclusive: once it finished, the merged side
/// must finish the same way. A run the budget cuts short (either side) ends the
/// pair's runs and decides nothing.
fn run_inputs(
    (original_world, merged_world): (&SandboxWorld<'_>, &SandboxWorld<'_>),
    pair: &Pair<'_>,
    dup_name: &str,
    inputs: &[Vec<DataValue>],
    indices: impl IntoIterator<Item = usize>,
    fuel: u64,
    budget: &mut Budget,
) -> RunsOutcome {
    let mut outcome = RunsOutcome {
        conclusive: 0,
        mismatch: None,
        out_of_fuel: Vec::new(),
    };
    let replacement = pair.replacement.as_str();
    // Runs `name` in `world` with `wanted` steps, or what is left of them; `None`
    // when it ran out of steps the budget took away.
    let mut budgeted_run = |world, name, input, seed, wanted| {
        let given = budget.fuel(wanted);
        let (result, steps) = run(world, name, input, seed, given);
        budget.spend(steps);
        let cut_short =
            given < wanted && matches!(result, Err(Failure::Inconclusive(Inconclusive::OutOfFuel)));
        if cut_short {
            budget.stopped = true;
        }
        (!cut_short).then_some(result)
    };
    for i in indices {
        let input = &inputs[i];
        let seed = (pair.function.index() as u64) << 16 | i as u64;
        let Some(original) = budgeted_run(original_world, dup_name, input, seed, fuel) else {
            break;
        };
        let original = match original {
            Ok(original) => original,
            Err(Failure::Inconclusive(Inconclusive::OutOfFuel)) => {
                outcome.out_of_fuel.push(i);
                continue;
            }
            Err(_) => continue,
        };
        let merged = match budgeted_run(merged_world, replacement, input, seed, fuel) {
            // Thunks and entry points take a few steps more: more fuel, once.
            Some(Err(Failure::Inconclusive(Inconclusive::OutOfFuel))) => budgeted_run(
                merged_world,
                replacement,
                input,
                seed,
                fuel * MERGED_FUEL_FACTOR,
            ),
            other => other,
        };
        let merged = match merged {
            None => break,
            Some(Ok(b)) if b == original => {
                outcome.conclusive += 1;
                continue;
            }
            Some(Ok(b)) => b,
            Some(Err(failure)) => RunOutcome {
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

/// Which functions of one world can run in the [`Sandbox`], with everything they
/// call or take the address of: no exceptions, no reads of machine state (stack,
/// frame pointer, return address). Everything else (memory through pointers,
/// global values, calls leaving the store, indirect calls) the sandbox makes
/// total. Each function is read once; a question walks the functions it reaches
/// by index.
struct Interpretable {
    /// Each function's position, by name (the first of a name, as in the store).
    index: FxHashMap<String, usize>,
    /// What each function does that the sandbox cannot, if anything.
    own: Vec<Option<UnvalidatedReason>>,
    /// The functions of the world each one names in a call or `func_addr`.
    named: Vec<Vec<usize>>,
}

impl Interpretable {
    fn of(functions: &[Function]) -> Self {
        let mut index = FxHashMap::default();
        for (i, f) in functions.iter().enumerate() {
            index.entry(f.name.to_string()).or_insert(i);
        }
        let mut own = Vec::with_capacity(functions.len());
        let mut named = Vec::with_capacity(functions.len());
        for func in functions {
            let mut reason = None;
            let mut callees = Vec::new();
            for block in func.layout.blocks() {
                for inst in func.layout.block_insts(block) {
                    let data = &func.dfg.insts[inst];
                    match data {
                        InstructionData::Call { func_ref, .. }
                        | InstructionData::FuncAddr { func_ref, .. } => {
                            let callee = &func.dfg.ext_funcs[*func_ref];
                            let name = callee.name.display(Some(&func.params)).to_string();
                            // A callee outside the world runs as a synthetic callee.
                            callees.extend(index.get(&name).copied());
                        }
                        InstructionData::TryCall { .. }
                        | InstructionData::TryCallIndirect { .. } => {
                            reason.get_or_insert(UnvalidatedReason::UsesExceptions);
                        }
                        _ if reads_frame(data.opcode()) => {
                            reason.get_or_insert(UnvalidatedReason::ReadsMachineState);
                        }
                        _ => {}
                    }
                }
            }
            own.push(reason);
            named.push(callees);
        }
        Self { index, own, named }
    }

    /// Whether the function `name` and everything it reaches can run: the reason
    /// of the first one found that cannot (in the order of a depth-first walk).
    fn check(&self, name: &str) -> Result<(), UnvalidatedReason> {
        let Some(&start) = self.index.get(name) else {
            return Ok(());
        };
        let mut seen = vec![false; self.own.len()];
        let mut pending = vec![start];
        while let Some(f) = pending.pop() {
            if std::mem::replace(&mut seen[f], true) {
                continue;
            }
            if let Some(reason) = self.own[f] {
                return Err(reason);
            }
            pending.extend(self.named[f].iter().rev().copied());
        }
        Ok(())
    }
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
/// with `fuel` steps; returns how it ended and the steps it took (all of `fuel`
/// if the interpreter panicked).
fn run(
    world: &SandboxWorld<'_>,
    name: &str,
    input: &[DataValue],
    seed: u64,
    fuel: u64,
) -> (Result<RunOutcome, Failure>, u64) {
    match catch_unwind(AssertUnwindSafe(|| {
        Sandbox::new(world, seed, fuel).run(name, input)
    })) {
        Ok((result, steps)) => (result.map_err(Failure::Inconclusive), steps),
        Err(payload) => (Err(Failure::Panic(panic_message(payload.as_ref()))), fuel),
    }
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
            Budget,
            ReadsMachineState,
            UsesExceptions,
        ];
        for pair in reasons.windows(2) {
            assert!(pair[0] < pair[1]);
            assert!(pair[0].to_string() < pair[1].to_string());
        }
    }
}
