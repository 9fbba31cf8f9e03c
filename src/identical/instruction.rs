//! The one match over an instruction's format: what an instruction holds, part by
//! part, for every reader of instructions in the pass.
//!
//! Three readers look inside an instruction: the encoding (`encode.rs`, what the
//! comparator compares), the fingerprint (`fingerprint.rs`, a hash that must be a
//! function of the encoding) and the table key (`fingerprint.rs`, the immediates
//! alone). A hash that reads a part the encoding does not write, or reads it
//! differently, sets equal functions apart and silently loses merges; a part the
//! encoding forgets is a false merge. So none of them matches on
//! [`InstructionData`] itself: [`visit`] does, once, exhaustively, and hands each
//! reader (an [`InstructionVisitor`]) the parts of one instruction, typed by what
//! they are, in the order the encoding writes them. A new instruction format is
//! one new arm here, and every reader sees its parts.
//!
//! What decides whether a part may be a *hole* (a constant or offset the similar
//! merge may turn into a parameter) is here too ([`Immediate::is_constant`],
//! [`Immediate::LoadOffset`]), so the encoding's holes and the hole-blind
//! fingerprint's blanks are the same parts.

use cranelift_codegen::ir::immediates::{Ieee16, Ieee32, Ieee64, Imm64, Offset32};
use cranelift_codegen::ir::{
    AtomicRmwOp, Block, BlockCall, Constant, DynamicStackSlot, ExceptionTable, FuncRef,
    GlobalValue, InstructionData, JumpTable, MemFlags, Opcode, SigRef, StackSlot, TrapCode, Value,
    ValueListPool, condcodes::FloatCC, condcodes::IntCC,
};

/// An immediate an instruction holds inline, typed by what it is.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum Immediate {
    /// An `iconst`'s immediate as the instruction holds it (the verifier keeps it
    /// within the result type's width; the encoding masks it to that width).
    Int(Imm64),
    /// An `f16const`'s bits.
    F16(Ieee16),
    /// An `f32const`'s bits.
    F32(Ieee32),
    /// An `f64const`'s bits.
    F64(Ieee64),
    /// An 8-bit immediate (a lane index, a shift amount).
    Imm8(u8),
    /// An integer comparison's condition.
    IntCond(IntCC),
    /// A float comparison's condition.
    FloatCond(FloatCC),
    /// A trap code.
    Trap(TrapCode),
    /// An atomic read-modify-write's operation.
    AtomicOp(AtomicRmwOp),
    /// A plain `load`'s offset from `address`: a hole when the load is a callee
    /// load (an indirect call's code or context pointer, loaded from an entry-block
    /// parameter).
    LoadOffset { address: Value, offset: Offset32 },
    /// Any other memory offset (an extending load's, a store's, `stack_addr`'s).
    Offset(Offset32),
    /// `get_exception_handler_address`'s handler index.
    HandlerIndex(Imm64),
}

impl Immediate {
    /// Whether this is a constant the similar merge may make a parameter
    /// (`HoleSite::Constant`): an `iconst`, `f32const` or `f64const` immediate.
    #[inline(always)]
    pub(crate) fn is_constant(self) -> bool {
        matches!(
            self,
            Immediate::Int(_) | Immediate::F32(_) | Immediate::F64(_)
        )
    }

    /// The immediate as one word, for the hashes (two immediates of one opcode
    /// have equal words exactly when they are equal, but for the width of `Int`).
    #[inline(always)]
    pub(crate) fn word(self) -> u64 {
        match self {
            Immediate::Int(imm) => imm.bits() as u64,
            Immediate::F16(imm) => u64::from(imm.bits()),
            Immediate::F32(imm) => u64::from(imm.bits()),
            Immediate::F64(imm) => imm.bits(),
            Immediate::Imm8(imm) => u64::from(imm),
            Immediate::IntCond(cond) => cond as u64,
            Immediate::FloatCond(cond) => cond as u64,
            Immediate::Trap(code) => u64::from(code.as_raw().get()),
            Immediate::AtomicOp(op) => op as u64,
            Immediate::LoadOffset { offset, .. } | Immediate::Offset(offset) => {
                i64::from(offset) as u64
            }
            Immediate::HandlerIndex(imm) => imm.bits() as u64,
        }
    }
}

