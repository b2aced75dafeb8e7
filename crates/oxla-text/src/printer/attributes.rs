//! Instruction attributes in XLA's order and with XLA's omission rules:
//! the printer walks the attribute table for the opcode and writes each
//! slot that has something to say. Defaults XLA leaves out are left out;
//! values XLA always writes are always written.

use std::fmt::Write as _;

use oxla_hlo::ir::{ConvDimensionNumbers, PadDim, SliceDim, Window};
use oxla_hlo::{ComputationId, HloComputation, HloInstruction, HloModule, InstrId, PrimitiveType};

use super::shape::shape_text;
use crate::attr_table::{GENERIC_SLOTS, Slot, opcode_slots};
use crate::lexer::Lexer;
use crate::parser::default_comparison_type;
use crate::strings::quote;

pub(crate) struct Context<'m> {
    pub module: &'m HloModule,
    pub computation: &'m HloComputation,
    pub instr: &'m HloInstruction,
}

impl Context<'_> {
    fn computation_name(&self, id: ComputationId) -> String {
        match self.module.computations().get(id.index()) {
            Some(c) => format!("%{}", c.name),
            None => format!("%<missing computation {id}>"),
        }
    }

    fn instruction_name(&self, id: InstrId) -> String {
        match self.computation.instructions().get(id.index()) {
            Some(i) => format!("%{}", i.name),
            None => format!("%<missing instruction {id}>"),
        }
    }

    fn operand_type(&self, n: usize) -> Option<PrimitiveType> {
        let id = self.instr.operands.get(n)?;
        self.computation
            .instructions()
            .get(id.index())?
            .shape
            .element_type()
    }

    /// XLA writes a conditional with a pred selector as true/false computations.
    fn pred_conditional(&self) -> bool {
        let selector_pred = self
            .instr
            .operands
            .first()
            .and_then(|id| self.computation.instructions().get(id.index()))
            .is_some_and(|s| {
                s.shape.is_scalar() && s.shape.element_type() == Some(PrimitiveType::Pred)
            });
        selector_pred && self.instr.called.branches.len() == 2
    }
}

/// Writes `, name=value` for every attribute of the instruction.
pub(crate) fn write_attributes(out: &mut String, ctx: &Context<'_>) {
    let op = ctx.instr.opcode;
    let slots = opcode_slots(op).iter().chain(GENERIC_SLOTS);
    for &slot in slots.clone() {
        if let Slot::Raw(name) = slot {
            for (n, text) in &ctx.instr.attrs.passthrough {
                if n == name {
                    let _ = write!(out, ", {n}={text}");
                }
            }
        } else if let Some(value) = slot_value(ctx, slot) {
            let _ = write!(out, ", {}={value}", slot.name());
        }
    }
    // Passthrough attributes the table does not place (only from hand-built modules).
    for (n, text) in &ctx.instr.attrs.passthrough {
        if !slots.clone().any(|&s| matches!(s, Slot::Raw(r) if r == n)) {
            let _ = write!(out, ", {n}={text}");
        }
    }
}

fn ints(v: &[i64]) -> String {
    let parts: Vec<String> = v.iter().map(i64::to_string).collect();
    format!("{{{}}}", parts.join(","))
}

fn names(v: impl IntoIterator<Item = String>) -> String {
    let v: Vec<String> = v.into_iter().collect();
    format!("{{{}}}", v.join(", "))
}

fn flag(v: Option<bool>) -> Option<String> {
    (v == Some(true)).then(|| "true".to_string())
}

fn non_empty(v: &[i64]) -> Option<String> {
    (!v.is_empty()).then(|| ints(v))
}

