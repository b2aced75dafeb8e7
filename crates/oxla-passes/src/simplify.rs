//! Algebraic simplification: identities removed (`reshape` to the same
//! shape, full slices, zero padding, `x * 1`, ...), chains of data movement
//! folded into one operation (`reshape` of `reshape`, `transpose` of
//! `transpose`, `broadcast` of `broadcast`, `slice` of `slice`), tuples
//! taken apart where they are built, and dynamic slices with constant
//! starts turned into static ones. Every rule is exact: the rewritten
//! instruction computes the same bits on every input. Rules that only hold
//! up to the sign of zero (`x + 0.0`) are applied to integers only.

use oxla_hlo::ir::{Attrs, SliceDim};
use oxla_hlo::{HloComputation, HloInstruction, HloModule, InstrId, Opcode, PrimitiveType, Scalar};

use crate::Pass;
use crate::forward::Forward;

pub struct Simplify;

impl Pass for Simplify {
    fn name(&self) -> &'static str {
        "simplify"
    }

    fn run(&self, module: &mut HloModule) -> bool {
        let mut changed = false;
        for comp in module.computations_mut() {
            let n = comp.instructions().len();
            let mut forward = Forward::new(n);
            for k in 0..n {
                changed |= forward.apply(&mut comp.instructions_mut()[k]);
                match simplify(comp, k) {
                    Action::Keep => {}
                    Action::Replace(j) => {
                        forward.set(k, j);
                        changed = true;
                    }
                    Action::Rewrite(instr) => {
                        comp.instructions_mut()[k] = *instr;
                        changed = true;
                    }
                }
            }
            changed |= forward.finish(comp);
        }
        changed
    }
}

enum Action {
    Keep,
    /// Uses read this earlier instruction instead.
    Replace(InstrId),
    /// The instruction becomes this one (same name and shape).
    Rewrite(Box<HloInstruction>),
}

fn dims(comp: &HloComputation, id: InstrId) -> Option<&[i64]> {
    comp.instruction(id).shape.as_array().map(|a| a.dims())
}

/// Whether every element of `id`'s value is known and satisfies `f`:
/// constants, and broadcasts or reshapes of them.
fn all_elements(comp: &HloComputation, id: InstrId, f: &dyn Fn(Scalar) -> bool) -> bool {
    let instr = comp.instruction(id);
    match instr.opcode {
        Opcode::Constant => {
            let Some(array) = instr.attrs.literal.as_ref().and_then(|l| l.as_array()) else {
                return false;
            };
            let data = array.data();
            // Checking a huge constant costs more than the rewrite saves.
            data.len() <= 1 << 16 && (0..data.len()).all(|i| f(data.scalar(i)))
        }
        Opcode::Broadcast | Opcode::Reshape => all_elements(comp, instr.operands[0], f),
        _ => false,
    }
}

fn is_one(s: Scalar) -> bool {
    matches!(s, Scalar::Pred(true) | Scalar::Int(1)) || matches!(s, Scalar::Float(f) if f == 1.0)
}

fn is_int_zero(s: Scalar) -> bool {
    matches!(s, Scalar::Int(0) | Scalar::Pred(false))
}

fn is_neg_zero(s: Scalar) -> bool {
    matches!(s, Scalar::Float(f) if f == 0.0 && f.is_sign_negative())
}

fn is_pos_zero(s: Scalar) -> bool {
    matches!(s, Scalar::Float(f) if f == 0.0 && f.is_sign_positive())
}

fn is_neg_inf(s: Scalar) -> bool {
    matches!(s, Scalar::Float(f) if f == f64::NEG_INFINITY)
}

fn is_pos_inf(s: Scalar) -> bool {
    matches!(s, Scalar::Float(f) if f == f64::INFINITY)
}

fn rewrite(instr: &HloInstruction, opcode: Opcode, operands: Vec<InstrId>, attrs: Attrs) -> Action {
    let mut new = instr.clone();
    new.opcode = opcode;
    new.operands = operands;
    new.attrs = Attrs {
        passthrough: instr.attrs.passthrough.clone(),
        ..attrs
    };
    Action::Rewrite(Box::new(new))
}

fn with_dims(dimensions: Vec<i64>) -> Attrs {
    Attrs {
        dimensions: Some(dimensions),
        ..Attrs::default()
    }
}

