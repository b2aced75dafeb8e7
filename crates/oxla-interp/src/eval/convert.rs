//! `convert` (value conversion with XLA's rules: integers wrap, floats to
//! integers truncate and saturate with NaN -> 0, narrowing floats round to
//! nearest even) and `bitcast-convert` (bit reinterpretation, including
//! width-changing forms, in little-endian element order).

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use oxla_hlo::{ArrayData, HloInstruction, NativeType, with_array_data, with_native_type};

use super::elementwise::convert_data;
use super::result_array;
use crate::error::{OpResult, fail};
use crate::value::{Value, make_array};

pub(crate) fn convert(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    let data = convert_data(x.data(), out.element_type());
    Ok(Value::array(make_array(out, data)?))
}

/// An element's little-endian byte encoding (pred is one byte, complex is
/// the real part then the imaginary part).
pub(crate) trait LeBytes: NativeType {
    fn append_le(self, out: &mut Vec<u8>);
    /// Decodes from exactly `size_of` bytes.
    fn from_le(bytes: &[u8]) -> Self;
}

macro_rules! le_bytes_int {
    ($($t:ty),*) => {
        $(impl LeBytes for $t {
            fn append_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn from_le(bytes: &[u8]) -> Self {
                let mut b = [0u8; std::mem::size_of::<$t>()];
                b.copy_from_slice(bytes);
                <$t>::from_le_bytes(b)
            }
        })*
    };
}

le_bytes_int!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl LeBytes for bool {
    fn append_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn from_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

impl LeBytes for f16 {
    fn append_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_le_bytes());
    }
    fn from_le(bytes: &[u8]) -> Self {
        f16::from_bits(<u16 as LeBytes>::from_le(bytes))
    }
}

impl LeBytes for bf16 {
    fn append_le(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_le_bytes());
    }
    fn from_le(bytes: &[u8]) -> Self {
        bf16::from_bits(<u16 as LeBytes>::from_le(bytes))
    }
}

impl LeBytes for Complex32 {
    fn append_le(self, out: &mut Vec<u8>) {
        self.re.append_le(out);
        self.im.append_le(out);
    }
    fn from_le(bytes: &[u8]) -> Self {
        Complex32::new(f32::from_le(&bytes[..4]), f32::from_le(&bytes[4..8]))
    }
}

impl LeBytes for Complex64 {
    fn append_le(self, out: &mut Vec<u8>) {
        self.re.append_le(out);
        self.im.append_le(out);
    }
    fn from_le(bytes: &[u8]) -> Self {
        Complex64::new(f64::from_le(&bytes[..8]), f64::from_le(&bytes[8..16]))
    }
}

fn encode<T: LeBytes>(v: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(std::mem::size_of_val(v));
    for &x in v {
        x.append_le(&mut out);
    }
    out
}

fn decode<T: LeBytes>(bytes: &[u8]) -> ArrayData {
    let size = T::TYPE.byte_size();
    T::wrap(bytes.chunks_exact(size).map(T::from_le).collect())
}

/// The row-major little-endian bytes of every element.
pub(crate) fn to_bytes(data: &ArrayData) -> Vec<u8> {
    with_array_data!(data, v => encode(v))
}

/// Elements of type `ty` read from little-endian bytes (whole elements only).
pub(crate) fn from_bytes(ty: oxla_hlo::PrimitiveType, bytes: &[u8]) -> ArrayData {
    with_native_type!(ty, T => decode::<T>(bytes))
}

/// `bitcast-convert`: the operand's bytes read as the result's element type.
/// A narrower result splits each element into a new minor dimension,
/// least-significant part first; a wider result joins the operand's minor
/// dimension the same way.
pub(crate) fn bitcast_convert(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let out = result_array(instr)?;
    let bytes = to_bytes(x.data());
    let expected = out.element_count()? * out.element_type().byte_size();
    if bytes.len() != expected {
        return fail(format!(
            "{} holds {} bytes but {out} needs {expected}",
            x.shape(),
            bytes.len()
        ));
    }
    let data = from_bytes(out.element_type(), &bytes);
    Ok(Value::array(make_array(out, data)?))
}
