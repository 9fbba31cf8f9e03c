//! A closed world in which real compiled code can run in `cranelift-interpreter`.
//!
//! The interpreter's own state only knows stack slots, so code that loads through a
//! pointer (every function wasmtime emits: the heap and the globals hang off the
//! `vmctx` parameter), calls a function outside the module or calls through a
//! pointer could not be run at all. [`Sandbox`] is a [`State`] that makes every such
//! operation total and deterministic, the same in both runs of a comparison:
//!
//! - **Memory** is the whole 64-bit address space. A byte never written reads as a
//!   fixed pseudo-random function of its address and the run's seed, so two runs
//!   that load from the same addresses see the same data, and a load from a
//!   different address almost surely sees different data. Writes go into a sparse
//!   overlay; what a run leaves in memory is part of its result. Alignment flags are
//!   not checked (the hardware does not either).
//! - **Addresses** of `load`s and `store`s (of every width) are computed as the
//!   hardware does: the base plus the sign-extended 32-bit offset, wrapping at 64
//!   bits (at 32 bits for an `i32` base). The interpreter zero-extends the offset
//!   instead; the sandbox corrects each such address before it touches memory
//!   ([`Access`]). Global values already add their offsets signed.
//! - **Stack slots** live at [`STACK_BASE`], frame after frame. A `stack_addr`
//!   outside its slot makes the run inconclusive: where it points depends on a
//!   frame layout the sandbox does not share with the hardware.
//! - **Function addresses** are given by identity, not by the order a run takes
//!   them: every function of the original module has its own address
//!   ([`identity_address`] of its index), and each world maps the names of its
//!   stored functions to those addresses as the transformation says they
//!   correspond ([`FunctionAddresses`]): a function kept, thunked or standing in
//!   as an entry point has the address of the original it replaces, a function the
//!   transformation declares one with another (an alias, an erased duplicate) has
//!   that one's, and a new function (a merged body) a fresh address after the
//!   originals. `func_addr` and a symbol global value of a stored function give
//!   the same address; an address is called as the function of the world that owns
//!   it. An address of a function outside the store is a hash of its name.
//! - **Calls that leave the store** (a direct call to an imported function, or an
//!   indirect call through a pointer that is not the address of a stored function)
//!   go to a *synthetic callee* of the right signature: it mixes the callee's
//!   identity and all its arguments into a trace word in memory and returns values
//!   derived from that mix. The order, targets and arguments of outside calls are
//!   therefore observable in the result.
//!
//! - **Steps**: a run has a fuel of interpreter steps, one per instruction, and a
//!   call costs one more step per [`VALUES_PER_STEP`] values of the called
//!   function and per [`STACK_BYTES_PER_STEP`] bytes of its frame, which the
//!   interpreter makes anew at every call: so the steps a run takes bound its time,
//!   even in a loop calling a large function that returns at once.
//!
//! [`Sandbox::run`] drives the interpreter's `step` function itself (the
//! interpreter's own driver is tied to its built-in state).

use crate::ir::fnv::{Fnv1a, fnv1a};
use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::{
    self, ArgumentPurpose, ExternalName, FuncRef, Function, GlobalValue, GlobalValueData,
    InstBuilder, InstructionData, LibCall, MemFlagsData, Signature, StackSlot, Type, UserFuncName,
    Value, types,
};
use cranelift_frontend::{FunctionBuilder, FunctionBuilderContext};
use cranelift_interpreter::address::{Address, AddressSize};
use cranelift_interpreter::environment::FunctionStore;
use cranelift_interpreter::frame::Frame;
use cranelift_interpreter::instruction::DfgInstructionContext;
use cranelift_interpreter::interpreter::LibCallHandler;
use cranelift_interpreter::state::{InterpreterFunctionRef, MemoryError, State};
use cranelift_interpreter::step::{ControlFlow, CraneliftTrap, step};
use cranelift_interpreter::value::DataValueExt;
use rustc_hash::FxHashMap;
use std::cell::Cell;
use std::collections::HashMap;

/// Where the first stack frame starts.
pub const STACK_BASE: u64 = 0x0000_7ffc_0000_0000;
/// Where the addresses of stored functions start (16 bytes apart).
const FUNCTION_BASE: u64 = 0x0000_5555_0000_0000;

