//! Aligning two members: phases 2 to 4 of merging by sequence alignment
//! (keys, block pairing, instruction alignment).

use super::alignment::{MergedBlock, SequenceAlignment, Step};
use super::import::{Importer, Imports, is_constant};
use crate::ir::FuncIndex;
use crate::similar::align::blocks::overlap;
use crate::similar::splice::NotSpliced;
use cranelift_codegen::ir::{Block, Function, Inst, Type};
use rustc_hash::FxHasher;
use std::hash::{Hash, Hasher};

/// The block pairing's and each block's instruction alignment's table is at
/// most this many cells; larger blocks align only their common prefix and
/// suffix.
const MAX_CELLS: usize = 1 << 22;

/// One block of [`Keyed`]: the block and its instructions but the terminator,
/// with their keys.
type KeyedBlock = (Block, Vec<(Inst, u64)>);

/// One member's instructions, imported with their keys.
struct Keyed {
    /// Per block in layout order.
    blocks: Vec<KeyedBlock>,
}

impl Keyed {
    fn new(
        merged: &mut Function,
        imports: &mut Imports,
        source: &Function,
    ) -> Result<Self, NotSpliced> {
        let mut blocks = Vec::new();
        for block in source.layout.blocks() {
            let Some(terminator) = source.layout.last_inst(block) else {
                return Err(NotSpliced("sequence: an empty block".into()));
            };
            let mut insts = Vec::new();
            for inst in source.layout.block_insts(block) {
                if inst == terminator {
                    break;
                }
                let mut importer = Importer {
                    merged: &mut *merged,
                    source,
                    imports: &mut *imports,
                    blocks: None,
                    refused: None,
                };
                let data = importer.import(inst)?;
                let mut hasher = FxHasher::default();
                // Constants of one type align whatever their values
                // (`Writer::copy_both` chooses the value by `select`).
                match data.opcode() {
                    opcode if is_constant(opcode) => opcode.hash(&mut hasher),
                    _ => data.hash(&mut hasher, &merged.dfg.value_lists),
                }
                source.dfg.ctrl_typevar(inst).hash(&mut hasher);
                for v in source.dfg.inst_values(inst) {
                    source.dfg.value_type(v).hash(&mut hasher);
                }
                insts.push((inst, hasher.finish()));
            }
            blocks.push((block, insts));
        }
        Ok(Self { blocks })
    }
}

/// Aligns `first` with `second` (of `second_index`); `None` when they cannot
/// be merged this way (signatures, slots or entities), or share no
/// instruction.
pub(crate) fn align_sequences(
    first: &Function,
    second: &Function,
    second_index: FuncIndex,
) -> Result<SequenceAlignment, NotSpliced> {
    if first.signature != second.signature {
        return Err(NotSpliced("sequence: signatures differ".into()));
    }
    let mut scratch = Function::new();
    let mut imports = Imports::default();
    let keyed_first = Keyed::new(&mut scratch, &mut imports, first)?;
    let keyed_second = Keyed::new(&mut scratch, &mut imports, second)?;
    let blocks = pair_blocks(first, second, &keyed_first, &keyed_second)?;
    let merged = blocks
        .into_iter()
        .map(|pairing| match pairing {
            Pairing::Both(i, j) => {
                let (bf, kf) = &keyed_first.blocks[i];
                let (bg, kg) = &keyed_second.blocks[j];
                let steps = align_insts(kf, kg);
                MergedBlock::Paired {
                    first: *bf,
                    second: *bg,
                    steps,
                }
            }
            Pairing::First(i) => MergedBlock::First(keyed_first.blocks[i].0),
            Pairing::Second(j) => MergedBlock::Second(keyed_second.blocks[j].0),
        })
        .collect();
    Ok(SequenceAlignment {
        second: second_index,
        blocks: merged,
    })
}

/// A step of the block pairing: indices into the layouts' blocks.
#[derive(Copy, Clone, Debug)]
enum Pairing {
    Both(usize, usize),
    First(usize),
    Second(usize),
}

