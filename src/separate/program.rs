//! Stage 2 of separate compilation: the whole-program merge over summaries (GCC's
//! "read summary + execute" and "write optimization summary").
//!
//! [`plan_program`] reads the summaries of all modules, gives every summarized
//! function a node, resolves every reference by symbol (a module's own local
//! symbols first, then the program's visible definitions; a symbol defined nowhere,
//! a preemptible one, or a reference that must match by exact name becomes a node
//! of its own that equals only itself), and runs the same partition the
//! single-module pass runs ([`crate::identical::partition`]) over the summaries'
//! encodings.
//!
//! Per class it keeps one *representative*: the strongest linkage (export, then
//! hidden, then local; never preemptible), then the first by module name and
//! definition order, so the choice does not depend on the order the summaries are
//! given, and is the one a single run over the modules put together in that order
//! would keep. A local representative of members in other modules is *promoted*
//! ([`DecisionAction::Promote`]): its module gives it hidden linkage under a name
//! no module of the program uses, marked with the [`program_hash`], which a name
//! outside the program would have to spell to be it (ThinLTO's promotion of
//! locals, and its `.llvm.HASH`), so that the other modules can refer to it. Every
//! other member that is not preemptible gets a [`Decision`] in its module's
//! [`ModuleDecisions`]: a local or hidden function whose address is taken nowhere
//! in the program is removed, and every reference to it, in every module, goes to
//! the representative ([`DecisionAction::Redirect`]); any other becomes a thunk to it
//! ([`DecisionAction::Thunk`]; an object file cannot alias a symbol it does not
//! define), and its module's own calls go straight to the representative, as do
//! the direct calls other modules make to it ([`CallRedirect`]).

use super::format::{DECISIONS_MAGIC, FormatError, from_bytes, to_bytes};
use super::summary::{FunctionSummary, Summary, SymbolRef, Visibility, clif_name};
use crate::identical::encode::FunctionEncoding;
use crate::identical::encoded::EncodedFunctions;
use crate::identical::hash::StructuralHash;
use crate::identical::partition::partition;
use crate::ir::FuncIndex;
use crate::ir::fnv::Fnv1a;
use cranelift_codegen::entity::EntityRef;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::time::{Duration, Instant};

/// What becomes of a function in its module.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DecisionAction {
    /// Its body becomes a jump to the representative; calls from its own module go
    /// straight to the representative.
    Thunk,
    /// Removed; every reference to it goes to the representative.
    Redirect,
    /// A local representative of functions in other modules: it keeps its body
    /// under the decision's `to`, a name no module of the program uses, marked with
    /// the [`program_hash`], with hidden linkage, and every reference to its old
    /// name goes to the new one.
    Promote,
}

impl DecisionAction {
    /// `thunk`, `redirect` or `promote`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Thunk => "thunk",
            Self::Redirect => "redirect",
            Self::Promote => "promote",
        }
    }
}

/// The decision for one function.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    /// The function, by symbol name.
    pub function: String,
    /// Its [`Summary::fingerprint`] when summarized: stage 3 refuses decisions
    /// about a function that changed since (or whose local callees did).
    pub fingerprint: u64,
    /// What becomes of it.
    pub action: DecisionAction,
    /// The representative's symbol name (after its promotion, if it was
    /// promoted); for [`DecisionAction::Promote`], the function's new name.
    pub to: String,
    /// The representative's module.
    pub to_module: String,
}

/// References a module makes to a function of another module that became a thunk
/// or was removed: they go straight to its representative.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRedirect {
    /// The referenced symbol.
    pub symbol: String,
    /// What became of it: [`DecisionAction::Thunk`] (its direct calls may go to the
    /// representative; its address stays its own) or [`DecisionAction::Redirect`]
    /// (it no longer exists: every reference must go to the representative).
    pub action: DecisionAction,
    /// Its representative's symbol.
    pub to: String,
    /// The representative's module.
    pub to_module: String,
}

/// Stage 2's output for one module (its "optimization summary").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModuleDecisions {
    /// The module.
    pub module: String,
    /// The [`Summary::digest`] of the module's summary: stage 3 refuses to apply
    /// the decisions to a module whose summary differs (another module, or this
    /// one changed since it was summarized).
    pub module_digest: u64,
    /// Whether addresses were significant when summarized.
    pub addresses_significant: bool,
    /// One per function that does not stay as it is, by function name.
    pub decisions: Vec<Decision>,
    /// References to functions of other modules that became thunks or were
    /// removed, to send straight to the representative, by symbol.
    pub calls: Vec<CallRedirect>,
}

