fn main() {
    std::process::exit(nvtest::cli::main());
}
