//! What the tool shows on stderr while it works: the phase it is in, with a bar
//! where the phase counts its steps (files read, pairs validated). Drawn with
//! `indicatif` only when stderr is a terminal and the caller asked for it
//! ([`ProgressDisplay::OnTerminal`]); otherwise nothing at all is written. The bar
//! is cleared before the run's output is printed, so it never changes stdout, the
//! stderr text or the exit status.

use crate::validate::Progress;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::fmt;
use std::io::IsTerminal;
use std::time::Duration;

/// Whether a run shows its progress.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ProgressDisplay {
    /// Never: what a program that embeds the command line gets.
    Hidden,
    /// On stderr when stderr is a terminal (the `clif-merge` binary).
    OnTerminal,
}

/// A step of a command that may take long enough to be shown.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Parsing and verifying the input files (counted per file).
    Reading,
    /// The identical-function merge.
    Merging,
    /// The similar-function merge.
    MergingSimilar,
    /// Verifying the merged module.
    Verifying,
    /// Translation validation of the identical merge (counted per pair).
    Validating,
    /// Translation validation of the similar merge (counted per member).
    ValidatingSimilar,
    /// Writing the merged module as text.
    Printing,
    /// `summarize`: the module's merge and its summary.
    Summarizing,
    /// `plan`: reading the summaries (counted per summary).
    ReadingSummaries,
    /// `plan`: planning the whole program.
    Planning,
    /// `apply`: applying a module's decisions.
    Applying,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reading => "reading inputs",
            Self::Merging => "merging identical functions",
            Self::MergingSimilar => "merging similar functions",
            Self::Verifying => "verifying the merged functions",
            Self::Validating => "validating merges",
            Self::ValidatingSimilar => "validating similar merges",
            Self::Printing => "printing",
            Self::Summarizing => "summarizing",
            Self::ReadingSummaries => "reading summaries",
            Self::Planning => "planning the program",
            Self::Applying => "applying decisions",
        })
    }
}

/// How often the spinner turns while a step runs without counting (a long file, a
/// slow pair), so that the run is seen to be alive.
const TICK: Duration = Duration::from_millis(100);

/// The spinner of a phase without a count.
const SPINNER_TEMPLATE: &str = "{spinner} {msg} ({elapsed})";

/// The bar of a phase that counts its steps (as wide as the terminal leaves room
/// for, so that the line never wraps).
const BAR_TEMPLATE: &str = "{spinner} {msg} [{wide_bar}] {pos}/{len} ({elapsed}, {eta} left)";

/// `template` as a style; a template that does not parse (checked by a test) falls
/// back to indicatif's default rather than failing the run.
fn style(template: &str) -> ProgressStyle {
    ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .progress_chars("=> ")
}

/// The progress of one run: a bar on stderr, or nothing.
pub(crate) struct Meter {
    /// The bar, when it is shown.
    bar: Option<ProgressBar>,
}

impl Meter {
    /// A meter for `display`: shown only on a terminal.
    pub(crate) fn new(display: ProgressDisplay) -> Self {
        let shown = display == ProgressDisplay::OnTerminal && std::io::stderr().is_terminal();
        Self {
            bar: shown.then(|| {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
                bar.set_style(style(SPINNER_TEMPLATE));
                bar.enable_steady_tick(TICK);
                bar
            }),
        }
    }

    /// A meter that shows nothing.
    pub(crate) fn hidden() -> Self {
        Self { bar: None }
    }

    /// `phase` starts, its length unknown: a spinner with its name.
    pub(crate) fn phase(&self, phase: Phase) {
        if let Some(bar) = &self.bar {
            // The style first, so that the last phase's bar is not drawn again.
            bar.set_style(style(SPINNER_TEMPLATE));
            bar.set_message(phase.to_string());
            bar.unset_length();
            bar.reset();
        }
    }

    /// `phase` starts, with `total` steps: a bar.
    pub(crate) fn counted(&self, phase: Phase, total: usize) {
        self.phase(phase);
        self.start(total);
    }

    /// Takes the bar off the terminal (before the run's output is printed).
    pub(crate) fn clear(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Progress for Meter {
    fn start(&self, total: usize) {
        if let Some(bar) = &self.bar {
            bar.set_length(total as u64);
            bar.reset();
            bar.set_style(style(BAR_TEMPLATE));
        }
    }

    fn step(&self) {
        if let Some(bar) = &self.bar {
            bar.inc(1);
        }
    }
}

impl Drop for Meter {
    /// A run that ends early (an error, a panic) leaves no bar behind either.
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_templates_parse() {
        for template in [SPINNER_TEMPLATE, BAR_TEMPLATE] {
            assert!(ProgressStyle::with_template(template).is_ok(), "{template}");
        }
    }

    #[test]
    fn a_hidden_meter_has_no_bar() {
        let meter = Meter::new(ProgressDisplay::Hidden);
        assert!(meter.bar.is_none());
        meter.counted(Phase::Validating, 3);
        meter.step();
        meter.clear();
    }
}
