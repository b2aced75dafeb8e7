//! `dot` with general dimension numbers, and `ragged-dot`. Both operands are
//! converted to the accumulation type (the result type, or f32 for f16/bf16
//! results), each output element sums its products in row-major order of the
//! contracting dimensions (integers wrap), and the sum is converted to the
//! result type once.

use half::{bf16, f16};
use num_complex::{Complex32, Complex64};
use oxla_hlo::ir::DotDimensionNumbers;
use oxla_hlo::{
    ArrayData, ArrayLiteral, HloInstruction, NativeType, PrimitiveType, with_native_type,
};

use super::elementwise::convert_data;
use super::{attr, result_array};
use crate::element::Elem;
use crate::error::{OpResult, fail};
use crate::float_env::Flush;
use crate::index::{Counter, dims_usize, for_each_index, strides};
use crate::value::{Value, make_array};

/// Multiply-accumulate in one element type.
pub(crate) trait Accumulate: NativeType {
    fn mul_add(acc: Self, a: Self, b: Self) -> Self;
}

macro_rules! accumulate_int {
    ($($t:ty),*) => {
        $(impl Accumulate for $t {
            fn mul_add(acc: $t, a: $t, b: $t) -> $t {
                acc.wrapping_add(a.wrapping_mul(b))
            }
        })*
    };
}

accumulate_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! accumulate_float {
    ($($t:ty),*) => {
        $(impl Accumulate for $t {
            fn mul_add(acc: $t, a: $t, b: $t) -> $t {
                (acc + (a.flush() * b.flush()).flush()).flush()
            }
        })*
    };
}

// Flushed (a no-op unless denormals are flushed; see `float_env`).
accumulate_float!(f32, f64, Complex32, Complex64);

impl Accumulate for bool {
    fn mul_add(acc: bool, a: bool, b: bool) -> bool {
        acc | (a & b)
    }
}

// Half types never accumulate in their own precision (see `accumulation_type`),
// but the dispatch over every element type needs these.
impl Accumulate for f16 {
    fn mul_add(acc: f16, a: f16, b: f16) -> f16 {
        f16::from_f32(acc.to_f32() + a.to_f32() * b.to_f32())
    }
}

impl Accumulate for bf16 {
    fn mul_add(acc: bf16, a: bf16, b: bf16) -> bf16 {
        bf16::from_f32(acc.to_f32() + a.to_f32() * b.to_f32())
    }
}

/// The type sums are kept in for a given result type: f16 and bf16 sum in f32
/// (and round once at the end), everything else in the result type.
pub(crate) fn accumulation_type(result: PrimitiveType) -> PrimitiveType {
    match result {
        PrimitiveType::F16 | PrimitiveType::BF16 => PrimitiveType::F32,
        t => t,
    }
}

/// Where each output element reads its operands.
struct Contraction {
    out_dims: Vec<usize>,
    /// For each output dimension, its stride in lhs and in rhs (0 if it does not index that side).
    lhs_strides: Vec<usize>,
    rhs_strides: Vec<usize>,
    /// (lhs offset, rhs offset) of every point of the contracting index space, row-major.
    pairs: Vec<(usize, usize)>,
}

/// Row-wise groups of a ragged dot.
struct Ragged {
    /// Output dimension that runs along the lhs ragged dimension.
    out_dim: usize,
    /// Stride of rhs's group dimension.
    group_stride: usize,
    /// Group sizes (negative sizes count as 0).
    sizes: Vec<usize>,
}

impl Ragged {
    /// The group row `r` falls in, or `None` beyond the last group.
    fn group_of(&self, r: usize) -> Option<usize> {
        let mut end = 0;
        for (g, &s) in self.sizes.iter().enumerate() {
            end += s;
            if r < end {
                return Some(g);
            }
        }
        None
    }
}

fn check_dims(what: &str, dims: &[i64], rank: usize) -> OpResult<Vec<usize>> {
    dims.iter()
        .map(|&d| match usize::try_from(d) {
            Ok(d) if d < rank => Ok(d),
            _ => fail(format!("{what} {dims:?} do not fit rank {rank}")),
        })
        .collect()
}

