//! The progress bar of `milpa audit verify`: drawn on standard error when it is a terminal
//! (a long trail takes a while to hash), absent otherwise, so piped or logged output is
//! only the verdict.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How a chain check's progress is shown: a bar on a terminal, nothing elsewhere.
pub(crate) struct VerifyProgress {
    bar: Option<ProgressBar>,
}

impl VerifyProgress {
    /// A bar on standard error when it is a terminal; silence otherwise.
    pub(crate) fn on_terminal() -> VerifyProgress {
        Self::new(std::io::stderr().is_terminal())
    }

    fn new(terminal: bool) -> VerifyProgress {
        let bar = terminal.then(|| {
            let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(
                    "checking the audit chain {wide_bar} {pos}/{len} records ({eta} left)",
                )
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar
        });
        VerifyProgress { bar }
    }

    /// `checked` records of `total` are checked.
    pub(crate) fn show(&self, checked: u64, total: u64) {
        if let Some(bar) = &self.bar {
            bar.set_length(total);
            bar.set_position(checked);
        }
    }

    /// The check is over: the bar is drawn one last time where it got to, and left there
    /// above the verdict.
    pub(crate) fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn off_a_terminal_there_is_no_bar() {
        let quiet = VerifyProgress::new(false);
        quiet.show(3, 10);
        quiet.finish();
        assert!(quiet.bar.is_none());
    }

    #[test]
    fn on_a_terminal_the_bar_follows_the_check() {
        let progress = VerifyProgress::new(true);
        progress.show(0, 40);
        progress.show(25, 40);
        let bar = progress.bar.as_ref().unwrap();
        assert_eq!((bar.position(), bar.length()), (25, Some(40)));
        progress.finish();
        assert!(bar.is_finished());
    }
}
