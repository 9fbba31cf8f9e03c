//! Generated programs for the linked-program oracle (`tests/oracle/main.rs`):
//! small multi-module CLIF programs and single CLIF modules for the similar merge,
//! each with the C `main` that calls them. Deterministic from a seed (splitmix64).
//!
//! Every function is `(i64) -> i64`, in the `system_v` or the `tail` convention, and
//! its body comes from a few templates with constants from tiny sets, so identical
//! and near-identical functions are common. On purpose, programs contain what makes
//! binding names hard: locals with the same name in several modules (a module's
//! local `%g` next to another module's exported `%g`), exported, hidden and
//! preemptible functions called from other modules (which only declare them),
//! addresses taken (`func_addr`), called indirectly and compared, `return_call`
//! between `tail` functions, functions provided by the C file (some calling back
//! into CLIF) and, in some programs, an *opaque* module that is compiled and linked
//! but never shown to clif-merge. The call graph is acyclic but for bounded self
//! recursion, so every program terminates.
//!
//! Hidden linkage means what it means to separate compilation: visible to the
//! program's other modules, all of which clif-merge sees. So neither the C file nor
//! the opaque module refers to a hidden function; they reach hidden (and local)
//! functions through exported wrappers and through the CLIF code that calls them.
//!
//! The programs for the `MergingModule` arm ([`generate_address_program`]) are
//! also object files: besides CLIF functions, a module holds data objects of
//! function addresses and functions given as machine code
//! ([`Program::module_object`]), shown as comments in its CLIF text.

#![allow(dead_code)]

use crate::oracle_native::{BytesReloc, BytesSpec, DataSpec, ObjectSpec};
use clif_merge::FunctionSet;
use cranelift_codegen::binemit::Reloc;
use cranelift_codegen::ir::{AbiParam, Function, Signature, types};
use cranelift_codegen::isa::CallConv;
use cranelift_module::Linkage;
use std::collections::HashSet;
use std::fmt::Write as _;

/// splitmix64.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x6f72_6163_6c65_5f67)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: usize, hi: usize) -> usize {
        lo + self.below(hi - lo + 1)
    }

    pub fn chance(&mut self, percent: u32) -> bool {
        self.below(100) < percent as usize
    }

    pub fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

/// What a function calls or takes the address of.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A generated CLIF function (index into [`Program::functions`]).
    Fn(usize),
    /// A function the C file provides (index into [`Program::exts`]).
    Ext(usize),
}

/// A function body template; `x` is the argument.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Body {
    /// `x * mul + add`.
    Affine { mul: i64, add: i64 },
    /// `acc = add; for i in 0..(x & 7) { acc = acc * mul + i }`.
    Loop { mul: i64, add: i64 },
    /// `n = x & 15; n == 0 ? add : self(n - 1) * mul + n`.
    Rec { mul: i64, add: i64 },
    /// A chain of some 16 arithmetic instructions (its `shape`) using the constants
    /// `k`; calls `callee` in the middle, or with `tail_end` tail-calls it with the
    /// result (`return_call`, both `tail`). With [`EXTRA_BLOCK`] set in `shape`, an
    /// `if` (a block of its own) changes one value of the chain when it is nonzero;
    /// with [`SPLIT_BLOCK`], the chain goes on in a second block there.
    Long {
        shape: u64,
        k: [i64; 2],
        callee: Option<Target>,
        tail_end: bool,
    },
    /// `callee(x + add) * mul`.
    Call { callee: Target, add: i64, mul: i64 },
    /// `a(x) + b(x ^ k)`.
    Two { a: Target, b: Target, k: i64 },
    /// `call_indirect (func_addr callee)(x + add)`.
    Indirect { callee: Target, add: i64 },
    /// `return_call callee(x + add)` (both `tail`).
    TailCall { callee: Target, add: i64 },
    /// `return_call_indirect (func_addr callee)(x + add)` (both `tail`).
    TailIndirect { callee: Target, add: i64 },
    /// `callee(x)`: lets C call a local or `tail` function.
    Wrap(Target),
    /// `func_addr target` as an integer: C calls through it and compares it.
    AddrOf(Target),
    /// `func_addr a == func_addr b`.
    AddrEq(Target, Target),
    /// `symbol_value` of `target`'s symbol as an integer (`symbol colocated %f`
    /// where `target` is a non-preemptible function of the same module).
    SymAddrOf(Target),
    /// The function address stored at entry `index` of data object `data`
    /// ([`Program::data`], of the same module), read with `symbol_value` + `load`.
    LoadAddr { data: usize, index: usize },
    /// `symbol_value a == func_addr b`.
    MixedEq(Target, Target),
    /// `x == (symbol_value or func_addr) target`: C passes it addresses.
    IsAddr { target: Target, symbol: bool },
    /// `call_indirect x(add)`: calls the function whose address it is passed.
    CallPtr { add: i64 },
    /// `callee(func_addr arg) + x`: passes an address to a [`Body::CallPtr`] function.
    PassAddr { callee: Target, arg: Target },
    /// Machine code given with `define_function_bytes`, referring to `target`.
    Bytes(BytesCode, Target),
}

/// The machine code of a [`Body::Bytes`] function (x86_64).
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum BytesCode {
    /// `lea rax, [rip + target]; ret`: returns the target's address.
    AddrRet,
    /// `jmp target`: a tail jump, the arguments left as they are.
    Jump,
}

impl BytesCode {
    /// The code bytes and its one relocation: offset, kind and addend.
    pub fn code(self) -> (Vec<u8>, u32, Reloc, i64) {
        match self {
            // The displacement is at byte 3, relative to the end of the `lea`.
            BytesCode::AddrRet => (
                vec![0x48, 0x8d, 0x05, 0, 0, 0, 0, 0xc3],
                3,
                Reloc::X86PCRel4,
                -4,
            ),
            BytesCode::Jump => (vec![0xe9, 0, 0, 0, 0], 1, Reloc::X86CallPCRel4, -4),
        }
    }
}

/// A data object of a generated program: the addresses of functions, 8 bytes each.
#[derive(Clone, Debug)]
pub struct GenData {
    pub module: usize,
    pub symbol: String,
    pub linkage: Linkage,
    pub entries: Vec<Target>,
}

impl Body {
    /// The functions the body refers to, in declaration order.
    pub fn targets(&self) -> Vec<Target> {
        match self {
            Body::Affine { .. }
            | Body::Loop { .. }
            | Body::Rec { .. }
            | Body::LoadAddr { .. }
            | Body::CallPtr { .. } => vec![],
            Body::Long { callee, .. } => callee.iter().copied().collect(),
            Body::Call { callee, .. }
            | Body::Indirect { callee, .. }
            | Body::TailCall { callee, .. }
            | Body::TailIndirect { callee, .. }
            | Body::Wrap(callee)
            | Body::AddrOf(callee)
            | Body::SymAddrOf(callee)
            | Body::IsAddr { target: callee, .. }
            | Body::Bytes(_, callee) => vec![*callee],
            Body::Two { a, b, .. } | Body::AddrEq(a, b) | Body::MixedEq(a, b) => vec![*a, *b],
            Body::PassAddr { callee, arg } => vec![*callee, *arg],
        }
    }

    /// The same body with its targets replaced, in [`Self::targets`] order.
    pub fn with_targets(&self, targets: &[Target]) -> Body {
        let mut body = self.clone();
        let mut it = targets.iter().copied();
        match &mut body {
            Body::Affine { .. }
            | Body::Loop { .. }
            | Body::Rec { .. }
            | Body::LoadAddr { .. }
            | Body::CallPtr { .. } => {}
            Body::Long { callee, .. } => {
                if let Some(c) = callee {
                    *c = it.next().expect("target");
                }
            }
            Body::Call { callee, .. }
            | Body::Indirect { callee, .. }
            | Body::TailCall { callee, .. }
            | Body::TailIndirect { callee, .. }
            | Body::Wrap(callee)
            | Body::AddrOf(callee)
            | Body::SymAddrOf(callee)
            | Body::IsAddr { target: callee, .. }
            | Body::Bytes(_, callee) => *callee = it.next().expect("target"),
            Body::Two { a, b, .. }
            | Body::AddrEq(a, b)
            | Body::MixedEq(a, b)
            | Body::PassAddr { callee: a, arg: b } => {
                *a = it.next().expect("target");
                *b = it.next().expect("target");
            }
        }
        body
    }