/// Plans a dot of `lhs_dims` and `rhs_dims`; `skip_rhs` is a rhs dimension
/// that is neither batch, contracting nor free (ragged-dot's group dimension).
fn plan(
    lhs_dims: &[usize],
    rhs_dims: &[usize],
    dn: &DotDimensionNumbers,
    skip_rhs: Option<usize>,
) -> OpResult<(Contraction, Vec<usize>)> {
    let lb = check_dims(
        "lhs batch dimensions",
        &dn.lhs_batch_dimensions,
        lhs_dims.len(),
    )?;
    let rb = check_dims(
        "rhs batch dimensions",
        &dn.rhs_batch_dimensions,
        rhs_dims.len(),
    )?;
    let lc = check_dims(
        "lhs contracting dimensions",
        &dn.lhs_contracting_dimensions,
        lhs_dims.len(),
    )?;
    let rc = check_dims(
        "rhs contracting dimensions",
        &dn.rhs_contracting_dimensions,
        rhs_dims.len(),
    )?;
    if lb.len() != rb.len()
        || lc.len() != rc.len()
        || lb
            .iter()
            .zip(&rb)
            .any(|(&a, &b)| lhs_dims[a] != rhs_dims[b])
        || lc
            .iter()
            .zip(&rc)
            .any(|(&a, &b)| lhs_dims[a] != rhs_dims[b])
    {
        return fail("batch or contracting dimensions do not match");
    }
    let lhs_free: Vec<usize> = (0..lhs_dims.len())
        .filter(|d| !lb.contains(d) && !lc.contains(d))
        .collect();
    let rhs_free: Vec<usize> = (0..rhs_dims.len())
        .filter(|d| !rb.contains(d) && !rc.contains(d) && Some(*d) != skip_rhs)
        .collect();
    let ls = strides(lhs_dims);
    let rs = strides(rhs_dims);
    let mut out_dims = Vec::new();
    let (mut lhs_strides, mut rhs_strides) = (Vec::new(), Vec::new());
    for (&a, &b) in lb.iter().zip(&rb) {
        out_dims.push(lhs_dims[a]);
        lhs_strides.push(ls[a]);
        rhs_strides.push(rs[b]);
    }
    for &a in &lhs_free {
        out_dims.push(lhs_dims[a]);
        lhs_strides.push(ls[a]);
        rhs_strides.push(0);
    }
    for &b in &rhs_free {
        out_dims.push(rhs_dims[b]);
        lhs_strides.push(0);
        rhs_strides.push(rs[b]);
    }
    let contracting: Vec<usize> = lc.iter().map(|&a| lhs_dims[a]).collect();
    let mut pairs = Vec::new();
    // An empty result needs no pairs. Otherwise the lhs holds every
    // contracting position at least once, so the table is no larger than
    // the lhs; for an empty result it could be astronomically large
    // (f32[2^40,0] contracted over its first dimension).
    if !out_dims.contains(&0) {
        for_each_index::<()>(&contracting, |c| {
            let l = c.iter().zip(&lc).map(|(&i, &d)| i * ls[d]).sum();
            let r = c.iter().zip(&rc).map(|(&i, &d)| i * rs[d]).sum();
            pairs.push((l, r));
            Ok(())
        })
        .ok();
    }
    Ok((
        Contraction {
            out_dims,
            lhs_strides,
            rhs_strides,
            pairs,
        },
        lhs_free,
    ))
}

