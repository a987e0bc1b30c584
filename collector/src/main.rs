use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = waterline_collector::Args::parse();
    waterline_collector::run(args).await
}
