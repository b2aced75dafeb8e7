//! Instruction attributes: reading each value into its typed place, then
//! assembling the instruction's `Attrs` and `Called` once all are read.
//!
//! Assembly also settles defaults the way XLA's printer does, so that a
//! module reads back equal after a print: values XLA omits when default
//! (`feature_group_count=1`, false flags, an empty `backend_config`, compare
//! `type` equal to the element type's default) are stored as absent, and
//! values XLA always prints (`largest`, broadcast and map `dimensions`,
//! `replica_groups`, `outfeed_shape`, dot dimension numbers, empty windows)
//! are stored even when the text left them out.

use oxla_hlo::ir::{
    Attrs, Called, ComparisonDirection, ComparisonType, DotDimensionNumbers,
    GatherDimensionNumbers, RaggedDotDimensionNumbers, RngDistribution, ScatterDimensionNumbers,
    TriangularSolveOptions, TriangularTranspose, Window,
};
use oxla_hlo::{ComputationId, HloComputation, InstrId, Opcode, PrimitiveType, Shape};

use super::Parser;
use super::instruction::CompCtx;
use crate::attr_table::{Slot, rank, required};
use crate::error::PResult;
use crate::lexer::Tok;

/// Attributes read so far for one instruction.
#[derive(Default)]
pub(super) struct Pending {
    seen: Vec<Slot>,
    attrs: Attrs,
    called: Called,
    control: Vec<InstrId>,
    raw: Vec<(Slot, String)>,
    dot: DotDimensionNumbers,
    ragged: RaggedDotDimensionNumbers,
    gather: GatherDimensionNumbers,
    scatter: ScatterDimensionNumbers,
    left_side: bool,
    lower: bool,
    unit_diagonal: bool,
    transpose_a: Option<TriangularTranspose>,
    true_computation: Option<ComputationId>,
    false_computation: Option<ComputationId>,
    branches: Option<Vec<ComputationId>>,
    custom_call_to_apply: Option<ComputationId>,
}

impl Pending {
    /// A fresh set on the heap. Not inlined, so the ~2 KiB value is built in
    /// this frame rather than in the recursive parsing frames that call it.
    #[inline(never)]
    pub(super) fn boxed() -> Box<Pending> {
        Box::default()
    }

    pub(super) fn has(&self, slot: Slot) -> bool {
        self.seen.contains(&slot)
    }
}

/// The comparison type XLA assumes for an element type when `type=` is absent.
pub(crate) fn default_comparison_type(ty: PrimitiveType) -> ComparisonType {
    if ty.is_floating() {
        ComparisonType::Float
    } else if ty.is_signed_int() {
        ComparisonType::Signed
    } else {
        ComparisonType::Unsigned
    }
}

impl<'a> Parser<'a> {
    /// Reads the value of attribute `slot` into `p`.
    pub(super) fn attribute_value(
        &mut self,
        ctx: &CompCtx,
        slot: Slot,
        p: &mut Pending,
    ) -> PResult<()> {
        if slot.names_computations() {
            self.computation_attribute(slot, p)
        } else {
            self.plain_attribute(ctx, slot, p)
        }
    }

