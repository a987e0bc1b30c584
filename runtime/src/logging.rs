//! tracing setup: human-readable by default, JSON with `--log-format json`; `RUST_LOG`
//! overrides the default `info` level.

use tracing_subscriber::EnvFilter;

use crate::args::LogFormat;

pub fn init(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    // try_init: tests may start several services in one process.
    let _ = match format {
        LogFormat::Plain => builder.try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    };
}
