//! Progress on stderr, only for a person at a terminal: hidden when stderr is not a
//! terminal, with `--quiet`, with JSON output, and with `-v` (logs would interleave).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar that may be invisible; callers use it the same way either way.
#[derive(Clone)]
pub(crate) struct Progress {
    bar: ProgressBar,
}

impl Progress {
    pub(crate) fn new(visible: bool) -> Progress {
        let bar = ProgressBar::with_draw_target(
            None,
            if visible && std::io::stderr().is_terminal() {
                ProgressDrawTarget::stderr()
            } else {
                ProgressDrawTarget::hidden()
            },
        );
        bar.set_style(
            ProgressStyle::with_template("{spinner} {prefix:>9} [{bar:30}] {pos}/{len} {msg}")
                .expect("valid template")
                .progress_chars("=> "),
        );
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress { bar }
    }

    /// Starts a new stage, e.g. "starting" 50 servers.
    pub(crate) fn stage(&self, name: &str, total: usize) {
        self.bar.set_prefix(name.to_owned());
        self.bar.set_length(total as u64);
        self.bar.set_position(0);
        self.bar.set_message("");
    }

    /// One more item of the stage is done.
    pub(crate) fn done_one(&self, what: &str) {
        self.bar.set_message(what.to_owned());
        self.bar.inc(1);
    }

    pub(crate) fn finish(&self) {
        self.bar.finish_and_clear();
    }

    /// Prints a line above the bar (or plainly when the bar is hidden).
    pub(crate) fn note(&self, line: &str) {
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }
}
