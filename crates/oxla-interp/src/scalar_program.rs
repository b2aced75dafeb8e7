//! Scalar computations (reducers, comparators, scatter combiners, mapped
//! functions) flattened into a list of element operations, so that applying
//! one to each element of a large array allocates nothing. A computation that
//! uses anything beyond scalar element-wise operations is not compiled; the
//! interpreter then runs it like any other computation (same results, slower).

use oxla_hlo::ir::{ComparisonDirection, ComparisonType, OpFamily, Opcode};
use oxla_hlo::shape_inference::default_comparison_type;
use oxla_hlo::{HloComputation, InstrId, PrimitiveType, Shape};

use crate::element::{self, Elem};

/// A compiled scalar computation: `steps[k]` computes register `k`.
#[derive(Debug)]
pub(crate) struct ScalarProgram {
    steps: Vec<Step>,
    /// The instruction each step came from (for error messages).
    origins: Vec<InstrId>,
    /// Registers holding the results: the root, or the root tuple's elements.
    outputs: Vec<usize>,
    num_params: usize,
}

#[derive(Clone, Copy, Debug)]
enum Step {
    Param(usize),
    Const(Elem),
    Unary(Opcode, usize),
    Convert(PrimitiveType, usize),
    ReducePrecision(u32, u32, usize),
    Binary(Opcode, usize, usize),
    Compare(ComparisonDirection, ComparisonType, usize, usize),
    Select(usize, usize, usize),
    Clamp(usize, usize, usize),
}

fn scalar_type(shape: &Shape) -> Option<PrimitiveType> {
    match shape {
        Shape::Array(a) if a.is_scalar() => Some(a.element_type()),
        _ => None,
    }
}

impl ScalarProgram {
    /// Compiles `comp` if every parameter and every instruction the root
    /// depends on is a scalar element-wise operation (the root may be a tuple
    /// of scalars). Returns `None` otherwise.
    pub(crate) fn compile(comp: &HloComputation) -> Option<ScalarProgram> {
        let instrs = comp.instructions();
        if instrs.iter().any(|i| i.opcode.has_side_effect()) {
            return None;
        }
        let root = comp.root();
        // Instructions the root depends on.
        let mut live = vec![false; instrs.len()];
        *live.get_mut(root.index())? = true;
        for k in (0..instrs.len()).rev() {
            if live[k] {
                for op in &instrs[k].operands {
                    *live.get_mut(op.index())? = true;
                }
            }
        }
        let mut register = vec![usize::MAX; instrs.len()];
        let mut steps = Vec::new();
        let mut origins = Vec::new();
        let mut outputs = None;
        for (k, instr) in instrs.iter().enumerate() {
            if !live[k] {
                continue;
            }
            let reg = |id: &InstrId| -> Option<usize> {
                let r = *register.get(id.index())?;
                (r != usize::MAX).then_some(r)
            };
            let ops: Option<Vec<usize>> = instr.operands.iter().map(reg).collect();
            let ops = ops?;
            if !instr.opcode.arity().accepts(ops.len()) {
                return None;
            }
            if k == root.index() && instr.opcode == Opcode::Tuple {
                if instr
                    .operands
                    .iter()
                    .any(|o| scalar_type(&instrs[o.index()].shape).is_none())
                {
                    return None;
                }
                outputs = Some(ops);
                continue;
            }
            let ty = scalar_type(&instr.shape)?;
            let step = match instr.opcode {
                Opcode::Parameter => Step::Param(instr.attrs.parameter_number?),
                Opcode::Constant => {
                    let lit = instr.attrs.literal.as_ref()?.as_array()?;
                    if lit.element_count() != 1 || lit.element_type() != ty {
                        return None;
                    }
                    Step::Const(Elem::read(lit.data(), 0))
                }
                Opcode::Copy | Opcode::Broadcast | Opcode::Reshape | Opcode::Bitcast => {
                    let from = scalar_type(&instrs[instr.operands.first()?.index()].shape)?;
                    if from != ty {
                        return None;
                    }
                    Step::Unary(Opcode::Copy, ops[0])
                }
                Opcode::Convert => Step::Convert(ty, ops[0]),
                Opcode::ReducePrecision => Step::ReducePrecision(
                    u32::try_from(instr.attrs.exponent_bits?).ok()?,
                    u32::try_from(instr.attrs.mantissa_bits?).ok()?,
                    ops[0],
                ),
                Opcode::Compare => {
                    let operand_ty = scalar_type(&instrs[instr.operands.first()?.index()].shape)?;
                    Step::Compare(
                        instr.attrs.comparison_direction?,
                        instr
                            .attrs
                            .comparison_type
                            .unwrap_or_else(|| default_comparison_type(operand_ty)),
                        ops[0],
                        ops[1],
                    )
                }
                Opcode::Select => Step::Select(ops[0], ops[1], ops[2]),
                Opcode::Clamp => Step::Clamp(ops[0], ops[1], ops[2]),
                op if op.family() == OpFamily::Unary => Step::Unary(op, ops[0]),
                op if op.family() == OpFamily::Binary => Step::Binary(op, ops[0], ops[1]),
                _ => return None,
            };
            register[k] = steps.len();
            steps.push(step);
            origins.push(InstrId::new(k));
            if k == root.index() {
                outputs = Some(vec![register[k]]);
            }
        }
        let num_params = comp.num_parameters();
        if comp
            .parameters()
            .iter()
            .any(|p| scalar_type(&instrs[p.index()].shape).is_none())
        {
            return None;
        }
        Some(ScalarProgram {
            steps,
            origins,
            outputs: outputs?,
            num_params,
        })
    }