impl ModuleDecisions {
    /// The decisions as a file's bytes.
    pub fn to_bytes(&self) -> Vec<u8> {
        to_bytes(DECISIONS_MAGIC, self)
    }

    /// Reads a decisions file's bytes.
    pub fn from_bytes(bytes: &[u8]) -> Result<Self, FormatError> {
        from_bytes(DECISIONS_MAGIC, "decisions", bytes)
    }
}

/// A function of the program: its module and name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct QualifiedName {
    /// The module.
    pub module: String,
    /// The function's symbol name.
    pub name: String,
}

impl fmt::Display for QualifiedName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}::{}", self.module, self.name)
    }
}

/// What stage 2 found.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct ProgramPlan {
    /// Per module (in module-name order), its decisions.
    pub decisions: Vec<ModuleDecisions>,
    /// Classes of two or more equal functions, each sorted, the representative
    /// first where there is one; sorted.
    pub classes: Vec<Vec<QualifiedName>>,
    /// Functions summarized.
    pub functions: usize,
    /// Comparisons the partition made.
    pub comparisons: u64,
    /// Members left as they are because their module uses their representative's
    /// name for a local symbol of its own, so a decision naming the representative
    /// would bind to that local instead (member, representative).
    pub shadowed: Vec<(QualifiedName, QualifiedName)>,
    /// Time to resolve symbols and build the encodings.
    pub time_resolve: Duration,
    /// Time of the partition.
    pub time_partition: Duration,
}

/// How many functions each kind of decision touches, over the whole program.
#[derive(Copy, Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PlanCounts {
    /// Duplicates removed: no code of their own, every reference goes to the
    /// representative ([`DecisionAction::Redirect`]).
    pub removed: usize,
    /// Duplicates that became thunks ([`DecisionAction::Thunk`]).
    pub thunked: usize,
    /// Local representatives promoted to hidden ([`DecisionAction::Promote`]).
    pub promoted: usize,
    /// References from one module to a function of another that became a thunk or
    /// was removed, sent straight to its representative: one per module and
    /// symbol ([`CallRedirect`]).
    pub redirected: usize,
}

impl PlanCounts {
    /// Duplicates merged: removed or thunked.
    pub fn merged(&self) -> usize {
        self.removed + self.thunked
    }

    /// These counts with [`Self::removed`] set to `removed` (the struct is
    /// `#[non_exhaustive]`: counts to compare with start from `Default`).
    ///
    /// ```
    /// use clif_merge::separate::PlanCounts;
    ///
    /// let counts = PlanCounts::default()
    ///     .with_removed(2)
    ///     .with_thunked(1)
    ///     .with_promoted(1)
    ///     .with_redirected(0);
    /// assert_eq!(counts.merged(), 3);
    /// ```
    pub fn with_removed(mut self, removed: usize) -> Self {
        self.removed = removed;
        self
    }

    /// These counts with [`Self::thunked`] set to `thunked` (example at
    /// [`Self::with_removed`]).
    pub fn with_thunked(mut self, thunked: usize) -> Self {
        self.thunked = thunked;
        self
    }

    /// These counts with [`Self::promoted`] set to `promoted` (example at
    /// [`Self::with_removed`]).
    pub fn with_promoted(mut self, promoted: usize) -> Self {
        self.promoted = promoted;
        self
    }

    /// These counts with [`Self::redirected`] set to `redirected` (example at
    /// [`Self::with_removed`]).
    pub fn with_redirected(mut self, redirected: usize) -> Self {
        self.redirected = redirected;
        self
    }
}

impl ProgramPlan {
    /// How many functions each kind of decision touches.
    pub fn counts(&self) -> PlanCounts {
        let mut counts = PlanCounts::default();
        for module in &self.decisions {
            for d in &module.decisions {
                match d.action {
                    DecisionAction::Redirect => counts.removed += 1,
                    DecisionAction::Thunk => counts.thunked += 1,
                    DecisionAction::Promote => counts.promoted += 1,
                }
            }
            counts.redirected += module.calls.len();
        }
        counts
    }
}