/// The value text of one slot, or `None` when XLA would not print it.
fn slot_value(ctx: &Context<'_>, slot: Slot) -> Option<String> {
    use Slot::*;
    let a = &ctx.instr.attrs;
    let c = &ctx.instr.called;
    let dot = a.dot_dnums.as_ref();
    let gather = a.gather_dnums.as_ref();
    let scatter = a.scatter_dnums.as_ref();
    let tri = a.triangular_solve.as_ref();
    match slot {
        Dimensions => a.dimensions.as_deref().map(ints),
        Slice => a.slice.as_deref().map(slice_text),
        Padding => a.padding.as_deref().map(padding_text),
        Window => a
            .window
            .as_ref()
            .filter(|w| !w.dims.is_empty())
            .map(window_text),
        DimLabels => a.conv_dnums.as_ref().map(dim_labels_text),
        FeatureGroupCount => a
            .feature_group_count
            .filter(|&n| n != 1)
            .map(|n| n.to_string()),
        BatchGroupCount => a
            .batch_group_count
            .filter(|&n| n != 1)
            .map(|n| n.to_string()),
        LhsBatchDims => dot.and_then(|d| non_empty(&d.lhs_batch_dimensions)),
        LhsContractingDims => dot.map(|d| ints(&d.lhs_contracting_dimensions)),
        RhsBatchDims => dot.and_then(|d| non_empty(&d.rhs_batch_dimensions)),
        RhsContractingDims => dot.map(|d| ints(&d.rhs_contracting_dimensions)),
        LhsRaggedDims => a
            .ragged_dot_dnums
            .as_ref()
            .and_then(|r| non_empty(&r.lhs_ragged_dimensions)),
        RhsGroupDims => a
            .ragged_dot_dnums
            .as_ref()
            .and_then(|r| non_empty(&r.rhs_group_dimensions)),
        Direction => a.comparison_direction.map(|d| d.name().to_string()),
        CompareType => a
            .comparison_type
            .filter(|&t| ctx.operand_type(0).map(default_comparison_type) != Some(t))
            .map(|t| t.name().to_string()),
        Index => a.tuple_index.map(|i| i.to_string()),
        IotaDimension => a.iota_dimension.map(|i| i.to_string()),
        DynamicSliceSizes => a.dynamic_slice_sizes.as_deref().map(ints),
        Distribution => a.rng_distribution.map(|d| d.name().to_string()),
        RngAlgorithm => a.rng_algorithm.map(|d| d.name().to_string()),
        CustomCallTarget => a.custom_call_target.as_deref().map(quote),
        OffsetDims => gather.map(|g| ints(&g.offset_dims)),
        CollapsedSliceDims => gather.map(|g| ints(&g.collapsed_slice_dims)),
        StartIndexMap => gather.map(|g| ints(&g.start_index_map)),
        OperandBatchingDims => gather.and_then(|g| non_empty(&g.operand_batching_dims)),
        StartIndicesBatchingDims => gather.and_then(|g| non_empty(&g.start_indices_batching_dims)),
        GatherIndexVectorDim => gather.map(|g| g.index_vector_dim.to_string()),
        GatherSliceSizes => a.gather_slice_sizes.as_deref().map(ints),
        IndicesAreSorted => flag(a.indices_are_sorted),
        UpdateWindowDims => scatter.map(|s| ints(&s.update_window_dims)),
        InsertedWindowDims => scatter.map(|s| ints(&s.inserted_window_dims)),
        ScatterDimsToOperandDims => scatter.map(|s| ints(&s.scatter_dims_to_operand_dims)),
        InputBatchingDims => scatter.and_then(|s| non_empty(&s.input_batching_dims)),
        ScatterIndicesBatchingDims => {
            scatter.and_then(|s| non_empty(&s.scatter_indices_batching_dims))
        }
        ScatterIndexVectorDim => scatter.map(|s| s.index_vector_dim.to_string()),
        UniqueIndices => flag(a.unique_indices),
        IsStable => flag(a.is_stable),
        NumCarries => a.num_carries.map(|n| n.to_string()),
        IsReverse => flag(a.is_reverse),
        IsAssociative => flag(a.is_associative),
        ChannelId => a.channel_id.map(|n| n.to_string()),
        ReplicaGroups => {
            let groups = a.replica_groups.as_deref().unwrap_or_default();
            Some(format!(
                "{{{}}}",
                groups.iter().map(|g| ints(g)).collect::<Vec<_>>().join(",")
            ))
        }
        UseGlobalDeviceIds => flag(a.use_global_device_ids),
        SourceTargetPairs => a.source_target_pairs.as_ref().map(|pairs| {
            let parts: Vec<String> = pairs.iter().map(|(s, t)| format!("{{{s},{t}}}")).collect();
            format!("{{{}}}", parts.join(","))
        }),
        ExponentBits => a.exponent_bits.map(|n| n.to_string()),
        MantissaBits => a.mantissa_bits.map(|n| n.to_string()),
        FftType => a.fft_type.map(|t| t.name().to_string()),
        FftLength => a.fft_length.as_deref().map(ints),
        LeftSide => flag(tri.map(|t| t.left_side)),
        TriangularLower => flag(tri.map(|t| t.lower)),
        UnitDiagonal => flag(tri.map(|t| t.unit_diagonal)),
        TransposeA => tri.map(|t| t.transpose_a.name().to_string()),
        CholeskyLower => flag(a.cholesky_lower),
        K => a.k.map(|k| k.to_string()),
        Largest => Some(a.largest.unwrap_or(true).to_string()),
        InfeedConfig => a
            .infeed_config
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(quote),
        OutfeedConfig => a
            .outfeed_config
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(quote),
        OutfeedShape => {
            let shape = a.outfeed_shape.as_ref().or_else(|| {
                let id = ctx.instr.operands.first()?;
                ctx.computation
                    .instructions()
                    .get(id.index())
                    .map(|i| &i.shape)
            });
            shape.map(|s| shape_text(s, true))
        }
        StaticOperands => a.static_operands.filter(|&n| n > 0).map(|n| n.to_string()),
        ToApply => c.to_apply.map(|id| ctx.computation_name(id)),
        Condition => c.condition.map(|id| ctx.computation_name(id)),
        Body => c.body.map(|id| ctx.computation_name(id)),
        Select => c.select.map(|id| ctx.computation_name(id)),
        Scatter => c.scatter.map(|id| ctx.computation_name(id)),
        TrueComputation => ctx
            .pred_conditional()
            .then(|| c.branches.first().map(|&id| ctx.computation_name(id)))
            .flatten(),
        FalseComputation => ctx
            .pred_conditional()
            .then(|| c.branches.get(1).map(|&id| ctx.computation_name(id)))
            .flatten(),
        BranchComputations => (!ctx.pred_conditional() && !c.branches.is_empty())
            .then(|| names(c.branches.iter().map(|&id| ctx.computation_name(id)))),
        CalledComputations => (!c.called.is_empty())
            .then(|| names(c.called.iter().map(|&id| ctx.computation_name(id)))),
        CustomCallToApply => None,
        ControlPredecessors => (!ctx.instr.control_predecessors.is_empty()).then(|| {
            names(
                ctx.instr
                    .control_predecessors
                    .iter()
                    .map(|&id| ctx.instruction_name(id)),
            )
        }),
        BackendConfig => a
            .backend_config
            .as_deref()
            .filter(|s| !s.is_empty())
            .map(backend_config_text),
        Raw(_) => None,
    }
}

