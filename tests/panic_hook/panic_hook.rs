//! The library leaves the process-wide panic hook alone: a program that embeds
//! clif-merge and calls its command line in process keeps its own hook. (One test
//! in its own binary: the hook is global to the process.)

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

static HOOK_CALLS: AtomicUsize = AtomicUsize::new(0);

#[test]
fn an_embedding_program_keeps_its_panic_hook() {
    std::panic::set_hook(Box::new(|_| {
        HOOK_CALLS.fetch_add(1, Ordering::SeqCst);
    }));
    let input = Path::new(env!("CARGO_MANIFEST_DIR")).join("filetests/merge/three_members.clif");
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let code = clif_merge::cli::main_with_args(
        ["clif-merge".into(), input.into_os_string()],
        &mut out,
        &mut err,
    );
    assert_eq!(code, 0, "{}", String::from_utf8_lossy(&err));
    // A panic after the call still reaches the program's hook.
    let calls = HOOK_CALLS.load(Ordering::SeqCst);
    let caught = std::panic::catch_unwind(|| panic!("probe"));
    assert!(caught.is_err());
    assert_eq!(
        HOOK_CALLS.load(Ordering::SeqCst),
        calls + 1,
        "the hook was replaced"
    );
    let _ = std::panic::take_hook();
}
