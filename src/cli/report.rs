//! What the pass prints: the merged module as CLIF text, the JSON report, and the
//! human summary of `--stats`.

use super::error::CliError;
use crate::identical::MergeOutcome;
use crate::identical::plan::MergeAction;
use crate::identical::rewrite::OutputEntry;
use crate::ir::FunctionSet;
#[cfg(feature = "module")]
use crate::module::MergeReport;
use crate::separate::ProgramPlan;
use crate::similar::{SimilarGroupReport, SimilarPass, SizeBasis};
use crate::validate::ValidationReport;
use cranelift_codegen::ir::Function;
use serde_json::json;
use std::fmt::Write;

/// The merged module as CLIF text, in input order. A removed duplicate is one
/// comment line (`; %g: erased, calls go to %f`, `; %g: alias of %f`); a thunk is a
/// comment line `; %g: thunk to %f` followed by its body. With the similar merge, a
/// merged body comes just before its first member (`; %f_merged: merged body of
/// %f, %g (N parameters)`) and each member is an entry point
/// (`; %f: entry point of %f_merged`).
pub fn clif_text(
    module: &FunctionSet,
    outcome: &MergeOutcome,
    similar: Option<&SimilarPass>,
    header: &str,
) -> String {
    let mut out = String::from(header);
    for (i, entry) in outcome.output.iter().enumerate() {
        if i > 0 || !header.is_empty() {
            out.push('\n');
        }
        let function = entry.function();
        if let Some(similar) = similar {
            if let Some((group, merged)) = similar.merged_before(function) {
                let members: Vec<String> = group
                    .members
                    .iter()
                    .map(|&m| similar.module().display_name(m))
                    .collect();
                let _ = writeln!(
                    out,
                    "; {}: merged body of {} ({} parameters)",
                    group.merged_name,
                    members.join(", "),
                    group.parameters.len()
                );
                let _ = writeln!(out, "{}", merged.display());
            }
            if let Some(entry_point) = similar.entry_point(function) {
                let merged_name = similar
                    .group_of(function)
                    .map(|g| g.merged_name.to_string())
                    .unwrap_or_default();
                let _ = writeln!(
                    out,
                    "; {}: entry point of {merged_name}",
                    module.display_name(function)
                );
                let _ = write!(out, "{}", entry_point.display());
                continue;
            }
        }
        match entry {
            OutputEntry::Function(_, func) => {
                let _ = write!(out, "{}", func.display());
            }
            OutputEntry::Removed {
                function,
                into,
                action,
            } => {
                let (f, k) = (module.display_name(*function), module.display_name(*into));
                let _ = match action {
                    MergeAction::Erase => writeln!(out, "; {f}: erased, calls go to {k}"),
                    _ => writeln!(out, "; {f}: alias of {k}"),
                };
            }
            OutputEntry::Thunk {
                function,
                into,
                body,
            } => {
                let (f, k) = (module.display_name(*function), module.display_name(*into));
                let _ = writeln!(out, "; {f}: thunk to {k}");
                let _ = write!(out, "{}", body.display());
            }
        }
    }
    out
}

/// The JSON report: `{"functions", "merged", "classes", "actions"}`.
pub fn json_report(module: &FunctionSet, outcome: &MergeOutcome) -> serde_json::Value {
    let plan = &outcome.plan;
    let classes: Vec<Vec<String>> = plan
        .classes
        .iter()
        .map(|c| c.iter().map(|&f| module.display_name(f)).collect())
        .collect();
    let actions: Vec<serde_json::Value> = plan
        .decisions
        .iter()
        .map(|d| {
            json!({
                "function": module.display_name(d.function),
                "into": module.display_name(d.into),
                "action": d.action.as_str(),
            })
        })
        .collect();
    json!({
        "functions": module.len(),
        "merged": plan.decisions.len(),
        "classes": classes,
        "actions": actions,
    })
}

/// The `validation` object of the JSON report: counts, and reasons for the
/// unvalidated pairs with the functions concerned.
pub fn validation_json(module: &FunctionSet, report: &ValidationReport) -> serde_json::Value {
    let unvalidated: Vec<serde_json::Value> = report
        .unvalidated
        .iter()
        .map(|(f, reason)| {
            json!({"function": module.display_name(*f), "reason": reason.to_string()})
        })
        .collect();
    json!({
        "validated": report.validated,
        "unvalidated": report.unvalidated.len(),
        "mismatches": report.mismatches.len(),
        "runs": report.runs,
        "reasons": report
            .reasons()
            .into_iter()
            .map(|(reason, count)| (reason.to_string(), count))
            .collect::<std::collections::BTreeMap<_, _>>(),
        "unvalidated_pairs": unvalidated,
        // Steps, not times: the report is the same on every run; `--stats`
        // gives the times.
        "cost": {
            "steps": report.cost.steps,
            "budget_stops": report.cost.budget_stops,
            "most_steps": report
                .cost
                .slowest
                .iter()
                .map(|c| json!({
                    "function": module.display_name(c.function),
                    "steps": c.steps,
                }))
                .collect::<Vec<_>>(),
        },
    })
}

