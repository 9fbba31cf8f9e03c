//! What a validation concluded, as one comparable text: for tests that check the
//! verdicts do not depend on how the validation ran (its threads).

use clif_merge::validate::ValidationReport;

/// What `report` concluded, pair by pair: validated (and on how many inputs, over
/// all pairs), unvalidated with the reason, or a mismatch with its input; not what
/// it cost.
pub fn verdicts(report: &ValidationReport) -> String {
    let mismatches: Vec<_> = report
        .mismatches
        .iter()
        .map(|m| (m.function, m.input.clone()))
        .collect();
    format!(
        "{} validated by {} runs; unvalidated {:?}; mismatches {mismatches:?}",
        report.validated, report.runs, report.unvalidated
    )
}