/// Raw when the text is exactly one `{...}` block (as XLA prints JSON), quoted otherwise.
fn backend_config_text(s: &str) -> String {
    let lexer = Lexer::new(s);
    if s.starts_with('{') && lexer.scan_group(0).ok() == Some(s.len()) {
        s.to_string()
    } else {
        quote(s)
    }
}

/// Strides are written for every dimension, or (when all are 1) for none.
fn slice_text(dims: &[SliceDim]) -> String {
    let strided = dims.iter().any(|d| d.stride != 1);
    let parts: Vec<String> = dims
        .iter()
        .map(|d| match strided {
            true => format!("[{}:{}:{}]", d.start, d.limit, d.stride),
            false => format!("[{}:{}]", d.start, d.limit),
        })
        .collect();
    format!("{{{}}}", parts.join(", "))
}

fn padding_text(dims: &[PadDim]) -> String {
    let interior = dims.iter().any(|d| d.interior != 0);
    let parts: Vec<String> = dims
        .iter()
        .map(|d| {
            if interior {
                format!("{}_{}_{}", d.low, d.high, d.interior)
            } else {
                format!("{}_{}", d.low, d.high)
            }
        })
        .collect();
    parts.join("x")
}

fn window_text(w: &Window) -> String {
    let join = |f: &dyn Fn(&oxla_hlo::ir::WindowDim) -> String| {
        w.dims.iter().map(f).collect::<Vec<_>>().join("x")
    };
    let mut out = format!("{{size={}", join(&|d| d.size.to_string()));
    if w.dims.iter().any(|d| d.stride != 1) {
        let _ = write!(out, " stride={}", join(&|d| d.stride.to_string()));
    }
    if w.dims.iter().any(|d| d.pad_low != 0 || d.pad_high != 0) {
        let _ = write!(
            out,
            " pad={}",
            join(&|d| format!("{}_{}", d.pad_low, d.pad_high))
        );
    }
    if w.dims.iter().any(|d| d.base_dilation != 1) {
        let _ = write!(
            out,
            " lhs_dilate={}",
            join(&|d| d.base_dilation.to_string())
        );
    }
    if w.dims.iter().any(|d| d.window_dilation != 1) {
        let _ = write!(
            out,
            " rhs_dilate={}",
            join(&|d| d.window_dilation.to_string())
        );
    }
    if w.dims.iter().any(|d| d.window_reversal) {
        let _ = write!(
            out,
            " rhs_reversal={}",
            join(&|d| u8::from(d.window_reversal).to_string())
        );
    }
    out.push('}');
    out
}

/// One side of the labels: `roles` at their positions, spatial digits at theirs.
fn label_side(len: usize, roles: [(i64, char); 2], spatial: &[i64]) -> String {
    let mut chars = vec!['?'; len];
    for (pos, ch) in roles {
        if let Some(slot) = usize::try_from(pos).ok().and_then(|p| chars.get_mut(p)) {
            *slot = ch;
        }
    }
    for (k, &pos) in spatial.iter().enumerate() {
        let digit = u32::try_from(k)
            .ok()
            .and_then(|k| char::from_digit(k, 10))
            .unwrap_or('?');
        if let Some(slot) = usize::try_from(pos).ok().and_then(|p| chars.get_mut(p)) {
            *slot = digit;
        }
    }
    chars.into_iter().collect()
}

fn dim_labels_text(d: &ConvDimensionNumbers) -> String {
    let input = label_side(
        d.input_spatial_dimensions.len() + 2,
        [
            (d.input_batch_dimension, 'b'),
            (d.input_feature_dimension, 'f'),
        ],
        &d.input_spatial_dimensions,
    );
    let kernel = label_side(
        d.kernel_spatial_dimensions.len() + 2,
        [
            (d.kernel_input_feature_dimension, 'i'),
            (d.kernel_output_feature_dimension, 'o'),
        ],
        &d.kernel_spatial_dimensions,
    );
    let output = label_side(
        d.output_spatial_dimensions.len() + 2,
        [
            (d.output_batch_dimension, 'b'),
            (d.output_feature_dimension, 'f'),
        ],
        &d.output_spatial_dimensions,
    );
    format!("{input}_{kernel}->{output}")
}