/// How an instruction names a function.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub(crate) enum FunctionUse {
    /// The callee of a `call` or `return_call`.
    Call,
    /// The callee of a `try_call`.
    TryCall,
    /// `func_addr`: the function's address.
    Address,
}

/// A reader of instructions' parts ([`visit`]). Every method has a default that
/// skips its part, for readers that look at a few parts only (the table key).
pub(crate) trait InstructionVisitor {
    /// Why a part cannot be read (the encoding's `Unsupported`).
    type Error;

    /// One fixed operand.
    #[inline(always)]
    fn value(&mut self, _value: Value) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A list of operands (fixed or variable), length first.
    #[inline(always)]
    fn values(&mut self, _values: &[Value]) -> Result<(), Self::Error> {
        Ok(())
    }

    /// An immediate held inline.
    #[inline(always)]
    fn immediate(&mut self, _immediate: Immediate) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A memory access's flags.
    #[inline(always)]
    fn mem_flags(&mut self, _flags: MemFlags) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A branch to a block with its arguments (`jump`, `brif`).
    #[inline(always)]
    fn block_call(&mut self, _call: &BlockCall) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A `br_table`'s table.
    #[inline(always)]
    fn jump_table(&mut self, _table: JumpTable) -> Result<(), Self::Error> {
        Ok(())
    }

    /// The handler block whose address `get_exception_handler_address` takes.
    #[inline(always)]
    fn handler_block(&mut self, _block: Block) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A function named by a call or by `func_addr`.
    #[inline(always)]
    fn function(&mut self, _func_ref: FuncRef, _use: FunctionUse) -> Result<(), Self::Error> {
        Ok(())
    }

