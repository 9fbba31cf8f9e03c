//! A size model: the code bytes Cranelift emits for a function, predicted from a
//! few counts of its IR instead of compiled.
//!
//! A function is reduced to its [`SizeFeatures`]: a constant term, its blocks and
//! parameters, and its instructions counted by kind ([`Feature`]: constants by
//! how they encode, integer arithmetic, loads, stores, calls and their arguments,
//! branches, traps, float and vector operations, ...). A [`SizeModel`] is one
//! coefficient (bytes) per feature; its prediction is their dot product.
//!
//! The coefficients are fitted per ISA ([`SizeModel::for_isa`]) by weighted least
//! squares ([`SizeModel::fit`], weights `1 / max(bytes, 32)`: relative error
//! counts, small functions are not drowned by large ones) against Cranelift's
//! compiled sizes; `merge_bench size-model DIR...` refits and prints the table to
//! paste here, with the model's error on each program. A model predicts one
//! function with an error of about 17% (mean absolute, on the corpus), but the
//! similar merge only compares functions that are equal but for constants and
//! callees, so much of the error is common to both sides of a comparison; `mod.rs`
//! compiles the merges whose predicted saving is small to confirm them.

use crate::ir::{blocks_by_number, insts_by_number};
use cranelift_codegen::entity::EntityRef;
use cranelift_codegen::ir::{Function, Inst, InstructionData, Opcode, Value};
use cranelift_codegen::isa::TargetIsa;
use cranelift_codegen::settings::OptLevel;
use std::sync::LazyLock;
use target_lexicon::Architecture;

/// What a [`SizeModel`] counts in a function: one coefficient each.
#[derive(Copy, Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Feature {
    /// 1 for every function: its prologue, epilogue and stack check.
    Function,
    /// Basic blocks.
    Blocks,
    /// Parameters of the signature.
    Params,
    /// Parameters beyond the sixth (those likely passed on the stack).
    StackParams,
    /// Integer constants whose value fits in a sign-extended 32-bit immediate.
    SmallConstants,
    /// Integer constants that do not.
    LargeConstants,
    /// Float and vector constants.
    FloatConstants,
    /// Integer addition, subtraction, logic, shifts, rotations and bit counts.
    IntArith,
    /// Integer multiplications.
    Multiplies,
    /// Integer divisions and remainders.
    Divides,
    /// Integer and float comparisons.
    Compares,
    /// Selects.
    Selects,
    /// Extensions, reductions and bit casts.
    Conversions,
    /// Loads (of any width, from memory or the stack).
    Loads,
    /// Stores.
    Stores,
    /// Direct calls (`call`, `return_call`).
    Calls,
    /// Indirect calls (`call_indirect`, `return_call_indirect`).
    IndirectCalls,
    /// Arguments of all calls.
    CallArguments,
    /// Unconditional jumps.
    Jumps,
    /// Conditional branches.
    Branches,
    /// `br_table`s.
    BranchTables,
    /// Entries of all `br_table`s.
    BranchTableEntries,
    /// Traps, conditional or not.
    Traps,
    /// Float arithmetic.
    FloatArith,
    /// Conversions between floats and integers, and between float widths.
    FloatConversions,
    /// Instructions whose controlling type is a vector.
    Vector,
    /// Returns.
    Returns,
    /// Addresses of functions, symbols, global values and stack slots.
    Addresses,
    /// Every other instruction.
    Other,
}

impl Feature {
    /// Every feature, in coefficient order.
    pub const ALL: [Feature; FEATURES] = [
        Feature::Function,
        Feature::Blocks,
        Feature::Params,
        Feature::StackParams,
        Feature::SmallConstants,
        Feature::LargeConstants,
        Feature::FloatConstants,
        Feature::IntArith,
        Feature::Multiplies,
        Feature::Divides,
        Feature::Compares,
        Feature::Selects,
        Feature::Conversions,
        Feature::Loads,
        Feature::Stores,
        Feature::Calls,
        Feature::IndirectCalls,
        Feature::CallArguments,
        Feature::Jumps,
        Feature::Branches,
        Feature::BranchTables,
        Feature::BranchTableEntries,
        Feature::Traps,
        Feature::FloatArith,
        Feature::FloatConversions,
        Feature::Vector,
        Feature::Returns,
        Feature::Addresses,
        Feature::Other,
    ];
}

