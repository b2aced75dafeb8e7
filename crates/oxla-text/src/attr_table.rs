//! The one table of instruction attributes: which attributes each opcode
//! accepts, which it requires, and the order XLA's printer writes them in
//! (the per-opcode attributes, then called computations, then the generic
//! ones). The parser checks attributes against it and the printer walks it,
//! so the two cannot disagree. The lists were taken from XLA's own parser
//! (its "allowed attributes" message) and printer.

use oxla_hlo::Opcode;

/// One attribute position. Most map to one field of `Attrs` or `Called`;
/// `Raw` attributes carry no meaning for execution and are kept as text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    Dimensions,
    Slice,
    Padding,
    Window,
    DimLabels,
    FeatureGroupCount,
    BatchGroupCount,
    LhsBatchDims,
    LhsContractingDims,
    RhsBatchDims,
    RhsContractingDims,
    LhsRaggedDims,
    RhsGroupDims,
    Direction,
    CompareType,
    Index,
    IotaDimension,
    DynamicSliceSizes,
    Distribution,
    RngAlgorithm,
    CustomCallTarget,
    OffsetDims,
    CollapsedSliceDims,
    StartIndexMap,
    OperandBatchingDims,
    StartIndicesBatchingDims,
    GatherIndexVectorDim,
    GatherSliceSizes,
    IndicesAreSorted,
    UpdateWindowDims,
    InsertedWindowDims,
    ScatterDimsToOperandDims,
    InputBatchingDims,
    ScatterIndicesBatchingDims,
    ScatterIndexVectorDim,
    UniqueIndices,
    IsStable,
    ChannelId,
    ReplicaGroups,
    UseGlobalDeviceIds,
    SourceTargetPairs,
    ExponentBits,
    MantissaBits,
    FftType,
    FftLength,
    LeftSide,
    TriangularLower,
    UnitDiagonal,
    TransposeA,
    CholeskyLower,
    K,
    Largest,
    InfeedConfig,
    OutfeedShape,
    OutfeedConfig,
    StaticOperands,
    NumCarries,
    IsReverse,
    IsAssociative,
    ToApply,
    Condition,
    Body,
    Select,
    Scatter,
    TrueComputation,
    FalseComputation,
    BranchComputations,
    CalledComputations,
    /// custom-call's `to_apply=`, read into `called_computations`.
    CustomCallToApply,
    ControlPredecessors,
    BackendConfig,
    Raw(&'static str),
}

use Slot::*;

