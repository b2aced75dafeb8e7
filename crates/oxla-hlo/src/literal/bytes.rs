//! Raw bytes of array literals, as a C function or a device buffer sees
//! them: row-major, little-endian elements, pred as one byte (0 or 1),
//! complex numbers as (real, imaginary) pairs.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};

use super::native::{ArrayData, NativeType};
use super::{ArrayLiteral, LiteralError};
use crate::shape::ArrayShape;

/// A fixed-size little-endian encoding of one element.
trait Bytes: NativeType {
    const SIZE: usize;
    fn put(self, out: &mut Vec<u8>);
    fn get(b: &[u8]) -> Self;
}

macro_rules! le_bytes {
    ($($t:ty),*) => {
        $(impl Bytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn put(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn get(b: &[u8]) -> Self {
                let mut a = [0u8; std::mem::size_of::<$t>()];
                a.copy_from_slice(&b[..Self::SIZE]);
                <$t>::from_le_bytes(a)
            }
        })*
    };
}

le_bytes!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl Bytes for bool {
    const SIZE: usize = 1;
    fn put(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn get(b: &[u8]) -> Self {
        b[0] != 0
    }
}

impl Bytes for f16 {
    const SIZE: usize = 2;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        f16::from_bits(u16::get(b))
    }
}

impl Bytes for bf16 {
    const SIZE: usize = 2;
    fn put(self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.to_bits().to_le_bytes());
    }
    fn get(b: &[u8]) -> Self {
        bf16::from_bits(u16::get(b))
    }
}

impl Bytes for Complex32 {
    const SIZE: usize = 8;
    fn put(self, out: &mut Vec<u8>) {
        self.re.put(out);
        self.im.put(out);
    }
    fn get(b: &[u8]) -> Self {
        Complex32::new(f32::get(b), f32::get(&b[4..]))
    }
}

impl Bytes for Complex64 {
    const SIZE: usize = 16;
    fn put(self, out: &mut Vec<u8>) {
        self.re.put(out);
        self.im.put(out);
    }
    fn get(b: &[u8]) -> Self {
        Complex64::new(f64::get(b), f64::get(&b[8..]))
    }
}

fn encode<T: Bytes>(v: &[T]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() * T::SIZE);
    for &x in v {
        x.put(&mut out);
    }
    out
}

fn decode<T: Bytes>(b: &[u8]) -> ArrayData {
    T::wrap(b.chunks_exact(T::SIZE).map(T::get).collect())
}

impl ArrayLiteral {
    /// The elements as little-endian bytes in row-major order.
    pub fn to_bytes(&self) -> Vec<u8> {
        crate::with_array_data!(self.data(), v => encode(v))
    }

    /// An array of `shape` from little-endian row-major bytes; the length must
    /// be exactly the shape's byte size.
    pub fn from_bytes(shape: ArrayShape, bytes: &[u8]) -> Result<ArrayLiteral, LiteralError> {
        let expected = shape.byte_size()?;
        if bytes.len() != expected {
            return Err(LiteralError::Other(format!(
                "{shape} takes {expected} bytes but {} were given",
                bytes.len()
            )));
        }
        let data = crate::with_native_type!(shape.element_type(), T => decode::<T>(bytes));
        ArrayLiteral::new(shape, data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Literal, PrimitiveType};

    #[test]
    fn round_trips_every_type() {
        let values = [
            Literal::vec1(&[true, false]),
            Literal::vec1(&[-1i8, 2]),
            Literal::vec1(&[-300i16, 2]),
            Literal::vec1(&[i32::MIN, 7]),
            Literal::vec1(&[i64::MAX, -7]),
            Literal::vec1(&[255u8, 0]),
            Literal::vec1(&[65535u16]),
            Literal::vec1(&[u32::MAX]),
            Literal::vec1(&[u64::MAX]),
            Literal::vec1(&[f16::from_f32(1.5)]),
            Literal::vec1(&[bf16::from_f32(-2.0)]),
            Literal::vec1(&[1.25f32, f32::NAN]),
            Literal::vec1(&[-0.0f64]),
            Literal::vec1(&[Complex32::new(1.0, -2.0)]),
            Literal::vec1(&[Complex64::new(3.0, 4.0)]),
        ];
        for l in values {
            let a = l.as_array().unwrap();
            let bytes = a.to_bytes();
            assert_eq!(bytes.len(), a.shape().byte_size().unwrap());
            let back = ArrayLiteral::from_bytes(a.shape().clone(), &bytes).unwrap();
            assert!(Literal::Array(back).bitwise_eq(&l), "{l}");
        }
        let f = Literal::vec1(&[1.0f32]);
        assert_eq!(f.as_array().unwrap().to_bytes(), vec![0, 0, 0x80, 0x3f]);
        let bad =
            ArrayLiteral::from_bytes(ArrayShape::new_unchecked(PrimitiveType::F32, [2]), &[0; 7]);
        assert!(bad.is_err());
    }
}