/// The blocks of `first` and `second` aligned (Needleman-Wunsch without gap
/// costs, maximizing the keys paired blocks share): paired blocks have the
/// same parameter types; the entry blocks pair.
fn pair_blocks(
    first: &Function,
    second: &Function,
    kf: &Keyed,
    kg: &Keyed,
) -> Result<Vec<Pairing>, NotSpliced> {
    let (n, m) = (kf.blocks.len(), kg.blocks.len());
    if n == 0 || m == 0 {
        return Err(NotSpliced("sequence: a function without blocks".into()));
    }
    if n.saturating_mul(m) > MAX_CELLS {
        return Err(NotSpliced("sequence: too many blocks to pair".into()));
    }
    let param_types = |func: &Function, block: Block| -> Vec<Type> {
        func.dfg
            .block_params(block)
            .iter()
            .map(|&p| func.dfg.value_type(p))
            .collect()
    };
    let types_f: Vec<Vec<Type>> = kf.blocks.iter().map(|b| param_types(first, b.0)).collect();
    let types_g: Vec<Vec<Type>> = kg.blocks.iter().map(|b| param_types(second, b.0)).collect();
    let sorted = |keyed: &Keyed| -> Vec<Vec<u64>> {
        keyed
            .blocks
            .iter()
            .map(|(_, insts)| {
                let mut keys: Vec<u64> = insts.iter().map(|&(_, k)| k).collect();
                keys.sort_unstable();
                keys
            })
            .collect()
    };
    let (sf, sg) = (sorted(kf), sorted(kg));
    // The entry blocks pair; the rest are aligned. Each paired block scores
    // one more than the keys the two share, so that blocks of the same
    // parameter types pair rather than stay apart.
    let score = |i: usize, j: usize| -> Option<u64> {
        (types_f[i] == types_g[j]).then(|| 1 + overlap(&sf[i], &sg[j]) as u64)
    };
    if score(0, 0).is_none() {
        return Err(NotSpliced("sequence: entry blocks differ".into()));
    }
    let (rows, cols) = (n - 1, m - 1);
    let width = cols + 1;
    let mut table = vec![0u64; (rows + 1) * width];
    for i in 1..=rows {
        for j in 1..=cols {
            let mut best = table[(i - 1) * width + j].max(table[i * width + j - 1]);
            if let Some(s) = score(i, j) {
                best = best.max(table[(i - 1) * width + j - 1] + s);
            }
            table[i * width + j] = best;
        }
    }
    let mut steps = Vec::with_capacity(rows + cols + 1);
    let (mut i, mut j) = (rows, cols);
    while i > 0 || j > 0 {
        let here = table[i * width + j];
        let diagonal = (i > 0 && j > 0)
            .then(|| score(i, j))
            .flatten()
            .is_some_and(|s| here == table[(i - 1) * width + j - 1] + s);
        if diagonal {
            steps.push(Pairing::Both(i, j));
            i -= 1;
            j -= 1;
            continue;
        }
        if i > 0 && here == table[(i - 1) * width + j] {
            steps.push(Pairing::First(i));
            i -= 1;
        } else {
            steps.push(Pairing::Second(j));
            j -= 1;
        }
    }
    steps.push(Pairing::Both(0, 0));
    steps.reverse();
    Ok(steps)
}

/// The instructions of two paired blocks aligned by the longest common
/// subsequence of their keys; a block pair too large for the table aligns
/// its common prefix and suffix only.
fn align_insts(a: &[(Inst, u64)], b: &[(Inst, u64)]) -> Vec<Step> {
    let prefix = a
        .iter()
        .zip(b)
        .take_while(|((_, x), (_, y))| x == y)
        .count();
    let suffix = a[prefix..]
        .iter()
        .rev()
        .zip(b[prefix..].iter().rev())
        .take_while(|((_, x), (_, y))| x == y)
        .count();
    let mut steps: Vec<Step> = (0..prefix).map(|i| Step::Both(i, i)).collect();
    let (ma, mb) = (&a[prefix..a.len() - suffix], &b[prefix..b.len() - suffix]);
    let (n, m) = (ma.len(), mb.len());
    if (n + 1).saturating_mul(m + 1) > MAX_CELLS {
        steps.extend((0..n).map(|i| Step::First(prefix + i)));
        steps.extend((0..m).map(|j| Step::Second(prefix + j)));
    } else {
        let width = m + 1;
        let mut table = vec![0u32; (n + 1) * width];
        for i in (0..n).rev() {
            for j in (0..m).rev() {
                table[i * width + j] = if ma[i].1 == mb[j].1 {
                    table[(i + 1) * width + j + 1] + 1
                } else {
                    table[(i + 1) * width + j].max(table[i * width + j + 1])
                };
            }
        }
        let (mut i, mut j) = (0, 0);
        while i < n || j < m {
            if i < n && j < m && ma[i].1 == mb[j].1 {
                steps.push(Step::Both(prefix + i, prefix + j));
                i += 1;
                j += 1;
            } else if j == m || (i < n && table[(i + 1) * width + j] >= table[i * width + j + 1]) {
                steps.push(Step::First(prefix + i));
                i += 1;
            } else {
                steps.push(Step::Second(prefix + j));
                j += 1;
            }
        }
    }
    let (ea, eb) = (a.len() - suffix, b.len() - suffix);
    steps.extend((0..suffix).map(|k| Step::Both(ea + k, eb + k)));
    steps
}
