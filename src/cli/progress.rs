//! Progress bars for long operations (import, export): drawn on stderr when it is a
//! terminal, hidden (no output at all) when stderr is piped or redirected.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A progress bar of `total` steps labelled `what` (e.g. `chunks`); hidden unless
/// stderr is a terminal.
pub(super) fn bar(total: u64, what: &str) -> ProgressBar {
    let target = if std::io::stderr().is_terminal() {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    };
    let pb = ProgressBar::with_draw_target(Some(total), target);
    let template = format!(
        "{{spinner}} [{{elapsed_precise}}] [{{wide_bar}}] {{pos}}/{{len}} {what} ({{eta}})"
    );
    if let Ok(style) = ProgressStyle::with_template(&template) {
        pb.set_style(style.progress_chars("=> "));
    }
    pb
}

/// A progress callback for [`floe::ops`] operations that moves `bar`: called with
/// (items done, items in all).
pub(super) fn follow(bar: &ProgressBar) -> impl Fn(u64, u64) + Sync + '_ {
    move |done, total| {
        bar.set_length(total);
        bar.set_position(done);
    }
}
