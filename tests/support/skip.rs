//! The one way a test may skip: loudly, and never under CI (`CI` set), where a
//! missing input is a failure (`#[path]`-included by the tests that need it).

/// Reports that `test` cannot run because `what` is missing: a panic under CI, a
/// banner on stderr otherwise.
pub fn skip_or_fail(test: &str, what: &str) {
    if std::env::var_os("CI").is_some() {
        panic!("{test}: {what} (CI is set: a test that cannot run is a failure)");
    }
    eprintln!();
    eprintln!("==================================================================");
    eprintln!("  {test}: SKIPPED: {what}");
    eprintln!("  (under CI, with CI set, this is a failure)");
    eprintln!("==================================================================");
    eprintln!();
}