/// `instr` (a broadcast or transpose of an iota) as an iota of its own
/// shape counting along `along`: the same values, computed where they are
/// read instead of copied.
fn iota(instr: &HloInstruction, along: i64) -> Action {
    rewrite(
        instr,
        Opcode::Iota,
        Vec::new(),
        Attrs {
            iota_dimension: Some(along),
            ..Attrs::default()
        },
    )
}

fn is_identity(perm: &[i64]) -> bool {
    perm.iter().enumerate().all(|(i, &p)| p == i as i64)
}

/// The dimensions of `dims` larger than one, by position.
fn spread(dims: &[i64]) -> Vec<usize> {
    (0..dims.len()).filter(|&d| dims[d] != 1).collect()
}

/// How many transposes and reshapes a chain is followed through.
const CHAIN_DEPTH: usize = 8;

/// For a chain of transposes and reshapes that only add or drop size-1
/// dimensions ending at `id`: the instruction the chain starts from, for
/// each of `id`'s dimensions larger than one the position of the one it is
/// among the source's, and whether the chain holds a transpose.
fn relabeled(comp: &HloComputation, id: InstrId, depth: usize) -> (InstrId, Vec<usize>, bool) {
    let instr = comp.instruction(id);
    let own = || {
        (
            id,
            (0..spread(dims(comp, id).unwrap_or_default()).len()).collect(),
            false,
        )
    };
    let (Some(out), Some(&operand)) = (dims(comp, id), instr.operands.first()) else {
        return own();
    };
    let Some(in_dims) = dims(comp, operand) else {
        return own();
    };
    if depth == 0 || instr.shape.element_type() != comp.instruction(operand).shape.element_type() {
        return own();
    }
    match instr.opcode {
        Opcode::Transpose => {
            let perm = instr.attrs.dimensions.as_deref().unwrap_or_default();
            if perm.len() != out.len() {
                return own();
            }
            let (source, order, _) = relabeled(comp, operand, depth - 1);
            let inner = spread(in_dims);
            let mapped: Option<Vec<usize>> = spread(out)
                .into_iter()
                .map(|d| {
                    let from = usize::try_from(perm[d]).ok()?;
                    order.get(inner.iter().position(|&i| i == from)?).copied()
                })
                .collect();
            match mapped {
                Some(order) => (source, order, true),
                None => own(),
            }
        }
        Opcode::Reshape => {
            let kept = |d: &[i64]| spread(d).into_iter().map(|i| d[i]).collect::<Vec<_>>();
            if kept(out) != kept(in_dims) {
                return own();
            }
            relabeled(comp, operand, depth - 1)
        }
        _ => own(),
    }
}

/// A transpose or reshape at the end of a chain of them that, taken
/// together, keeps every element in place (such as JAX's transpose, add a
/// unit dimension, transpose back): a reshape of the chain's source, or the
/// source itself.
fn unmoved(comp: &HloComputation, instr: &HloInstruction, id: InstrId) -> Option<Action> {
    let (source, order, moved) = relabeled(comp, id, CHAIN_DEPTH);
    if source == id || !moved || order.iter().enumerate().any(|(i, &o)| i != o) {
        return None;
    }
    let out = dims(comp, id)?;
    if dims(comp, source) == Some(out) {
        return Some(Action::Replace(source));
    }
    Some(rewrite(
        instr,
        Opcode::Reshape,
        vec![source],
        Attrs::default(),
    ))
}

