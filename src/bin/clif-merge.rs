//! The `clif-merge` command: see `clif-merge --help`.

fn main() {
    let code = clif_merge::cli::main_with_args(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr().lock(),
    );
    std::process::exit(code);
}