impl Slot {
    /// Whether the value names called computations (and may define one inline).
    pub(crate) fn names_computations(self) -> bool {
        matches!(
            self,
            ToApply
                | Condition
                | Body
                | Select
                | Scatter
                | TrueComputation
                | FalseComputation
                | BranchComputations
                | CalledComputations
                | CustomCallToApply
        )
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Dimensions => "dimensions",
            Slice => "slice",
            Padding => "padding",
            Window => "window",
            DimLabels => "dim_labels",
            FeatureGroupCount => "feature_group_count",
            BatchGroupCount => "batch_group_count",
            LhsBatchDims => "lhs_batch_dims",
            LhsContractingDims => "lhs_contracting_dims",
            RhsBatchDims => "rhs_batch_dims",
            RhsContractingDims => "rhs_contracting_dims",
            LhsRaggedDims => "lhs_ragged_dims",
            RhsGroupDims => "rhs_group_dims",
            Direction => "direction",
            CompareType => "type",
            Index => "index",
            IotaDimension => "iota_dimension",
            DynamicSliceSizes => "dynamic_slice_sizes",
            Distribution => "distribution",
            RngAlgorithm => "algorithm",
            CustomCallTarget => "custom_call_target",
            OffsetDims => "offset_dims",
            CollapsedSliceDims => "collapsed_slice_dims",
            StartIndexMap => "start_index_map",
            OperandBatchingDims => "operand_batching_dims",
            StartIndicesBatchingDims => "start_indices_batching_dims",
            GatherIndexVectorDim | ScatterIndexVectorDim => "index_vector_dim",
            GatherSliceSizes => "slice_sizes",
            IndicesAreSorted => "indices_are_sorted",
            UpdateWindowDims => "update_window_dims",
            InsertedWindowDims => "inserted_window_dims",
            ScatterDimsToOperandDims => "scatter_dims_to_operand_dims",
            InputBatchingDims => "input_batching_dims",
            ScatterIndicesBatchingDims => "scatter_indices_batching_dims",
            UniqueIndices => "unique_indices",
            IsStable => "is_stable",
            ChannelId => "channel_id",
            ReplicaGroups => "replica_groups",
            UseGlobalDeviceIds => "use_global_device_ids",
            SourceTargetPairs => "source_target_pairs",
            ExponentBits => "exponent_bits",
            MantissaBits => "mantissa_bits",
            FftType => "fft_type",
            FftLength => "fft_length",
            LeftSide => "left_side",
            TriangularLower | CholeskyLower => "lower",
            UnitDiagonal => "unit_diagonal",
            TransposeA => "transpose_a",
            K => "k",
            Largest => "largest",
            InfeedConfig => "infeed_config",
            OutfeedShape => "outfeed_shape",
            OutfeedConfig => "outfeed_config",
            StaticOperands => "static_operands",
            NumCarries => "num_carries",
            IsReverse => "is_reverse",
            IsAssociative => "is_associative",
            ToApply | CustomCallToApply => "to_apply",
            Condition => "condition",
            Body => "body",
            Select => "select",
            Scatter => "scatter",
            TrueComputation => "true_computation",
            FalseComputation => "false_computation",
            BranchComputations => "branch_computations",
            CalledComputations => "called_computations",
            ControlPredecessors => "control-predecessors",
            BackendConfig => "backend_config",
            Raw(name) => name,
        }
    }
}

