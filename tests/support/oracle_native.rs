//! Native code for the linked-program oracle (`tests/oracle/main.rs`): CLIF
//! functions compiled into real object files with `cranelift-object`, C harnesses,
//! and `cc` to link and run them. Nothing here uses clif-merge: it only turns CLIF
//! into machine code and runs it, so that merges are judged by what the CPU does.
//!
//! Naming: a CLIF name `%name` is the object symbol `name`, `uN:M` is `uN_M` (a C
//! identifier), and a caller-supplied `rename` may change that further (for names
//! a C file provides). Local functions get `Linkage::Local`, which
//! `cranelift-object` emits as a symbol private to the object, so two objects may
//! each have their own local `g`. An object file may also hold data objects of
//! function addresses and functions given as machine code ([`ObjectSpec`]), all
//! defined through the `Module` trait ([`define_object`]), so that a wrapping module
//! receives them exactly as the plain one does.

#![allow(dead_code)]

use cranelift_codegen::Context;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::cursor::{Cursor, FuncCursor};
use cranelift_codegen::ir::{
    AbiParam, ExtFuncData, ExternalName, Function, GlobalValueData, InstBuilder, Signature, Type,
    UserExternalName, UserFuncName, types,
};
use cranelift_codegen::isa::{CallConv, OwnedTargetIsa};
use cranelift_codegen::settings::{self, Configurable};
use cranelift_module::{DataDescription, FuncId, Linkage, Module, ModuleReloc, ModuleRelocTarget};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The host ISA the oracle compiles for: `opt_level=speed`, frame pointers kept
/// (`return_call` needs them on x86_64), position-independent code (the objects are
/// linked into the C compiler's default executables, PIE on most systems).
pub fn host_isa() -> OwnedTargetIsa {
    let mut flags = settings::builder();
    flags.set("opt_level", "speed").expect("opt_level");
    flags
        .set("preserve_frame_pointers", "true")
        .expect("preserve_frame_pointers");
    flags.set("is_pic", "true").expect("is_pic");
    let mut isa = cranelift_codegen::isa::lookup(target_lexicon::Triple::host())
        .expect("a Cranelift backend for the host");
    // The host's vector extensions, so that no instruction needs one of Cranelift's
    // runtime library calls (which only wasmtime provides).
    #[cfg(target_arch = "x86_64")]
    {
        for (flag, present) in [
            ("has_sse3", std::arch::is_x86_feature_detected!("sse3")),
            ("has_ssse3", std::arch::is_x86_feature_detected!("ssse3")),
            ("has_sse41", std::arch::is_x86_feature_detected!("sse4.1")),
            ("has_sse42", std::arch::is_x86_feature_detected!("sse4.2")),
            ("has_popcnt", std::arch::is_x86_feature_detected!("popcnt")),
        ] {
            if present {
                let _ = isa.enable(flag);
            }
        }
    }
    isa.finish(settings::Flags::new(flags)).expect("host ISA")
}

/// The symbol of a CLIF function name (before `rename`): `%g` is `g`, `u0:5` is
/// `u0_5`.
pub fn symbol_of(name: &UserFuncName) -> String {
    match name {
        UserFuncName::Testcase(t) => String::from_utf8_lossy(t.raw()).into_owned(),
        UserFuncName::User(u) => format!("u{}_{}", u.namespace, u.index),
    }
}

/// The symbol an external name inside `func` refers to, `None` for library calls
/// and known symbols.
pub fn external_symbol(func: &Function, name: &ExternalName) -> Option<String> {
    match name {
        ExternalName::TestCase(t) => Some(String::from_utf8_lossy(t.raw()).into_owned()),
        ExternalName::User(r) => {
            let u = func.params.user_named_funcs().get(*r)?;
            Some(format!("u{}_{}", u.namespace, u.index))
        }
        _ => None,
    }
}

/// Every function symbol `func` calls or takes the address of, with the signature
/// it declares for it.
pub fn referenced_functions(func: &Function) -> Vec<(String, Signature)> {
    func.dfg
        .ext_funcs
        .values()
        // The reader fills gaps in `fnN` numbering with placeholders that have no
        // signature.
        .filter(|d| func.dfg.signatures.is_valid(d.signature))
        .filter_map(|d| {
            let name = external_symbol(func, &d.name)?;
            Some((name, func.dfg.signatures[d.signature].clone()))
        })
        .collect()
}

