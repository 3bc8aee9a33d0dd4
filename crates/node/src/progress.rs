//! [`Reporter`]: where an experiment says how far it got. Progress bars go to
//! stderr only when it is a terminal; one-line notes go to stderr unless quiet.
//! Results themselves are returned to the caller, never printed here.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How an experiment reports progress.
#[derive(Debug, Clone, Copy)]
pub struct Reporter {
    bars: bool,
    notes: bool,
}

impl Reporter {
    /// Bars on a terminal, notes on stderr.
    pub fn terminal() -> Reporter {
        Reporter {
            bars: std::io::stderr().is_terminal(),
            notes: true,
        }
    }

    /// Nothing at all (tests, machine-readable runs).
    pub fn quiet() -> Reporter {
        Reporter {
            bars: false,
            notes: false,
        }
    }

    /// A progress bar of `len` steps labelled `what` (hidden off a terminal).
    pub fn bar(&self, len: u64, what: &str) -> ProgressBar {
        if !self.bars {
            return ProgressBar::hidden();
        }
        let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
        let style = ProgressStyle::with_template(
            "{msg:>24} [{bar:40}] {human_pos}/{human_len} (eta {eta})",
        )
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
        pb.set_style(style);
        pb.set_message(what.to_string());
        pb
    }

    /// A one-line note ("generating R-MAT scale 16 ...").
    pub fn note(&self, line: impl std::fmt::Display) {
        if self.notes {
            eprintln!("{line}");
        }
    }
}
