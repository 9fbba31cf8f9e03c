//! Random benchmark modules, printed both as Cranelift CLIF and as LLVM IR.
//!
//! [`generate`] builds one module of `N` functions `%f0 .. %f{N-1}`, all with the
//! signature `(i64 p, i32 a, i32 b) -> i32` (`i8*` for `p` in LLVM IR), and prints
//! the same program twice: as CLIF text for clif-merge and as LLVM IR text (`.ll`)
//! for `opt -passes=mergefunc`. Each function is one of:
//!
//! * an *original*: a random body of 5..=200 CLIF instructions made of
//!   straight-line i32 arithmetic, loads and stores at `p + offset`, compare and
//!   select, if/else diamonds joining in a block parameter (a phi), counted loops
//!   with block parameters (phis) that may load from `p + i*4`, and calls to
//!   functions with a lower index (the call graph is acyclic). Every original
//!   carries a constant unique to it, so no two originals are equivalent;
//! * an *exact duplicate* of an earlier original: the same program printed with
//!   renamed values and blocks, the non-entry blocks in a shuffled order and the
//!   callee declarations renumbered; it must merge with its original;
//! * a *near duplicate* of an earlier original: like an exact duplicate, but with
//!   exactly one integer constant (an `iconst` or a shift amount) or one operand of
//!   a binary operation changed. Half of the near duplicates differ in the last
//!   quarter of the function (the costly case for a comparator walking in CFG
//!   order), the others anywhere. No near duplicate is equivalent to its original
//!   nor to any other function, in CLIF or in LLVM IR; it must not merge.
//!
//! Duplicates are interleaved with the originals. Output is deterministic: the
//! same [`GenConfig`] gives byte-identical text. Only `std` is used: the random
//! numbers come from a seeded splitmix64.
//!
//! Cranelift 0.135 has no `*_imm` instructions, so shift amounts, compare
//! immediates and loop steps are `iconst`s in CLIF; LLVM IR writes them inline.
//! With a shuffled layout an operand may be defined further down the text, and
//! the instruction then names its controlling type (`iadd.i32`), as the CLIF
//! reader needs.
//!
//! The LLVM IR uses typed pointers (`i8*`, `bitcast` to `i32*` before each load
//! and store) so that plain `opt` 14 reads it (its `ptr` needs `-opaque-pointers`,
//! a flag later versions dropped); LLVM 15 and newer read typed pointer syntax as
//! opaque `ptr`, where the `bitcast`s are no-ops.

use std::collections::HashSet;

/// What [`generate`] builds.
#[derive(Clone, Debug)]
pub struct GenConfig {
    /// Number of functions in the module.
    pub functions: usize,
    /// Fraction of the functions that are exact duplicates of an earlier original.
    pub dup_rate: f64,
    /// Fraction of the functions that are near duplicates of an earlier original
    /// (one constant or one operand differs).
    pub near_rate: f64,
    /// Seed of the random generator; the same config gives the same output.
    pub seed: u64,
}

/// One generated module, as CLIF and as LLVM IR text.
#[derive(Clone, Debug)]
pub struct GeneratedModule {
    /// The module as CLIF text (functions `%f0 ..`, `system_v`).
    pub clif: String,
    /// The same module as LLVM IR text (functions `@f0 ..`).
    pub ll: String,
    /// Number of functions in the module.
    pub functions: usize,
    /// Number of functions that are exact duplicates of an earlier one.
    pub exact_duplicates: usize,
    /// Number of functions that are near duplicates of an earlier one (the
    /// requested share, unless too few originals come first to allow distinct
    /// changes: then some become originals instead).
    pub near_duplicates: usize,
    /// Total CLIF instructions in the module, terminators included.
    pub clif_instructions: u64,
}

/// Builds the module described by `config`.
pub fn generate(config: &GenConfig) -> GeneratedModule {
    let n = config.functions;
    let clamp = |r: f64| {
        if r.is_finite() {
            r.clamp(0.0, 1.0)
        } else {
            0.0
        }
    };
    let mut exact = (n as f64 * clamp(config.dup_rate)).round() as usize;
    let mut near = (n as f64 * clamp(config.near_rate)).round() as usize;
    let max_dups = n.saturating_sub(1);
    exact = exact.min(max_dups);
    near = near.min(max_dups - exact);
    let originals = n - exact - near;

    // Decide per index what each function is, interleaved; index 0 is an original.
    let mut layout_rng = Rng::new(mix(config.seed, 0x6c61_796f_7574));
    let mut kinds: Vec<Kind> = Vec::with_capacity(n);
    kinds.extend(std::iter::repeat_n(Kind::Original, originals));
    kinds.extend(std::iter::repeat_n(Kind::Exact, exact));
    kinds.extend(std::iter::repeat_n(Kind::Near, near));
    layout_rng.shuffle(&mut kinds);
    if let Some(first) = kinds.iter().position(|k| *k == Kind::Original) {
        kinds.swap(0, first);
    }

    let mut clif = String::with_capacity(n.saturating_mul(2000) + 64);
    let mut ll = String::with_capacity(n.saturating_mul(2400) + 64);
    clif.push_str("; generated by merge_bench/generator.rs\n\n");
    ll.push_str("; generated by merge_bench/generator.rs\n\n");

    let mut seen_originals: Vec<u32> = Vec::with_capacity(originals);
    let mut near_hashes: HashSet<u64> = HashSet::new();
    let mut prog = Program::default();
    let mut sites: Vec<u32> = Vec::new();
    let mut names = Names::default();
    let mut clif_instructions = 0u64;
    let mut near_made = 0usize;

    for (index, &kind) in kinds.iter().enumerate() {
        let index = index as u32;
        let mut print_rng = Rng::new(mix(config.seed ^ 0x0070_7269_6e74, u64::from(index)));
        let mut kind = kind;
        if kind == Kind::Near {
            let late = near_made.is_multiple_of(2);
            // A small original has few possible changes (and maybe none late);
            // when its earlier near duplicates used them up, take another one.
            // Late only for the first tries; should every try fail (only
            // conceivable when very few originals precede), make an original.
            let made = (0..64).any(|attempt| {
                let source = seen_originals[layout_rng.below(seen_originals.len())];
                make_near(
                    &mut prog,
                    &mut sites,
                    &mut near_hashes,
                    config.seed,
                    source,
                    index,
                    late && attempt < 48,
                )
            });
            if made {
                near_made += 1;
                names.renamed(&prog, &mut print_rng);
            } else {
                kind = Kind::Original;
            }
        }
        match kind {
            Kind::Original => {
                seen_originals.push(index);
                build(&mut prog, config.seed, index, None, None);
                names.plain(&prog);
            }
            Kind::Exact => {
                let source = seen_originals[layout_rng.below(seen_originals.len())];
                build(&mut prog, config.seed, source, None, None);
                names.renamed(&prog, &mut print_rng);
            }
            Kind::Near => {}
        }
        clif_instructions += u64::from(prog.ninstr);
        print_clif(&mut clif, index, &prog, &names);
        print_ll(&mut ll, index, &prog, &names);
    }

    GeneratedModule {
        clif,
        ll,
        functions: n,
        exact_duplicates: exact,
        near_duplicates: near_made,
        clif_instructions,
    }
}