/// Why a program cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PlanError {
    /// Two summaries name the same module.
    DuplicateModule(String),
    /// Two modules define the same visible symbol.
    DuplicateSymbol {
        /// The symbol.
        symbol: String,
        /// The two modules.
        modules: (String, String),
    },
    /// Summaries made in different modes.
    MixedModes,
    /// Summaries of different sources: one from IR and one from machine code, or
    /// machine code of two targets or two sets of settings, whose tokens mean
    /// different things.
    MixedSources {
        /// Two modules of different sources.
        modules: (String, String),
        /// Their sources, described.
        sources: (String, String),
    },
}

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::DuplicateModule(m) => write!(f, "two summaries of module `{m}`"),
            Self::DuplicateSymbol { symbol, modules } => write!(
                f,
                "`{symbol}` is defined in both `{}` and `{}`",
                modules.0, modules.1
            ),
            Self::MixedModes => write!(
                f,
                "summaries were made in different modes (--mode safe and --mode all)"
            ),
            Self::MixedSources { modules, sources } => write!(
                f,
                "`{}` was summarized from {} but `{}` from {}: plan only summaries of one source (all from IR, or all from machine code of one target and settings)",
                modules.0, sources.0, modules.1, sources.1
            ),
        }
    }
}

impl std::error::Error for PlanError {}

/// A summarized function: which summary, which function.
#[derive(Copy, Clone)]
struct Node {
    module: usize,
    function: usize,
}

/// Plans the whole program. The result does not depend on the order of
/// `summaries`.
///
/// ```
/// use clif_merge::separate::{DecisionAction, plan_program, summarize};
/// use clif_merge::{FunctionSet, Linkage, MergeOptions};
///
/// // Module `a` exports `%triple_a`, module `b` exports `%triple_b`, the same code.
/// let module = |name: &str| -> Result<FunctionSet, Box<dyn std::error::Error>> {
///     let clif = format!(
///         "function %{name}(i64) -> i64 {{
/// block0(v0: i64):
///     v1 = iconst.i64 3
///     v2 = imul v0, v1
///     return v2
/// }}"
///     );
///     let mut module = FunctionSet::new();
///     for func in cranelift_reader::parse_functions(&clif)? {
///         module.push(func, Linkage::Export)?;
///     }
///     Ok(module)
/// };
/// let options = MergeOptions::default();
/// let summaries = [
///     summarize(&module("triple_b")?, "b", &options),
///     summarize(&module("triple_a")?, "a", &options),
/// ];
///
/// let plan = plan_program(&summaries)?;
/// assert_eq!(plan.classes.len(), 1);
/// // Per module in name order: `a` keeps its code; `b`'s exported copy keeps its
/// // own address, as a thunk to `a`'s.
/// assert_eq!(plan.decisions[0].module, "a");
/// assert!(plan.decisions[0].decisions.is_empty());
/// let decision = &plan.decisions[1].decisions[0];
/// assert_eq!(decision.function, "%triple_b");
/// assert_eq!(decision.action, DecisionAction::Thunk);
/// assert_eq!((decision.to_module.as_str(), decision.to.as_str()), ("a", "%triple_a"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn plan_program(summaries: &[Summary]) -> Result<ProgramPlan, PlanError> {
    // Phase 1 of 4: one node per summarized function, every reference resolved.
    let start = Instant::now();
    let program = Program::new(summaries)?;
    let encoded = program.encode();
    let time_resolve = start.elapsed();

    // Phase 2 of 4: the partition the single-module pass runs.
    let start = Instant::now();
    let partition = partition(&encoded);
    let time_partition = start.elapsed();

    // Phase 3 of 4: a representative per class, a decision per other member.
    // The digests once: they mark promoted names and go into every module's
    // decisions.
    let digests: Vec<u64> = program.order.iter().map(|s| s.digest()).collect();
    let named_digests: Vec<(&str, u64)> = program
        .order
        .iter()
        .zip(&digests)
        .map(|(s, &d)| (s.module.as_str(), d))
        .collect();
    let (mut per_module, classes) = program.decide(
        &partition.merge_classes(),
        &encoded,
        hash_of_digests(&named_digests),
    );

    // Phase 4 of 4: decisions that would bind to a local of the applying module
    // are dropped, a function some module could not redirect its references to
    // stays (a thunk), and other modules' references to new thunks and removed
    // functions are redirected.
    let local_names = program.local_names();
    let shadowed = program.drop_shadowed(&mut per_module, &local_names);
    let referenced_by = program.referenced_by();
    program.keep_referenced(&mut per_module, &local_names, &referenced_by);
    let calls = program.call_redirects(&per_module, &local_names, &referenced_by);
    let decisions = program
        .order
        .iter()
        .zip(digests)
        .zip(per_module)
        .zip(calls)
        .map(|(((summary, module_digest), mut decisions), calls)| {
            decisions.sort_by(|a, b| a.function.cmp(&b.function));
            ModuleDecisions {
                module: summary.module.clone(),
                module_digest,
                addresses_significant: summary.addresses_significant,
                decisions,
                calls,
            }
        })
        .collect();
    Ok(ProgramPlan {
        decisions,
        classes,
        functions: program.nodes.len(),
        shadowed,
        comparisons: partition.stats.comparisons,
        time_resolve,
        time_partition,
    })
}

