//! Shape inference: one function per operation (or family) that checks its
//! operands and attributes and gives the result shape, with messages that name
//! the operation, the shapes involved and the rule broken. The builder calls
//! these before adding an instruction; the verifier calls
//! [`infer_instruction`] on every instruction of a module.

mod collective;
mod contraction;
mod control;
mod elementwise;
mod movement;
mod reduction;

pub use collective::*;
pub use contraction::*;
pub use control::*;
pub use elementwise::*;
pub use movement::*;
pub use reduction::*;

use std::fmt;

use crate::element_type::PrimitiveType;
use crate::ir::{ComputationId, HloInstruction, Opcode};
use crate::shape::{ArrayShape, ProgramShape, Shape};

/// A shape rule broken by an operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InferError {
    /// The operation, as named in HLO text or in the builder (`add`, `Collapse`).
    pub op: String,
    pub message: String,
}

impl fmt::Display for InferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.op, self.message)
    }
}

impl std::error::Error for InferError {}

pub type InferResult<T = Shape> = Result<T, InferError>;

pub(crate) fn err<T>(op: &str, message: impl Into<String>) -> InferResult<T> {
    Err(InferError {
        op: op.to_string(),
        message: message.into(),
    })
}

/// The operand as an array shape, or an error naming which operand is not one.
pub(crate) fn expect_array<'a>(
    op: &str,
    what: &str,
    shape: &'a Shape,
) -> InferResult<&'a ArrayShape> {
    match shape {
        Shape::Array(a) => Ok(a),
        other => err(op, format!("{what} must be an array, got {other}")),
    }
}

pub(crate) fn expect_scalar<'a>(
    op: &str,
    what: &str,
    shape: &'a Shape,
) -> InferResult<&'a ArrayShape> {
    let a = expect_array(op, what, shape)?;
    if !a.is_scalar() {
        return err(op, format!("{what} must be a scalar, got {a}"));
    }
    Ok(a)
}

/// Each value in `dims` must index a dimension of a rank-`rank` array, without repeats.
pub(crate) fn check_dims_in_range(
    op: &str,
    what: &str,
    dims: &[i64],
    rank: usize,
) -> InferResult<()> {
    let mut seen = vec![false; rank];
    for &d in dims {
        if d < 0 || d as usize >= rank {
            return err(
                op,
                format!(
                    "{what} {dims:?} contains {d}, which is not a dimension of a rank-{rank} array"
                ),
            );
        }
        if std::mem::replace(&mut seen[d as usize], true) {
            return err(op, format!("{what} {dims:?} repeats dimension {d}"));
        }
    }
    Ok(())
}

/// `dims` must be a permutation of `0..rank`.
pub(crate) fn check_permutation(
    op: &str,
    what: &str,
    dims: &[i64],
    rank: usize,
) -> InferResult<()> {
    if dims.len() != rank {
        return err(
            op,
            format!(
                "{what} {dims:?} must be a permutation of the {rank} dimensions of the operand"
            ),
        );
    }
    check_dims_in_range(op, what, dims, rank)
}

pub(crate) fn make_array(op: &str, ty: PrimitiveType, dims: Vec<i64>) -> InferResult {
    match ArrayShape::new(ty, dims) {
        Ok(a) => Ok(Shape::Array(a)),
        Err(e) => err(op, e.to_string()),
    }
}

/// Checks that a called computation has the signature an operation needs.
pub(crate) fn check_signature(
    op: &str,
    role: &str,
    actual: &ProgramShape,
    params: &[Shape],
    result: &Shape,
) -> InferResult<()> {
    let ok = actual.parameters.len() == params.len()
        && actual
            .parameters
            .iter()
            .zip(params)
            .all(|(a, b)| a.compatible(b))
        && actual.result.compatible(result);
    if !ok {
        let expected = ProgramShape {
            parameters: params.to_vec(),
            result: result.clone(),
        };
        return err(
            op,
            format!("{role} computation has signature {actual} but {expected} is required"),
        );
    }
    Ok(())
}

