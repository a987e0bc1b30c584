//! The bounded load loop: `concurrency` workers call the target until the deadline or the
//! request budget is reached, each recording OK latencies in its own HDR histogram (merged
//! at the end, so workers never contend on one), and counting failures by kind.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use tokio::time::Instant;

use crate::args::LoadArgs;

/// What one measured phase gave.
pub struct Outcome {
    /// Latency of OK requests, nanoseconds.
    pub hist: Histogram<u64>,
    pub ok: u64,
    pub errors: u64,
    /// Failure kind (gRPC code, HTTP status, "timeout", …) → count.
    pub error_kinds: BTreeMap<String, u64>,
    pub elapsed: Duration,
}

impl Outcome {
    fn empty() -> Self {
        Outcome {
            hist: new_histogram(),
            ok: 0,
            errors: 0,
            error_kinds: BTreeMap::new(),
            elapsed: Duration::ZERO,
        }
    }

    fn merge(&mut self, other: Outcome) {
        self.hist.add(&other.hist).expect("same bounds");
        self.ok += other.ok;
        self.errors += other.errors;
        for (kind, n) in other.error_kinds {
            *self.error_kinds.entry(kind).or_default() += n;
        }
    }

    pub fn throughput(&self) -> f64 {
        self.ok as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// 1 ns .. 60 s at 3 significant digits.
fn new_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

/// Warms up for `load.warmup` (nothing recorded), then measures until `load.duration` has
/// passed or `load.requests` requests were started. `call(i)` performs request `i`.
pub async fn drive<F, Fut>(load: &LoadArgs, title: &str, progress: bool, call: F) -> Outcome
where
    F: Fn(u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    if !load.warmup.is_zero() {
        let warm = LoadArgs { requests: None, duration: load.warmup, ..load.clone() };
        phase(&warm, call.clone(), None).await;
    }
    let bar = progress.then(|| progress_bar(load, title));
    let outcome = phase(load, call, bar.clone()).await;
    if let Some(bar) = bar {
        bar.finish_and_clear();
    }
    outcome
}

fn progress_bar(load: &LoadArgs, title: &str) -> ProgressBar {
    let (len, template) = match load.requests {
        Some(n) => (n, "{prefix} [{bar:30}] {pos}/{len} {msg}"),
        None => {
            (load.duration.as_millis() as u64, "{prefix} [{bar:30}] {elapsed}/{duration} {msg}")
        }
    };
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr_with_hz(5));
    bar.set_style(
        ProgressStyle::with_template(template).expect("valid template").progress_chars("=> "),
    );
    bar.set_prefix(title.to_owned());
    bar
}

async fn phase<F, Fut>(load: &LoadArgs, call: F, bar: Option<ProgressBar>) -> Outcome
where
    F: Fn(u64) -> Fut + Clone + Send + Sync + 'static,
    Fut: Future<Output = Result<(), String>> + Send + 'static,
{
    let started = Instant::now();
    let deadline = started + load.duration;
    let issued = Arc::new(AtomicU64::new(0));
    let done = Arc::new(AtomicU64::new(0));
    let limit = load.requests.unwrap_or(u64::MAX);

    let ticker = bar.map(|bar| {
        let done = done.clone();
        let by_count = load.requests.is_some();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(200));
            loop {
                tick.tick().await;
                let n = done.load(Ordering::Relaxed);
                let secs = started.elapsed().as_secs_f64();
                bar.set_position(if by_count { n } else { (secs * 1000.0) as u64 });
                bar.set_message(format!("{n} requests, {:.0}/s", n as f64 / secs.max(1e-3)));
            }
        })
    });

    let workers: Vec<_> = (0..load.concurrency.max(1))
        .map(|_| {
            let (call, issued, done, timeout) =
                (call.clone(), issued.clone(), done.clone(), load.timeout);
            tokio::spawn(async move {
                let mut out = Outcome::empty();
                loop {
                    if Instant::now() >= deadline {
                        break;
                    }
                    let i = issued.fetch_add(1, Ordering::Relaxed);
                    if i >= limit {
                        break;
                    }
                    let t0 = Instant::now();
                    let result = tokio::time::timeout(timeout, call(i)).await;
                    let nanos = t0.elapsed().as_nanos() as u64;
                    match result {
                        Ok(Ok(())) => {
                            out.hist.saturating_record(nanos.max(1));
                            out.ok += 1;
                        }
                        Ok(Err(kind)) => {
                            out.errors += 1;
                            *out.error_kinds.entry(kind).or_default() += 1;
                        }
                        Err(_) => {
                            out.errors += 1;
                            *out.error_kinds.entry("timeout".into()).or_default() += 1;
                        }
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                }
                out
            })
        })
        .collect();

    let mut total = Outcome::empty();
    for worker in workers {
        match worker.await {
            Ok(out) => total.merge(out),
            Err(error) => {
                total.errors += 1;
                *total.error_kinds.entry(format!("worker panicked: {error}")).or_default() += 1;
            }
        }
    }
    total.elapsed = started.elapsed();
    if let Some(ticker) = ticker {
        ticker.abort();
    }
    total
}
