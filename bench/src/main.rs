//! `waterline-bench`: drives the scorer's Score/Filter over gRPC and the extender's verbs over
//! HTTP with bounded loops, and reports throughput and HDR-histogram latency percentiles.
#![forbid(unsafe_code)]

mod args;
mod load;
mod procs;
mod prometheus;
mod recording_rules;
mod report;
mod results;
mod run;
mod soak;
mod targets;

use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = args::Args::parse();
    // The committed results need no runtime and no servers.
    match &args.command {
        args::Command::Table(t) => return table(t),
        args::Command::Record(r) => {
            for name in results::record(&r.run, &r.results)? {
                println!("updated {}", r.results.join(format!("{name}.json")).display());
            }
            return Ok(());
        }
        _ => {}
    }
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(args.threads)
        .enable_all()
        .build()?
        .block_on(run::run(args))
}

fn table(args: &args::TableArgs) -> anyhow::Result<()> {
    use anyhow::Context;
    let block = results::render(&results::load(&args.results)?);
    let doc = std::fs::read_to_string(&args.doc)
        .with_context(|| format!("reading {}", args.doc.display()))?;
    let new = results::splice(&doc, &block).with_context(|| format!("{}", args.doc.display()))?;
    if new == doc {
        return Ok(());
    }
    if args.check {
        anyhow::bail!("{}: the table is stale; run scripts/bench.sh --table", args.doc.display());
    }
    std::fs::write(&args.doc, new)?;
    println!("{} regenerated", args.doc.display());
    Ok(())
}
