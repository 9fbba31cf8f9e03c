//! The whole pass over a [`FunctionSet`]: encode, hash, partition, plan, apply.

use crate::adapter::{FunctionEncoding, encode_module};
use crate::apply::{OutputEntry, apply};
use crate::compare::EncodedFunctions;
use crate::hash::StructuralHash;
use crate::module::{FuncIndex, FunctionSet};
use crate::partition::{PartitionStats, partition};
use crate::plan::{MergeMode, MergePlan, plan};
use cranelift_codegen::entity::SecondaryMap;
use std::time::{Duration, Instant};

/// Options of the pass.
#[derive(Clone, Debug, Default)]
pub struct MergeOptions {
    /// Whether function addresses are significant.
    pub mode: MergeMode,
}

/// What the pass did and what it cost.
#[derive(Clone, Debug, Default)]
pub struct MergeStats {
    /// Functions in the module.
    pub functions: usize,
    /// Functions the walk could not handle (never merged), with the reason.
    pub unsupported: Vec<(FuncIndex, String)>,
    /// Reachable instructions over all functions.
    pub instructions: u64,
    /// Reachable instructions in the bodies of merged duplicates.
    pub instructions_merged: u64,
    /// Partition counters.
    pub partition: PartitionStats,
    /// Time spent walking functions and hashing.
    pub time_encode: Duration,
    /// Time spent in the tree and refinement.
    pub time_partition: Duration,
    /// Time spent planning and rewriting.
    pub time_apply: Duration,
}

/// The result of the pass.
pub struct MergeOutcome {
    /// The decisions.
    pub plan: MergePlan,
    /// The merged module, in input order.
    pub output: Vec<OutputEntry>,
    /// Counters and timings.
    pub stats: MergeStats,
}

/// Runs the pass over `module`.
pub fn merge_functions(module: &FunctionSet, options: &MergeOptions) -> MergeOutcome {
    let mut stats = MergeStats {
        functions: module.len(),
        ..MergeStats::default()
    };

    let start = Instant::now();
    let (results, _symbols) = encode_module(module);
    let mut encodings: SecondaryMap<FuncIndex, Option<FunctionEncoding>> =
        SecondaryMap::with_capacity(module.len());
    let mut hashes: SecondaryMap<FuncIndex, StructuralHash> =
        SecondaryMap::with_capacity(module.len());
    let mut address_taken: SecondaryMap<FuncIndex, bool> =
        SecondaryMap::with_capacity(module.len());
    for (f, result) in results {
        match result {
            Ok(encoding) => {
                hashes[f] = StructuralHash::of(&encoding);
                stats.instructions += u64::from(encoding.instructions());
                for &target in encoding.address_taken() {
                    address_taken[target] = true;
                }
                encodings[f] = Some(encoding);
            }
            Err(e) => stats.unsupported.push((f, e.reason)),
        }
    }
    stats.time_encode = start.elapsed();

    let start = Instant::now();
    let functions = EncodedFunctions {
        encodings: &encodings,
        hashes: &hashes,
    };
    let partition = partition(&functions, module.len());
    stats.partition = partition.stats.clone();
    stats.time_partition = start.elapsed();

    let start = Instant::now();
    let plan = plan(module, &partition, &address_taken, options.mode);
    let output = apply(module, &plan);
    stats.time_apply = start.elapsed();
    stats.instructions_merged = plan
        .decisions
        .iter()
        .filter_map(|d| encodings[d.function].as_ref())
        .map(|e| u64::from(e.instructions()))
        .sum();

    MergeOutcome {
        plan,
        output,
        stats,
    }
}