/// The summaries of a program, in module-name order, with one node per
/// summarized function and the symbol tables that resolve references.
struct Program<'s> {
    /// The summaries, sorted by module name.
    order: Vec<&'s Summary>,
    /// One node per summarized function, module by module.
    nodes: Vec<Node>,
    /// Visible functions by symbol name.
    global: HashMap<&'s str, usize>,
    /// Local functions by module and symbol name.
    local: HashMap<(usize, &'s str), usize>,
}

impl<'s> Program<'s> {
    /// Sorts `summaries` by module name and gives every function a node. Two
    /// summaries of one module, summaries of different modes, and two modules
    /// defining one visible symbol are errors.
    fn new(summaries: &'s [Summary]) -> Result<Self, PlanError> {
        let mut order: Vec<&Summary> = summaries.iter().collect();
        order.sort_by(|a, b| a.module.cmp(&b.module));
        for pair in order.windows(2) {
            if pair[0].module == pair[1].module {
                return Err(PlanError::DuplicateModule(pair[0].module.clone()));
            }
        }
        if order
            .windows(2)
            .any(|p| p[0].addresses_significant != p[1].addresses_significant)
        {
            return Err(PlanError::MixedModes);
        }
        if let Some(pair) = order.windows(2).find(|p| p[0].source != p[1].source) {
            return Err(PlanError::MixedSources {
                modules: (pair[0].module.clone(), pair[1].module.clone()),
                sources: (pair[0].source.to_string(), pair[1].source.to_string()),
            });
        }
        let mut nodes: Vec<Node> = Vec::new();
        let mut global: HashMap<&str, usize> = HashMap::new();
        let mut local: HashMap<(usize, &str), usize> = HashMap::new();
        for (m, summary) in order.iter().enumerate() {
            for (i, f) in summary.functions.iter().enumerate() {
                let node = nodes.len();
                nodes.push(Node {
                    module: m,
                    function: i,
                });
                if f.visibility == Visibility::Local {
                    local.insert((m, &f.name), node);
                } else if let Some(&other) = global.get(f.name.as_str()) {
                    return Err(PlanError::DuplicateSymbol {
                        symbol: f.name.clone(),
                        modules: (
                            order[nodes[other].module].module.clone(),
                            summary.module.clone(),
                        ),
                    });
                } else {
                    global.insert(&f.name, node);
                }
            }
        }
        Ok(Self {
            order,
            nodes,
            global,
            local,
        })
    }

