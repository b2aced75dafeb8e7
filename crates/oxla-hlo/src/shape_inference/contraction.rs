//! Contractions and linear algebra: dot (the seed's rank table and the general
//! form), convolution and the window arithmetic it shares with reduce-window,
//! ragged dot, fft, triangular-solve and cholesky.

use super::{InferResult, check_dims_in_range, err, expect_array, make_array};
use crate::element_type::PrimitiveType;
use crate::ir::{
    ConvDimensionNumbers, DotDimensionNumbers, FftType, RaggedDotDimensionNumbers,
    TriangularSolveOptions, Window, WindowDim,
};
use crate::shape::{ArrayShape, Shape};

/// The seed's padding shorthand for windows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Padding {
    /// Pad so that the output has `ceil(input / stride)` elements per dimension.
    Same,
    /// No padding.
    Valid,
}

/// Low and high padding per dimension for `Same` or `Valid` (XLA's `MakePadding`):
/// SAME pads `max((out - 1) * stride + window - input, 0)` in total, the extra
/// element (if odd) going to the high side.
pub fn make_padding(
    input: &[i64],
    window: &[i64],
    strides: &[i64],
    padding: Padding,
) -> Vec<(i64, i64)> {
    match padding {
        Padding::Valid => vec![(0, 0); input.len()],
        Padding::Same => input
            .iter()
            .zip(window)
            .zip(strides)
            .map(|((&i, &w), &s)| {
                let s = s.max(1);
                // XLA's formula in i128, so huge strides or windows cannot overflow.
                let (i, w, s) = (i as i128, w as i128, s as i128);
                let out = (i + s - 1) / s;
                let total = ((out - 1) * s + w - i).clamp(0, i64::MAX as i128) as i64;
                (total / 2, total - total / 2)
            })
            .collect(),
    }
}

/// Number of window positions along one dimension: the base (after dilation
/// and padding) minus the dilated window, divided by the stride, plus one; 0
/// when the window does not fit.
pub fn window_output_size(op: &str, base: i64, w: &WindowDim) -> InferResult<i64> {
    if w.size < 0 || w.stride < 1 || w.window_dilation < 1 || w.base_dilation < 1 {
        return err(
            op,
            format!(
                "window size must be non-negative and stride and dilations positive, got size={} stride={} lhs_dilate={} rhs_dilate={}",
                w.size, w.stride, w.base_dilation, w.window_dilation
            ),
        );
    }
    let overflow = || {
        err(
            op,
            format!("window arithmetic overflows for a base of {base} and window {w:?}"),
        )
    };
    // (base - 1) * base_dilation + 1, then the padding on both sides.
    let dilated_base = if base == 0 {
        Some(0)
    } else {
        (base - 1)
            .checked_mul(w.base_dilation)
            .and_then(|x| x.checked_add(1))
    };
    let Some(padded) = dilated_base
        .and_then(|b| b.checked_add(w.pad_low))
        .and_then(|b| b.checked_add(w.pad_high))
    else {
        return overflow();
    };
    let dilated_window = if w.size == 0 {
        Some(0)
    } else {
        (w.size - 1)
            .checked_mul(w.window_dilation)
            .and_then(|x| x.checked_add(1))
    };
    let Some(dilated_window) = dilated_window else {
        return overflow();
    };
    if padded < 0 {
        return err(
            op,
            format!(
                "padding {}_{} leaves a negative base size",
                w.pad_low, w.pad_high
            ),
        );
    }
    if padded < dilated_window {
        return Ok(0);
    }
    Ok((padded - dilated_window) / w.stride + 1)
}

/// Output dimensions of a window sliding over `base`.
pub fn window_output_dims(op: &str, base: &[i64], window: &Window) -> InferResult<Vec<i64>> {
    if window.dims.len() != base.len() {
        return err(
            op,
            format!(
                "window has {} dimensions but the base area has {}",
                window.dims.len(),
                base.len()
            ),
        );
    }
    base.iter()
        .zip(&window.dims)
        .map(|(&b, w)| window_output_size(op, b, w))
        .collect()
}