/// Every symbol `func` names in a global value (`symbol %x`).
pub fn referenced_symbols(func: &Function) -> Vec<String> {
    func.global_values
        .values()
        .filter_map(|gv| match gv {
            GlobalValueData::Symbol { name, .. } => external_symbol(func, name),
            _ => None,
        })
        .collect()
}

/// A data object for [`define_object`]: one 8-byte function address per entry.
#[derive(Clone, Debug)]
pub struct DataSpec {
    /// Its symbol (before `rename`).
    pub symbol: String,
    pub linkage: Linkage,
    pub writable: bool,
    /// The functions whose addresses it holds, in order, each with its signature
    /// (to import one the object does not define).
    pub entries: Vec<(String, Signature)>,
}

/// A relocation of a [`BytesSpec`]: at `offset`, of `kind`, to function `target`
/// (with its signature, to import it), plus `addend`.
#[derive(Clone, Debug)]
pub struct BytesReloc {
    pub offset: u32,
    pub kind: Reloc,
    pub addend: i64,
    pub target: String,
    pub signature: Signature,
}

/// A function given as machine code (`Module::define_function_bytes`).
#[derive(Clone, Debug)]
pub struct BytesSpec {
    /// Its symbol (before `rename`).
    pub symbol: String,
    pub linkage: Linkage,
    pub signature: Signature,
    pub code: Vec<u8>,
    pub relocs: Vec<BytesReloc>,
}

/// An alias: a symbol naming the code of a function the object defines, as
/// `MergingModule::finish_object` writes one (one address, two names).
#[derive(Clone, Debug)]
pub struct AliasSpec {
    /// Its symbol (before `rename`).
    pub symbol: String,
    pub linkage: Linkage,
    pub signature: Signature,
    /// The symbol of the function whose code it names (before `rename`).
    pub of: String,
}

/// What one object file holds: CLIF functions (each with its linkage), data
/// objects holding function addresses, functions given as machine code, and
/// aliases of its functions.
#[derive(Clone, Debug, Default)]
pub struct ObjectSpec {
    pub functions: Vec<(Function, Linkage)>,
    pub data: Vec<DataSpec>,
    pub bytes: Vec<BytesSpec>,
    pub aliases: Vec<AliasSpec>,
}

/// Why [`define_object`] failed: the message, and whether the module reported a
/// compilation error (Cranelift refusing or the verifier rejecting a function)
/// rather than refusing otherwise.
#[derive(Debug)]
pub struct DefineError {
    pub message: String,
    pub compilation: bool,
}

impl DefineError {
    fn other(message: String) -> Self {
        Self {
            message,
            compilation: false,
        }
    }

    fn module(what: String, e: &cranelift_module::ModuleError) -> Self {
        Self {
            message: format!("{what}: {e:?}"),
            compilation: matches!(e, cranelift_module::ModuleError::Compilation(_)),
        }
    }
}

/// A `cranelift-object` module for the host ISA ([`host_isa`]).
pub fn object_module() -> Result<ObjectModule, String> {
    let builder = ObjectBuilder::new(
        host_isa(),
        "oracle",
        cranelift_module::default_libcall_names(),
    )
    .map_err(|e| e.to_string())?;
    Ok(ObjectModule::new(builder))
}

/// Compiles `functions` (each with its linkage) into one object file for the host.
/// Names the functions refer to but do not define are imports; a name that no
/// function is called or taken the address of under, and that only appears in a
/// `symbol` global value, is imported as data. `rename` maps each symbol (as
/// [`symbol_of`] spells it) to the object's symbol name. Errors (a name defined
/// twice, conflicting signatures, a function Cranelift refuses) are returned as text.
pub fn compile_object(
    functions: &[(Function, Linkage)],
    rename: &dyn Fn(&str) -> String,
) -> Result<Vec<u8>, String> {
    let spec = ObjectSpec {
        functions: functions.to_vec(),
        ..ObjectSpec::default()
    };
    compile_object_spec(&spec, rename)
}