/// What one function of the module is.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Original,
    Exact,
    Near,
}

/// Builds a near duplicate of original `source` into `prog`: one change, at a
/// site in the last quarter when `late`, such that the result differs (in CLIF
/// and in LLVM IR) from the source and from every other near duplicate of it.
/// Returns false (leaving `prog` unspecified) when no such change was found.
fn make_near(
    prog: &mut Program,
    sites: &mut Vec<u32>,
    hashes: &mut HashSet<u64>,
    seed: u64,
    source: u32,
    index: u32,
    late: bool,
) -> bool {
    sites.clear();
    build(prog, seed, source, None, Some(sites));
    let salt = mix(u64::from(source), 0x736f_7572_6365);
    hashes.insert(prog.hash(false) ^ salt);
    hashes.insert(prog.hash(true) ^ salt);
    let total = prog.ninstr;
    let from = if late {
        sites.partition_point(|&pos| pos * 4 < total * 3)
    } else {
        0
    };
    if from == sites.len() {
        return false;
    }
    let mut rng = Rng::new(mix(seed ^ 0x6e65_6172, u64::from(index)) ^ u64::from(source));
    for _ in 0..32 {
        let site = from + rng.below(sites.len() - from);
        let mutation = Mutation {
            site: site as u32,
            seed: rng.next(),
        };
        build(prog, seed, source, Some(mutation), None);
        let hc = prog.hash(false) ^ salt;
        let hl = prog.hash(true) ^ salt;
        if !hashes.contains(&hc) && !hashes.contains(&hl) {
            hashes.insert(hc);
            hashes.insert(hl);
            return true;
        }
    }
    false
}

// ---------------------------------------------------------------------------
// Random numbers.

/// splitmix64: small, fast, good enough for test data.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Self {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        finalize(self.0)
    }

    /// Uniform in `0..n` (`n > 0`, below 2^32).
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 32) * n as u64) >> 32) as usize
    }

    /// Uniform in `lo..=hi`.
    fn range(&mut self, lo: u32, hi: u32) -> u32 {
        lo + self.below((hi - lo + 1) as usize) as u32
    }

    fn chance(&mut self, percent: u32) -> bool {
        (self.below(100) as u32) < percent
    }

    fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            let j = self.below(i + 1);
            items.swap(i, j);
        }
    }
}

fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

fn mix(a: u64, b: u64) -> u64 {
    finalize(a ^ finalize(b.wrapping_add(0x632b_e59b_d9b4_e019)))
}

/// Draws a function size in CLIF instructions, 5..=200: a piecewise-linear
/// inverse CDF (integer arithmetic only, so identical on every platform) with
/// median 35, about 65% in 20..60 and 5% above 100.
fn function_size(rng: &mut Rng) -> u32 {
    // (cumulative share in 1/1000, size)
    const CDF: [(u64, u64); 11] = [
        (0, 5),
        (40, 12),
        (120, 18),
        (300, 26),
        (500, 35),
        (700, 46),
        (850, 60),
        (930, 80),
        (970, 110),
        (992, 160),
        (1000, 200),
    ];
    let u = rng.next() % 1_000_000; // in 1/1_000_000
    let k = CDF
        .iter()
        .position(|&(p, _)| p * 1000 > u)
        .unwrap_or(CDF.len() - 1);
    let (p0, s0) = CDF[k - 1];
    let (p1, s1) = CDF[k];
    (s0 + (s1 - s0) * (u - p0 * 1000) / ((p1 - p0) * 1000)) as u32
}

/// A bijection on u32, so distinct originals get distinct constants.
fn unique_constant(seed: u64, index: u32) -> u32 {
    let mut x = index ^ (seed as u32);
    x = x.wrapping_mul(0x9e37_79b1);
    x ^= x >> 15;
    x = x.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 13;
    x
}

// ---------------------------------------------------------------------------
// The abstract program, shared by both printers.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Ty {
    /// No result (a store).
    Void,
    I32,
    /// i64 in CLIF and LLVM (the `p` parameter is `i8*` in LLVM).
    I64,
    /// An `icmp` result: i8 in CLIF, i1 in LLVM.
    Bool,
}

#[derive(Clone, Copy, Debug)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Xor,
    And,
    Or,
}

const BIN_OPS: [BinOp; 6] = [
    BinOp::Add,
    BinOp::Sub,
    BinOp::Mul,
    BinOp::Xor,
    BinOp::And,
    BinOp::Or,
];