/// Shape of the seed's `Dot(lhs, rhs)`: vector.vector -> scalar, matrix.vector
/// -> vector, vector.matrix -> vector, matrix.matrix -> matrix; the last
/// dimension of lhs is contracted with the first of a vector rhs or the
/// one-before-last of a matrix rhs.
pub fn dot(lhs: &Shape, rhs: &Shape) -> InferResult {
    let op = "Dot";
    let l = expect_array(op, "lhs", lhs)?;
    let r = expect_array(op, "rhs", rhs)?;
    if l.element_type() != r.element_type() {
        return err(
            op,
            format!("operands must have the same element type, got {l} and {r}"),
        );
    }
    if !(1..=2).contains(&l.rank()) || !(1..=2).contains(&r.rank()) {
        return err(
            op,
            format!("supports operands of rank 1 or 2 only, got {l} and {r}"),
        );
    }
    let lc = l.rank() - 1;
    let rc = if r.rank() == 1 { 0 } else { r.rank() - 2 };
    if l.dim(lc) != r.dim(rc) {
        return err(
            op,
            format!(
                "contracted dimensions differ: dimension {lc} of lhs {l} has size {} but dimension {rc} of rhs {r} has size {}",
                l.dim(lc),
                r.dim(rc)
            ),
        );
    }
    let mut dims = l.dims()[..lc].to_vec();
    if r.rank() == 2 {
        dims.push(r.dim(1));
    }
    make_array(op, l.element_type(), dims)
}

/// The seed `Dot` as dimension numbers.
pub fn dot_dimension_numbers(lhs_rank: usize, rhs_rank: usize) -> DotDimensionNumbers {
    DotDimensionNumbers {
        lhs_contracting_dimensions: vec![lhs_rank as i64 - 1],
        rhs_contracting_dimensions: vec![if rhs_rank == 1 {
            0
        } else {
            rhs_rank as i64 - 2
        }],
        ..Default::default()
    }
}

/// Shape of `dot` with dimension numbers: batch dimensions first, then lhs's
/// free dimensions, then rhs's. `result_type` overrides the element type
/// (XLA lets a dot accumulate into a wider type, e.g. bf16 x bf16 -> f32).
pub fn dot_general(
    lhs: &Shape,
    rhs: &Shape,
    d: &DotDimensionNumbers,
    result_type: Option<PrimitiveType>,
) -> InferResult {
    let op = "dot";
    let l = expect_array(op, "lhs", lhs)?;
    let r = expect_array(op, "rhs", rhs)?;
    if l.element_type() != r.element_type() {
        return err(
            op,
            format!("operands must have the same element type, got {l} and {r}"),
        );
    }
    if l.element_type().is_pred() {
        return err(op, format!("operands must be numeric, got {l}"));
    }
    let mut lhs_used: Vec<i64> = d.lhs_batch_dimensions.clone();
    lhs_used.extend(&d.lhs_contracting_dimensions);
    let mut rhs_used: Vec<i64> = d.rhs_batch_dimensions.clone();
    rhs_used.extend(&d.rhs_contracting_dimensions);
    check_dims_in_range(
        op,
        "lhs batch and contracting dimensions",
        &lhs_used,
        l.rank(),
    )?;
    check_dims_in_range(
        op,
        "rhs batch and contracting dimensions",
        &rhs_used,
        r.rank(),
    )?;
    if d.lhs_batch_dimensions.len() != d.rhs_batch_dimensions.len() {
        return err(
            op,
            "lhs and rhs must have the same number of batch dimensions",
        );
    }
    if d.lhs_contracting_dimensions.len() != d.rhs_contracting_dimensions.len() {
        return err(
            op,
            "lhs and rhs must have the same number of contracting dimensions",
        );
    }
    for (kind, ls, rs) in [
        ("batch", &d.lhs_batch_dimensions, &d.rhs_batch_dimensions),
        (
            "contracting",
            &d.lhs_contracting_dimensions,
            &d.rhs_contracting_dimensions,
        ),
    ] {
        for (&a, &b) in ls.iter().zip(rs) {
            if l.dim(a as usize) != r.dim(b as usize) {
                return err(
                    op,
                    format!(
                        "{kind} dimension {a} of lhs {l} (size {}) and {kind} dimension {b} of rhs {r} (size {}) differ",
                        l.dim(a as usize),
                        r.dim(b as usize)
                    ),
                );
            }
        }
    }
    let mut dims: Vec<i64> = d
        .lhs_batch_dimensions
        .iter()
        .map(|&b| l.dim(b as usize))
        .collect();
    dims.extend(
        (0..l.rank() as i64)
            .filter(|i| !lhs_used.contains(i))
            .map(|i| l.dim(i as usize)),
    );
    dims.extend(
        (0..r.rank() as i64)
            .filter(|i| !rhs_used.contains(i))
            .map(|i| r.dim(i as usize)),
    );
    make_array(op, result_type.unwrap_or(l.element_type()), dims)
}