/// [`compile_object`] for a whole [`ObjectSpec`]: through a plain `ObjectModule`.
/// Each alias is declared with its linkage and, once the object is finished, its
/// symbol is pointed at the code of the function it names.
pub fn compile_object_spec(
    spec: &ObjectSpec,
    rename: &dyn Fn(&str) -> String,
) -> Result<Vec<u8>, String> {
    let mut module = object_module()?;
    define_object(&mut module, spec, rename).map_err(|e| e.message)?;
    let declared =
        |module: &ObjectModule, symbol: &str| match module.declarations().get_name(&rename(symbol))
        {
            Some(cranelift_module::FuncOrDataId::Func(id)) => Ok(id),
            _ => Err(format!("`{symbol}` is not a function of the object")),
        };
    let mut aliases = Vec::new();
    for alias in &spec.aliases {
        aliases.push((
            declared(&module, &alias.symbol)?,
            declared(&module, &alias.of)?,
        ));
    }
    let mut product = module.finish();
    for (alias, of) in aliases {
        let (alias, of) = (product.function_symbol(alias), product.function_symbol(of));
        let code = product.object.symbol(of);
        let (section, value, size, kind) = (code.section, code.value, code.size, code.kind);
        let symbol = product.object.symbol_mut(alias);
        symbol.section = section;
        symbol.value = value;
        symbol.size = size;
        symbol.kind = kind;
    }
    product.emit().map_err(|e| e.to_string())
}