    /// The summary of node `n`.
    fn function(&self, n: usize) -> &'s FunctionSummary {
        let node = self.nodes[n];
        &self.order[node.module].functions[node.function]
    }

    /// Node `n` as `MODULE::NAME`.
    fn name_of(&self, n: usize) -> QualifiedName {
        QualifiedName {
            module: self.order[self.nodes[n].module].module.clone(),
            name: self.function(n).name.clone(),
        }
    }

    /// The function a symbol of module `m` names, if summarized.
    fn lookup(&self, m: usize, symbol: &SymbolRef) -> Option<usize> {
        if symbol.local {
            self.local.get(&(m, symbol.name.as_str())).copied()
        } else {
            self.global.get(symbol.name.as_str()).copied()
        }
    }

    /// The function node `n` stands for: a thunk or alias of the module's own merge
    /// stands for the function it transfers to (a kept function, never itself a
    /// thunk; the hop limit only guards against a crafted summary).
    fn stands_for(&self, mut n: usize) -> usize {
        for _ in 0..4 {
            let f = self.function(n);
            let m = self.nodes[n].module;
            match f
                .same_as
                .and_then(|s| self.order[m].symbols.get(s as usize))
                .and_then(|symbol| self.lookup(m, symbol))
            {
                Some(t) if t != n => n = t,
                _ => break,
            }
        }
        n
    }

    /// The encodings the partition reads: every reference resolved to the node it
    /// names (read through its class), or, where it must match exactly (an exact
    /// reference, a preemptible function, a symbol defined nowhere), to a node of
    /// its own that equals only itself. Those exact-symbol nodes come after the
    /// function nodes, have no encoding and are not supported: each is a class of
    /// its own.
    fn encode(&self) -> EncodedFunctions {
        let mut exact: HashMap<(Option<usize>, &str), usize> = HashMap::new();
        let mut next_exact = self.nodes.len();
        let mut encodings: Vec<Option<FunctionEncoding>> = Vec::with_capacity(self.nodes.len());
        let mut address_taken = vec![false; self.nodes.len()];
        for (m, summary) in self.order.iter().enumerate() {
            // Where each of this summary's symbols resolves, for class references
            // and for exact ones.
            let mut by_class: Vec<usize> = Vec::with_capacity(summary.symbols.len());
            let mut by_name: Vec<usize> = Vec::with_capacity(summary.symbols.len());
            for symbol in &summary.symbols {
                let scope = symbol.local.then_some(m);
                let exact_id = *exact
                    .entry((scope, symbol.name.as_str()))
                    .or_insert_with(|| {
                        next_exact += 1;
                        next_exact - 1
                    });
                let defined = self.lookup(m, symbol).map(|n| self.stands_for(n));
                by_name.push(exact_id);
                by_class.push(match defined {
                    Some(n) if self.function(n).visibility != Visibility::Preemptible => n,
                    _ => exact_id,
                });
            }
            for &s in &summary.addresses_taken {
                if let Some(&n) = by_class.get(s as usize)
                    && n < self.nodes.len()
                {
                    address_taken[n] = true;
                }
            }
            for f in &summary.functions {
                encodings.push(resolved_encoding(f, &by_class, &by_name));
            }
        }
        let mut encoded = EncodedFunctions::default();
        encoded.len = next_exact;
        for (n, encoding) in encodings.into_iter().enumerate() {
            let f = FuncIndex::new(n);
            let summary = self.function(n);
            encoded.supported[f] = summary.supported && summary.same_as.is_none();
            encoded.hashes[f] = StructuralHash(summary.hash);
            encoded.instruction_counts[f] = summary.instructions;
            encoded.address_taken[f] = address_taken[n] || summary.address_taken;
            if let Some(encoding) = encoding {
                encoded.set_encoding(f, encoding);
            }
        }
        encoded
    }

    /// Per class (of the partition's `classes`), a representative and a decision
    /// for every other member, in the member's module (and a promotion for a local
    /// representative of members in other modules, its new name marked with
    /// `program_hash`); and the classes as names (the representative first), sorted.
    fn decide(
        &self,
        classes: &[Vec<FuncIndex>],
        encoded: &EncodedFunctions,
        program_hash: u64,
    ) -> (Vec<Vec<Decision>>, Vec<Vec<QualifiedName>>) {
        // Thunks and aliases of each module's own merge, by the function they
        // stand for.
        let mut standing_in: HashMap<usize, Vec<usize>> = HashMap::new();
        for n in 0..self.nodes.len() {
            if self.function(n).same_as.is_some() {
                let target = self.stands_for(n);
                if target != n {
                    standing_in.entry(target).or_default().push(n);
                }
            }
        }
        let mut promoted_names = PromotedNames::new(&self.order, program_hash);
        let mut per_module: Vec<Vec<Decision>> = vec![Vec::new(); self.order.len()];
        let mut named = Vec::new();
        for class in classes {
            let mut members: Vec<usize> = class
                .iter()
                .map(|f| f.index())
                .filter(|&n| n < self.nodes.len())
                .collect();
            if members.len() < 2 {
                continue;
            }
            // The strongest linkage, then the first by module and definition order
            // (nodes are numbered so).
            members.sort_by_key(|&n| (keep_rank(self.function(n).visibility), n));
            let Some(&rep) = members
                .iter()
                .find(|&&n| self.function(n).visibility != Visibility::Preemptible)
            else {
                // All preemptible: the linker may replace any of them.
                let mut names: Vec<QualifiedName> =
                    members.iter().map(|&n| self.name_of(n)).collect();
                names.sort();
                named.push(names);
                continue;
            };
            let rep_module = self.nodes[rep].module;
            let promote = self.function(rep).visibility == Visibility::Local
                && members.iter().any(|&n| {
                    self.nodes[n].module != rep_module
                        && self.function(n).visibility != Visibility::Preemptible
                });
            // Members are equal, so all or none read machine state. Such a class
            // gets no thunk and no promotion (a finish may keep the old name as a
            // thunk): only removals.
            let reads_machine_state = self.function(rep).reads_machine_state;
            if reads_machine_state && promote {
                let mut names: Vec<QualifiedName> =
                    members.iter().map(|&n| self.name_of(n)).collect();
                names.sort();
                named.push(names);
                continue;
            }
            let to = if promote {
                let name =
                    promoted_names.fresh(&self.function(rep).name, &self.order[rep_module].module);
                per_module[rep_module].push(self.decision_for(
                    rep,
                    DecisionAction::Promote,
                    name.clone(),
                    rep_module,
                ));
                name
            } else {
                self.function(rep).name.clone()
            };
            for &n in &members {
                if n == rep || self.function(n).visibility == Visibility::Preemptible {
                    continue;
                }
                let action = self.action(n, encoded, &standing_in);
                if reads_machine_state && action == DecisionAction::Thunk {
                    continue;
                }
                per_module[self.nodes[n].module].push(self.decision_for(
                    n,
                    action,
                    to.clone(),
                    rep_module,
                ));
            }
            // Reported with the class, but already thunks or aliases in their module.
            let stand_ins = members
                .iter()
                .flat_map(|n| standing_in.get(n).into_iter().flatten())
                .map(|&n| self.name_of(n));
            let mut names: Vec<QualifiedName> = members
                .iter()
                .filter(|&&n| n != rep)
                .map(|&n| self.name_of(n))
                .chain(stand_ins)
                .collect();
            names.sort();
            names.insert(0, self.name_of(rep));
            named.push(names);
        }
        named.sort();
        (per_module, named)
    }

    /// What becomes of `member`, a duplicate that is not preemptible: a local or
    /// hidden function whose address is taken nowhere in the program is removed
    /// (every reference goes to the representative), any other becomes a thunk. So
    /// does one that an alias of its module's own merge names: the alias must stay
    /// a symbol of its module, with code there.
    fn action(
        &self,
        member: usize,
        encoded: &EncodedFunctions,
        standing_in: &HashMap<usize, Vec<usize>>,
    ) -> DecisionAction {
        let removable = matches!(
            self.function(member).visibility,
            Visibility::Local | Visibility::Hidden
        );
        let aliased = standing_in
            .get(&member)
            .is_some_and(|stand_ins| stand_ins.iter().any(|&n| !self.function(n).supported));
        if removable && !aliased && !encoded.address_taken[FuncIndex::new(member)] {
            DecisionAction::Redirect
        } else {
            DecisionAction::Thunk
        }
    }

    /// The decision `action` for node `n`, towards `to` in module `to_module`.
    fn decision_for(
        &self,
        n: usize,
        action: DecisionAction,
        to: String,
        to_module: usize,
    ) -> Decision {
        let node = self.nodes[n];
        Decision {
            function: self.function(n).name.clone(),
            fingerprint: self.order[node.module].fingerprint(node.function),
            action,
            to,
            to_module: self.order[to_module].module.clone(),
        }
    }

    /// Per module, the names it uses for local symbols (its local functions and
    /// the local symbols it refers to).
    fn local_names(&self) -> Vec<HashSet<&'s str>> {
        self.order
            .iter()
            .map(|summary| {
                let functions = summary
                    .functions
                    .iter()
                    .filter(|f| f.visibility == Visibility::Local)
                    .map(|f| f.name.as_str());
                let symbols = summary
                    .symbols
                    .iter()
                    .filter(|s| s.local)
                    .map(|s| s.name.as_str());
                functions.chain(symbols).collect()
            })
            .collect()
    }

    /// Whether the name `to` (of a representative in `to_module`), bound in module
    /// `m`, would mean a local of `m` instead.
    fn binds_elsewhere(
        &self,
        local_names: &[HashSet<&str>],
        m: usize,
        to: &str,
        to_module: &str,
    ) -> bool {
        to_module != self.order[m].module && local_names[m].contains(to)
    }

    /// A decision names its representative by symbol, bound in the applying module:
    /// where that module has a local of the same name, the name would mean the
    /// local (or the member itself). Such members stay as they are: their decisions
    /// are dropped and returned as (member, representative), sorted.
    fn drop_shadowed(
        &self,
        per_module: &mut [Vec<Decision>],
        local_names: &[HashSet<&str>],
    ) -> Vec<(QualifiedName, QualifiedName)> {
        let mut shadowed = Vec::new();
        for (m, decisions) in per_module.iter_mut().enumerate() {
            decisions.retain(|d| {
                let refused = self.binds_elsewhere(local_names, m, &d.to, &d.to_module);
                if refused {
                    shadowed.push((
                        QualifiedName {
                            module: self.order[m].module.clone(),
                            name: d.function.clone(),
                        },
                        QualifiedName {
                            module: d.to_module.clone(),
                            name: d.to.clone(),
                        },
                    ));
                }
                !refused
            });
        }
        shadowed.sort();
        shadowed
    }

    /// For every visible symbol some summary refers to, the modules that refer to
    /// it, and whether by a direct call (a reference that does not have to match
    /// by exact name).
    fn referenced_by(&self) -> HashMap<&'s str, Vec<(usize, bool)>> {
        let mut referenced: HashMap<&str, Vec<(usize, bool)>> = HashMap::new();
        for (m, summary) in self.order.iter().enumerate() {
            let mut called = vec![false; summary.symbols.len()];
            for f in &summary.functions {
                for &p in f.references.iter().filter(|&&p| !f.is_exact(p)) {
                    if let Some(c) = called.get_mut(f.tokens[p as usize] as usize) {
                        *c = true;
                    }
                }
            }
            for (symbol, called) in summary.symbols.iter().zip(called) {
                if !symbol.local {
                    referenced
                        .entry(&symbol.name)
                        .or_default()
                        .push((m, called));
                }
            }
        }
        referenced
    }

    /// The decision of module `m` about its visible function `name`, if `name`
    /// is the program's visible symbol of that name (a local of `m` may share its
    /// name with another module's visible function, whose references must not go
    /// to the local's representative).
    fn is_visible_in(&self, m: usize, name: &str) -> bool {
        self.global
            .get(name)
            .is_some_and(|&n| self.nodes[n].module == m)
    }

    /// A removed visible function must have every reference, in every module,
    /// redirected: where some module cannot bind the representative's name (it
    /// has a local of that name), the function stays, as a thunk.
    fn keep_referenced(
        &self,
        per_module: &mut [Vec<Decision>],
        local_names: &[HashSet<&str>],
        referenced_by: &HashMap<&str, Vec<(usize, bool)>>,
    ) {
        for (m, decisions) in per_module.iter_mut().enumerate() {
            for d in decisions.iter_mut().filter(|d| {
                d.action == DecisionAction::Redirect && self.is_visible_in(m, &d.function)
            }) {
                let unreachable = referenced_by
                    .get(d.function.as_str())
                    .into_iter()
                    .flatten()
                    .any(|&(other, _)| {
                        other != m && self.binds_elsewhere(local_names, other, &d.to, &d.to_module)
                    });
                if unreachable {
                    d.action = DecisionAction::Thunk;
                }
            }
        }
    }

    /// Per module, its references to visible functions of other modules that
    /// became thunks (direct calls) or were removed (every reference): they go
    /// straight to the representative (sorted by symbol).
    fn call_redirects(
        &self,
        per_module: &[Vec<Decision>],
        local_names: &[HashSet<&str>],
        referenced_by: &HashMap<&str, Vec<(usize, bool)>>,
    ) -> Vec<Vec<CallRedirect>> {
        let mut calls: Vec<Vec<CallRedirect>> = vec![Vec::new(); self.order.len()];
        for (owner, decisions) in per_module.iter().enumerate() {
            for d in decisions.iter().filter(|d| {
                matches!(d.action, DecisionAction::Thunk | DecisionAction::Redirect)
                    && self.is_visible_in(owner, &d.function)
            }) {
                for &(m, called) in referenced_by.get(d.function.as_str()).into_iter().flatten() {
                    let wanted = called || d.action == DecisionAction::Redirect;
                    if m != owner
                        && wanted
                        && !self.binds_elsewhere(local_names, m, &d.to, &d.to_module)
                    {
                        calls[m].push(CallRedirect {
                            symbol: d.function.clone(),
                            action: d.action,
                            to: d.to.clone(),
                            to_module: d.to_module.clone(),
                        });
                    }
                }
            }
        }
        for module_calls in &mut calls {
            module_calls.sort_by(|a, b| a.symbol.cmp(&b.symbol));
        }
        calls
    }
}