    /// Whether the body is one of the helpers only C calls.
    pub fn is_helper(&self) -> bool {
        matches!(
            self,
            Body::Wrap(_)
                | Body::AddrOf(_)
                | Body::AddrEq(..)
                | Body::SymAddrOf(_)
                | Body::LoadAddr { .. }
                | Body::MixedEq(..)
                | Body::IsAddr { .. }
                | Body::CallPtr { .. }
                | Body::PassAddr { .. }
                | Body::Bytes(..)
        )
    }

    /// The body with one constant changed (a near duplicate).
    fn tweaked(&self, rng: &mut Rng) -> Body {
        let mut body = self.clone();
        let delta = if rng.chance(50) { 1 } else { 2 };
        match &mut body {
            Body::Affine { mul, add } | Body::Loop { mul, add } | Body::Rec { mul, add } => {
                if rng.chance(50) {
                    *mul += delta
                } else {
                    *add += delta
                }
            }
            Body::Long { k, .. } => k[rng.below(2)] += delta,
            Body::Call { add, .. } => *add += delta,
            Body::Two { k, .. } => *k += delta,
            Body::Indirect { add, .. }
            | Body::TailCall { add, .. }
            | Body::TailIndirect { add, .. } => *add += delta,
            _ => {}
        }
        body
    }
}

/// One generated CLIF function.
#[derive(Clone, Debug)]
pub struct GenFn {
    /// Its module.
    pub module: usize,
    /// Its CLIF name as spelled after `function` (`%g`, `u0:3`).
    pub clif: String,
    /// Its symbol (`g`, `u0_3`): what C calls it.
    pub symbol: String,
    pub linkage: Linkage,
    /// `tail` calling convention (else `system_v`).
    pub tail: bool,
    pub body: Body,
    /// 0 for leaves; calls only go to lower layers (and to C).
    pub layer: usize,
}

/// A function the C file provides.
#[derive(Clone, Debug)]
pub struct Ext {
    /// How CLIF spells it (`%ext0`, `%s3_merged`, `u0:9`).
    pub clif: String,
    /// Its symbol.
    pub symbol: String,
    /// Its C body, with the argument `x`.
    pub c_body: String,
    /// The CLIF function it calls back, if any.
    pub calls: Option<usize>,
}

/// A generated program.
#[derive(Clone, Debug)]
pub struct Program {
    pub seed: u64,
    /// Number of CLIF modules.
    pub modules: usize,
    /// A module compiled and linked but never shown to clif-merge.
    pub opaque: Option<usize>,
    pub functions: Vec<GenFn>,
    pub exts: Vec<Ext>,
    /// Data objects holding function addresses (only [`generate_address_program`]
    /// makes them).
    pub data: Vec<GenData>,
}

/// Inputs the C `main` calls every function with.
pub const INPUTS: [i64; 10] = [0, 1, 2, 5, 9, 14, 15, -1, -8, 1_000_003];

fn linkage_name(linkage: Linkage) -> &'static str {
    match linkage {
        Linkage::Local => "local",
        Linkage::Hidden => "hidden",
        Linkage::Export => "export",
        Linkage::Preemptible => "preemptible",
        Linkage::Import => "import",
    }
}

/// Emits one function body: values are numbered as they are made.
struct Emitter {
    text: String,
    next: u32,
}

impl Emitter {
    fn value(&mut self, rhs: &str) -> String {
        self.next += 1;
        let v = format!("v{}", self.next);
        let _ = writeln!(self.text, "    {v} = {rhs}");
        v
    }

    fn line(&mut self, line: &str) {
        let _ = writeln!(self.text, "    {line}");
    }

    fn label(&mut self, line: &str) {
        let _ = writeln!(self.text, "{line}");
    }
}

impl Program {
    /// The CLIF spelling and convention of a target.
    fn target(&self, t: Target) -> (&str, bool) {
        match t {
            Target::Fn(i) => (&self.functions[i].clif, self.functions[i].tail),
            Target::Ext(e) => (&self.exts[e].clif, false),
        }
    }

    /// The symbol of a target.
    pub fn target_symbol(&self, t: Target) -> &str {
        match t {
            Target::Fn(i) => &self.functions[i].symbol,
            Target::Ext(e) => &self.exts[e].symbol,
        }
    }

    fn target_tail(&self, t: Target) -> bool {
        self.target(t).1
    }

    /// Whether module `m` refers to `t` as `colocated` (in its own object, not
    /// preemptible).
    fn colocated(&self, m: usize, t: Target) -> bool {
        match t {
            Target::Fn(i) => {
                let f = &self.functions[i];
                f.module == m && f.linkage != Linkage::Preemptible
            }
            Target::Ext(_) => false,
        }
    }