    /// An indirect call's signature.
    #[inline(always)]
    fn signature(&mut self, _sig: SigRef) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A `try_call`'s exception table.
    #[inline(always)]
    fn exception_table(&mut self, _table: ExceptionTable) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A stack slot (`stack_addr`).
    #[inline(always)]
    fn stack_slot(&mut self, _slot: StackSlot) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A dynamic stack slot (`dynamic_stack_addr`).
    #[inline(always)]
    fn dynamic_stack_slot(&mut self, _slot: DynamicStackSlot) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A global value (`global_value`, `symbol_value`, `tls_value`).
    #[inline(always)]
    fn global_value(&mut self, _gv: GlobalValue) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A constant from the constant pool (`vconst`).
    #[inline(always)]
    fn constant(&mut self, _constant: Constant) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A `shuffle`'s lane mask, in the immediate pool.
    #[inline(always)]
    fn shuffle_mask(&mut self, _mask: cranelift_codegen::ir::Immediate) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// Hands `visitor` the parts of the instruction `data`, format by format, in the
/// order the encoding writes them (the opcode, which determines the format, is
/// the reader's to write first). `pool` holds the variable operand lists.
#[inline(always)]
pub(crate) fn visit<V: InstructionVisitor>(
    data: &InstructionData,
    pool: &ValueListPool,
    visitor: &mut V,
) -> Result<(), V::Error> {
    match *data {
        InstructionData::AtomicCas { args, flags, .. } => {
            visitor.values(&args)?;
            visitor.mem_flags(flags)
        }
        InstructionData::AtomicRmw {
            args, flags, op, ..
        } => {
            visitor.values(&args)?;
            visitor.mem_flags(flags)?;
            visitor.immediate(Immediate::AtomicOp(op))
        }
        InstructionData::Binary { args, .. } => visitor.values(&args),
        InstructionData::Ternary { args, .. } => visitor.values(&args),
        InstructionData::BinaryImm8 { arg, imm, .. } => {
            visitor.value(arg)?;
            visitor.immediate(Immediate::Imm8(imm))
        }
        InstructionData::BranchTable { arg, table, .. } => {
            visitor.value(arg)?;
            visitor.jump_table(table)
        }
        InstructionData::Brif { arg, blocks, .. } => {
            visitor.value(arg)?;
            visitor.block_call(&blocks[0])?;
            visitor.block_call(&blocks[1])
        }
        InstructionData::Call { args, func_ref, .. } => {
            visitor.function(func_ref, FunctionUse::Call)?;
            visitor.values(args.as_slice(pool))
        }
        InstructionData::CallIndirect { args, sig_ref, .. } => {
            visitor.signature(sig_ref)?;
            visitor.values(args.as_slice(pool))
        }
        InstructionData::CondTrap { arg, code, .. } => {
            visitor.value(arg)?;
            visitor.immediate(Immediate::Trap(code))
        }
        InstructionData::DynamicStackAddr {
            dynamic_stack_slot, ..
        } => visitor.dynamic_stack_slot(dynamic_stack_slot),
        InstructionData::ExceptionHandlerAddress { block, imm, .. } => {
            visitor.handler_block(block)?;
            visitor.immediate(Immediate::HandlerIndex(imm))
        }
        InstructionData::FloatCompare { args, cond, .. } => {
            visitor.immediate(Immediate::FloatCond(cond))?;
            visitor.values(&args)
        }
        InstructionData::FuncAddr { func_ref, .. } => {
            visitor.function(func_ref, FunctionUse::Address)
        }
        InstructionData::IntAddTrap { args, code, .. } => {
            visitor.values(&args)?;
            visitor.immediate(Immediate::Trap(code))
        }
        InstructionData::IntCompare { args, cond, .. } => {
            visitor.immediate(Immediate::IntCond(cond))?;
            visitor.values(&args)
        }
        InstructionData::Jump { destination, .. } => visitor.block_call(&destination),
        InstructionData::Load {
            opcode,
            arg,
            flags,
            offset,
        } => {
            visitor.value(arg)?;
            visitor.mem_flags(flags)?;
            visitor.immediate(if opcode == Opcode::Load {
                Immediate::LoadOffset {
                    address: arg,
                    offset,
                }
            } else {
                Immediate::Offset(offset)
            })
        }
        InstructionData::LoadNoOffset { arg, flags, .. } => {
            visitor.value(arg)?;
            visitor.mem_flags(flags)
        }
        InstructionData::MultiAry { args, .. } => visitor.values(args.as_slice(pool)),
        InstructionData::NullAry { .. } => Ok(()),
        InstructionData::Shuffle { args, imm, .. } => {
            visitor.values(&args)?;
            visitor.shuffle_mask(imm)
        }
        InstructionData::StackAddr {
            stack_slot, offset, ..
        } => {
            visitor.stack_slot(stack_slot)?;
            visitor.immediate(Immediate::Offset(offset))
        }
        InstructionData::Store {
            args,
            flags,
            offset,
            ..
        } => {
            visitor.values(&args)?;
            visitor.mem_flags(flags)?;
            visitor.immediate(Immediate::Offset(offset))
        }
        InstructionData::StoreNoOffset { args, flags, .. } => {
            visitor.values(&args)?;
            visitor.mem_flags(flags)
        }
        InstructionData::TernaryImm8 { args, imm, .. } => {
            visitor.values(&args)?;
            visitor.immediate(Immediate::Imm8(imm))
        }
        InstructionData::Trap { code, .. } => visitor.immediate(Immediate::Trap(code)),
        InstructionData::TryCall {
            args,
            func_ref,
            exception,
            ..
        } => {
            visitor.function(func_ref, FunctionUse::TryCall)?;
            visitor.values(args.as_slice(pool))?;
            visitor.exception_table(exception)
        }
        InstructionData::TryCallIndirect {
            args, exception, ..
        } => {
            visitor.values(args.as_slice(pool))?;
            visitor.exception_table(exception)
        }
        InstructionData::Unary { arg, .. } => visitor.value(arg),
        InstructionData::UnaryConst {
            constant_handle, ..
        } => visitor.constant(constant_handle),
        InstructionData::UnaryGlobalValue { global_value, .. } => {
            visitor.global_value(global_value)
        }
        InstructionData::UnaryIeee16 { imm, .. } => visitor.immediate(Immediate::F16(imm)),
        InstructionData::UnaryIeee32 { imm, .. } => visitor.immediate(Immediate::F32(imm)),
        InstructionData::UnaryIeee64 { imm, .. } => visitor.immediate(Immediate::F64(imm)),
        InstructionData::UnaryImm { imm, .. } => visitor.immediate(Immediate::Int(imm)),
    }
}
