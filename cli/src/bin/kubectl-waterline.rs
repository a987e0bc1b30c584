//! `kubectl waterline`: kubectl runs `kubectl-waterline` from PATH for `kubectl waterline`.

fn main() -> std::process::ExitCode {
    waterline_cli::main()
}