/// Number of [`Feature`]s.
pub const FEATURES: usize = 29;

/// The counts of a function's [`Feature`]s, indexed by `Feature as usize`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SizeFeatures(pub [f64; FEATURES]);

impl SizeFeatures {
    /// The features of `func`.
    pub fn of(func: &Function) -> Self {
        let mut counts = [0.0; FEATURES];
        let mut add = |feature: Feature, n: usize| counts[feature as usize] += n as f64;
        add(Feature::Function, 1);
        let params = func.signature.params.len();
        add(Feature::Params, params);
        add(Feature::StackParams, params.saturating_sub(6));
        // Counts do not depend on the order: read in the order of numbers.
        add(Feature::Blocks, blocks_by_number(func).count());
        // An instruction's controlling type is none or the type of one of the
        // function's values: without a vector value, no instruction counts as
        // a vector, and the type (a slow lookup per instruction) is not asked.
        let vectors =
            (0..func.dfg.num_values()).any(|v| func.dfg.value_type(Value::new(v)).is_vector());
        for inst in insts_by_number(func) {
            let data = &func.dfg.insts[inst];
            let opcode = data.opcode();
            if opcode.is_call() {
                add(Feature::CallArguments, func.dfg.inst_args(inst).len());
            }
            if let InstructionData::BranchTable { table, .. } = data {
                let entries = func.stencil.dfg.jump_tables[*table].all_branches().len();
                add(Feature::BranchTableEntries, entries);
            }
            let feature = if vectors {
                inst_feature(func, inst)
            } else {
                kind(data)
            };
            add(feature, 1);
        }
        Self(counts)
    }

    /// The count of `feature`.
    pub fn get(&self, feature: Feature) -> f64 {
        self.0[feature as usize]
    }

    /// Counts `n` more of `feature`.
    pub fn add(&mut self, feature: Feature, n: usize) {
        self.0[feature as usize] += n as f64;
    }

    /// Counts `n` fewer of `feature`.
    pub(crate) fn remove(&mut self, feature: Feature, n: usize) {
        self.0[feature as usize] -= n as f64;
    }
}

/// The feature instruction `inst` of `func` counts for (besides its call
/// arguments and branch table entries).
pub(crate) fn inst_feature(func: &Function, inst: Inst) -> Feature {
    if func.dfg.ctrl_typevar(inst).is_vector() {
        Feature::Vector
    } else {
        kind(&func.dfg.insts[inst])
    }
}

/// The feature one (scalar) instruction counts for.
fn kind(data: &InstructionData) -> Feature {
    match *data {
        InstructionData::UnaryImm {
            opcode: Opcode::Iconst,
            imm,
        } => {
            if i32::try_from(imm.bits()).is_ok() {
                Feature::SmallConstants
            } else {
                Feature::LargeConstants
            }
        }
        _ => OPCODE_KINDS[data.opcode() as usize],
    }
}

/// [`opcode_kind`] of every opcode, by its number: one lookup per instruction
/// instead of a match.
static OPCODE_KINDS: LazyLock<[Feature; 256]> = LazyLock::new(|| {
    let mut kinds = [Feature::Other; 256];
    for &opcode in Opcode::all() {
        kinds[opcode as usize] = opcode_kind(opcode);
    }
    kinds
});

