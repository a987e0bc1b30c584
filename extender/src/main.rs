use clap::Parser;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = waterline_extender::Args::parse();
    waterline_extender::run(args).await
}
