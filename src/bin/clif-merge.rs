//! The `clif-merge` command: see `clif-merge --help`.

fn main() {
    // A panic inside the pass or a Cranelift crate is caught and reported as an
    // internal error (exit 3) or, where it is expected (a backend that cannot
    // compile a similar group, the interpreter during validation), handled; its
    // default report on stderr would only repeat it. The hook is the program's to
    // set, so the library never touches it.
    std::panic::set_hook(Box::new(|_| {}));
    // The progress bar (only on a terminal) is drawn on stderr from other threads
    // too, so stderr is not held locked for the run.
    let code = clif_merge::cli::main_with_progress(
        std::env::args_os(),
        &mut std::io::stdout().lock(),
        &mut std::io::stderr(),
        clif_merge::cli::ProgressDisplay::OnTerminal,
    );
    std::process::exit(code);
}