impl BinOp {
    fn clif(self) -> &'static str {
        match self {
            BinOp::Add => "iadd",
            BinOp::Sub => "isub",
            BinOp::Mul => "imul",
            BinOp::Xor => "bxor",
            BinOp::And => "band",
            BinOp::Or => "bor",
        }
    }

    fn llvm(self) -> &'static str {
        match self {
            BinOp::Add => "add",
            BinOp::Sub => "sub",
            BinOp::Mul => "mul",
            BinOp::Xor => "xor",
            BinOp::And => "and",
            BinOp::Or => "or",
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum ShOp {
    Shl,
    Ushr,
    Sshr,
}

impl ShOp {
    fn clif(self) -> &'static str {
        match self {
            ShOp::Shl => "ishl",
            ShOp::Ushr => "ushr",
            ShOp::Sshr => "sshr",
        }
    }

    fn llvm(self) -> &'static str {
        match self {
            ShOp::Shl => "shl",
            ShOp::Ushr => "lshr",
            ShOp::Sshr => "ashr",
        }
    }
}

/// Condition codes, spelled the same in CLIF and LLVM.
const CONDS: [&str; 10] = [
    "eq", "ne", "slt", "sle", "sgt", "sge", "ult", "ule", "ugt", "uge",
];

/// One instruction with at most one result; operands are value ids. Operands
/// defined by `iconst` are printed as literals in LLVM IR.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// An i32 or i64 constant (the type is the result's).
    Iconst(u32),
    Bin(BinOp, u32, u32),
    /// Shift of an i32 or i64 value by an `iconst` amount.
    Sh(ShOp, u32, u32),
    /// i32 load from `p + offset`.
    Load(u32),
    /// Store of a value to `p + offset`.
    Store(u32, u32),
    Icmp(u8, u32, u32),
    Select(u32, u32, u32),
    /// i32 -> i64 zero extension.
    Uext(u32),
    /// `p + x` (CLIF `iadd` on i64, LLVM `getelementptr i8`).
    AddrAdd(u32),
    /// i32 load from a computed address.
    LoadAt(u32),
    /// Call of the callee declared at this index, with `(p, x, y)`.
    Call(u32, u32, u32),
}