/// Declares and defines everything of `spec` in `module`, as [`compile_object`]
/// describes, through the `Module` trait only (so that any module, a wrapper
/// included, receives what a compiler would give it). A `symbol` global value names
/// a data object of `spec` if one has that name; data objects and machine-code
/// functions import the functions they name but the object does not define.
pub fn define_object<M: Module>(
    module: &mut M,
    spec: &ObjectSpec,
    rename: &dyn Fn(&str) -> String,
) -> Result<(), DefineError> {
    let functions = &spec.functions;
    let mut defined: HashMap<String, FuncId> = HashMap::new();
    let own = functions
        .iter()
        .map(|(func, linkage)| (symbol_of(&func.name), *linkage, &func.signature))
        .chain(
            spec.bytes
                .iter()
                .map(|b| (b.symbol.clone(), b.linkage, &b.signature)),
        )
        .chain(
            spec.aliases
                .iter()
                .map(|a| (a.symbol.clone(), a.linkage, &a.signature)),
        );
    for (symbol, linkage, signature) in own {
        if defined.contains_key(&symbol) {
            return Err(DefineError::other(format!(
                "`{symbol}` is defined twice in one object"
            )));
        }
        let id = module
            .declare_function(&rename(&symbol), linkage, signature)
            .map_err(|e| DefineError::module(format!("declaring `{symbol}`"), &e))?;
        defined.insert(symbol, id);
    }
    let mut data: HashMap<String, cranelift_module::DataId> = HashMap::new();
    for d in &spec.data {
        let id = module
            .declare_data(&rename(&d.symbol), d.linkage, d.writable, false)
            .map_err(|e| DefineError::module(format!("declaring data `{}`", d.symbol), &e))?;
        if data.insert(d.symbol.clone(), id).is_some() {
            return Err(DefineError::other(format!(
                "data `{}` is defined twice in one object",
                d.symbol
            )));
        }
    }
    let function_names: BTreeSet<String> = functions
        .iter()
        .flat_map(|(f, _)| referenced_functions(f))
        .map(|(name, _)| name)
        .chain(defined.keys().cloned())
        .collect();
    let mut imported: HashMap<String, FuncId> = HashMap::new();
    for (func, linkage) in functions {
        let mut func = func.clone();
        let id = defined[&symbol_of(&func.name)];
        func.name = UserFuncName::user(0, id.as_u32());
        let refs: Vec<_> = func.dfg.ext_funcs.keys().collect();
        for fref in refs {
            let data_ = func.dfg.ext_funcs[fref].clone();
            if !func.dfg.signatures.is_valid(data_.signature) {
                continue;
            }
            let Some(name) = external_symbol(&func, &data_.name) else {
                continue;
            };
            let sig = func.dfg.signatures[data_.signature].clone();
            let target = function_id(module, rename, &defined, &mut imported, &name, &sig)?;
            let user =
                func.declare_imported_user_function(UserExternalName::new(0, target.as_u32()));
            func.dfg.ext_funcs[fref].name = ExternalName::User(user);
        }
        let gvs: Vec<_> = func.global_values.keys().collect();
        for gv in gvs {
            let GlobalValueData::Symbol { name, .. } = &func.global_values[gv] else {
                continue;
            };
            let Some(symbol) = external_symbol(&func, name) else {
                continue;
            };
            let user = if let Some(&id) = data.get(&symbol) {
                UserExternalName::new(1, id.as_u32())
            } else if function_names.contains(&symbol) {
                let target = match defined.get(&symbol).or(imported.get(&symbol)) {
                    Some(&id) => id,
                    None => {
                        return Err(DefineError::other(format!(
                            "`{symbol}` is only named in a global value and as a function elsewhere"
                        )));
                    }
                };
                UserExternalName::new(0, target.as_u32())
            } else {
                let id = module
                    .declare_data(&rename(&symbol), Linkage::Import, true, false)
                    .map_err(|e| DefineError::module(format!("importing data `{symbol}`"), &e))?;
                data.insert(symbol.clone(), id);
                UserExternalName::new(1, id.as_u32())
            };
            let user = func.declare_imported_user_function(user);
            if let GlobalValueData::Symbol { name, .. } = &mut func.global_values[gv] {
                *name = ExternalName::User(user);
            }
        }
        let shown = format!("{}", func.display());
        let mut ctx = Context::for_function(func);
        module.define_function(id, &mut ctx).map_err(|e| {
            let mut error = DefineError::module(
                format!("compiling {} ({linkage:?})", symbol_of_id(&defined, id)),
                &e,
            );
            error.message.push_str(&format!("\n{shown}"));
            error
        })?;
    }
    for b in &spec.bytes {
        let mut relocs = Vec::new();
        for r in &b.relocs {
            let target = function_id(
                module,
                rename,
                &defined,
                &mut imported,
                &r.target,
                &r.signature,
            )?;
            relocs.push(ModuleReloc {
                offset: r.offset,
                kind: r.kind,
                name: ModuleRelocTarget::user(0, target.as_u32()),
                addend: r.addend,
            });
        }
        module
            .define_function_bytes(defined[&b.symbol], 16, &b.code, &relocs)
            .map_err(|e| DefineError::module(format!("defining `{}` as bytes", b.symbol), &e))?;
    }
    for d in &spec.data {
        let mut desc = DataDescription::new();
        desc.define(vec![0u8; 8 * d.entries.len()].into_boxed_slice());
        for (k, (name, sig)) in d.entries.iter().enumerate() {
            let target = function_id(module, rename, &defined, &mut imported, name, sig)?;
            let fref = desc.import_function(ModuleRelocTarget::user(0, target.as_u32()));
            desc.write_function_addr(8 * k as u32, fref);
        }
        module
            .define_data(data[&d.symbol], &desc)
            .map_err(|e| DefineError::module(format!("defining data `{}`", d.symbol), &e))?;
    }
    Ok(())
}

/// The function `name` of the object being defined: one it defines, one already
/// imported, or a new import with signature `sig`.
fn function_id<M: Module>(
    module: &mut M,
    rename: &dyn Fn(&str) -> String,
    defined: &HashMap<String, FuncId>,
    imported: &mut HashMap<String, FuncId>,
    name: &str,
    sig: &Signature,
) -> Result<FuncId, DefineError> {
    if let Some(&id) = defined.get(name).or(imported.get(name)) {
        return Ok(id);
    }
    let id = module
        .declare_function(&rename(name), Linkage::Import, sig)
        .map_err(|e| DefineError::module(format!("importing `{name}`"), &e))?;
    imported.insert(name.to_string(), id);
    Ok(id)
}

