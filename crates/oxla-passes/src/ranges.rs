//! Comparisons decided by the range of a counted loop's induction
//! variables. In the body of a `while` whose trip count is known (a counter
//! in the state tuple that starts at a constant, grows by a constant each
//! trip and is compared with a constant, as [`crate::UnrollWhile`] finds
//! them), every state element that starts at a constant and grows by a
//! constant each trip takes values in a known range. A comparison of such
//! an element with a constant that holds, or fails, over the whole range is
//! that constant. JAX's `fori_loop` indexes `x[i]` as
//! `x[select(i < 0, i + n, i)]`, so that negative indices count from the
//! end; its counter is never negative, and the select goes.
//!
//! A body shared by several loops is left alone: its ranges are one loop's.

use oxla_hlo::ir::{Attrs, ComparisonDirection};
use oxla_hlo::{
    ComputationId, HloComputation, HloInstruction, HloModule, Literal, Opcode, PrimitiveType,
};

use crate::Pass;
use crate::unroll::{element_test, holds, state_element};

pub struct LoopRanges;

impl Pass for LoopRanges {
    fn name(&self) -> &'static str {
        "loop-ranges"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        // Each body with the ranges of its state elements (lowest, highest).
        let mut found: Vec<(ComputationId, Vec<Option<(i128, i128)>>)> = Vec::new();
        for comp in module.computations() {
            for instr in comp.instructions() {
                let (Some(cond), Some(body), &[init]) = (
                    instr.called.condition,
                    instr.called.body,
                    instr.operands.as_slice(),
                ) else {
                    continue;
                };
                if instr.opcode != Opcode::While || callers(module, body) != 1 {
                    continue;
                }
                let ranges = element_ranges(
                    module.computation(cond),
                    module.computation(body),
                    comp.instruction(init),
                    comp,
                );
                if let Some(ranges) = ranges {
                    found.push((body, ranges));
                }
            }
        }
        let mut changed = false;
        for (body, ranges) in found {
            let comp = &mut module.computations_mut()[body.index()];
            for k in 0..comp.instructions().len() {
                if let Some(value) = decided(comp, &comp.instructions()[k], &ranges) {
                    let instr = &mut comp.instructions_mut()[k];
                    instr.opcode = Opcode::Constant;
                    instr.operands.clear();
                    instr.called = Default::default();
                    instr.attrs = Attrs {
                        literal: Some(Literal::scalar(value)),
                        passthrough: std::mem::take(&mut instr.attrs.passthrough),
                        ..Attrs::default()
                    };
                    changed = true;
                }
            }
        }
        changed
    }
}

/// How many instructions of `module` call computation `id`.
fn callers(module: &HloModule, id: ComputationId) -> usize {
    module
        .computations()
        .iter()
        .flat_map(|c| c.instructions())
        .filter(|i| i.called.all().contains(&id))
        .count()
}

/// The ranges of the state elements of a loop started from `init` (an
/// instruction of `outer`), inside its body: for each element that starts
/// at a constant and grows by a constant each trip, the lowest and highest
/// values the body sees. `None` if the trip count is not known or is 0.
fn element_ranges(
    cond: &HloComputation,
    body: &HloComputation,
    init: &HloInstruction,
    outer: &HloComputation,
) -> Option<Vec<Option<(i128, i128)>>> {
    if init.opcode != Opcode::Tuple {
        return None;
    }
    let start = |k: usize| outer.instruction(*init.operands.get(k)?).integer_constant();
    let next = body.root_instruction();
    if next.opcode != Opcode::Tuple || next.operands.len() != init.operands.len() {
        return None;
    }
    // Element `k`'s step: the body's next value is it plus a constant.
    let step = |k: usize| -> Option<i128> {
        let add = body.instruction(*next.operands.get(k)?);
        let &[x, y] = add.operands.as_slice() else {
            return None;
        };
        let (x, y) = (body.instruction(x), body.instruction(y));
        match (state_element(body, x), state_element(body, y)) {
            _ if add.opcode != Opcode::Add => None,
            (Some(j), None) if j == k => y.integer_constant(),
            (None, Some(j)) if j == k => x.integer_constant(),
            _ => None,
        }
    };
    let ty = |k: usize| {
        let t = body
            .instruction(*next.operands.get(k)?)
            .shape
            .element_type()?;
        t.is_integral().then_some(t)
    };
    // The counter the condition tests, and the number of trips.
    let (k, limit, direction, counter) = element_test(cond, cond.root_instruction())?;
    if ty(k)? != counter {
        return None;
    }
    let trips = trip_count(start(k)?, step(k)?, limit, direction, counter)?;
    if trips == 0 {
        return None;
    }
    Some(
        (0..init.operands.len())
            .map(|j| {
                let (s, c, t) = (start(j)?, step(j)?, ty(j)?);
                let last = s.checked_add(c.checked_mul(trips - 1)?)?;
                let (lo, hi) = (s.min(last), s.max(last));
                (in_range(lo, t) && in_range(hi, t)).then_some((lo, hi))
            })
            .collect(),
    )
}

