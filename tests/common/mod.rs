//! The module both the AOT and the JIT tests build: duplicates of every kind.

#![allow(dead_code)]

use cranelift_codegen::Context;
use cranelift_module::{DataDescription, DataId, FuncId, Linkage, Module};

/// (name, linkage, CLIF body). Function `i` is declared as `FuncId` i, so bodies call
/// each other as `u0:i`.
pub const FUNCTIONS: &[(&str, Linkage, &str)] = &[
    // 0, 1: identical local helpers -> erase
    (
        "helper_a",
        Linkage::Local,
        "(i64) -> i64 system_v {
block0(v0: i64):
    v1 = iconst.i64 3
    v2 = imul v0, v1
    v51 = iconst.i64 1
    v3 = iadd v2, v51
    return v3
}",
    ),
    (
        "helper_b",
        Linkage::Local,
        "(i64) -> i64 system_v {
block0(v10: i64):
    v11 = iconst.i64 3
    v12 = imul v10, v11
    v52 = iconst.i64 1
    v13 = iadd v12, v52
    return v13
}",
    ),
    // 2, 3: identical exported functions -> thunk (safe) or alias (all)
    (
        "exported_1",
        Linkage::Export,
        "(i64) -> i64 system_v {
block0(v0: i64):
    v1 = imul v0, v0
    v2 = iconst.i64 7
    v3 = isub v1, v2
    return v3
}",
    ),
    (
        "exported_2",
        Linkage::Export,
        "(i64) -> i64 system_v {
block0(v0: i64):
    v1 = imul v0, v0
    v2 = iconst.i64 7
    v3 = isub v1, v2
    return v3
}",
    ),
    // 4, 5: identical locals whose addresses are in a data table -> thunk (safe)
    (
        "addr_a",
        Linkage::Local,
        "(i64) -> i64 system_v {
block0(v0: i64):
    v1 = iconst.i64 100
    v2 = iadd v0, v1
    return v2
}",
    ),
    (
        "addr_b",
        Linkage::Local,
        "(i64) -> i64 system_v {
block0(v0: i64):
    v1 = iconst.i64 100
    v2 = iadd v0, v1
    return v2
}",
    ),
    // 6-9: ping1/pong1 and ping2/pong2, two copies of a mutually recursive pair
    (
        "ping1",
        Linkage::Local,
        "(i64) -> i64 system_v {
    fn0 = colocated u0:7(i64) -> i64 system_v
block0(v0: i64):
    brif v0, block1, block2
block1:
    v1 = iconst.i64 1
    v2 = isub v0, v1
    v3 = call fn0(v2)
    v53 = iconst.i64 2
    v4 = iadd v3, v53
    return v4
block2:
    return v0
}",
    ),
    (
        "pong1",
        Linkage::Local,
        "(i64) -> i64 system_v {
    fn0 = colocated u0:6(i64) -> i64 system_v
block0(v0: i64):
    brif v0, block1, block2
block1:
    v1 = iconst.i64 1
    v2 = isub v0, v1
    v3 = call fn0(v2)
    v54 = iconst.i64 5
    v4 = iadd v3, v54
    return v4
block2:
    return v0
}",
    ),
    (
        "ping2",
        Linkage::Local,
        "(i64) -> i64 system_v {
    fn0 = colocated u0:9(i64) -> i64 system_v
block0(v0: i64):
    brif v0, block1, block2
block1:
    v1 = iconst.i64 1
    v2 = isub v0, v1
    v3 = call fn0(v2)
    v55 = iconst.i64 2
    v4 = iadd v3, v55
    return v4
block2:
    return v0
}",
    ),
    (
        "pong2",
        Linkage::Local,
        "(i64) -> i64 system_v {
    fn0 = colocated u0:8(i64) -> i64 system_v
block0(v0: i64):
    brif v0, block1, block2
block1:
    v1 = iconst.i64 1
    v2 = isub v0, v1
    v3 = call fn0(v2)
    v56 = iconst.i64 5
    v4 = iadd v3, v56
    return v4
block2:
    return v0
}",
    ),
    // 10: the exported entry point calling the duplicates
    (
        "compute",
        Linkage::Export,
        "(i64) -> i64 system_v {
    fn0 = colocated u0:0(i64) -> i64 system_v
    fn1 = colocated u0:1(i64) -> i64 system_v
    fn2 = colocated u0:8(i64) -> i64 system_v
    fn3 = colocated u0:7(i64) -> i64 system_v
    fn4 = colocated u0:5(i64) -> i64 system_v
block0(v0: i64):
    v1 = call fn0(v0)
    v2 = call fn1(v0)
    v3 = call fn2(v0)
    v4 = call fn3(v0)
    v5 = call fn4(v0)
    v6 = iadd v1, v2
    v7 = iadd v6, v3
    v8 = iadd v7, v4
    v9 = iadd v8, v5
    return v9
}",
    ),
];

/// What [`define_fixture`] declared.
pub struct Fixture {
    /// `FuncId` per entry of [`FUNCTIONS`].
    pub ids: Vec<FuncId>,
    /// `fn_table`: the addresses of `addr_a` and `addr_b`.
    pub table: DataId,
}

/// Declares and defines [`FUNCTIONS`] and `fn_table` in `module`.
pub fn define_fixture<M: Module>(module: &mut M) -> Fixture {
    let mut defined = Vec::new();
    for (name, linkage, body) in FUNCTIONS {
        let text = format!("function u0:{}{body}", defined.len());
        let func = cranelift_reader::parse_functions(&text)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .remove(0);
        let id = module
            .declare_function(name, *linkage, &func.signature)
            .expect("declare");
        defined.push((id, func));
    }
    for (id, func) in &defined {
        let mut ctx = Context::for_function(func.clone());
        module.define_function(*id, &mut ctx).expect("define");
    }
    let table = module
        .declare_data("fn_table", Linkage::Export, true, false)
        .expect("declare data");
    let mut desc = DataDescription::new();
    // Not `define_zeroinit`: zero-initialized data goes to .bss, which cannot hold the
    // relocations.
    desc.define(vec![0u8; 16].into_boxed_slice());
    for (slot, index) in [(0u32, 4usize), (8, 5)] {
        let fref = module.declare_func_in_data(defined[index].0, &mut desc);
        desc.write_function_addr(slot, fref);
    }
    module.define_data(table, &desc).expect("define data");
    Fixture {
        ids: defined.into_iter().map(|(id, _)| id).collect(),
        table,
    }
}