/// The address of the function of identity `identity` (its index in the original
/// module, or a fresh number after them for a new function), in every world.
pub fn identity_address(identity: usize) -> u64 {
    FUNCTION_BASE.wrapping_add(16u64.wrapping_mul(identity as u64))
}

/// The addresses of one world's stored functions, by name, and the function a
/// call through each address reaches in that world.
#[derive(Clone, Debug, Default)]
pub struct FunctionAddresses {
    /// The address of each stored function, by its name in the store.
    by_name: FxHashMap<String, u64>,
    /// The stored function (by name) that owns each address: the one a call
    /// through it runs.
    owner: FxHashMap<u64, String>,
}

impl FunctionAddresses {
    /// No function has an address yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The function `name` is the one of identity `identity`: it has that
    /// identity's address and a call through the address runs it. A name or an
    /// address given twice keeps what it was given first, as the store keeps
    /// the first function of a name.
    pub fn own(&mut self, name: String, identity: usize) {
        let address = identity_address(identity);
        self.owner.entry(address).or_insert_with(|| name.clone());
        self.by_name.entry(name).or_insert(address);
    }

    /// The function `name` is declared to share the address of identity
    /// `identity` (an alias or an erased duplicate): it has that address, and a
    /// call through it runs the function that owns it.
    pub fn share(&mut self, name: String, identity: usize) {
        self.by_name
            .entry(name)
            .or_insert(identity_address(identity));
    }

    /// The address of the stored function `name`, if it was given one.
    fn address(&self, name: &str) -> Option<u64> {
        self.by_name.get(name).copied()
    }

    /// The name of the stored function a call through `address` runs.
    fn owner(&self, address: u64) -> Option<&str> {
        self.owner.get(&address).map(String::as_str)
    }
}
/// Where the addresses of libcalls start (16 bytes apart).
const LIBCALL_BASE: u64 = 0x0000_5556_0000_0000;
/// Addresses of functions outside the store: this tag with a hash of the name.
const EXTERNAL_TAG: u64 = 0x0000_6000_0000_0000;
/// A word a synthetic callee loads to learn which callee it is standing in for.
const CALLEE_REGISTER: u64 = 0xffff_fff0_0000_0000;
/// The word synthetic callees fold every call into.
const CALL_TRACE: u64 = 0xffff_fff0_0000_0010;

/// How many values of a called function's frame cost one step: making the
/// frame fills a slot for each, and an instruction takes about as long as filling
/// this many slots.
const VALUES_PER_STEP: u64 = 256;

/// How many bytes of a called function's stack frame cost one step (they are
/// zeroed at each call).
const STACK_BYTES_PER_STEP: u64 = 1024;

/// The most stack all frames of a run may take together: a larger frame makes the
/// run inconclusive instead of allocating it.
const STACK_LIMIT: usize = 64 << 20;

/// A libcall the sandbox cannot run: the run is inconclusive.
const UNSUPPORTED_LIBCALL: CraneliftTrap = CraneliftTrap::Debug;

/// Synthetic callees, one per signature, built before any run (the interpreter
/// borrows functions for the whole run).
#[derive(Default)]
pub struct SyntheticCallees {
    by_signature: HashMap<Signature, Function>,
}

impl SyntheticCallees {
    /// Callees for every signature any of `functions` declares (for direct and
    /// indirect calls alike) whose parameter and return types can be mixed.
    pub fn for_functions<'f>(functions: impl IntoIterator<Item = &'f Function>) -> Self {
        let mut by_signature = HashMap::new();
        for func in functions {
            for sig in func.dfg.signatures.values() {
                if !by_signature.contains_key(sig)
                    && let Some(callee) = synthetic_callee(sig)
                {
                    by_signature.insert(sig.clone(), callee);
                }
            }
        }
        Self { by_signature }
    }

    fn get(&self, sig: &Signature) -> Option<&Function> {
        self.by_signature.get(sig)
    }
}

/// Whether the synthetic callee can take or return a value of type `ty`.
fn mixable(ty: Type) -> bool {
    matches!(
        ty,
        types::I8 | types::I16 | types::I32 | types::I64 | types::I128 | types::F32 | types::F64
    )
}

