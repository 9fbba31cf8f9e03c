//! Runs every `.clif` file under `filetests/` through `clif-merge` and checks the
//! output against the file's `; check:`-style directives (the `filecheck` crate).
//!
//! A line `; clif-merge: ARGS` in a file gives extra command-line arguments. Every
//! file must contain at least one directive, so no file passes by checking nothing.

#[path = "../support/skip.rs"]
mod skip;
#[path = "../support/snapshot.rs"]
mod snapshot;

use clap::Parser;
use clif_merge::testing::{Args, run};
use std::path::{Path, PathBuf};

fn clif_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("filetests directory is readable") {
        let path = entry.expect("directory entry").path();
        if path.is_dir() {
            clif_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "clif") {
            out.push(path);
        }
    }
}

fn extra_args(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("; clif-merge:"))
        .flat_map(|rest| rest.split_whitespace().map(str::to_string))
        .collect()
}

fn run_filetest(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let mut argv = vec!["clif-merge".to_string()];
    argv.extend(extra_args(&text));
    argv.push(path.display().to_string());
    let args = Args::try_parse_from(&argv).map_err(|e| format!("bad `; clif-merge:` line: {e}"))?;
    let (output, _) =
        run(&args).map_err(|e| format!("clif-merge failed (exit {}): {e}", e.code))?;
    let checker = filecheck::CheckerBuilder::new()
        .text(&text)
        .map_err(|e| format!("bad directives: {e}"))?
        .finish();
    if checker.is_empty() {
        return Err("no filecheck directives".into());
    }
    let (ok, explain) = checker
        .explain(&output, filecheck::NO_VARIABLES)
        .map_err(|e| format!("filecheck error: {e}"))?;
    if ok {
        Ok(())
    } else {
        Err(format!(
            "directives do not match.\n--- output ---\n{output}\n--- filecheck ---\n{explain}"
        ))
    }
}

#[test]
fn filetests() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests");
    let mut files = Vec::new();
    clif_files(&root, &mut files);
    files.sort();
    // Snapshot: the number of filetests in each directory, so that one lost (a
    // directory not walked, an extension misspelled) fails here. Changes when a
    // filetest is added or removed; update deliberately.
    let count = |dir: &str| {
        files
            .iter()
            .filter(|p| p.starts_with(root.join(dir)))
            .count()
    };
    assert_eq!(
        [
            count("merge"),
            count("nomerge"),
            count("similar"),
            files.len()
        ],
        [69, 76, 83, 228],
        "filetests in merge/, nomerge/, similar/, and in all"
    );
    let mut failures = Vec::new();
    for path in &files {
        if let Err(e) = run_filetest(path) {
            failures.push(format!("{}: {e}", path.display()));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} filetests failed:\n\n{}",
        failures.len(),
        files.len(),
        failures.join("\n\n")
    );
}