    /// Function `i` as CLIF text.
    pub fn function_clif(&self, i: usize) -> String {
        let f = &self.functions[i];
        let conv = |tail: bool| if tail { "tail" } else { "system_v" };
        let mut out = format!("function {}(i64) -> i64 {} {{\n", f.clif, conv(f.tail));
        let targets = f.body.targets();
        let indirect = matches!(f.body, Body::Indirect { .. } | Body::TailIndirect { .. });
        for (n, &t) in targets.iter().enumerate() {
            let (name, tail) = self.target(t);
            if indirect {
                let _ = writeln!(out, "    sig{n} = (i64) -> i64 {}", conv(tail));
            }
            let _ = writeln!(out, "    fn{n} = {name}(i64) -> i64 {}", conv(tail));
        }
        if matches!(f.body, Body::Rec { .. }) {
            let _ = writeln!(out, "    fn0 = {}(i64) -> i64 {}", f.clif, conv(f.tail));
        }
        // Symbols read with `symbol_value`: a function (also declared above, which
        // tells its signature) or a data object of the module.
        let symbol = match f.body {
            Body::SymAddrOf(t)
            | Body::MixedEq(t, _)
            | Body::IsAddr {
                target: t,
                symbol: true,
            } => Some((self.target(t).0.to_string(), self.colocated(f.module, t))),
            Body::LoadAddr { data, .. } => Some((format!("%{}", self.data[data].symbol), true)),
            _ => None,
        };
        if let Some((name, colocated)) = symbol {
            let colocated = if colocated { "colocated " } else { "" };
            let _ = writeln!(out, "    gv0 = symbol {colocated}{name}");
        }
        if matches!(f.body, Body::CallPtr { .. }) {
            let _ = writeln!(out, "    sig0 = (i64) -> i64 system_v");
        }
        let mut e = Emitter {
            text: String::new(),
            next: 0,
        };
        e.label("block0(v0: i64):");
        match &f.body {
            Body::Affine { mul, add } => {
                let m = e.value(&format!("iconst.i64 {mul}"));
                let p = e.value(&format!("imul v0, {m}"));
                let a = e.value(&format!("iconst.i64 {add}"));
                let r = e.value(&format!("iadd {p}, {a}"));
                e.line(&format!("return {r}"));
            }
            Body::Loop { mul, add } => {
                let seven = e.value("iconst.i64 7");
                let n = e.value(&format!("band v0, {seven}"));
                let init = e.value(&format!("iconst.i64 {add}"));
                let zero = e.value("iconst.i64 0");
                e.line(&format!("jump block1({zero}, {init})"));
                e.label("block1(v100: i64, v101: i64):");
                let more = e.value(&format!("icmp slt v100, {n}"));
                e.line(&format!("brif {more}, block2, block3"));
                e.label("block2:");
                let m = e.value(&format!("iconst.i64 {mul}"));
                let p = e.value(&format!("imul v101, {m}"));
                let acc = e.value(&format!("iadd {p}, v100"));
                let one = e.value("iconst.i64 1");
                let i = e.value(&format!("iadd v100, {one}"));
                e.line(&format!("jump block1({i}, {acc})"));
                e.label("block3:");
                e.line("return v101");
            }
            Body::Rec { mul, add } => {
                let mask = e.value("iconst.i64 15");
                let n = e.value(&format!("band v0, {mask}"));
                e.line(&format!("brif {n}, block1, block2"));
                e.label("block1:");
                let one = e.value("iconst.i64 1");
                let d = e.value(&format!("isub {n}, {one}"));
                let r = e.value(&format!("call fn0({d})"));
                let m = e.value(&format!("iconst.i64 {mul}"));
                let p = e.value(&format!("imul {r}, {m}"));
                let s = e.value(&format!("iadd {p}, {n}"));
                e.line(&format!("return {s}"));
                e.label("block2:");
                let a = e.value(&format!("iconst.i64 {add}"));
                e.line(&format!("return {a}"));
            }
            Body::Long {
                shape,
                k,
                callee,
                tail_end,
            } => {
                let mut shape_rng = Rng::new(*shape & !(EXTRA_BLOCK | SPLIT_BLOCK | STRETCH_MASK));
                let stretch = (*shape & STRETCH_MASK) >> STRETCH_SHIFT;
                let mut values = vec!["v0".to_string()];
                let k0 = e.value(&format!("iconst.i64 {}", k[0]));
                let first = e.value(&format!("imul v0, {k0}"));
                values.push(first);
                const OPS: [&str; 6] = ["iadd", "isub", "imul", "bxor", "bor", "rotl"];
                for step in 0..14 {
                    if step == 10 && *shape & (EXTRA_BLOCK | SPLIT_BLOCK) != 0 {
                        // Leaves the chain's other draws as they are: the members
                        // with and without the extra block differ only by it.
                        let last = values.pop().expect("value");
                        if *shape & EXTRA_BLOCK != 0 {
                            e.line(&format!("brif {last}, block1, block2({last})"));
                            e.label("block1:");
                            let v = e.value(&format!("imul {last}, {k0}"));
                            e.line(&format!("jump block2({v})"));
                        } else {
                            e.line(&format!("jump block2({last})"));
                        }
                        e.label("block2(v200: i64):");
                        values.push("v200".to_string());
                    }
                    if step == 3 && stretch != 0 {
                        // The member's own stretch: it replaces the chain's last
                        // value (so the chain's other draws stay as they are) and
                        // escapes into the rest of the chain.
                        let last = values.pop().expect("value");
                        let v = match stretch {
                            1 => e.value(&format!("iadd {last}, {k0}")),
                            2 => {
                                let y = e.value(&format!("bxor {last}, {k0}"));
                                e.value(&format!("imul {y}, {last}"))
                            }
                            3 => {
                                let y = e.value(&format!("isub {last}, {k0}"));
                                e.value(&format!("rotl {y}, {k0}"))
                            }
                            _ => e.value(&format!("band {last}, {k0}")),
                        };
                        values.push(v);
                    }
                    if step == 7 {
                        let k1 = e.value(&format!("iconst.i64 {}", k[1]));
                        let last = values.last().expect("value").clone();
                        let v = e.value(&format!("iadd {last}, {k1}"));
                        values.push(v);
                        continue;
                    }
                    if step == 5 && callee.is_some() && !*tail_end {
                        let last = values.last().expect("value").clone();
                        let v = e.value(&format!("call fn0({last})"));
                        values.push(v);
                        continue;
                    }
                    let op = OPS[shape_rng.below(OPS.len())];
                    let last = values.last().expect("value").clone();
                    let other = values[shape_rng.below(values.len())].clone();
                    let v = e.value(&format!("{op} {last}, {other}"));
                    values.push(v);
                }
                let last = values.last().expect("value").clone();
                if *tail_end {
                    e.line(&format!("return_call fn0({last})"));
                } else {
                    e.line(&format!("return {last}"));
                }
            }
            Body::Call { add, mul, .. } => {
                let a = e.value(&format!("iconst.i64 {add}"));
                let s = e.value(&format!("iadd v0, {a}"));
                let r = e.value(&format!("call fn0({s})"));
                let m = e.value(&format!("iconst.i64 {mul}"));
                let p = e.value(&format!("imul {r}, {m}"));
                e.line(&format!("return {p}"));
            }
            Body::Two { k, .. } => {
                let r1 = e.value("call fn0(v0)");
                let kk = e.value(&format!("iconst.i64 {k}"));
                let x = e.value(&format!("bxor v0, {kk}"));
                let r2 = e.value(&format!("call fn1({x})"));
                let s = e.value(&format!("iadd {r1}, {r2}"));
                e.line(&format!("return {s}"));
            }
            Body::Indirect { add, .. } | Body::TailIndirect { add, .. } => {
                let p = e.value("func_addr.i64 fn0");
                let a = e.value(&format!("iconst.i64 {add}"));
                let s = e.value(&format!("iadd v0, {a}"));
                if matches!(f.body, Body::TailIndirect { .. }) {
                    e.line(&format!("return_call_indirect sig0, {p}({s})"));
                } else {
                    let r = e.value(&format!("call_indirect sig0, {p}({s})"));
                    e.line(&format!("return {r}"));
                }
            }
            Body::TailCall { add, .. } => {
                let a = e.value(&format!("iconst.i64 {add}"));
                let s = e.value(&format!("iadd v0, {a}"));
                e.line(&format!("return_call fn0({s})"));
            }
            Body::Wrap(_) => {
                let r = e.value("call fn0(v0)");
                e.line(&format!("return {r}"));
            }
            Body::AddrOf(_) => {
                let p = e.value("func_addr.i64 fn0");
                e.line(&format!("return {p}"));
            }
            Body::AddrEq(..) => {
                let a = e.value("func_addr.i64 fn0");
                let b = e.value("func_addr.i64 fn1");
                let c = e.value(&format!("icmp eq {a}, {b}"));
                let r = e.value(&format!("uextend.i64 {c}"));
                e.line(&format!("return {r}"));
            }
            Body::SymAddrOf(_) => {
                let p = e.value("symbol_value.i64 gv0");
                e.line(&format!("return {p}"));
            }
            Body::LoadAddr { index, .. } => {
                let base = e.value("symbol_value.i64 gv0");
                let p = e.value(&format!(
                    "load.i64 notrap aligned readonly {base}+{}",
                    8 * index
                ));
                e.line(&format!("return {p}"));
            }
            Body::MixedEq(..) => {
                let a = e.value("symbol_value.i64 gv0");
                let b = e.value("func_addr.i64 fn1");
                let c = e.value(&format!("icmp eq {a}, {b}"));
                let r = e.value(&format!("uextend.i64 {c}"));
                e.line(&format!("return {r}"));
            }
            Body::IsAddr { symbol, .. } => {
                let p = if *symbol {
                    e.value("symbol_value.i64 gv0")
                } else {
                    e.value("func_addr.i64 fn0")
                };
                let c = e.value(&format!("icmp eq v0, {p}"));
                let r = e.value(&format!("uextend.i64 {c}"));
                e.line(&format!("return {r}"));
            }
            Body::CallPtr { add } => {
                let a = e.value(&format!("iconst.i64 {add}"));
                let r = e.value(&format!("call_indirect sig0, v0({a})"));
                e.line(&format!("return {r}"));
            }
            Body::PassAddr { .. } => {
                let p = e.value("func_addr.i64 fn1");
                let r = e.value(&format!("call fn0({p})"));
                let s = e.value(&format!("iadd {r}, v0"));
                e.line(&format!("return {s}"));
            }
            Body::Bytes(code, t) => {
                // Never parsed: `module_clif` shows it as a comment.
                let _ = (code, t);
                e.line("; machine code");
            }
        }
        out.push_str(&e.text);
        out.push_str("}\n");
        out
    }

    /// The functions of module `m`, in definition order.
    pub fn module_functions(&self, m: usize) -> Vec<usize> {
        (0..self.functions.len())
            .filter(|&i| self.functions[i].module == m)
            .collect()
    }

    /// Module `m` as CLIF text, each function preceded by its linkage; functions
    /// given as machine code and data objects as comments.
    pub fn module_clif(&self, m: usize) -> String {
        let mut out = String::new();
        for i in self.module_functions(m) {
            let f = &self.functions[i];
            if let Body::Bytes(code, t) = f.body {
                let what = match code {
                    BytesCode::AddrRet => "lea rax, [rip + {}]; ret",
                    BytesCode::Jump => "jmp {}",
                };
                let _ = writeln!(
                    out,
                    "; {} {} (machine code, define_function_bytes): {}\n",
                    linkage_name(f.linkage),
                    f.clif,
                    what.replace("{}", self.target_symbol(t))
                );
                continue;
            }
            let _ = writeln!(out, "; {}", linkage_name(f.linkage));
            out.push_str(&self.function_clif(i));
            out.push('\n');
        }
        for d in self.data.iter().filter(|d| d.module == m) {
            let entries: Vec<String> = d
                .entries
                .iter()
                .map(|&t| format!("&{}", self.target_symbol(t)))
                .collect();
            let _ = writeln!(
                out,
                "; {} data %{} = [{}]",
                linkage_name(d.linkage),
                d.symbol,
                entries.join(", ")
            );
        }
        out
    }

