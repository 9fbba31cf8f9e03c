//! The program both the `aot` and `jit` examples build with cranelift-frontend, the
//! way a compiler would: helpers duplicated by a code generator, an API exported
//! under two names, two callbacks whose addresses go into a table, and two copies of
//! a mutually recursive pair.

use cranelift_codegen::Context;
use cranelift_codegen::ir::{AbiParam, InstBuilder, types::I64};
use cranelift_codegen::ir::{Function, UserFuncName};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};

/// The declared functions and the callback table.
// The `aot` example reaches everything by symbol name and reads neither field.
#[allow(dead_code)]
pub struct Program {
    /// `(name, id)` of every function, in declaration order.
    pub functions: Vec<(&'static str, FuncId)>,
    /// `callbacks`: the addresses of `callback_a` and `callback_b`.
    pub table: DataId,
}

/// What a body computes from its argument `x`.
enum Body {
    /// `x * k + c`
    Affine(i64, i64),
    /// `x * x - c`
    Square(i64),
    /// `x == 0 ? yes : other(x - 1)`: one half of `is_even`/`is_odd`.
    Parity { yes: i64, other: &'static str },
    /// Sum of calls to the named functions.
    Sum(&'static [&'static str]),
}

const FUNCTIONS: &[(&str, Linkage, Body)] = &[
    ("scale_a", Linkage::Local, Body::Affine(3, 1)),
    ("scale_b", Linkage::Local, Body::Affine(3, 1)),
    ("api_v1", Linkage::Export, Body::Square(7)),
    ("api_v2", Linkage::Export, Body::Square(7)),
    ("callback_a", Linkage::Local, Body::Affine(1, 100)),
    ("callback_b", Linkage::Local, Body::Affine(1, 100)),
    (
        "is_even",
        Linkage::Local,
        Body::Parity {
            yes: 1,
            other: "is_odd",
        },
    ),
    (
        "is_odd",
        Linkage::Local,
        Body::Parity {
            yes: 0,
            other: "is_even",
        },
    ),
    (
        "is_even2",
        Linkage::Local,
        Body::Parity {
            yes: 1,
            other: "is_odd2",
        },
    ),
    (
        "is_odd2",
        Linkage::Local,
        Body::Parity {
            yes: 0,
            other: "is_even2",
        },
    ),
    (
        "run",
        Linkage::Export,
        Body::Sum(&["scale_a", "scale_b", "is_even", "is_even2", "is_odd2"]),
    ),
];

/// Declares and defines the program in `module`.
pub fn build<M: Module>(module: &mut M) -> Program {
    let mut sig = module.make_signature();
    sig.params.push(AbiParam::new(I64));
    sig.returns.push(AbiParam::new(I64));
    let functions: Vec<(&'static str, FuncId)> = FUNCTIONS
        .iter()
        .map(|(name, linkage, _)| {
            let id = module
                .declare_function(name, *linkage, &sig)
                .expect("declare");
            (*name, id)
        })
        .collect();
    let id_of = |name: &str| {
        functions
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, id)| *id)
            .expect("declared")
    };
    let mut builder_context = FunctionBuilderContext::new();
    for ((_, _, body), (_, id)) in FUNCTIONS.iter().zip(&functions) {
        let mut func =
            Function::with_name_signature(UserFuncName::user(0, id.as_u32()), sig.clone());
        let mut b = FunctionBuilder::new(&mut func, &mut builder_context);
        let entry = b.create_block();
        b.append_block_params_for_function_params(entry);
        b.switch_to_block(entry);
        b.seal_block(entry);
        let x = b.block_params(entry)[0];
        match body {
            Body::Affine(k, c) => {
                let k = b.ins().iconst(I64, *k);
                let c = b.ins().iconst(I64, *c);
                let m = b.ins().imul(x, k);
                let r = b.ins().iadd(m, c);
                b.ins().return_(&[r]);
            }
            Body::Square(c) => {
                let c = b.ins().iconst(I64, *c);
                let m = b.ins().imul(x, x);
                let r = b.ins().isub(m, c);
                b.ins().return_(&[r]);
            }
            Body::Parity { yes, other } => {
                let callee = module.declare_func_in_func(id_of(other), b.func);
                let (zero, recurse) = (b.create_block(), b.create_block());
                b.ins().brif(x, recurse, &[], zero, &[]);
                b.switch_to_block(zero);
                b.seal_block(zero);
                let yes = b.ins().iconst(I64, *yes);
                b.ins().return_(&[yes]);
                b.switch_to_block(recurse);
                b.seal_block(recurse);
                let one = b.ins().iconst(I64, 1);
                let next = b.ins().isub(x, one);
                let call = b.ins().call(callee, &[next]);
                let r = b.inst_results(call)[0];
                b.ins().return_(&[r]);
            }
            Body::Sum(names) => {
                let mut total = b.ins().iconst(I64, 0);
                for name in names.iter() {
                    let callee = module.declare_func_in_func(id_of(name), b.func);
                    let call = b.ins().call(callee, &[x]);
                    let r = b.inst_results(call)[0];
                    total = b.ins().iadd(total, r);
                }
                b.ins().return_(&[total]);
            }
        }
        b.finalize(module.target_config());
        let mut ctx = Context::for_function(func);
        module.define_function(*id, &mut ctx).expect("define");
    }
    let table = module
        .declare_data("callbacks", Linkage::Export, true, false)
        .expect("declare data");
    let mut desc = DataDescription::new();
    desc.define(vec![0u8; 16].into_boxed_slice());
    for (slot, name) in [(0u32, "callback_a"), (8, "callback_b")] {
        let fref = module.declare_func_in_data(id_of(name), &mut desc);
        desc.write_function_addr(slot, fref);
    }
    module.define_data(table, &desc).expect("define data");
    Program { functions, table }
}
