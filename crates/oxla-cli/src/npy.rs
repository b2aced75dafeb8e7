//! `.npy` files in and out. Element types map to NumPy's: bool for pred, the
//! matching integer and float types, complex64/complex128; bf16, which NumPy
//! lacks, is stored as uint16 bit patterns.
//!
//! Files come from elsewhere, so reading is strict and bounded: the header
//! (format versions 1 to 3) is parsed here, at most [`MAX_HEADER_LEN`]
//! bytes of a Python dict literal holding `descr`, `fortran_order` and
//! `shape`; element counts are checked for overflow; and the data is read
//! as it arrives, so a file that claims more than it holds costs no more
//! memory than its own size before it is rejected.

use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

use anyhow::{Context, Result, bail};
use npyz::{Serialize, WriterBuilder};
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, Literal, PrimitiveType};

/// The longest header accepted, in bytes. NumPy writes headers of a few
/// dozen bytes and by default refuses to read ones over 10,000.
pub const MAX_HEADER_LEN: usize = 1 << 16;

/// What a `.npy` header says about the data after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Header {
    /// NumPy's type string, such as `<f4` or `|b1`.
    pub descr: String,
    /// Column-major data (`fortran_order: True`).
    pub fortran_order: bool,
    pub shape: Vec<u64>,
}

/// Reads `path` as an array of `expected` (element type and dimensions must match).
pub fn read(path: &Path, expected: &ArrayShape) -> Result<Literal> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    read_from(BufReader::new(file), &path.display().to_string(), expected)
}

/// Reads `.npy` data from `reader` as an array of `expected`; `name` (a file
/// name) starts every error message.
pub fn read_from(mut reader: impl Read, name: &str, expected: &ArrayShape) -> Result<Literal> {
    let header =
        read_header(&mut reader).with_context(|| format!("{name} is not a valid .npy file"))?;
    let dims_match = header.shape.len() == expected.rank()
        && header
            .shape
            .iter()
            .zip(expected.dims())
            .all(|(&a, &b)| i64::try_from(a) == Ok(b));
    if !dims_match {
        bail!(
            "{name}: has shape {:?} but the parameter is {expected}",
            header.shape
        );
    }
    let ty = expected.element_type();
    let Some(big_endian) = byte_order(&header.descr, element_code(ty)) else {
        let what = if ty == PrimitiveType::BF16 {
            "uint16 (bf16 bit patterns)".to_string()
        } else {
            ty.name().to_string()
        };
        bail!(
            "{name}: holds {} data where {what} is expected",
            header.descr
        );
    };
    // The dimensions equal `expected`'s, so this size is known not to overflow.
    let needed = expected.byte_size()?;
    let mut bytes = Vec::new();
    reader
        .take(needed as u64)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {name}"))?;
    if bytes.len() < needed {
        bail!(
            "{name}: holds {} bytes of data but shape {:?} needs {needed}",
            bytes.len(),
            header.shape
        );
    }
    if big_endian {
        swap_bytes(&mut bytes, ty);
    }
    let mut literal = ArrayLiteral::from_bytes(expected.clone(), &bytes)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    if header.fortran_order && expected.rank() > 1 {
        literal = from_fortran(&literal);
    }
    Ok(Literal::Array(literal))
}

/// NumPy's type code for arrays of `ty` (without the byte order).
fn element_code(ty: PrimitiveType) -> &'static str {
    use PrimitiveType::*;
    match ty {
        Pred => "b1",
        S8 => "i1",
        S16 => "i2",
        S32 => "i4",
        S64 => "i8",
        U8 => "u1",
        U16 | BF16 => "u2",
        U32 => "u4",
        U64 => "u8",
        F16 => "f2",
        F32 => "f4",
        F64 => "f8",
        C64 => "c8",
        C128 => "c16",
    }
}

/// Whether `descr` is type `code` stored big-endian (`Some(true)`),
/// little-endian or as single bytes (`Some(false)`), or another type (`None`).
fn byte_order(descr: &str, code: &str) -> Option<bool> {
    let (order, rest) = descr.split_at_checked(1)?;
    if rest != code {
        return None;
    }
    match order {
        "<" | "|" => Some(false),
        ">" => Some(true),
        "=" => Some(cfg!(target_endian = "big")),
        _ => None,
    }
}

/// Big-endian elements (complex: each part) made little-endian, in place.
fn swap_bytes(bytes: &mut [u8], ty: PrimitiveType) {
    let width = if ty.is_complex() {
        ty.byte_size() / 2
    } else {
        ty.byte_size()
    };
    for chunk in bytes.chunks_exact_mut(width) {
        chunk.reverse();
    }
}