/// A function of signature `sig` that folds a callee identity (read from
/// [`CALLEE_REGISTER`]) and its arguments into [`CALL_TRACE`] and returns values
/// derived from them. `None` when a type cannot be mixed.
fn synthetic_callee(sig: &Signature) -> Option<Function> {
    let types_ok = sig
        .params
        .iter()
        .chain(&sig.returns)
        .all(|p| mixable(p.value_type));
    if !types_ok {
        return None;
    }
    let mut func = Function::with_name_signature(UserFuncName::testcase("synthetic"), sig.clone());
    let mut context = FunctionBuilderContext::new();
    let mut builder = FunctionBuilder::new(&mut func, &mut context);
    let block = builder.create_block();
    builder.append_block_params_for_function_params(block);
    builder.switch_to_block(block);
    builder.seal_block(block);
    let flags = MemFlagsData::trusted();
    let multiplier = builder
        .ins()
        .iconst(types::I64, 0x9e37_79b9_7f4a_7c15u64 as i64);
    let rotation = builder.ins().iconst(types::I64, 29);
    let register = builder.ins().iconst(types::I64, CALLEE_REGISTER as i64);
    let mut mix = builder.ins().load(types::I64, flags, register, 0);
    let params: Vec<Value> = builder.block_params(block).to_vec();
    for param in params {
        let ty = builder.func.dfg.value_type(param);
        let words: Vec<Value> = match ty {
            types::I64 => vec![param],
            types::I8 | types::I16 | types::I32 => vec![builder.ins().uextend(types::I64, param)],
            types::I128 => {
                let (lo, hi) = builder.ins().isplit(param);
                vec![lo, hi]
            }
            types::F32 => {
                let bits = builder
                    .ins()
                    .bitcast(types::I32, MemFlagsData::new(), param);
                vec![builder.ins().uextend(types::I64, bits)]
            }
            _ => vec![
                builder
                    .ins()
                    .bitcast(types::I64, MemFlagsData::new(), param),
            ],
        };
        for word in words {
            mix = builder.ins().bxor(mix, word);
            mix = builder.ins().imul(mix, multiplier);
            mix = builder.ins().rotl(mix, rotation);
        }
    }
    let trace = builder.ins().iconst(types::I64, CALL_TRACE as i64);
    let old = builder.ins().load(types::I64, flags, trace, 0);
    let folded = builder.ins().imul(old, multiplier);
    let folded = builder.ins().bxor(folded, mix);
    builder.ins().store(flags, folded, trace, 0);
    let mut results = Vec::new();
    for (i, ret) in sig.returns.iter().enumerate() {
        let salt = builder
            .ins()
            .iconst(types::I64, (i as i64 + 1) * 0x632b_e59b_d9b4_e019);
        let word = builder.ins().bxor(mix, salt);
        let word = builder.ins().imul(word, multiplier);
        results.push(match ret.value_type {
            types::I64 => word,
            ty @ (types::I8 | types::I16 | types::I32) => builder.ins().ireduce(ty, word),
            types::I128 => builder.ins().uextend(types::I128, word),
            types::F32 => {
                let bits = builder.ins().ireduce(types::I32, word);
                builder.ins().bitcast(types::F32, MemFlagsData::new(), bits)
            }
            _ => builder.ins().bitcast(types::F64, MemFlagsData::new(), word),
        });
    }
    builder.ins().return_(&results);
    Some(func)
}

/// The environment of a run: the functions that exist and the synthetic callees.
pub struct SandboxWorld<'a> {
    /// The functions calls and addresses can reach, by name.
    pub store: &'a FunctionStore<'a>,
    /// Stand-ins for everything else.
    pub callees: &'a SyntheticCallees,
    /// The address of each function of `store`.
    pub addresses: &'a FunctionAddresses,
}

/// How a run ended: returned values or a trap.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Ending {
    /// `return` with these values.
    Return(Vec<DataValue>),
    /// A trap, as the interpreter describes it (its trap type is not `Clone`).
    Trap(String),
    /// The run stopped before it returned or trapped: the interpreter panicked, met
    /// something it cannot do, or ran out of fuel. Only ever the merged side of a
    /// mismatch (an original that stops is no conclusive input); equal to nothing.
    Stopped(String),
}

impl PartialEq for Ending {
    /// Returned values are equal when they have the same type and the same bits:
    /// NaN equals the same NaN, `-0.0` differs from `0.0` (unlike
    /// `DataValue`'s own float comparison).
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Return(a), Self::Return(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same_bits(x, y))
            }
            (Self::Trap(a), Self::Trap(b)) => a == b,
            _ => false,
        }
    }
}

