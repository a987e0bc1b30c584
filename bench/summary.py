#!/usr/bin/env python3
"""Medians over repeated runs of scripts/bench.sh results, as Markdown tables.

Usage: python3 bench/summary.py target/bench/<run>/
Reads criterion.jsonl, rpc.jsonl, session.jsonl, extender.jsonl, footprint.jsonl and prometheus.jsonl
(whichever exist).
"""
import json
import os
import sys
from collections import defaultdict
from statistics import median


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def by(rows_, key):
    groups = defaultdict(list)
    for r in rows_:
        groups[key(r)].append(r)
    return groups


def fmt_ns(ns):
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    return f"{ns / 1e3:.1f} µs"


def main(out):
    crit = rows(os.path.join(out, "criterion.jsonl"))
    if crit:
        print("## criterion (median of per-run medians)\n")
        print("| bench | median | per node | runs |")
        print("|---|---|---|---|")
        groups = by(crit, lambda r: r["bench"])
        # group/size or group/function/size: the size is the last part.
        for name in sorted(groups, key=lambda n: (n.rsplit("/", 1)[0], int(n.rsplit("/", 1)[1]))):
            values = [r["median_ns"] for r in groups[name]]
            m = median(values)
            n = int(name.rsplit("/", 1)[1])
            print(f"| {name} | {fmt_ns(m)} | {m / n:.0f} ns | {len(values)} |")
        print()

    for file, title in (("rpc.jsonl", "gRPC"), ("session.jsonl", "Session"), ("extender.jsonl", "extender")):
        data = rows(os.path.join(out, file))
        if not data:
            continue
        print(f"## {title} (medians over runs)\n")
        print("| label | runs | req/s | p50 ms | p90 ms | p99 ms | p99.9 ms | errors | scorer p99 ≤ ms | scorer ≤0.977 ms | overhead p50 ms |")
        print("|---|---|---|---|---|---|---|---|---|---|---|")
        for label, rs in by(data, lambda r: r["label"]).items():
            lat = lambda q: median(r["latency_ms"][q] for r in rs)
            scorer = [r.get("scorer") or r.get("grpc", {}).get("scorer") for r in rs]
            scorer = [s for s in scorer if s]
            sp99 = f"{median(s['p99_at_most_ms'] for s in scorer):.3f}" if scorer else "–"
            share = f"{100 * median(s['share_within_0_977ms'] for s in scorer):.1f} %" if scorer else "–"
            over = [r["overhead_p50_ms"] for r in rs if "overhead_p50_ms" in r]
            over = f"{median(over):.3f}" if over else "–"
            print(
                f"| {label} | {len(rs)} | {median(r['throughput_per_s'] for r in rs):.0f} | "
                f"{lat('p50'):.3f} | {lat('p90'):.3f} | {lat('p99'):.3f} | {lat('p99.9'):.3f} | "
                f"{sum(r['errors'] for r in rs)} | {sp99} | {share} | {over} |"
            )
            grpc = [r["grpc"] for r in rs if "grpc" in r]
            if grpc:
                g = lambda q: median(x["latency_ms"][q] for x in grpc)
                print(
                    f"| ↳ same load, gRPC direct | {len(grpc)} | "
                    f"{median(x['throughput_per_s'] for x in grpc):.0f} | {g('p50'):.3f} | "
                    f"{g('p90'):.3f} | {g('p99'):.3f} | {g('p99.9'):.3f} | "
                    f"{sum(x['errors'] for x in grpc)} | | | |"
                )
        print()

    foot = rows(os.path.join(out, "footprint.jsonl"))
    if foot:
        print("## footprint (medians over runs)\n")
        med = lambda f: median(f(r) for r in foot)
        print("| measure | median | runs |")
        print("|---|---|---|")
        for name, f in (
            ("ledger entries in the collector", lambda r: r["ledger_entries"] or 0),
            ("collector VmRSS, idle, MiB", lambda r: r["idle"]["waterline-collector"]["rss_mib"]),
            ("scorer VmRSS, idle, MiB", lambda r: r["idle"]["waterline-scorer"]["rss_mib"]),
            ("collector VmRSS, 50k ledger, MiB", lambda r: r["filled"]["waterline-collector"]["rss_mib"]),
            ("scorer VmRSS, 50k ledger, MiB", lambda r: r["filled"]["waterline-scorer"]["rss_mib"]),
            ("collector VmRSS, end, MiB", lambda r: r["end"]["waterline-collector"]["rss_mib"]),
            ("scorer VmRSS, end, MiB", lambda r: r["end"]["waterline-scorer"]["rss_mib"]),
            ("collector CPU per synthetic refresh, ms", lambda r: r["collector_cpu_ms_per_refresh"]),
            ("scorer CPU per streamed refresh, ms", lambda r: r["scorer_cpu_ms_per_refresh"]),
            ("Reserve RPCs/s while filling", lambda r: r["reserves"]["throughput_per_s"]),
        ):
            print(f"| {name} | {med(f):.1f} | {len(foot)} |")
        print()

    prom = rows(os.path.join(out, "prometheus.jsonl"))
    if prom:
        print("## collector against a real Prometheus (medians over runs)\n")
        print("| measure | median | runs |")
        print("|---|---|---|")
        for name, key in (
            ("nodes", "cluster_nodes"),
            ("policy metrics", "metrics"),
            ("first full refresh, wall ms from start", "first_refresh_ms"),
            ("PromQL requests in the first full refresh", "first_refresh_promql_requests"),
            ("collector CPU ms until the first full refresh (incl. start-up)", "first_refresh_collector_cpu_ms"),
            ("steady window, s", "steady_seconds"),
            ("PromQL requests in the steady window", "steady_promql_requests"),
            ("collector CPU ms in the steady window", "steady_collector_cpu_ms"),
            ("collector VmRSS, MiB", "collector_rss_mib"),
        ):
            print(f"| {name} | {median(r[key] for r in prom):.1f} | {len(prom)} |")
        print()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else ".")
