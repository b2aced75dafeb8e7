//! Element-wise operations on arrays: unary and binary arithmetic, compare,
//! reduce-precision, clamp and select. The per-element semantics live in
//! [`crate::element`]; this module applies them over arrays (a typed loop when
//! the element type stays the same, an [`Elem`] loop when it changes).

use oxla_hlo::shape_inference::default_comparison_type;
use oxla_hlo::with_array_data;
use oxla_hlo::{ArrayData, ArrayLiteral, HloInstruction, NativeType, Opcode, PrimitiveType};

use super::{attr, result_array};
use crate::element::{self, Elem, Element};
use crate::error::{OpResult, fail};
use crate::value::{Value, make_array};

fn not_applicable(op: &str, ty: PrimitiveType) -> String {
    format!("{op} does not apply to element type {ty}")
}

fn map_same<T: Element>(op: Opcode, v: &[T]) -> Option<ArrayData> {
    let mut out = Vec::with_capacity(v.len());
    for &x in v {
        out.push(T::unary(op, x)?);
    }
    Some(T::wrap(out))
}

fn zip_same<T: Element>(op: Opcode, a: &[T], b: &ArrayData) -> Option<ArrayData> {
    let b = T::slice(b)?;
    let mut out = Vec::with_capacity(a.len());
    for (&x, &y) in a.iter().zip(b) {
        out.push(T::binary(op, x, y)?);
    }
    Some(T::wrap(out))
}

/// Applies `f` to every element of `data`, producing elements of type `ty`.
pub(crate) fn map_elems(
    data: &ArrayData,
    ty: PrimitiveType,
    mut f: impl FnMut(Elem) -> Option<Elem>,
) -> Option<ArrayData> {
    let n = data.len();
    let mut out = ArrayData::zeros(ty, n);
    for i in 0..n {
        if !f(Elem::read(data, i))?.write(&mut out, i) {
            return None;
        }
    }
    Some(out)
}

fn map2_elems(
    a: &ArrayData,
    b: &ArrayData,
    ty: PrimitiveType,
    mut f: impl FnMut(Elem, Elem) -> Option<Elem>,
) -> Option<ArrayData> {
    let n = a.len();
    let mut out = ArrayData::zeros(ty, n);
    for i in 0..n {
        if !f(Elem::read(a, i), Elem::read(b, i))?.write(&mut out, i) {
            return None;
        }
    }
    Some(out)
}

fn operand(operands: &[Value], k: usize) -> OpResult<&ArrayLiteral> {
    match operands.get(k) {
        Some(v) => v.as_array(),
        None => fail(format!("missing operand {k}")),
    }
}

/// A unary arithmetic operation (abs, exp, not, is-finite, real, ...).
pub(crate) fn unary(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operand(operands, 0)?;
    let out = result_array(instr)?;
    let op = instr.opcode;
    let data = if out.element_type() == x.element_type() {
        with_array_data!(x.data(), v => map_same(op, v))
    } else {
        map_elems(x.data(), out.element_type(), |e| element::unary(op, e))
    };
    match data {
        Some(d) => Ok(Value::array(make_array(out, d)?)),
        None => fail(not_applicable(op.name(), x.element_type())),
    }
}

pub(crate) fn reduce_precision(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operand(operands, 0)?;
    let out = result_array(instr)?;
    let e = *attr(&instr.attrs.exponent_bits, "exponent_bits")?;
    let m = *attr(&instr.attrs.mantissa_bits, "mantissa_bits")?;
    let (e, m) = (e.clamp(0, 64) as u32, m.clamp(0, 64) as u32);
    match map_elems(x.data(), x.element_type(), |v| {
        element::reduce_precision(v, e, m)
    }) {
        Some(d) => Ok(Value::array(make_array(out, d)?)),
        None => fail(format!(
            "reduce-precision to {e} exponent bits does not apply to {}",
            x.shape()
        )),
    }
}

fn same_count(a: &ArrayLiteral, b: &ArrayLiteral) -> OpResult<()> {
    if a.element_count() != b.element_count() || a.element_type() != b.element_type() {
        return fail(format!(
            "operands {} and {} must have the same shape",
            a.shape(),
            b.shape()
        ));
    }
    Ok(())
}

/// A binary arithmetic operation (add, divide, shift-left, complex, ...).
pub(crate) fn binary(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let a = operand(operands, 0)?;
    let b = operand(operands, 1)?;
    same_count(a, b)?;
    let out = result_array(instr)?;
    let op = instr.opcode;
    let data = if out.element_type() == a.element_type() {
        with_array_data!(a.data(), v => zip_same(op, v, b.data()))
    } else {
        map2_elems(a.data(), b.data(), out.element_type(), |x, y| {
            element::binary(op, x, y)
        })
    };
    match data {
        Some(d) => Ok(Value::array(make_array(out, d)?)),
        None => fail(not_applicable(op.name(), a.element_type())),
    }
}