/// An oracle independent of the comparator: every merge the `merge/` filetests make
/// is run by the translation validator (`clif_merge::validate`: the duplicate in the
/// original module against its replacement in the merged module, in
/// `cranelift-interpreter`, on edge and random inputs). No mismatch is allowed, and
/// enough of it must actually run for the check to mean something.
#[test]
fn merges_in_filetests_agree_in_the_interpreter() {
    use clif_merge::validate::validate;
    use clif_merge::{FunctionSet, MergeOptions, merge_functions};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/merge");
    let mut files = Vec::new();
    clif_files(&root, &mut files);
    files.sort();
    let mut table = String::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let mut module = FunctionSet::new();
        for f in cranelift_reader::parse_functions(&text).expect("parses") {
            module.push(f, clif_merge::Linkage::Local).expect("unique");
        }
        let outcome = merge_functions(&module, &MergeOptions::default());
        let report =
            validate(&module, &outcome.plan, &outcome.output).expect("the validator crashed");
        assert!(
            report.mismatches.is_empty(),
            "{}: {:?}",
            path.display(),
            report.mismatches
        );
        table.push_str(&format!(
            "{}: {} merged, {} validated by {} runs, {} unvalidated\n",
            relative(&root, path),
            outcome.plan.decisions.len(),
            report.validated,
            report.runs,
            report.unvalidated.len()
        ));
    }
    print!("{table}");
    // Snapshot, per file: merges, how many of them the interpreter validated, on how
    // many conclusive inputs (few where loops or recursion run out of fuel on most
    // inputs), and how many it could not run (vconst_same_data: vector parameters). Changes when a filetest,
    // the plan or the validator (its inputs, its sandbox) changes; update deliberately.
    snapshot::assert_snapshot(
        "merges in filetests/merge validated",
        &table,
        "
        address_taken_late_thunk.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        address_taken_mode_all.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        address_taken_thunk.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        block_layout.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        br_table.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        call_indirect_sigs_renumbered.clif: 1 merged, 1 validated by 79 runs, 0 unvalidated
        callers_redirected.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        comments.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_address_callers_all.clif: 1 merged, 1 validated by 65 runs, 0 unvalidated
        core_address_taken_mode_all.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_address_taken_thunk.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_block_layout.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        core_br_table.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_call_indirect.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        core_callers_redirected.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_comments.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_export_local.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_exported_kept.clif: 2 merged, 2 validated by 138 runs, 0 unvalidated
        core_exported_pair_thunk.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_float_bits.clif: 1 merged, 1 validated by 71 runs, 0 unvalidated
        core_four_members_one_odd.clif: 2 merged, 2 validated by 148 runs, 0 unvalidated
        core_global_values.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_iconst_spelling.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_local_address_taken_alias.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_loop_block_params.clif: 1 merged, 1 validated by 1 runs, 0 unvalidated
        core_memflags_order.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_mutual_recursion_pairs.clif: 2 merged, 2 validated by 4 runs, 0 unvalidated
        core_preemptible_thunk.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_renamed_blocks.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_renamed_values.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        core_same_external_callee.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_self_recursion.clif: 1 merged, 1 validated by 34 runs, 0 unvalidated
        core_srclocs.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_stack_slots_renumbered.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_symbols.clif: 1 merged, 1 validated by 65 runs, 0 unvalidated
        core_tail_thunk.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_three_members.clif: 2 merged, 2 validated by 148 runs, 0 unvalidated
        core_transitive.clif: 2 merged, 2 validated by 138 runs, 0 unvalidated
        core_unreachable_block.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_value_alias.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        core_vconst_pool.clif: 1 merged, 1 validated by 65 runs, 0 unvalidated
        export_local.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        exported_pair_mode_all.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        exported_pair_thunk.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        float_spelling.clif: 1 merged, 1 validated by 71 runs, 0 unvalidated
        four_members.clif: 3 merged, 3 validated by 207 runs, 0 unvalidated
        global_values_renumbered.clif: 1 merged, 1 validated by 65 runs, 0 unvalidated
        iconst_spelling.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        libcall_spelled_name.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        loop_block_params.clif: 1 merged, 1 validated by 2 runs, 0 unvalidated
        memflags_order.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        mutual_recursion.clif: 2 merged, 2 validated by 4 runs, 0 unvalidated
        preemptible_callers_kept.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        preemptible_thunk.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        reads_frame_pointer_erased.clif: 1 merged, 0 validated by 0 runs, 1 unvalidated
        renamed_blocks.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        renamed_values.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        same_external_callee.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        self_recursion.clif: 1 merged, 1 validated by 2 runs, 0 unvalidated
        self_recursion_cross.clif: 1 merged, 1 validated by 2 runs, 0 unvalidated
        srclocs.clif: 2 merged, 2 validated by 148 runs, 0 unvalidated
        stack_slot_ss3.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        stack_slots_renumbered.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        tail_thunk.clif: 1 merged, 1 validated by 74 runs, 0 unvalidated
        three_members.clif: 2 merged, 2 validated by 148 runs, 0 unvalidated
        transitive.clif: 2 merged, 2 validated by 138 runs, 0 unvalidated
        transitive_long.clif: 2 merged, 2 validated by 138 runs, 0 unvalidated
        unreachable_block.clif: 1 merged, 1 validated by 69 runs, 0 unvalidated
        vconst_same_data.clif: 1 merged, 0 validated by 0 runs, 1 unvalidated
        ",
    );
}