impl Eq for Ending {}

impl std::fmt::Display for Ending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Return(values) => write!(f, "return {values:?}"),
            Self::Trap(trap) => write!(f, "trap {trap}"),
            Self::Stopped(why) => write!(f, "stopped: {why}"),
        }
    }
}

/// Whether two values have the same type and the same bits.
fn same_bits(a: &DataValue, b: &DataValue) -> bool {
    let ty = a.ty();
    if ty != b.ty() {
        return false;
    }
    let size = ty.bytes() as usize;
    let (mut x, mut y) = (vec![0u8; size], vec![0u8; size]);
    a.write_to_slice_le(&mut x);
    b.write_to_slice_le(&mut y);
    x == y
}

/// How a run ended, when it ended conclusively.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunOutcome {
    /// Returned values or a trap.
    pub ending: Ending,
    /// Bytes outside the stack that the run left different from before, with their
    /// final values, in address order.
    pub memory: Vec<(u64, u8)>,
}

impl std::fmt::Display for RunOutcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.ending)?;
        if !self.memory.is_empty() {
            let digest = self
                .memory
                .iter()
                .fold(Fnv1a::new(), |h, &(a, b)| h.word(a ^ (u64::from(b) << 56)))
                .finish();
            write!(
                f,
                ", {} bytes of memory written (digest {digest:016x})",
                self.memory.len()
            )?;
        }
        Ok(())
    }
}

/// Why a run is not conclusive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Inconclusive {
    /// The run took more steps than its fuel.
    OutOfFuel,
    /// The interpreter could not execute something (an unsupported instruction, a
    /// call to something with no stand-in, a libcall).
    Unsupported(String),
}

/// The address a `load` or `store` about to run accesses: as the interpreter
/// computes it, and as the hardware does.
///
/// `cranelift-interpreter` 0.135.8 zero-extends the `Offset32` of a load or store
/// before adding it to the base (`calculate_addr` in its `step.rs` converts the
/// immediate with `ValueConversionKind::ZeroExtend(types::I64)`), so `v0-16` would
/// read `v0 + 0xffff_fff0`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Access {
    interpreted: u64,
    hardware: u64,
}

impl Access {
    /// The access of `inst` in `function` with the values of `frame`, or `None`
    /// when `inst` is no load or store with an offset (atomics take a bare
    /// address; `stack_addr` checks its offset against the slot instead).
    fn of(function: &Function, inst: ir::Inst, frame: &Frame<'_>) -> Option<Self> {
        let (base, offset) = match function.dfg.insts[inst] {
            InstructionData::Load { arg, offset, .. } => (arg, i64::from(offset)),
            InstructionData::Store { args, offset, .. } => (args[1], i64::from(offset)),
            _ => return None,
        };
        let unsigned = u64::from(offset as u32);
        Some(match *frame.get(base) {
            DataValue::I64(base) => Self {
                interpreted: (base as u64).wrapping_add(unsigned),
                hardware: (base as u64).wrapping_add(offset as u64),
            },
            DataValue::I32(base) => Self {
                interpreted: u64::from(base as u32) + unsigned,
                hardware: u64::from((base as u32).wrapping_add(offset as u32)),
            },
            _ => return None,
        })
    }
}

/// The interpreter state of one run.
pub struct Sandbox<'a> {
    world: &'a SandboxWorld<'a>,
    frames: Vec<Frame<'a>>,
    /// Where each frame's stack slots start, relative to [`STACK_BASE`].
    frame_offsets: Vec<u64>,
    stack: Vec<u8>,
    /// Written bytes outside the stack.
    memory: FxHashMap<u64, u8>,
    seed: u64,
    /// Identity of the outside callee a synthetic callee stands in for.
    callee: Cell<u64>,
    /// Signature of the indirect call being made.
    indirect_signature: Cell<Option<&'a Signature>>,
    pinned_reg: DataValue,
    fuel: u64,
    /// The memory access of the instruction being stepped, if it has an offset.
    access: Cell<Option<Access>>,
    /// Why the step being run computed an address the sandbox cannot make the
    /// hardware's: the run is then inconclusive (the interpreter would trap or
    /// access another address instead).
    unmodelled: Cell<Option<String>>,
}

