//! `convolution`, exactly as the spec's pseudo-code, generalised to any number
//! of spatial dimensions, any dimension labels, window strides, padding
//! (negative too), lhs (base) and rhs (window) dilation, window reversal,
//! feature groups and batch groups:
//!
//! ```text
//! for each output (b, oz, o...):
//!   g  = oz / (output features / feature_group_count)       // feature group
//!   bg = oz / (output features / batch_group_count)         // batch group
//!   value = 0
//!   for kz in 0..kernel input features, then each kernel position k... (row-major):
//!     p_i = o_i * stride_i + k_i * rhs_dilation_i - pad_low_i   // in the dilated, padded base
//!     skip unless 0 <= p_i < dilated size and p_i % lhs_dilation_i == 0
//!     value += lhs(bg * (batch / batch_group_count) + b, g * kernel_in_features + kz, p / lhs_dilation)
//!            * rhs(oz, kz, reversed_i ? size_i - 1 - k_i : k_i)
//!   output(b, oz, o...) = value
//! ```
//!
//! Sums use the accumulation type of `dot` (f32 for f16/bf16 results).

use oxla_hlo::{ArrayData, HloInstruction, with_native_type};

use super::dot::{Accumulate, accumulation_type};
use super::elementwise::convert_data;
use super::reduce::window_taps;
use super::{attr, result_array};
use crate::error::{OpResult, fail};
use crate::index::{Counter, dims_usize, for_each_index, strides};
use crate::value::{Value, make_array};

/// Everything the kernel needs, in element offsets.
struct Geometry {
    out_dims: Vec<usize>,
    /// Output dimension of batch, feature and each spatial dimension.
    out_batch: usize,
    out_feature: usize,
    out_spatial: Vec<usize>,
    lhs_batch_stride: usize,
    lhs_feature_stride: usize,
    lhs_spatial_strides: Vec<usize>,
    rhs_in_stride: usize,
    rhs_out_stride: usize,
    kernel_in_features: usize,
    out_features_per_group: usize,
    out_features_per_batch_group: usize,
    batch_group_size: usize,
    /// Per spatial dimension `i`: for output position `o` and window position
    /// `k`, `taps[i][o * window_i + k]` is the input index, or `None` for padding
    /// or a dilation hole.
    taps: Vec<Vec<Option<usize>>>,
    window: Vec<usize>,
    /// Row-major list of kernel positions: (window position per dimension, rhs offset).
    kernel_positions: Vec<(Vec<usize>, usize)>,
}

fn kernel<T: Accumulate>(lhs: &ArrayData, rhs: &ArrayData, g: &Geometry) -> OpResult<ArrayData> {
    let (Some(l), Some(r)) = (T::slice(lhs), T::slice(rhs)) else {
        return fail("operands were not converted to the accumulation type");
    };
    let n = g.out_spatial.len();
    let mut out = Vec::new();
    let mut counter = Counter::new(&g.out_dims);
    let mut o_sp = vec![0usize; n];
    while !counter.done() {
        let o = counter.index();
        let (b, oz) = (o[g.out_batch], o[g.out_feature]);
        for i in 0..n {
            o_sp[i] = o[g.out_spatial[i]];
        }
        let group = oz / g.out_features_per_group;
        let batch_group = oz / g.out_features_per_batch_group;
        let lhs_base = (batch_group * g.batch_group_size + b) * g.lhs_batch_stride;
        let mut acc = T::default();
        for kz in 0..g.kernel_in_features {
            let iz = group * g.kernel_in_features + kz;
            let lhs_z = lhs_base + iz * g.lhs_feature_stride;
            let rhs_z = oz * g.rhs_out_stride + kz * g.rhs_in_stride;
            'positions: for (k, rhs_off) in &g.kernel_positions {
                let mut lo = lhs_z;
                for i in 0..n {
                    match g.taps[i][o_sp[i] * g.window[i] + k[i]] {
                        Some(p) => lo += p * g.lhs_spatial_strides[i],
                        None => continue 'positions,
                    }
                }
                acc = T::mul_add(acc, l[lo], r[rhs_z + rhs_off]);
            }
        }
        out.push(acc);
        counter.advance();
    }
    Ok(T::wrap(out))
}

fn dim(d: i64, rank: usize) -> OpResult<usize> {
    match usize::try_from(d) {
        Ok(d) if d < rank => Ok(d),
        _ => fail(format!("dimension {d} is out of range for rank {rank}")),
    }
}

