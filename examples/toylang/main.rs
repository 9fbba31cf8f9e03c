//! A toy language compiler: parser → CLIF (cranelift-frontend) → object file through
//! `MergingModule<ObjectModule>` → linked with `cc` → run.
//!
//! Its generic functions are monomorphized per type, which produces the duplicate
//! bodies real compilers produce: `add3<i64>` and `add3<u64>` are the same machine
//! code, `bigger<i64>` and `bigger<u64>` are not (signed vs unsigned compare). The
//! example builds `sample.toy` with and without merging, runs both, and reports the
//! functions merged and the `.text` bytes saved.
//!
//! Run with `cargo run --example toylang`.

use clif_merge::module::{MergeReport, MergingModule, ModuleMergeOptions};
use cranelift_codegen::ir::{AbiParam, InstBuilder, Type, Value, condcodes::IntCC, types};
use cranelift_codegen::{Context, ir};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{FuncId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use std::collections::BTreeMap;

#[path = "../shared/native.rs"]
mod native;

const SAMPLE: &str = include_str!("sample.toy");

/// The types a generic function can be instantiated with.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Ty {
    I32,
    U32,
    I64,
    U64,
}

impl Ty {
    fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "i32" => Ty::I32,
            "u32" => Ty::U32,
            "i64" => Ty::I64,
            "u64" => Ty::U64,
            _ => return Err(format!("unknown type `{s}`")),
        })
    }
    fn clif(self) -> Type {
        match self {
            Ty::I32 | Ty::U32 => types::I32,
            Ty::I64 | Ty::U64 => types::I64,
        }
    }
    fn signed(self) -> bool {
        matches!(self, Ty::I32 | Ty::I64)
    }
}

#[derive(Clone, Debug)]
enum Expr {
    Int(i64),
    Var(String),
    Binary(char, Box<Expr>, Box<Expr>),
    If(Box<Expr>, Box<Expr>, Box<Expr>),
    /// A call of a generic function at a type.
    Call(String, Ty, Vec<Expr>),
    /// A call whose type argument is the enclosing function's `T`.
    CallT(String, Vec<Expr>),
}

struct Generic {
    params: Vec<String>,
    body: Expr,
}

/// A tiny recursive-descent parser over one line.
struct Parser<'a> {
    tokens: Vec<&'a str>,
    pos: usize,
}

