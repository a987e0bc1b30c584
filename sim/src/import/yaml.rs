//! The scenario file an import writes: the explicit-list format of sim/README.md, with the
//! source and every gap in the header's comments. Strings are written as JSON strings (valid
//! YAML), series without the inner points of flat runs.

use std::fmt::Write;

use super::{Imported, ImportedPod};
use crate::plot::drop_flat;

/// Whole seconds as a scenario duration (`-90s`, `0s`, `3600s`).
fn secs(t: f64) -> String {
    format!("{}s", t.round() as i64)
}

fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

fn points(series: &[(f64, f64)], value: impl Fn(f64) -> String) -> String {
    let rounded: Vec<(f64, f64)> = series.iter().map(|&(t, v)| (t.round(), v)).collect();
    let items: Vec<String> =
        drop_flat(rounded).iter().map(|&(t, v)| format!("[{}, {}]", secs(t), value(v))).collect();
    format!("[{}]", items.join(", "))
}

fn millis(cores: f64) -> String {
    format!("{}m", (cores * 1000.0).round() as i64)
}

fn bytes(b: f64) -> String {
    format!("{}", b.round() as i64)
}

fn pct(p: f64) -> String {
    format!("{}", (p * 100.0).round() / 100.0)
}

fn pod_yaml(out: &mut String, p: &ImportedPod, warmup_s: f64) {
    let _ = writeln!(out, "  - name: {}", quoted(&p.name));
    let _ = writeln!(out, "    namespace: {}", quoted(&p.namespace));
    let _ = writeln!(out, "    arrival: {}", secs(p.created));
    if let Some(d) = p.deleted {
        let _ = writeln!(out, "    deletion: {}", secs(d));
    }
    match (&p.node, p.pre_bound) {
        (Some(node), true) => {
            let _ = writeln!(out, "    node: {}", quoted(node));
        }
        (Some(node), false) => {
            let _ = writeln!(out, "    # ran on {} (the strategy places it)", quoted(node));
        }
        (None, _) => {}
    }
    if p.cpu_request_cores > 0.0 {
        let _ = writeln!(out, "    cpu: {}", millis(p.cpu_request_cores));
    }
    if p.memory_request_bytes > 0.0 {
        let _ = writeln!(out, "    memory: {}", bytes(p.memory_request_bytes));
    }
    let limits: Vec<String> = [
        p.cpu_limit_cores.map(|c| format!("cpu: {}", millis(c))),
        p.memory_limit_bytes.map(|b| format!("memory: {}", bytes(b))),
    ]
    .into_iter()
    .flatten()
    .collect();
    if !limits.is_empty() {
        let _ = writeln!(out, "    limits: {{{}}}", limits.join(", "));
    }
    if let Some(kind) = &p.owner_kind {
        let _ = writeln!(out, "    ownerKind: {}", quoted(kind));
    }
    // Series are since the pod's start: the simulator starts a pod bound before the run at
    // the warm-up's start at the earliest.
    let start = if p.pre_bound { p.created.max(-warmup_s) } else { p.created };
    let since = |s: &[(f64, f64)]| -> Vec<(f64, f64)> {
        s.iter().map(|&(t, v)| (t - start, v)).filter(|&(t, _)| t >= 0.0).collect()
    };
    let mut series = Vec::new();
    if let Some(cpu) = p.cpu_usage.as_deref().map(since).filter(|s| !s.is_empty()) {
        series.push(format!("cpu: {}", points(&cpu, millis)));
    }
    if let Some(memory) = p.memory_usage.as_deref().map(since).filter(|s| !s.is_empty()) {
        series.push(format!("memory: {}", points(&memory, bytes)));
    }
    let series = if series.is_empty() {
        String::new()
    } else {
        format!(", series: {{{}}}", series.join(", "))
    };
    let _ = writeln!(out, "    usage: {{rampUp: 0s{series}}}");
}

/// The scenario's text. `warmup_s` must be the one given to [`super::assemble`].
pub fn to_yaml(imported: &Imported, name: &str, warmup_s: f64) -> String {
    let (from, to) = imported.window;
    let mut out = String::new();
    let _ = writeln!(out, "# Imported by `waterline-sim import` from {}", imported.source);
    let _ = writeln!(
        out,
        "# window: Unix {from:.0} to {to:.0} ({} s), step {} s; time 0 is the window's start.",
        (to - from).round(),
        imported.step
    );
    let _ = writeln!(
        out,
        "# Background = node usage (the policy's queries) − its pods' usage (cAdvisor), ≥ 0."
    );
    if imported.notes.is_empty() {
        let _ = writeln!(out, "# Nothing was missing.");
    } else {
        let _ = writeln!(out, "# Missing and what was done ({}):", imported.notes.len());
        for note in &imported.notes {
            let _ = writeln!(out, "#   {note}");
        }
    }
    let _ = writeln!(out, "name: {}", quoted(name));
    let _ = writeln!(
        out,
        "description: {}",
        quoted(&format!(
            "imported: {} nodes, {} pods, {:.0} s from {}",
            imported.nodes.len(),
            imported.pods.len(),
            to - from,
            imported.source
        ))
    );
    let _ = writeln!(out, "seed: 1");
    let _ = writeln!(out, "duration: {}", secs(to - from));
    let _ = writeln!(out, "warmup: {}", secs(warmup_s));
    let _ = writeln!(out, "threshold: {}", imported.threshold);
    let _ = writeln!(out, "target: {}", imported.target);
    let _ = writeln!(out, "measureInterval: {}", secs(imported.step.max(1.0)));
    let _ = writeln!(out, "nodes:");
    for n in &imported.nodes {
        let _ = writeln!(out, "  - name: {}", quoted(&n.name));
        let _ = writeln!(out, "    cpu: {}", millis(n.cpu_cores));
        let _ = writeln!(out, "    memory: {}", bytes(n.memory_bytes));
        let mut series = Vec::new();
        if let Some(cpu) = &n.cpu_background {
            series.push(format!("cpu: {}", points(cpu, pct)));
        }
        if let Some(memory) = &n.memory_background {
            series.push(format!("memory: {}", points(memory, pct)));
        }
        if series.is_empty() {
            let _ = writeln!(out, "    background: {{cpu: 0, memory: 0}}");
        } else {
            let _ = writeln!(
                out,
                "    background: {{cpu: 0, memory: 0, series: {{{}}}}}",
                series.join(", ")
            );
        }
    }
    if imported.pods.is_empty() {
        let _ = writeln!(out, "pods: []");
    } else {
        let _ = writeln!(out, "pods:");
        for p in &imported.pods {
            pod_yaml(&mut out, p, warmup_s);
        }
    }
    out
}
