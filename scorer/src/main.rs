use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = waterline_scorer::Args::parse();
    waterline_runtime::run_main(waterline_scorer::run(args))?
}
