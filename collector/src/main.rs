use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = waterline_collector::Args::parse();
    waterline_runtime::run_main(waterline_collector::run(args))?
}
