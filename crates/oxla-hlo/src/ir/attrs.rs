//! Instruction attributes: everything about an instruction beyond its opcode,
//! shape and operands. Like XLA's `HloInstructionProto`, one struct holds every
//! attribute as an optional field; the opcode decides which are meaningful,
//! and the verifier checks that those the opcode needs are present.

use std::fmt;

use crate::ir::ComputationId;
use crate::literal::Literal;
use crate::shape::Shape;

/// One dimension of a `slice`: `[start:limit:stride]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SliceDim {
    pub start: i64,
    pub limit: i64,
    pub stride: i64,
}

/// One dimension of a `pad`: `low_high_interior`. Edge padding may be negative.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub struct PadDim {
    pub low: i64,
    pub high: i64,
    pub interior: i64,
}

/// One dimension of a window (reduce-window, select-and-scatter, convolution).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct WindowDim {
    pub size: i64,
    pub stride: i64,
    pub pad_low: i64,
    pub pad_high: i64,
    /// Dilation of the window itself (`rhs_dilate`): holes between window taps.
    pub window_dilation: i64,
    /// Dilation of the base area (`lhs_dilate`): holes between input elements.
    pub base_dilation: i64,
    /// Whether the window is applied reversed (`rhs_reversal`).
    pub window_reversal: bool,
}

impl WindowDim {
    /// A window dimension of `size` with stride 1, no padding, no dilation.
    pub fn new(size: i64) -> WindowDim {
        WindowDim {
            size,
            stride: 1,
            pad_low: 0,
            pad_high: 0,
            window_dilation: 1,
            base_dilation: 1,
            window_reversal: false,
        }
    }
}

/// A window: one [`WindowDim`] per dimension it slides over.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct Window {
    pub dims: Vec<WindowDim>,
}

/// Which dimensions of a convolution's operands and result play which role
/// (HLO text: `dim_labels=b01f_01io->b01f`).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ConvDimensionNumbers {
    pub input_batch_dimension: i64,
    pub input_feature_dimension: i64,
    pub input_spatial_dimensions: Vec<i64>,
    pub kernel_input_feature_dimension: i64,
    pub kernel_output_feature_dimension: i64,
    pub kernel_spatial_dimensions: Vec<i64>,
    pub output_batch_dimension: i64,
    pub output_feature_dimension: i64,
    pub output_spatial_dimensions: Vec<i64>,
}

impl ConvDimensionNumbers {
    /// The seed's layout for `n` spatial dimensions: input `[batch, z, spatial...]`,
    /// kernel `[output-z, input-z, spatial...]`, output `[batch, z, spatial...]`
    /// (`bf01_oi01->bf01` in HLO text for n = 2).
    pub fn seed_layout(n: usize) -> ConvDimensionNumbers {
        let spatial: Vec<i64> = (2..2 + n as i64).collect();
        ConvDimensionNumbers {
            input_batch_dimension: 0,
            input_feature_dimension: 1,
            input_spatial_dimensions: spatial.clone(),
            kernel_input_feature_dimension: 1,
            kernel_output_feature_dimension: 0,
            kernel_spatial_dimensions: spatial.clone(),
            output_batch_dimension: 0,
            output_feature_dimension: 1,
            output_spatial_dimensions: spatial,
        }
    }
}

/// Dimension numbers of a general dot: batch and contracting dimensions of each side.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct DotDimensionNumbers {
    pub lhs_batch_dimensions: Vec<i64>,
    pub rhs_batch_dimensions: Vec<i64>,
    pub lhs_contracting_dimensions: Vec<i64>,
    pub rhs_contracting_dimensions: Vec<i64>,
}

/// Extra dimension numbers of a ragged dot.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct RaggedDotDimensionNumbers {
    pub lhs_ragged_dimensions: Vec<i64>,
    pub rhs_group_dimensions: Vec<i64>,
}

/// Dimension numbers of a gather (see XLA's operation semantics).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct GatherDimensionNumbers {
    pub offset_dims: Vec<i64>,
    pub collapsed_slice_dims: Vec<i64>,
    pub start_index_map: Vec<i64>,
    pub index_vector_dim: i64,
    pub operand_batching_dims: Vec<i64>,
    pub start_indices_batching_dims: Vec<i64>,
}

/// Dimension numbers of a scatter.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ScatterDimensionNumbers {
    pub update_window_dims: Vec<i64>,
    pub inserted_window_dims: Vec<i64>,
    pub scatter_dims_to_operand_dims: Vec<i64>,
    pub index_vector_dim: i64,
    pub input_batching_dims: Vec<i64>,
    pub scatter_indices_batching_dims: Vec<i64>,
}

