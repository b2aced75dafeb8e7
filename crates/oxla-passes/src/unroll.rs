//! Unrolling `while` loops whose trip count is known at compile time and
//! small: the loop becomes that many copies of its body, one feeding the
//! next, so fusion runs across iterations. JAX's `fori_loop`s with constant
//! bounds, the five rounds of its threefry PRNG among them, take this form:
//! a counter in the state tuple that starts at a constant, grows by a
//! constant each trip, and is compared with a constant.
//!
//! The trip count is found by running the counter exactly as the loop would
//! (the counter's own type, wrapping), so it is right for any start, step
//! and bound, overflow included; a loop that would run longer than
//! [`MAX_TRIPS`] is left alone.

use oxla_hlo::ir::{ComparisonDirection, ComparisonType};
use oxla_hlo::{HloComputation, HloInstruction, HloModule, InstrId, Opcode, PrimitiveType};

use crate::Pass;
use crate::effects::Effects;
use crate::splice::{Names, rebuild};

/// Loops with more trips than this stay loops.
pub const MAX_TRIPS: usize = 8;
/// Nor is a loop unrolled into more instructions than this,
const MAX_INSTRUCTIONS: usize = 4096;
/// nor a computation grown past this many by unrolling.
const MAX_COMPUTATION: usize = 1 << 16;

pub struct UnrollWhile;

impl Pass for UnrollWhile {
    fn name(&self) -> &'static str {
        "unroll-while"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        if !module
            .computations()
            .iter()
            .any(|c| c.instructions().iter().any(|i| i.opcode == Opcode::While))
        {
            return false;
        }
        let effects = Effects::new(module);
        let mut names = Names::of(module);
        let mut changed = false;
        for c in 0..module.computations().len() {
            let mut size = module.computations()[c].instructions().len();
            changed |= rebuild(module, c, &mut names, |callees, splice, instr, operands| {
                if instr.opcode != Opcode::While
                    || !instr.control_predecessors.is_empty()
                    || effects.of(instr)
                {
                    return None;
                }
                let cond = callees.get(instr.called.condition?.index())?;
                let body = callees.get(instr.called.body?.index())?;
                let &[init] = operands else {
                    return None;
                };
                let trips = trip_count(cond, body, &splice.out, init)?;
                let added = trips * body.instructions().len();
                if added > MAX_INSTRUCTIONS || size + added > MAX_COMPUTATION {
                    return None;
                }
                size += added;
                let mut state = init;
                for _ in 0..trips {
                    state = splice.inline(body, &[state])?;
                }
                Some(state)
            });
        }
        changed
    }
}

/// The tuple index `k` if `instr` is `get-tuple-element(parameter 0, k)` of `comp`.
pub(crate) fn state_element(comp: &HloComputation, instr: &HloInstruction) -> Option<usize> {
    let &[t] = instr.operands.as_slice() else {
        return None;
    };
    let tuple = comp.instruction(t);
    (instr.opcode == Opcode::GetTupleElement
        && tuple.opcode == Opcode::Parameter
        && tuple.attrs.parameter_number == Some(0))
    .then_some(instr.attrs.tuple_index?)
}

/// `v` wrapped to integer type `ty`, as that type's arithmetic leaves it.
fn wrap(v: i128, ty: PrimitiveType) -> i128 {
    let bits = ty.bit_width() as u32;
    let m = v.rem_euclid(1i128 << bits);
    if ty.is_signed_int() && m >= 1i128 << (bits - 1) {
        m - (1i128 << bits)
    } else {
        m
    }
}

/// How many times the loop runs its body when started from instruction
/// `init` of `out`, if the loop is a counted one (see the module comment)
/// that stops within [`MAX_TRIPS`].
fn trip_count(
    cond: &HloComputation,
    body: &HloComputation,
    out: &[HloInstruction],
    init: InstrId,
) -> Option<usize> {
    // The condition: counter `k` compared with a constant.
    let (k, limit, direction, ty) = element_test(cond, cond.root_instruction())?;
    // The body: the counter's next value is the counter plus a constant.
    let next = body.root_instruction();
    if next.opcode != Opcode::Tuple {
        return None;
    }
    let step = body.instruction(*next.operands.get(k)?);
    let &[x, y] = step.operands.as_slice() else {
        return None;
    };
    let (x, y) = (body.instruction(x), body.instruction(y));
    let by = match (state_element(body, x), state_element(body, y)) {
        _ if step.opcode != Opcode::Add => return None,
        (Some(j), None) if j == k => y.integer_constant()?,
        (None, Some(j)) if j == k => x.integer_constant()?,
        _ => return None,
    };
    // The start: element `k` of the tuple the loop begins with.
    let start = out.get(init.index())?;
    if start.opcode != Opcode::Tuple {
        return None;
    }
    let mut v = out
        .get(start.operands.get(k)?.index())?
        .integer_constant()?;
    let mut trips = 0;
    while holds(direction, v, limit) {
        trips += 1;
        if trips > MAX_TRIPS {
            return None;
        }
        v = wrap(v + by, ty);
    }
    Some(trips)
}

/// `instr` of `comp` as a comparison of a state element with an integer
/// constant, in the order of the element's type: the element's index, the
/// constant, the direction with the element on the left, and the type.
pub(crate) fn element_test(
    comp: &HloComputation,
    instr: &HloInstruction,
) -> Option<(usize, i128, ComparisonDirection, PrimitiveType)> {
    let &[a, b] = instr.operands.as_slice() else {
        return None;
    };
    if instr.opcode != Opcode::Compare {
        return None;
    }
    let (a, b) = (comp.instruction(a), comp.instruction(b));
    let direction = instr.attrs.comparison_direction?;
    let (k, c, direction) = match (state_element(comp, a), state_element(comp, b)) {
        (Some(k), None) => (k, b.integer_constant()?, direction),
        (None, Some(k)) => (k, a.integer_constant()?, flip(direction)),
        _ => return None,
    };
    let ty = a.shape.element_type()?;
    if b.shape.element_type() != Some(ty) {
        return None;
    }
    let ordered = !instr
        .attrs
        .comparison_type
        .is_some_and(|t| t != natural(ty));
    (ty.is_integral() && ordered).then_some((k, c, direction, ty))
}

/// The comparison a type's values compare by.
fn natural(ty: PrimitiveType) -> ComparisonType {
    if ty.is_signed_int() {
        ComparisonType::Signed
    } else {
        ComparisonType::Unsigned
    }
}

/// The direction that gives the same result with the operands swapped.
pub(crate) fn flip(d: ComparisonDirection) -> ComparisonDirection {
    use ComparisonDirection::*;
    match d {
        Lt => Gt,
        Le => Ge,
        Gt => Lt,
        Ge => Le,
        d => d,
    }
}

pub(crate) fn holds(d: ComparisonDirection, a: i128, b: i128) -> bool {
    use ComparisonDirection::*;
    match d {
        Eq => a == b,
        Ne => a != b,
        Lt => a < b,
        Le => a <= b,
        Gt => a > b,
        Ge => a >= b,
    }
}