fn simplify(comp: &HloComputation, k: usize) -> Action {
    let instr = &comp.instructions()[k];
    if !instr.control_predecessors.is_empty() {
        return Action::Keep;
    }
    let out_dims = instr.shape.as_array().map(|a| a.dims());
    let ty = instr.shape.element_type();
    let operand = |i: usize| comp.instruction(instr.operands[i]);
    // The operand `i`, when its value has the result's dimensions.
    let keep_operand = |i: usize| {
        let id = instr.operands[i];
        (out_dims.is_some() && dims(comp, id) == out_dims).then_some(Action::Replace(id))
    };
    // A broadcast of a scalar to the result's shape, when `id` is one.
    let scalar_broadcast = |id: InstrId| {
        let producer = comp.instruction(id);
        let scalar = producer
            .operands
            .first()
            .copied()
            .filter(|&s| dims(comp, s) == Some(&[]))?;
        (producer.opcode == Opcode::Broadcast).then(|| {
            rewrite(
                instr,
                Opcode::Broadcast,
                vec![scalar],
                with_dims(Vec::new()),
            )
        })
    };
    if matches!(instr.opcode, Opcode::Reshape | Opcode::Transpose)
        && let Some(action) = unmoved(comp, instr, InstrId::new(k))
    {
        return action;
    }
    let action = match instr.opcode {
        Opcode::Reshape => keep_operand(0).or_else(|| match operand(0).opcode {
            Opcode::Reshape => Some(rewrite(
                instr,
                Opcode::Reshape,
                operand(0).operands.clone(),
                Attrs::default(),
            )),
            Opcode::Broadcast => scalar_broadcast(instr.operands[0]),
            _ => None,
        }),
        Opcode::Transpose => {
            let perm = instr.attrs.dimensions.as_deref().unwrap_or_default();
            if is_identity(perm) {
                keep_operand(0)
            } else {
                match operand(0).opcode {
                    Opcode::Transpose => {
                        let inner = operand(0).attrs.dimensions.as_deref().unwrap_or_default();
                        let composed: Vec<i64> = perm.iter().map(|&p| inner[p as usize]).collect();
                        let source = operand(0).operands[0];
                        if is_identity(&composed) {
                            Some(Action::Replace(source))
                        } else {
                            Some(rewrite(
                                instr,
                                Opcode::Transpose,
                                vec![source],
                                with_dims(composed),
                            ))
                        }
                    }
                    Opcode::Broadcast => scalar_broadcast(instr.operands[0]),
                    Opcode::Iota => {
                        // Result dimension j is operand dimension perm[j].
                        let along = operand(0).attrs.iota_dimension;
                        along
                            .and_then(|d| perm.iter().position(|&p| p == d))
                            .map(|j| iota(instr, j as i64))
                    }
                    _ => None,
                }
            }
        }
        Opcode::Broadcast => {
            let map = instr.attrs.dimensions.as_deref().unwrap_or_default();
            if is_identity(map) && dims(comp, instr.operands[0]) == out_dims {
                keep_operand(0)
            } else if operand(0).opcode == Opcode::Broadcast {
                let inner = operand(0).attrs.dimensions.as_deref().unwrap_or_default();
                let composed = inner.iter().map(|&d| map[d as usize]).collect();
                Some(rewrite(
                    instr,
                    Opcode::Broadcast,
                    operand(0).operands.clone(),
                    with_dims(composed),
                ))
            } else if operand(0).opcode == Opcode::Iota {
                // The counter runs along the dimension its own maps to,
                // unless that one only repeats a counter of size 1 (all
                // zeros).
                let along = operand(0).attrs.iota_dimension;
                let size =
                    |dims: Option<&[i64]>, d: i64| dims?.get(usize::try_from(d).ok()?).copied();
                along
                    .and_then(|d| {
                        let to = *map.get(usize::try_from(d).ok()?)?;
                        let kept = size(dims(comp, instr.operands[0]), d) == size(out_dims, to);
                        kept.then_some(to)
                    })
                    .map(|d| iota(instr, d))
            } else {
                None
            }
        }
        Opcode::Convert => (operand(0).shape.element_type() == ty)
            .then(|| keep_operand(0))
            .flatten(),
        Opcode::Copy => Some(Action::Replace(instr.operands[0])),
        Opcode::Slice => simplify_slice(comp, instr),
        Opcode::Pad => {
            let padding = instr.attrs.padding.as_deref().unwrap_or_default();
            padding
                .iter()
                .all(|p| p.low == 0 && p.high == 0 && p.interior == 0)
                .then(|| keep_operand(0))
                .flatten()
        }
        Opcode::Reverse => {
            let reversed = instr.attrs.dimensions.as_deref().unwrap_or_default();
            let in_dims = dims(comp, instr.operands[0]).unwrap_or_default();
            if reversed
                .iter()
                .all(|&d| in_dims.get(d as usize).is_some_and(|&n| n <= 1))
            {
                keep_operand(0)
            } else if operand(0).opcode == Opcode::Reverse
                && same_set(operand(0).attrs.dimensions.as_deref(), reversed)
            {
                Some(Action::Replace(operand(0).operands[0]))
            } else {
                None
            }
        }
        Opcode::Concatenate if instr.operands.len() == 1 => keep_operand(0),
        Opcode::Not | Opcode::Negate if operand(0).opcode == instr.opcode => {
            Some(Action::Replace(operand(0).operands[0]))
        }
        Opcode::Multiply
        | Opcode::Divide
        | Opcode::Add
        | Opcode::Subtract
        | Opcode::And
        | Opcode::Or
        | Opcode::Xor
        | Opcode::Maximum
        | Opcode::Minimum => ty.and_then(|ty| simplify_identity_element(comp, instr, ty)),
        Opcode::Select => {
            let pred = instr.operands[0];
            if all_elements(comp, pred, &|s| s == Scalar::Pred(true)) {
                keep_operand(1)
            } else if all_elements(comp, pred, &|s| s == Scalar::Pred(false)) {
                keep_operand(2)
            } else {
                None
            }
        }
        Opcode::Compare => simplify_pred_compare(comp, instr),
        Opcode::GetTupleElement if operand(0).opcode == Opcode::Tuple => {
            let index = instr.attrs.tuple_index.unwrap_or(usize::MAX);
            operand(0)
                .operands
                .get(index)
                .map(|&id| Action::Replace(id))
        }
        Opcode::Tuple => rebuilt_tuple(comp, instr).map(Action::Replace),
        Opcode::DynamicSlice => static_slice(comp, instr),
        _ => None,
    };
    action.unwrap_or(Action::Keep)
}