fn tokenize(line: &str) -> Vec<&str> {
    let mut tokens = Vec::new();
    let mut start = None;
    for (i, c) in line.char_indices() {
        let word = c.is_alphanumeric() || c == '_';
        match (start, word) {
            (None, true) => start = Some(i),
            (Some(s), false) => {
                tokens.push(&line[s..i]);
                start = None;
            }
            _ => {}
        }
        if !word && !c.is_whitespace() {
            tokens.push(&line[i..i + c.len_utf8()]);
        }
    }
    if let Some(s) = start {
        tokens.push(&line[s..]);
    }
    tokens
}

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a str> {
        self.tokens.get(self.pos).copied()
    }
    fn next(&mut self) -> Result<&'a str, String> {
        let t = self.peek().ok_or("unexpected end of line")?;
        self.pos += 1;
        Ok(t)
    }
    fn expect(&mut self, want: &str) -> Result<(), String> {
        let got = self.next()?;
        if got == want {
            Ok(())
        } else {
            Err(format!("expected `{want}`, found `{got}`"))
        }
    }
    fn expr(&mut self) -> Result<Expr, String> {
        if self.peek() == Some("if") {
            self.next()?;
            let c = self.expr()?;
            self.expect("then")?;
            let t = self.expr()?;
            self.expect("else")?;
            let e = self.expr()?;
            return Ok(Expr::If(Box::new(c), Box::new(t), Box::new(e)));
        }
        let lhs = self.additive()?;
        if self.peek() == Some(">") {
            self.next()?;
            let rhs = self.additive()?;
            return Ok(Expr::Binary('>', Box::new(lhs), Box::new(rhs)));
        }
        Ok(lhs)
    }
    fn additive(&mut self) -> Result<Expr, String> {
        let mut lhs = self.multiplicative()?;
        while let Some(op @ ("+" | "-")) = self.peek() {
            self.next()?;
            let rhs = self.multiplicative()?;
            lhs = Expr::Binary(
                op.chars().next().unwrap_or('+'),
                Box::new(lhs),
                Box::new(rhs),
            );
        }
        Ok(lhs)
    }
    fn multiplicative(&mut self) -> Result<Expr, String> {
        let mut lhs = self.atom()?;
        while let Some(op @ ("*" | "/")) = self.peek() {
            self.next()?;
            let rhs = self.atom()?;
            lhs = Expr::Binary(
                op.chars().next().unwrap_or('*'),
                Box::new(lhs),
                Box::new(rhs),
            );
        }
        Ok(lhs)
    }
    fn atom(&mut self) -> Result<Expr, String> {
        let t = self.next()?;
        if t == "-" {
            return match self.atom()? {
                Expr::Int(n) => Ok(Expr::Int(-n)),
                e => Ok(Expr::Binary('-', Box::new(Expr::Int(0)), Box::new(e))),
            };
        }
        if t == "(" {
            let e = self.expr()?;
            self.expect(")")?;
            return Ok(e);
        }
        if let Ok(n) = t.parse::<i64>() {
            return Ok(Expr::Int(n));
        }
        if self.peek() == Some("<") {
            self.next()?;
            let ty = self.next()?;
            self.expect(">")?;
            self.expect("(")?;
            let mut args = Vec::new();
            while self.peek() != Some(")") {
                args.push(self.expr()?);
                if self.peek() == Some(",") {
                    self.next()?;
                }
            }
            self.expect(")")?;
            return Ok(if ty == "T" {
                Expr::CallT(t.to_string(), args)
            } else {
                Expr::Call(t.to_string(), Ty::parse(ty)?, args)
            });
        }
        Ok(Expr::Var(t.to_string()))
    }
}

/// Parses the program: generic function definitions and `print` statements.
fn parse(source: &str) -> Result<(BTreeMap<String, Generic>, Vec<Expr>), String> {
    let mut generics = BTreeMap::new();
    let mut prints = Vec::new();
    for (n, line) in source.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut p = Parser {
            tokens: tokenize(line),
            pos: 0,
        };
        let result: Result<(), String> = (|| {
            match p.next()? {
                "fn" => {
                    let name = p.next()?.to_string();
                    for t in ["<", "T", ">", "("] {
                        p.expect(t)?;
                    }
                    let mut params = Vec::new();
                    while p.peek() != Some(")") {
                        params.push(p.next()?.to_string());
                        p.expect(":")?;
                        p.expect("T")?;
                        if p.peek() == Some(",") {
                            p.next()?;
                        }
                    }
                    for t in [")", "-", ">", "T", "="] {
                        p.expect(t)?;
                    }
                    let body = p.expr()?;
                    generics.insert(name, Generic { params, body });
                }
                "print" => prints.push(p.expr()?),
                other => return Err(format!("expected `fn` or `print`, found `{other}`")),
            }
            Ok(())
        })();
        result.map_err(|e| format!("sample.toy:{}: {e}", n + 1))?;
    }
    Ok((generics, prints))
}

/// Compiles instances on demand: `(name, type) -> FuncId`.
struct Compiler<'m, M: Module> {
    module: &'m mut M,
    generics: &'m BTreeMap<String, Generic>,
    instances: BTreeMap<(String, Ty), FuncId>,
    pending: Vec<(String, Ty)>,
}

