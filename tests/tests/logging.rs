//! Human-format logs carry ANSI colour only on a terminal: a collector whose stderr is a
//! file (the harness's log file, as under systemd, `kubectl logs` or `2>file`) writes plain
//! text.
//!
//! Build the binary first: `cargo build -p waterline-collector --bins` (it is looked up
//! beside this test executable).

use anyhow::{Result, ensure};
use waterline_tests::procs::Service;

#[tokio::test]
async fn plain_logs_to_a_file_have_no_colour_codes() -> Result<()> {
    let collector = Service::collector(&["--synthetic-nodes".into(), "1".into()]).await?;
    let log = collector.log_text();
    ensure!(
        log.lines().any(|l| l.contains("INFO")),
        "the collector logged nothing at info:\n{log}"
    );
    ensure!(!log.contains("\x1b["), "ANSI escape codes in a log written to a file:\n{log:?}");
    Ok(())
}
