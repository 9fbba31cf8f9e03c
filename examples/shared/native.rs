//! Running compiled code for real: link an object file with the system C compiler
//! against a C `main`, run the executable, and measure an object's code.

use cranelift_codegen::isa::OwnedTargetIsa;
use cranelift_codegen::settings::{self, Configurable};
use object::{Object, ObjectSection};
use std::error::Error;
use std::process::Command;

/// What a linked program did.
#[derive(Debug, PartialEq, Eq)]
pub struct Run {
    /// Everything it printed on stdout.
    pub stdout: String,
    /// Its exit code (-1 if it was killed by a signal).
    pub code: i32,
    /// The executable's defined symbols as `nm --defined-only` lists them (the
    /// linker's view of what code is there).
    pub symbols: String,
}

/// Links `object_file` with `c_source` using `cc` in a fresh temporary directory
/// named after `tag`, runs the executable and removes the directory.
pub fn link_and_run(object_file: &[u8], c_source: &str, tag: &str) -> Result<Run, Box<dyn Error>> {
    link_all_and_run(&[object_file], c_source, tag)
}

/// Links several object files with `c_source` using `cc` in a fresh temporary
/// directory named after `tag`, runs the executable and removes the directory.
pub fn link_all_and_run(
    object_files: &[&[u8]],
    c_source: &str,
    tag: &str,
) -> Result<Run, Box<dyn Error>> {
    let dir = tempfile::Builder::new()
        .prefix(&format!("clif-merge-{tag}-"))
        .tempdir()?;
    let dir = dir.path();
    (|| -> Result<Run, Box<dyn Error>> {
        let (main, exe) = (dir.join("main.c"), dir.join("program"));
        std::fs::write(&main, c_source)?;
        let mut cc = Command::new("cc");
        cc.arg(&main);
        for (i, object_file) in object_files.iter().enumerate() {
            let path = dir.join(format!("code{i}.o"));
            std::fs::write(&path, object_file)?;
            cc.arg(path);
        }
        let linked = cc
            .arg("-o")
            .arg(&exe)
            .output()
            .map_err(|e| format!("cannot run the system C compiler `cc`: {e}"))?;
        if !linked.status.success() {
            return Err(format!(
                "linking with cc failed:\n{}",
                String::from_utf8_lossy(&linked.stderr)
            )
            .into());
        }
        let output = Command::new(&exe).output()?;
        let nm = Command::new("nm")
            .arg("--defined-only")
            .arg(&exe)
            .output()
            .map_err(|e| format!("cannot run `nm`: {e}"))?;
        if !nm.status.success() {
            return Err(format!("nm failed:\n{}", String::from_utf8_lossy(&nm.stderr)).into());
        }
        Ok(Run {
            stdout: String::from_utf8_lossy(&output.stdout).into_owned(),
            code: output.status.code().unwrap_or(-1),
            symbols: String::from_utf8_lossy(&nm.stdout).into_owned(),
        })
    })()
}

/// Bytes of code (all text sections) in an object file.
pub fn text_bytes(object_file: &[u8]) -> Result<u64, Box<dyn Error>> {
    let file = object::File::parse(object_file)?;
    Ok(file
        .sections()
        .filter(|s| s.kind() == object::SectionKind::Text)
        .map(|s| s.size())
        .sum())
}

/// The host's ISA with position-independent code, as object files linked into an
/// executable by `cc` need it.
pub fn pic_host_isa() -> Result<OwnedTargetIsa, String> {
    let mut flags = settings::builder();
    flags.set("is_pic", "true").map_err(|e| e.to_string())?;
    cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .map_err(|e| e.to_string())?
        .finish(settings::Flags::new(flags))
        .map_err(|e| e.to_string())
}
