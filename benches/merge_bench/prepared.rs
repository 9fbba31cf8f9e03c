//! The functions of a module as a backend defines them through
//! `cranelift_module`: shared by the module bench and `tests/compile_once.rs`,
//! which checks that bench's setup.

use clif_merge::FunctionSet;
use cranelift_codegen::ir::{ExternalName, Function, UserExternalName};
use std::collections::HashMap;

/// The functions of `module` as a backend defines them: every callee named
/// `u0:FuncId`, the `FuncId` of each function its index, callees the module does
/// not define declared after it as imports. Returns the functions and every
/// name, defined ones first.
pub fn prepared(module: &FunctionSet) -> (Vec<Function>, Vec<String>) {
    let names: Vec<String> = module
        .iter()
        .map(|(_, d)| d.func.name.to_string())
        .collect();
    let id_of: HashMap<&str, usize> = names
        .iter()
        .enumerate()
        .map(|(i, n)| (n.as_str(), i))
        .collect();
    let mut imports: Vec<String> = Vec::new();
    let mut functions = Vec::new();
    for (_, def) in module.iter() {
        let mut func = (*def.func).clone();
        let refs: Vec<_> = func.dfg.ext_funcs.keys().collect();
        for r in refs {
            let name = func.dfg.ext_funcs[r]
                .name
                .display(Some(&func.params))
                .to_string();
            let index = match id_of.get(name.as_str()) {
                Some(&i) => i,
                None => {
                    let i = imports.iter().position(|n| *n == name).unwrap_or_else(|| {
                        imports.push(name.clone());
                        imports.len() - 1
                    });
                    names.len() + i
                }
            };
            let user = func
                .params
                .ensure_user_func_name(UserExternalName::new(0, index as u32));
            func.dfg.ext_funcs[r].name = ExternalName::User(user);
        }
        functions.push(func);
    }
    let mut all = names;
    all.extend(imports);
    (functions, all)
}
