//! tracing setup: human-readable by default, JSON with `--log-format json`; `RUST_LOG`
//! overrides the default `info` level. Colour only when stderr is a terminal and `NO_COLOR`
//! is unset or empty (<https://no-color.org>): escape codes in a file, a pipe or
//! `kubectl logs` are noise.

use std::ffi::OsStr;
use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::args::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let colour =
        use_colour(std::io::stderr().is_terminal(), std::env::var_os("NO_COLOR").as_deref());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colour);
    // try_init: tests may start several services in one process.
    let _ = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}

/// Whether log lines carry ANSI colour: only on a terminal, and never when `NO_COLOR` is set
/// to a non-empty value (an empty one counts as unset, as no-color.org asks).
fn use_colour(is_terminal: bool, no_color: Option<&OsStr>) -> bool {
    is_terminal && no_color.is_none_or(OsStr::is_empty)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal() {
        assert!(use_colour(true, None));
        assert!(!use_colour(false, None), "a file or a pipe gets no escape codes");
    }

    #[test]
    fn no_color_set_and_non_empty_turns_colour_off() {
        assert!(!use_colour(true, Some(OsStr::new("1"))));
        assert!(!use_colour(true, Some(OsStr::new("false"))), "any non-empty value counts");
        assert!(use_colour(true, Some(OsStr::new(""))), "empty counts as unset");
        assert!(!use_colour(false, Some(OsStr::new(""))));
    }
}
