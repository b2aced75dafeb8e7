//! Control flow and tuples: `call`, `while`, `conditional` and
//! `get-tuple-element` (`tuple`, `opt-barrier` and `copy` are trivial and
//! handled by the dispatcher). Loops may nest; the iteration limit of
//! [`crate::EvalOptions`] applies to each execution of each `while`.

use oxla_hlo::HloInstruction;

use super::attr;
use crate::element::Elem;
use crate::error::{OpError, OpResult, fail};
use crate::interpreter::Interpreter;
use crate::value::Value;

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
