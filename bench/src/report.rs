//! Printing results for people (stdout) and for scripts (one JSON object per line).

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde_json::{Value, json};

use crate::load::Outcome;

const QUANTILES: [(&str, f64); 4] = [("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("p99.9", 0.999)];

fn ms(nanos: u64) -> f64 {
    nanos as f64 / 1e6
}

pub fn p50_ms(outcome: &Outcome) -> f64 {
    ms(outcome.hist.value_at_quantile(0.5))
}

/// The result of a load run as JSON (latencies in milliseconds).
pub fn outcome_json(outcome: &Outcome) -> Value {
    let mut latency = serde_json::Map::new();
    for (name, q) in QUANTILES {
        latency.insert(name.into(), json!(ms(outcome.hist.value_at_quantile(q))));
    }
    latency.insert("max".into(), json!(ms(outcome.hist.max())));
    latency.insert("mean".into(), json!(outcome.hist.mean() / 1e6));
    json!({
        "ok": outcome.ok,
        "errors": outcome.errors,
        "error_kinds": outcome.error_kinds,
        "seconds": outcome.elapsed.as_secs_f64(),
        "throughput_per_s": outcome.throughput(),
        "latency_ms": latency,
    })
}

pub fn print_outcome(title: &str, outcome: &Outcome) {
    println!("{title}");
    println!(
        "  requests  {} ok, {} errors in {:.2} s  →  {:.0} req/s",
        outcome.ok,
        outcome.errors,
        outcome.elapsed.as_secs_f64(),
        outcome.throughput()
    );
    if outcome.ok > 0 {
        let parts: Vec<String> = QUANTILES
            .iter()
            .map(|(name, q)| format!("{name} {:.3}", ms(outcome.hist.value_at_quantile(*q))))
            .collect();
        println!(
            "  latency   {}  max {:.3}  mean {:.3}  (ms)",
            parts.join("  "),
            ms(outcome.hist.max()),
            outcome.hist.mean() / 1e6
        );
    }
    for (kind, n) in &outcome.error_kinds {
        println!("  error     {kind}: {n}");
    }
}

/// One method's request-duration histogram, scraped from a server's `/metrics`
/// (prometheus-client text): cumulative bucket counts by upper bound, and the sum.
#[derive(Default)]
pub struct Buckets {
    /// Upper bound in nanoseconds (so the map sorts by it) → (bound in seconds, count).
    counts: BTreeMap<u64, (f64, u64)>,
    /// Seconds spent in all requests so far (`_sum`).
    sum: f64,
}

pub async fn scrape_buckets(
    admin_url: &str,
    metric: &str,
    method: &str,
) -> anyhow::Result<Buckets> {
    let text = reqwest::get(format!("{admin_url}/metrics")).await?.text().await?;
    Ok(parse_buckets(&text, metric, method))
}

fn parse_buckets(text: &str, metric: &str, method: &str) -> Buckets {
    let bucket_prefix = format!("{metric}_bucket{{");
    let sum_prefix = format!("{metric}_sum{{");
    let method_label = format!("method=\"{method}\"");
    let value = |line: &str| line.rsplit(' ').next().and_then(|c| c.parse::<f64>().ok());
    let mut buckets = Buckets::default();
    for line in text.lines().filter(|l| l.contains(&method_label)) {
        if line.starts_with(&sum_prefix) {
            // One series per outcome label: the sum over them.
            buckets.sum += value(line).unwrap_or(0.0);
            continue;
        }
        if !line.starts_with(&bucket_prefix) {
            continue;
        }
        let Some(le) = line.split("le=\"").nth(1).and_then(|r| r.split('"').next()) else {
            continue;
        };
        let Some(count) = value(line) else {
            continue;
        };
        let bound = if le == "+Inf" { f64::INFINITY } else { le.parse().unwrap_or(f64::INFINITY) };
        let key = if bound.is_finite() { (bound * 1e9) as u64 } else { u64::MAX };
        buckets.counts.entry(key).or_insert((bound, 0)).1 += count as u64;
    }
    buckets
}

/// Server-side view of a run from the difference of two scrapes: requests, their mean, the
/// share answered within 1 ms, and the bucket bounds holding p50 and p99.
pub fn server_summary(before: &Buckets, after: &Buckets) -> Option<Value> {
    let delta: Vec<(f64, u64)> = after
        .counts
        .iter()
        .map(|(k, (bound, n))| {
            (*bound, n.saturating_sub(before.counts.get(k).map(|b| b.1).unwrap_or(0)))
        })
        .collect();
    let total = delta.last()?.1;
    if total == 0 {
        return None;
    }
    let bound_at = |q: f64| {
        let rank = (q * total as f64).ceil() as u64;
        delta.iter().find(|(_, n)| *n >= rank).map(|(b, _)| *b * 1e3)
    };
    let within_1ms =
        delta.iter().filter(|(b, _)| *b <= 0.001).map(|(_, n)| *n).next_back().unwrap_or(0);
    Some(json!({
        "requests": total,
        "mean_ms": (after.sum - before.sum) * 1e3 / total as f64,
        "share_within_0_977ms": within_1ms as f64 / total as f64,
        "p50_at_most_ms": bound_at(0.5),
        "p99_at_most_ms": bound_at(0.99),
    }))
}

pub fn print_server(summary: &Value) {
    let share = summary["share_within_0_977ms"].as_f64().unwrap_or(0.0);
    let p50 = summary["p50_at_most_ms"].as_f64().unwrap_or(f64::NAN);
    let p99 = summary["p99_at_most_ms"].as_f64().unwrap_or(f64::NAN);
    let mean = summary["mean_ms"].as_f64().unwrap_or(f64::NAN);
    println!(
        "  in scorer {} requests; mean {mean:.3} ms, p50 ≤ {p50:.3} ms, p99 ≤ {p99:.3} ms \
         (histogram bucket bounds); {:.2} % within 0.977 ms",
        summary["requests"],
        share * 100.0
    );
}

pub fn append_json(path: Option<&Path>, value: &Value) -> anyhow::Result<()> {
    if let Some(path) = path {
        let mut file = std::fs::OpenOptions::new().create(true).append(true).open(path)?;
        writeln!(file, "{value}")?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_scrape_sums_the_outcome_series_of_one_method() {
        let m = "waterline_scorer_grpc_request_duration_seconds";
        let text = format!(
            "{m}_bucket{{method=\"Session.Evaluate\",code=\"OK\",le=\"0.001\"}} 3\n\
             {m}_bucket{{method=\"Session.Evaluate\",code=\"OK\",le=\"+Inf\"}} 4\n\
             {m}_bucket{{method=\"Session.Evaluate\",code=\"INVALID_ARGUMENT\",le=\"0.001\"}} 1\n\
             {m}_bucket{{method=\"Session.Evaluate\",code=\"INVALID_ARGUMENT\",le=\"+Inf\"}} 1\n\
             {m}_sum{{method=\"Session.Evaluate\",code=\"OK\"}} 0.008\n\
             {m}_sum{{method=\"Session.Evaluate\",code=\"INVALID_ARGUMENT\"}} 0.0005\n\
             {m}_bucket{{method=\"Evaluate\",code=\"OK\",le=\"+Inf\"}} 9\n\
             {m}_sum{{method=\"Evaluate\",code=\"OK\"}} 1.0\n"
        );
        let before = Buckets::default();
        let after = parse_buckets(&text, m, "Session.Evaluate");
        let summary = server_summary(&before, &after).expect("requests seen");
        // 4 OK + 1 INVALID_ARGUMENT; Evaluate's series are another method.
        assert_eq!(summary["requests"], 5);
        // (0.008 + 0.0005) s over 5 requests = 1.7 ms.
        assert!((summary["mean_ms"].as_f64().unwrap() - 1.7).abs() < 1e-9, "{summary}");
        // 3 + 1 of the 5 within 1 ms.
        assert_eq!(summary["share_within_0_977ms"], 0.8);
    }
}