fn symbol_of_id(defined: &HashMap<String, FuncId>, id: FuncId) -> String {
    defined
        .iter()
        .find(|(_, i)| **i == id)
        .map(|(n, _)| n.clone())
        .unwrap_or_default()
}

/// A function named `name` with `signature` that passes its arguments to `target`
/// (same signature) and returns its results: `return_call` for the `tail`
/// convention, `call` + `return` otherwise. The oracle's lowering of an *alias*: an
/// object file made by `cranelift-module` cannot give one piece of code two names,
/// and a forwarding function behaves the same (its address differs, which only
/// matters where addresses are significant, and there clif-merge makes no alias
/// whose address another can be compared with).
pub fn forwarding_function(
    name: UserFuncName,
    signature: &Signature,
    target: &UserFuncName,
) -> Function {
    let mut func = Function::with_name_signature(name, signature.clone());
    let ext_name = match target {
        UserFuncName::User(u) => ExternalName::User(func.declare_imported_user_function(u.clone())),
        UserFuncName::Testcase(t) => ExternalName::TestCase(t.clone()),
    };
    let sig = func.import_signature(signature.clone());
    let callee = func.import_function(ExtFuncData {
        name: ext_name,
        signature: sig,
        colocated: false,
        patchable: false,
    });
    let block = func.dfg.make_block();
    func.layout.append_block(block);
    let params: Vec<_> = signature
        .params
        .iter()
        .map(|p| func.dfg.append_block_param(block, p.value_type))
        .collect();
    let mut pos = FuncCursor::new(&mut func).at_bottom(block);
    if signature.call_conv == CallConv::Tail {
        pos.ins().return_call(callee, &params);
    } else {
        let call = pos.ins().call(callee, &params);
        let results = pos.func.dfg.inst_results(call).to_vec();
        pos.ins().return_(&results);
    }
    func
}

/// A scratch directory under the system temp dir, removed on drop (`tempfile`).
pub struct Scratch(tempfile::TempDir);

impl Scratch {
    pub fn new(tag: &str) -> Self {
        let dir = tempfile::Builder::new()
            .prefix(&format!("clif-merge-oracle-{tag}-"))
            .tempdir()
            .expect("create scratch dir");
        Self(dir)
    }

    pub fn path(&self) -> &Path {
        self.0.path()
    }

    /// Writes `bytes` to `name` in the directory and returns its path.
    pub fn write(&self, name: &str, bytes: &[u8]) -> PathBuf {
        let path = self.0.path().join(name);
        std::fs::write(&path, bytes).expect("write scratch file");
        path
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // `ORACLE_KEEP=1` keeps the sources, objects and executables to look at.
        if std::env::var_os("ORACLE_KEEP").is_some() {
            eprintln!("kept {}", self.0.path().display());
            self.0.disable_cleanup(true);
        }
    }
}

/// Whether the system C compiler `cc` can be run. Without it the oracle cannot
/// run: under CI (`CI` set) that is a failure, locally a loud skip.
pub fn require_cc(test: &str) -> bool {
    let ok = Command::new("cc")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        return true;
    }
    if std::env::var_os("CI").is_some() {
        panic!("{test}: the system C compiler `cc` is required (CI is set)");
    }
    eprintln!();
    eprintln!("==================================================================");
    eprintln!("  {test}: SKIPPED: no system C compiler `cc` to link and run with");
    eprintln!("  (under CI, with CI set, this is a failure)");
    eprintln!("==================================================================");
    eprintln!();
    false
}

