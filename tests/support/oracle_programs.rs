//! Generated programs for the linked-program oracle (`tests/linked_oracle.rs`):
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

#![allow(dead_code)]

use clif_merge::FunctionSet;
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
    /// result (`return_call`, both `tail`).
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
}

impl Body {
    /// The functions the body refers to, in declaration order.
    pub fn targets(&self) -> Vec<Target> {
        match self {
            Body::Affine { .. } | Body::Loop { .. } | Body::Rec { .. } => vec![],
            Body::Long { callee, .. } => callee.iter().copied().collect(),
            Body::Call { callee, .. }
            | Body::Indirect { callee, .. }
            | Body::TailCall { callee, .. }
            | Body::TailIndirect { callee, .. }
            | Body::Wrap(callee)
            | Body::AddrOf(callee) => vec![*callee],
            Body::Two { a, b, .. } | Body::AddrEq(a, b) => vec![*a, *b],
        }
    }

    /// The same body with its targets replaced, in [`Self::targets`] order.
    pub fn with_targets(&self, targets: &[Target]) -> Body {
        let mut body = self.clone();
        let mut it = targets.iter().copied();
        match &mut body {
            Body::Affine { .. } | Body::Loop { .. } | Body::Rec { .. } => {}
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
            | Body::AddrOf(callee) => *callee = it.next().expect("target"),
            Body::Two { a, b, .. } | Body::AddrEq(a, b) => {
                *a = it.next().expect("target");
                *b = it.next().expect("target");
            }
        }
        body
    }

    /// Whether the body is one of the helpers only C calls.
    pub fn is_helper(&self) -> bool {
        matches!(self, Body::Wrap(_) | Body::AddrOf(_) | Body::AddrEq(..))
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
            Body::Wrap(_) | Body::AddrOf(_) | Body::AddrEq(..) => {}
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
                let mut shape_rng = Rng::new(*shape);
                let mut values = vec!["v0".to_string()];
                let k0 = e.value(&format!("iconst.i64 {}", k[0]));
                let first = e.value(&format!("imul v0, {k0}"));
                values.push(first);
                const OPS: [&str; 6] = ["iadd", "isub", "imul", "bxor", "bor", "rotl"];
                for step in 0..14 {
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

    /// Module `m` as CLIF text, each function preceded by its linkage.
    pub fn module_clif(&self, m: usize) -> String {
        let mut out = String::new();
        for i in self.module_functions(m) {
            let _ = writeln!(out, "; {}", linkage_name(self.functions[i].linkage));
            out.push_str(&self.function_clif(i));
            out.push('\n');
        }
        out
    }

    /// Module `m` as clif-merge sees it.
    pub fn module_set(&self, m: usize) -> FunctionSet {
        let text = self.module_clif(m);
        let parsed = cranelift_reader::parse_functions(&text)
            .unwrap_or_else(|e| panic!("generated CLIF does not parse: {e}\n{text}"));
        let mut set = FunctionSet::new();
        for (func, i) in parsed.into_iter().zip(self.module_functions(m)) {
            set.push(func, self.functions[i].linkage)
                .unwrap_or_else(|e| panic!("seed {}: {e}", self.seed));
        }
        set
    }

    /// The module's name as given to clif-merge.
    pub fn module_name(m: usize) -> String {
        format!("m{m}")
    }

    /// The C file: the functions CLIF imports from C, and a `main` that calls every
    /// visible `system_v` function on [`INPUTS`], calls through the addresses the
    /// `AddrOf` helpers return, and prints which function addresses compare equal
    /// (lines starting with `addr`: significant only where addresses are).
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
        let callable: Vec<&GenFn> = self
            .functions
            .iter()
            .filter(|f| {
                visible(f) && !f.tail && !matches!(f.body, Body::AddrOf(_) | Body::AddrEq(..))
            })
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
        // Addresses: every visible function's, and every AddrOf helper's result.
        let mut addrs: Vec<(String, String)> = Vec::new();
        for f in &self.functions {
            if visible(f) {
                addrs.push((f.symbol.clone(), format!("(const void *){}", f.symbol)));
            }
        }
        for f in &self.functions {
            if let Body::AddrOf(t) = f.body {
                let _ = writeln!(c, "    int64_t ptr_{0} = {0}(0);", f.symbol);
                if !self.target_tail(t) {
                    let _ = writeln!(
                        c,
                        "    for (int i = 0; i < n; i++) printf(\"*{0}(%lld) = %lld\\n\", (long long)xs[i], (long long)((fn_t)ptr_{0})(xs[i]));",
                        f.symbol
                    );
                }
                addrs.push((
                    format!("*{}", f.symbol),
                    format!("(const void *)ptr_{}", f.symbol),
                ));
            }
        }
        let _ = writeln!(
            c,
            "    const void *addrs[] = {{{}}};",
            addrs
                .iter()
                .map(|(_, e)| e.as_str())
                .chain(["0"])
                .collect::<Vec<_>>()
                .join(", ")
        );
        let _ = writeln!(
            c,
            "    static const char *names[] = {{{}}};",
            addrs
                .iter()
                .map(|(n, _)| format!("\"{n}\""))
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
            if let Body::AddrEq(..) = f.body {
                let _ = writeln!(
                    c,
                    "    printf(\"addr-cmp {0} = %lld\\n\", (long long){0}(0));",
                    f.symbol
                );
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
    let mut g = Gen {
        rng,
        program: Program {
            seed,
            modules,
            opaque,
            functions: Vec::new(),
            exts: Vec::new(),
        },
        names: vec![HashSet::new(); modules],
        visible: HashSet::new(),
    };
    for m in 0..modules {
        for _ in 0..g.rng.range(2, 4) {
            g.function(m, 0);
        }
    }
    // C functions: two leaves and one that calls a visible system_v leaf back.
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
        }
    }
    add_helpers(&mut g, modules);
    g.program
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

/// A single module for the similar merge: families of long functions that differ
/// in one or two constants or in their callee (some `tail` ones end in a
/// `return_call` whose callee differs), exact duplicates, and names that collide
/// with what the similar merge names its merged bodies: an import named
/// `%NAME_merged` (provided by C) or, with user names, `u0:N` for N one past the
/// largest defined index; and a visible `%NAME_merged` (or the last `u0:N`) that is
/// an exact duplicate of an earlier function (an alias in `--mode all`).
pub fn generate_similar_module(seed: u64) -> Program {
    let mut rng = Rng::new(seed ^ 0x0053_494d_494c_4152);
    let user_names = rng.chance(40);
    let mut g = Gen {
        rng,
        program: Program {
            seed,
            modules: 1,
            opaque: None,
            functions: Vec::new(),
            exts: Vec::new(),
        },
        names: vec![HashSet::new()],
        visible: HashSet::new(),
    };
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
                    shape,
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
