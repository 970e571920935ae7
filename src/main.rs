//! The `floe` command-line tool; see `floe --help`.

fn main() -> std::process::ExitCode {
    floe::cli::main()
}