/// The opcode-specific attributes and called computations, in printing order.
pub(crate) fn opcode_slots(op: Opcode) -> &'static [Slot] {
    use Opcode as O;
    match op {
        O::Iota => &[IotaDimension],
        O::Reshape => &[Raw("inferred_dimension")],
        O::Broadcast | O::Transpose | O::Reverse | O::Concatenate | O::GetDimensionSize => {
            &[Dimensions]
        }
        O::Reduce => &[Dimensions, ToApply],
        O::Map => &[Dimensions, StaticOperands, ToApply],
        O::Sort => &[Dimensions, IsStable, ToApply],
        O::Scan => &[Dimensions, NumCarries, IsReverse, IsAssociative, ToApply],
        O::GetTupleElement => &[Index],
        O::Compare => &[Direction, CompareType],
        O::Convolution => &[
            Window,
            DimLabels,
            FeatureGroupCount,
            BatchGroupCount,
            Raw("operand_precision"),
            Raw("convolution_kind"),
            Raw("sparsity_config"),
        ],
        O::Dot => &[
            LhsBatchDims,
            LhsContractingDims,
            RhsBatchDims,
            RhsContractingDims,
            Raw("operand_precision"),
            Raw("algorithm"),
        ],
        O::RaggedDot => &[
            LhsBatchDims,
            LhsContractingDims,
            RhsBatchDims,
            RhsContractingDims,
            LhsRaggedDims,
            RhsGroupDims,
            Raw("operand_precision"),
        ],
        O::Gather => &[
            OffsetDims,
            CollapsedSliceDims,
            StartIndexMap,
            OperandBatchingDims,
            StartIndicesBatchingDims,
            GatherIndexVectorDim,
            GatherSliceSizes,
            IndicesAreSorted,
        ],
        O::Scatter => &[
            UpdateWindowDims,
            InsertedWindowDims,
            ScatterDimsToOperandDims,
            InputBatchingDims,
            ScatterIndicesBatchingDims,
            ScatterIndexVectorDim,
            IndicesAreSorted,
            UniqueIndices,
            ToApply,
        ],
        O::Slice => &[Slice],
        O::DynamicSlice => &[DynamicSliceSizes],
        O::Pad => &[Padding],
        O::ReduceWindow => &[Window, ToApply],
        O::SelectAndScatter => &[Window, Select, Scatter],
        O::While => &[Condition, Body],
        O::Conditional => &[TrueComputation, FalseComputation, BranchComputations],
        O::Call => &[ToApply, Raw("is_composite")],
        O::CustomCall => &[
            Raw("window"),
            Raw("dim_labels"),
            Raw("feature_group_count"),
            Raw("batch_group_count"),
            Raw("operand_precision"),
            Raw("padding_type"),
            CustomCallTarget,
            Raw("operand_layout_constraints"),
            Raw("custom_call_has_side_effect"),
            Raw("literal"),
            Raw("output_to_operand_aliasing"),
            Raw("schedule"),
            Raw("api_version"),
            CalledComputations,
            CustomCallToApply,
        ],
        O::Fft => &[FftType, FftLength],
        O::TriangularSolve => &[LeftSide, TriangularLower, UnitDiagonal, TransposeA],
        O::Cholesky => &[CholeskyLower],
        O::TopK => &[K, Largest],
        O::ReducePrecision => &[ExponentBits, MantissaBits],
        O::Rng => &[Distribution],
        O::RngBitGenerator => &[RngAlgorithm],
        O::Infeed => &[InfeedConfig],
        O::Outfeed => &[OutfeedShape, OutfeedConfig],
        O::AllReduce => &[
            ChannelId,
            ReplicaGroups,
            Raw("constrain_layout"),
            UseGlobalDeviceIds,
            ToApply,
            Raw("mode"),
        ],
        O::ReduceScatter => &[
            ChannelId,
            ReplicaGroups,
            Dimensions,
            Raw("constrain_layout"),
            UseGlobalDeviceIds,
            ToApply,
            Raw("mode"),
        ],
        O::AllGather => &[
            ChannelId,
            ReplicaGroups,
            Dimensions,
            Raw("constrain_layout"),
            UseGlobalDeviceIds,
        ],
        O::AllToAll => &[
            ChannelId,
            ReplicaGroups,
            Dimensions,
            Raw("constrain_layout"),
        ],
        O::CollectivePermute => &[ChannelId, SourceTargetPairs],
        _ => &[],
    }
}

/// Attributes every opcode accepts, in printing order.
pub(crate) const GENERIC_SLOTS: &[Slot] = &[
    Raw("parameter_replication"),
    Raw("sharding"),
    Raw("frontend_attributes"),
    ControlPredecessors,
    Raw("statistics"),
    Raw("result_accuracy"),
    Raw("origin"),
    Raw("metadata"),
    BackendConfig,
];

/// The element-wise ops XLA lets carry `result_accuracy`.
fn accepts_result_accuracy(op: Opcode) -> bool {
    use Opcode as O;
    matches!(
        op,
        O::Cbrt
            | O::Cos
            | O::Erf
            | O::Exp
            | O::Expm1
            | O::Log
            | O::Log1p
            | O::Logistic
            | O::Rsqrt
            | O::Sin
            | O::Sqrt
            | O::Tan
            | O::Tanh
    )
}

/// The slot an attribute name denotes on `op`, if `op` accepts it.
pub(crate) fn lookup(op: Opcode, name: &str) -> Option<Slot> {
    let slot = opcode_slots(op)
        .iter()
        .chain(GENERIC_SLOTS)
        .copied()
        .find(|s| s.name() == name)?;
    if slot == Raw("result_accuracy") && !accepts_result_accuracy(op) {
        return None;
    }
    Some(slot)
}