/// Shape of `ragged-dot`: `lhs` has a ragged (non-contracting) dimension split
/// into groups by `group_sizes`; `rhs` has one matrix per group along its group
/// dimension. The result has lhs's dimensions without the contracting ones,
/// followed by rhs's free dimensions.
pub fn ragged_dot(
    lhs: &Shape,
    rhs: &Shape,
    group_sizes: &Shape,
    d: &DotDimensionNumbers,
    rd: &RaggedDotDimensionNumbers,
    result_type: Option<PrimitiveType>,
) -> InferResult {
    let op = "ragged-dot";
    let l = expect_array(op, "lhs", lhs)?;
    let r = expect_array(op, "rhs", rhs)?;
    let g = expect_array(op, "group sizes", group_sizes)?;
    if l.element_type() != r.element_type() {
        return err(
            op,
            format!("operands must have the same element type, got {l} and {r}"),
        );
    }
    if !g.element_type().is_integral() || g.rank() != 1 {
        return err(
            op,
            format!("group sizes must be a rank-1 integer array, got {g}"),
        );
    }
    if rd.lhs_ragged_dimensions.len() != 1 || rd.rhs_group_dimensions.len() != 1 {
        return err(
            op,
            "supports exactly one lhs ragged dimension and one rhs group dimension",
        );
    }
    let group_dim = rd.rhs_group_dimensions[0];
    check_dims_in_range(op, "rhs group dimension", &[group_dim], r.rank())?;
    if r.dim(group_dim as usize) != g.dim(0) {
        return err(
            op,
            format!("rhs group dimension {group_dim} of {r} must have one entry per group ({g})"),
        );
    }
    let ragged = rd.lhs_ragged_dimensions[0];
    check_dims_in_range(op, "lhs ragged dimension", &[ragged], l.rank())?;
    if d.lhs_contracting_dimensions.contains(&ragged) || d.lhs_batch_dimensions.contains(&ragged) {
        return err(
            op,
            "only a non-contracting, non-batch lhs ragged dimension is supported",
        );
    }
    // The rhs without its group dimension behaves as the rhs of an ordinary dot.
    let rhs_dims: Vec<i64> = (0..r.rank())
        .filter(|&i| i as i64 != group_dim)
        .map(|i| r.dim(i))
        .collect();
    let fix = |dims: &[i64]| -> Vec<i64> {
        dims.iter()
            .map(|&x| if x > group_dim { x - 1 } else { x })
            .collect()
    };
    let inner = DotDimensionNumbers {
        lhs_batch_dimensions: d.lhs_batch_dimensions.clone(),
        rhs_batch_dimensions: fix(&d.rhs_batch_dimensions),
        lhs_contracting_dimensions: d.lhs_contracting_dimensions.clone(),
        rhs_contracting_dimensions: fix(&d.rhs_contracting_dimensions),
    };
    if d.rhs_batch_dimensions.contains(&group_dim)
        || d.rhs_contracting_dimensions.contains(&group_dim)
    {
        return err(
            op,
            "the rhs group dimension cannot also be a batch or contracting dimension",
        );
    }
    let rhs_plain = make_array(op, r.element_type(), rhs_dims)?;
    dot_general(lhs, &rhs_plain, &inner, result_type)
}

