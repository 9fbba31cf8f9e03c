//! Read-only data merging (`ModuleMergeOptions::data`): identical read-only
//! constant tables defined through `MergingModule<ObjectModule>` are folded into
//! one, the others becoming aliases of it; a writable copy, a thread-local copy and
//! a table with other bytes are not. The program is linked with `cc` and run: it
//! prints what the unmerged build prints (a write to the writable copy does not
//! show in the read-only tables), the read-only data shrinks by the folded table,
//! and the folded tables have one address.

#![allow(clippy::result_large_err)]

#[path = "../support/define.rs"]
mod define_support;
#[path = "../../examples/shared/native.rs"]
#[allow(dead_code)]
mod native;

use clif_merge::module::{DataMerging, MergingModule, ModuleMergeOptions};
use cranelift_codegen::ir::types::I64;
use cranelift_codegen::ir::{AbiParam, InstBuilder, MemFlagsData, Signature, Value};
use cranelift_frontend::FunctionBuilder;
use cranelift_module::{DataDescription, DataId, FuncOrDataId, Linkage, Module};
use cranelift_object::{ObjectBuilder, ObjectModule};
use object::{Object, ObjectSection, SectionKind};

const MAIN_C: &str = r#"
#include <stdio.h>
#include <stdint.h>
extern int64_t read_a(int64_t), read_b(int64_t), read_c(int64_t), read_w(int64_t);
extern void write_w(int64_t, int64_t);
extern const void *address_a(void), *address_b(void), *address_c(void);
int main(void) {
    write_w(3, -1);
    for (int64_t i = 0; i < 8; i++)
        printf("%lld: a %lld b %lld c %lld w %lld\n", (long long)i, (long long)read_a(i),
               (long long)read_b(i), (long long)read_c(i), (long long)read_w(i));
    printf("a and c apart: %d\n", address_a() != address_c());
    return 0;
}
"#;

/// The table's bytes: eight `i64`s.
fn table(seed: i64) -> Vec<u8> {
    (0..8i64)
        .flat_map(|i| (seed * 1000 + i * i * 7 + 1).to_le_bytes())
        .collect()
}

/// Defines function `name` (exported) with `params` `i64` parameters and an `i64`
/// result, or none; `body` gets the parameters.
fn define(
    m: &mut MergingModule<ObjectModule>,
    name: &str,
    params: usize,
    returns: bool,
    body: impl FnOnce(&mut MergingModule<ObjectModule>, &mut FunctionBuilder, &[Value]) -> Option<Value>,
) {
    let mut sig: Signature = m.make_signature();
    sig.params.extend((0..params).map(|_| AbiParam::new(I64)));
    if returns {
        sig.returns.push(AbiParam::new(I64));
    }
    let id = m
        .declare_function(name, Linkage::Export, &sig)
        .expect("declare");
    define_support::define_function(m, id, &sig, |m, b, p| body(m, b, p).into_iter().collect());
}

/// The address of element `index & 7` of `table`.
fn element(
    m: &mut MergingModule<ObjectModule>,
    b: &mut FunctionBuilder,
    table: DataId,
    index: Value,
) -> Value {
    let gv = m.declare_data_in_func(table, b.func);
    let base = b.ins().symbol_value(I64, gv);
    let index = b.ins().band_imm_u(index, 7);
    let offset = b.ins().imul_imm_s(index, 8);
    b.ins().iadd(base, offset)
}

/// Builds the program with `data`; the object and the report's folds.
fn build(data: DataMerging) -> (Vec<u8>, Vec<(String, String)>, u64) {
    let isa = native::pic_host_isa().expect("host ISA");
    let builder = ObjectBuilder::new(isa, "data", cranelift_module::default_libcall_names())
        .expect("builder");
    let options = ModuleMergeOptions::default().with_data(data);
    let mut m = MergingModule::new(ObjectModule::new(builder), options);
    let define_table = |m: &mut MergingModule<ObjectModule>, name: &str, writable, tls, seed| {
        let id = m
            .declare_data(name, Linkage::Local, writable, tls)
            .expect("declare");
        let mut desc = DataDescription::new();
        desc.define(table(seed).into_boxed_slice());
        m.define_data(id, &desc).expect("define");
        id
    };
    let a = define_table(&mut m, "table_a", false, false, 1);
    let b_ = define_table(&mut m, "table_b", false, false, 1);
    let c = define_table(&mut m, "table_c", false, false, 2);
    let w = define_table(&mut m, "table_w", true, false, 1);
    define_table(&mut m, "table_t", false, true, 1);
    for (name, table) in [("read_a", a), ("read_b", b_), ("read_c", c), ("read_w", w)] {
        define(&mut m, name, 1, true, |m, b, p| {
            let address = element(m, b, table, p[0]);
            Some(b.ins().load(I64, MemFlagsData::trusted(), address, 0))
        });
    }
    define(&mut m, "write_w", 2, false, |m, b, p| {
        let address = element(m, b, w, p[0]);
        b.ins().store(MemFlagsData::trusted(), p[1], address, 0);
        None
    });
    for (name, table) in [("address_a", a), ("address_b", b_), ("address_c", c)] {
        define(&mut m, name, 0, true, |m, b, _| {
            let gv = m.declare_data_in_func(table, b.func);
            Some(b.ins().symbol_value(I64, gv))
        });
    }
    assert_eq!(m.get_name("table_b"), Some(FuncOrDataId::Data(b_)));
    let (product, report) = m.finish_object().expect("finish");
    (
        product.emit().expect("emit"),
        report.data_folded,
        report.data_bytes_saved,
    )
}

/// Bytes of read-only data sections in `object`.
fn rodata_bytes(object: &[u8]) -> u64 {
    let file = object::File::parse(object).expect("an object");
    file.sections()
        .filter(|s| matches!(s.kind(), SectionKind::ReadOnlyData))
        .map(|s| s.size())
        .sum()
}

#[test]
fn identical_read_only_tables_fold_and_the_program_runs_alike() {
    let (plain, none, _) = build(DataMerging::Off);
    assert!(none.is_empty(), "off by default: {none:?}");
    let (merged, folded, saved) = build(DataMerging::LocalReadOnly);
    assert_eq!(
        folded,
        [("table_b".to_string(), "table_a".to_string())],
        "only the read-only, non-TLS copy folds"
    );
    assert_eq!(saved, 64);
    assert_eq!(
        rodata_bytes(&merged) + 64,
        rodata_bytes(&plain),
        "read-only data"
    );
    let plain_run = native::link_and_run(&plain, MAIN_C, "data-plain").expect("links");
    let merged_run = native::link_and_run(&merged, MAIN_C, "data-merged").expect("links");
    assert_eq!(plain_run.code, 0, "{}", plain_run.stdout);
    assert_eq!(
        (&merged_run.stdout, merged_run.code),
        (&plain_run.stdout, plain_run.code)
    );
    // A listed object folds whatever its linkage; an unlisted one does not.
    let (_, listed, _) = build(DataMerging::Listed(vec![
        DataId::from_u32(0),
        DataId::from_u32(2),
    ]));
    assert!(listed.is_empty(), "table_a and table_c differ: {listed:?}");
    let (_, listed, _) = build(DataMerging::Listed(vec![
        DataId::from_u32(0),
        DataId::from_u32(1),
    ]));
    assert_eq!(listed, [("table_b".to_string(), "table_a".to_string())]);
}
