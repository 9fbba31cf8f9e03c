use clif_merge::testing::{
    CalleeView, EncodedFunctions, FunctionComparator, WalkOptions, expand_inputs, load,
};
use std::cmp::Ordering;
use std::path::PathBuf;
fn main() {
    let args: Vec<PathBuf> = std::env::args().skip(1).map(PathBuf::from).collect();
    let m = load(&expand_inputs(&args).unwrap()).unwrap().functions;
    let (enc, _, _) = EncodedFunctions::hash_first(&m, WalkOptions::default(), None);
    let buckets = enc.hash_buckets();
    let cmp = FunctionComparator::new(&enc, CalleeView::Optimistic);
    let (mut in_groups, mut alone) = (0, 0);
    for b in &buckets {
        for &f in b {
            if b.iter()
                .any(|&g| g != f && cmp.compare(f, g) == Ordering::Equal)
            {
                in_groups += 1
            } else {
                alone += 1
            }
        }
    }
    println!(
        "{} buckets, sizes {:?}; equal-modulo-callees: {in_groups}, alone: {alone}",
        buckets.len(),
        buckets.iter().map(|b| b.len()).collect::<Vec<_>>()
    );
}
