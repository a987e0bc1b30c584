use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = waterline_scorer::Args::parse();
    waterline_scorer::run(args).await
}
