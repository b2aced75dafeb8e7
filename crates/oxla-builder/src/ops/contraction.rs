//! Dot products and convolutions.

use std::panic::Location;

use oxla_hlo::Shape;
use oxla_hlo::ir::{ConvDimensionNumbers, DotDimensionNumbers, Opcode, Window, WindowDim};
use oxla_hlo::shape_inference::{self as infer, Padding, make_padding};

use crate::builder::Extra;
use crate::error::BuildError;
use crate::op::XlaOp;

impl<'b> XlaOp<'b> {
    /// The seed's `Dot`: vector.vector, matrix.vector, vector.matrix or
    /// matrix.matrix, contracting the last dimension of `self` with the first
    /// (vector) or one-before-last (matrix) dimension of `rhs`.
    #[track_caller]
    pub fn dot(self, rhs: XlaOp<'b>) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("dot", &[self, rhs], loc) else {
            return b.failed();
        };
        if let Err(e) = infer::dot(&s[0], &s[1]) {
            return b.record_error(BuildError::from_infer(e, loc));
        }
        let (lr, rr) = (rank(&s[0]), rank(&s[1]));
        let dnums = infer::dot_dimension_numbers(lr, rr);
        let mut extra = Extra::default();
        extra.attrs.dot_dnums = Some(dnums.clone());
        b.add(
            Opcode::Dot,
            infer::dot_general(&s[0], &s[1], &dnums, None),
            ids,
            extra,
            loc,
        )
    }

    /// Today's `dot` with batch and contracting dimensions: the result has the
    /// batch dimensions, then `self`'s free dimensions, then `rhs`'s.
    #[track_caller]
    pub fn dot_general(self, rhs: XlaOp<'b>, dimension_numbers: &DotDimensionNumbers) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("dot", &[self, rhs], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.dot_dnums = Some(dimension_numbers.clone());
        b.add(
            Opcode::Dot,
            infer::dot_general(&s[0], &s[1], dimension_numbers, None),
            ids,
            extra,
            loc,
        )
    }

    /// The seed's `Conv`: `self` is `[batch, z, spatial...]`, `rhs` is
    /// `[output-z, input-z, spatial...]`, padding SAME or VALID.
    #[track_caller]
    pub fn conv(self, rhs: XlaOp<'b>, window_strides: &[i64], padding: Padding) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((_, s)) = b.shapes("convolution", &[self, rhs], loc) else {
            return b.failed();
        };
        let (Some(l), Some(r)) = (s[0].as_array(), s[1].as_array()) else {
            return b.record_error(BuildError::new(
                "convolution",
                format!("operands must be arrays, got {} and {}", s[0], s[1]),
                loc,
            ));
        };
        if l.rank() < 2 || r.rank() != l.rank() || window_strides.len() != l.rank() - 2 {
            return b.record_error(BuildError::new(
                "convolution",
                format!(
                    "lhs {l} and rhs {r} must have rank n+2 and window_strides {window_strides:?} n entries, for n spatial dimensions"
                ),
                loc,
            ));
        }
        let pads = make_padding(&l.dims()[2..], &r.dims()[2..], window_strides, padding);
        let n = pads.len();
        self.conv_general_impl(
            rhs,
            window_strides,
            &pads,
            &vec![1; n],
            &vec![1; n],
            &ConvDimensionNumbers::seed_layout(n),
            1,
            1,
            loc,
        )
    }

    /// The seed's `ConvWithGeneralPadding`: explicit (low, high) padding per
    /// spatial dimension (negative removes elements), lhs dilation (holes
    /// between input elements) and rhs dilation (holes between kernel taps).
    #[track_caller]
    pub fn conv_with_general_padding(
        self,
        rhs: XlaOp<'b>,
        window_strides: &[i64],
        padding: &[(i64, i64)],
        lhs_dilation: &[i64],
        rhs_dilation: &[i64],
    ) -> XlaOp<'b> {
        let n = window_strides.len();
        let layout = ConvDimensionNumbers::seed_layout(n);
        self.conv_general_impl(
            rhs,
            window_strides,
            padding,
            lhs_dilation,
            rhs_dilation,
            &layout,
            1,
            1,
            Location::caller(),
        )
    }

    /// Today's general convolution: any dimension layout, feature and batch groups.
    #[track_caller]
    pub fn conv_general_dilated(
        self,
        rhs: XlaOp<'b>,
        window_strides: &[i64],
        padding: &[(i64, i64)],
        lhs_dilation: &[i64],
        rhs_dilation: &[i64],
        dimension_numbers: &ConvDimensionNumbers,
        feature_group_count: i64,
        batch_group_count: i64,
    ) -> XlaOp<'b> {
        self.conv_general_impl(
            rhs,
            window_strides,
            padding,
            lhs_dilation,
            rhs_dilation,
            dimension_numbers,
            feature_group_count,
            batch_group_count,
            Location::caller(),
        )
    }

    fn conv_general_impl(
        self,
        rhs: XlaOp<'b>,
        strides: &[i64],
        padding: &[(i64, i64)],
        lhs_dilation: &[i64],
        rhs_dilation: &[i64],
        dnums: &ConvDimensionNumbers,
        feature_group_count: i64,
        batch_group_count: i64,
        loc: &'static Location<'static>,
    ) -> XlaOp<'b> {
        let b = self.builder();
        let op = "convolution";
        let Some((ids, s)) = b.shapes(op, &[self, rhs], loc) else {
            return b.failed();
        };
        let n = dnums.kernel_spatial_dimensions.len();
        if strides.len() != n
            || padding.len() != n
            || lhs_dilation.len() != n
            || rhs_dilation.len() != n
        {
            return b.record_error(BuildError::new(
                op,
                format!(
                    "window_strides {strides:?}, padding {padding:?}, lhs_dilation {lhs_dilation:?} and rhs_dilation {rhs_dilation:?} must each have one entry per spatial dimension ({n})"
                ),
                loc,
            ));
        }
        let Some(r) = s[1].as_array().filter(|r| r.rank() == n + 2) else {
            return b.record_error(BuildError::new(
                op,
                format!("rhs must be an array of rank {}, got {}", n + 2, s[1]),
                loc,
            ));
        };
        let window = Window {
            dims: (0..n)
                .map(|i| {
                    let k = dnums.kernel_spatial_dimensions[i];
                    let size = usize::try_from(k)
                        .ok()
                        .filter(|&k| k < r.rank())
                        .map_or(0, |k| r.dim(k));
                    WindowDim {
                        size,
                        stride: strides[i],
                        pad_low: padding[i].0,
                        pad_high: padding[i].1,
                        window_dilation: rhs_dilation[i],
                        base_dilation: lhs_dilation[i],
                        window_reversal: false,
                    }
                })
                .collect(),
        };
        let mut extra = Extra::default();
        extra.attrs.window = Some(window.clone());
        extra.attrs.conv_dnums = Some(dnums.clone());
        extra.attrs.feature_group_count = (feature_group_count != 1).then_some(feature_group_count);
        extra.attrs.batch_group_count = (batch_group_count != 1).then_some(batch_group_count);
        let shape = infer::convolution(
            &s[0],
            &s[1],
            &window,
            dnums,
            feature_group_count,
            batch_group_count,
            None,
        );
        b.add(Opcode::Convolution, shape, ids, extra, loc)
    }
}