fn in_range(v: i128, ty: PrimitiveType) -> bool {
    let bits = ty.bit_width() as u32;
    let (min, max) = match ty.is_signed_int() {
        true => (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1),
        false => (0, (1i128 << bits) - 1),
    };
    (min..=max).contains(&v)
}

/// How many trips a counter starting at `s`, stepping by `c` and tested
/// with `counter direction limit` makes, where every value it takes until
/// the test fails is one of `ty`'s (no wrapping): the test is then monotone
/// in the trip, so the first and last trips and the one after decide it.
/// `None` for equality tests and counters that would wrap or never stop.
fn trip_count(
    s: i128,
    c: i128,
    limit: i128,
    direction: ComparisonDirection,
    ty: PrimitiveType,
) -> Option<i128> {
    use ComparisonDirection::*;
    if !holds(direction, s, limit) {
        return Some(0);
    }
    let trips = match direction {
        Lt if c > 0 => (limit - s + c - 1) / c,
        Le if c > 0 => (limit - s) / c + 1,
        Gt if c < 0 => (s - limit + (-c) - 1) / (-c),
        Ge if c < 0 => (s - limit) / (-c) + 1,
        _ => return None,
    };
    let at = |t: i128| s + t * c;
    let exact = trips >= 1
        && holds(direction, at(trips - 1), limit)
        && !holds(direction, at(trips), limit)
        && in_range(at(trips), ty);
    exact.then_some(trips)
}

/// The value of `instr` (in the loop body `comp`) if it is a comparison of
/// a state element whose range is known with a constant that the whole
/// range decides.
fn decided(
    comp: &HloComputation,
    instr: &HloInstruction,
    ranges: &[Option<(i128, i128)>],
) -> Option<bool> {
    use ComparisonDirection::*;
    // (A scalar: a constant of one element may have a shape like `[1]`.)
    if !instr.shape.as_array().is_some_and(|a| a.dims().is_empty()) {
        return None;
    }
    let (k, c, direction, _) = element_test(comp, instr)?;
    let (lo, hi) = (*ranges.get(k)?)?;
    match direction {
        // Monotone in the element: the ends decide.
        Lt | Le | Gt | Ge => {
            let v = holds(direction, lo, c);
            (v == holds(direction, hi, c)).then_some(v)
        }
        Eq | Ne if c < lo || c > hi => Some(direction == Ne),
        Eq | Ne if lo == hi => Some(holds(direction, lo, c)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trip_counts_in_closed_form() {
        use ComparisonDirection::*;
        let s32 = PrimitiveType::S32;
        assert_eq!(trip_count(0, 1, 1000, Lt, s32), Some(1000));
        assert_eq!(trip_count(0, 3, 10, Lt, s32), Some(4));
        assert_eq!(trip_count(0, 3, 9, Le, s32), Some(4));
        assert_eq!(trip_count(10, -3, 0, Gt, s32), Some(4));
        assert_eq!(trip_count(9, -3, 0, Ge, s32), Some(4));
        assert_eq!(trip_count(5, 1, 5, Lt, s32), Some(0));
        // A step away from the limit never stops; equality tests are not
        // counted here.
        assert_eq!(trip_count(0, -1, 10, Lt, s32), None);
        assert_eq!(trip_count(0, 1, 10, Ne, s32), None);
        // The counter would wrap past the type's end before the test fails.
        assert_eq!(trip_count(0, 1, 127, Le, PrimitiveType::S8), None);
        assert_eq!(trip_count(0, 1, 127, Lt, PrimitiveType::S8), Some(127));
    }
}