/// The `--stats` line of a validation (`label`: which one): its time, its
/// interpreter steps, the runs its budget cut short and the time spent in pairs
/// that ended unvalidated for it, and the pairs that took the most steps.
pub fn validation_stats_line(
    label: &str,
    module: &FunctionSet,
    report: &ValidationReport,
) -> String {
    let cost = &report.cost;
    let slowest: Vec<String> = cost
        .slowest
        .iter()
        .map(|c| {
            format!(
                "{} ({} steps, {:.2} s)",
                module.display_name(c.function),
                c.steps,
                c.time.as_secs_f64()
            )
        })
        .collect();
    format!(
        "{label}: {:.2} s, {} interpreter steps, {} runs cut short by the budget ({:.2} s in pairs out of budget); most steps: {}\n",
        cost.time.as_secs_f64(),
        cost.steps,
        cost.budget_stops,
        cost.budget_time.as_secs_f64(),
        if slowest.is_empty() {
            "none".to_string()
        } else {
            slowest.join(", ")
        }
    )
}

/// Bytes of CLIF text removed: the text of every merged duplicate minus the text of
/// the thunk that replaces it.
pub fn clif_bytes_removed(module: &FunctionSet, outcome: &MergeOutcome) -> usize {
    let mut removed = 0usize;
    for d in &outcome.plan.decisions {
        removed += module.get(d.function).func.display().to_string().len();
    }
    for entry in &outcome.output {
        if let OutputEntry::Thunk { body, .. } = entry {
            removed = removed.saturating_sub(body.display().to_string().len());
        }
    }
    removed
}

/// The short human summary printed by `--stats`.
pub fn stats_text(module: &FunctionSet, outcome: &MergeOutcome, files: usize) -> String {
    let s = &outcome.stats;
    let plan = &outcome.plan;
    let in_classes: usize = plan.classes.iter().map(Vec::len).sum();
    let ms = |d: std::time::Duration| d.as_secs_f64() * 1e3;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "clif-merge: {} functions ({} instructions) from {} file{}",
        s.functions,
        s.instructions,
        files,
        if files == 1 { "" } else { "s" }
    );
    let _ = writeln!(
        out,
        "  classes of equal functions: {} ({} functions)",
        plan.classes.len(),
        in_classes
    );
    let _ = writeln!(
        out,
        "  merged: {} (erase {}, alias {}, thunk {})",
        plan.decisions.len(),
        plan.count(MergeAction::Erase),
        plan.count(MergeAction::Alias),
        plan.count(MergeAction::Thunk)
    );
    if plan.unmerged_preemptible_classes > 0 {
        let _ = writeln!(
            out,
            "  left alone: {} classes whose members are all preemptible",
            plan.unmerged_preemptible_classes
        );
    }
    let _ = writeln!(
        out,
        "  removed: {} CLIF instructions, {} bytes of CLIF text",
        s.instructions_merged,
        clif_bytes_removed(module, outcome)
    );
    if !s.unsupported.is_empty() {
        let _ = writeln!(out, "  not compared (unsupported): {}", s.unsupported.len());
        for (f, reason) in s.unsupported.iter().take(5) {
            let _ = writeln!(out, "    {}: {reason}", module.display_name(*f));
        }
    }
    let _ = writeln!(
        out,
        "  work: {} hash candidates, {} comparisons, {} refinement rounds",
        s.partition.candidates, s.partition.comparisons, s.partition.refinement_rounds
    );
    let _ = writeln!(
        out,
        "  time: {:.3} ms (hash {:.3}, encode {:.3}, tree {:.3}, refine {:.3}, plan+apply {:.3})",
        ms(s.time_hash + s.time_encode + s.time_tree + s.time_refine + s.time_apply),
        ms(s.time_hash),
        ms(s.time_encode),
        ms(s.time_tree),
        ms(s.time_refine),
        ms(s.time_apply)
    );
    out
}