/// Rank for choosing the representative: lower is stronger (as the single-module
/// pass keeps its function).
fn keep_rank(visibility: Visibility) -> u8 {
    match visibility {
        Visibility::Export => 0,
        Visibility::Hidden => 1,
        Visibility::Local => 2,
        Visibility::Preemptible => 3,
    }
}

/// Names for promoted representatives: derived from the function's name, its
/// module's and the [`program_hash`], spelled as the function's own name is (a CLIF
/// test-case name `%NAME_MODULE_promoted_HASH` for a CLIF name,
/// `NAME.MODULE.promoted.HASH` for a linker name, `HASH` the program hash as 16
/// lowercase hex digits), and used by no module of the program (`_N` or `.N` is
/// appended, N from 2, until it is not). The modules' names only rule out the
/// program's own names: the hash is what keeps names outside the program (a C
/// archive member's, a library's) away, as ThinLTO's `.llvm.HASH` does.
struct PromotedNames<'s> {
    /// Every name a summary of the program uses, and the names given so far.
    taken: HashSet<std::borrow::Cow<'s, str>>,
    /// The [`program_hash`], as 16 hex digits.
    hash: String,
}

impl<'s> PromotedNames<'s> {
    /// Names that clash with none of `summaries`' function and symbol names, marked
    /// with `program_hash`.
    fn new(summaries: &[&'s Summary], program_hash: u64) -> Self {
        let taken = summaries
            .iter()
            .flat_map(|s| {
                let functions = s.functions.iter().map(|f| f.name.as_str());
                functions.chain(s.symbols.iter().map(|s| s.name.as_str()))
            })
            .map(std::borrow::Cow::Borrowed)
            .collect();
        Self {
            taken,
            hash: format!("{program_hash:016x}"),
        }
    }

    /// A new name for local function `name` of module `module`.
    fn fresh(&mut self, name: &str, module: &str) -> String {
        let hash = &self.hash;
        let base = if clif_name(name).is_some() {
            // CLIF test-case names are `%[A-Za-z0-9_]*`.
            let word = |s: &str| -> String {
                s.trim_start_matches('%')
                    .chars()
                    .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
                    .collect()
            };
            format!("%{}_{}_promoted_{hash}", word(name), word(module))
        } else {
            format!("{name}.{module}.promoted.{hash}")
        };
        let mut candidate = base.clone();
        let mut counter = 1u64;
        while self.taken.contains(candidate.as_str()) {
            counter += 1;
            candidate = if base.starts_with('%') {
                format!("{base}_{counter}")
            } else {
                format!("{base}.{counter}")
            };
        }
        self.taken
            .insert(std::borrow::Cow::Owned(candidate.clone()));
        candidate
    }
}

/// The hash of a whole program's summaries that marks its promoted names: 64-bit
/// FNV-1a over every module's name and [`Summary::digest`], in
/// module-name order, so it does not depend on the order the summaries are given
/// and changes whenever any summary does. Fixed by this crate, as the digests are.
pub fn program_hash(summaries: &[Summary]) -> u64 {
    let mut order: Vec<(&str, u64)> = summaries
        .iter()
        .map(|s| (s.module.as_str(), s.digest()))
        .collect();
    order.sort_unstable();
    hash_of_digests(&order)
}

/// [`program_hash`] of (module name, digest) pairs in module-name order.
fn hash_of_digests(order: &[(&str, u64)]) -> u64 {
    order
        .iter()
        .fold(
            Fnv1a::new().word(order.len() as u64),
            |h, (module, digest)| {
                // The length first, so that no two lists of names spell one byte string.
                h.word(module.len() as u64)
                    .bytes(module.as_bytes())
                    .word(*digest)
            },
        )
        .finish()
}

/// The encoding of summarized function `f` with its references resolved: a
/// class reference to `by_class[symbol]`, an exact one to `by_name[symbol]`.
/// `None` for a function that is not compared (unsupported, or a thunk or alias of
/// its module's own merge).
fn resolved_encoding(
    f: &FunctionSummary,
    by_class: &[usize],
    by_name: &[usize],
) -> Option<FunctionEncoding> {
    if !f.supported || f.same_as.is_some() {
        return None;
    }
    let mut tokens = f.tokens.clone();
    for &p in &f.references {
        let symbol = tokens[p as usize] as usize;
        let target = if f.is_exact(p) {
            by_name[symbol]
        } else {
            by_class[symbol]
        };
        tokens[p as usize] = target as u64;
    }
    Some(FunctionEncoding::from_parts(
        tokens,
        f.references.clone(),
        f.instructions,
    ))
}