/// The feature an instruction of opcode `opcode` counts for, but for `iconst`,
/// whose immediate decides ([`kind`]).
fn opcode_kind(opcode: Opcode) -> Feature {
    use Opcode::*;
    match opcode {
        Iconst => Feature::LargeConstants,
        F16const | F32const | F64const | F128const | Vconst => Feature::FloatConstants,
        Iadd | Isub | Ineg | Iabs | Band | Bor | Bxor | Bnot | Ishl | Ushr | Sshr | Rotl | Rotr
        | Clz | Cls | Ctz | Popcnt | Bswap | Bitrev | Smin | Smax | Umin | Umax | UaddOverflow
        | SaddOverflow | UsubOverflow | SsubOverflow | SaddOverflowCin | UaddOverflowCin
        | SsubOverflowBin | UsubOverflowBin => Feature::IntArith,
        Imul | Umulhi | Smulhi | UmulOverflow | SmulOverflow => Feature::Multiplies,
        Udiv | Sdiv | Urem | Srem => Feature::Divides,
        Icmp | Fcmp => Feature::Compares,
        Select | SelectSpectreGuard | Bitselect => Feature::Selects,
        Uextend | Sextend | Ireduce | Bitcast | Iconcat | Isplit => Feature::Conversions,
        Call | ReturnCall => Feature::Calls,
        CallIndirect | ReturnCallIndirect => Feature::IndirectCalls,
        Jump => Feature::Jumps,
        Brif => Feature::Branches,
        BrTable => Feature::BranchTables,
        Trap | Trapz | Trapnz | UaddOverflowTrap | Debugtrap => Feature::Traps,
        Fadd | Fsub | Fmul | Fdiv | Sqrt | Fma | Fneg | Fabs | Fcopysign | Fmin | Fmax | Ceil
        | Floor | Trunc | Nearest => Feature::FloatArith,
        Fpromote | Fdemote | FcvtToUint | FcvtToSint | FcvtToUintSat | FcvtToSintSat
        | FcvtFromUint | FcvtFromSint => Feature::FloatConversions,
        Return => Feature::Returns,
        FuncAddr | SymbolValue | StackAddr | TlsValue | GetPinnedReg | GetFramePointer
        | GetStackPointer | GetReturnAddress => Feature::Addresses,
        opcode if opcode.can_load() => Feature::Loads,
        opcode if opcode.can_store() => Feature::Stores,
        _ => Feature::Other,
    }
}

/// Predicted code bytes: one coefficient per [`Feature`].
#[derive(Clone, Debug, PartialEq)]
pub struct SizeModel {
    /// Bytes per unit of each feature, indexed by `Feature as usize`.
    pub coefficients: [f64; FEATURES],
}

/// The x86_64 model (`opt_level=speed`, `preserve_frame_pointers`, the host ISA's
/// default flags otherwise): fitted by [`SizeModel::fit`] on 2026-11-23 by
/// `merge_bench size-model` on every function of the four corpus programs
/// (brotli, mozjpeg, resvg, sqljs: 4,531 functions) and the 842 merged bodies
/// and entry points of their similar groups merged by compiled sizes (5,373
/// samples), each compiled by Cranelift 0.135 for x86_64. Mean absolute error
/// 16.6–20.0% per function on each program (`docs/similar.md`).
const X86_64: [f64; FEATURES] = [
    24.855,  // Function
    -22.225, // Blocks
    -6.251,  // Params
    17.329,  // StackParams
    -0.859,  // SmallConstants
    -2.908,  // LargeConstants
    9.130,   // FloatConstants
    7.410,   // IntArith
    18.307,  // Multiplies
    21.156,  // Divides
    13.674,  // Compares
    19.677,  // Selects
    -2.298,  // Conversions
    -2.090,  // Loads
    3.032,   // Stores
    -9.457,  // Calls
    -12.607, // IndirectCalls
    11.485,  // CallArguments
    26.297,  // Jumps
    33.482,  // Branches
    1.696,   // BranchTables
    9.752,   // BranchTableEntries
    1.323,   // Traps
    12.385,  // FloatArith
    20.922,  // FloatConversions
    -2.024,  // Vector
    19.332,  // Returns
    -1.798,  // Addresses
    0.000,   // Other
];

