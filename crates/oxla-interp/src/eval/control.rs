//! Control flow and tuples: `call`, `while`, `conditional` and
//! `get-tuple-element` (`tuple`, `opt-barrier` and `copy` are trivial and
//! handled by the dispatcher). Loops may nest; the iteration limit of
//! [`crate::EvalOptions`] applies to each execution of each `while` and
//! `scan`.

use oxla_hlo::{ArrayLiteral, ArrayShape, HloInstruction, Shape};

use super::attr;
use super::movement::{concat_arrays, slice_along};
use crate::element::Elem;
use crate::error::{OpError, OpResult, fail};
use crate::interpreter::Interpreter;
use crate::value::{Value, make_array};

pub(crate) fn get_tuple_element(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let index = *attr(&instr.attrs.tuple_index, "index")?;
    let t = operands[0].as_tuple()?;
    match t.get(index) {
        Some(v) => Ok(v.clone()),
        None => fail(format!(
            "index {index} is out of range for a tuple of {} elements",
            t.len()
        )),
    }
}

/// The scalar predicate a `while` condition or a `conditional` selector holds.
fn predicate(v: &Value, what: &str) -> OpResult<bool> {
    match v.as_elem()? {
        Elem::Pred(p) => Ok(p),
        other => fail(format!(
            "the {what} must be a pred, got {}",
            other.element_type()
        )),
    }
}

impl Interpreter<'_> {
    pub(crate) fn call_op(
        &mut self,
        instr: &HloInstruction,
        operands: &[Value],
    ) -> OpResult<Value> {
        let Some(comp) = instr.called.to_apply else {
            return fail("needs a to_apply computation");
        };
        self.call(comp, operands)
    }

    /// Runs the body while the condition holds; the loop's value is the last
    /// body result (the initial value if the condition is false at once).
    pub(crate) fn while_loop(
        &mut self,
        instr: &HloInstruction,
        operands: &[Value],
    ) -> OpResult<Value> {
        let (Some(cond), Some(body)) = (instr.called.condition, instr.called.body) else {
            return fail("needs a condition and a body computation");
        };
        let limit = self.options.while_iteration_limit;
        let mut state = operands[0].clone();
        let mut iterations: u64 = 0;
        loop {
            let go = self.call(cond, std::slice::from_ref(&state))?;
            if !predicate(&go, "loop condition")? {
                return Ok(state);
            }
            if limit.is_some_and(|l| iterations >= l) {
                return Err(OpError::WhileLimit(limit.unwrap_or(0)));
            }
            iterations += 1;
            state = self.call(body, std::slice::from_ref(&state))?;
        }
    }

    /// Runs one branch: a pred selector picks branch 0 when true and branch 1
    /// when false; an integer index out of range picks the last branch.
    pub(crate) fn conditional(
        &mut self,
        instr: &HloInstruction,
        operands: &[Value],
    ) -> OpResult<Value> {
        let branches = &instr.called.branches;
        if branches.is_empty() || operands.len() != branches.len() + 1 {
            return fail(format!(
                "needs one operand per branch after the selector ({} branches, {} operands)",
                branches.len(),
                operands.len()
            ));
        }
        let selector = operands[0].as_elem()?;
        let k = match selector {
            Elem::Pred(p) => usize::from(!p),
            other => {
                let i = other.as_index();
                if i < 0 || i >= branches.len() as i128 {
                    branches.len() - 1
                } else {
                    i as usize
                }
            }
        };
        let Some(&branch) = branches.get(k) else {
            return fail("a pred selector needs two branches");
        };
        self.call(branch, std::slice::from_ref(&operands[k + 1]))
    }
}