impl Op {
    /// The value operands.
    fn operands(&self) -> ([u32; 3], usize) {
        match *self {
            Op::Iconst(_) | Op::Load(_) => ([0; 3], 0),
            Op::Uext(x) | Op::AddrAdd(x) | Op::LoadAt(x) => ([x, 0, 0], 1),
            Op::Bin(_, x, y) | Op::Sh(_, x, y) | Op::Icmp(_, x, y) | Op::Call(_, x, y) => {
                ([x, y, 0], 2)
            }
            Op::Store(x, _) => ([x, 0, 0], 1),
            Op::Select(c, x, y) => ([c, x, y], 3),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct Inst {
    dst: u32,
    op: Op,
}

/// A branch to `to` passing `n` block arguments.
#[derive(Clone, Copy, Debug)]
struct Edge {
    to: u32,
    args: [u32; 2],
    n: u8,
}

impl Edge {
    fn new(to: usize, args: &[u32]) -> Edge {
        let mut a = [0; 2];
        a[..args.len()].copy_from_slice(args);
        Edge {
            to: to as u32,
            args: a,
            n: args.len() as u8,
        }
    }

    fn args(&self) -> &[u32] {
        &self.args[..self.n as usize]
    }
}

#[derive(Clone, Copy, Debug)]
enum Term {
    Unset,
    Jump(Edge),
    Brif(u32, Edge, Edge),
    Return(u32),
}

#[derive(Clone, Debug)]
struct Block {
    params: Vec<u32>,
    insts: Vec<Inst>,
    term: Term,
}

#[derive(Default, Debug)]
struct Program {
    /// Type of every value id (params, block params, instruction results).
    ty: Vec<Ty>,
    /// The constant of values defined by `iconst` (inlined in LLVM IR).
    konst: Vec<Option<u32>>,
    blocks: Vec<Block>,
    /// Distinct callees (function indices), in order of first call.
    callees: Vec<u32>,
    /// CLIF instructions, terminators included.
    ninstr: u32,
}

impl Program {
    fn clear(&mut self) {
        self.ty.clear();
        self.konst.clear();
        self.blocks.clear();
        self.callees.clear();
        self.ninstr = 0;
    }

    /// A structural hash. With `llvm`, constants are inlined as LLVM IR does, so
    /// two programs that print the same LLVM IR hash the same.
    fn hash(&self, llvm: bool) -> u64 {
        let mut h = Hasher(0x1234_5678);
        let key = |v: u32| -> u64 {
            match self.konst[v as usize] {
                Some(c) if llvm => (1 << 40) | u64::from(c),
                _ => u64::from(v),
            }
        };
        for block in &self.blocks {
            h.add(0xb10c);
            h.add(block.params.len() as u64);
            for inst in &block.insts {
                let (tag, ops): (u64, [u64; 3]) = match inst.op {
                    Op::Iconst(c) => {
                        if llvm {
                            continue;
                        }
                        (1, [u64::from(c), 0, 0])
                    }
                    Op::Bin(op, x, y) => (2 + op as u64, [key(x), key(y), 0]),
                    Op::Sh(op, x, k) => (10 + op as u64, [key(x), key(k), 0]),
                    Op::Load(off) => (21, [u64::from(off), 0, 0]),
                    Op::Store(x, off) => (22, [key(x), u64::from(off), 0]),
                    Op::Icmp(cc, x, y) => (23 + 100 * u64::from(cc), [key(x), key(y), 0]),
                    Op::Select(c, x, y) => (25, [key(c), key(x), key(y)]),
                    Op::Uext(x) => (26, [key(x), 0, 0]),
                    Op::AddrAdd(x) => (28, [key(x), 0, 0]),
                    Op::LoadAt(a) => (29, [key(a), 0, 0]),
                    Op::Call(f, x, y) => (
                        30 + (u64::from(self.callees[f as usize]) << 8),
                        [key(x), key(y), 0],
                    ),
                };
                h.add(tag);
                h.add(u64::from(inst.dst));
                for o in ops {
                    h.add(o);
                }
            }
            let edge = |h: &mut Hasher, e: &Edge| {
                h.add(u64::from(e.to));
                for &a in e.args() {
                    h.add(key(a));
                }
            };
            match &block.term {
                Term::Unset => h.add(0),
                Term::Jump(e) => {
                    h.add(1);
                    edge(&mut h, e);
                }
                Term::Brif(c, t, e) => {
                    h.add(2);
                    h.add(key(*c));
                    edge(&mut h, t);
                    edge(&mut h, e);
                }
                Term::Return(v) => {
                    h.add(3);
                    h.add(key(*v));
                }
            }
        }
        h.0
    }
}

struct Hasher(u64);

impl Hasher {
    fn add(&mut self, x: u64) {
        self.0 = finalize(self.0 ^ x.wrapping_mul(0x9e37_79b9_7f4a_7c15)).rotate_left(17);
    }
}

// ---------------------------------------------------------------------------
// Building a program.

/// The one change that makes a near duplicate: at mutation site number `site`,
/// with random choices drawn from `seed` (never from the program's own stream,
/// so the rest of the program is unchanged).
#[derive(Clone, Copy, Debug)]
struct Mutation {
    site: u32,
    seed: u64,
}

struct Builder<'a> {
    prog: &'a mut Program,
    rng: Rng,
    /// The block instructions are appended to.
    cur: usize,
    /// i32 values usable at the current point (they dominate it).
    scope: Vec<u32>,
    /// Index of the original whose program this is; callees are below it.
    orig: u32,
    next_site: u32,
    mutation: Option<Mutation>,
    mrng: Rng,
    sites: Option<&'a mut Vec<u32>>,
}

const P: u32 = 0;

/// Builds the program of original `orig` (with `mutation` applied, if any) into
/// `prog`. When `sites` is given, it receives the instruction position of every
/// mutation site, in site order.
fn build(
    prog: &mut Program,
    seed: u64,
    orig: u32,
    mutation: Option<Mutation>,
    sites: Option<&mut Vec<u32>>,
) {
    prog.clear();
    let mut rng = Rng::new(mix(seed, u64::from(orig)));
    // Skewed size: most functions 20..60 instructions, a tail up to 200.
    let size = function_size(&mut rng);
    prog.ty.extend([Ty::I64, Ty::I32, Ty::I32]);
    prog.konst.extend([None, None, None]);
    prog.blocks.push(Block {
        params: vec![0, 1, 2],
        insts: Vec::new(),
        term: Term::Unset,
    });
    let mut b = Builder {
        prog,
        rng,
        cur: 0,
        scope: vec![1, 2],
        orig,
        next_site: 0,
        mutation,
        mrng: Rng::new(mutation.map_or(0, |m| m.seed)),
        sites,
    };
    let budget = size - 3;
    while b.prog.ninstr < budget {
        let rem = budget - b.prog.ninstr;
        b.segment(rem);
    }
    // The constant unique to this original is never mutated nor dropped, so
    // programs of distinct originals always differ (small ones often share
    // their shape), in CLIF and in LLVM IR.
    let mut last = *b.scope.last().expect("scope is never empty");
    let c = b.fixed_const(Ty::I32, unique_constant(seed, orig));
    if b.site() {
        last = b.replace(last);
    }
    let r = b.push(Ty::I32, Op::Bin(BinOp::Xor, last, c));
    b.terminate(Term::Return(r));
}

impl Builder<'_> {
    fn value(&mut self, ty: Ty, konst: Option<u32>) -> u32 {
        let id = self.prog.ty.len() as u32;
        self.prog.ty.push(ty);
        self.prog.konst.push(konst);
        id
    }

    fn push(&mut self, ty: Ty, op: Op) -> u32 {
        let konst = if let Op::Iconst(c) = op {
            Some(c)
        } else {
            None
        };
        let dst = self.value(ty, konst);
        self.prog.blocks[self.cur].insts.push(Inst { dst, op });
        self.prog.ninstr += 1;
        // Constants are used where made, not picked as operands later (LLVM IR
        // inlines them, and `x - x` style code would be common).
        if ty == Ty::I32 && konst.is_none() {
            self.scope.push(dst);
        }
        dst
    }

    fn terminate(&mut self, term: Term) {
        self.prog.blocks[self.cur].term = term;
        self.prog.ninstr += 1;
    }

    fn new_block(&mut self, params: usize) -> usize {
        let mut ps = Vec::with_capacity(params);
        for _ in 0..params {
            ps.push(self.value(Ty::I32, None));
        }
        self.prog.blocks.push(Block {
            params: ps,
            insts: Vec::new(),
            term: Term::Unset,
        });
        self.prog.blocks.len() - 1
    }

    /// Is this mutation site the one to change?
    fn site(&mut self) -> bool {
        let s = self.next_site;
        self.next_site += 1;
        if let Some(sites) = self.sites.as_deref_mut() {
            sites.push(self.prog.ninstr);
        }
        self.mutation.is_some_and(|m| m.site == s)
    }

    /// An i32 value in scope, mostly a recent one.
    fn pick(&mut self) -> u32 {
        let n = self.scope.len();
        if n > 4 && self.rng.chance(70) {
            let back = self.rng.below(n.min(6));
            self.scope[n - 1 - back]
        } else {
            self.scope[self.rng.below(n)]
        }
    }

    /// Two i32 values in scope, distinct when a second draw allows it.
    fn pick2(&mut self) -> (u32, u32) {
        let x = self.pick();
        let mut y = self.pick();
        if y == x {
            y = self.pick();
        }
        (x, y)
    }

    /// Another i32 value in scope, different from `old` also once constants are
    /// inlined (as in LLVM IR). The parameters `a` and `b` are always in scope.
    fn replace(&mut self, old: u32) -> u32 {
        let key = |p: &Program, v: u32| {
            p.konst[v as usize].map_or(u64::from(v), |c| (1 << 40) | u64::from(c))
        };
        let old_key = key(self.prog, old);
        loop {
            let v = self.scope[self.mrng.below(self.scope.len())];
            if key(self.prog, v) != old_key {
                return v;
            }
        }
    }

    fn random_constant(&mut self) -> u32 {
        match self.rng.below(10) {
            0..=3 => self.rng.range(0, 16),
            4..=6 => self.rng.range(17, 1000),
            _ => self.rng.next() as u32,
        }
    }

    /// An i32 constant that is a mutation site.
    fn iconst(&mut self, c: u32) -> u32 {
        let mut c = c;
        if self.site() {
            c ^= self.mrng.range(1, 0xffff);
        }
        self.push(Ty::I32, Op::Iconst(c))
    }

    /// A constant that is never changed (loop control, address scaling).
    fn fixed_const(&mut self, ty: Ty, c: u32) -> u32 {
        self.push(ty, Op::Iconst(c))
    }

    fn bin_with(&mut self, op: BinOp, x: u32, y: u32) -> u32 {
        let (mut x, mut y) = (x, y);
        if self.site() {
            x = self.replace(x);
        }
        if self.site() {
            y = self.replace(y);
        }
        self.push(Ty::I32, Op::Bin(op, x, y))
    }

    fn bin(&mut self) -> u32 {
        let op = BIN_OPS[self.rng.below(BIN_OPS.len())];
        let (x, y) = self.pick2();
        self.bin_with(op, x, y)
    }

    fn shift(&mut self) -> u32 {
        let op = [ShOp::Shl, ShOp::Ushr, ShOp::Sshr][self.rng.below(3)];
        let x = self.pick();
        let mut k = self.rng.below(32) as u32;
        if self.site() {
            k = (k + self.mrng.range(1, 31)) % 32;
        }
        let k = self.fixed_const(Ty::I32, k);
        self.push(Ty::I32, Op::Sh(op, x, k))
    }

    /// One arithmetic step of at most `rem` (>= 1) instructions; returns its cost.
    fn arith(&mut self, rem: u32) -> u32 {
        let r = self.rng.below(100);
        if r < 25 && rem >= 2 {
            let c = self.random_constant();
            let c = self.iconst(c);
            let op = BIN_OPS[self.rng.below(BIN_OPS.len())];
            let x = self.pick();
            self.bin_with(op, x, c);
            2
        } else if r < 80 || rem < 2 {
            self.bin();
            1
        } else {
            self.shift();
            2
        }
    }

    /// Straight-line arithmetic of `1..=rem` instructions.
    fn arith_run(&mut self, rem: u32, max: u32) -> u32 {
        let want = self.rng.range(1, max.min(rem).max(1));
        let mut used = 0;
        while used < want {
            used += self.arith(want - used);
        }
        used
    }

    fn offset(&mut self) -> u32 {
        4 * self.rng.range(0, 256)
    }

    fn cond(&mut self) -> u8 {
        self.rng.below(CONDS.len()) as u8
    }

    /// An `icmp` of two values, or (when `rem >= 2`) of a value and a constant;
    /// returns the result and the instructions used.
    fn compare(&mut self, rem: u32) -> (u32, u32) {
        let cc = self.cond();
        let x = self.pick();
        if rem >= 2 && self.rng.chance(30) {
            let k = self.random_constant() & 0xfff;
            let k = self.iconst(k);
            (self.push(Ty::Bool, Op::Icmp(cc, x, k)), 2)
        } else {
            let mut y = self.pick();
            if y == x {
                y = self.pick();
            }
            (self.push(Ty::Bool, Op::Icmp(cc, x, y)), 1)
        }
    }

    /// One segment of at most `rem` (>= 1) instructions.
    fn segment(&mut self, rem: u32) {
        // A quarter of the segments are calls (1 instruction; the others average
        // about 4.7), giving about one call per 15 instructions.
        let call = self.rng.chance(25);
        let r = self.rng.below(100);
        if call && self.orig > 0 {
            // Call of a function with a lower index: acyclic call graph.
            let callee = self.rng.below(self.orig as usize) as u32;
            let fref = match self.prog.callees.iter().position(|&c| c == callee) {
                Some(i) => i,
                None => {
                    self.prog.callees.push(callee);
                    self.prog.callees.len() - 1
                }
            } as u32;
            let (x, y) = self.pick2();
            self.push(Ty::I32, Op::Call(fref, x, y));
        } else if r < 45 {
            self.arith_run(rem, 5);
        } else if r < 55 {
            let off = self.offset();
            let v = self.push(Ty::I32, Op::Load(off));
            if rem >= 2 {
                let op = BIN_OPS[self.rng.below(BIN_OPS.len())];
                let x = self.pick();
                self.bin_with(op, v, x);
            }
        } else if r < 62 {
            let off = self.offset();
            let x = self.pick();
            self.push(Ty::Void, Op::Store(x, off));
        } else if r < 73 && rem >= 2 {
            let (c, _) = self.compare(rem - 1);
            let (x, y) = self.pick2();
            self.push(Ty::I32, Op::Select(c, x, y));
        } else if r < 86 && rem >= 6 {
            self.diamond(rem);
        } else if rem >= 9 {
            self.counted_loop(rem);
        } else {
            self.arith_run(rem, 3);
        }
    }

    /// `brif` on a compare to two arms, joining in a block with one i32 parameter.
    fn diamond(&mut self, rem: u32) {
        // compare + brif + jump + jump, and at least one instruction per arm.
        let (c, cost) = self.compare(rem - 5);
        let arms = rem - 3 - cost;
        let then_block = self.new_block(0);
        let else_block = self.new_block(0);
        let join = self.new_block(1);
        self.terminate(Term::Brif(
            c,
            Edge::new(then_block, &[]),
            Edge::new(else_block, &[]),
        ));
        let outer = self.scope.len();

        self.cur = then_block;
        let used = self.arith_run(arms - 1, 4);
        let t = *self.scope.last().expect("scope");
        self.terminate(Term::Jump(Edge::new(join, &[t])));
        self.scope.truncate(outer);

        self.cur = else_block;
        self.arith_run(arms - used, 4);
        let e = *self.scope.last().expect("scope");
        self.terminate(Term::Jump(Edge::new(join, &[e])));
        self.scope.truncate(outer);

        self.cur = join;
        let j = self.prog.blocks[join].params[0];
        self.scope.push(j);
    }

    /// A counted loop: header with counter and accumulator parameters, the body in
    /// the header, maybe loading from `p + i*4`, exiting after a few iterations.
    fn counted_loop(&mut self, rem: u32) {
        // iconst 0, jump, acc update, iconst + iadd, iconst + icmp, brif: 8, plus
        // the body (at least 1), plus 5 for the load (uextend, iconst, ishl, iadd,
        // load). Loop-control constants are never mutated: loops stay bounded.
        let fixed = 8;
        let with_load = rem > fixed + 5 && self.rng.chance(60);
        let body_max = rem - fixed - if with_load { 5 } else { 0 };
        let init = self.pick();
        let zero = self.fixed_const(Ty::I32, 0);
        let header = self.new_block(2);
        let (i, acc) = (
            self.prog.blocks[header].params[0],
            self.prog.blocks[header].params[1],
        );
        self.terminate(Term::Jump(Edge::new(header, &[zero, init])));
        self.cur = header;
        self.scope.push(i);
        self.scope.push(acc);
        self.arith_run(body_max, 4);
        let body = *self.scope.last().expect("scope");
        let acc_next = if with_load {
            let wide = self.push(Ty::I64, Op::Uext(i));
            let two = self.fixed_const(Ty::I64, 2);
            let scaled = self.push(Ty::I64, Op::Sh(ShOp::Shl, wide, two));
            let addr = self.push(Ty::I64, Op::AddrAdd(scaled));
            let loaded = self.push(Ty::I32, Op::LoadAt(addr));
            let op = [BinOp::Add, BinOp::Xor][self.rng.below(2)];
            self.bin_with(op, body, loaded)
        } else {
            let op = [BinOp::Add, BinOp::Xor, BinOp::Sub][self.rng.below(3)];
            self.bin_with(op, acc, body)
        };
        let one = self.fixed_const(Ty::I32, 1);
        let next = self.push(Ty::I32, Op::Bin(BinOp::Add, i, one));
        let bound = self.rng.range(2, 16);
        let bound = self.fixed_const(Ty::I32, bound);
        let c = self.push(Ty::Bool, Op::Icmp(6, next, bound));
        let exit = self.new_block(0);
        self.terminate(Term::Brif(
            c,
            Edge::new(header, &[next, acc_next]),
            Edge::new(exit, &[]),
        ));
        self.cur = exit;
        self.scope.push(acc_next);
    }
}

// ---------------------------------------------------------------------------
// Printing.

/// How one function's values, blocks and callees are spelled and laid out.
#[derive(Default)]
struct Names {
    /// Printed number of each value id.
    value: Vec<u32>,
    /// Printed number of each block.
    block: Vec<u32>,
    /// Layout order of the blocks (entry first).
    order: Vec<u32>,
    /// Printed `fnN` number of each callee index.
    func: Vec<u32>,
    /// Prefix of LLVM value and block names.
    tag: String,
    scratch: Vec<u32>,
}

impl Names {
    /// Dense numbering in creation order, blocks in creation order.
    fn plain(&mut self, prog: &Program) {
        self.value.clear();
        self.value.extend(0..prog.ty.len() as u32);
        self.block.clear();
        self.block.extend(0..prog.blocks.len() as u32);
        self.order.clear();
        self.order.extend(0..prog.blocks.len() as u32);
        self.func.clear();
        self.func.extend(0..prog.callees.len() as u32);
        self.tag.clear();
    }