/// Reads the magic string, version, length and text of a header, leaving
/// `reader` at the first byte of data.
pub fn read_header(reader: &mut impl Read) -> Result<Header> {
    let mut magic = [0u8; 8];
    reader
        .read_exact(&mut magic)
        .context("it is shorter than the 8-byte preamble")?;
    if &magic[..6] != b"\x93NUMPY" {
        bail!("it does not start with the .npy magic string");
    }
    let len = match magic[6] {
        1 => {
            let mut b = [0u8; 2];
            reader
                .read_exact(&mut b)
                .context("the header length is cut off")?;
            u16::from_le_bytes(b) as usize
        }
        2 | 3 => {
            let mut b = [0u8; 4];
            reader
                .read_exact(&mut b)
                .context("the header length is cut off")?;
            u32::from_le_bytes(b) as usize
        }
        v => bail!("format version {v}.{} is not supported", magic[7]),
    };
    if len > MAX_HEADER_LEN {
        bail!("its header is {len} bytes long, more than the {MAX_HEADER_LEN} accepted");
    }
    let mut text = vec![0u8; len];
    reader
        .read_exact(&mut text)
        .context("the header is cut off")?;
    let text = std::str::from_utf8(&text).context("the header is not UTF-8 text")?;
    parse_header(text)
}

/// The header's dict literal: `{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }`.
fn parse_header(text: &str) -> Result<Header> {
    let mut p = DictParser { rest: text.trim() };
    p.expect('{')?;
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    while !p.eat('}') {
        let key = p.string()?;
        p.expect(':')?;
        match key.as_str() {
            "descr" if descr.is_none() => descr = Some(p.descr()?),
            "fortran_order" if fortran_order.is_none() => fortran_order = Some(p.boolean()?),
            "shape" if shape.is_none() => shape = Some(p.shape()?),
            _ => bail!("the header has an unexpected or repeated key '{key}'"),
        }
        if !p.eat(',') {
            p.expect('}')?;
            break;
        }
    }
    if !p.rest.is_empty() {
        bail!("the header has text after its dict");
    }
    match (descr, fortran_order, shape) {
        (Some(descr), Some(fortran_order), Some(shape)) => {
            let count = shape.iter().try_fold(1u64, |n, &d| n.checked_mul(d));
            if count.is_none() {
                bail!("its shape {shape:?} has more elements than fit in 64 bits");
            }
            Ok(Header {
                descr,
                fortran_order,
                shape,
            })
        }
        _ => bail!("the header lacks one of 'descr', 'fortran_order' and 'shape'"),
    }
}

/// A cursor over the header text; every token may be preceded by spaces.
struct DictParser<'a> {
    rest: &'a str,
}

impl DictParser<'_> {
    fn eat(&mut self, c: char) -> bool {
        self.rest = self.rest.trim_start();
        match self.rest.strip_prefix(c) {
            Some(r) => {
                self.rest = r;
                true
            }
            None => false,
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        if !self.eat(c) {
            bail!("the header is not a dict literal (expected '{c}')");
        }
        Ok(())
    }

    /// A quoted string without escapes.
    fn string(&mut self) -> Result<String> {
        self.rest = self.rest.trim_start();
        let quote = match self.rest.chars().next() {
            Some(q @ ('\'' | '"')) => q,
            _ => bail!("the header is not a dict literal (expected a quoted string)"),
        };
        let body = &self.rest[1..];
        let Some(end) = body.find(quote) else {
            bail!("the header has an unterminated string");
        };
        let s = &body[..end];
        if s.contains('\\') {
            bail!("the header has a string with escapes");
        }
        self.rest = &body[end + 1..];
        Ok(s.to_string())
    }

    /// The type string; structured types (lists) are not arrays oxla can read.
    fn descr(&mut self) -> Result<String> {
        if self.rest.trim_start().starts_with('[') {
            bail!("its dtype is a structured (record) type");
        }
        self.string()
    }

    fn boolean(&mut self) -> Result<bool> {
        self.rest = self.rest.trim_start();
        for (word, value) in [("True", true), ("False", false)] {
            if let Some(r) = self.rest.strip_prefix(word) {
                self.rest = r;
                return Ok(value);
            }
        }
        bail!("'fortran_order' is not True or False")
    }

    /// `()`, `(5,)`, `(2, 3)`: non-negative integers.
    fn shape(&mut self) -> Result<Vec<u64>> {
        self.expect('(')?;
        let mut dims = Vec::new();
        while !self.eat(')') {
            self.rest = self.rest.trim_start();
            let end = self
                .rest
                .find(|c: char| !c.is_ascii_digit())
                .unwrap_or(self.rest.len());
            let digits = &self.rest[..end];
            let Ok(d) = digits.parse::<u64>() else {
                bail!("'shape' is not a tuple of non-negative integers that fit in 64 bits");
            };
            self.rest = &self.rest[end..];
            dims.push(d);
            if !self.eat(',') {
                self.expect(')')?;
                break;
            }
        }
        Ok(dims)
    }
}