    /// The CLIF functions of module `m` (not those given as machine code), in
    /// definition order.
    fn clif_functions(&self, m: usize) -> Vec<usize> {
        self.module_functions(m)
            .into_iter()
            .filter(|&i| !matches!(self.functions[i].body, Body::Bytes(..)))
            .collect()
    }

    /// The CLIF functions of module `m`, parsed, with their linkage.
    fn parsed_functions(&self, m: usize) -> Vec<(Function, Linkage)> {
        let text = self.module_clif(m);
        let parsed = cranelift_reader::parse_functions(&text)
            .unwrap_or_else(|e| panic!("generated CLIF does not parse: {e}\n{text}"));
        let indices = self.clif_functions(m);
        assert_eq!(parsed.len(), indices.len(), "seed {}: {text}", self.seed);
        parsed
            .into_iter()
            .zip(indices)
            .map(|(func, i)| (func, self.functions[i].linkage))
            .collect()
    }

    /// The signature of target `t`: every function is `(i64) -> i64`.
    fn signature(&self, t: Target) -> Signature {
        let call_conv = if self.target_tail(t) {
            CallConv::Tail
        } else {
            CallConv::SystemV
        };
        let mut sig = Signature::new(call_conv);
        sig.params.push(AbiParam::new(types::I64));
        sig.returns.push(AbiParam::new(types::I64));
        sig
    }

    /// Module `m` as an object file holds it: its CLIF functions, its functions
    /// given as machine code, its data objects.
    pub fn module_object(&self, m: usize) -> ObjectSpec {
        let bytes = self
            .module_functions(m)
            .into_iter()
            .filter_map(|i| {
                let f = &self.functions[i];
                let Body::Bytes(code, t) = f.body else {
                    return None;
                };
                let (code, offset, kind, addend) = code.code();
                Some(BytesSpec {
                    symbol: f.symbol.clone(),
                    linkage: f.linkage,
                    signature: self.signature(Target::Fn(i)),
                    code,
                    relocs: vec![BytesReloc {
                        offset,
                        kind,
                        addend,
                        target: self.target_symbol(t).to_string(),
                        signature: self.signature(t),
                    }],
                })
            })
            .collect();
        let data = self
            .data
            .iter()
            .filter(|d| d.module == m)
            .map(|d| DataSpec {
                symbol: d.symbol.clone(),
                linkage: d.linkage,
                writable: false,
                entries: d
                    .entries
                    .iter()
                    .map(|&t| (self.target_symbol(t).to_string(), self.signature(t)))
                    .collect(),
            })
            .collect();
        ObjectSpec {
            functions: self.parsed_functions(m),
            data,
            bytes,
            aliases: Vec::new(),
        }
    }

    /// Module `m` as clif-merge sees it.
    pub fn module_set(&self, m: usize) -> FunctionSet {
        let text = self.module_clif(m);
        let parsed = cranelift_reader::parse_functions(&text)
            .unwrap_or_else(|e| panic!("generated CLIF does not parse: {e}\n{text}"));
        let mut set = FunctionSet::new();
        for (func, i) in parsed.into_iter().zip(self.clif_functions(m)) {
            set.push(func, self.functions[i].linkage)
                .unwrap_or_else(|e| panic!("seed {}: {e}", self.seed));
        }
        set
    }

    /// The module's name as given to clif-merge.
    pub fn module_name(m: usize) -> String {
        format!("m{m}")
    }

    /// The function whose address function `i` returns, if it is a getter: a
    /// `func_addr`, `symbol_value`, data or machine-code getter, or a wrapper of one.
    pub fn getter_target(&self, i: usize) -> Option<Target> {
        match self.functions[i].body {
            Body::AddrOf(t) | Body::SymAddrOf(t) | Body::Bytes(BytesCode::AddrRet, t) => Some(t),
            Body::LoadAddr { data, index } => Some(self.data[data].entries[index]),
            Body::Wrap(Target::Fn(j)) => self.getter_target(j),
            _ => None,
        }
    }

    /// Whether calling `t` computes from the argument only: a `system_v` function
    /// that is not a getter or comparison (whose results are addresses or depend on
    /// them) nor one that calls or compares what it is passed.
    fn computes(&self, t: Target) -> bool {
        let Target::Fn(i) = t else {
            return true;
        };
        !self.functions[i].tail
            && self.getter_target(i).is_none()
            && !matches!(
                self.functions[i].body,
                Body::AddrEq(..) | Body::MixedEq(..) | Body::IsAddr { .. } | Body::CallPtr { .. }
            )
    }

    /// Whether the C `main` calls function `i` on [`INPUTS`]: a visible one that
    /// [`Self::computes`].
    fn called_on_inputs(&self, i: usize) -> bool {
        matches!(
            self.functions[i].linkage,
            Linkage::Export | Linkage::Preemptible
        ) && self.computes(Target::Fn(i))
    }

    /// The C file: the functions CLIF imports from C, and a `main` that calls every
    /// visible `system_v` function on [`INPUTS`], calls through the addresses the
    /// getters return and the exported data objects hold, prints which function
    /// addresses compare equal (lines starting with `addr`: significant only where
    /// addresses are), and passes every address to the functions that compare
    /// (`addr-is` lines) or call (`via` lines) what they are passed.
    pub fn c_main(&self) -> String {
        let mut c = String::from("#include <stdio.h>\n#include <stdint.h>\n");
        c.push_str("typedef int64_t (*fn_t)(int64_t);\n");
        // What C may name: exported and preemptible functions.
        let visible = |f: &GenFn| matches!(f.linkage, Linkage::Export | Linkage::Preemptible);
        for f in &self.functions {
            if visible(f) {
                let _ = writeln!(c, "extern int64_t {}(int64_t);", f.symbol);
            }
        }
        for d in &self.data {
            if d.linkage == Linkage::Export {
                let _ = writeln!(c, "extern const int64_t {}[{}];", d.symbol, d.entries.len());
            }
        }
        for ext in &self.exts {
            let _ = writeln!(
                c,
                "int64_t {}(int64_t x) {{ return (int64_t)({}); }}",
                ext.symbol, ext.c_body
            );
        }
        c.push_str("int main(void) {\n    setvbuf(stdout, NULL, _IOLBF, 0);\n");
        let inputs: Vec<String> = INPUTS.iter().map(|x| format!("{x}LL")).collect();
        let _ = writeln!(
            c,
            "    static const int64_t xs[] = {{{}}};\n    const int n = (int)(sizeof xs / sizeof xs[0]);",
            inputs.join(", ")
        );
        let callable: Vec<&GenFn> = (0..self.functions.len())
            .filter(|&i| self.called_on_inputs(i))
            .map(|i| &self.functions[i])
            .collect();
        c.push_str("    for (int i = 0; i < n; i++) {\n");
        for f in &callable {
            let _ = writeln!(
                c,
                "        printf(\"{0}(%lld) = %lld\\n\", (long long)xs[i], (long long){0}(xs[i]));",
                f.symbol
            );
        }
        c.push_str("    }\n");
        // Addresses: every visible function's, every visible getter's result and
        // every entry of an exported data object; each with whether C calls
        // through it (a function that computes).
        let mut addrs: Vec<(String, String, bool)> = Vec::new();
        for (i, f) in self.functions.iter().enumerate() {
            if visible(f) {
                addrs.push((
                    f.symbol.clone(),
                    format!("(const void *){}", f.symbol),
                    self.computes(Target::Fn(i)),
                ));
            }
        }
        for (i, f) in self.functions.iter().enumerate() {
            let Some(t) = self.getter_target(i) else {
                continue;
            };
            if !visible(f) {
                continue;
            }
            let _ = writeln!(c, "    int64_t ptr_{0} = {0}(0);", f.symbol);
            let name = format!("*{}", f.symbol);
            let expr = format!("(const void *)ptr_{}", f.symbol);
            addrs.push((name, expr, self.computes(t)));
        }
        for d in &self.data {
            if d.linkage != Linkage::Export {
                continue;
            }
            for (k, &t) in d.entries.iter().enumerate() {
                addrs.push((
                    format!("{}[{k}]", d.symbol),
                    format!("(const void *){}[{k}]", d.symbol),
                    self.computes(t),
                ));
            }
        }
        for (name, expr, through) in &addrs {
            if *through
                && !self
                    .functions
                    .iter()
                    .any(|f| visible(f) && f.symbol == *name)
            {
                let _ = writeln!(
                    c,
                    "    for (int i = 0; i < n; i++) printf(\"{name}(%lld) = %lld\\n\", (long long)xs[i], (long long)((fn_t){expr})(xs[i]));",
                );
            }
        }
        let _ = writeln!(
            c,
            "    const void *addrs[] = {{{}}};",
            addrs
                .iter()
                .map(|(_, e, _)| e.as_str())
                .chain(["0"])
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            c,
            "    static const char *names[] = {{{}}};",
            addrs
                .iter()
                .map(|(n, _, _)| format!("\"{n}\""))
                .chain(["\"\"".to_string()])
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            c,
            "    for (int i = 0; i < {0}; i++) for (int j = i + 1; j < {0}; j++)\n        printf(\"addr %s == %s: %d\\n\", names[i], names[j], addrs[i] == addrs[j]);",
            addrs.len()
        );
        for f in &self.functions {
            if matches!(f.body, Body::AddrEq(..) | Body::MixedEq(..)) && visible(f) {
                let _ = writeln!(
                    c,
                    "    printf(\"addr-cmp {0} = %lld\\n\", (long long){0}(0));",
                    f.symbol
                );
            }
        }
        for f in &self.functions {
            if !visible(f) {
                continue;
            }
            if let Body::IsAddr { .. } = f.body {
                let _ = writeln!(
                    c,
                    "    for (int i = 0; i < {0}; i++) printf(\"addr-is {1}(%s) = %lld\\n\", names[i], (long long){1}((int64_t)addrs[i]));",
                    addrs.len(),
                    f.symbol
                );
            }
            if let Body::CallPtr { .. } = f.body {
                for (name, expr, through) in &addrs {
                    if *through {
                        let _ = writeln!(
                            c,
                            "    printf(\"via {0}({name}) = %lld\\n\", (long long){0}((int64_t){expr}));",
                            f.symbol
                        );
                    }
                }
            }
        }
        c.push_str("    return 0;\n}\n");
        c
    }
}

