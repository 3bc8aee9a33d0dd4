//! Progress bars for long loads and builds, drawn only on a terminal.
//!
//! A bar is created hidden unless stderr is a terminal *and* the work is large, so
//! tests, CI logs and pipes never receive escape sequences or partial lines.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Below this many bytes a load finishes too fast for a bar to be worth drawing.
pub(crate) const PROGRESS_BYTES_MIN: u64 = 64 << 20;
/// Below this many edges a generation or build finishes too fast for a bar.
pub(crate) const PROGRESS_EDGES_MIN: u64 = 1 << 22;

/// What a bar counts.
#[derive(Clone, Copy)]
pub(crate) enum Unit {
    Bytes,
    Edges,
}

/// A bar of `len` units labelled `message`, hidden when stderr is not a terminal or
/// the work is below the unit's threshold.
pub(crate) fn bar(len: u64, unit: Unit, message: &'static str) -> ProgressBar {
    let min = match unit {
        Unit::Bytes => PROGRESS_BYTES_MIN,
        Unit::Edges => PROGRESS_EDGES_MIN,
    };
    if len < min || !std::io::stderr().is_terminal() {
        return ProgressBar::hidden();
    }
    let template = match unit {
        Unit::Bytes => "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, eta {eta})",
        Unit::Edges => "{msg} [{bar:40}] {human_pos}/{human_len} edges (eta {eta})",
    };
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let pb = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    pb.set_style(style);
    pb.set_message(message);
    pb
}