impl SizeModel {
    /// The model fitted for `isa`, if there is one: x86_64 at `opt_level=speed`.
    /// Other targets and levels have none (their sizes are compiled).
    pub fn for_isa(isa: &dyn TargetIsa) -> Option<Self> {
        if isa.flags().opt_level() != OptLevel::Speed {
            return None;
        }
        match isa.triple().architecture {
            Architecture::X86_64 => Some(Self {
                coefficients: X86_64,
            }),
            _ => None,
        }
    }

    /// Predicted code bytes of a function with `features` (at least 1).
    pub fn predict_features(&self, features: &SizeFeatures) -> u64 {
        let bytes: f64 = self
            .coefficients
            .iter()
            .zip(&features.0)
            .map(|(c, x)| c * x)
            .sum();
        bytes.round().max(1.0) as u64
    }

    /// Predicted code bytes of `func`.
    pub fn predict(&self, func: &Function) -> u64 {
        self.predict_features(&SizeFeatures::of(func))
    }

    /// The model fitted to `samples` (features, compiled bytes) by weighted least
    /// squares: each sample weighs `1 / max(bytes, 32)`, so the fit minimizes
    /// roughly the relative error; a small ridge term keeps features that no sample
    /// has at 0. `None` without samples.
    pub fn fit(samples: &[(SizeFeatures, u64)]) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        // Normal equations (XᵀWX + λI) β = XᵀWy, solved by Gaussian elimination
        // with partial pivoting.
        let mut a = [[0.0f64; FEATURES]; FEATURES];
        let mut b = [0.0f64; FEATURES];
        for (features, bytes) in samples {
            let y = *bytes as f64;
            let w = 1.0 / y.max(32.0);
            for i in 0..FEATURES {
                let xi = features.0[i];
                if xi == 0.0 {
                    continue;
                }
                b[i] += w * xi * y;
                for (aij, xj) in a[i].iter_mut().zip(&features.0) {
                    *aij += w * xi * xj;
                }
            }
        }
        for (i, row) in a.iter_mut().enumerate() {
            row[i] += 1e-3;
        }
        for col in 0..FEATURES {
            let pivot = (col..FEATURES)
                .max_by(|&p, &q| a[p][col].abs().total_cmp(&a[q][col].abs()))
                .unwrap_or(col);
            a.swap(col, pivot);
            b.swap(col, pivot);
            let d = a[col][col];
            if d == 0.0 {
                continue;
            }
            for row in 0..FEATURES {
                if row == col {
                    continue;
                }
                let factor = a[row][col] / d;
                if factor == 0.0 {
                    continue;
                }
                let pivot_row = a[col];
                for (ark, pk) in a[row].iter_mut().zip(&pivot_row).skip(col) {
                    *ark -= factor * pk;
                }
                b[row] -= factor * b[col];
            }
        }
        let mut coefficients = [0.0; FEATURES];
        for i in 0..FEATURES {
            if a[i][i] != 0.0 {
                coefficients[i] = b[i] / a[i][i];
            }
        }
        Some(Self { coefficients })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use cranelift_codegen::settings::{self, Configurable};