const SHARED_NAMES: [&str; 4] = ["g", "h", "k", "sq"];

/// State of the multi-module generator.
struct Gen {
    rng: Rng,
    program: Program,
    /// Names each module defines or imports (a module cannot define a name it
    /// imports, nor import one it defines).
    names: Vec<HashSet<String>>,
    /// Visible names defined anywhere.
    visible: HashSet<String>,
}

impl Gen {
    /// A generator of a program of `modules` modules (`opaque` the one clif-merge
    /// never sees, if any), from `rng`, with nothing in it yet.
    fn new(rng: Rng, seed: u64, modules: usize, opaque: Option<usize>) -> Self {
        Self {
            rng,
            program: Program {
                seed,
                modules,
                opaque,
                functions: Vec::new(),
                exts: Vec::new(),
                data: Vec::new(),
            },
            names: vec![HashSet::new(); modules],
            visible: HashSet::new(),
        }
    }
}

impl Gen {
    fn linkage(&mut self) -> Linkage {
        match self.rng.below(100) {
            0..45 => Linkage::Local,
            45..75 => Linkage::Export,
            75..95 => Linkage::Hidden,
            _ => Linkage::Preemptible,
        }
    }

    /// A fresh name for a function of module `m` with `linkage`: often one of the
    /// shared names (when still allowed), else a unique one.
    fn name(&mut self, m: usize, linkage: Linkage, avoid: &[String]) -> String {
        if self.rng.chance(55) {
            let allowed: Vec<&str> = SHARED_NAMES
                .iter()
                .copied()
                .filter(|n| {
                    !self.names[m].contains(*n)
                        && !avoid.iter().any(|a| a == n)
                        && (linkage == Linkage::Local || !self.visible.contains(*n))
                })
                .collect();
            if !allowed.is_empty() {
                return self.rng.pick(&allowed).to_string();
            }
        }
        format!("f{m}_{}", self.program.functions.len())
    }

    /// Whether module `m` may refer to target `t`.
    fn reachable(&self, m: usize, t: Target) -> bool {
        match t {
            Target::Ext(_) => true,
            Target::Fn(i) => {
                let f = &self.program.functions[i];
                let outside = self.program.opaque == Some(m);
                f.module == m
                    || (f.linkage != Linkage::Local
                        && !(outside && f.linkage == Linkage::Hidden)
                        && !self
                            .program
                            .functions
                            .iter()
                            .any(|g| g.module == m && g.symbol == f.symbol))
            }
        }
    }

    /// Records that module `m` refers to `t`.
    fn refer(&mut self, m: usize, t: Target) {
        let symbol = self.program.target_symbol(t).to_string();
        self.names[m].insert(symbol);
    }

    /// Targets module `m` may call from `layer`, `tail` ones only if `tail`.
    fn candidates(&self, m: usize, layer: usize, only_tail: bool) -> Vec<Target> {
        let mut out: Vec<Target> = (0..self.program.functions.len())
            .filter(|&i| {
                let f = &self.program.functions[i];
                f.layer < layer && !f.body.is_helper() && (!only_tail || f.tail)
            })
            .map(Target::Fn)
            .filter(|&t| self.reachable(m, t))
            .collect();
        if !only_tail && layer >= 1 {
            out.extend((0..self.program.exts.len()).map(Target::Ext));
        }
        out
    }

    /// A body for a function of module `m` in `layer`.
    fn body(&mut self, m: usize, layer: usize, tail: bool) -> Body {
        let mul = self.rng.pick(&[7, 7, 7, 9]);
        let add = self.rng.pick(&[3, 3, 4]);
        if layer == 0 {
            return match self.rng.below(100) {
                0..35 => Body::Affine { mul, add },
                35..60 => Body::Loop { mul, add },
                60..80 => Body::Rec { mul, add },
                _ => Body::Long {
                    shape: self.rng.below(2) as u64,
                    k: [mul, add],
                    callee: None,
                    tail_end: false,
                },
            };
        }
        let all = self.candidates(m, layer, false);
        let tails = self.candidates(m, layer, true);
        let callee = self.rng.pick(&all);
        let r = self.rng.below(100);
        if tail && !tails.is_empty() && r < 35 {
            let callee = self.rng.pick(&tails);
            return match self.rng.below(3) {
                0 => Body::TailIndirect { callee, add },
                1 => Body::Long {
                    shape: self.rng.below(2) as u64,
                    k: [mul, add],
                    callee: Some(callee),
                    tail_end: true,
                },
                _ => Body::TailCall { callee, add },
            };
        }
        match r {
            0..35 => Body::Call { callee, add, mul },
            35..55 => Body::Two {
                a: callee,
                b: self.rng.pick(&all),
                k: add,
            },
            55..75 => Body::Indirect { callee, add },
            _ => Body::Long {
                shape: self.rng.below(2) as u64,
                k: [mul, add],
                callee: Some(callee),
                tail_end: false,
            },
        }
    }

    /// A copy of an existing body for module `m`: targets it cannot refer to are
    /// replaced by its own function of the same name (a namesake local) if any,
    /// else by another target of the same convention.
    fn copy_body(&mut self, m: usize, layer: usize, source: usize) -> Option<(Body, bool)> {
        let src = self.program.functions[source].clone();
        let mut targets = Vec::new();
        for t in src.body.targets() {
            if self.reachable(m, t) {
                targets.push(t);
                continue;
            }
            let symbol = self.program.target_symbol(t).to_string();
            let tail = self.program.target_tail(t);
            let namesake = (0..self.program.functions.len()).find(|&i| {
                let f = &self.program.functions[i];
                f.module == m && f.symbol == symbol && f.tail == tail && f.layer < layer
            });
            let replacement = match namesake {
                Some(i) => Target::Fn(i),
                None => {
                    let options: Vec<Target> = self
                        .candidates(m, layer, tail)
                        .into_iter()
                        .filter(|&c| self.program.target_tail(c) == tail)
                        .collect();
                    if options.is_empty() {
                        return None;
                    }
                    self.rng.pick(&options)
                }
            };
            targets.push(replacement);
        }
        let mut body = src.body.with_targets(&targets);
        if self.rng.chance(30) {
            body = body.tweaked(&mut self.rng);
        }
        Some((body, src.tail))
    }

    fn function(&mut self, m: usize, layer: usize) {
        let linkage = self.linkage();
        let sources: Vec<usize> = (0..self.program.functions.len())
            .filter(|&i| {
                self.program.functions[i].layer == layer
                    && !self.program.functions[i].body.is_helper()
            })
            .collect();
        let copied = if !sources.is_empty() && self.rng.chance(45) {
            let source = self.rng.pick(&sources);
            self.copy_body(m, layer, source)
        } else {
            None
        };
        let (body, tail) = match copied {
            Some(copy) => copy,
            None => {
                let tail = self.rng.chance(30);
                (self.body(m, layer, tail), tail)
            }
        };
        // Named after the body is chosen: never after a function it refers to.
        let avoid: Vec<String> = body
            .targets()
            .into_iter()
            .map(|t| self.program.target_symbol(t).to_string())
            .collect();
        let symbol = self.name(m, linkage, &avoid);
        self.push(m, symbol, linkage, tail, body, layer);
    }

