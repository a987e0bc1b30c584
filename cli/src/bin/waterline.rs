//! `waterline`: the same program as `kubectl-waterline`, for use without kubectl.

fn main() -> std::process::ExitCode {
    waterline_cli::main()
}
