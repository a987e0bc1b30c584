use clap::Parser;
use waterline_collector::{Command, PolicyCommand};

fn main() -> anyhow::Result<()> {
    let mut args = waterline_collector::Args::parse();
    match args.command.take() {
        Some(Command::Policy(PolicyCommand::Check(check))) => {
            waterline_runtime::run_main(waterline_collector::policy_check::run(check))?
        }
        None => waterline_runtime::run_main(waterline_collector::run(args))?,
    }
}