/// Shape of `convolution` with general dimension numbers, window, feature and batch groups.
pub fn convolution(
    lhs: &Shape,
    rhs: &Shape,
    window: &Window,
    d: &ConvDimensionNumbers,
    feature_group_count: i64,
    batch_group_count: i64,
    result_type: Option<PrimitiveType>,
) -> InferResult {
    let op = "convolution";
    let l = expect_array(op, "lhs", lhs)?;
    let r = expect_array(op, "rhs", rhs)?;
    if l.element_type() != r.element_type() {
        return err(
            op,
            format!("operands must have the same element type, got {l} and {r}"),
        );
    }
    let n = d.input_spatial_dimensions.len();
    // HLO text names spatial dimensions by one digit in `dim_labels`, so a
    // convolution with more could not be written down (nor read back).
    if n > 10 {
        return err(
            op,
            format!(
                "at most 10 spatial dimensions are supported (dim_labels names them 0-9), got {n}"
            ),
        );
    }
    if l.rank() != n + 2 || r.rank() != n + 2 {
        return err(
            op,
            format!(
                "lhs {l} and rhs {r} must both have rank {} ({n} spatial dimensions + 2)",
                n + 2
            ),
        );
    }
    if d.kernel_spatial_dimensions.len() != n || d.output_spatial_dimensions.len() != n {
        return err(
            op,
            "input, kernel and output must have the same number of spatial dimensions",
        );
    }
    let mut input_dims = vec![d.input_batch_dimension, d.input_feature_dimension];
    input_dims.extend(&d.input_spatial_dimensions);
    let mut kernel_dims = vec![
        d.kernel_input_feature_dimension,
        d.kernel_output_feature_dimension,
    ];
    kernel_dims.extend(&d.kernel_spatial_dimensions);
    let mut output_dims = vec![d.output_batch_dimension, d.output_feature_dimension];
    output_dims.extend(&d.output_spatial_dimensions);
    check_dims_in_range(op, "input dimension numbers", &input_dims, n + 2)?;
    check_dims_in_range(op, "kernel dimension numbers", &kernel_dims, n + 2)?;
    check_dims_in_range(op, "output dimension numbers", &output_dims, n + 2)?;
    if feature_group_count < 1 || batch_group_count < 1 {
        return err(
            op,
            "feature_group_count and batch_group_count must be positive",
        );
    }
    if feature_group_count > 1 && batch_group_count > 1 {
        return err(
            op,
            "feature_group_count and batch_group_count cannot both exceed 1",
        );
    }
    let in_batch = l.dim(d.input_batch_dimension as usize);
    let in_features = l.dim(d.input_feature_dimension as usize);
    let k_in = r.dim(d.kernel_input_feature_dimension as usize);
    let k_out = r.dim(d.kernel_output_feature_dimension as usize);
    if in_features % feature_group_count != 0 || in_features / feature_group_count != k_in {
        return err(
            op,
            format!(
                "input features ({in_features}, dimension {} of {l}) must equal kernel input features ({k_in}, dimension {} of {r}) times feature_group_count ({feature_group_count})",
                d.input_feature_dimension, d.kernel_input_feature_dimension
            ),
        );
    }
    if k_out % feature_group_count != 0 {
        return err(
            op,
            format!(
                "kernel output features ({k_out}) must be divisible by feature_group_count ({feature_group_count})"
            ),
        );
    }
    if in_batch % batch_group_count != 0 || k_out % batch_group_count != 0 {
        return err(
            op,
            format!(
                "input batch ({in_batch}) and kernel output features ({k_out}) must be divisible by batch_group_count ({batch_group_count})"
            ),
        );
    }
    if window.dims.len() != n {
        return err(
            op,
            format!(
                "window has {} dimensions but there are {n} spatial dimensions",
                window.dims.len()
            ),
        );
    }
    let mut out = vec![0i64; n + 2];
    out[d.output_batch_dimension as usize] = in_batch / batch_group_count;
    out[d.output_feature_dimension as usize] = k_out;
    for i in 0..n {
        let w = &window.dims[i];
        let k = r.dim(d.kernel_spatial_dimensions[i] as usize);
        if w.size != k {
            return err(
                op,
                format!(
                    "window size {} of spatial dimension {i} must equal the kernel's size {k} ({r})",
                    w.size
                ),
            );
        }
        out[d.output_spatial_dimensions[i] as usize] =
            window_output_size(op, l.dim(d.input_spatial_dimensions[i] as usize), w)?;
    }
    make_array(op, result_type.unwrap_or(l.element_type()), out)
}

