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
//! Per class it keeps one *representative*: a visible (export, then hidden),
//! non-preemptible member, the first by module and name, so the choice does not
//! depend on the order the summaries are given. A class with no visible member can
//! only be merged within each module. Every other member that is not preemptible
//! gets a [`Decision`] in its module's [`ModuleDecisions`]: a local function whose
//! address is never taken is removed and its calls go to the representative
//! ([`DecisionAction::Redirect`]); any other becomes a thunk to it
//! ([`DecisionAction::Thunk`]; an object file cannot alias a symbol it does not
//! define), and its module's own calls go straight to the representative, as do
//! the direct calls other modules make to it ([`CallRedirect`]).

use super::format::{DECISIONS_MAGIC, FormatError, from_bytes, to_bytes};
use super::summary::{FunctionSummary, Summary, SymbolRef, Visibility};
use crate::identical::compare::EncodedFunctions;
use crate::identical::encode::FunctionEncoding;
use crate::identical::hash::StructuralHash;
use crate::identical::partition::partition;
use crate::ir::FuncIndex;
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
    /// Removed; every call goes to the representative.
    Redirect,
}

impl DecisionAction {
    /// `thunk` or `redirect`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Thunk => "thunk",
            Self::Redirect => "redirect",
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
    /// The representative's symbol name.
    pub to: String,
    /// The representative's module.
    pub to_module: String,
}

/// Calls a module makes to a function of another module that became a thunk: they
/// may go straight to its representative.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallRedirect {
    /// The called symbol (a thunk now).
    pub symbol: String,
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
    /// Direct calls to functions of other modules that became thunks, to send
    /// straight to the representative (addresses stay as they are), by symbol.
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

