use clap::Parser;

fn main() -> anyhow::Result<()> {
    let args = waterline_extender::Args::parse();
    waterline_runtime::run_main(waterline_extender::run(args))?
}
