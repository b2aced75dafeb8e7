//! Element-wise operations the vector loops do not cover (integers, f16,
//! bf16, complex, conversions between types). Common integer and predicate
//! arithmetic (division too), operations of one integer, comparisons,
//! selects and complex absolute values run as typed loops (`typed`); the
//! rest element by element with the interpreter's own scalar semantics.
//! Either way results agree with the interpreter bit for bit.

use oxla_hlo::ir::{OpFamily, Opcode};
use oxla_hlo::{
    ArrayLiteral, ArrayShape, HloComputation, HloInstruction, InstrId, NativeType, Shape,
    with_native_type,
};
use oxla_interp::ElementwiseFunction;

use super::Kernel;
use super::typed::{self, BinFn, ConvertFn};
use crate::buffer::Pool;
use crate::value::Value;

pub(crate) struct ElementwiseKernel {
    function: ElementwiseFunction,
    shape: ArrayShape,
    typed: Option<Typed>,
}

/// A typed loop over operands of the result's shape.
enum Typed {
    Binary(BinFn),
    Select,
    Convert(ConvertFn),
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
    let shape = instr.shape.as_array()?;
    let same = instr
        .operands
        .iter()
        .all(|o| comp.instruction(*o).shape.as_array().map(|a| a.dims()) == Some(shape.dims()));
    let typed = if !same {
        None
    } else if instr.opcode == Opcode::Select {
        Some(Typed::Select)
    } else if instr.opcode == Opcode::Convert {
        let from = comp
            .instruction(*instr.operands.first()?)
            .shape
            .element_type()?;
        typed::convert_fn(from, shape.element_type()).map(Typed::Convert)
    } else if let [x] = instr.operands.as_slice()
        && let Some(from) = comp.instruction(*x).shape.element_type()
    {
        if from == shape.element_type() {
            typed::unary_fn(instr.opcode, from).map(Typed::Convert)
        } else if instr.opcode == Opcode::Abs {
            typed::complex_abs_fn(from).map(Typed::Convert)
        } else {
            None
        }
    } else {
        typed::binary_fn(instr, comp).map(|t| Typed::Binary(t.array))
    };
    Some(ElementwiseKernel {
        function: scalar_function(instr, comp)?,
        shape: shape.clone(),
        typed,
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
        match self.typed {
            Some(_) => "element-wise (typed)",
            None => "element-wise (scalar)",
        }
    }

    fn run<'a>(&self, inputs: &mut [Value<'a>], pool: &Pool) -> Result<Value<'a>, String> {
        if let Some(typed) = &self.typed {
            let n = self.shape.element_count().map_err(|e| e.to_string())?;
            let mut out =
                with_native_type!(self.shape.element_type(), T => T::wrap(pool.take::<T>(n)));
            let data = |k: usize| inputs.get(k).and_then(Value::array).map(ArrayLiteral::data);
            let done = match (typed, data(0), data(1), data(2)) {
                (Typed::Binary(f), Some(a), Some(b), None) => f(a, b, &mut out),
                (Typed::Select, Some(p), Some(a), Some(b)) => typed::select(p, a, b, &mut out),
                (Typed::Convert(f), Some(x), None, None) => f(x, &mut out),
                _ => false,
            };
            if !done {
                return Err("operands of unexpected types or shapes".into());
            }
            let out = ArrayLiteral::new(self.shape.clone(), out).map_err(|e| e.to_string())?;
            return Ok(Value::owned(out));
        }
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