/// `path` relative to `root`, with `/` separators.
fn relative(root: &Path, path: &Path) -> String {
    let rel = path.strip_prefix(root).unwrap_or(path);
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The same oracle for the similar-function merge: in every `similar/` filetest,
/// each member of a merged group, run in the original module, must agree with its
/// entry point (which calls the merged body with its constants) in the merged
/// module.
#[test]
fn similar_merges_in_filetests_agree_in_the_interpreter() {
    use clif_merge::similar::{SimilarOptions, SimilarPass};
    use clif_merge::validate::validate_similar;
    use clif_merge::{FunctionSet, MergeOptions, merge_functions};
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/similar");
    let mut files = Vec::new();
    clif_files(&root, &mut files);
    files.sort();
    let mut table = String::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("readable");
        let mut module = FunctionSet::new();
        for f in cranelift_reader::parse_functions(&text).expect("parses") {
            module.push(f, clif_merge::Linkage::Local).expect("unique");
        }
        let outcome = merge_functions(&module, &MergeOptions::default());
        let args = extra_args(&text);
        let option = |name: &str| -> Option<u64> {
            let i = args.iter().position(|a| a == name)?;
            args.get(i + 1)?.parse().ok()
        };
        let defaults = SimilarOptions::default();
        let options = SimilarOptions::default()
            .with_max_holes(option("--max-holes").map_or(defaults.max_holes, |n| n as usize))
            .with_min_saved(option("--min-saved").unwrap_or(defaults.min_saved))
            .with_align(!args.iter().any(|a| a == "--no-align"))
            .with_align_cfg(args.iter().any(|a| a == "--align-cfg"))
            .with_align_blocks(args.iter().any(|a| a == "--align-blocks"))
            .with_align_groups(args.iter().any(|a| a == "--align-groups"))
            .with_align_anchors(args.iter().any(|a| a == "--align-anchors"))
            .with_align_sequence(args.iter().any(|a| a == "--align-sequence"));
        let similar = SimilarPass::after(
            &module,
            &outcome,
            &options,
            clif_merge::testing::host_isa().as_deref(),
        );
        let report =
            validate_similar(similar.module(), similar.outcome()).expect("the validator crashed");
        assert!(
            report.mismatches.is_empty(),
            "{}: {:?}",
            path.display(),
            report.mismatches
        );
        let members: usize = similar
            .outcome()
            .groups
            .iter()
            .map(|g| g.members.len())
            .sum();
        table.push_str(&format!(
            "{}: {} groups, {members} members, {} validated by {} runs, {} unvalidated\n",
            relative(&root, path),
            similar.outcome().groups.len(),
            report.validated,
            report.runs,
            report.unvalidated.len()
        ));
    }
    print!("{table}");
    // Snapshot, per file: groups merged, their members, how many entry points the
    // interpreter validated, on how many conclusive inputs, and how many it could not
    // run. Whether a group is merged depends on code sizes for the host ISA, so the
    // table is for x86_64. Changes when a filetest, the similar merge, the size model,
    // the validator or Cranelift changes; update deliberately.
    if !cfg!(target_arch = "x86_64") {
        skip::skip_or_fail(
            "similar_merges_in_filetests_agree_in_the_interpreter",
            "the snapshot table is for x86_64 code sizes; this host has no table",
        );
        return;
    }
    snapshot::assert_snapshot(
        "similar merges in filetests/similar validated",
        &table,
        "
        aligned_anchor_operand_differs.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        aligned_anchor_side_effect_order.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        aligned_blocks_dominance_lost.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_blocks_extra_in_first.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_extra_in_second.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_one_sided_to_unpaired.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_side_effect_order.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_trap_code_differs.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_unpaired_br_table.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_unpaired_stack_slot.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_blocks_unpaired_value_first.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_unpaired_value_loop.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_unpaired_value_second.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_blocks_unpaired_value_vector.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_can_move_in_arm.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_cfg_br_table.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_cfg_dominance_lost.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_cfg_return_differs.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_cfg_stack_slot.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_cfg_successors_differ.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_cfg_trap_code_differs.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_cfg_value_escapes.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_escape_from_another_block.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_escape_to_later_blocks.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_escape_to_suffix.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_escape_used_differently.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_global_value.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_group_of_four.clif: 1 groups, 4 members, 4 validated by 316 runs, 0 unvalidated
        aligned_group_of_three.clif: 1 groups, 3 members, 3 validated by 237 runs, 0 unvalidated
        aligned_group_third_elsewhere.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_group_third_names_slot.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_group_third_other_slot.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_group_third_reorders_calls.clif: 1 groups, 3 members, 3 validated by 237 runs, 0 unvalidated
        aligned_group_third_reorders_stores.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_group_third_widened.clif: 1 groups, 3 members, 3 validated by 237 runs, 0 unvalidated
        aligned_one_sided_to_later_stretch.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_one_sided_to_shared_path.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_several_stretches.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        aligned_slot_serials_collide.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_stack_slot.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_stretch_inserted.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_stretch_replaced.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_stretches_in_two_blocks.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        aligned_terminator_differs.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        aligned_value_escapes.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        callee_differs.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        callee_shared.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        constant_and_callee_differ.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        constants_four_holes.clif: 1 groups, 3 members, 3 validated by 222 runs, 0 unvalidated
        constants_limit_option.clif: 1 groups, 3 members, 3 validated by 222 runs, 0 unvalidated
        constants_one_hole.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        constants_too_many_holes.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        constants_two_holes.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        float_constants.clif: 1 groups, 2 members, 2 validated by 156 runs, 0 unvalidated
        group_of_five.clif: 1 groups, 5 members, 5 validated by 370 runs, 0 unvalidated
        hole_in_loop.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        imported_callee_base_differs.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        imported_callee_context_only.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        imported_callee_differs.clif: 1 groups, 2 members, 2 validated by 168 runs, 0 unvalidated
        imported_callee_flags_differ.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        imported_callee_plain_loads.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        imported_callee_shared.clif: 1 groups, 2 members, 2 validated by 168 runs, 0 unvalidated
        imported_callee_used_as_data.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        min_saved_threshold.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        name_index_wraps.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        name_taken_by_alias.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        name_taken_by_import.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        name_taken_by_import_testcase.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        reads_stack_pointer_no_entry_point.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        sequence_branches_align.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        sequence_nothing_in_common.clif: 0 groups, 0 members, 0 validated by 0 runs, 0 unvalidated
        sequence_one_sided_values_coalesced.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        sequence_operand_differs.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        sequence_side_effect_order.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        sequence_stack_slots_differ.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        sequence_trap_code_differs.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        sequence_value_used_after_join.clif: 1 groups, 2 members, 2 validated by 158 runs, 0 unvalidated
        shared_parameters.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        shared_parameters_partial_agreement.clif: 1 groups, 3 members, 3 validated by 222 runs, 0 unvalidated
        shared_parameters_types_differ.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        split_into_subgroups.clif: 2 groups, 4 members, 4 validated by 296 runs, 0 unvalidated
        split_when_whole_does_not_pay.clif: 2 groups, 4 members, 4 validated by 296 runs, 0 unvalidated
        tail_call_callee_differs.clif: 1 groups, 2 members, 2 validated by 148 runs, 0 unvalidated
        ",
    );
}
