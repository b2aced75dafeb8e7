//! One module per op family; this file dispatches each opcode to its family.
//! The match is exhaustive, so a new opcode in oxla-hlo's table does not
//! compile until the interpreter evaluates it.

pub(crate) mod control;
pub(crate) mod convert;
pub(crate) mod convolution;
pub(crate) mod dot;
pub(crate) mod elementwise;
pub(crate) mod gather_scatter;
pub(crate) mod lapack;
pub(crate) mod linalg;
pub(crate) mod movement;
pub(crate) mod reduce;
pub(crate) mod rng;
pub(crate) mod services;
pub(crate) mod sort;

use oxla_hlo::{ArrayShape, HloInstruction, Opcode};

use crate::error::{OpResult, fail};
use crate::interpreter::{Interpreter, Site};
use crate::value::Value;

/// The instruction's result shape as an array shape.
pub(crate) fn result_array(instr: &HloInstruction) -> OpResult<&ArrayShape> {
    match instr.shape.as_array() {
        Some(a) => Ok(a),
        None => fail(format!("expected an array result, got {}", instr.shape)),
    }
}

/// A required attribute, or an error naming it.
pub(crate) fn attr<'a, T>(value: &'a Option<T>, name: &str) -> OpResult<&'a T> {
    match value {
        Some(v) => Ok(v),
        None => fail(format!("missing attribute `{name}`")),
    }
}

impl Interpreter<'_> {
    /// Evaluates one instruction on its operands' values; `args` are the
    /// values of the enclosing computation's parameters.
    pub(crate) fn eval_instruction(
        &mut self,
        site: &Site<'_>,
        operands: &[Value],
        args: &[Value],
    ) -> OpResult<Value> {
        let instr = site.instr;
        let arity = instr.opcode.arity();
        if !arity.accepts(operands.len()) {
            return fail(format!("takes {arity} operands, got {}", operands.len()));
        }
        use Opcode::*;
        match instr.opcode {
            Parameter => {
                let n = *attr(&instr.attrs.parameter_number, "parameter number")?;
                match args.get(n) {
                    Some(v) => Ok(v.clone()),
                    None => fail(format!("parameter {n} was not passed")),
                }
            }
            Constant => Ok(Value::from_literal(
                attr(&instr.attrs.literal, "literal")?.clone(),
            )),
            Copy | OptimizationBarrier => Ok(operands[0].clone()),

            Abs | Cbrt | Ceil | Clz | Cos | Erf | Exp | Expm1 | Floor | Imag | IsFinite | Log
            | Log1p | Logistic | Negate | Not | PopCnt | Real | RoundNearestAfz
            | RoundNearestEven | Rsqrt | Sign | Sin | Sqrt | Tan | Tanh | Acos | Acosh | Asin
            | Asinh | Atan | Atanh | Cosh | Sinh => elementwise::unary(instr, operands),
            ReducePrecision => elementwise::reduce_precision(instr, operands),
            Add | And | Atan2 | Complex | Divide | Maximum | Minimum | Multiply | MulHi | Or
            | Power | Remainder | ShiftLeft | ShiftRightArithmetic | ShiftRightLogical
            | Subtract | Xor => elementwise::binary(instr, operands),
            Compare => elementwise::compare(instr, operands),
            Clamp => elementwise::clamp(instr, operands),
            Select => elementwise::select(instr, operands),
            Convert => convert::convert(instr, operands),
            BitcastConvert => convert::bitcast_convert(instr, operands),

            Iota => movement::iota(instr),
            Bitcast => movement::bitcast(instr, operands),
            Broadcast => movement::broadcast(instr, operands),
            Concatenate => movement::concatenate(instr, operands),
            DynamicSlice => movement::dynamic_slice(instr, operands),
            DynamicUpdateSlice => movement::dynamic_update_slice(instr, operands),
            GetDimensionSize => movement::get_dimension_size(instr, operands),
            Pad => movement::pad(instr, operands),
            Reshape => movement::reshape(instr, operands),
            Reverse => movement::reverse(instr, operands),
            Slice => movement::slice(instr, operands),
            Transpose => movement::transpose(instr, operands),

            Gather => gather_scatter::gather(instr, operands),
            Scatter => self.scatter(instr, operands),

            Dot => dot::dot(instr, operands),
            RaggedDot => dot::ragged_dot(instr, operands),
            Convolution => convolution::convolution(instr, operands),
            Cholesky => linalg::cholesky(instr, operands),
            TriangularSolve => linalg::triangular_solve(instr, operands),
            Fft => linalg::fft(instr, operands),

            Map => self.map(instr, operands),
            Reduce => self.reduce(instr, operands),
            ReduceWindow => self.reduce_window(instr, operands),
            SelectAndScatter => self.select_and_scatter(instr, operands),
            Sort => self.sort(instr, operands),
            Scan => self.scan(instr, operands),
            TopK => sort::topk(instr, operands),

            Call => self.call_op(instr, operands),
            Conditional => self.conditional(instr, operands),
            GetTupleElement => control::get_tuple_element(instr, operands),
            Tuple => Ok(Value::tuple(operands.to_vec())),
            While => self.while_loop(instr, operands),

            Rng => self.rng(instr, operands),
            RngBitGenerator => rng::rng_bit_generator(instr, operands),

            AfterAll => Ok(Value::Token),
            Infeed => self.infeed(instr),
            Outfeed => self.outfeed(operands),
            CustomCall => self.custom_call(instr, operands),
            ReplicaId => Ok(services::u32_scalar(self.services.replica_id())),
            PartitionId => Ok(services::u32_scalar(self.services.partition_id())),
            AllReduce => self.all_reduce(site, operands),
            AllGather => self.all_gather(site, operands),
            ReduceScatter => self.reduce_scatter(site, operands),
            AllToAll => self.all_to_all(site, operands),
            CollectivePermute => self.collective_permute(site, operands),
        }
    }
}