    /// Every attribute but those naming computations. Its frame is large
    /// (one arm per attribute), so it stays off the recursive path that
    /// inline computations take.
    #[inline(never)]
    fn plain_attribute(&mut self, ctx: &CompCtx, slot: Slot, p: &mut Pending) -> PResult<()> {
        use Slot::*;
        let a = &mut p.attrs;
        match slot {
            Dimensions => a.dimensions = Some(self.int_list()?),
            Slice => a.slice = Some(self.slice_value()?),
            Padding => a.padding = Some(self.padding_value()?),
            Window => a.window = Some(self.window_value()?),
            DimLabels => a.conv_dnums = Some(self.dim_labels_value()?),
            FeatureGroupCount => a.feature_group_count = Some(self.int("an integer")?),
            BatchGroupCount => a.batch_group_count = Some(self.int("an integer")?),
            LhsBatchDims => p.dot.lhs_batch_dimensions = self.int_list()?,
            LhsContractingDims => p.dot.lhs_contracting_dimensions = self.int_list()?,
            RhsBatchDims => p.dot.rhs_batch_dimensions = self.int_list()?,
            RhsContractingDims => p.dot.rhs_contracting_dimensions = self.int_list()?,
            LhsRaggedDims => p.ragged.lhs_ragged_dimensions = self.int_list()?,
            RhsGroupDims => p.ragged.rhs_group_dimensions = self.int_list()?,
            Direction => {
                a.comparison_direction = Some(self.enum_value(
                    "comparison direction",
                    ComparisonDirection::from_name,
                    ComparisonDirection::ALL,
                )?)
            }
            CompareType => {
                a.comparison_type = Some(self.enum_value(
                    "comparison type",
                    ComparisonType::from_name,
                    ComparisonType::ALL,
                )?)
            }
            Index => a.tuple_index = Some(self.index("a tuple index")?),
            IotaDimension => a.iota_dimension = Some(self.int("an integer")?),
            DynamicSliceSizes => a.dynamic_slice_sizes = Some(self.int_list()?),
            Distribution => {
                a.rng_distribution = Some(self.enum_value(
                    "rng distribution",
                    RngDistribution::from_name,
                    RngDistribution::ALL,
                )?)
            }
            RngAlgorithm => {
                a.rng_algorithm = Some(self.enum_value(
                    "rng algorithm",
                    oxla_hlo::ir::RngAlgorithm::from_name,
                    oxla_hlo::ir::RngAlgorithm::ALL,
                )?)
            }
            CustomCallTarget => a.custom_call_target = Some(self.string("a string")?),
            OffsetDims => p.gather.offset_dims = self.int_list()?,
            CollapsedSliceDims => p.gather.collapsed_slice_dims = self.int_list()?,
            StartIndexMap => p.gather.start_index_map = self.int_list()?,
            OperandBatchingDims => p.gather.operand_batching_dims = self.int_list()?,
            StartIndicesBatchingDims => p.gather.start_indices_batching_dims = self.int_list()?,
            GatherIndexVectorDim => p.gather.index_vector_dim = self.int("an integer")?,
            GatherSliceSizes => a.gather_slice_sizes = Some(self.int_list()?),
            IndicesAreSorted => a.indices_are_sorted = Some(self.bool()?),
            UpdateWindowDims => p.scatter.update_window_dims = self.int_list()?,
            InsertedWindowDims => p.scatter.inserted_window_dims = self.int_list()?,
            ScatterDimsToOperandDims => p.scatter.scatter_dims_to_operand_dims = self.int_list()?,
            InputBatchingDims => p.scatter.input_batching_dims = self.int_list()?,
            ScatterIndicesBatchingDims => {
                p.scatter.scatter_indices_batching_dims = self.int_list()?
            }
            ScatterIndexVectorDim => p.scatter.index_vector_dim = self.int("an integer")?,
            UniqueIndices => a.unique_indices = Some(self.bool()?),
            IsStable => a.is_stable = Some(self.bool()?),
            NumCarries => a.num_carries = Some(self.int("an integer")?),
            IsReverse => a.is_reverse = Some(self.bool()?),
            IsAssociative => a.is_associative = Some(self.bool()?),
            ChannelId => a.channel_id = Some(self.int("an integer")?),
            ReplicaGroups => a.replica_groups = Some(self.replica_groups_value()?),
            UseGlobalDeviceIds => a.use_global_device_ids = Some(self.bool()?),
            SourceTargetPairs => a.source_target_pairs = Some(self.pairs_value()?),
            ExponentBits => a.exponent_bits = Some(self.int("an integer")?),
            MantissaBits => a.mantissa_bits = Some(self.int("an integer")?),
            FftType => {
                a.fft_type = Some(self.enum_value(
                    "fft type",
                    oxla_hlo::ir::FftType::from_name,
                    oxla_hlo::ir::FftType::ALL,
                )?)
            }
            FftLength => a.fft_length = Some(self.int_list()?),
            LeftSide => p.left_side = self.bool()?,
            TriangularLower => p.lower = self.bool()?,
            UnitDiagonal => p.unit_diagonal = self.bool()?,
            TransposeA => {
                p.transpose_a = Some(self.enum_value(
                    "transpose_a value",
                    TriangularTranspose::from_name,
                    TriangularTranspose::ALL,
                )?)
            }
            CholeskyLower => a.cholesky_lower = Some(self.bool()?),
            K => a.k = Some(self.int("an integer")?),
            Largest => a.largest = Some(self.bool()?),
            InfeedConfig => a.infeed_config = Some(self.string("a string")?),
            OutfeedConfig => a.outfeed_config = Some(self.string("a string")?),
            OutfeedShape => a.outfeed_shape = Some(self.shape()?),
            StaticOperands => a.static_operands = Some(self.index("a count of static operands")?),
            ToApply | Condition | Body | Select | Scatter | TrueComputation | FalseComputation
            | BranchComputations | CalledComputations | CustomCallToApply => {
                return self.computation_attribute(slot, p);
            }
            ControlPredecessors => p.control = self.instruction_list(ctx)?,
            BackendConfig => {
                a.backend_config = Some(match self.peek_tok()? {
                    Tok::LBrace => self.raw_group()?,
                    _ => self.string("a string or a {...} block")?,
                })
            }
            Raw(_) => {
                let text = self.raw_value()?;
                p.raw.push((slot, text));
            }
        }
        p.seen.push(slot);
        Ok(())
    }