fn contract<T: Accumulate>(
    lhs: &ArrayData,
    rhs: &ArrayData,
    c: &Contraction,
    ragged: Option<&Ragged>,
) -> OpResult<ArrayData> {
    let (Some(l), Some(r)) = (T::slice(lhs), T::slice(rhs)) else {
        return fail("operands were not converted to the accumulation type");
    };
    let mut out = Vec::new();
    let mut counter = Counter::new(&c.out_dims);
    while !counter.done() {
        let o = counter.index();
        let lb: usize = o.iter().zip(&c.lhs_strides).map(|(i, s)| i * s).sum();
        let mut rb: usize = o.iter().zip(&c.rhs_strides).map(|(i, s)| i * s).sum();
        let mut acc = T::default();
        let group = ragged.map(|g| g.group_of(o[g.out_dim]).map(|k| k * g.group_stride));
        match group {
            Some(None) => {}
            Some(Some(offset)) => {
                rb += offset;
                for &(lo, ro) in &c.pairs {
                    acc = T::mul_add(acc, l[lb + lo], r[rb + ro]);
                }
            }
            None => {
                for &(lo, ro) in &c.pairs {
                    acc = T::mul_add(acc, l[lb + lo], r[rb + ro]);
                }
            }
        }
        out.push(acc);
        counter.advance();
    }
    Ok(T::wrap(out))
}

/// Converts both operands to the accumulation type, contracts, converts to the result type.
fn run(
    instr: &HloInstruction,
    lhs: &ArrayLiteral,
    rhs: &ArrayLiteral,
    c: &Contraction,
    ragged: Option<&Ragged>,
) -> OpResult<Value> {
    let out = result_array(instr)?;
    if dims_usize(out.dims()) != c.out_dims {
        return fail(format!(
            "the result shape {out} does not match the dimension numbers"
        ));
    }
    let acc = accumulation_type(out.element_type());
    let l = convert_data(lhs.data(), acc);
    let r = convert_data(rhs.data(), acc);
    let sums = with_native_type!(acc, T => contract::<T>(&l, &r, c, ragged))?;
    Ok(Value::array(make_array(
        out,
        convert_data(&sums, out.element_type()),
    )?))
}

pub(crate) fn dot(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let lhs = operands[0].as_array()?;
    let rhs = operands[1].as_array()?;
    let dn = attr(&instr.attrs.dot_dnums, "dot dimension numbers")?;
    let (c, _) = plan(&dims_usize(lhs.dims()), &dims_usize(rhs.dims()), dn, None)?;
    run(instr, lhs, rhs, &c, None)
}

/// `ragged-dot(lhs, rhs, group_sizes)`: the lhs ragged dimension (a
/// non-contracting one) is cut into consecutive groups of `group_sizes[g]`
/// rows; rows of group `g` are multiplied by `rhs[g]` (rhs's group dimension
/// removed); rows past the last group give zeros.
pub(crate) fn ragged_dot(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let lhs = operands[0].as_array()?;
    let rhs = operands[1].as_array()?;
    let sizes = operands[2].as_array()?;
    let dn = attr(&instr.attrs.dot_dnums, "dot dimension numbers")?;
    let rd = attr(&instr.attrs.ragged_dot_dnums, "ragged dimension numbers")?;
    let lhs_dims = dims_usize(lhs.dims());
    let rhs_dims = dims_usize(rhs.dims());
    let (&[ragged_dim], &[group_dim]) = (
        &check_dims("lhs_ragged_dims", &rd.lhs_ragged_dimensions, lhs_dims.len())?[..],
        &check_dims("rhs_group_dims", &rd.rhs_group_dimensions, rhs_dims.len())?[..],
    ) else {
        return fail("needs exactly one lhs ragged dimension and one rhs group dimension");
    };
    let (c, lhs_free) = plan(&lhs_dims, &rhs_dims, dn, Some(group_dim))?;
    let Some(pos) = lhs_free.iter().position(|&d| d == ragged_dim) else {
        return fail("only a non-contracting, non-batch lhs ragged dimension is supported");
    };
    let group_sizes: Vec<usize> = (0..sizes.element_count())
        .map(|i| {
            Elem::read(sizes.data(), i)
                .as_index()
                .clamp(0, usize::MAX as i128) as usize
        })
        .collect();
    if group_sizes.len() != rhs_dims[group_dim] {
        return fail("group_sizes must have one entry per rhs group");
    }
    let ragged = Ragged {
        out_dim: dn.lhs_batch_dimensions.len() + pos,
        group_stride: strides(&rhs_dims)[group_dim],
        sizes: group_sizes,
    };
    run(instr, lhs, rhs, &c, Some(&ragged))
}
