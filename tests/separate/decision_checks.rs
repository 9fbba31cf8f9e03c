//! The decision checks of stage 3 are written once (`src/separate/check.rs`) and
//! both appliers use them: `apply_decisions` (CLIF) and
//! `MergingModule::with_decisions` (inside a compiler), which checks against the
//! summary of its IR (compiling at finish) or of its machine code (compiling at
//! define). Here the same program is built all three ways, planned, and each
//! module's decisions are spoiled in every way a check catches; every applier must
//! refuse them with the same [`DecisionError`] (the `MergingModule` one inside
//! `ModuleError::Backend`), so that they cannot drift apart again. Names differ only in spelling: CLIF
//! test-case names (`%fb`) for CLIF, declared names (`fb`) for `MergingModule`.
//!
//! Two plans are also applied unspoiled: the plain one, and one whose promoted
//! representative is the target of a decision listed before its promotion (the
//! `MergingModule` applier refused that valid plan when it checked decisions one
//! by one as it declared their names).

use clif_merge::FunctionSet;
use clif_merge::MergeOptions;
use clif_merge::module::{CompileMode, MergingModule, ModuleMergeOptions};
use clif_merge::separate::{
    CallRedirect, DecisionAction, DecisionError, ModuleDecisions, Summary, apply_decisions,
    plan_program, summarize,
};
use cranelift_codegen::Context;
use cranelift_codegen::ir::Signature;
use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{FuncId, Linkage, Module, ModuleError};
use cranelift_object::{ObjectBuilder, ObjectModule};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget};
use std::collections::{BTreeSet, HashMap};

/// A function of a test program: name, linkage, the function it calls (if any),
/// and a constant that sets its body apart.
type Func = (&'static str, Linkage, Option<&'static str>, i64);

/// A test program: modules, each a name and its functions.
type Program = &'static [(&'static str, &'static [Func])];

/// Module `a` exports `fa`; module `b` exports `fb` (equal to `fa`: decided a thunk
/// to it), `hb` (different) and `kb`, which calls `ext`, defined nowhere.
const PROGRAM: Program = &[
    ("a", &[("fa", Linkage::Export, None, 7)]),
    (
        "b",
        &[
            ("fb", Linkage::Export, None, 7),
            ("hb", Linkage::Export, None, 5),
            ("kb", Linkage::Export, Some("ext"), 3),
        ],
    ),
];

/// The two local `zz` and `aa` of module `a` call `x1` and `x2` of module `n`,
/// which are equal (`n`'s own merge makes `x2` a thunk of `x1`), so the plan finds
/// them equal, and equal to `c`'s local `cc`: `zz` (defined first) is promoted, and
/// `aa`, whose decision sorts before `zz`'s, is redirected to the promoted name.
const PROMOTING_PROGRAM: Program = &[
    (
        "a",
        &[
            ("zz", Linkage::Local, Some("x1"), 1),
            ("aa", Linkage::Local, Some("x2"), 1),
            ("ea", Linkage::Export, Some("zz"), 9),
            ("eb", Linkage::Export, Some("aa"), 8),
        ],
    ),
    (
        "c",
        &[
            ("cc", Linkage::Local, Some("x1"), 1),
            ("ec", Linkage::Export, Some("cc"), 6),
        ],
    ),
    (
        "n",
        &[
            ("x1", Linkage::Export, None, 3),
            ("x2", Linkage::Export, None, 3),
        ],
    ),
];

/// The CLIF text of a function named `name` (as spelled) that computes
/// `callee(x) + k`, or `x * k` without a callee (spelled too).
fn clif(name: &str, callee: Option<&str>, k: i64) -> String {
    match callee {
        Some(callee) => format!(
            "function {name}(i64) -> i64 system_v {{
    fn0 = {callee}(i64) -> i64 system_v
block0(v0: i64):
    v1 = call fn0(v0)
    v2 = iconst.i64 {k}
    v3 = iadd v1, v2
    return v3
}}"
        ),
        None => format!(
            "function {name}(i64) -> i64 system_v {{
block0(v0: i64):
    v1 = iconst.i64 {k}
    v2 = imul v0, v1
    return v2
}}"
        ),
    }
}

/// The one function of CLIF `text`.
fn parse(text: &str) -> cranelift_codegen::ir::Function {
    cranelift_reader::parse_functions(text)
        .unwrap_or_else(|e| panic!("{e}:\n{text}"))
        .remove(0)
}

/// A module after its decisions were applied: the names it defines and the names
/// it refers to without defining them, sorted.
#[derive(Debug)]
struct Applied {
    /// The names it defines.
    defined: Vec<String>,
    /// The names it refers to without defining them.
    undefined: Vec<String>,
}

/// What an applier makes of a module's decisions.
type Outcome = Result<Applied, DecisionError>;