    /// Reads an attribute that names computations. Inline computations
    /// recurse through here.
    fn computation_attribute(&mut self, slot: Slot, p: &mut Pending) -> PResult<()> {
        use Slot::*;
        match slot {
            ToApply => p.called.to_apply = Some(self.computation_ref()?),
            Condition => p.called.condition = Some(self.computation_ref()?),
            Body => p.called.body = Some(self.computation_ref()?),
            Select => p.called.select = Some(self.computation_ref()?),
            Scatter => p.called.scatter = Some(self.computation_ref()?),
            TrueComputation => p.true_computation = Some(self.computation_ref()?),
            FalseComputation => p.false_computation = Some(self.computation_ref()?),
            BranchComputations => p.branches = Some(self.computation_list()?),
            CalledComputations => p.called.called = self.computation_list()?,
            CustomCallToApply => p.custom_call_to_apply = Some(self.computation_ref()?),
            _ => {}
        }
        p.seen.push(slot);
        Ok(())
    }

    /// Builds the instruction's attributes from what was read, checking that
    /// the required ones are present and settling defaults (see the module doc).
    pub(super) fn finalize_attributes(
        &self,
        op: Opcode,
        p: Pending,
        operands: &[&Shape],
        op_pos: usize,
    ) -> PResult<(Attrs, Called, Vec<InstrId>)> {
        let missing = |name: &str| self.error(op_pos, format!("{op} needs attribute `{name}`"));
        if let Some(slot) = required(op).iter().find(|&&s| !p.has(s)) {
            return Err(missing(slot.name()));
        }
        let operand_type = |i: usize| operands.get(i).and_then(|s| s.element_type());
        let mut a = p.attrs;
        let mut c = p.called;
        match op {
            Opcode::Dot => a.dot_dnums = Some(p.dot),
            Opcode::RaggedDot => {
                a.dot_dnums = Some(p.dot);
                a.ragged_dot_dnums = Some(p.ragged);
            }
            Opcode::Gather => a.gather_dnums = Some(p.gather),
            Opcode::Scatter => a.scatter_dnums = Some(p.scatter),
            Opcode::TriangularSolve => {
                a.triangular_solve = Some(TriangularSolveOptions {
                    left_side: p.left_side,
                    lower: p.lower,
                    unit_diagonal: p.unit_diagonal,
                    transpose_a: p.transpose_a.unwrap_or(TriangularTranspose::NoTranspose),
                })
            }
            Opcode::Conditional => {
                c.branches = match (p.true_computation, p.false_computation, p.branches) {
                    (None, None, Some(b)) => b,
                    (Some(t), Some(f), None) => vec![t, f],
                    (None, None, None) => return Err(missing("branch_computations")),
                    (Some(_), None, None) => return Err(missing("false_computation")),
                    (None, Some(_), None) => return Err(missing("true_computation")),
                    (_, _, Some(_)) => {
                        return Err(self.error(
                            op_pos,
                            "conditional takes either branch_computations or \
                             true_computation and false_computation, not both",
                        ));
                    }
                };
            }
            Opcode::CustomCall => {
                if let Some(id) = p.custom_call_to_apply {
                    if !c.called.is_empty() {
                        return Err(self.error(
                            op_pos,
                            "custom-call takes either to_apply or called_computations, not both",
                        ));
                    }
                    c.called = vec![id];
                }
            }
            Opcode::Broadcast => {
                a.dimensions.get_or_insert_with(Vec::new);
            }
            Opcode::Map if a.dimensions.is_none() => {
                let rank = operands
                    .first()
                    .and_then(|s| s.as_array())
                    .map_or(0, |s| s.rank());
                a.dimensions = Some((0..rank as i64).collect());
            }
            Opcode::TopK => {
                a.largest.get_or_insert(true);
            }
            Opcode::Convolution | Opcode::ReduceWindow | Opcode::SelectAndScatter => {
                a.window.get_or_insert_with(Window::default);
            }
            Opcode::AllGather | Opcode::AllReduce | Opcode::AllToAll | Opcode::ReduceScatter => {
                a.replica_groups.get_or_insert_with(Vec::new);
            }
            Opcode::Outfeed if a.outfeed_shape.is_none() => {
                a.outfeed_shape = operands.first().map(|s| (*s).clone());
            }
            Opcode::Compare => {
                let default = operand_type(0).map(default_comparison_type);
                if default.is_some() && a.comparison_type == default {
                    a.comparison_type = None;
                }
            }
            _ => {}
        }
        drop_printer_defaults(&mut a);
        let mut raw = p.raw;
        raw.sort_by_key(|(slot, _)| rank(op, *slot));
        a.passthrough = raw
            .into_iter()
            .map(|(slot, text)| (slot.name().to_string(), text))
            .collect();
        Ok((a, c, p.control))
    }