    /// Runs the program on `args`, appending the results to `out`. `regs` is
    /// scratch space kept by the caller between runs. An error names the
    /// instruction that failed.
    pub(crate) fn run(
        &self,
        args: &[Elem],
        regs: &mut Vec<Elem>,
        out: &mut Vec<Elem>,
    ) -> Result<(), (Option<InstrId>, String)> {
        if args.len() != self.num_params {
            return Err((
                None,
                format!(
                    "called with {} arguments but takes {}",
                    args.len(),
                    self.num_params
                ),
            ));
        }
        regs.clear();
        for (k, step) in self.steps.iter().enumerate() {
            let r = |i: usize| regs[i];
            let value = match *step {
                Step::Param(n) => args.get(n).copied(),
                Step::Const(c) => Some(c),
                Step::Unary(op, a) => element::unary(op, r(a)),
                Step::Convert(ty, a) => Some(element::convert(r(a), ty)),
                Step::ReducePrecision(e, m, a) => element::reduce_precision(r(a), e, m),
                Step::Binary(op, a, b) => element::binary(op, r(a), r(b)),
                Step::Compare(dir, ty, a, b) => {
                    element::compare(dir, ty, r(a), r(b)).map(Elem::Pred)
                }
                Step::Select(p, a, b) => Some(if r(p).is_true() { r(a) } else { r(b) }),
                Step::Clamp(lo, x, hi) => element::binary(Opcode::Maximum, r(x), r(lo))
                    .and_then(|v| element::binary(Opcode::Minimum, v, r(hi))),
            };
            match value {
                Some(v) => regs.push(v),
                None => {
                    let operand_types: Vec<String> = step_operands(step)
                        .iter()
                        .map(|&i| regs[i].element_type().to_string())
                        .collect();
                    return Err((
                        Some(self.origins[k]),
                        format!(
                            "the operation does not apply to operands of type {}",
                            operand_types.join(", ")
                        ),
                    ));
                }
            }
        }
        out.extend(self.outputs.iter().map(|&i| regs[i]));
        Ok(())
    }
}

fn step_operands(step: &Step) -> Vec<usize> {
    match *step {
        Step::Param(_) | Step::Const(_) => vec![],
        Step::Unary(_, a) | Step::Convert(_, a) | Step::ReducePrecision(_, _, a) => vec![a],
        Step::Binary(_, a, b) | Step::Compare(_, _, a, b) => vec![a, b],
        Step::Select(a, b, c) | Step::Clamp(a, b, c) => vec![a, b, c],
    }
}
