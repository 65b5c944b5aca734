//! The `nvtest` binary: the command line lives in [`nvtest::cli`]; this only exits with
//! the status it returns.

fn main() {
    std::process::exit(nvtest::cli::main());
}