fn compare_slices<T: Element>(
    dir: oxla_hlo::ir::ComparisonDirection,
    ty: oxla_hlo::ir::ComparisonType,
    a: &[T],
    b: &ArrayData,
) -> Option<Vec<bool>> {
    let b = T::slice(b)?;
    a.iter()
        .zip(b)
        .map(|(&x, &y)| T::compare(dir, ty, x, y))
        .collect()
}

/// `compare`, with the comparison type defaulting from the element type.
pub(crate) fn compare(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let a = operand(operands, 0)?;
    let b = operand(operands, 1)?;
    same_count(a, b)?;
    let out = result_array(instr)?;
    let dir = *attr(&instr.attrs.comparison_direction, "direction")?;
    let ty = instr
        .attrs
        .comparison_type
        .unwrap_or_else(|| default_comparison_type(a.element_type()));
    match with_array_data!(a.data(), v => compare_slices(dir, ty, v, b.data())) {
        Some(v) => Ok(Value::array(make_array(out, ArrayData::Pred(v))?)),
        None => fail(format!(
            "comparison type {ty} does not apply to element type {}",
            a.element_type()
        )),
    }
}

fn clamp_slices<T: Element>(lo: &ArrayData, x: &[T], hi: &ArrayData) -> Option<ArrayData> {
    let (lo, hi) = (T::slice(lo)?, T::slice(hi)?);
    let pick = |s: &[T], i: usize| if s.len() == 1 { s[0] } else { s[i] };
    let mut out = Vec::with_capacity(x.len());
    for (i, &v) in x.iter().enumerate() {
        let v = T::binary(Opcode::Maximum, v, pick(lo, i))?;
        out.push(T::binary(Opcode::Minimum, v, pick(hi, i))?);
    }
    Some(T::wrap(out))
}

/// `clamp(min, x, max)` = `minimum(maximum(x, min), max)`; `min` and `max`
/// may be scalars.
pub(crate) fn clamp(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let lo = operand(operands, 0)?;
    let x = operand(operands, 1)?;
    let hi = operand(operands, 2)?;
    let out = result_array(instr)?;
    for bound in [lo, hi] {
        if bound.element_count() != 1 && bound.element_count() != x.element_count() {
            return fail(format!(
                "bound {} must be a scalar or have the shape of {}",
                bound.shape(),
                x.shape()
            ));
        }
    }
    match with_array_data!(x.data(), v => clamp_slices(lo.data(), v, hi.data())) {
        Some(d) => Ok(Value::array(make_array(out, d)?)),
        None => fail(not_applicable("clamp", x.element_type())),
    }
}

fn select_slices<T: NativeType>(pred: &[bool], t: &[T], f: &ArrayData) -> Option<ArrayData> {
    let f = T::slice(f)?;
    let p = |i: usize| if pred.len() == 1 { pred[0] } else { pred[i] };
    Some(T::wrap(
        (0..t.len())
            .map(|i| if p(i) { t[i] } else { f[i] })
            .collect(),
    ))
}

/// `select(pred, on_true, on_false)`, element by element (a scalar `pred`
/// picks a whole operand).
pub(crate) fn select(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let p = operand(operands, 0)?;
    let t = operand(operands, 1)?;
    let f = operand(operands, 2)?;
    same_count(t, f)?;
    let out = result_array(instr)?;
    let Some(pred) = p.as_slice::<bool>() else {
        return fail(format!("the predicate must be pred, got {}", p.shape()));
    };
    if pred.len() != 1 && pred.len() != t.element_count() {
        return fail(format!(
            "the predicate {} must be a scalar or have the shape of {}",
            p.shape(),
            t.shape()
        ));
    }
    match with_array_data!(t.data(), v => select_slices(pred, v, f.data())) {
        Some(d) => Ok(Value::array(make_array(out, d)?)),
        None => fail("on_true and on_false must have the same element type"),
    }
}

/// Every element of `data` converted to `ty` with `convert`'s rules.
pub(crate) fn convert_data(data: &ArrayData, ty: PrimitiveType) -> ArrayData {
    if data.element_type() == ty {
        return data.clone();
    }
    // Conversion to any type always succeeds.
    map_elems(data, ty, |e| Some(element::convert(e, ty)))
        .unwrap_or_else(|| ArrayData::zeros(ty, data.len()))
}