impl<'a> Sandbox<'a> {
    /// A fresh state: empty stack, memory as of `seed`, `fuel` interpreter steps.
    pub fn new(world: &'a SandboxWorld<'a>, seed: u64, fuel: u64) -> Self {
        Self {
            world,
            frames: Vec::new(),
            frame_offsets: Vec::new(),
            stack: Vec::new(),
            memory: FxHashMap::default(),
            seed,
            callee: Cell::new(0),
            indirect_signature: Cell::new(None),
            pinned_reg: DataValue::I64(0),
            fuel,
            access: Cell::new(None),
            unmodelled: Cell::new(None),
        }
    }

    /// Runs the stored function `name` on `args` to its end; returns how it ended
    /// and the steps it took.
    pub fn run(
        mut self,
        name: &str,
        args: &[DataValue],
    ) -> (Result<RunOutcome, Inconclusive>, u64) {
        let fuel = self.fuel;
        let outcome = self.run_to_end(name, args);
        (outcome, fuel - self.fuel)
    }

    fn run_to_end(&mut self, name: &str, args: &[DataValue]) -> Result<RunOutcome, Inconclusive> {
        let function = self
            .world
            .store
            .get_by_name(name)
            .ok_or_else(|| Inconclusive::Unsupported(format!("no function {name}")))?;
        let ending = match self.call(function, args)? {
            ControlFlow::Return(values) => Ending::Return(values.to_vec()),
            ControlFlow::Trap(UNSUPPORTED_LIBCALL) => {
                return Err(Inconclusive::Unsupported("libcall or debugtrap".into()));
            }
            ControlFlow::Trap(trap) => Ending::Trap(format!("{trap:?}")),
            other => return Err(Inconclusive::Unsupported(format!("ended with {other:?}"))),
        };
        let mut memory: Vec<(u64, u8)> = self
            .memory
            .iter()
            .filter(|&(&address, &byte)| byte != self.background(address))
            .map(|(&address, &byte)| (address, byte))
            .collect();
        memory.sort_unstable();
        Ok(RunOutcome { ending, memory })
    }