/// Compiles the C source `source` into an object file in `dir`.
pub fn compile_c(dir: &Scratch, name: &str, source: &str) -> Result<PathBuf, String> {
    let c = dir.write(&format!("{name}.c"), source.as_bytes());
    let object = dir.path().join(format!("{name}.o"));
    let out = Command::new("cc")
        .args(["-c", "-O0", "-w"])
        .arg(&c)
        .arg("-o")
        .arg(&object)
        .output()
        .map_err(|e| format!("cannot run `cc`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cc -c {name}.c failed:\n{}\n--- source ---\n{source}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(object)
}

/// What a linked program did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// Its standard output.
    pub stdout: String,
    /// Its exit status, or `signal N` / `timeout`.
    pub status: String,
}

/// Links `objects` (paths) with `cc` into an executable in `dir` and runs it
/// (killed after `timeout`).
pub fn link_and_run(
    dir: &Scratch,
    exe: &str,
    objects: &[PathBuf],
    timeout: Duration,
) -> Result<Run, String> {
    let path = dir.path().join(exe);
    let out = Command::new("cc")
        .args(objects)
        .arg("-o")
        .arg(&path)
        .output()
        .map_err(|e| format!("cannot run `cc`: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "linking with cc failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let stdout_path = dir.path().join(format!("{exe}.out"));
    let stdout = std::fs::File::create(&stdout_path).map_err(|e| e.to_string())?;
    let mut child = Command::new(&path)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run the linked program: {e}"))?;
    let start = Instant::now();
    let status = loop {
        match child.try_wait().map_err(|e| e.to_string())? {
            Some(status) => break Some(status),
            None if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
            None => std::thread::sleep(Duration::from_millis(1)),
        }
    };
    let stdout =
        String::from_utf8_lossy(&std::fs::read(&stdout_path).unwrap_or_default()).into_owned();
    let status = match status {
        None => "timeout".to_string(),
        Some(s) => match s.code() {
            Some(code) => format!("exit {code}"),
            None => {
                #[cfg(unix)]
                {
                    use std::os::unix::process::ExitStatusExt;
                    format!("signal {}", s.signal().unwrap_or(-1))
                }
                #[cfg(not(unix))]
                {
                    "killed".to_string()
                }
            }
        },
    };
    Ok(Run { stdout, status })
}

/// A C scalar type a CLIF parameter or result maps to.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum CType {
    I8,
    I16,
    I32,
    I64,
    F32,
    F64,
}

impl CType {
    pub fn of(ty: Type) -> Option<Self> {
        Some(match ty {
            types::I8 => Self::I8,
            types::I16 => Self::I16,
            types::I32 => Self::I32,
            types::I64 => Self::I64,
            types::F32 => Self::F32,
            types::F64 => Self::F64,
            _ => return None,
        })
    }

    pub fn c(self) -> &'static str {
        match self {
            Self::I8 => "int8_t",
            Self::I16 => "int16_t",
            Self::I32 => "int32_t",
            Self::I64 => "int64_t",
            Self::F32 => "float",
            Self::F64 => "double",
        }
    }

    fn is_float(self) -> bool {
        matches!(self, Self::F32 | Self::F64)
    }
}

/// A C view of a CLIF signature: parameter types and at most one result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CSignature {
    pub params: Vec<CType>,
    pub result: Option<CType>,
}

impl CSignature {
    /// The C view of `sig`, or why C cannot call (or provide) such a function.
    pub fn of(sig: &Signature) -> Result<Self, String> {
        match sig.call_conv {
            CallConv::SystemV | CallConv::AppleAarch64 => {}
            // Cranelift's `fast` is the system ABI on x86_64 (it has no ABI of its
            // own there).
            CallConv::Fast if cfg!(target_arch = "x86_64") => {}
            cc => return Err(format!("calling convention `{cc}` cannot be called from C")),
        }
        let mut params = Vec::new();
        for p in &sig.params {
            if p.purpose != cranelift_codegen::ir::ArgumentPurpose::Normal
                && p.purpose != cranelift_codegen::ir::ArgumentPurpose::VMContext
            {
                return Err(format!("a special parameter ({})", p.purpose));
            }
            if p.extension != cranelift_codegen::ir::ArgumentExtension::None {
                return Err("an extended parameter".into());
            }
            params.push(
                CType::of(p.value_type).ok_or_else(|| {
                    format!("a parameter of type {} (not a C scalar)", p.value_type)
                })?,
            );
        }
        let result = match sig.returns.as_slice() {
            [] => None,
            [r] => Some(
                CType::of(r.value_type)
                    .ok_or_else(|| format!("a result of type {} (not a C scalar)", r.value_type))?,
            ),
            _ => return Err("more than one result".into()),
        };
        Ok(Self { params, result })
    }