impl<M: Module> Compiler<'_, M> {
    fn instance(&mut self, name: &str, ty: Ty) -> Result<FuncId, String> {
        if let Some(&id) = self.instances.get(&(name.to_string(), ty)) {
            return Ok(id);
        }
        let generic = self
            .generics
            .get(name)
            .ok_or(format!("unknown function `{name}`"))?;
        let mut sig = self.module.make_signature();
        for _ in &generic.params {
            sig.params.push(AbiParam::new(ty.clif()));
        }
        sig.returns.push(AbiParam::new(ty.clif()));
        let symbol = format!("{name}__{ty:?}").to_lowercase();
        let id = self
            .module
            .declare_function(&symbol, Linkage::Local, &sig)
            .map_err(|e| e.to_string())?;
        self.instances.insert((name.to_string(), ty), id);
        self.pending.push((name.to_string(), ty));
        Ok(id)
    }

    fn expr(
        &mut self,
        b: &mut FunctionBuilder,
        e: &Expr,
        ty: Ty,
        vars: &BTreeMap<String, Value>,
    ) -> Result<Value, String> {
        Ok(match e {
            Expr::Int(n) => b.ins().iconst(ty.clif(), *n),
            Expr::Var(v) => *vars.get(v).ok_or(format!("unknown variable `{v}`"))?,
            Expr::Binary(op, l, r) => {
                let (l, r) = (self.expr(b, l, ty, vars)?, self.expr(b, r, ty, vars)?);
                match op {
                    '+' => b.ins().iadd(l, r),
                    '-' => b.ins().isub(l, r),
                    '*' => b.ins().imul(l, r),
                    '/' if ty.signed() => b.ins().sdiv(l, r),
                    '/' => b.ins().udiv(l, r),
                    _ => {
                        let cc = if ty.signed() {
                            IntCC::SignedGreaterThan
                        } else {
                            IntCC::UnsignedGreaterThan
                        };
                        let c = b.ins().icmp(cc, l, r);
                        b.ins().uextend(ty.clif(), c)
                    }
                }
            }
            Expr::If(c, t, f) => {
                let c = self.expr(b, c, ty, vars)?;
                let (then_block, else_block, join) =
                    (b.create_block(), b.create_block(), b.create_block());
                b.append_block_param(join, ty.clif());
                b.ins().brif(c, then_block, &[], else_block, &[]);
                for (block, arm) in [(then_block, t), (else_block, f)] {
                    b.switch_to_block(block);
                    b.seal_block(block);
                    let v = self.expr(b, arm, ty, vars)?;
                    b.ins().jump(join, &[v.into()]);
                }
                b.switch_to_block(join);
                b.seal_block(join);
                b.block_params(join)[0]
            }
            Expr::Call(name, call_ty, args) => self.call(b, name, *call_ty, args, vars)?,
            Expr::CallT(name, args) => self.call(b, name, ty, args, vars)?,
        })
    }

    fn call(
        &mut self,
        b: &mut FunctionBuilder,
        name: &str,
        ty: Ty,
        args: &[Expr],
        vars: &BTreeMap<String, Value>,
    ) -> Result<Value, String> {
        let id = self.instance(name, ty)?;
        let callee = self.module.declare_func_in_func(id, b.func);
        let mut values = Vec::new();
        for a in args {
            values.push(self.expr(b, a, ty, vars)?);
        }
        let call = b.ins().call(callee, &values);
        Ok(b.inst_results(call)[0])
    }

    fn define_pending(&mut self, ctx: &mut FunctionBuilderContext) -> Result<(), String> {
        while let Some((name, ty)) = self.pending.pop() {
            let id = self.instances[&(name.clone(), ty)];
            let generic = &self.generics[&name];
            let sig = self
                .module
                .declarations()
                .get_function_decl(id)
                .signature
                .clone();
            let mut func =
                ir::Function::with_name_signature(ir::UserFuncName::user(0, id.as_u32()), sig);
            let mut b = FunctionBuilder::new(&mut func, ctx);
            let entry = b.create_block();
            b.append_block_params_for_function_params(entry);
            b.switch_to_block(entry);
            b.seal_block(entry);
            let vars: BTreeMap<String, Value> = generic
                .params
                .iter()
                .cloned()
                .zip(b.block_params(entry).to_vec())
                .collect();
            let v = self.expr(&mut b, &generic.body, ty, &vars)?;
            b.ins().return_(&[v]);
            b.finalize(self.module.target_config());
            self.module
                .define_function(id, &mut Context::for_function(func))
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }
}

