//! Human-format logs carry ANSI colour only on a terminal: a collector whose stderr is a
//! file (the harness's log file, as under systemd, `kubectl logs` or `2>file`) writes plain
//! text. JSON logs name the span of the task that logged a line, with its fields.
//!
//! Build the binaries first: `cargo build --bins` (they are looked up beside this test
//! executable).

use std::time::Duration;

use anyhow::{Result, bail, ensure};
use waterline_tests::procs::Service;
use waterline_tests::prometheus::wait_until;

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

/// The JSON log lines whose message is `message`, parsed.
fn lines_saying(log: &str, message: &str) -> Vec<serde_json::Value> {
    log.lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|l| l["message"] == message)
        .collect()
}

/// The fields of the span named `name` that `line` was logged in (`spans`, outermost first).
fn span<'a>(line: &'a serde_json::Value, name: &str) -> Option<&'a serde_json::Value> {
    line["spans"].as_array()?.iter().find(|s| s["name"] == name)
}

/// A long-lived task logs inside a span of its own, with the fields an operator filters on:
/// in JSON the admin server's line names its address, the scorer's stream from the collector
/// names the collector, and the collector's WatchNodes feed names its subscriber.
#[tokio::test]
async fn long_lived_tasks_log_inside_their_own_spans() -> Result<()> {
    let json = ["--log-format".to_string(), "json".into()];
    // Usage moves every 200 ms, so the feed soon has a delta to send (and, once the scorer
    // is gone, finds out that nobody reads it).
    let synthetic = ["--synthetic-nodes", "1", "--synthetic-interval", "200ms"].map(String::from);
    let collector = Service::collector(&[&synthetic[..], &json].concat()).await?;
    let mut scorer = Service::scorer(collector.grpc, &json).await?;

    let log = collector.log_text();
    let listening = lines_saying(&log, "admin listening (http)");
    ensure!(listening.len() == 1, "one admin listening line in the collector's log:\n{log}");
    let admin = span(&listening[0], "admin").map(|s| s["addr"].clone());
    ensure!(admin == Some(collector.admin.to_string().into()), "admin span: {}", listening[0]);

    let log = scorer.log_text();
    let streaming = lines_saying(&log, "streaming from the collector");
    ensure!(!streaming.is_empty(), "the scorer never said it streams:\n{log}");
    let stream = span(&streaming[0], "collector_stream").map(|s| s["collectors"].clone());
    ensure!(stream == Some(collector.url().into()), "collector_stream span: {}", streaming[0]);

    scorer.stop();
    let left = wait_until(Duration::from_secs(20), || async {
        let log = collector.log_text();
        match lines_saying(&log, "subscriber left").pop() {
            Some(line) => Ok(line),
            None => bail!("the collector has not noticed the scorer left:\n{log}"),
        }
    })
    .await?;
    let subscriber = span(&left, "watch_nodes").and_then(|s| s["subscriber"].as_str());
    ensure!(
        subscriber.is_some_and(|s| s.starts_with("scorer ")),
        "watch_nodes span with the scorer's name: {left}"
    );
    Ok(())
}
