//! `chart-index`: the server's binary (see the library's docs, or
//! `chart-index --help`).

fn main() -> std::process::ExitCode {
    chart_index::main()
}