/// Compiles the program to an object file.
fn compile(source: &str, enabled: bool) -> Result<(Vec<u8>, MergeReport, usize), String> {
    let (generics, prints) = parse(source)?;
    let isa = native::pic_host_isa()?;
    let builder = ObjectBuilder::new(isa, "toy", cranelift_module::default_libcall_names())
        .map_err(|e| e.to_string())?;
    let options = ModuleMergeOptions::default().with_enabled(enabled);
    let mut module = MergingModule::new(ObjectModule::new(builder), options);
    let mut print_sig = module.make_signature();
    print_sig.params.push(AbiParam::new(types::I64));
    let print = module
        .declare_function("toy_print", Linkage::Import, &print_sig)
        .map_err(|e| e.to_string())?;
    let main_id = module
        .declare_function("toy_main", Linkage::Export, &module.make_signature())
        .map_err(|e| e.to_string())?;
    let mut fctx = FunctionBuilderContext::new();
    let mut compiler = Compiler {
        module: &mut module,
        generics: &generics,
        instances: BTreeMap::new(),
        pending: Vec::new(),
    };
    let sig = compiler.module.make_signature();
    let mut func =
        ir::Function::with_name_signature(ir::UserFuncName::user(0, main_id.as_u32()), sig);
    {
        let mut b = FunctionBuilder::new(&mut func, &mut fctx);
        let entry = b.create_block();
        b.switch_to_block(entry);
        b.seal_block(entry);
        let print_ref = compiler.module.declare_func_in_func(print, b.func);
        for p in &prints {
            let Expr::Call(_, ty, _) = p else {
                return Err("print takes a call like f<i64>(...)".into());
            };
            let v = compiler.expr(&mut b, p, *ty, &BTreeMap::new())?;
            let wide = match ty {
                Ty::I32 => b.ins().sextend(types::I64, v),
                Ty::U32 => b.ins().uextend(types::I64, v),
                _ => v,
            };
            b.ins().call(print_ref, &[wide]);
        }
        b.ins().return_(&[]);
        b.finalize(compiler.module.target_config());
    }
    compiler
        .module
        .define_function(main_id, &mut Context::for_function(func))
        .map_err(|e| e.to_string())?;
    compiler.define_pending(&mut fctx)?;
    let instances = compiler.instances.len();
    let (product, report) = module.finish_object().map_err(|e| e.to_string())?;
    Ok((
        product.emit().map_err(|e| e.to_string())?,
        report,
        instances,
    ))
}

const RUNTIME_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
void toy_print(int64_t v) { printf("%lld\n", (long long)v); }
void toy_main(void);
int main(void) { toy_main(); return 0; }
"#;

pub fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (plain, _, instances) = compile(SAMPLE, false)?;
    let (merged, report, _) = compile(SAMPLE, true)?;
    println!(
        "sample.toy: {instances} generic instances + toy_main = {} functions",
        report.functions
    );
    println!("merged {} of them:", report.merged());
    for (function, into, action) in &report.actions {
        println!("  {function} -> {into}: {action}");
    }
    println!("machine code saved: {} bytes", report.bytes_saved);
    let (before, after) = (
        native::link_and_run(&plain, RUNTIME_C, "toylang-plain")?.stdout,
        native::link_and_run(&merged, RUNTIME_C, "toylang-merged")?.stdout,
    );
    println!(
        "\noutput (same with and without merging: {}):",
        if before == after { "yes" } else { "NO" }
    );
    print!("{after}");
    let (tb, ta) = (native::text_bytes(&plain)?, native::text_bytes(&merged)?);
    println!(
        "\nfunctions compiled: {} -> {}; .text: {tb} -> {ta} bytes ({} saved)",
        report.functions,
        report.functions
            - report
                .actions
                .iter()
                .filter(|a| a.2 != clif_merge::MergeAction::Thunk)
                .count(),
        tb.saturating_sub(ta)
    );
    if before != after {
        return Err("merging changed the program's output".into());
    }
    Ok(())
}