    fn call(
        &mut self,
        function: &'a Function,
        args: &[DataValue],
    ) -> Result<ControlFlow<'a>, Inconclusive> {
        let entry = function
            .layout
            .entry_block()
            .ok_or_else(|| Inconclusive::Unsupported("function without a body".into()))?;
        let params = function.dfg.block_params(entry);
        if params.len() != args.len() {
            return Ok(ControlFlow::Trap(CraneliftTrap::BadSignature));
        }
        if self.stack.len() + function.fixed_stack_size() as usize > STACK_LIMIT {
            return Err(Inconclusive::Unsupported(format!(
                "more than {} MiB of stack frames",
                STACK_LIMIT >> 20
            )));
        }
        // A frame holds a slot for every value of its function and its stack
        // slots, made anew at each call: the call costs steps for them, so that
        // steps bound the time.
        let frame_steps = function.dfg.num_values() as u64 / VALUES_PER_STEP
            + u64::from(function.fixed_stack_size()) / STACK_BYTES_PER_STEP;
        if self.fuel < frame_steps {
            self.fuel = 0;
            return Err(Inconclusive::OutOfFuel);
        }
        self.fuel -= frame_steps;
        self.push_frame(function);
        self.current_frame_mut().set_all(params, args.to_vec());
        self.block(entry)
    }

    fn block(&mut self, block: ir::Block) -> Result<ControlFlow<'a>, Inconclusive> {
        let function = self.current_frame().function();
        let layout = &function.layout;
        let mut next = layout.first_inst(block);
        while let Some(inst) = next {
            if self.fuel == 0 {
                return Err(Inconclusive::OutOfFuel);
            }
            self.fuel -= 1;
            if let InstructionData::CallIndirect { sig_ref, .. } = function.dfg.insts[inst] {
                self.indirect_signature
                    .set(Some(&function.dfg.signatures[sig_ref]));
            }
            self.access
                .set(Access::of(function, inst, self.current_frame()));
            let context = DfgInstructionContext::new(inst, &function.dfg);
            let flow = step(self, context).map_err(|e| Inconclusive::Unsupported(e.to_string()))?;
            if let Some(why) = self.unmodelled.take() {
                return Err(Inconclusive::Unsupported(why));
            }
            match flow {
                ControlFlow::Assign(values) => {
                    self.current_frame_mut()
                        .set_all(function.dfg.inst_results(inst), values.to_vec());
                    next = layout.next_inst(inst);
                }
                ControlFlow::Continue => next = layout.next_inst(inst),
                ControlFlow::ContinueAt(target, args) => {
                    self.current_frame_mut()
                        .set_all(function.dfg.block_params(target), args.to_vec());
                    next = layout.first_inst(target);
                }
                ControlFlow::Call(callee, args) => match self.call(callee, &args)? {
                    ControlFlow::Return(results) => {
                        self.current_frame_mut()
                            .set_all(function.dfg.inst_results(inst), results.to_vec());
                        next = layout.next_inst(inst);
                    }
                    ControlFlow::Trap(trap) => return Ok(ControlFlow::Trap(trap)),
                    other => {
                        return Err(Inconclusive::Unsupported(format!(
                            "call ended with {other:?}"
                        )));
                    }
                },
                ControlFlow::ReturnCall(callee, args) => {
                    self.pop_frame();
                    return self.call(callee, &args);
                }
                ControlFlow::Return(results) => {
                    self.pop_frame();
                    return Ok(ControlFlow::Return(results));
                }
                ControlFlow::Trap(trap) => return Ok(ControlFlow::Trap(trap)),
            }
        }
        Err(Inconclusive::Unsupported(
            "fell off the end of a block".into(),
        ))
    }

    /// The byte at `address` in memory never written. The seed also picks the kind
    /// of memory, so that across a run's inputs code sees both wild data and the
    /// small values (counts, indices, lengths, nearby pointers) that let it past its
    /// range checks and into its loops:
    /// 0: uniform random bytes; 1: each 4-byte word a value below 16;
    /// 2: each 8-byte word a value below 256; 3: all zero.
    fn background(&self, address: u64) -> u8 {
        let mut x = address ^ self.seed.rotate_left(32) ^ 0x9e37_79b9_7f4a_7c15;
        x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        let random = (x ^ (x >> 31)) as u8;
        match self.seed % 4 {
            0 => random,
            1 if address.is_multiple_of(4) => random & 0x0f,
            2 if address.is_multiple_of(8) => random,
            _ => 0,
        }
    }

    fn in_stack(&self, address: u64) -> Option<usize> {
        let offset = address.checked_sub(STACK_BASE)?;
        (offset < self.stack.len() as u64).then_some(offset as usize)
    }

    fn read_byte(&self, address: u64) -> u8 {
        if let Some(offset) = self.in_stack(address) {
            return self.stack[offset];
        }
        match self.memory.get(&address) {
            Some(&byte) => byte,
            None => self.background(address),
        }
    }

    fn write_byte(&mut self, address: u64, byte: u8) {
        if let Some(offset) = self.in_stack(address) {
            self.stack[offset] = byte;
        } else {
            self.memory.insert(address, byte);
        }
    }

    /// The address a load or store at `address` (as the interpreter computed it)
    /// accesses on the hardware.
    fn hardware_address(&self, address: &Address) -> Result<u64, MemoryError> {
        let address = raw(address)?;
        Ok(match self.access.take() {
            None => address,
            Some(access) if access.interpreted == address => access.hardware,
            Some(access) => {
                self.unmodelled.set(Some(format!(
                    "the interpreter accessed {address:#x} where the sandbox expected {:#x}",
                    access.interpreted
                )));
                address
            }
        })
    }

    /// The stand-in for an outside callee with identity `id` and signature `sig`.
    fn synthetic(&self, id: u64, sig: &Signature) -> Option<&'a Function> {
        let callee = self.world.callees.get(sig)?;
        self.callee.set(id);
        Some(callee)
    }

    /// The address of the function the store knows as `name`: its address in
    /// this world, so that `func_addr` and a symbol give the same one. A stored
    /// function the world gave no address makes the run inconclusive (its
    /// address would be a guess); a name outside the store has a hash of it.
    fn address_of_name(&self, name: &str) -> u64 {
        if let Some(address) = self.world.addresses.address(name) {
            return address;
        }
        if self.world.store.get_by_name(name).is_some() {
            self.unmodelled
                .set(Some(format!("the stored function {name} has no address")));
        }
        external_address(name)
    }

    /// The name by which the store knows the function `name` refers to from the
    /// current function.
    fn store_name(&self, name: &ExternalName) -> String {
        name.display(Some(&self.get_current_function().params))
            .to_string()
    }
}

