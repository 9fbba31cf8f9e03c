//! Importing a member's instructions into the merged body: callees,
//! signatures, memory flags, constants and jump tables declared again by
//! content (so that two members' equal entities get one handle, and two
//! instructions equal but for their values compare equal), stack slots by
//! number, blocks once paired, values left out.

use crate::similar::splice::{NotSpliced, imported_name, mapped_jump_table};
use cranelift_codegen::entity::SecondaryMap;
use cranelift_codegen::ir::instructions::InstructionMapper;
use cranelift_codegen::ir::{
    self, Block, BlockCall, ExtFuncData, ExternalName, FuncRef, Function, Inst, InstructionData,
    Opcode, SigRef, StackSlot, Value, ValueList,
};
use rustc_hash::FxHashMap;

/// The value a member's instruction reads where its operands are left out
/// (the reserved value cannot be a block argument): the caller writes the
/// operands.
pub(super) fn placeholder() -> Value {
    Value::from_u32(0)
}

/// Entities imported into the merged body by content, shared by both members
/// so that equal entities get equal handles.
#[derive(Default)]
pub(super) struct Imports {
    signatures: FxHashMap<ir::Signature, SigRef>,
    functions: FxHashMap<(ExternalName, SigRef, bool, bool), FuncRef>,
    immediates: FxHashMap<ir::ConstantData, ir::Immediate>,
}

/// Maps one member's instructions into the merged body: entities imported by
/// content, blocks by `blocks` (once paired), values left out
/// ([`placeholder`]).
pub(super) struct Importer<'a> {
    pub(super) merged: &'a mut Function,
    pub(super) source: &'a Function,
    pub(super) imports: &'a mut Imports,
    pub(super) blocks: Option<&'a SecondaryMap<Block, Option<Block>>>,
    pub(super) refused: Option<&'static str>,
}

impl Importer<'_> {
    fn refuse(&mut self, what: &'static str) {
        self.refused.get_or_insert(what);
    }

    pub(super) fn import(&mut self, inst: Inst) -> Result<InstructionData, NotSpliced> {
        let data = self.source.dfg.insts[inst].map(&mut *self);
        match self.refused {
            Some(what) => Err(NotSpliced(format!("sequence: cannot copy {what}"))),
            None => Ok(data),
        }
    }
}

impl InstructionMapper for Importer<'_> {
    fn map_value(&mut self, _value: Value) -> Value {
        placeholder()
    }

    fn map_value_list(&mut self, value_list: ValueList) -> ValueList {
        let mut list = ValueList::new();
        for _ in value_list.as_slice(&self.source.dfg.value_lists) {
            list.push(placeholder(), &mut self.merged.dfg.value_lists);
        }
        list
    }

    fn map_global_value(&mut self, global_value: ir::GlobalValue) -> ir::GlobalValue {
        self.refuse("a global value");
        global_value
    }

    fn map_jump_table(&mut self, jump_table: ir::JumpTable) -> ir::JumpTable {
        let table = self.source.dfg.jump_tables[jump_table].clone();
        match mapped_jump_table(&table, |call| self.map_block_call(call)) {
            Some(mapped) => self.merged.dfg.jump_tables.push(mapped),
            None => {
                self.refuse("a jump table without a default");
                jump_table
            }
        }
    }

    fn map_exception_table(&mut self, exception_table: ir::ExceptionTable) -> ir::ExceptionTable {
        self.refuse("an exception table");
        exception_table
    }

    fn map_block_call(&mut self, block_call: BlockCall) -> BlockCall {
        let pool = &self.source.dfg.value_lists;
        let target = block_call.block(pool);
        let mapped = self.blocks.and_then(|blocks| blocks[target]);
        let Some(block) = mapped else {
            self.refuse("a branch");
            return block_call;
        };
        let mut args = Vec::new();
        for arg in block_call.args(pool) {
            match arg {
                ir::BlockArg::Value(_) => args.push(ir::BlockArg::Value(placeholder())),
                _ => self.refuse("a block argument that is not a value"),
            }
        }
        BlockCall::new(block, args, &mut self.merged.dfg.value_lists)
    }

    fn map_block(&mut self, block: Block) -> Block {
        self.refuse("a block");
        block
    }

    fn map_func_ref(&mut self, func_ref: FuncRef) -> FuncRef {
        let data = &self.source.dfg.ext_funcs[func_ref];
        let name = imported_name(self.source, self.merged, &data.name);
        let (colocated, patchable) = (data.colocated, data.patchable);
        let signature = self.map_sig_ref(data.signature);
        let key = (name, signature, colocated, patchable);
        if let Some(&mapped) = self.imports.functions.get(&key) {
            return mapped;
        }
        let mapped = self.merged.import_function(ExtFuncData {
            name: key.0.clone(),
            signature,
            colocated,
            patchable,
        });
        self.imports.functions.insert(key, mapped);
        mapped
    }

    fn map_sig_ref(&mut self, sig_ref: SigRef) -> SigRef {
        let signature = &self.source.dfg.signatures[sig_ref];
        if let Some(&mapped) = self.imports.signatures.get(signature) {
            return mapped;
        }
        let mapped = self.merged.import_signature(signature.clone());
        self.imports.signatures.insert(signature.clone(), mapped);
        mapped
    }

    fn map_stack_slot(&mut self, stack_slot: StackSlot) -> StackSlot {
        // The merged body's slots are numbered as both members' (`merged_slots`).
        stack_slot
    }

    fn map_dynamic_stack_slot(&mut self, slot: ir::DynamicStackSlot) -> ir::DynamicStackSlot {
        self.refuse("a dynamic stack slot");
        slot
    }

    fn map_constant(&mut self, constant: ir::Constant) -> ir::Constant {
        let data = self.source.dfg.constants.get(constant).clone();
        self.merged.dfg.constants.insert(data)
    }

    fn map_immediate(&mut self, immediate: ir::Immediate) -> ir::Immediate {
        let data = self.source.dfg.immediates[immediate].clone();
        if let Some(&mapped) = self.imports.immediates.get(&data) {
            return mapped;
        }
        let mapped = self.merged.dfg.immediates.push(data.clone());
        self.imports.immediates.insert(data, mapped);
        mapped
    }

    fn map_mem_flags(&mut self, flags: ir::MemFlags) -> ir::MemFlags {
        let mut data = self.source.dfg.mem_flags[flags];
        if let Some(region) = data.alias_region() {
            let region_data = self.source.dfg.alias_regions[region].clone();
            let mapped = self.merged.dfg.alias_regions.insert(region_data.clone());
            // Regions are deduplicated by their user id alone: two members'
            // regions of one id must be the same region.
            if self.merged.dfg.alias_regions[mapped] != region_data {
                self.refuse("alias regions of one id that differ");
            }
            data.set_alias_region(Some(mapped));
        }
        match self.merged.dfg.mem_flags.insert(data) {
            Ok(mapped) => mapped,
            Err(_) => {
                self.refuse("more memory flags than a function can hold");
                flags
            }
        }
    }
}

/// Whether `opcode` makes a constant from its immediate alone.
pub(super) fn is_constant(opcode: Opcode) -> bool {
    matches!(opcode, Opcode::Iconst | Opcode::F32const | Opcode::F64const)
}