    fn push(
        &mut self,
        m: usize,
        symbol: String,
        linkage: Linkage,
        tail: bool,
        body: Body,
        layer: usize,
    ) -> usize {
        for t in body.targets() {
            self.refer(m, t);
        }
        self.names[m].insert(symbol.clone());
        if linkage != Linkage::Local {
            self.visible.insert(symbol.clone());
        }
        self.program.functions.push(GenFn {
            module: m,
            clif: format!("%{symbol}"),
            symbol,
            linkage,
            tail,
            body,
            layer,
        });
        self.program.functions.len() - 1
    }
}

/// A multi-module program: 2 to 4 modules clif-merge sees, sometimes one more it
/// does not (the opaque module, compiled and linked as it is), three C functions
/// (one calling back into a visible CLIF leaf), and helpers that let C reach every
/// function and address.
pub fn generate_program(seed: u64) -> Program {
    let mut rng = Rng::new(seed);
    let merged = rng.range(2, 4);
    let opaque = rng.chance(30).then_some(merged);
    let modules = merged + usize::from(opaque.is_some());
    let mut g = Gen::new(rng, seed, modules, opaque);
    for m in 0..modules {
        for _ in 0..g.rng.range(2, 4) {
            g.function(m, 0);
        }
    }
    add_exts(&mut g);
    add_layers(&mut g, modules, |_, _, _| {});
    add_helpers(&mut g, modules);
    g.program
}

/// A program for the `MergingModule` arm of the oracle: [`generate_program`]'s kind
/// of program (without an opaque module: every module goes through the wrapper)
/// where function addresses are everywhere. Every module has *twins* (exact copies
/// of one of its functions under other names and linkages), and for twins and
/// other functions address getters of every kind: `func_addr`, `symbol_value` of
/// the function's symbol, a data object holding the address (exported and read by
/// C, or local and read by CLIF with `symbol_value` + `load`) and, with
/// `machine_code` (x86_64 only), machine code given with `define_function_bytes`
/// (`lea rax, [rip + f]; ret`). Twins' getters are mostly of one kind, so that
/// they are identical but for whose address they return (`retf` and `retg`). Also:
/// machine code that tail-jumps to a function, address comparisons in CLIF
/// (`func_addr` against `symbol_value`), functions that compare their argument with
/// an address or call it, and functions that pass an address to one that calls it.
pub fn generate_address_program(seed: u64, machine_code: bool) -> Program {
    let mut rng = Rng::new(seed ^ 0x4144_4452_4553_5345);
    let modules = rng.range(2, 3);
    let mut g = Gen::new(rng, seed, modules, None);
    for m in 0..modules {
        for _ in 0..g.rng.range(2, 3) {
            g.function(m, 0);
        }
        add_twins(&mut g, m, 0);
    }
    add_exts(&mut g);
    add_layers(&mut g, modules, |g, m, layer| {
        if layer == 1 && g.rng.chance(50) {
            add_twins(g, m, layer);
        }
    });
    add_helpers(&mut g, modules);
    for m in 0..modules {
        add_address_takers(&mut g, m, machine_code);
    }
    if g.rng.chance(50) {
        add_twins_across_modules(&mut g);
    }
    g.program
}

/// A program of two modules, each with its own copy of one function (local or
/// hidden, as `seed` picks), whose address it takes at two sites: two getters
/// (of kinds `seed` picks) and a function comparing its argument with the address
/// ([`add_twins_across_modules`]). Each copy is one address to the C `main`, which
/// compares every getter's result with the other's and passes it to the comparison.
pub fn twins_across_modules_program(seed: u64) -> Program {
    let rng = Rng::new(seed ^ 0x5457_494e_5341_4352);
    let mut g = Gen::new(rng, seed, 2, None);
    add_twins_across_modules(&mut g);
    g.program
}

/// Gives modules 0 and 1 a copy each of one function, local or hidden, and in
/// each module two getters of its own copy's address and a comparison of its
/// argument with that address. The copies are equal across the modules, and so
/// are the getters of one kind: merging the getters across the modules while each
/// copy keeps an address of its own would make one function read as two
/// addresses. The comparisons differ (`func_addr` in one module, `symbol_value`
/// in the other), so that they are not merged together with the getters.
fn add_twins_across_modules(g: &mut Gen) {
    let linkage = if g.rng.chance(50) {
        Linkage::Local
    } else {
        Linkage::Hidden
    };
    let kinds = [
        Taken::FuncAddr,
        Taken::Symbol,
        Taken::ExportedData,
        Taken::LocalData,
    ];
    let getters = [g.rng.pick(&kinds), g.rng.pick(&kinds)];
    let symbol_in_first = g.rng.chance(50);
    for m in 0..2 {
        let name = format!("tw{m}_{}", g.program.functions.len());
        let twin = g.push(m, name, linkage, false, Body::Affine { mul: 5, add: 11 }, 0);
        for how in getters {
            add_getter(g, m, Target::Fn(twin), how);
        }
        let body = Body::IsAddr {
            target: Target::Fn(twin),
            symbol: symbol_in_first == (m == 0),
        };
        push_helper(g, m, "ia", Linkage::Export, false, body);
    }
}

/// One or two functions of module `m` in `layer` get one or two exact copies
/// (twins) under other names, with any linkage.
fn add_twins(g: &mut Gen, m: usize, layer: usize) {
    let sources: Vec<usize> = (0..g.program.functions.len())
        .filter(|&i| {
            let f = &g.program.functions[i];
            f.module == m && f.layer == layer && !f.body.is_helper()
        })
        .collect();
    if sources.is_empty() {
        return;
    }
    for _ in 0..g.rng.range(1, 2) {
        let source = g.program.functions[g.rng.pick(&sources)].clone();
        for _ in 0..g.rng.range(1, 2) {
            let linkage = match g.rng.below(100) {
                0..40 => Linkage::Local,
                40..60 => Linkage::Hidden,
                60..92 => Linkage::Export,
                _ => Linkage::Preemptible,
            };
            let avoid: Vec<String> = source
                .body
                .targets()
                .into_iter()
                .map(|t| g.program.target_symbol(t).to_string())
                .collect();
            let symbol = g.name(m, linkage, &avoid);
            g.push(m, symbol, linkage, source.tail, source.body.clone(), layer);
        }
    }
}

/// How a getter takes a function's address.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
enum Taken {
    FuncAddr,
    Symbol,
    /// An exported data object C reads.
    ExportedData,
    /// A local data object a CLIF getter reads.
    LocalData,
    /// `lea` in machine code.
    MachineCode,
}

/// A linkage for a getter or caller only C uses: mostly exported, else local or
/// hidden behind an exported wrapper.
fn helper_linkage(g: &mut Gen) -> Linkage {
    match g.rng.below(100) {
        0..55 => Linkage::Export,
        55..85 => Linkage::Local,
        _ => Linkage::Hidden,
    }
}

/// Pushes helper `body` of module `m` named `{prefix}{m}_{N}` with `linkage`, and
/// for a local or hidden one an exported wrapper C calls instead. Returns the
/// helper.
fn push_helper(
    g: &mut Gen,
    m: usize,
    prefix: &str,
    linkage: Linkage,
    tail: bool,
    body: Body,
) -> usize {
    let name = format!("{prefix}{m}_{}", g.program.functions.len());
    let i = g.push(m, name, linkage, tail, body, 9);
    if matches!(linkage, Linkage::Local | Linkage::Hidden) {
        let name = format!("v{m}_{}", g.program.functions.len());
        g.push(
            m,
            name,
            Linkage::Export,
            false,
            Body::Wrap(Target::Fn(i)),
            9,
        );
    }
    i
}