/// Where a slot comes in the printing order of `op` (unknown slots last).
pub(crate) fn rank(op: Opcode, slot: Slot) -> usize {
    opcode_slots(op)
        .iter()
        .chain(GENERIC_SLOTS)
        .position(|&s| s == slot)
        .unwrap_or(usize::MAX)
}

/// Attributes `op` cannot do without; a missing one is a parse error.
pub(crate) fn required(op: Opcode) -> &'static [Slot] {
    use Opcode as O;
    match op {
        O::Iota => &[IotaDimension],
        O::Transpose | O::Reverse | O::Concatenate | O::GetDimensionSize => &[Dimensions],
        O::Reduce | O::Sort => &[Dimensions, ToApply],
        O::Scan => &[Dimensions, NumCarries, ToApply],
        O::Map | O::Call | O::ReduceWindow | O::AllReduce => &[ToApply],
        O::GetTupleElement => &[Index],
        O::Compare => &[Direction],
        O::Convolution => &[DimLabels],
        O::Gather => &[
            OffsetDims,
            CollapsedSliceDims,
            StartIndexMap,
            GatherIndexVectorDim,
            GatherSliceSizes,
        ],
        O::Scatter => &[
            UpdateWindowDims,
            InsertedWindowDims,
            ScatterDimsToOperandDims,
            ScatterIndexVectorDim,
            ToApply,
        ],
        O::Slice => &[Slice],
        O::DynamicSlice => &[DynamicSliceSizes],
        O::Pad => &[Padding],
        O::SelectAndScatter => &[Select, Scatter],
        O::While => &[Condition, Body],
        O::CustomCall => &[CustomCallTarget],
        O::Fft => &[FftType, FftLength],
        O::TopK => &[K],
        O::ReducePrecision => &[ExponentBits, MantissaBits],
        O::Rng => &[Distribution],
        O::RngBitGenerator => &[RngAlgorithm],
        O::ReduceScatter => &[Dimensions, ToApply],
        O::AllGather => &[Dimensions],
        O::CollectivePermute => &[SourceTargetPairs],
        _ => &[],
    }
}

/// Header attributes of `HloModule`, in printing order. oxla keeps them as
/// text, except `entry_computation_layout`, which it derives.
pub(crate) const MODULE_ATTRIBUTES: &[&str] = &[
    "is_scheduled",
    "input_output_alias",
    "buffer_donor",
    "alias_passthrough_params",
    "entry_computation_layout",
    "allow_spmd_sharding_propagation_to_parameters",
    "allow_spmd_sharding_propagation_to_output",
    "replica_count",
    "num_partitions",
    "frontend_attributes",
    "origin_recovery_table",
];

/// XLA opcodes oxla does not implement, named so the error can say so.
pub(crate) const XLA_ONLY_OPCODES: &[&str] = &[
    "add-dependency",
    "all-gather-done",
    "all-gather-start",
    "all-reduce-done",
    "all-reduce-start",
    "async-done",
    "async-start",
    "async-update",
    "batch-norm-grad",
    "batch-norm-inference",
    "batch-norm-training",
    "collective-broadcast",
    "collective-permute-done",
    "collective-permute-start",
    "copy-done",
    "copy-start",
    "domain",
    "dynamic-reshape",
    "fusion",
    "ragged-all-to-all",
    "recv",
    "recv-done",
    "rng-get-and-update-state",
    "scaled-dot",
    "send",
    "send-done",
    "set-dimension-size",
    "stochastic-convert",
];

/// XLA element types outside oxla's fifteen.
pub(crate) const XLA_ONLY_TYPES: &[&str] = &[
    "s1",
    "s2",
    "s4",
    "u1",
    "u2",
    "u4",
    "f4e2m1fn",
    "f8e3m4",
    "f8e4m3",
    "f8e4m3b11fnuz",
    "f8e4m3fn",
    "f8e4m3fnuz",
    "f8e5m2",
    "f8e5m2fnuz",
    "f8e8m0fnu",
    "opaque",
];
