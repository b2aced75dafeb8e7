//! Element-wise operations the vector loops do not cover (integers, f16,
//! bf16, complex, conversions between types), applied element by element
//! with the interpreter's own scalar semantics, so results agree bit for
//! bit. This is much cheaper than a round trip through the interpreter
//! for the small values of loop counters and predicates.

use oxla_hlo::ir::{OpFamily, Opcode};
use oxla_hlo::{ArrayLiteral, ArrayShape, HloComputation, HloInstruction, InstrId, Shape};
use oxla_interp::ElementwiseFunction;

use super::Kernel;
use crate::buffer::Pool;
use crate::value::Value;

pub(crate) struct ElementwiseKernel {
    function: ElementwiseFunction,
    shape: ArrayShape,
}

fn elementwise(op: Opcode) -> bool {
    matches!(op.family(), OpFamily::Unary | OpFamily::Binary)
        || matches!(
            op,
            Opcode::Compare
                | Opcode::Select
                | Opcode::Clamp
                | Opcode::Convert
                | Opcode::ReducePrecision
        )
}

/// The kernel for `instr` when it is element-wise over arrays.
pub(crate) fn plan(instr: &HloInstruction, comp: &HloComputation) -> Option<ElementwiseKernel> {
    Some(ElementwiseKernel {
        function: scalar_function(instr, comp)?,
        shape: instr.shape.as_array()?.clone(),
    })
}

/// `instr` as a function of one element of each operand, when it is an
/// element-wise operation over arrays.
pub(crate) fn scalar_function(
    instr: &HloInstruction,
    comp: &HloComputation,
) -> Option<ElementwiseFunction> {
    if !elementwise(instr.opcode) || !instr.control_predecessors.is_empty() {
        return None;
    }
    let shape = instr.shape.as_array()?;
    // One scalar parameter per operand, the operation applied to them.
    let mut instrs = Vec::with_capacity(instr.operands.len() + 1);
    for (j, op) in instr.operands.iter().enumerate() {
        let ty = comp.instruction(*op).shape.as_array()?.element_type();
        let mut p = HloInstruction::new(
            format!("p{j}"),
            Opcode::Parameter,
            Shape::scalar(ty),
            Vec::new(),
        );
        p.attrs.parameter_number = Some(j);
        instrs.push(p);
    }
    let mut op = instr.clone();
    op.shape = Shape::scalar(shape.element_type());
    op.operands = (0..instr.operands.len()).map(InstrId::new).collect();
    instrs.push(op);
    let root = InstrId::new(instrs.len() - 1);
    let scalar = HloComputation::new(instr.name.clone(), instrs, root);
    ElementwiseFunction::compile(&scalar)
}

impl Kernel for ElementwiseKernel {
    fn name(&self) -> &'static str {
        "element-wise (scalar)"
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], _pool: &Pool) -> Result<Value<'a>, String> {
        let arrays: Vec<&ArrayLiteral> = inputs
            .iter()
            .map(|v| v.array().ok_or("an element-wise operation reads arrays"))
            .collect::<Result<_, _>>()?;
        let out = self
            .function
            .apply(&arrays, &self.shape)
            .map_err(|e| e.to_string())?;
        Ok(Value::owned(out))
    }
}