/// How one applier names functions and applies decisions.
trait Applier {
    /// The applier, for messages.
    fn label(&self) -> &'static str;
    /// A symbol of the program as the summaries of this applier spell it.
    fn spell(&self, name: &str) -> String;
    /// The summary of module `module`.
    fn summarize(&self, program: Program, module: &str) -> Summary;
    /// Applies `decisions` to module `module`: the module afterwards, or the
    /// error.
    fn apply(&self, program: Program, module: &str, decisions: ModuleDecisions) -> Outcome;
}

/// `apply_decisions` on CLIF function sets.
struct Clif;

impl Clif {
    /// Module `module` of `program`.
    fn module(program: Program, module: &str) -> FunctionSet {
        let mut set = FunctionSet::new();
        for (m, functions) in program {
            if *m != module {
                continue;
            }
            for &(name, linkage, callee, k) in *functions {
                let text = clif(
                    &format!("%{name}"),
                    callee.map(|c| format!("%{c}")).as_deref(),
                    k,
                );
                set.push(parse(&text), linkage).expect("unique names");
            }
        }
        set
    }
}

impl Applier for Clif {
    fn label(&self) -> &'static str {
        "apply_decisions"
    }

    fn spell(&self, name: &str) -> String {
        format!("%{name}")
    }

    fn summarize(&self, program: Program, module: &str) -> Summary {
        summarize(
            &Self::module(program, module),
            module,
            &MergeOptions::default(),
        )
    }

    fn apply(&self, program: Program, module: &str, decisions: ModuleDecisions) -> Outcome {
        let set = Self::module(program, module);
        let applied = apply_decisions(&set, &MergeOptions::default(), &decisions)?;
        let functions = || applied.functions.iter().map(|(_, d)| &d.func);
        let defined: BTreeSet<String> = functions().map(|f| f.name.to_string()).collect();
        let undefined: BTreeSet<String> = functions()
            .flat_map(|f| {
                let params = &f.params;
                f.dfg
                    .ext_funcs
                    .values()
                    .map(move |e| e.name.display(Some(params)).to_string())
            })
            .filter(|name| !defined.contains(name))
            .collect();
        Ok(Applied {
            defined: defined.into_iter().collect(),
            undefined: undefined.into_iter().collect(),
        })
    }
}

/// `MergingModule<ObjectModule>`, compiling as its mode says: at finish (decisions
/// checked against the IR's summary) or at define (against the machine code's).
struct Merging(CompileMode);

impl Merging {
    /// The host's ISA, position-independent, with frame pointers.
    fn isa() -> OwnedTargetIsa {
        let mut flags = settings::builder();
        flags.set("is_pic", "true").expect("is_pic");
        flags
            .set("preserve_frame_pointers", "true")
            .expect("preserve_frame_pointers");
        cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
            .expect("a Cranelift backend for the host")
            .finish(settings::Flags::new(flags))
            .expect("host ISA")
    }

    /// Module `module` of `program`, every function declared and defined.
    fn module(&self, program: Program, module: &str) -> MergingModule<ObjectModule> {
        let builder = ObjectBuilder::new(
            Self::isa(),
            module,
            cranelift_module::default_libcall_names(),
        )
        .expect("object builder");
        let options = ModuleMergeOptions::default().with_compile(self.0);
        let mut merging = MergingModule::new(ObjectModule::new(builder), options);
        let functions = program
            .iter()
            .filter(|(m, _)| *m == module)
            .flat_map(|(_, functions)| functions.iter());
        let mut signature = Signature::new(merging.isa().default_call_conv());
        signature.params.push(cranelift_codegen::ir::AbiParam::new(
            cranelift_codegen::ir::types::I64,
        ));
        signature.returns = signature.params.clone();
        let mut ids: HashMap<&str, FuncId> = HashMap::new();
        for &(name, linkage, _, _) in functions.clone() {
            let id = merging
                .declare_function(name, linkage, &signature)
                .expect("declare");
            ids.insert(name, id);
        }
        for &(name, _, callee, k) in functions {
            let callee = callee.map(|c| {
                let id = match ids.get(c) {
                    Some(&id) => id,
                    None => merging
                        .declare_function(c, Linkage::Import, &signature)
                        .expect("import"),
                };
                format!("u0:{}", id.as_u32())
            });
            let text = clif(&format!("u0:{}", ids[name].as_u32()), callee.as_deref(), k);
            merging
                .define_function(ids[name], &mut Context::for_function(parse(&text)))
                .expect("define");
        }
        merging
    }
}