macro_rules! text_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $text:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum $name {
            $($variant,)*
        }

        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$variant,)*];

            /// The spelling in HLO text.
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)*
                }
            }

            /// Reads the HLO text spelling (case-insensitively, as XLA does for most enums).
            pub fn from_name(s: &str) -> Option<$name> {
                $name::ALL.iter().copied().find(|v| v.name().eq_ignore_ascii_case(s))
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

text_enum!(
    /// Direction of a `compare`.
    ComparisonDirection { Eq = "EQ", Ne = "NE", Ge = "GE", Gt = "GT", Le = "LE", Lt = "LT" }
);

text_enum!(
    /// How a `compare` orders values: IEEE for floats (`FLOAT`), a total order
    /// over all bit patterns (`TOTALORDER`), or as integers.
    ComparisonType { Float = "FLOAT", TotalOrder = "TOTALORDER", Signed = "SIGNED", Unsigned = "UNSIGNED" }
);

text_enum!(
    /// Distribution of an `rng` instruction.
    RngDistribution { Uniform = "rng_uniform", Normal = "rng_normal" }
);

text_enum!(
    /// Algorithm of an `rng-bit-generator`.
    RngAlgorithm { Default = "rng_default", ThreeFry = "rng_three_fry", Philox = "rng_philox" }
);

text_enum!(
    /// Kind of `fft`.
    FftType { Fft = "FFT", Ifft = "IFFT", Rfft = "RFFT", Irfft = "IRFFT" }
);

text_enum!(
    /// How `triangular-solve` uses its matrix.
    TriangularTranspose { NoTranspose = "NO_TRANSPOSE", Transpose = "TRANSPOSE", Adjoint = "ADJOINT" }
);

/// Options of a `triangular-solve`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TriangularSolveOptions {
    pub left_side: bool,
    pub lower: bool,
    pub unit_diagonal: bool,
    pub transpose_a: TriangularTranspose,
}