/// The JSON list of merged groups of similar functions: members, number of
/// parameters (holes) and of the constants and callees they stand for (replaced),
/// the merged body's name, sizes before and after, and what the sizes are
/// (`"sizes"`: `compiled`, `predicted` by the size model, or `instructions`).
pub fn similar_json(groups: &[SimilarGroupReport]) -> serde_json::Value {
    let groups: Vec<serde_json::Value> = groups
        .iter()
        .map(|g| {
            let unit = if g.size_basis.in_bytes() {
                "bytes"
            } else {
                "instructions"
            };
            let sizes = match g.size_basis {
                SizeBasis::Compiled => "compiled",
                SizeBasis::Predicted => "predicted",
                SizeBasis::Instructions => "instructions",
            };
            json!({
                "members": g.members,
                "holes": g.holes,
                "replaced": g.replaced,
                "merged_into": g.merged_into,
                format!("{unit}_before"): g.size_before,
                format!("{unit}_after"): g.size_after,
                "sizes": sizes,
            })
        })
        .collect();
    serde_json::Value::Array(groups)
}

/// The `--stats` line of the similar merge, and up to five groups not merged with
/// the reason.
pub fn similar_stats_line(similar: &SimilarPass) -> String {
    let groups = &similar.outcome().groups;
    let members: usize = groups.iter().map(|g| g.members.len()).sum();
    let holes: usize = groups.iter().map(|g| g.parameters.len()).sum();
    let shared = groups.iter().filter(|g| g.shares_parameters()).count();
    let before: u64 = groups.iter().map(|g| g.size_before).sum();
    let after: u64 = groups.iter().map(|g| g.size_after).sum();
    let unit = match groups.first() {
        Some(g) if !g.size_basis.in_bytes() => "instructions",
        _ => "code bytes",
    };
    let mut line = format!(
        "  similar: {} groups ({members} functions, {holes} parameters, {shared} groups sharing one), {before} -> {after} {unit}; {} groups not merged\n",
        groups.len(),
        similar.outcome().rejected.len()
    );
    for (members, reason) in similar.outcome().rejected.iter().take(5) {
        let names: Vec<String> = members
            .iter()
            .map(|&m| similar.module().display_name(m))
            .collect();
        line.push_str(&format!("    not merged: {}: {reason}\n", names.join(", ")));
    }
    line
}

#[cfg(feature = "module")]
impl MergeReport {
    /// The report as JSON, as the CLI's `--report json` spells it: `functions`,
    /// `merged`, `classes`, `actions`, then `cross_module` (when decisions were
    /// applied), `similar` (when the similar merge ran) and `bytes_saved`.
    pub fn to_json(&self) -> serde_json::Value {
        let mut json = json!({
            "functions": self.functions,
            "merged": self.actions.len(),
            "classes": self.classes,
            "actions": self
                .actions
                .iter()
                .map(|(f, k, a)| json!({"function": f, "into": k, "action": a.as_str()}))
                .collect::<Vec<_>>(),
        });
        if !self.cross_module.is_empty() {
            json["cross_module"] = self
                .cross_module
                .iter()
                .map(
                    |(f, to, action)| json!({"function": f, "into": to, "action": action.as_str()}),
                )
                .collect();
        }
        if let Some(similar) = &self.similar {
            json["similar"] = similar_json(similar);
        }
        json["bytes_saved"] = self.bytes_saved.into();
        json
    }
}

/// Refuses to print functions that Cranelift's printer cannot print back: a
/// function with dynamic vector types comes out without its `dtN = ...`
/// declarations and with the types spelled `types::I32x4xN`, CLIF that does not
/// parse again. Exit 2, naming the function and what to use instead.
pub fn check_printable(functions: &[&Function]) -> Result<(), CliError> {
    for func in functions {
        if let Some((dt, _)) = func.dfg.dynamic_types.iter().next() {
            return Err(CliError::input(format!(
                "function {} uses the dynamic vector type {dt}, which Cranelift's printer cannot print as CLIF that parses again (it drops the declaration); the merge itself is fine: use --report json to see it",
                func.name
            )));
        }
    }
    Ok(())
}

/// The JSON report of `clif-merge plan`: `functions`, `merged`, `classes` and
/// `actions`, functions named `MODULE::NAME`.
pub fn plan_json(plan: &ProgramPlan) -> serde_json::Value {
    let actions: Vec<serde_json::Value> = plan
        .decisions
        .iter()
        .flat_map(|m| {
            m.decisions.iter().map(move |d| {
                json!({
                    "function": format!("{}::{}", m.module, d.function),
                    "into": format!("{}::{}", d.to_module, d.to),
                    "action": d.action.as_str(),
                })
            })
        })
        .collect();
    let classes: Vec<Vec<String>> = plan
        .classes
        .iter()
        .map(|c| c.iter().map(|q| q.to_string()).collect())
        .collect();
    let counts = plan.counts();
    json!({
        "functions": plan.functions,
        "merged": counts.merged(),
        "removed": counts.removed,
        "thunked": counts.thunked,
        "promoted": counts.promoted,
        "redirected": counts.redirected,
        "classes": classes,
        "actions": actions,
    })
}