pub(crate) fn convolution(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let lhs = operands[0].as_array()?;
    let rhs = operands[1].as_array()?;
    let out = result_array(instr)?;
    let window = attr(&instr.attrs.window, "window")?;
    let dn = attr(&instr.attrs.conv_dnums, "dim_labels")?;
    let feature_groups = instr.attrs.feature_group_count.unwrap_or(1);
    let batch_groups = instr.attrs.batch_group_count.unwrap_or(1);
    let ld = dims_usize(lhs.dims());
    let rd = dims_usize(rhs.dims());
    let od = dims_usize(out.dims());
    let n = dn.input_spatial_dimensions.len();
    if ld.len() != n + 2
        || rd.len() != n + 2
        || od.len() != n + 2
        || window.dims.len() != n
        || dn.kernel_spatial_dimensions.len() != n
        || dn.output_spatial_dimensions.len() != n
        || feature_groups < 1
        || batch_groups < 1
    {
        return fail("operand ranks, window and dimension numbers do not agree");
    }
    let (ib, if_) = (
        dim(dn.input_batch_dimension, n + 2)?,
        dim(dn.input_feature_dimension, n + 2)?,
    );
    let (ki, ko) = (
        dim(dn.kernel_input_feature_dimension, n + 2)?,
        dim(dn.kernel_output_feature_dimension, n + 2)?,
    );
    let (ob, of) = (
        dim(dn.output_batch_dimension, n + 2)?,
        dim(dn.output_feature_dimension, n + 2)?,
    );
    let is: Vec<usize> = dn
        .input_spatial_dimensions
        .iter()
        .map(|&d| dim(d, n + 2))
        .collect::<OpResult<_>>()?;
    let ks: Vec<usize> = dn
        .kernel_spatial_dimensions
        .iter()
        .map(|&d| dim(d, n + 2))
        .collect::<OpResult<_>>()?;
    let os: Vec<usize> = dn
        .output_spatial_dimensions
        .iter()
        .map(|&d| dim(d, n + 2))
        .collect::<OpResult<_>>()?;
    let (fg, bg) = (feature_groups as usize, batch_groups as usize);
    let (in_batch, in_features) = (ld[ib], ld[if_]);
    let (k_in, k_out) = (rd[ki], rd[ko]);
    let consistent = in_features == k_in * fg
        && k_out % fg == 0
        && k_out % bg == 0
        && in_batch % bg == 0
        && od[ob] == in_batch / bg
        && od[of] == k_out
        && (0..n).all(|i| window.dims[i].size >= 0 && window.dims[i].size as usize == rd[ks[i]]);
    if !consistent {
        return fail(format!(
            "lhs {}, rhs {} and result {out} do not agree with the dimension numbers and group counts",
            lhs.shape(),
            rhs.shape()
        ));
    }
    // With no output, or an operand with no elements, every sum is empty,
    // and the loops below would still run over the other (possibly huge)
    // dimensions: a window taken from an empty kernel f32[0,0,2^40], or 2^63
    // input features of a kernel with no window.
    if od.contains(&0) || ld.contains(&0) || rd.contains(&0) {
        let zeros = ArrayData::zeros(out.element_type(), out.element_count()?);
        return Ok(Value::array(make_array(out, zeros)?));
    }
    let mut taps = Vec::with_capacity(n);
    let mut sizes = Vec::with_capacity(n);
    for i in 0..n {
        let w = &window.dims[i];
        taps.push(window_taps(ld[is[i]], od[os[i]], w)?);
        sizes.push(w.size as usize);
    }
    let rs = strides(&rd);
    let mut kernel_positions = Vec::new();
    for_each_index::<()>(&sizes, |k| {
        let off = (0..n)
            .map(|i| {
                let kk = if window.dims[i].window_reversal {
                    sizes[i] - 1 - k[i]
                } else {
                    k[i]
                };
                kk * rs[ks[i]]
            })
            .sum();
        kernel_positions.push((k.to_vec(), off));
        Ok(())
    })
    .ok();
    let ls = strides(&ld);
    let geometry = Geometry {
        out_dims: od,
        out_batch: ob,
        out_feature: of,
        out_spatial: os,
        lhs_batch_stride: ls[ib],
        lhs_feature_stride: ls[if_],
        lhs_spatial_strides: is.iter().map(|&d| ls[d]).collect(),
        rhs_in_stride: rs[ki],
        rhs_out_stride: rs[ko],
        kernel_in_features: k_in,
        out_features_per_group: (k_out / fg).max(1),
        out_features_per_batch_group: (k_out / bg).max(1),
        batch_group_size: in_batch / bg,
        taps,
        window: sizes,
        kernel_positions,
    };
    let acc = accumulation_type(out.element_type());
    let l = convert_data(lhs.data(), acc);
    let r = convert_data(rhs.data(), acc);
    let sums = with_native_type!(acc, T => kernel::<T>(&l, &r, &geometry))?;
    Ok(Value::array(make_array(
        out,
        convert_data(&sums, out.element_type()),
    )?))
}