/// Why a program cannot be planned.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    let (mut per_module, classes) = program.decide(&partition.merge_classes(), &encoded);

    // Phase 4 of 4: decisions that would bind to a local of the applying module
    // are dropped, and calls from other modules to new thunks are redirected.
    let local_names = program.local_names();
    let shadowed = program.drop_shadowed(&mut per_module, &local_names);
    let calls = program.call_redirects(&per_module, &local_names);
    let decisions = program
        .order
        .iter()
        .zip(per_module)
        .zip(calls)
        .map(|((summary, mut decisions), calls)| {
            decisions.sort_by(|a, b| a.function.cmp(&b.function));
            ModuleDecisions {
                module: summary.module.clone(),
                module_digest: summary.digest(),
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
        let mut encoded = EncodedFunctions {
            len: next_exact,
            ..EncodedFunctions::default()
        };
        for (n, encoding) in encodings.into_iter().enumerate() {
            let f = FuncIndex::new(n);
            let summary = self.function(n);
            encoded.supported[f] = summary.supported && summary.same_as.is_none();
            encoded.hashes[f] = StructuralHash(summary.hash);
            encoded.instruction_counts[f] = summary.instructions;
            encoded.address_taken[f] = address_taken[n] || summary.address_taken;
            encoded.encodings[f] = encoding;
        }
        encoded
    }

    /// Per class (of the partition's `classes`), a representative and a decision
    /// for every other member, in the member's module; and the classes as names
    /// (the representative first where there is one), sorted.
    fn decide(
        &self,
        classes: &[Vec<FuncIndex>],
        encoded: &EncodedFunctions,
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
        let mut per_module: Vec<Vec<Decision>> = vec![Vec::new(); self.order.len()];
        let mut named = Vec::new();
        for class in classes {
            let members: Vec<usize> = class
                .iter()
                .map(|f| f.index())
                .filter(|&n| n < self.nodes.len())
                .collect();
            if members.len() < 2 {
                continue;
            }
            // Reported with the class, but already thunks or aliases in their module.
            let stand_ins: Vec<QualifiedName> = members
                .iter()
                .flat_map(|n| standing_in.get(n).into_iter().flatten())
                .map(|&n| self.name_of(n))
                .collect();
            let key = |n: usize| {
                let rank = match self.function(n).visibility {
                    Visibility::Export => 0,
                    Visibility::Hidden => 1,
                    Visibility::Local => 2,
                    Visibility::Preemptible => 3,
                };
                (rank, self.name_of(n))
            };
            let mut sorted = members.clone();
            sorted.sort_by_cached_key(|&n| key(n));
            let visible = sorted.iter().copied().find(|&n| {
                matches!(
                    self.function(n).visibility,
                    Visibility::Export | Visibility::Hidden
                )
            });
            let mut decide = |member: usize, rep: usize| {
                if let Some(decision) = self.decision(member, rep, encoded) {
                    per_module[self.nodes[member].module].push(decision);
                }
            };
            let mut names: Vec<QualifiedName> = sorted.iter().map(|&n| self.name_of(n)).collect();
            names.extend(stand_ins);
            match visible {
                Some(rep) => {
                    for &n in &sorted {
                        decide(n, rep);
                    }
                    let rep_name = self.name_of(rep);
                    names.retain(|q| *q != rep_name);
                    names.sort();
                    names.insert(0, rep_name);
                }
                None => {
                    // Only within each module: a local representative per module.
                    let mut by_module: HashMap<usize, Vec<usize>> = HashMap::new();
                    for &n in &sorted {
                        by_module.entry(self.nodes[n].module).or_default().push(n);
                    }
                    let mut modules: Vec<_> = by_module.into_iter().collect();
                    modules.sort_by_key(|(m, _)| *m);
                    names.sort();
                    for (_, members) in modules {
                        if let Some(&rep) = members
                            .iter()
                            .find(|&&n| self.function(n).visibility != Visibility::Preemptible)
                        {
                            for &n in &members {
                                decide(n, rep);
                            }
                        }
                    }
                }
            }
            named.push(names);
        }
        named.sort();
        (per_module, named)
    }

    /// The decision for `member` of a class represented by `rep`: none for the
    /// representative itself and for a preemptible member; a local function whose
    /// address is never taken is removed (its calls go to the representative), any
    /// other becomes a thunk.
    fn decision(&self, member: usize, rep: usize, encoded: &EncodedFunctions) -> Option<Decision> {
        let f = self.function(member);
        if member == rep || f.visibility == Visibility::Preemptible {
            return None;
        }
        let action = if f.visibility == Visibility::Local
            && !encoded.address_taken[FuncIndex::new(member)]
        {
            DecisionAction::Redirect
        } else {
            DecisionAction::Thunk
        };
        let node = self.nodes[member];
        Some(Decision {
            function: f.name.clone(),
            fingerprint: self.order[node.module].fingerprint(node.function),
            action,
            to: self.function(rep).name.clone(),
            to_module: self.order[self.nodes[rep].module].module.clone(),
        })
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

    /// Per module, its direct calls to visible functions of other modules that
    /// became thunks: they may go straight to the representative (sorted by
    /// symbol).
    fn call_redirects(
        &self,
        per_module: &[Vec<Decision>],
        local_names: &[HashSet<&str>],
    ) -> Vec<Vec<CallRedirect>> {
        let mut thunked: HashMap<&str, (usize, &Decision)> = HashMap::new();
        for (m, decisions) in per_module.iter().enumerate() {
            for d in decisions
                .iter()
                .filter(|d| d.action == DecisionAction::Thunk)
            {
                // The visible symbol of that name must be this very function: a
                // local of module `m` may share its name with another module's
                // visible one, whose callers must not be sent to the local's
                // representative.
                if self
                    .global
                    .get(d.function.as_str())
                    .is_some_and(|&n| self.nodes[n].module == m)
                {
                    thunked.insert(&d.function, (m, d));
                }
            }
        }
        self.order
            .iter()
            .enumerate()
            .map(|(m, summary)| {
                let mut called = vec![false; summary.symbols.len()];
                for f in &summary.functions {
                    for &p in f.references.iter().filter(|&&p| !f.is_exact(p)) {
                        if let Some(c) = called.get_mut(f.tokens[p as usize] as usize) {
                            *c = true;
                        }
                    }
                }
                let mut calls: Vec<CallRedirect> = summary
                    .symbols
                    .iter()
                    .zip(called)
                    .filter(|(symbol, called)| *called && !symbol.local)
                    .filter_map(|(symbol, _)| {
                        let &(owner, d) = thunked.get(symbol.name.as_str())?;
                        let shadowed = self.binds_elsewhere(local_names, m, &d.to, &d.to_module);
                        (owner != m && !shadowed).then(|| CallRedirect {
                            symbol: symbol.name.clone(),
                            to: d.to.clone(),
                            to_module: d.to_module.clone(),
                        })
                    })
                    .collect();
                calls.sort_by(|a, b| a.symbol.cmp(&b.symbol));
                calls
            })
            .collect()
    }
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