/// Shape of `fft`.
pub fn fft(operand: &Shape, ty: FftType, lengths: &[i64]) -> InferResult {
    let op = "fft";
    let a = expect_array(op, "operand", operand)?;
    if lengths.is_empty() || lengths.len() > 3 || lengths.len() > a.rank() {
        return err(
            op,
            format!("fft_length {lengths:?} must give 1 to 3 trailing dimensions of {a}"),
        );
    }
    let k = a.rank() - lengths.len();
    let mut dims = a.dims().to_vec();
    let et = a.element_type();
    let out_ty = match ty {
        FftType::Fft | FftType::Ifft => {
            if !et.is_complex() {
                return err(op, format!("{ty} needs a complex operand, got {a}"));
            }
            if a.dims()[k..] != *lengths {
                return err(
                    op,
                    format!("fft_length {lengths:?} must equal the trailing dimensions of {a}"),
                );
            }
            et
        }
        FftType::Rfft => {
            let Some(c) = et.complex_of() else {
                return err(op, format!("RFFT needs an f32 or f64 operand, got {a}"));
            };
            if a.dims()[k..] != *lengths {
                return err(
                    op,
                    format!("fft_length {lengths:?} must equal the trailing dimensions of {a}"),
                );
            }
            let last = dims.len() - 1;
            dims[last] = lengths[lengths.len() - 1] / 2 + 1;
            c
        }
        FftType::Irfft => {
            if !et.is_complex() {
                return err(op, format!("IRFFT needs a complex operand, got {a}"));
            }
            let n = lengths.len();
            let last_ok = a.dims()[a.rank() - 1] == lengths[n - 1] / 2 + 1;
            if a.dims()[k..a.rank() - 1] != lengths[..n - 1] || !last_ok {
                return err(
                    op,
                    format!("fft_length {lengths:?} does not match the IRFFT operand {a}"),
                );
            }
            let last = dims.len() - 1;
            dims[last] = lengths[n - 1];
            et.component_type()
        }
    };
    make_array(op, out_ty, dims)
}

fn square_minor(op: &str, what: &str, a: &ArrayShape) -> InferResult<i64> {
    let r = a.rank();
    if r < 2 || a.dim(r - 1) != a.dim(r - 2) {
        return err(
            op,
            format!("{what} must be a (batch of) square matrices, got {a}"),
        );
    }
    if !a.element_type().is_floating() {
        return err(op, format!("{what} must be float or complex, got {a}"));
    }
    Ok(a.dim(r - 1))
}

/// Shape of `triangular-solve`: `a` is `[..., m, m]`, `b` is `[..., m, n]`
/// (left side) or `[..., n, m]` (right side); the result has `b`'s shape.
pub fn triangular_solve(a: &Shape, b: &Shape, o: &TriangularSolveOptions) -> InferResult {
    let op = "triangular-solve";
    let x = expect_array(op, "a", a)?;
    let y = expect_array(op, "b", b)?;
    let m = square_minor(op, "a", x)?;
    if x.element_type() != y.element_type() || x.rank() != y.rank() {
        return err(
            op,
            format!("a {x} and b {y} must have the same element type and rank"),
        );
    }
    let r = y.rank();
    if x.dims()[..r - 2] != y.dims()[..r - 2] {
        return err(
            op,
            format!("a {x} and b {y} must have the same batch dimensions"),
        );
    }
    let solved = if o.left_side {
        y.dim(r - 2)
    } else {
        y.dim(r - 1)
    };
    if solved != m {
        return err(
            op,
            format!(
                "b {y} does not match a {x} on the {} side",
                if o.left_side { "left" } else { "right" }
            ),
        );
    }
    Ok(b.clone())
}