    /// Values and blocks renumbered (sparse, permuted), non-entry blocks shuffled,
    /// callee declarations renumbered, a random LLVM name prefix.
    fn renamed(&mut self, prog: &Program, rng: &mut Rng) {
        self.numbers(prog.ty.len(), 400, rng);
        self.value.clear();
        self.value.extend_from_slice(&self.scratch);
        self.numbers(prog.blocks.len(), 40, rng);
        self.block.clear();
        self.block.extend_from_slice(&self.scratch);
        self.order.clear();
        self.order.extend(0..prog.blocks.len() as u32);
        rng.shuffle(&mut self.order[1..]);
        self.func.clear();
        self.func.extend(0..prog.callees.len() as u32);
        rng.shuffle(&mut self.func);
        self.tag.clear();
        for _ in 0..rng.range(1, 3) {
            self.tag.push((b'a' + rng.below(26) as u8) as char);
        }
        self.tag.push('_');
    }

    /// `n` distinct numbers from a random base with random gaps, shuffled.
    fn numbers(&mut self, n: usize, max_base: usize, rng: &mut Rng) {
        self.scratch.clear();
        let mut next = rng.below(max_base) as u32;
        for _ in 0..n {
            self.scratch.push(next);
            next += 1 + if rng.chance(25) { rng.range(1, 3) } else { 0 };
        }
        rng.shuffle(&mut self.scratch);
    }
}

fn push_num(s: &mut String, mut n: u64) {
    let mut buf = [0u8; 20];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[i..] {
        s.push(d as char);
    }
}

fn push_i32(s: &mut String, n: i32) {
    if n < 0 {
        s.push('-');
    }
    push_num(s, u64::from(n.unsigned_abs()));
}

const SIG_CLIF: &str = "(i64, i32, i32) -> i32 system_v";

fn print_clif(s: &mut String, index: u32, prog: &Program, names: &Names) {
    let v = |s: &mut String, id: u32| {
        s.push('v');
        push_num(s, u64::from(names.value[id as usize]));
    };
    let blk = |s: &mut String, b: u32| {
        s.push_str("block");
        push_num(s, u64::from(names.block[b as usize]));
    };
    s.push_str("function %f");
    push_num(s, u64::from(index));
    s.push_str(SIG_CLIF);
    s.push_str(" {\n");
    if !prog.callees.is_empty() {
        // Declarations in `fnN` order; `names.func` maps callee index -> N.
        let mut by_num = vec![0u32; prog.callees.len()];
        for (i, &n) in names.func.iter().enumerate() {
            by_num[n as usize] = prog.callees[i];
        }
        for (n, callee) in by_num.iter().enumerate() {
            s.push_str("    fn");
            push_num(s, n as u64);
            s.push_str(" = %f");
            push_num(s, u64::from(*callee));
            s.push_str(SIG_CLIF);
            s.push('\n');
        }
        s.push('\n');
    }
    // Values defined so far in text order. With a shuffled layout an operand may
    // be defined further down; the reader then needs the controlling type
    // written out (`iadd.i32`).
    let mut defined = vec![false; prog.ty.len()];
    defined[P as usize] = true;
    for &b in &names.order {
        let block = &prog.blocks[b as usize];
        for &p in &block.params {
            defined[p as usize] = true;
        }
        blk(s, b);
        if !block.params.is_empty() {
            s.push('(');
            for (i, &p) in block.params.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                v(s, p);
                s.push_str(if prog.ty[p as usize] == Ty::I64 {
                    ": i64"
                } else {
                    ": i32"
                });
            }
            s.push(')');
        }
        s.push_str(":\n");
        for inst in &block.insts {
            let (operands, count) = inst.op.operands();
            let forward = operands[..count].iter().any(|&o| !defined[o as usize]);
            let suffix = match (forward, prog.ty[inst.dst as usize]) {
                (false, _) => "",
                (true, Ty::I64) => ".i64",
                (true, _) => ".i32",
            };
            defined[inst.dst as usize] = true;
            s.push_str("    ");
            if !matches!(inst.op, Op::Store(..)) {
                v(s, inst.dst);
                s.push_str(" = ");
            }
            match inst.op {
                Op::Iconst(c) => {
                    s.push_str(if prog.ty[inst.dst as usize] == Ty::I64 {
                        "iconst.i64 "
                    } else {
                        "iconst.i32 "
                    });
                    push_num(s, u64::from(c));
                }
                Op::Bin(op, x, y) => {
                    s.push_str(op.clif());
                    s.push_str(suffix);
                    s.push(' ');
                    v(s, x);
                    s.push_str(", ");
                    v(s, y);
                }
                Op::Sh(op, x, k) => {
                    s.push_str(op.clif());
                    s.push_str(suffix);
                    s.push(' ');
                    v(s, x);
                    s.push_str(", ");
                    v(s, k);
                }
                Op::Load(off) => {
                    s.push_str("load.i32 notrap aligned ");
                    v(s, P);
                    if off != 0 {
                        s.push('+');
                        push_num(s, u64::from(off));
                    }
                }
                Op::Store(x, off) => {
                    s.push_str("store");
                    s.push_str(suffix);
                    s.push_str(" notrap aligned ");
                    v(s, x);
                    s.push_str(", ");
                    v(s, P);
                    if off != 0 {
                        s.push('+');
                        push_num(s, u64::from(off));
                    }
                }
                Op::Icmp(cc, x, y) => {
                    // The controlling type is the operands' (always i32).
                    s.push_str("icmp");
                    if forward {
                        s.push_str(".i32");
                    }
                    s.push(' ');
                    s.push_str(CONDS[cc as usize]);
                    s.push(' ');
                    v(s, x);
                    s.push_str(", ");
                    v(s, y);
                }
                Op::Select(c, x, y) => {
                    s.push_str("select");
                    s.push_str(suffix);
                    s.push(' ');
                    v(s, c);
                    s.push_str(", ");
                    v(s, x);
                    s.push_str(", ");
                    v(s, y);
                }
                Op::Uext(x) => {
                    s.push_str("uextend.i64 ");
                    v(s, x);
                }
                Op::AddrAdd(x) => {
                    s.push_str("iadd");
                    s.push_str(suffix);
                    s.push(' ');
                    v(s, P);
                    s.push_str(", ");
                    v(s, x);
                }
                Op::LoadAt(a) => {
                    s.push_str("load.i32 notrap aligned ");
                    v(s, a);
                }
                Op::Call(f, x, y) => {
                    s.push_str("call fn");
                    push_num(s, u64::from(names.func[f as usize]));
                    s.push('(');
                    v(s, P);
                    s.push_str(", ");
                    v(s, x);
                    s.push_str(", ");
                    v(s, y);
                    s.push(')');
                }
            }
            s.push('\n');
        }
        let edge = |s: &mut String, e: &Edge| {
            blk(s, e.to);
            if e.n > 0 {
                s.push('(');
                for (i, &a) in e.args().iter().enumerate() {
                    if i > 0 {
                        s.push_str(", ");
                    }
                    v(s, a);
                }
                s.push(')');
            }
        };
        s.push_str("    ");
        match &block.term {
            Term::Jump(e) => {
                s.push_str("jump ");
                edge(s, e);
            }
            Term::Brif(c, t, e) => {
                s.push_str("brif ");
                v(s, *c);
                s.push_str(", ");
                edge(s, t);
                s.push_str(", ");
                edge(s, e);
            }
            Term::Return(x) => {
                s.push_str("return ");
                v(s, *x);
            }
            Term::Unset => unreachable!("unterminated block"),
        }
        s.push('\n');
    }
    s.push_str("}\n\n");
}

