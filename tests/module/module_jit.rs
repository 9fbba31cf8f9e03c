//! End to end through `MergingModule<JITModule>`: the fixture module is compiled in
//! memory with and without merging; every function, called directly or through the
//! pointer `get_finalized_function` gives for it (erased and aliased duplicates
//! included), returns what the unmerged build returns.

#[path = "../common/mod.rs"]
mod common;
#[path = "../support/snapshot.rs"]
mod snapshot;

use clif_merge::module::{MergedJit, MergingModule, ModuleMergeOptions};
use clif_merge::{MergeAction, MergeMode, MergeOptions};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_jit::{JITBuilder, JITModule};

fn build(
    enabled: bool,
    mode: MergeMode,
) -> (
    MergedJit,
    common::Fixture,
    Vec<(String, String, MergeAction)>,
) {
    let mut flags = settings::builder();
    flags.set("opt_level", "none").expect("flag");
    let isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("host ISA")
        .finish(settings::Flags::new(flags))
        .expect("ISA");
    let builder = JITBuilder::with_isa(isa, cranelift_module::default_libcall_names());
    let options = ModuleMergeOptions::default()
        .with_merge(MergeOptions::default().with_mode(mode))
        .with_enabled(enabled);
    let mut module = MergingModule::new(JITModule::new(builder), options);
    let fixture = common::define_fixture(&mut module);
    let (jit, report) = module.finish_jit().expect("finish");
    (jit, fixture, report.actions)
}

/// Calls every fixture function on a few inputs: name -> results.
fn results(jit: &MergedJit, fixture: &common::Fixture) -> Vec<(String, Vec<i64>)> {
    common::FUNCTIONS
        .iter()
        .zip(&fixture.ids)
        .map(|((name, _, _), &id)| {
            let ptr = jit.get_finalized_function(id);
            // SAFETY: every fixture function has the signature (i64) -> i64 system_v.
            let f: extern "sysv64" fn(i64) -> i64 = unsafe { std::mem::transmute(ptr) };
            (
                name.to_string(),
                [0, 1, 5, 9, 20].iter().map(|&x| f(x)).collect(),
            )
        })
        .collect()
}

#[test]
fn jit_results_are_unchanged_by_merging() {
    for mode in [MergeMode::Safe, MergeMode::All] {
        let (plain, plain_fixture) = {
            let (jit, fixture, _) = build(false, mode);
            (jit, fixture)
        };
        let (merged, merged_fixture, actions) = build(true, mode);
        // Snapshot of what the merge did to the fixture (tests/common): changes when
        // the fixture or the plan (which duplicate is kept, which action) changes;
        // update deliberately.
        let done: String = actions
            .iter()
            .map(|(dup, kept, action)| format!("{dup} -> {kept}: {action:?}\n"))
            .collect();
        let expected = match mode {
            MergeMode::Safe => {
                "
                helper_b -> helper_a: Erase
                exported_2 -> exported_1: Thunk
                addr_b -> addr_a: Thunk
                ping2 -> ping1: Erase
                pong2 -> pong1: Erase
                "
            }
            MergeMode::All => {
                "
                helper_b -> helper_a: Erase
                exported_2 -> exported_1: Alias
                addr_b -> addr_a: Alias
                ping2 -> ping1: Erase
                pong2 -> pong1: Erase
                "
            }
            _ => unreachable!("a merge mode this test does not run"),
        };
        snapshot::assert_snapshot(&format!("{mode:?} mode merges"), &done, expected);
        assert_eq!(
            results(&merged, &merged_fixture),
            results(&plain, &plain_fixture)
        );
        // Erased and aliased duplicates resolve to the kept code.
        for (dup, kept, action) in &actions {
            let index = |n: &str| {
                common::FUNCTIONS
                    .iter()
                    .position(|(name, _, _)| *name == n)
                    .expect("a fixture function")
            };
            let (d, k) = (
                merged_fixture.ids[index(dup)],
                merged_fixture.ids[index(kept)],
            );
            let same = merged.get_finalized_function(d) == merged.get_finalized_function(k);
            assert_eq!(same, *action != MergeAction::Thunk, "{dup} {action:?}");
        }
        // The function table still holds two working pointers.
        let (table, _) = merged.module().get_finalized_data(merged_fixture.table);
        // SAFETY: the table holds two `(i64) -> i64 system_v` pointers.
        let entries: [extern "sysv64" fn(i64) -> i64; 2] = unsafe { std::ptr::read(table.cast()) };
        assert_eq!((entries[0](4), entries[1](4)), (104, 104));
        if mode == MergeMode::Safe {
            assert_ne!(entries[0] as usize, entries[1] as usize);
        }
    }
}