/// A getter of module `m` returning `t`'s address, taken as `how`.
fn add_getter(g: &mut Gen, m: usize, t: Target, how: Taken) {
    let linkage = helper_linkage(g);
    match how {
        Taken::FuncAddr => {
            push_helper(g, m, "q", linkage, false, Body::AddrOf(t));
        }
        Taken::Symbol => {
            push_helper(g, m, "q", linkage, false, Body::SymAddrOf(t));
        }
        Taken::MachineCode => {
            push_helper(
                g,
                m,
                "b",
                linkage,
                false,
                Body::Bytes(BytesCode::AddrRet, t),
            );
        }
        Taken::ExportedData | Taken::LocalData => {
            let data_linkage = if how == Taken::ExportedData {
                Linkage::Export
            } else {
                Linkage::Local
            };
            let symbol = format!("t{m}_{}", g.program.data.len());
            g.refer(m, t);
            g.names[m].insert(symbol.clone());
            g.program.data.push(GenData {
                module: m,
                symbol,
                linkage: data_linkage,
                entries: vec![t],
            });
            if how == Taken::LocalData {
                let data = g.program.data.len() - 1;
                push_helper(g, m, "q", linkage, false, Body::LoadAddr { data, index: 0 });
            }
        }
    }
}

/// The address takers of module `m`: getters of every kind for each group of twins
/// (mostly of one kind per group) and for one or two other functions, address
/// comparisons of twins in CLIF, machine code that tail-jumps (with
/// `machine_code`), a function comparing its argument with an address, and
/// functions calling what they are passed, some passed an address by CLIF.
fn add_address_takers(g: &mut Gen, m: usize, machine_code: bool) {
    let count = g.program.functions.len();
    let own: Vec<usize> = (0..count)
        .filter(|&i| {
            let f = &g.program.functions[i];
            f.module == m && !f.body.is_helper()
        })
        .collect();
    let mut subjects: Vec<Vec<Target>> = Vec::new();
    for &i in &own {
        let f = &g.program.functions[i];
        let twin_of = subjects.iter().position(|group| {
            let Target::Fn(j) = group[0] else {
                return false;
            };
            let h = &g.program.functions[j];
            h.body == f.body && h.tail == f.tail
        });
        match twin_of {
            Some(k) => subjects[k].push(Target::Fn(i)),
            None => subjects.push(vec![Target::Fn(i)]),
        }
    }
    subjects.retain(|group| group.len() > 1);
    let reachable: Vec<Target> = (0..count)
        .map(Target::Fn)
        .filter(|&t| matches!(t, Target::Fn(i) if !g.program.functions[i].body.is_helper()))
        .chain((0..g.program.exts.len()).map(Target::Ext))
        .filter(|&t| g.reachable(m, t))
        .collect();
    for _ in 0..g.rng.range(1, 2) {
        subjects.push(vec![g.rng.pick(&reachable)]);
    }
    let kinds: &[Taken] = if machine_code {
        &[
            Taken::FuncAddr,
            Taken::Symbol,
            Taken::ExportedData,
            Taken::LocalData,
            Taken::MachineCode,
        ]
    } else {
        &[
            Taken::FuncAddr,
            Taken::Symbol,
            Taken::ExportedData,
            Taken::LocalData,
        ]
    };
    for group in subjects.clone() {
        let base = g.rng.pick(kinds);
        for &t in &group {
            // Sometimes a twin's address is not taken at all.
            if group.len() > 1 && g.rng.chance(15) {
                continue;
            }
            let how = if g.rng.chance(65) {
                base
            } else {
                g.rng.pick(kinds)
            };
            add_getter(g, m, t, how);
        }
        if group.len() > 1 && g.rng.chance(50) {
            let body = if g.rng.chance(50) {
                Body::MixedEq(group[0], group[1])
            } else {
                Body::AddrEq(group[1], group[0])
            };
            push_helper(g, m, "x", Linkage::Export, false, body);
        }
    }
    let all: Vec<Target> = subjects.concat();
    let callable: Vec<Target> = all
        .iter()
        .copied()
        .chain(reachable.iter().copied())
        .filter(|&t| !g.program.target_tail(t))
        .collect();
    if machine_code && g.rng.chance(70) {
        for _ in 0..g.rng.range(1, 2) {
            let t = if g.rng.chance(70) {
                g.rng.pick(&all)
            } else {
                g.rng.pick(&reachable)
            };
            let tail = g.program.target_tail(t);
            let linkage = if g.rng.chance(70) {
                Linkage::Export
            } else {
                Linkage::Local
            };
            push_helper(g, m, "j", linkage, tail, Body::Bytes(BytesCode::Jump, t));
        }
    }
    if g.rng.chance(60) {
        let target = g.rng.pick(&all);
        let symbol = g.rng.chance(50);
        push_helper(
            g,
            m,
            "ia",
            Linkage::Export,
            false,
            Body::IsAddr { target, symbol },
        );
    }
    if g.rng.chance(60) && !callable.is_empty() {
        let add = g.rng.pick(&[3, 4]);
        let copies = if g.rng.chance(30) { 2 } else { 1 };
        for _ in 0..copies {
            let linkage = if g.rng.chance(60) {
                Linkage::Export
            } else {
                Linkage::Local
            };
            // Not through `push_helper`: C passes addresses to it, not inputs.
            let name = format!("cp{m}_{}", g.program.functions.len());
            let caller = g.push(m, name, linkage, false, Body::CallPtr { add }, 9);
            for _ in 0..g.rng.range(0, 2) {
                let arg = g.rng.pick(&callable);
                let body = Body::PassAddr {
                    callee: Target::Fn(caller),
                    arg,
                };
                push_helper(g, m, "pa", Linkage::Export, false, body);
            }
        }
    }
}

/// The C functions of a multi-module program: two leaves and one that calls a
/// visible `system_v` leaf back.
fn add_exts(g: &mut Gen) {
    let callback = (0..g.program.functions.len()).find(|&i| {
        let f = &g.program.functions[i];
        matches!(f.linkage, Linkage::Export | Linkage::Preemptible) && !f.tail
    });
    g.program.exts.push(Ext {
        clif: "%ext0".into(),
        symbol: "ext0".into(),
        c_body: "(uint64_t)x * 1000003u + 11u".into(),
        calls: None,
    });
    g.program.exts.push(Ext {
        clif: "%ext1".into(),
        symbol: "ext1".into(),
        c_body: match callback {
            Some(i) => format!("(uint64_t){}(x) ^ 0x5a5au", g.program.functions[i].symbol),
            None => "(uint64_t)x ^ 0x5a5au".into(),
        },
        calls: callback,
    });
    g.program.exts.push(Ext {
        clif: "%ext2".into(),
        symbol: "ext2".into(),
        c_body: "((uint64_t)x >> 3) - 77u".into(),
        calls: None,
    });
}

/// Layers 1 and 2 of a multi-module program: functions calling lower layers and
/// C; `after` runs after each module's functions of a layer (module, layer).
fn add_layers(g: &mut Gen, modules: usize, mut after: impl FnMut(&mut Gen, usize, usize)) {
    for layer in 1..3 {
        for m in 0..modules {
            let count = if layer == 1 {
                g.rng.range(1, 3)
            } else {
                g.rng.range(0, 2)
            };
            for _ in 0..count {
                g.function(m, layer);
            }
            after(g, m, layer);
        }
    }
}

/// Exported wrappers (C cannot call local, hidden or `tail` functions), address
/// getters and address comparisons, per module.
fn add_helpers(g: &mut Gen, modules: usize) {
    let count = g.program.functions.len();
    for i in 0..count {
        let f = g.program.functions[i].clone();
        if matches!(f.linkage, Linkage::Local | Linkage::Hidden) || f.tail {
            let m = f.module;
            let symbol = format!("w{m}_{}", f.symbol.replace(':', "_"));
            g.push(
                m,
                symbol,
                Linkage::Export,
                false,
                Body::Wrap(Target::Fn(i)),
                9,
            );
        }
    }
    for m in 0..modules {
        let targets: Vec<Target> = (0..count)
            .map(Target::Fn)
            .chain((0..g.program.exts.len()).map(Target::Ext))
            .filter(|&t| g.reachable(m, t))
            .collect();
        if targets.is_empty() {
            continue;
        }
        for j in 0..g.rng.range(1, 2) {
            let t = g.rng.pick(&targets);
            g.push(
                m,
                format!("p{m}_{j}"),
                Linkage::Export,
                false,
                Body::AddrOf(t),
                9,
            );
        }
        if g.rng.chance(60) {
            let (a, b) = (g.rng.pick(&targets), g.rng.pick(&targets));
            g.push(
                m,
                format!("e{m}"),
                Linkage::Export,
                false,
                Body::AddrEq(a, b),
                9,
            );
        }
    }
}

/// [`Body::Long`] with an extra block in its `shape`.
pub const EXTRA_BLOCK: u64 = 1 << 40;