impl Applier for Merging {
    fn label(&self) -> &'static str {
        match self.0 {
            CompileMode::AtFinish => "MergingModule at finish",
            CompileMode::AtDefine => "MergingModule at define",
            _ => "MergingModule",
        }
    }

    fn spell(&self, name: &str) -> String {
        name.to_string()
    }

    fn summarize(&self, program: Program, module: &str) -> Summary {
        let summary = self.module(program, module).summarize(module);
        summary.expect("summary")
    }

    fn apply(&self, program: Program, module: &str, decisions: ModuleDecisions) -> Outcome {
        let merging = self.module(program, module).with_decisions(decisions);
        match merging.finish_object() {
            Ok((product, _)) => {
                let bytes = product.emit().expect("emit");
                let file = object::File::parse(&*bytes).expect("object");
                let mut defined: Vec<String> = file
                    .symbols()
                    .filter(|s| s.is_definition())
                    .filter_map(|s| s.name().ok().map(str::to_string))
                    // Section symbols have no name.
                    .filter(|name| !name.is_empty())
                    .collect();
                defined.sort();
                // Referred to: the targets of relocations (the object also lists
                // imports that nothing refers to).
                let undefined: BTreeSet<String> = file
                    .sections()
                    .flat_map(|section| section.relocations().collect::<Vec<_>>())
                    .filter_map(|(_, relocation)| match relocation.target() {
                        RelocationTarget::Symbol(symbol) => file.symbol_by_index(symbol).ok(),
                        _ => None,
                    })
                    .filter_map(|s| s.name().ok().map(str::to_string))
                    .filter(|name| !defined.contains(name))
                    .collect();
                Ok(Applied {
                    defined,
                    undefined: undefined.into_iter().collect(),
                })
            }
            Err(ModuleError::Backend(e)) => match e.downcast_ref::<DecisionError>() {
                Some(e) => Err(e.clone()),
                None => panic!("not a decision error: {e}"),
            },
            Err(e) => panic!("not a decision error: {e}"),
        }
    }
}

/// A way to spoil the decisions of module `b` of [`PROGRAM`], given the symbol
/// speller and `b`'s summary, and the error both appliers must give.
type Spoil = fn(&mut ModuleDecisions, &dyn Fn(&str) -> String, &Summary) -> DecisionError;

/// Every check, each with a spoiling it refuses.
const SPOILS: &[(&str, Spoil)] = &[
    ("mode", |d, _, _| {
        d.addresses_significant = !d.addresses_significant;
        DecisionError::ModeMismatch
    }),
    ("unknown function", |d, spell, _| {
        d.decisions[0].function = spell("nope");
        DecisionError::UnknownFunction(spell("nope"))
    }),
    ("stale fingerprint", |d, spell, _| {
        d.decisions[0].fingerprint ^= 1;
        DecisionError::Stale(spell("fb"))
    }),
    ("stale fingerprint before another digest", |d, spell, _| {
        d.decisions[0].fingerprint ^= 1;
        d.module_digest ^= 1;
        DecisionError::Stale(spell("fb"))
    }),
    ("duplicate decision", |d, spell, _| {
        let again = d.decisions[0].clone();
        d.decisions.push(again);
        DecisionError::DuplicateDecision(spell("fb"))
    }),
    ("digest", |d, _, _| {
        d.module_digest ^= 1;
        DecisionError::NotPlannedModule("b".into())
    }),
    ("representative shadowed by a function", |d, spell, _| {
        d.decisions[0].to = spell("hb");
        DecisionError::Shadowed(spell("hb"))
    }),
    ("call target shadowed", |d, spell, _| {
        d.calls.push(call_of_ext(spell, "kb", "a"));
        DecisionError::Shadowed(spell("kb"))
    }),
    (
        "representative shadowed by a promoted name",
        |d, spell, s| {
            d.decisions.push(promotion(s, spell, "hb", "fresh"));
            d.decisions[0].to = spell("fresh");
            DecisionError::Shadowed(spell("fresh"))
        },
    ),
    ("promoted to a function's name", |d, spell, s| {
        d.decisions[0] = promotion(s, spell, "fb", "hb");
        DecisionError::PromotedNameTaken(spell("hb"))
    }),
    ("promoted to a referenced name", |d, spell, s| {
        d.decisions[0] = promotion(s, spell, "fb", "ext");
        DecisionError::PromotedNameTaken(spell("ext"))
    }),
    ("promoted twice to one name", |d, spell, s| {
        d.decisions[0] = promotion(s, spell, "fb", "fresh");
        d.decisions.push(promotion(s, spell, "hb", "fresh"));
        DecisionError::PromotedNameTaken(spell("fresh"))
    }),
    ("representative missing here", |d, spell, _| {
        d.decisions[0].to = spell("nothing");
        d.decisions[0].to_module = "b".into();
        DecisionError::NotOwnRepresentative(spell("nothing"))
    }),
    ("call target missing here", |d, spell, _| {
        d.calls.push(call_of_ext(spell, "nothing", "b"));
        DecisionError::NotOwnRepresentative(spell("nothing"))
    }),
];