fn rank(s: &Shape) -> usize {
    s.as_array().map_or(0, |a| a.rank())
}

impl<'b> XlaOp<'b> {
    /// A fast Fourier transform over the trailing `fft_length.len()` dimensions.
    #[track_caller]
    pub fn fft(self, fft_type: oxla_hlo::ir::FftType, fft_length: &[i64]) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("fft", &[self], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.fft_type = Some(fft_type);
        extra.attrs.fft_length = Some(fft_length.to_vec());
        b.add(
            Opcode::Fft,
            infer::fft(&s[0], fft_type, fft_length),
            ids,
            extra,
            loc,
        )
    }

    /// Solves `op(a) x = b` (left side) or `x op(a) = b` for a triangular `a` (self).
    #[track_caller]
    pub fn triangular_solve(
        self,
        b_matrix: XlaOp<'b>,
        options: oxla_hlo::ir::TriangularSolveOptions,
    ) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("triangular-solve", &[self, b_matrix], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.triangular_solve = Some(options);
        b.add(
            Opcode::TriangularSolve,
            infer::triangular_solve(&s[0], &s[1], &options),
            ids,
            extra,
            loc,
        )
    }

    /// The Cholesky factor of a (batch of) positive-definite matrices.
    #[track_caller]
    pub fn cholesky(self, lower: bool) -> XlaOp<'b> {
        let loc = Location::caller();
        let b = self.builder();
        let Some((ids, s)) = b.shapes("cholesky", &[self], loc) else {
            return b.failed();
        };
        let mut extra = Extra::default();
        extra.attrs.cholesky_lower = Some(lower);
        b.add(Opcode::Cholesky, infer::cholesky(&s[0]), ids, extra, loc)
    }
}
