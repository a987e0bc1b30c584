//! `waterline-bench`: drives the scorer's Score/Filter over gRPC and the extender's verbs over
//! HTTP with bounded loops, and reports throughput and HDR-histogram latency percentiles.
#![forbid(unsafe_code)]

mod args;
mod load;
mod procs;
mod prometheus;
mod recording_rules;
mod report;
mod run;
mod soak;
mod targets;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = args::Args::parse();
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()?
        .block_on(run::run(args))
}