/// Looks up the signature of a called computation.
pub trait ComputationShapes {
    fn program_shape(&self, id: ComputationId) -> Option<ProgramShape>;
}

impl<F: Fn(ComputationId) -> Option<ProgramShape>> ComputationShapes for F {
    fn program_shape(&self, id: ComputationId) -> Option<ProgramShape> {
        self(id)
    }
}

fn called(
    op: &str,
    role: &str,
    id: Option<ComputationId>,
    shapes: &dyn ComputationShapes,
) -> InferResult<ProgramShape> {
    match id {
        None => err(op, format!("needs a {role} computation")),
        Some(id) => match shapes.program_shape(id) {
            Some(p) => Ok(p),
            None => err(op, format!("{role} computation {id} does not exist")),
        },
    }
}

fn attr<'a, T>(op: &str, name: &str, value: &'a Option<T>) -> InferResult<&'a T> {
    match value {
        Some(v) => Ok(v),
        None => err(op, format!("missing attribute `{name}`")),
    }
}

/// The shape an instruction must have, given its operands' shapes, its
/// attributes and the signatures of the computations it calls. For operations
/// whose result is stated rather than derived (parameter, constant, reshape,
/// broadcast, convert, rng, custom-call, ...), the declared shape is taken as
/// the request and checked against the operands.
pub fn infer_instruction(
    instr: &HloInstruction,
    operands: &[&Shape],
    computations: &dyn ComputationShapes,
) -> InferResult {
    let op = instr.opcode.name();
    if !instr.opcode.arity().accepts(operands.len()) {
        return err(
            op,
            format!(
                "takes {} operands, got {}",
                instr.opcode.arity(),
                operands.len()
            ),
        );
    }
    let a = &instr.attrs;
    let c = &instr.called;
    let declared = &instr.shape;
    let declared_type = declared.element_type();
    use Opcode::*;
    match instr.opcode {
        Parameter => {
            attr(op, "parameter number", &a.parameter_number)?;
            Ok(declared.clone())
        }
        Constant => {
            let lit = attr(op, "literal", &a.literal)?;
            let shape = lit.shape();
            if !shape.compatible(declared) {
                return err(
                    op,
                    format!(
                        "literal of shape {shape} does not match the declared shape {declared}"
                    ),
                );
            }
            Ok(declared.clone())
        }
        Iota => {
            let arr = expect_array(op, "result", declared)?;
            iota(arr, *attr(op, "iota_dimension", &a.iota_dimension)?)
        }
        Convert => {
            let ty = declared_type
                .ok_or(())
                .or_else(|_| err(op, "result must be an array"))?;
            convert(operands[0], ty)
        }
        BitcastConvert => {
            let ty = declared_type
                .ok_or(())
                .or_else(|_| err(op, "result must be an array"))?;
            bitcast_convert(operands[0], ty)
        }
        ReducePrecision => reduce_precision(
            operands[0],
            *attr(op, "exponent_bits", &a.exponent_bits)?,
            *attr(op, "mantissa_bits", &a.mantissa_bits)?,
        ),
        Copy => Ok(operands[0].clone()),
        Compare => compare(
            operands[0],
            operands[1],
            *attr(op, "direction", &a.comparison_direction)?,
            a.comparison_type,
        ),
        _ if instr.opcode.family() == crate::ir::OpFamily::Unary => {
            unary(instr.opcode, operands[0])
        }
        _ if instr.opcode.family() == crate::ir::OpFamily::Binary => {
            binary(instr.opcode, operands[0], operands[1])
        }
        Clamp => clamp(operands[0], operands[1], operands[2]),
        Select => select(operands[0], operands[1], operands[2]),
        Bitcast => bitcast(operands[0], declared),
        Broadcast => broadcast_in_dim(
            operands[0],
            declared,
            attr(op, "dimensions", &a.dimensions)?,
        ),
        Concatenate => {
            let dims = attr(op, "dimensions", &a.dimensions)?;
            if dims.len() != 1 {
                return err(op, format!("needs exactly one dimension, got {dims:?}"));
            }
            concatenate(operands, dims[0])
        }
        DynamicSlice => dynamic_slice(
            operands[0],
            &operands[1..],
            attr(op, "dynamic_slice_sizes", &a.dynamic_slice_sizes)?,
        ),
        DynamicUpdateSlice => dynamic_update_slice(operands[0], operands[1], &operands[2..]),
        Gather => gather(
            operands[0],
            operands[1],
            attr(op, "gather dimension numbers", &a.gather_dnums)?,
            attr(op, "slice_sizes", &a.gather_slice_sizes)?,
        ),
        GetDimensionSize => {
            let dims = attr(op, "dimensions", &a.dimensions)?;
            get_dimension_size(operands[0], dims)
        }
        Pad => pad(operands[0], operands[1], attr(op, "padding", &a.padding)?),
        Reshape => reshape(operands[0], expect_array(op, "result", declared)?.dims()),
        Reverse => reverse(operands[0], attr(op, "dimensions", &a.dimensions)?),
        Scatter => {
            let n = (operands.len() - 1) / 2;
            if operands.len().is_multiple_of(2) {
                return err(
                    op,
                    format!(
                        "takes 2N+1 operands (N inputs, indices, N updates), got {}",
                        operands.len()
                    ),
                );
            }
            let update = called(op, "update", c.to_apply, computations)?;
            scatter(
                &operands[..n],
                operands[n],
                &operands[n + 1..],
                attr(op, "scatter dimension numbers", &a.scatter_dnums)?,
                &update,
            )
        }
        Slice => slice(operands[0], attr(op, "slice", &a.slice)?),
        Transpose => transpose(operands[0], attr(op, "dimensions", &a.dimensions)?),
        Cholesky => cholesky(operands[0]),
        Convolution => convolution(
            operands[0],
            operands[1],
            attr(op, "window", &a.window)?,
            attr(op, "dim_labels", &a.conv_dnums)?,
            a.feature_group_count.unwrap_or(1),
            a.batch_group_count.unwrap_or(1),
            declared_type,
        ),
        Dot => dot_general(
            operands[0],
            operands[1],
            attr(op, "dot dimension numbers", &a.dot_dnums)?,
            declared_type,
        ),
        RaggedDot => ragged_dot(
            operands[0],
            operands[1],
            operands[2],
            attr(op, "dot dimension numbers", &a.dot_dnums)?,
            attr(op, "ragged dimension numbers", &a.ragged_dot_dnums)?,
            declared_type,
        ),
        Fft => fft(
            operands[0],
            *attr(op, "fft_type", &a.fft_type)?,
            attr(op, "fft_length", &a.fft_length)?,
        ),
        TriangularSolve => triangular_solve(
            operands[0],
            operands[1],
            attr(op, "triangular-solve options", &a.triangular_solve)?,
        ),
        Map => {
            let comp = called(op, "to_apply", c.to_apply, computations)?;
            let statics = a.static_operands.unwrap_or(0);
            if statics >= operands.len() {
                return err(
                    op,
                    "needs at least one mapped operand besides the static operands",
                );
            }
            let (mapped, static_ops) = operands.split_at(operands.len() - statics);
            if let Some(dims) = &a.dimensions {
                let rank = expect_array(op, "operand 0", mapped[0])?.rank();
                if *dims != (0..rank as i64).collect::<Vec<_>>() {
                    return err(
                        op,
                        format!(
                            "dimensions {dims:?} must list every dimension of the operands in order"
                        ),
                    );
                }
            }
            map(mapped, static_ops, &comp)
        }
        Reduce => {
            let comp = called(op, "to_apply", c.to_apply, computations)?;
            if !operands.len().is_multiple_of(2) {
                return err(
                    op,
                    format!(
                        "takes N inputs and N init values, got {} operands",
                        operands.len()
                    ),
                );
            }
            let n = operands.len() / 2;
            reduce(
                &operands[..n],
                &operands[n..],
                attr(op, "dimensions", &a.dimensions)?,
                &comp,
            )
        }
        ReduceWindow => {
            let comp = called(op, "to_apply", c.to_apply, computations)?;
            if !operands.len().is_multiple_of(2) {
                return err(
                    op,
                    format!(
                        "takes N inputs and N init values, got {} operands",
                        operands.len()
                    ),
                );
            }
            let n = operands.len() / 2;
            reduce_window(
                &operands[..n],
                &operands[n..],
                attr(op, "window", &a.window)?,
                &comp,
            )
        }
        SelectAndScatter => {
            let select = called(op, "select", c.select, computations)?;
            let scatter_c = called(op, "scatter", c.scatter, computations)?;
            select_and_scatter(
                operands[0],
                operands[1],
                operands[2],
                attr(op, "window", &a.window)?,
                &select,
                &scatter_c,
            )
        }
        Sort => {
            let comp = called(op, "comparator", c.to_apply, computations)?;
            let dims = attr(op, "dimensions", &a.dimensions)?;
            if dims.len() != 1 {
                return err(
                    op,
                    format!("sorts along exactly one dimension, got {dims:?}"),
                );
            }
            sort(operands, dims[0], &comp)
        }
        TopK => topk(operands[0], *attr(op, "k", &a.k)?),
        Scan => {
            let body = called(op, "to_apply", c.to_apply, computations)?;
            let dims = attr(op, "dimensions", &a.dimensions)?;
            if dims.len() != 1 {
                return err(
                    op,
                    format!("scans along exactly one dimension, got {dims:?}"),
                );
            }
            let carries = *attr(op, "num_carries", &a.num_carries)?;
            let Some(n_inputs) = usize::try_from(carries)
                .ok()
                .and_then(|c| operands.len().checked_sub(c))
            else {
                return err(
                    op,
                    format!(
                        "num_carries={carries} does not fit {} operands",
                        operands.len()
                    ),
                );
            };
            scan(&operands[..n_inputs], &operands[n_inputs..], dims[0], &body)
        }
        Call => {
            let comp = called(op, "to_apply", c.to_apply, computations)?;
            call(operands, &comp)
        }
        Conditional => {
            let mut branches = Vec::with_capacity(c.branches.len());
            for &b in &c.branches {
                branches.push(called(op, "branch", Some(b), computations)?);
            }
            conditional(operands[0], &operands[1..], &branches)
        }
        GetTupleElement => get_tuple_element(operands[0], *attr(op, "index", &a.tuple_index)?),
        OptimizationBarrier => Ok(operands[0].clone()),
        Tuple => Ok(Shape::Tuple(
            operands.iter().map(|s| (*s).clone()).collect(),
        )),
        While => {
            let cond = called(op, "condition", c.condition, computations)?;
            let body = called(op, "body", c.body, computations)?;
            while_loop(&cond, &body, operands[0])
        }
        Rng => rng(
            *attr(op, "distribution", &a.rng_distribution)?,
            operands[0],
            operands[1],
            declared,
        ),
        RngBitGenerator => rng_bit_generator(operands[0], declared),
        AfterAll => after_all(operands),
        Infeed => infeed(operands[0], declared),
        Outfeed => outfeed(operands[0], operands[1]),
        CustomCall => Ok(declared.clone()),
        AllReduce | ReduceScatter => {
            let comp = called(op, "to_apply", c.to_apply, computations)?;
            if instr.opcode == AllReduce {
                all_reduce(operands, &comp)
            } else {
                reduce_scatter(
                    operands,
                    &comp,
                    declared,
                    attr(op, "dimensions", &a.dimensions)?,
                )
            }
        }
        AllGather => all_gather(operands, declared, attr(op, "dimensions", &a.dimensions)?),
        AllToAll => all_to_all(operands, declared),
        CollectivePermute => Ok(operands[0].clone()),
        ReplicaId | PartitionId => Ok(Shape::scalar(PrimitiveType::U32)),
        // The families above cover every remaining opcode.
        _ => err(op, "has no shape rule"),
    }
}