/// [`Body::Long`] whose chain continues in a second block (jumped to where
/// [`EXTRA_BLOCK`] branches), so that members with and without the extra block
/// pair their blocks.
pub const SPLIT_BLOCK: u64 = 1 << 41;

/// [`Body::Long`] with a stretch of its own in its `shape`: the variant (1 to 4)
/// in these bits, each a different one or two instructions in the chain's first
/// block whose result the rest of the chain uses (merging by alignment, groups
/// of three or more).
pub const STRETCH_MASK: u64 = 7 << STRETCH_SHIFT;

/// Where [`STRETCH_MASK`]'s variant starts.
pub const STRETCH_SHIFT: u32 = 42;

/// A single module for the similar merge: families of long functions that differ
/// in one or two constants, in their callee, or by an extra block (some `tail` ones end in a
/// `return_call` whose callee differs), exact duplicates, and names that collide
/// with what the similar merge names its merged bodies: an import named
/// `%NAME_merged` (provided by C) or, with user names, `u0:N` for N one past the
/// largest defined index; and a visible `%NAME_merged` (or the last `u0:N`) that is
/// an exact duplicate of an earlier function (an alias in `--mode all`); and one
/// family of three or four exported long functions that differ in a stretch of
/// instructions at the same place, whose value escapes ([`STRETCH_MASK`]: an
/// aligned group of three or more), drawn from a generator of its own so that the
/// rest of the module is what it was.
pub fn generate_similar_module(seed: u64) -> Program {
    let mut rng = Rng::new(seed ^ 0x0053_494d_494c_4152);
    let user_names = rng.chance(40);
    let mut g = Gen::new(rng, seed, 1, None);
    g.program.exts.push(Ext {
        clif: "%ext0".into(),
        symbol: "ext0".into(),
        c_body: "(uint64_t)x * 1000003u + 11u".into(),
        calls: None,
    });
    // Leaves: callees of the families, two of each convention.
    for (i, tail) in [false, false, true, true].into_iter().enumerate() {
        let body = match i % 2 {
            0 => Body::Affine {
                mul: 3 + i as i64,
                add: 1,
            },
            _ => Body::Loop {
                mul: 5,
                add: i as i64,
            },
        };
        let linkage = g.linkage();
        g.push(0, format!("leaf{i}"), linkage, tail, body, 0);
    }
    let leaves = |tail: bool| -> Vec<Target> {
        (0..4)
            .filter(|&i| (i >= 2) == tail)
            .map(Target::Fn)
            .collect()
    };
    let families = g.rng.range(2, 4);
    let mut firsts = Vec::new();
    for family in 0..families {
        let tail = g.rng.chance(40);
        let shape = g.rng.below(3) as u64 + 10 * family as u64;
        let with_callee = g.rng.chance(60);
        let tail_end = tail && with_callee && g.rng.chance(70);
        let callees = leaves(tail_end);
        let base = [g.rng.range(2, 9) as i64, g.rng.range(10, 40) as i64];
        let members = g.rng.range(2, 4);
        for member in 0..members {
            let mut k = base;
            let mut callee = with_callee.then(|| callees[0]);
            if member > 0 {
                let vary_callee = with_callee && g.rng.chance(if tail_end { 60 } else { 35 });
                if vary_callee {
                    callee = Some(callees[member % callees.len()]);
                }
                if !vary_callee || g.rng.chance(30) {
                    k[g.rng.below(2)] += member as i64;
                }
            }
            let linkage = g.linkage();
            let index = g.push(
                0,
                format!("s{}", g.program.functions.len()),
                linkage,
                tail,
                Body::Long {
                    // Some members have an extra block (merged by block pairing),
                    // decided without a draw so the other draws stay as they were.
                    shape: if (shape + member as u64).is_multiple_of(3) {
                        shape | EXTRA_BLOCK
                    } else {
                        shape | SPLIT_BLOCK
                    },
                    k,
                    callee,
                    tail_end,
                },
                1,
            );
            if member == 0 {
                firsts.push(index);
            }
            if g.rng.chance(20) {
                // An exact duplicate.
                let linkage = g.linkage();
                let body = g.program.functions[index].body.clone();
                g.push(
                    0,
                    format!("s{}", g.program.functions.len()),
                    linkage,
                    tail,
                    body,
                    1,
                );
            }
        }
    }
    // Names the merged bodies would take: imports provided by C, and visible
    // duplicates that become aliases in mode all.
    let mut baits = Vec::new();
    for &first in &firsts {
        if g.rng.chance(50) {
            let symbol = format!("{}_merged", g.program.functions[first].symbol);
            if g.rng.chance(50) {
                g.program.exts.push(Ext {
                    clif: format!("%{symbol}"),
                    symbol,
                    c_body: "(uint64_t)x * 77u + 5u".into(),
                    calls: None,
                });
                baits.push(Target::Ext(g.program.exts.len() - 1));
            } else {
                // An exported duplicate of an exported leaf: kept is the leaf
                // (defined first), this one is its alias in mode all.
                g.program.functions[0].linkage = Linkage::Export;
                let body = g.program.functions[0].body.clone();
                let tail = g.program.functions[0].tail;
                let i = g.push(0, symbol, Linkage::Export, tail, body, 0);
                baits.push(Target::Fn(i));
            }
        }
    }
    // Callers of the families and of the baits.
    let count = g.program.functions.len();
    let callers = g.rng.range(1, 3);
    for _ in 0..callers {
        let pool: Vec<Target> = (4..count)
            .map(Target::Fn)
            .chain(baits.iter().copied())
            .chain([Target::Ext(0)])
            .collect();
        let a = g.rng.pick(&pool);
        let b = baits.first().copied().unwrap_or_else(|| g.rng.pick(&pool));
        let linkage = g.linkage();
        g.push(
            0,
            format!("c{}", g.program.functions.len()),
            linkage,
            false,
            Body::Two { a, b, k: 3 },
            2,
        );
    }
    add_helpers(&mut g, 1);
    let mut stretch_rng = Rng::new(seed ^ 0x0047_524f_5550_5333);
    let shape = stretch_rng.below(3) as u64 + 100;
    let k = [
        stretch_rng.range(2, 9) as i64,
        stretch_rng.range(10, 40) as i64,
    ];
    let callee = stretch_rng.chance(50).then(|| leaves(false)[0]);
    for variant in 1..=stretch_rng.range(3, 4) as u64 {
        g.push(
            0,
            format!("a{}", g.program.functions.len()),
            Linkage::Export,
            false,
            Body::Long {
                shape: shape | variant << STRETCH_SHIFT,
                k,
                callee,
                tail_end: false,
            },
            1,
        );
    }
    if user_names {
        to_user_names(&mut g.program);
    }
    g.program
}

/// Renames every function `%NAME` of a single-module program to `u0:N` (N its
/// position), and every C function named `%F_merged` whose `%F` became `u0:N` to
/// `u0:M` with M one past the largest index (the name the similar merge gives its
/// first merged body); the last function, if a bait, keeps its place as the largest
/// index.
fn to_user_names(program: &mut Program) {
    let count = program.functions.len();
    // A bait function (a visible duplicate meant to become an alias) goes last.
    if let Some(bait) = program
        .functions
        .iter()
        .position(|f| f.symbol.ends_with("_merged"))
    {
        let last = count - 1;
        if bait != last {
            swap_functions(program, bait, last);
        }
    }
    for (i, f) in program.functions.iter_mut().enumerate() {
        f.clif = format!("u0:{i}");
        f.symbol = format!("u0_{i}");
    }
    let mut next = count;
    for ext in &mut program.exts {
        if ext.symbol.ends_with("_merged") {
            ext.clif = format!("u0:{next}");
            ext.symbol = format!("u0_{next}");
            next += 1;
        }
    }
    // Helper names were derived from the old names; C uses symbols only.
}

/// Swaps functions `a` and `b`, fixing every target.
fn swap_functions(program: &mut Program, a: usize, b: usize) {
    program.functions.swap(a, b);
    let fix = |t: Target| match t {
        Target::Fn(i) if i == a => Target::Fn(b),
        Target::Fn(i) if i == b => Target::Fn(a),
        t => t,
    };
    for f in &mut program.functions {
        let targets: Vec<Target> = f.body.targets().into_iter().map(fix).collect();
        f.body = f.body.with_targets(&targets);
    }
    for ext in &mut program.exts {
        ext.calls = ext.calls.map(|i| match i {
            i if i == a => b,
            i if i == b => a,
            i => i,
        });
    }
}
