//! The inputs every pair runs on: edge values of each parameter type and seeded
//! random values.

use cranelift_codegen::data_value::DataValue;
use cranelift_codegen::ir::{Function, Type, types};

/// Seeded random inputs per pair, on top of the edge values.
pub const RANDOM_INPUTS: usize = 64;

/// Edge values of a type, or `None` for a type that is not sampled.
fn edge_values(ty: Type) -> Option<Vec<DataValue>> {
    Some(match ty {
        types::I8 => vec![0i8, 1, -1, i8::MIN, i8::MAX]
            .into_iter()
            .map(DataValue::I8)
            .collect(),
        types::I16 => [0i16, 1, -1, i16::MIN, i16::MAX]
            .into_iter()
            .map(DataValue::I16)
            .collect(),
        types::I32 => [0i32, 1, -1, i32::MIN, i32::MAX]
            .into_iter()
            .map(DataValue::I32)
            .collect(),
        types::I64 => [0i64, 1, -1, i64::MIN, i64::MAX]
            .into_iter()
            .map(DataValue::I64)
            .collect(),
        types::I128 => [0i128, 1, -1, i128::MIN, i128::MAX]
            .into_iter()
            .map(DataValue::I128)
            .collect(),
        types::F32 => [
            0.0f32,
            -0.0,
            1.0,
            -1.0,
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
        ]
        .into_iter()
        .map(|x| DataValue::F32(x.into()))
        .collect(),
        types::F64 => [
            0.0f64,
            -0.0,
            1.0,
            -1.0,
            f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
        ]
        .into_iter()
        .map(|x| DataValue::F64(x.into()))
        .collect(),
        _ => return None,
    })
}

/// A value of type `ty` from 64 random bits.
fn random_value(ty: Type, bits: u64) -> DataValue {
    match ty {
        types::I8 => DataValue::I8(bits as i8),
        types::I16 => DataValue::I16(bits as i16),
        types::I32 => DataValue::I32(bits as i32),
        types::I64 => DataValue::I64(bits as i64),
        types::I128 => {
            DataValue::I128((u128::from(bits) << 64 | u128::from(bits.rotate_left(17))) as i128)
        }
        types::F32 => DataValue::F32(f32::from_bits(bits as u32).into()),
        _ => DataValue::F64(f64::from_bits(bits).into()),
    }
}

/// Edge-value inputs (every parameter cycling through its type's edge values) and
/// [`RANDOM_INPUTS`] random ones from a fixed seed.
pub(crate) fn inputs_for(func: &Function, seed: u64) -> Option<Vec<Vec<DataValue>>> {
    let types: Vec<Type> = func.signature.params.iter().map(|p| p.value_type).collect();
    let edges: Vec<Vec<DataValue>> = types
        .iter()
        .map(|&t| edge_values(t))
        .collect::<Option<_>>()?;
    let mut inputs = Vec::new();
    let rounds = edges.iter().map(Vec::len).max().unwrap_or(1);
    for i in 0..rounds {
        for shift in 0..types.len().max(1) {
            inputs.push(
                edges
                    .iter()
                    .enumerate()
                    .map(|(p, e)| e[(i + p * shift) % e.len()].clone())
                    .collect(),
            );
        }
    }
    let mut state = 0x9e37_79b9_7f4a_7c15u64 ^ seed;
    let mut next = || {
        // xorshift64*
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        state.wrapping_mul(0x2545_f491_4f6c_dd1d)
    };
    for _ in 0..RANDOM_INPUTS {
        inputs.push(types.iter().map(|&t| random_value(t, next())).collect());
    }
    Some(inputs)
}