/// The address of a function outside the store.
fn external_address(name: &str) -> u64 {
    let hash = fnv1a(name.as_bytes());
    EXTERNAL_TAG | (hash & 0x0000_0fff_ffff_fff0)
}

/// The raw bits of `address`.
fn raw(address: &Address) -> Result<u64, MemoryError> {
    Ok(match DataValue::try_from(address.clone())? {
        DataValue::I32(v) => u64::from(v as u32),
        DataValue::I64(v) => v as u64,
        other => return Err(MemoryError::InvalidAddress(other)),
    })
}

fn address_of(size: AddressSize, raw: u64) -> Result<Address, MemoryError> {
    match size {
        AddressSize::_64 => Address::try_from(DataValue::I64(raw as i64)),
        AddressSize::_32 => Err(MemoryError::InvalidAddressType(types::I32)),
    }
}

impl<'a> State<'a> for Sandbox<'a> {
    fn get_function(&self, func_ref: FuncRef) -> Option<&'a Function> {
        let current = self.get_current_function();
        if let Some(function) = self.world.store.get_from_func_ref(func_ref, current) {
            return Some(function);
        }
        let ext = &current.dfg.ext_funcs[func_ref];
        let id = external_address(&self.store_name(&ext.name));
        self.synthetic(id, &current.dfg.signatures[ext.signature])
    }

    fn get_current_function(&self) -> &'a Function {
        self.current_frame().function()
    }

    fn get_libcall_handler(&self) -> LibCallHandler {
        |_, _| Err(UNSUPPORTED_LIBCALL)
    }

    fn push_frame(&mut self, function: &'a Function) {
        let offset = self.stack.len() as u64;
        self.stack
            .resize(self.stack.len() + function.fixed_stack_size() as usize, 0);
        self.frame_offsets.push(offset);
        self.frames.push(Frame::new(function));
    }

    fn pop_frame(&mut self) {
        if let (Some(_), Some(offset)) = (self.frames.pop(), self.frame_offsets.pop()) {
            self.stack.truncate(offset as usize);
        }
    }

    fn current_frame_mut(&mut self) -> &mut Frame<'a> {
        self.frames
            .last_mut()
            .expect("a frame is pushed before any step")
    }

    fn current_frame(&self) -> &Frame<'a> {
        self.frames
            .last()
            .expect("a frame is pushed before any step")
    }

    fn stack_address(
        &self,
        size: AddressSize,
        slot: StackSlot,
        offset: u64,
    ) -> Result<Address, MemoryError> {
        let slots = &self.get_current_function().sized_stack_slots;
        let data = &slots[slot];
        // The interpreter passes the `Offset32` zero-extended, so `ss0-8` arrives
        // as `0xffff_fff8`: an address outside its slot depends on the frame
        // layout, which the sandbox does not share with the hardware.
        if offset >= u64::from(data.size) {
            self.unmodelled.set(Some(format!(
                "stack_addr {slot}{:+} outside the slot ({} bytes)",
                offset as u32 as i32, data.size
            )));
            return Err(MemoryError::InvalidOffset {
                offset,
                max: u64::from(data.size),
            });
        }
        let slot_offset: u64 = slots
            .keys()
            .filter(|&k| k < slot)
            .map(|k| u64::from(slots[k].size))
            .sum();
        let frame = self.frame_offsets.last().copied().unwrap_or(0);
        address_of(size, STACK_BASE + frame + slot_offset + offset)
    }

    fn checked_load(
        &self,
        address: Address,
        ty: Type,
        mem_flags: MemFlagsData,
    ) -> Result<DataValue, MemoryError> {
        let start = self.hardware_address(&address)?;
        if start == CALLEE_REGISTER && ty == types::I64 {
            return Ok(DataValue::I64(self.callee.get() as i64));
        }
        let bytes: Vec<u8> = (0..u64::from(ty.bytes()))
            .map(|i| self.read_byte(start.wrapping_add(i)))
            .collect();
        Ok(match mem_flags.endianness(ir::Endianness::Little) {
            ir::Endianness::Big => DataValue::read_from_slice_be(&bytes, ty),
            ir::Endianness::Little => DataValue::read_from_slice_le(&bytes, ty),
        })
    }

    fn checked_store(
        &mut self,
        address: Address,
        v: DataValue,
        mem_flags: MemFlagsData,
    ) -> Result<(), MemoryError> {
        let start = self.hardware_address(&address)?;
        let mut bytes = vec![0; v.ty().bytes() as usize];
        match mem_flags.endianness(ir::Endianness::Little) {
            ir::Endianness::Big => v.write_to_slice_be(&mut bytes),
            ir::Endianness::Little => v.write_to_slice_le(&mut bytes),
        }
        for (i, byte) in bytes.into_iter().enumerate() {
            self.write_byte(start.wrapping_add(i as u64), byte);
        }
        Ok(())
    }

    fn function_address(
        &self,
        size: AddressSize,
        name: &ExternalName,
    ) -> Result<Address, MemoryError> {
        if let ExternalName::LibCall(libcall) = name {
            let index = LibCall::all_libcalls()
                .iter()
                .position(|lc| lc == libcall)
                .unwrap_or(usize::MAX >> 8) as u64;
            return address_of(size, LIBCALL_BASE + 16 * index);
        }
        address_of(size, self.address_of_name(&self.store_name(name)))
    }

    fn get_function_from_address(&self, address: Address) -> Option<InterpreterFunctionRef<'a>> {
        let raw = raw(&address).ok()?;
        if let Some(function) = self
            .world
            .addresses
            .owner(raw)
            .and_then(|name| self.world.store.get_by_name(name))
        {
            return Some(InterpreterFunctionRef::Function(function));
        }
        if raw >= LIBCALL_BASE && raw.is_multiple_of(16) {
            let index = (raw - LIBCALL_BASE) / 16;
            if let Some(&libcall) = LibCall::all_libcalls().get(index as usize) {
                return Some(InterpreterFunctionRef::LibCall(libcall));
            }
        }
        let sig = self.indirect_signature.get()?;
        self.synthetic(raw, sig)
            .map(InterpreterFunctionRef::Function)
    }

    fn resolve_global_value(&self, gv: GlobalValue) -> Result<DataValue, MemoryError> {
        let func = self.get_current_function();
        match func.global_values[gv] {
            GlobalValueData::VMContext => {
                let index = func
                    .signature
                    .params
                    .iter()
                    .position(|p| p.purpose == ArgumentPurpose::VMContext)
                    .ok_or(MemoryError::InvalidAddressType(types::INVALID))?;
                let entry = func
                    .layout
                    .entry_block()
                    .ok_or(MemoryError::InvalidAddressType(types::INVALID))?;
                Ok(self
                    .current_frame()
                    .get(func.dfg.block_params(entry)[index])
                    .clone())
            }
            GlobalValueData::Load {
                base,
                offset,
                global_type,
                flags,
            } => {
                let base = self.resolve_global_value(base)?;
                let base =
                    base.clone()
                        .into_int_unsigned()
                        .map_err(|_| MemoryError::InvalidAddress(base))? as u64;
                let address = address_of(
                    AddressSize::_64,
                    base.wrapping_add(i64::from(offset) as u64),
                )?;
                self.checked_load(address, global_type, func.dfg.mem_flags[flags])
            }
            GlobalValueData::IAddImm {
                base,
                offset,
                global_type,
            } => {
                let base = self.resolve_global_value(base)?;
                let sum = base
                    .clone()
                    .into_int_unsigned()
                    .map_err(|_| MemoryError::InvalidAddress(base))?
                    .wrapping_add(i64::from(offset) as i128 as u128);
                DataValue::from_integer(sum as i128, global_type)
                    .map_err(|_| MemoryError::InvalidAddressType(global_type))
            }
            GlobalValueData::Symbol {
                ref name, offset, ..
            } => {
                let base = match name {
                    ExternalName::LibCall(_)
                    | ExternalName::User(_)
                    | ExternalName::TestCase(_) => self.address_of_name(&self.store_name(name)),
                    ExternalName::KnownSymbol(symbol) => external_address(&symbol.to_string()),
                };
                Ok(DataValue::I64(
                    base.wrapping_add(i64::from(offset) as u64) as i64
                ))
            }
            GlobalValueData::DynScaleTargetConst { .. } => {
                Err(MemoryError::InvalidAddressType(types::INVALID))
            }
        }
    }

    fn get_pinned_reg(&self) -> DataValue {
        self.pinned_reg.clone()
    }

    fn set_pinned_reg(&mut self, v: DataValue) {
        self.pinned_reg = v;
    }
}