/// Shape of `cholesky`.
pub fn cholesky(a: &Shape) -> InferResult {
    let x = expect_array("cholesky", "operand", a)?;
    square_minor("cholesky", "operand", x)?;
    Ok(a.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use PrimitiveType::*;

    fn s(dims: &[i64]) -> Shape {
        Shape::array(F32, dims).unwrap()
    }

    #[test]
    fn seed_dot_rank_table() {
        assert_eq!(dot(&s(&[3]), &s(&[3])).unwrap().to_string(), "f32[]");
        assert_eq!(dot(&s(&[2, 3]), &s(&[3])).unwrap().to_string(), "f32[2]");
        assert_eq!(
            dot(&s(&[2, 3]), &s(&[3, 4])).unwrap().to_string(),
            "f32[2,4]"
        );
        assert_eq!(dot(&s(&[3]), &s(&[3, 4])).unwrap().to_string(), "f32[4]");
        assert!(
            dot(&s(&[2, 3]), &s(&[4]))
                .unwrap_err()
                .to_string()
                .contains("contracted dimensions differ")
        );
        assert!(dot(&s(&[2, 2, 3]), &s(&[3])).is_err());
        assert!(dot(&s(&[3]), &Shape::array(S32, [3]).unwrap()).is_err());
    }

    #[test]
    fn dot_general_batch() {
        let d = DotDimensionNumbers {
            lhs_batch_dimensions: vec![0],
            rhs_batch_dimensions: vec![0],
            lhs_contracting_dimensions: vec![2],
            rhs_contracting_dimensions: vec![1],
        };
        assert_eq!(
            dot_general(&s(&[5, 2, 3]), &s(&[5, 3, 4]), &d, None)
                .unwrap()
                .to_string(),
            "f32[5,2,4]"
        );
        assert!(dot_general(&s(&[5, 2, 3]), &s(&[6, 3, 4]), &d, None).is_err());
    }

    #[test]
    fn padding_shorthand() {
        assert_eq!(
            make_padding(&[4, 6], &[2, 3], &[2, 3], Padding::Valid),
            vec![(0, 0), (0, 0)]
        );
        assert_eq!(make_padding(&[5], &[3], &[1], Padding::Same), vec![(1, 1)]);
        assert_eq!(make_padding(&[5], &[4], &[1], Padding::Same), vec![(1, 2)]);
        assert_eq!(make_padding(&[5], &[3], &[2], Padding::Same), vec![(1, 1)]);
        assert_eq!(make_padding(&[6], &[1], &[2], Padding::Same), vec![(0, 0)]);
    }

    #[test]
    fn convolution_output_sizes() {
        let d = ConvDimensionNumbers::seed_layout(2);
        let mut w = Window {
            dims: vec![WindowDim::new(3), WindowDim::new(3)],
        };
        let out = convolution(&s(&[1, 2, 5, 5]), &s(&[4, 2, 3, 3]), &w, &d, 1, 1, None).unwrap();
        assert_eq!(out.to_string(), "f32[1,4,3,3]");
        w.dims[0].stride = 2;
        w.dims[0].pad_low = 1;
        w.dims[0].pad_high = 1;
        w.dims[1].base_dilation = 2;
        w.dims[1].window_dilation = 2;
        // dim 0: padded 7, window 3, stride 2 -> 3; dim 1: base 9, window 5 -> 5.
        let out = convolution(&s(&[1, 2, 5, 5]), &s(&[4, 2, 3, 3]), &w, &d, 1, 1, None).unwrap();
        assert_eq!(out.to_string(), "f32[1,4,3,5]");
        let e = convolution(&s(&[1, 3, 5, 5]), &s(&[4, 2, 3, 3]), &w, &d, 1, 1, None).unwrap_err();
        assert!(e.to_string().contains("input features"), "{e}");
        // Negative padding shrinks the base.
        let mut v = Window {
            dims: vec![WindowDim::new(1), WindowDim::new(1)],
        };
        v.dims[0].pad_low = -2;
        let out = convolution(&s(&[1, 2, 5, 5]), &s(&[4, 2, 1, 1]), &v, &d, 1, 1, None).unwrap();
        assert_eq!(out.to_string(), "f32[1,4,3,5]");
    }

    /// Found by the `builder_calls` fuzz target: a convolution with 14
    /// spatial dimensions built and printed dim_labels with '?' for the
    /// ones past 9, which do not parse.
    #[test]
    fn at_most_10_spatial_dimensions() {
        let ones = |n: usize| s(&vec![1; n + 2]);
        let window = |n: usize| Window {
            dims: vec![WindowDim::new(1); n],
        };
        let ten = ConvDimensionNumbers::seed_layout(10);
        assert!(convolution(&ones(10), &ones(10), &window(10), &ten, 1, 1, None).is_ok());
        let eleven = ConvDimensionNumbers::seed_layout(11);
        let e = convolution(&ones(11), &ones(11), &window(11), &eleven, 1, 1, None).unwrap_err();
        assert_eq!(
            e.to_string(),
            "convolution: at most 10 spatial dimensions are supported (dim_labels names them 0-9), got 11"
        );
    }
}