/// Every attribute an instruction can carry. Fields an opcode does not use stay `None`.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Attrs {
    /// `parameter(N)`.
    pub parameter_number: Option<usize>,
    /// `constant(...)`.
    pub literal: Option<Literal>,
    /// `dimensions={...}`: broadcast, reduce, transpose, reverse, concatenate,
    /// sort, map, all-gather, reduce-scatter, all-to-all, get-dimension-size.
    pub dimensions: Option<Vec<i64>>,
    /// `slice={[a:b:s], ...}`.
    pub slice: Option<Vec<SliceDim>>,
    /// `padding=l_h_i x ...` of a `pad`.
    pub padding: Option<Vec<PadDim>>,
    /// `window={...}`.
    pub window: Option<Window>,
    /// `dim_labels=...` of a convolution.
    pub conv_dnums: Option<ConvDimensionNumbers>,
    /// `feature_group_count=N` (1 when absent).
    pub feature_group_count: Option<i64>,
    /// `batch_group_count=N` (1 when absent).
    pub batch_group_count: Option<i64>,
    /// `lhs_batch_dims`, `rhs_batch_dims`, `lhs_contracting_dims`, `rhs_contracting_dims`.
    pub dot_dnums: Option<DotDimensionNumbers>,
    /// `lhs_ragged_dims`, `rhs_group_dims` of a ragged dot.
    pub ragged_dot_dnums: Option<RaggedDotDimensionNumbers>,
    /// `direction=` of a compare.
    pub comparison_direction: Option<ComparisonDirection>,
    /// `type=` of a compare (defaults from the element type when absent).
    pub comparison_type: Option<ComparisonType>,
    /// `index=N` of a get-tuple-element.
    pub tuple_index: Option<usize>,
    /// `iota_dimension=N`.
    pub iota_dimension: Option<i64>,
    /// `dynamic_slice_sizes={...}`.
    pub dynamic_slice_sizes: Option<Vec<i64>>,
    /// `distribution=` of an rng.
    pub rng_distribution: Option<RngDistribution>,
    /// `algorithm=` of an rng-bit-generator.
    pub rng_algorithm: Option<RngAlgorithm>,
    /// `custom_call_target="..."`.
    pub custom_call_target: Option<String>,
    /// `backend_config=...`, kept as written.
    pub backend_config: Option<String>,
    /// Gather dimension numbers (`offset_dims`, `collapsed_slice_dims`, ...).
    pub gather_dnums: Option<GatherDimensionNumbers>,
    /// `slice_sizes={...}` of a gather.
    pub gather_slice_sizes: Option<Vec<i64>>,
    /// Scatter dimension numbers (`update_window_dims`, ...).
    pub scatter_dnums: Option<ScatterDimensionNumbers>,
    /// `indices_are_sorted=true` (gather, scatter).
    pub indices_are_sorted: Option<bool>,
    /// `unique_indices=true` (scatter).
    pub unique_indices: Option<bool>,
    /// `is_stable=true` (sort).
    pub is_stable: Option<bool>,
    /// `replica_groups={{0,1},{2,3}}`; empty means all replicas in one group.
    pub replica_groups: Option<Vec<Vec<i64>>>,
    /// `channel_id=N` of a collective.
    pub channel_id: Option<i64>,
    /// `use_global_device_ids=true`.
    pub use_global_device_ids: Option<bool>,
    /// `source_target_pairs={{0,1},...}` of a collective-permute.
    pub source_target_pairs: Option<Vec<(i64, i64)>>,
    /// `exponent_bits=N` of a reduce-precision.
    pub exponent_bits: Option<i64>,
    /// `mantissa_bits=N` of a reduce-precision.
    pub mantissa_bits: Option<i64>,
    /// `fft_type=`.
    pub fft_type: Option<FftType>,
    /// `fft_length={...}`.
    pub fft_length: Option<Vec<i64>>,
    /// `left_side`, `lower`, `unit_diagonal`, `transpose_a` of a triangular-solve.
    pub triangular_solve: Option<TriangularSolveOptions>,
    /// `lower=` of a cholesky.
    pub cholesky_lower: Option<bool>,
    /// `k=N` of a topk.
    pub k: Option<i64>,
    /// `largest=` of a topk (true when absent).
    pub largest: Option<bool>,
    /// `infeed_config="..."`.
    pub infeed_config: Option<String>,
    /// `outfeed_config="..."`.
    pub outfeed_config: Option<String>,
    /// `outfeed_shape=...`.
    pub outfeed_shape: Option<Shape>,
    /// `num_carries=N` of a scan: how many trailing operands are carries.
    pub num_carries: Option<i64>,
    /// `is_reverse=true` of a scan: steps run from the last position to the first.
    pub is_reverse: Option<bool>,
    /// `is_associative=true` of a scan (a hint; evaluation is sequential).
    pub is_associative: Option<bool>,
    /// oxla extension: number of trailing operands of a `map` that are passed
    /// whole to every application (the seed's static operands).
    pub static_operands: Option<usize>,
    /// Attributes with no effect on execution (`metadata`, `sharding`,
    /// `frontend_attributes`, `operand_precision`, ...), kept as written so they
    /// survive a parse/print round trip.
    pub passthrough: Vec<(String, String)>,
}

/// The computations an instruction calls, by role. Which roles an opcode uses
/// is fixed: `to_apply` (map, reduce, reduce-window, sort, scatter, call,
/// all-reduce, reduce-scatter), `condition`/`body` (while), `select`/`scatter`
/// (select-and-scatter), `branches` (conditional), `called` (custom-call).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Called {
    pub to_apply: Option<ComputationId>,
    pub condition: Option<ComputationId>,
    pub body: Option<ComputationId>,
    pub select: Option<ComputationId>,
    pub scatter: Option<ComputationId>,
    pub branches: Vec<ComputationId>,
    pub called: Vec<ComputationId>,
}

impl Called {
    /// Every called computation, in a fixed order.
    pub fn all(&self) -> Vec<ComputationId> {
        let mut out: Vec<ComputationId> = [
            self.to_apply,
            self.condition,
            self.body,
            self.select,
            self.scatter,
        ]
        .into_iter()
        .flatten()
        .collect();
        out.extend(&self.branches);
        out.extend(&self.called);
        out
    }

    pub fn is_empty(&self) -> bool {
        self.all().is_empty()
    }

    /// Rewrites every id through `f` (used when computations move between modules).
    pub fn remap(&mut self, f: impl Fn(ComputationId) -> ComputationId) {
        for id in [
            &mut self.to_apply,
            &mut self.condition,
            &mut self.body,
            &mut self.select,
            &mut self.scatter,
        ]
        .into_iter()
        .flatten()
        {
            *id = f(*id);
        }
        for id in self.branches.iter_mut().chain(self.called.iter_mut()) {
            *id = f(*id);
        }
    }
}