/// Column-major data reinterpreted into row-major order.
fn from_fortran(a: &ArrayLiteral) -> ArrayLiteral {
    let dims = a.shape().dims_usize();
    let n = a.element_count();
    // Element at row-major index i sits at column-major position j.
    let mut order = Vec::with_capacity(n);
    let mut index = vec![0usize; dims.len()];
    for _ in 0..n {
        let mut j = 0usize;
        for k in (0..dims.len()).rev() {
            j = j * dims[k] + index[k];
        }
        order.push(j);
        for k in (0..dims.len()).rev() {
            index[k] += 1;
            if index[k] < dims[k] {
                break;
            }
            index[k] = 0;
        }
    }
    // Dims and data come from one valid literal, so this cannot fail.
    ArrayLiteral::new(a.shape().clone(), a.data().take(&order)).unwrap_or_else(|_| a.clone())
}

/// Writes an array literal to `path`.
pub fn write(path: &Path, literal: &ArrayLiteral) -> Result<()> {
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    write_to(BufWriter::new(file), literal)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Writes an array literal as `.npy` data to `out`.
pub fn write_to(out: impl Write, literal: &ArrayLiteral) -> std::io::Result<()> {
    let dims: Vec<u64> = literal.dims().iter().map(|&d| d as u64).collect();
    match literal.data() {
        ArrayData::Pred(v) => write_typed(out, &dims, v),
        ArrayData::S8(v) => write_typed(out, &dims, v),
        ArrayData::S16(v) => write_typed(out, &dims, v),
        ArrayData::S32(v) => write_typed(out, &dims, v),
        ArrayData::S64(v) => write_typed(out, &dims, v),
        ArrayData::U8(v) => write_typed(out, &dims, v),
        ArrayData::U16(v) => write_typed(out, &dims, v),
        ArrayData::U32(v) => write_typed(out, &dims, v),
        ArrayData::U64(v) => write_typed(out, &dims, v),
        ArrayData::F16(v) => write_typed(out, &dims, v),
        ArrayData::BF16(v) => write_typed(
            out,
            &dims,
            &v.iter().map(|x| x.to_bits()).collect::<Vec<u16>>(),
        ),
        ArrayData::F32(v) => write_typed(out, &dims, v),
        ArrayData::F64(v) => write_typed(out, &dims, v),
        ArrayData::C64(v) => write_typed(out, &dims, v),
        ArrayData::C128(v) => write_typed(out, &dims, v),
    }
}

fn write_typed<T: Serialize + npyz::AutoSerialize + Copy>(
    out: impl Write,
    dims: &[u64],
    values: &[T],
) -> std::io::Result<()> {
    let mut writer = npyz::WriteOptions::new()
        .default_dtype()
        .shape(dims)
        .writer(out)
        .begin_nd()?;
    writer.extend(values.iter().copied())?;
    writer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use oxla_hlo::PrimitiveType::*;

    /// A version-1 file with `header` (padded as NumPy pads it) and `data`.
    fn file(header: &str, data: &[u8]) -> Vec<u8> {
        let mut text = header.to_string();
        while !(10 + text.len() + 1).is_multiple_of(64) {
            text.push(' ');
        }
        text.push('\n');
        let mut v = b"\x93NUMPY\x01\x00".to_vec();
        v.extend_from_slice(&(text.len() as u16).to_le_bytes());
        v.extend_from_slice(text.as_bytes());
        v.extend_from_slice(data);
        v
    }

    fn read_bytes(bytes: &[u8], expected: &ArrayShape) -> Result<Literal> {
        read_from(bytes, "x.npy", expected)
    }

    fn error(bytes: &[u8], expected: &ArrayShape) -> String {
        format!("{:#}", read_bytes(bytes, expected).unwrap_err())
    }

    fn shape(ty: PrimitiveType, dims: &[i64]) -> ArrayShape {
        ArrayShape::new(ty, dims).unwrap()
    }

    #[test]
    fn reads_both_byte_orders_and_fortran_order() {
        let le = file(
            "{'descr': '<i2', 'fortran_order': False, 'shape': (2, 2), }",
            &[1, 0, 2, 0, 3, 0, 4, 0],
        );
        let be = file(
            "{'descr': '>i2', 'fortran_order': False, 'shape': (2, 2), }",
            &[0, 1, 0, 2, 0, 3, 0, 4],
        );
        let fortran = file(
            "{'descr': '<i2', 'fortran_order': True, 'shape': (2, 2), }",
            &[1, 0, 3, 0, 2, 0, 4, 0],
        );
        let want = Literal::from_vec(&[2, 2], vec![1i16, 2, 3, 4]).unwrap();
        for f in [le, be, fortran] {
            assert_eq!(read_bytes(&f, &shape(S16, &[2, 2])).unwrap(), want);
        }
        let complex = file(
            "{\"descr\": \">c8\", \"fortran_order\": False, \"shape\": (1,)}",
            &[0x3f, 0x80, 0, 0, 0xc0, 0, 0, 0],
        );
        let c = read_bytes(&complex, &shape(C64, &[1])).unwrap();
        assert_eq!(
            c,
            Literal::vec1(&[oxla_hlo::num_complex::Complex32::new(1.0, -2.0)])
        );
    }

    #[test]
    fn round_trips_through_write_to() {
        let values = Literal::from_vec(&[2, 3], vec![1.5f64, -0.0, 3.0, 4.0, 5.0, 6.0]).unwrap();
        let mut bytes = Vec::new();
        write_to(&mut bytes, values.as_array().unwrap()).unwrap();
        assert_eq!(read_bytes(&bytes, &shape(F64, &[2, 3])).unwrap(), values);
    }

    /// The npyz-based reader this one replaced panicked here in debug
    /// builds (npyz multiplies the dimensions unchecked; release builds
    /// wrap around).
    #[test]
    fn a_shape_whose_element_count_overflows_is_an_error() {
        let f = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
            &[],
        );
        assert_eq!(
            error(&f, &shape(F32, &[2])),
            "x.npy is not a valid .npy file: its shape [4294967296, 4294967296] has more elements than fit in 64 bits"
        );
    }

    /// npyz allocates whatever header length the file states (up to 4 GiB).
    #[test]
    fn a_huge_header_length_is_an_error_before_any_allocation() {
        let mut f = b"\x93NUMPY\x02\x00".to_vec();
        f.extend_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            error(&f, &shape(F32, &[2])),
            "x.npy is not a valid .npy file: its header is 4294967295 bytes long, more than the 65536 accepted"
        );
    }

    #[test]
    fn data_shorter_than_the_shape_is_an_error() {
        let f = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (1000000,), }",
            &[0; 10],
        );
        assert_eq!(
            error(&f, &shape(F32, &[1_000_000])),
            "x.npy: holds 10 bytes of data but shape [1000000] needs 4000000"
        );
    }

    #[test]
    fn bad_files_are_errors_naming_the_problem() {
        let s = shape(F32, &[2]);
        let cases: &[(&[u8], &str)] = &[
            (
                b"",
                "x.npy is not a valid .npy file: it is shorter than the 8-byte preamble: failed to fill whole buffer",
            ),
            (
                b"PK\x03\x04........",
                "x.npy is not a valid .npy file: it does not start with the .npy magic string",
            ),
            (
                b"\x93NUMPY\x09\x00\x10\x00",
                "x.npy is not a valid .npy file: format version 9.0 is not supported",
            ),
        ];
        for (bytes, message) in cases {
            assert_eq!(error(bytes, &s), *message);
        }
        let headers = [
            (
                "{'descr': '<f4', 'shape': (2,), }",
                "the header lacks one of 'descr', 'fortran_order' and 'shape'",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (2,), }",
                "'fortran_order' is not True or False",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }",
                "'shape' is not a tuple of non-negative integers that fit in 64 bits",
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }",
                "its dtype is a structured (record) type",
            ),
            (
                "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
                "the header has an unexpected or repeated key 'descr'",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x",
                "the header has text after its dict",
            ),
            (
                "['descr']",
                "the header is not a dict literal (expected '{')",
            ),
        ];
        for (header, message) in headers {
            assert_eq!(
                error(&file(header, &[0; 8]), &s),
                format!("x.npy is not a valid .npy file: {message}")
            );
        }
        let f32_file = file(
            "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }",
            &[0; 8],
        );
        assert_eq!(
            error(&f32_file, &shape(F32, &[3])),
            "x.npy: has shape [2] but the parameter is f32[3]"
        );
        assert_eq!(
            error(&f32_file, &shape(S32, &[2])),
            "x.npy: holds <f4 data where s32 is expected"
        );
        assert_eq!(
            error(&f32_file, &shape(BF16, &[2])),
            "x.npy: holds <f4 data where uint16 (bf16 bit patterns) is expected"
        );
    }
}