    #[inline(never)]
    fn enum_value<T: Copy + std::fmt::Display>(
        &mut self,
        what: &str,
        parse: fn(&str) -> Option<T>,
        all: &[T],
    ) -> PResult<T> {
        let t = self.next()?;
        if let Tok::Ident(word) = t.tok {
            if let Some(v) = parse(word) {
                return Ok(v);
            }
            let names: Vec<String> = all.iter().map(T::to_string).collect();
            return Err(self.error(
                t.start,
                format!(
                    "unknown {what} `{word}` (expected one of {})",
                    names.join(", ")
                ),
            ));
        }
        Err(self.expected(&format!("a {what}"), &t))
    }

    fn string(&mut self, what: &str) -> PResult<String> {
        let t = self.next()?;
        match t.tok {
            Tok::Str(s) => Ok(s),
            _ => Err(self.expected(what, &t)),
        }
    }

    /// A called computation: its name, or an inline body `{ ... }`.
    fn computation_ref(&mut self) -> PResult<ComputationId> {
        let t = self.peek()?.clone();
        match t.tok {
            Tok::LBrace => {
                self.enter(t.start)?;
                let id = self.inline_computation()?;
                self.leave();
                Ok(id)
            }
            Tok::Ident(name) | Tok::Name(name) => {
                self.next()?;
                self.computation_names.get(name).copied().ok_or_else(|| {
                    self.error(
                        t.start,
                        format!("computation {name} is not defined (callees must be defined before their callers)"),
                    )
                })
            }
            _ => Err(self.expected("a computation name", &t)),
        }
    }

    /// `{ ... }` in place of a computation name: a computation named `_`
    /// (made unique), added before the computation that calls it.
    fn inline_computation(&mut self) -> PResult<ComputationId> {
        let (instructions, root) = self.computation_body()?;
        let name = loop {
            let name = match self.inline_suffix {
                0 => "_".to_string(),
                n => format!("_.{n}"),
            };
            self.inline_suffix += 1;
            if !self.computation_names.contains_key(&name) {
                break name;
            }
        };
        Ok(self.add_computation(HloComputation::new(name, instructions, root)))
    }

    /// `{%a, %b}`.
    #[inline(never)]
    fn computation_list(&mut self) -> PResult<Vec<ComputationId>> {
        self.expect(&Tok::LBrace, "'{' to start a list of computations")?;
        let mut out = Vec::new();
        if self.eat(&Tok::RBrace)? {
            return Ok(out);
        }
        loop {
            out.push(self.computation_ref()?);
            let t = self.next()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBrace => return Ok(out),
                _ => return Err(self.expected("',' or '}' in a list of computations", &t)),
            }
        }
    }

    /// `{%a, %b}`: instructions of the current computation, already defined.
    #[inline(never)]
    fn instruction_list(&mut self, ctx: &CompCtx) -> PResult<Vec<InstrId>> {
        self.expect(&Tok::LBrace, "'{' to start a list of instructions")?;
        let mut out = Vec::new();
        if self.eat(&Tok::RBrace)? {
            return Ok(out);
        }
        loop {
            let (name, at) = self.name("an instruction name")?;
            out.push(ctx.lookup(&name).ok_or_else(|| {
                self.error(
                    at,
                    format!("instruction {name} is not defined before this use"),
                )
            })?);
            let t = self.next()?;
            match t.tok {
                Tok::Comma => {}
                Tok::RBrace => return Ok(out),
                _ => return Err(self.expected("',' or '}' in a list of instructions", &t)),
            }
        }
    }
}

/// Absent is how oxla stores what XLA's printer leaves out.
fn drop_printer_defaults(a: &mut Attrs) {
    if a.feature_group_count == Some(1) {
        a.feature_group_count = None;
    }
    if a.batch_group_count == Some(1) {
        a.batch_group_count = None;
    }
    for flag in [
        &mut a.indices_are_sorted,
        &mut a.unique_indices,
        &mut a.is_stable,
        &mut a.use_global_device_ids,
        &mut a.cholesky_lower,
    ] {
        if *flag == Some(false) {
            *flag = None;
        }
    }
    for text in [
        &mut a.backend_config,
        &mut a.infeed_config,
        &mut a.outfeed_config,
    ] {
        if text.as_deref() == Some("") {
            *text = None;
        }
    }
    if a.static_operands == Some(0) {
        a.static_operands = None;
    }
}