fn same_set(a: Option<&[i64]>, b: &[i64]) -> bool {
    let mut a = a.unwrap_or_default().to_vec();
    let mut b = b.to_vec();
    a.sort_unstable();
    b.sort_unstable();
    a == b
}

/// `x * 1`, `x / 1`, `x + 0`, `x - 0`, `x & true`, `x | 0`, `x ^ 0`,
/// `max(x, -inf)`, `min(x, inf)`.
fn simplify_identity_element(
    comp: &HloComputation,
    instr: &HloInstruction,
    ty: PrimitiveType,
) -> Option<Action> {
    if ty.is_complex() {
        // (a+bi)(1+0i) computes b*0, which is NaN for infinite b.
        return None;
    }
    let (lhs, rhs) = (instr.operands[0], instr.operands[1]);
    let out_dims = instr.shape.as_array().map(|a| a.dims());
    // `x + 0.0` turns -0.0 into +0.0, but `x + -0.0` and `x - 0.0` are exact.
    let additive_zero: &dyn Fn(Scalar) -> bool = if ty.is_float() {
        &is_neg_zero
    } else {
        &is_int_zero
    };
    let (left_identity, right_identity): (
        Option<&dyn Fn(Scalar) -> bool>,
        &dyn Fn(Scalar) -> bool,
    ) = match instr.opcode {
        Opcode::Multiply => (Some(&is_one), &is_one),
        Opcode::Divide => (None, &is_one),
        Opcode::Add => (Some(additive_zero), additive_zero),
        Opcode::Subtract => (
            None,
            if ty.is_float() {
                &is_pos_zero
            } else {
                &is_int_zero
            },
        ),
        Opcode::And if ty.is_pred() => (Some(&|s| s == Scalar::Pred(true)), &|s| {
            s == Scalar::Pred(true)
        }),
        Opcode::Or | Opcode::Xor => (Some(&is_int_zero), &is_int_zero),
        // max(x, -inf) is x, NaN included (maximum propagates NaN).
        Opcode::Maximum if ty.is_float() => (Some(&is_neg_inf), &is_neg_inf),
        Opcode::Minimum if ty.is_float() => (Some(&is_pos_inf), &is_pos_inf),
        _ => return None,
    };
    let keep = |id: InstrId| (dims(comp, id) == out_dims).then_some(Action::Replace(id));
    if all_elements(comp, rhs, right_identity) {
        keep(lhs)
    } else if left_identity.is_some_and(|f| all_elements(comp, lhs, f)) {
        keep(rhs)
    } else {
        None
    }
}

/// An equality test of predicates against a constant: `x == true` and
/// `x != false` are `x`, `x == false` and `x != true` are `not(x)` (JAX
/// writes `lt != false` when it compares a remainder's sign with a
/// divisor's known one).
fn simplify_pred_compare(comp: &HloComputation, instr: &HloInstruction) -> Option<Action> {
    use oxla_hlo::ir::ComparisonDirection::{Eq, Ne};
    let (lhs, rhs) = (instr.operands[0], instr.operands[1]);
    let direction = instr.attrs.comparison_direction?;
    if !comp.instruction(lhs).shape.element_type()?.is_pred() || !matches!(direction, Eq | Ne) {
        return None;
    }
    let out_dims = instr.shape.as_array().map(|a| a.dims());
    for (x, c) in [(lhs, rhs), (rhs, lhs)] {
        if dims(comp, x) != out_dims {
            continue;
        }
        for value in [true, false] {
            if all_elements(comp, c, &|s| s == Scalar::Pred(value)) {
                // Equal to `true` or unequal to `false`: `x` itself.
                return Some(if (direction == Eq) == value {
                    Action::Replace(x)
                } else {
                    rewrite(instr, Opcode::Not, vec![x], Attrs::default())
                });
            }
        }
    }
    None
}

