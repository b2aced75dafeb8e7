//! `sort` (several operands sorted together along one dimension by a
//! comparator computation) and `topk`. Sorting is always stable: a merge sort
//! that takes the right element first only when the comparator says it comes
//! strictly before the left one. The comparator need not be a strict weak
//! order; the result is then still deterministic, never a panic.

use oxla_hlo::ir::{ComparisonDirection, ComparisonType};
use oxla_hlo::shape_inference::default_comparison_type;
use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, HloInstruction, PrimitiveType};

use super::attr;
use super::reduce::result_arrays;
use crate::element::{self, Elem};
use crate::error::{OpResult, fail};
use crate::index::{Counter, dims_usize, linear, strides};
use crate::interpreter::Interpreter;
use crate::value::{Value, make_array};

/// Stable bottom-up merge sort of `items` under a fallible "comes before" test.
fn merge_sort(
    items: &mut Vec<usize>,
    before: &mut dyn FnMut(usize, usize) -> OpResult<bool>,
) -> OpResult<()> {
    let n = items.len();
    let mut buf = items.clone();
    let mut width = 1;
    while width < n {
        let mut lo = 0;
        while lo < n {
            let mid = (lo + width).min(n);
            let hi = (lo + 2 * width).min(n);
            let (mut a, mut b, mut k) = (lo, mid, lo);
            while a < mid && b < hi {
                if before(items[b], items[a])? {
                    buf[k] = items[b];
                    b += 1;
                } else {
                    buf[k] = items[a];
                    a += 1;
                }
                k += 1;
            }
            buf[k..k + (mid - a)].copy_from_slice(&items[a..mid]);
            k += mid - a;
            buf[k..k + (hi - b)].copy_from_slice(&items[b..hi]);
            lo = hi;
        }
        std::mem::swap(items, &mut buf);
        width *= 2;
    }
    Ok(())
}

/// For every line of `dims` along dimension `d`: the linear index of its first
/// element. `stride` steps along the line.
fn lines(dims: &[usize], d: usize) -> (Vec<usize>, usize) {
    let st = strides(dims);
    let mut outer = dims.to_vec();
    outer[d] = 1;
    let mut starts = Vec::new();
    if !dims.contains(&0) {
        let mut c = Counter::new(&outer);
        while !c.done() {
            starts.push(linear(c.index(), &st));
            c.advance();
        }
    }
    (starts, st[d])
}

impl Interpreter<'_> {
    pub(crate) fn sort(&mut self, instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
        let arrays: Vec<&ArrayLiteral> = operands
            .iter()
            .map(Value::as_array)
            .collect::<OpResult<_>>()?;
        let dims = dims_usize(arrays[0].dims());
        if arrays.iter().any(|a| dims_usize(a.dims()) != dims) {
            return fail("all operands must have the same dimensions");
        }
        let d = match attr(&instr.attrs.dimensions, "dimensions")?[..] {
            [d] if d >= 0 && (d as usize) < dims.len() => d as usize,
            ref other => return fail(format!("cannot sort along dimensions {other:?}")),
        };
        let shapes = result_arrays(&instr.shape)?;
        let (starts, stride) = lines(&dims, d);
        let len = dims[d];
        let mut outputs: Vec<ArrayData> = arrays.iter().map(|a| a.data().clone()).collect();
        let mut f = self.scalar_fn(instr.called.to_apply, "comparator", Vec::new())?;
        let mut args = Vec::with_capacity(2 * arrays.len());
        let mut out = Vec::with_capacity(1);
        // Grown on first use: `len` may be huge when the array is empty.
        let mut order = Vec::new();
        let mut taken = Vec::new();
        for &start in &starts {
            order.clear();
            order.extend(0..len);
            let mut before = |a: usize, b: usize| -> OpResult<bool> {
                args.clear();
                for x in &arrays {
                    args.push(Elem::read(x.data(), start + a * stride));
                    args.push(Elem::read(x.data(), start + b * stride));
                }
                out.clear();
                self.apply(&mut f, &args, &mut out)?;
                match out.as_slice() {
                    [Elem::Pred(p)] => Ok(*p),
                    _ => fail("the comparator must return one pred"),
                }
            };
            merge_sort(&mut order, &mut before)?;
            for (x, o) in arrays.iter().zip(outputs.iter_mut()) {
                taken.clear();
                taken.extend(order.iter().map(|&k| start + k * stride));
                let values = x.data().take(&taken);
                o.scatter_from(&values, (0..len).map(|k| (start + k * stride, k)));
            }
        }
        let arrays = shapes
            .iter()
            .zip(outputs)
            .map(|(s, d)| make_array(s, d))
            .collect::<OpResult<Vec<_>>>()?;
        Ok(Value::tuple_or_single(arrays))
    }
}

/// `topk(x), k=K, largest=...`: the K largest (or smallest) elements of each
/// row along the last dimension, and their s32 indices. Ordered by XLA's total
/// order (+NaN above +inf, -NaN below -inf, -0 below +0); ties keep the lower
/// index first.
pub(crate) fn topk(instr: &HloInstruction, operands: &[Value]) -> OpResult<Value> {
    let x = operands[0].as_array()?;
    let dims = dims_usize(x.dims());
    let Some(&n) = dims.last() else {
        return fail("needs an operand of rank >= 1");
    };
    let k = *attr(&instr.attrs.k, "k")?;
    let k = match usize::try_from(k) {
        Ok(k) if k <= n => k,
        _ => return fail(format!("k = {k} is out of range for {}", x.shape())),
    };
    let largest = instr.attrs.largest.unwrap_or(true);
    let ty = x.element_type();
    let cmp_type = if ty.is_floating() {
        ComparisonType::TotalOrder
    } else {
        default_comparison_type(ty)
    };
    let dir = if largest {
        ComparisonDirection::Gt
    } else {
        ComparisonDirection::Lt
    };
    let rows = x.element_count().checked_div(n).unwrap_or(0);
    // Sized by the result (checked against the memory limit); `order` grows
    // on first use, since `n` may be huge when the operand is empty.
    let mut values = Vec::with_capacity(rows * k);
    let mut indices = Vec::with_capacity(rows * k);
    let mut order = Vec::new();
    for r in 0..rows {
        let base = r * n;
        order.clear();
        order.extend(0..n);
        let mut before = |a: usize, b: usize| -> OpResult<bool> {
            let (ea, eb) = (
                Elem::read(x.data(), base + a),
                Elem::read(x.data(), base + b),
            );
            element::compare(dir, cmp_type, ea, eb)
                .ok_or_else(|| format!("topk does not apply to element type {ty}").into())
        };
        merge_sort(&mut order, &mut before)?;
        for &i in &order[..k] {
            values.push(base + i);
            indices.push(i as i32);
        }
    }
    let mut out_dims: Vec<i64> = x.dims().to_vec();
    if let Some(last) = out_dims.last_mut() {
        *last = k as i64;
    }
    let value_shape = ArrayShape::new(ty, out_dims.clone())?;
    let index_shape = ArrayShape::new(PrimitiveType::S32, out_dims)?;
    Ok(Value::tuple(vec![
        Value::array(make_array(&value_shape, x.data().take(&values))?),
        Value::array(make_array(&index_shape, ArrayData::S32(indices))?),
    ]))
}