fn print_ll(s: &mut String, index: u32, prog: &Program, names: &Names) {
    // A value: its name, or the literal when it comes from an `iconst`.
    let v = |s: &mut String, id: u32| match prog.konst[id as usize] {
        Some(c) => push_i32(s, c as i32),
        None => {
            s.push('%');
            s.push_str(&names.tag);
            s.push('v');
            push_num(s, u64::from(names.value[id as usize]));
        }
    };
    // An auxiliary name derived from a value's name.
    let aux = |s: &mut String, id: u32, suffix: &str| {
        s.push('%');
        s.push_str(&names.tag);
        s.push('v');
        push_num(s, u64::from(names.value[id as usize]));
        s.push_str(suffix);
    };
    let label = |s: &mut String, b: u32| {
        s.push_str(&names.tag);
        s.push_str("bb");
        push_num(s, u64::from(names.block[b as usize]));
    };
    let gep_const = |s: &mut String, id: u32, off: u32| {
        s.push_str("  ");
        aux(s, id, ".g");
        s.push_str(" = getelementptr inbounds i8, i8* ");
        v(s, P);
        s.push_str(", i64 ");
        push_num(s, u64::from(off));
        s.push('\n');
    };
    let cast = |s: &mut String, id: u32, from: &dyn Fn(&mut String)| {
        s.push_str("  ");
        aux(s, id, ".c");
        s.push_str(" = bitcast i8* ");
        from(s);
        s.push_str(" to i32*\n");
    };

    s.push_str("define i32 @f");
    push_num(s, u64::from(index));
    s.push_str("(i8* ");
    v(s, 0);
    s.push_str(", i32 ");
    v(s, 1);
    s.push_str(", i32 ");
    v(s, 2);
    s.push_str(") {\n");
    for &b in &names.order {
        let block = &prog.blocks[b as usize];
        label(s, b);
        s.push_str(":\n");
        if b != 0 {
            for (j, &param) in block.params.iter().enumerate() {
                s.push_str("  ");
                v(s, param);
                s.push_str(" = phi i32 ");
                let mut first = true;
                for (pred, pb) in prog.blocks.iter().enumerate() {
                    let mut incoming = |s: &mut String, e: &Edge| {
                        if e.to == b {
                            if !first {
                                s.push_str(", ");
                            }
                            first = false;
                            s.push_str("[ ");
                            v(s, e.args()[j]);
                            s.push_str(", %");
                            label(s, pred as u32);
                            s.push_str(" ]");
                        }
                    };
                    match &pb.term {
                        Term::Jump(e) => incoming(s, e),
                        Term::Brif(_, t, e) => {
                            incoming(s, t);
                            incoming(s, e);
                        }
                        _ => {}
                    }
                }
                s.push('\n');
            }
        }
        for inst in &block.insts {
            let d = inst.dst;
            match inst.op {
                Op::Iconst(_) => continue,
                Op::Load(off) => {
                    gep_const(s, d, off);
                    cast(s, d, &|s| aux(s, d, ".g"));
                    s.push_str("  ");
                    v(s, d);
                    s.push_str(" = load i32, i32* ");
                    aux(s, d, ".c");
                    s.push_str(", align 4\n");
                    continue;
                }
                Op::Store(x, off) => {
                    gep_const(s, d, off);
                    cast(s, d, &|s| aux(s, d, ".g"));
                    s.push_str("  store i32 ");
                    v(s, x);
                    s.push_str(", i32* ");
                    aux(s, d, ".c");
                    s.push_str(", align 4\n");
                    continue;
                }
                Op::LoadAt(a) => {
                    cast(s, d, &|s| v(s, a));
                    s.push_str("  ");
                    v(s, d);
                    s.push_str(" = load i32, i32* ");
                    aux(s, d, ".c");
                    s.push_str(", align 4\n");
                    continue;
                }
                _ => {}
            }
            s.push_str("  ");
            v(s, d);
            s.push_str(" = ");
            match inst.op {
                Op::Bin(op, x, y) => {
                    s.push_str(op.llvm());
                    s.push_str(" i32 ");
                    v(s, x);
                    s.push_str(", ");
                    v(s, y);
                }
                Op::Sh(op, x, k) => {
                    s.push_str(op.llvm());
                    s.push_str(if prog.ty[d as usize] == Ty::I64 {
                        " i64 "
                    } else {
                        " i32 "
                    });
                    v(s, x);
                    s.push_str(", ");
                    v(s, k);
                }
                Op::Icmp(cc, x, y) => {
                    s.push_str("icmp ");
                    s.push_str(CONDS[cc as usize]);
                    s.push_str(" i32 ");
                    v(s, x);
                    s.push_str(", ");
                    v(s, y);
                }
                Op::Select(c, x, y) => {
                    s.push_str("select i1 ");
                    v(s, c);
                    s.push_str(", i32 ");
                    v(s, x);
                    s.push_str(", i32 ");
                    v(s, y);
                }
                Op::Uext(x) => {
                    s.push_str("zext i32 ");
                    v(s, x);
                    s.push_str(" to i64");
                }
                Op::AddrAdd(x) => {
                    s.push_str("getelementptr inbounds i8, i8* ");
                    v(s, P);
                    s.push_str(", i64 ");
                    v(s, x);
                }
                Op::Call(f, x, y) => {
                    s.push_str("call i32 @f");
                    push_num(s, u64::from(prog.callees[f as usize]));
                    s.push_str("(i8* ");
                    v(s, P);
                    s.push_str(", i32 ");
                    v(s, x);
                    s.push_str(", i32 ");
                    v(s, y);
                    s.push(')');
                }
                Op::Iconst(_) | Op::Load(_) | Op::Store(..) | Op::LoadAt(_) => unreachable!(),
            }
            s.push('\n');
        }
        s.push_str("  ");
        match &block.term {
            Term::Jump(e) => {
                s.push_str("br label %");
                label(s, e.to);
            }
            Term::Brif(c, t, e) => {
                s.push_str("br i1 ");
                v(s, *c);
                s.push_str(", label %");
                label(s, t.to);
                s.push_str(", label %");
                label(s, e.to);
            }
            Term::Return(x) => {
                s.push_str("ret i32 ");
                v(s, *x);
            }
            Term::Unset => unreachable!("unterminated block"),
        }
        s.push('\n');
    }
    s.push_str("}\n\n");
}
