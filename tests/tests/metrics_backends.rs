//! The [`MetricsBackend`] trait's own promises, one test body run on both backends: rules
//! evaluate and their series can be queried, `reload_rules` swaps the rules of a running
//! store, `stop` really stops it, and `restart` brings it back on the same URL with the data
//! it had (what the Prometheus crash tests of `collector_prometheus` and `recording_rules`
//! rely on).

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{Context, Result, ensure};
use waterline_tests::backend::{BackendConfig, MetricsBackend};
use waterline_tests::prometheus::{Prometheus, wait_until};
use waterline_tests::victoria::VictoriaMetrics;

/// A rule file recording `record` as the constant `value`.
fn rule_file(dir: &std::path::Path, record: &str, value: u32) -> Result<PathBuf> {
    let path = dir.join(format!("{}.yml", record.replace(':', "_")));
    std::fs::write(
        &path,
        format!(
            "groups:\n  - name: {record}\n    interval: 1m\n    rules:\n      - record: {record}\n        expr: vector({value})\n"
        ),
    )?;
    Ok(path)
}

/// The value of the one series `promql` answers with, `None` when it answers none.
async fn value<B: MetricsBackend>(store: &B, promql: &str) -> Result<Option<f64>> {
    let rows = store.query(promql).await?;
    ensure!(rows.len() <= 1, "{promql}: {rows:?}");
    Ok(rows.first().map(|(_, v)| *v))
}

async fn wait_value<B: MetricsBackend>(store: &B, promql: &str, want: f64) -> Result<()> {
    wait_until(Duration::from_secs(30), || async {
        let got = value(store, promql).await?;
        ensure!(got == Some(want), "{promql}: {got:?}, want {want}");
        Ok(())
    })
    .await
    .with_context(|| format!("{}:\n{}", B::NAME, store.log_tail(3000)))
}

async fn rules_reload_stop_and_restart<B: MetricsBackend>() -> Result<()> {
    let dir = tempfile::tempdir()?;
    let a = rule_file(dir.path(), "waterline_test:a", 1)?;
    let b = rule_file(dir.path(), "waterline_test:b", 2)?;
    // The files' `interval: 1m` is rewritten to the default 1 s, or nothing would show
    // within the test.
    let mut store = B::start(BackendConfig::new("").rule_file(&a)).await?;
    wait_value(&store, "waterline_test:a", 1.0).await?;
    ensure!(value(&store, "waterline_test:b").await?.is_none(), "{}: b before the reload", B::NAME);

    store.reload_rules(std::slice::from_ref(&b)).await?;
    wait_value(&store, "waterline_test:b", 2.0).await?;

    // Samples of b so far, 10 minutes back: what a restart must keep. At least 5, and 10 s
    // old at the kill: Prometheus writes its WAL at once, but VictoriaMetrics 1.79 loses
    // what it took in the last seconds before a SIGKILL (measured by hand: samples imported,
    // force-flushed and queryable were gone after a kill 2 s later, kept after 6 s and 15 s).
    let count = "count_over_time(waterline_test:b[10m])";
    let before = wait_until(Duration::from_secs(30), || async {
        let n = value(&store, count).await?.unwrap_or(0.0);
        ensure!(n >= 5.0, "{n} samples of b");
        Ok(n)
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(10)).await;
    let url = store.url();
    store.stop()?;
    ensure!(!store.is_running(), "{} runs after stop", B::NAME);
    ensure!(store.query("waterline_test:b").await.is_err(), "{} answers after stop", B::NAME);

    store.restart().await?;
    ensure!(store.is_running() && store.url() == url, "{}: restarted at {}", B::NAME, store.url());
    // At once: the samples from before the kill are there (whatever the rules added since
    // only adds to them).
    let after = value(&store, count).await?.unwrap_or(0.0);
    ensure!(
        after >= before,
        "{} after the restart: {after} samples of b, {before} before",
        B::NAME
    );
    // And the reloaded rules evaluate again.
    wait_value(&store, "waterline_test:b", 2.0).await?;
    eprintln!("{}: {before} samples of b before the restart, {after} right after", B::NAME);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prometheus_reloads_rules_stops_and_restarts_with_its_data() -> Result<()> {
    rules_reload_stop_and_restart::<Prometheus>().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn victoria_metrics_reloads_rules_stops_and_restarts_with_its_data() -> Result<()> {
    rules_reload_stop_and_restart::<VictoriaMetrics>().await
}