impl Interpreter<'_> {
    /// `scan`: steps `t` over dimension `d` of the inputs (backwards when
    /// reversed), calling the body on the step's slices and the carries; each
    /// per-step output is stacked along `d` at its own position `t`, and the
    /// final carries follow the outputs in the result tuple.
    pub(crate) fn scan(&mut self, instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
        let Some(body) = instr.called.to_apply else {
            return fail("needs a to_apply computation");
        };
        let d = match attr(&instr.attrs.dimensions, "dimensions")?.as_slice() {
            [d] => usize::try_from(*d).map_err(|_| OpError::from(format!("bad dimension {d}")))?,
            other => return fail(format!("scans along exactly one dimension, got {other:?}")),
        };
        let carries =
            usize::try_from(*attr(&instr.attrs.num_carries, "num_carries")?).unwrap_or(usize::MAX);
        let Some(n_inputs) = operands.len().checked_sub(carries) else {
            return fail("more carries than operands");
        };
        let inputs: Vec<&ArrayLiteral> = operands[..n_inputs]
            .iter()
            .map(Value::as_array)
            .collect::<OpResult<_>>()?;
        let steps = match inputs.first() {
            Some(a) if d < a.dims().len() => a.dims()[d] as usize,
            _ => return fail("needs a scanned input with the scan dimension"),
        };
        let Shape::Tuple(out_shapes) = &instr.shape else {
            return fail("the result of a scan is a tuple");
        };
        let n_outputs = out_shapes.len().saturating_sub(carries);
        let mut carry: Vec<Value> = operands[n_inputs..].to_vec();
        // Per-step outputs in the order of the steps, each reshaped to have
        // dimension d of size 1. Grown step by step: `steps` may be huge
        // when the inputs are empty, and is then bounded only by the loop
        // iteration limit, as a `while` is.
        let mut stacked: Vec<Vec<ArrayLiteral>> = vec![Vec::new(); n_outputs];
        let reverse = instr.attrs.is_reverse == Some(true);
        let limit = self.options.while_iteration_limit;
        for i in 0..steps {
            if let Some(limit) = limit.filter(|&l| i as u64 >= l) {
                return fail(format!(
                    "the scan exceeded the loop iteration limit of {limit}"
                ));
            }
            let t = if reverse { steps - 1 - i } else { i };
            let mut args = Vec::with_capacity(n_inputs + carry.len());
            for a in &inputs {
                let slice = slice_along(a, d, t, 1)?;
                let mut dims = slice.dims().to_vec();
                dims.remove(d);
                args.push(Value::array(reshaped(&slice, dims)?));
            }
            args.extend(carry.iter().cloned());
            let result = self.call(body, &args)?;
            let parts: Vec<Value> = match result {
                Value::Tuple(t) => t.to_vec(),
                single => vec![single],
            };
            if parts.len() != n_outputs + carry.len() {
                return fail(format!(
                    "the body returned {} values, expected {}",
                    parts.len(),
                    n_outputs + carry.len()
                ));
            }
            let (ys, new_carry) = parts.split_at(n_outputs);
            for (j, y) in ys.iter().enumerate() {
                let y = y.as_array()?;
                let mut dims = y.dims().to_vec();
                dims.insert(d.min(dims.len()), 1);
                stacked[j].push(reshaped(y, dims)?);
            }
            carry = new_carry.to_vec();
        }
        let mut outs = Vec::with_capacity(out_shapes.len());
        for (j, per_step) in stacked.iter_mut().enumerate() {
            let Some(shape) = out_shapes[j].as_array() else {
                return fail("scan outputs are arrays");
            };
            if reverse {
                per_step.reverse();
            }
            let parts: Vec<&ArrayLiteral> = per_step.iter().collect();
            outs.push(Value::array(concat_arrays(&parts, d, shape)?));
        }
        outs.extend(carry);
        Ok(Value::tuple(outs))
    }
}

/// `a` with new dimensions of the same element count.
fn reshaped(a: &ArrayLiteral, dims: Vec<i64>) -> OpResult<ArrayLiteral> {
    let shape = ArrayShape::new(a.element_type(), dims)?;
    make_array(&shape, a.data().clone())
}