/// A full slice disappears; a slice of a slice becomes one slice.
fn simplify_slice(comp: &HloComputation, instr: &HloInstruction) -> Option<Action> {
    let outer = instr.attrs.slice.as_deref()?;
    let source = instr.operands[0];
    let in_dims = dims(comp, source)?;
    if outer
        .iter()
        .zip(in_dims)
        .all(|(s, &n)| s.start == 0 && s.stride == 1 && s.limit == n)
    {
        return Some(Action::Replace(source));
    }
    let producer = comp.instruction(source);
    if producer.opcode != Opcode::Slice {
        return None;
    }
    let inner = producer.attrs.slice.as_deref()?;
    let out_dims = instr.shape.as_array()?.dims();
    // Checked: dimensions of empty arrays can be huge.
    let composed = outer
        .iter()
        .zip(inner)
        .zip(out_dims)
        .map(|((o, i), &n)| {
            let start = i.start.checked_add(o.start.checked_mul(i.stride)?)?;
            let stride = i.stride.checked_mul(o.stride)?;
            let limit = if n == 0 {
                start
            } else {
                start
                    .checked_add((n - 1).checked_mul(stride)?)?
                    .checked_add(1)?
            };
            Some(SliceDim {
                start,
                limit,
                stride,
            })
        })
        .collect::<Option<Vec<_>>>()?;
    Some(rewrite(
        instr,
        Opcode::Slice,
        producer.operands.clone(),
        Attrs {
            slice: Some(composed),
            ..Attrs::default()
        },
    ))
}

/// `tuple(gte(t, 0), ..., gte(t, n-1))` is `t` itself.
fn rebuilt_tuple(comp: &HloComputation, instr: &HloInstruction) -> Option<InstrId> {
    let first = comp.instruction(*instr.operands.first()?);
    let source = *first.operands.first()?;
    let arity = comp.instruction(source).shape.tuple_shapes()?.len();
    let rebuilt = arity == instr.operands.len()
        && instr.operands.iter().enumerate().all(|(i, &id)| {
            let e = comp.instruction(id);
            e.opcode == Opcode::GetTupleElement
                && e.operands == [source]
                && e.attrs.tuple_index == Some(i)
        });
    (rebuilt && comp.instruction(source).shape.compatible(&instr.shape)).then_some(source)
}

/// A dynamic slice whose starts are constants is a static slice, with the
/// starts clamped the way dynamic-slice clamps them.
fn static_slice(comp: &HloComputation, instr: &HloInstruction) -> Option<Action> {
    let source = instr.operands[0];
    let in_dims = dims(comp, source)?;
    let sizes = instr.attrs.dynamic_slice_sizes.as_deref()?;
    let constant = |id: InstrId| {
        let c = comp.instruction(id);
        (c.opcode == Opcode::Constant)
            .then(|| c.attrs.literal.as_ref()?.as_array())
            .flatten()
    };
    let starts: Vec<i128> = match &instr.operands[1..] {
        // The seed's form: one vector of starts.
        [v] if dims(comp, *v).is_some_and(|d| d.len() == 1) => {
            let data = constant(*v)?.data();
            (0..data.len()).map(|i| data.scalar(i).as_i128()).collect()
        }
        scalars => scalars
            .iter()
            .map(|&s| constant(s).map(|a| a.data().scalar(0).as_i128()))
            .collect::<Option<_>>()?,
    };
    if starts.len() != in_dims.len() || sizes.len() != in_dims.len() {
        return None;
    }
    let slice = starts
        .iter()
        .zip(in_dims.iter().zip(sizes))
        .map(|(&s, (&n, &size))| {
            let start = s.clamp(0, (n - size).max(0) as i128) as i64;
            SliceDim {
                start,
                limit: start + size,
                stride: 1,
            }
        })
        .collect();
    Some(rewrite(
        instr,
        Opcode::Slice,
        vec![source],
        Attrs {
            slice: Some(slice),
            ..Attrs::default()
        },
    ))
}