    /// `RET NAME(T0, T1)` as a C declaration.
    pub fn declaration(&self, name: &str) -> String {
        let params: Vec<&str> = self.params.iter().map(|t| t.c()).collect();
        format!(
            "{} {name}({})",
            self.result.map_or("void", CType::c),
            if params.is_empty() {
                "void".to_string()
            } else {
                params.join(", ")
            }
        )
    }
}

/// Where the generic harness maps its memory: a fixed address, so that pointers
/// into it are the same in every build and every run.
pub const REGION_BASE: u64 = 0x1000_0000_0000;

/// A function the generic harness calls: its symbol and C signature.
#[derive(Clone, Debug)]
pub struct HarnessCall {
    pub symbol: String,
    pub sig: CSignature,
}

/// A C program that calls each of `calls` on three rows of arguments, each call in a
/// child process (`fork`, at most 1 s) so that a trap, crash or endless loop only
/// ends that call, and prints per call the result (integers in decimal, floats in
/// hex) or the signal, and a checksum of the memory that pointer arguments point
/// into (every `i64` argument is, in two rows, an address in a region mapped at the
/// fixed address [`REGION_BASE`] and filled with a fixed pattern; integers are small
/// and positive, so loops bounded by an argument stay short).
///
/// `imports` are functions the program calls but no object defines: C stubs that
/// fold their arguments into a word of the region (calls leaving the code are
/// observable) and return a value derived from them. `data` are data symbols to
/// define (zeroed arrays). `pad` adds unused code and data in front of everything
/// else (a second layout, to find outputs that depend on addresses).
pub fn generic_harness(
    calls: &[HarnessCall],
    imports: &BTreeMap<String, CSignature>,
    data: &BTreeSet<String>,
    pad: bool,
) -> String {
    let mut c = String::new();
    c.push_str(
        "#define _GNU_SOURCE\n#include <stdio.h>\n#include <stdint.h>\n#include <string.h>\n\
         #include <stdlib.h>\n#include <unistd.h>\n#include <signal.h>\n#include <sys/mman.h>\n\
         #include <sys/wait.h>\n#include <sys/resource.h>\n",
    );
    c.push_str(&format!(
        "#define REGION ((unsigned char *){REGION_BASE:#x}ULL)\n#define REGION_SIZE (1u << 20)\n"
    ));
    c.push_str("#define PTR ((int64_t)(REGION + 0x8000))\n");
    c.push_str("#ifndef MAP_FIXED_NOREPLACE\n#define MAP_FIXED_NOREPLACE MAP_FIXED\n#endif\n");
    if pad {
        c.push_str(
            "__attribute__((used)) unsigned char oracle_pad_data[40960] = {1};\n\
             __attribute__((used, noinline)) void oracle_pad_code(void) { __asm__ volatile(\".skip 24576\"); }\n",
        );
    }
    for symbol in data {
        c.push_str(&format!(
            "__attribute__((aligned(16))) unsigned char {symbol}[4096];\n"
        ));
    }
    for (i, (symbol, sig)) in imports.iter().enumerate() {
        let params: Vec<String> = sig
            .params
            .iter()
            .enumerate()
            .map(|(j, t)| format!("{} a{j}", t.c()))
            .collect();
        c.push_str(&format!(
            "{} {symbol}({}) {{\n    uint64_t h = {:#x}ULL;\n",
            sig.result.map_or("void", CType::c),
            if params.is_empty() {
                "void".to_string()
            } else {
                params.join(", ")
            },
            0x9e37_79b9_7f4a_7c15u64 ^ (i as u64 + 1)
        ));
        for (j, t) in sig.params.iter().enumerate() {
            let bits = match t {
                CType::F32 => format!("(uint64_t)(int64_t)(a{j} * 16.0f)"),
                CType::F64 => format!("(uint64_t)(int64_t)(a{j} * 16.0)"),
                _ => format!("(uint64_t)(int64_t)a{j}"),
            };
            c.push_str(&format!("    h = (h ^ {bits}) * 0x100000001b3ULL;\n"));
        }
        c.push_str(&format!(
            "    *(uint64_t *)(REGION + {}) += h;\n",
            8 * (i % 64)
        ));
        match sig.result {
            None => {}
            Some(t) if t.is_float() => {
                c.push_str(&format!("    return ({})(double)(h % 1000);\n", t.c()))
            }
            Some(t) => c.push_str(&format!("    return ({})h;\n", t.c())),
        }
        c.push_str("}\n");
    }
    for call in calls {
        c.push_str(&format!("extern {};\n", call.sig.declaration(&call.symbol)));
    }
    c.push_str(
        r#"
static const unsigned char *pattern;
static void init_region(void) {
    void *p = mmap(REGION, REGION_SIZE, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    if (p != (void *)REGION) { printf("cannot map the region\n"); exit(3); }
    for (uint32_t i = 0; i < REGION_SIZE; i++)
        REGION[i] = (unsigned char)(i * 131u + (i >> 9) * 7u + 1u);
}
static uint64_t checksum(void) {
    uint64_t h = 0xcbf29ce484222325ULL;
    /* the stubs' words, and 8 KiB around PTR (the pointer arguments) */
    for (uint32_t i = 0; i < 0x200; i++) h = (h ^ REGION[i]) * 0x100000001b3ULL;
    for (uint32_t i = 0x7000; i < 0x9000; i++) h = (h ^ REGION[i]) * 0x100000001b3ULL;
    return h;
}
static void print_int(const char *what, long long v) { printf("%s = %lld", what, v); }
static void print_float(const char *what, double v) { printf("%s = %a", what, v); }
static void done(void) { printf(" mem %016llx\n", (unsigned long long)checksum()); fflush(stdout); _exit(0); }
static void run_child(const char *label, pid_t pid) {
    int status = 0;
    waitpid(pid, &status, 0);
    if (WIFSIGNALED(status)) printf("%s: signal %d\n", label, WTERMSIG(status));
    else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) printf("%s: exit %d\n", label, WEXITSTATUS(status));
    fflush(stdout);
}
#define CHILD(label) fflush(stdout); pid = fork(); if (pid == 0) { alarm(1);
#define END_CHILD(label) } run_child(label, pid);
int main(void) {
    pid_t pid;
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core);
    init_region();
    (void)pattern;
"#,
    );
    let rows = 3;
    for call in calls {
        for row in 0..rows {
            let args: Vec<String> = call
                .sig
                .params
                .iter()
                .enumerate()
                .map(|(j, t)| argument(*t, row, j))
                .collect();
            let label = format!("{}#{row}", call.symbol);
            let invocation = format!("{}({})", call.symbol, args.join(", "));
            let body = match call.sig.result {
                None => format!("{invocation}; printf(\"{label} = void\");"),
                Some(t) if t.is_float() => {
                    format!("print_float(\"{label}\", (double){invocation});")
                }
                Some(_) => format!("print_int(\"{label}\", (long long){invocation});"),
            };
            c.push_str(&format!(
                "    CHILD(\"{label}\") {body} done(); END_CHILD(\"{label}\")\n"
            ));
        }
    }
    c.push_str("    return 0;\n}\n");
    c
}

/// The C expression for argument `j` of type `t` in row `row`.
fn argument(t: CType, row: usize, j: usize) -> String {
    match t {
        CType::I64 => match row {
            0 => "PTR".to_string(),
            1 => format!("PTR + {}", 64 * (j + 1)),
            _ => "3".to_string(),
        },
        CType::F32 | CType::F64 => {
            let v = ["-0.0", "1.5", "-2.25"][row];
            if t == CType::F32 {
                format!("{v}f")
            } else {
                v.to_string()
            }
        }
        _ => {
            // Small positive values: loops bounded by an argument (counting down
            // to zero, say) stay short.
            let v: i64 = [[1, 2, 5][j % 3], [7, 13, 3][j % 3], 2][row];
            format!("({}){v}", t.c())
        }
    }
}

/// A signature `(i64) -> i64` in `call_conv`.
pub fn unary_i64(call_conv: CallConv) -> Signature {
    let mut sig = Signature::new(call_conv);
    sig.params.push(AbiParam::new(types::I64));
    sig.returns.push(AbiParam::new(types::I64));
    sig
}
