//! `.npy` files in and out. Element types map to NumPy's: bool for pred, the
//! matching integer and float types, complex64/complex128; bf16, which NumPy
//! lacks, is stored as uint16 bit patterns.

use std::fs::File;
use std::io::{BufReader, BufWriter};
use std::path::Path;

use anyhow::{Context, Result, bail};
use npyz::{Deserialize, NpyFile, Order, Serialize, WriterBuilder};
use oxla_hlo::half::bf16;
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, Literal, PrimitiveType};

/// Reads `path` as an array of `expected` (element type and dimensions must match).
pub fn read(path: &Path, expected: &ArrayShape) -> Result<Literal> {
    let file = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let npy = NpyFile::new(BufReader::new(file))
        .with_context(|| format!("{} is not a valid .npy file", path.display()))?;
    let dims: Vec<i64> = npy.shape().iter().map(|&d| d as i64).collect();
    let fortran = npy.order() == Order::Fortran;
    let descr = npy.dtype().descr();
    if dims != expected.dims() {
        bail!(
            "{}: has shape {:?} but the parameter is {expected}",
            path.display(),
            dims
        );
    }
    use PrimitiveType::*;
    let ty = expected.element_type();
    let name = ty.name();
    let data = match ty {
        Pred => ArrayData::Pred(typed(npy, path, &descr, name)?),
        S8 => ArrayData::S8(typed(npy, path, &descr, name)?),
        S16 => ArrayData::S16(typed(npy, path, &descr, name)?),
        S32 => ArrayData::S32(typed(npy, path, &descr, name)?),
        S64 => ArrayData::S64(typed(npy, path, &descr, name)?),
        U8 => ArrayData::U8(typed(npy, path, &descr, name)?),
        U16 => ArrayData::U16(typed(npy, path, &descr, name)?),
        U32 => ArrayData::U32(typed(npy, path, &descr, name)?),
        U64 => ArrayData::U64(typed(npy, path, &descr, name)?),
        F16 => ArrayData::F16(typed(npy, path, &descr, name)?),
        BF16 => {
            let bits: Vec<u16> = typed(npy, path, &descr, "uint16 (bf16 bit patterns)")?;
            ArrayData::BF16(bits.into_iter().map(bf16::from_bits).collect())
        }
        F32 => ArrayData::F32(typed(npy, path, &descr, name)?),
        F64 => ArrayData::F64(typed(npy, path, &descr, name)?),
        C64 => ArrayData::C64(typed(npy, path, &descr, name)?),
        C128 => ArrayData::C128(typed(npy, path, &descr, name)?),
    };
    let mut literal = ArrayLiteral::new(expected.clone(), data)
        .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    if fortran && expected.rank() > 1 {
        literal = from_fortran(&literal);
    }
    Ok(Literal::Array(literal))
}

fn typed<T: Deserialize>(
    npy: NpyFile<BufReader<File>>,
    path: &Path,
    descr: &str,
    wanted: &str,
) -> Result<Vec<T>> {
    npy.into_vec::<T>().map_err(|e| {
        anyhow::anyhow!(
            "{}: holds {descr} data where {wanted} is expected ({e})",
            path.display()
        )
    })
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
    let dims: Vec<u64> = literal.dims().iter().map(|&d| d as u64).collect();
    let file = File::create(path).with_context(|| format!("cannot create {}", path.display()))?;
    let out = BufWriter::new(file);
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
    .with_context(|| format!("cannot write {}", path.display()))
}

fn write_typed<T: Serialize + npyz::AutoSerialize + Copy>(
    out: BufWriter<File>,
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