/// A redirect of `b`'s direct calls to `ext` to `to` (as spelled) of `to_module`.
fn call_of_ext(spell: &dyn Fn(&str) -> String, to: &str, to_module: &str) -> CallRedirect {
    CallRedirect {
        symbol: spell("ext"),
        action: DecisionAction::Thunk,
        to: spell(to),
        to_module: to_module.into(),
    }
}

/// A decision promoting `function` of `summary`'s module to `to` (as spelled),
/// with the right fingerprint.
fn promotion(
    summary: &Summary,
    spell: &dyn Fn(&str) -> String,
    function: &str,
    to: &str,
) -> clif_merge::separate::Decision {
    let index = summary
        .functions
        .iter()
        .position(|f| f.name == spell(function))
        .expect("summarized");
    clif_merge::separate::Decision {
        function: spell(function),
        fingerprint: summary.fingerprint(index),
        action: DecisionAction::Promote,
        to: spell(to),
        to_module: summary.module.clone(),
    }
}

/// The plan's decisions for `module`, and its summary.
fn decisions_of(
    applier: &dyn Applier,
    program: Program,
    module: &str,
) -> (ModuleDecisions, Summary) {
    let summaries: Vec<Summary> = program
        .iter()
        .map(|(m, _)| applier.summarize(program, m))
        .collect();
    let plan = plan_program(&summaries).expect("plan");
    let decisions = plan
        .decisions
        .into_iter()
        .find(|d| d.module == module)
        .expect("decisions of the module");
    let summary = summaries
        .into_iter()
        .find(|s| s.module == module)
        .expect("summary of the module");
    (decisions, summary)
}

/// Every applier: CLIF, and `MergingModule` in both compile modes.
const APPLIERS: [&dyn Applier; 3] = [
    &Clif,
    &Merging(CompileMode::AtFinish),
    &Merging(CompileMode::AtDefine),
];

/// Every spoiling of [`SPOILS`] is refused by both appliers with its error; the
/// decisions unspoiled apply.
#[test]
fn both_appliers_refuse_every_spoiled_decision_alike() {
    for applier in APPLIERS {
        let spell = |name: &str| applier.spell(name);
        let (decisions, summary) = decisions_of(applier, PROGRAM, "b");
        assert_eq!(decisions.decisions.len(), 1, "{decisions:?}");
        assert_eq!(decisions.decisions[0].function, spell("fb"));
        assert_eq!(decisions.decisions[0].action, DecisionAction::Thunk);
        for (what, spoil) in SPOILS {
            let mut spoiled = decisions.clone();
            let expected = spoil(&mut spoiled, &spell, &summary);
            let got = applier.apply(PROGRAM, "b", spoiled);
            assert_eq!(got.err(), Some(expected), "{what}, {}", applier.label());
        }
        // Unspoiled, the decisions apply.
        let applied = applier.apply(PROGRAM, "b", decisions).expect("applies");
        assert!(applied.defined.contains(&spell("fb")), "{applied:?}");
        assert_eq!(applied.undefined, [spell("ext"), spell("fa")]);
    }
}

/// A name that is no CLIF name can only be refused by the CLIF applier: every
/// string is a linker name.
#[test]
fn a_name_that_is_no_clif_name_is_refused_by_the_clif_applier() {
    let (mut decisions, _) = decisions_of(&Clif, PROGRAM, "b");
    decisions.decisions[0].to = "fa".into();
    assert_eq!(
        Clif.apply(PROGRAM, "b", decisions).err(),
        Some(DecisionError::BadTarget("fa".into()))
    );
}

/// [`PROMOTING_PROGRAM`]'s valid plan applies with both appliers, though the
/// redirect to the promoted name comes before the promotion.
#[test]
fn a_representative_promoted_after_its_first_use_applies_with_both_appliers() {
    for applier in APPLIERS {
        let spell = |name: &str| applier.spell(name);
        let (decisions, _) = decisions_of(applier, PROMOTING_PROGRAM, "a");
        let actions: Vec<(String, DecisionAction)> = decisions
            .decisions
            .iter()
            .map(|d| (d.function.clone(), d.action))
            .collect();
        assert_eq!(
            actions,
            [
                (spell("aa"), DecisionAction::Redirect),
                (spell("zz"), DecisionAction::Promote)
            ]
        );
        let promoted = decisions.decisions[1].to.clone();
        assert_eq!(decisions.decisions[0].to, promoted);
        let applied = applier
            .apply(PROMOTING_PROGRAM, "a", decisions)
            .unwrap_or_else(|e| panic!("{}: {e}", applier.label()));
        // Both functions' code is the promoted one, which `eb` (the caller of `aa`)
        // reaches too: nothing else is left undefined.
        assert_eq!(applied.defined, [spell("ea"), spell("eb"), promoted]);
        assert_eq!(applied.undefined, [spell("x1")]);
    }
}