    #[test]
    fn features_count_instructions_by_kind() {
        let text = "function %f(i64, i32) -> i32 {
            block0(v0: i64, v1: i32):
                v2 = iconst.i32 7
                v3 = iconst.i64 0x1_0000_0000
                v4 = iadd v1, v2
                v5 = load.i32 v0
                brif v4, block1, block2
            block1:
                return v5
            block2:
                v6 = imul v4, v5
                v7 = call_indirect sig0, v3(v6)
                return v7
            }";
        let text = text.replace(
            "function %f(i64, i32) -> i32 {",
            "function %f(i64, i32) -> i32 {\n    sig0 = (i32) -> i32",
        );
        let func = cranelift_reader::parse_functions(&text)
            .expect("parses")
            .remove(0);
        let features = SizeFeatures::of(&func);
        let expected = [
            (Feature::Function, 1.0),
            (Feature::Blocks, 3.0),
            (Feature::Params, 2.0),
            (Feature::SmallConstants, 1.0),
            (Feature::LargeConstants, 1.0),
            (Feature::IntArith, 1.0),
            (Feature::Loads, 1.0),
            (Feature::Branches, 1.0),
            (Feature::Multiplies, 1.0),
            (Feature::IndirectCalls, 1.0),
            (Feature::CallArguments, 2.0),
            (Feature::Returns, 2.0),
        ];
        for feature in Feature::ALL {
            let want = expected
                .iter()
                .find(|(f, _)| *f == feature)
                .map_or(0.0, |&(_, n)| n);
            assert_eq!(features.get(feature), want, "{feature:?}");
        }
    }

    /// The features counted without asking each instruction's controlling type
    /// (a function without vector values) are those [`inst_feature`] gives, and a
    /// function with vector values still counts its vector instructions.
    #[test]
    fn features_agree_with_inst_feature_with_and_without_vectors() {
        let text = "function %scalar(i64) -> i64 {
            block0(v0: i64):
                v1 = iconst.i64 3
                v2 = iadd v0, v1
                v3 = load.i64 v2
                store v3, v0
                return v3
            }
            function %vector(i64) -> i32 {
            block0(v0: i64):
                v1 = load.i32x4 v0
                v2 = iadd v1, v1
                store v2, v0
                v3 = extractlane v2, 0
                return v3
            }";
        for func in cranelift_reader::parse_functions(text).expect("parses") {
            let mut expected = SizeFeatures::default();
            expected.add(Feature::Function, 1);
            expected.add(Feature::Params, 1);
            expected.add(Feature::Blocks, 1);
            for inst in insts_by_number(&func) {
                expected.add(inst_feature(&func, inst), 1);
            }
            assert_eq!(SizeFeatures::of(&func), expected, "{}", func.name);
        }
        let vector = &cranelift_reader::parse_functions(text).expect("parses")[1];
        assert_eq!(SizeFeatures::of(vector).get(Feature::Vector), 4.0);
    }

    #[test]
    fn only_x86_64_at_speed_has_a_model() {
        let isa = |arch: &str, opt_level: &str| {
            let mut flags = settings::builder();
            flags.set("opt_level", opt_level).expect("a level");
            cranelift_codegen::isa::lookup_by_name(arch)
                .expect("a backend")
                .finish(settings::Flags::new(flags))
                .expect("an ISA")
        };
        assert!(SizeModel::for_isa(&*isa("x86_64", "speed")).is_some());
        assert!(SizeModel::for_isa(&*isa("x86_64", "none")).is_none());
        assert!(SizeModel::for_isa(&*isa("aarch64", "speed")).is_none());
    }

    #[test]
    fn every_feature_is_listed_in_order() {
        for (i, feature) in Feature::ALL.iter().enumerate() {
            assert_eq!(*feature as usize, i);
        }
    }

    #[test]
    fn fit_recovers_an_exact_linear_model() {
        // Sizes made by a known model are fitted back to it.
        let truth = [3.0, 5.0, 7.0];
        let samples: Vec<(SizeFeatures, u64)> = (0..40u32)
            .map(|i| {
                let mut x = [0.0; FEATURES];
                x[0] = 1.0;
                x[1] = f64::from(i % 7);
                x[2] = f64::from(i * i % 11);
                let y = truth[0] + truth[1] * x[1] + truth[2] * x[2];
                (SizeFeatures(x), y as u64)
            })
            .collect();
        let model = SizeModel::fit(&samples).expect("samples");
        for (c, t) in model.coefficients.iter().zip(truth) {
            assert!((c - t).abs() < 0.01, "{:?}", model.coefficients);
        }
        assert!(model.coefficients[3..].iter().all(|c| c.abs() < 1e-9));
    }
}
