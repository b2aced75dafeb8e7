//! Operations that apply a computation: reduce, reduce-window,
//! select-and-scatter, map, sort, and topk.

use super::contraction::window_output_dims;
use super::{
    InferResult, check_dims_in_range, check_signature, err, expect_array, expect_scalar, make_array,
};
use crate::element_type::PrimitiveType;
use crate::ir::Window;
use crate::shape::{ArrayShape, ProgramShape, Shape};

fn tuple_or_single(mut shapes: Vec<Shape>) -> Shape {
    if shapes.len() == 1 {
        shapes.remove(0)
    } else {
        Shape::Tuple(shapes)
    }
}

/// Checks N inputs of equal dimensions and N scalar init values, and that the
/// computation combines accumulators with inputs: `(T_0..T_N-1, T_0..T_N-1) -> (T_0..T_N-1)`.
fn check_reducer<'a>(
    op: &str,
    inputs: &[&'a Shape],
    inits: &[&Shape],
    computation: &ProgramShape,
) -> InferResult<(&'a ArrayShape, Vec<PrimitiveType>)> {
    if inputs.is_empty() || inputs.len() != inits.len() {
        return err(
            op,
            format!(
                "needs N >= 1 inputs and N init values, got {} and {}",
                inputs.len(),
                inits.len()
            ),
        );
    }
    let first = expect_array(op, "input 0", inputs[0])?;
    let mut types = Vec::with_capacity(inputs.len());
    for (k, (x, init)) in inputs.iter().zip(inits).enumerate() {
        let a = expect_array(op, &format!("input {k}"), x)?;
        if !a.same_dims(first) {
            return err(
                op,
                format!("input {k} ({a}) must have the dimensions of input 0 ({first})"),
            );
        }
        let i = expect_scalar(op, &format!("init value {k}"), init)?;
        if i.element_type() != a.element_type() {
            return err(
                op,
                format!("init value {k} ({i}) must have the element type of input {k} ({a})"),
            );
        }
        types.push(a.element_type());
    }
    let scalars: Vec<Shape> = types.iter().map(|&t| Shape::scalar(t)).collect();
    let params: Vec<Shape> = scalars.iter().chain(&scalars).cloned().collect();
    check_signature(
        op,
        "reduction",
        computation,
        &params,
        &tuple_or_single(scalars),
    )?;
    Ok((first, types))
}

/// Shape of `reduce` over `dimensions`: those dimensions are removed, the
/// others keep their order.
pub fn reduce(
    inputs: &[&Shape],
    inits: &[&Shape],
    dimensions: &[i64],
    computation: &ProgramShape,
) -> InferResult {
    let op = "reduce";
    let (first, types) = check_reducer(op, inputs, inits, computation)?;
    check_dims_in_range(op, "dimensions", dimensions, first.rank())?;
    let dims: Vec<i64> = (0..first.rank())
        .filter(|&i| !dimensions.contains(&(i as i64)))
        .map(|i| first.dim(i))
        .collect();
    let outs = types
        .iter()
        .map(|&t| make_array(op, t, dims.clone()))
        .collect::<InferResult<Vec<_>>>()?;
    Ok(tuple_or_single(outs))
}

/// Shape of `reduce-window`: one output element per window position.
pub fn reduce_window(
    inputs: &[&Shape],
    inits: &[&Shape],
    window: &Window,
    computation: &ProgramShape,
) -> InferResult {
    let op = "reduce-window";
    let (first, types) = check_reducer(op, inputs, inits, computation)?;
    let dims = window_output_dims(op, first.dims(), window)?;
    let outs = types
        .iter()
        .map(|&t| make_array(op, t, dims.clone()))
        .collect::<InferResult<Vec<_>>>()?;
    Ok(tuple_or_single(outs))
}

/// Shape of `select-and-scatter`: `select: (T, T) -> pred`, `scatter: (T, T) -> T`,
/// and `source` shaped like a reduce-window of `operand` over `window`.
pub fn select_and_scatter(
    operand: &Shape,
    source: &Shape,
    init: &Shape,
    window: &Window,
    select: &ProgramShape,
    scatter: &ProgramShape,
) -> InferResult {
    let op = "select-and-scatter";
    let a = expect_array(op, "operand", operand)?;
    let s = expect_array(op, "source", source)?;
    let i = expect_scalar(op, "init value", init)?;
    let t = Shape::scalar(a.element_type());
    if i.element_type() != a.element_type() || s.element_type() != a.element_type() {
        return err(
            op,
            format!("operand {a}, source {s} and init value {i} must have the same element type"),
        );
    }
    check_signature(
        op,
        "select",
        select,
        &[t.clone(), t.clone()],
        &Shape::scalar(PrimitiveType::Pred),
    )?;
    check_signature(op, "scatter", scatter, &[t.clone(), t.clone()], &t)?;
    let windows = window_output_dims(op, a.dims(), window)?;
    if s.dims() != windows.as_slice() {
        return err(
            op,
            format!(
                "source {s} must have the shape of a reduce-window of the operand {a}, which is {}",
                ArrayShape::new_unchecked(a.element_type(), windows)
            ),
        );
    }
    Ok(operand.clone())
}

/// Shape of `map`: N arrays of equal dimensions mapped by a computation of N
/// scalars (plus the static operands, passed whole) to one scalar.
pub fn map(
    operands: &[&Shape],
    static_operands: &[&Shape],
    computation: &ProgramShape,
) -> InferResult {
    let op = "map";
    let Some(first) = operands.first() else {
        return err(op, "needs at least one operand");
    };
    let f = expect_array(op, "operand 0", first)?;
    let mut params = Vec::new();
    for (k, s) in operands.iter().enumerate() {
        let a = expect_array(op, &format!("operand {k}"), s)?;
        if !a.same_dims(f) {
            return err(
                op,
                format!("operand {k} ({a}) must have the dimensions of operand 0 ({f})"),
            );
        }
        params.push(Shape::scalar(a.element_type()));
    }
    params.extend(static_operands.iter().map(|s| (*s).clone()));
    let result = match &computation.result {
        Shape::Array(r) if r.is_scalar() => r.element_type(),
        other => {
            return err(
                op,
                format!("the mapped computation must return a scalar, it returns {other}"),
            );
        }
    };
    check_signature(op, "mapped", computation, &params, &Shape::scalar(result))?;
    Ok(Shape::Array(f.with_element_type(result)))
}

/// Shape of `sort` along `dimension` with a comparator over all operands:
/// `(T_0, T_0, T_1, T_1, ...) -> pred`.
pub fn sort(operands: &[&Shape], dimension: i64, comparator: &ProgramShape) -> InferResult {
    let op = "sort";
    let Some(first) = operands.first() else {
        return err(op, "needs at least one operand");
    };
    let f = expect_array(op, "operand 0", first)?;
    check_dims_in_range(op, "dimensions", &[dimension], f.rank())?;
    let mut params = Vec::new();
    for (k, s) in operands.iter().enumerate() {
        let a = expect_array(op, &format!("operand {k}"), s)?;
        if !a.same_dims(f) {
            return err(
                op,
                format!("operand {k} ({a}) must have the dimensions of operand 0 ({f})"),
            );
        }
        params.push(Shape::scalar(a.element_type()));
        params.push(Shape::scalar(a.element_type()));
    }
    check_signature(
        op,
        "comparator",
        comparator,
        &params,
        &Shape::scalar(PrimitiveType::Pred),
    )?;
    Ok(tuple_or_single(
        operands.iter().map(|s| (*s).clone()).collect(),
    ))
}

/// Shape of `scan` along `dimension`: the body takes one slice of each input
/// (the dimension removed) and the carries, and returns the per-step outputs
/// followed by the new carries; each output is stacked along `dimension`.
pub fn scan(
    inputs: &[&Shape],
    carries: &[&Shape],
    dimension: i64,
    body: &ProgramShape,
) -> InferResult {
    let op = "scan";
    let Some(first) = inputs.first() else {
        return err(op, "needs at least one scanned input");
    };
    let f = expect_array(op, "input 0", first)?;
    check_dims_in_range(op, "dimensions", &[dimension], f.rank())?;
    let d = dimension as usize;
    let steps = f.dim(d);
    let mut params = Vec::with_capacity(inputs.len() + carries.len());
    for (k, s) in inputs.iter().enumerate() {
        let a = expect_array(op, &format!("input {k}"), s)?;
        if a.rank() <= d || a.dim(d) != steps {
            return err(
                op,
                format!(
                    "input {k} ({a}) must have dimension {d} of size {steps}, like input 0 ({f})"
                ),
            );
        }
        let mut dims = a.dims().to_vec();
        dims.remove(d);
        params.push(make_array(op, a.element_type(), dims)?);
    }
    params.extend(carries.iter().map(|s| (*s).clone()));
    let results: Vec<Shape> = match &body.result {
        Shape::Tuple(t) => t.clone(),
        other => vec![other.clone()],
    };
    if results.len() < carries.len() {
        return err(
            op,
            format!(
                "the body returns {} values but there are {} carries",
                results.len(),
                carries.len()
            ),
        );
    }
    let (ys, new_carries) = results.split_at(results.len() - carries.len());
    let mut outs = Vec::with_capacity(results.len());
    for (j, y) in ys.iter().enumerate() {
        let a = expect_array(op, &format!("body output {j}"), y)?;
        if a.rank() < d {
            return err(
                op,
                format!("body output {j} ({a}) has no dimension {d} to stack along"),
            );
        }
        let mut dims = a.dims().to_vec();
        dims.insert(d, steps);
        outs.push(make_array(op, a.element_type(), dims)?);
    }
    outs.extend(new_carries.iter().cloned());
    check_signature(op, "body", body, &params, &body.result)?;
    for (k, (c, n)) in carries.iter().zip(new_carries).enumerate() {
        if !c.compatible(n) {
            return err(
                op,
                format!("carry {k} enters as {c} but the body returns {n}"),
            );
        }
    }
    Ok(Shape::Tuple(outs))
}

/// Shape of `topk`: the `k` largest values along the last dimension and their s32 indices.
pub fn topk(operand: &Shape, k: i64) -> InferResult {
    let op = "topk";
    let a = expect_array(op, "operand", operand)?;
    if a.rank() == 0 {
        return err(op, format!("needs an operand of rank >= 1, got {a}"));
    }
    let last = a.dim(a.rank() - 1);
    if k < 0 || k > last {
        return err(
            op,
            format!("k = {k} must be in [0, {last}] for operand {a}"),
        );
    }
    let mut dims = a.dims().to_vec();
    let n = dims.len();
    dims[n - 1] = k;
    Ok(Shape::Tuple(vec![
        make_array(op, a.element_type(), dims.clone())?,
        make_array(op, PrimitiveType::S32, dims)?,
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::WindowDim;
    use PrimitiveType::*;

    fn s(ty: PrimitiveType, dims: &[i64]) -> Shape {
        Shape::array(ty, dims).unwrap()
    }

    fn binop(ty: PrimitiveType) -> ProgramShape {
        ProgramShape {
            parameters: vec![Shape::scalar(ty), Shape::scalar(ty)],
            result: Shape::scalar(ty),
        }
    }

    #[test]
    fn reduce_shapes_from_the_spec() {
        let x = s(F32, &[4, 2, 3]);
        let init = Shape::scalar(F32);
        let add = binop(F32);
        assert_eq!(
            reduce(&[&x], &[&init], &[0], &add).unwrap().to_string(),
            "f32[2,3]"
        );
        assert_eq!(
            reduce(&[&x], &[&init], &[2], &add).unwrap().to_string(),
            "f32[4,2]"
        );
        assert_eq!(
            reduce(&[&x], &[&init], &[0, 1], &add).unwrap().to_string(),
            "f32[3]"
        );
        assert_eq!(
            reduce(&[&x], &[&init], &[0, 1, 2], &add)
                .unwrap()
                .to_string(),
            "f32[]"
        );
        assert!(reduce(&[&x], &[&init], &[3], &add).is_err());
        assert!(
            reduce(&[&x], &[&init], &[0], &binop(S32))
                .unwrap_err()
                .to_string()
                .contains("signature")
        );
        assert!(reduce(&[&x], &[&s(F32, &[1])], &[0], &add).is_err());
    }

    #[test]
    fn reduce_window_and_select_and_scatter() {
        let x = s(F32, &[4, 6]);
        let init = Shape::scalar(F32);
        let mut w = Window {
            dims: vec![WindowDim::new(2), WindowDim::new(3)],
        };
        w.dims[0].stride = 2;
        w.dims[1].stride = 3;
        assert_eq!(
            reduce_window(&[&x], &[&init], &w, &binop(F32))
                .unwrap()
                .to_string(),
            "f32[2,2]"
        );
        let ge = ProgramShape {
            parameters: vec![Shape::scalar(F32), Shape::scalar(F32)],
            result: Shape::scalar(Pred),
        };
        let src = s(F32, &[2, 2]);
        assert!(select_and_scatter(&x, &src, &init, &w, &ge, &binop(F32)).is_ok());
        let e = select_and_scatter(&x, &s(F32, &[2, 3]), &init, &w, &ge, &binop(F32)).unwrap_err();
        assert!(e.to_string().contains("reduce-window"), "{e}");
        assert!(select_and_scatter(&x, &src, &init, &w, &binop(F32), &binop(F32)).is_err());
    }

    #[test]
    fn map_and_sort() {
        let x = s(F32, &[3]);
        let to_s32 = ProgramShape {
            parameters: vec![Shape::scalar(F32), Shape::scalar(F32)],
            result: Shape::scalar(S32),
        };
        assert_eq!(map(&[&x, &x], &[], &to_s32).unwrap().to_string(), "s32[3]");
        assert!(map(&[&x, &s(F32, &[4])], &[], &to_s32).is_err());
        let with_static = ProgramShape {
            parameters: vec![Shape::scalar(F32), s(F32, &[2, 2])],
            result: Shape::scalar(F32),
        };
        assert!(map(&[&x], &[&s(F32, &[2, 2])], &with_static).is_ok());
        let lt = ProgramShape {
            parameters: vec![Shape::scalar(F32), Shape::scalar(F32)],
            result: Shape::scalar(Pred),
        };
        assert_eq!(sort(&[&x], 0, &lt).unwrap().to_string(), "f32[3]");
        assert!(sort(&[&x, &s(S32, &[3])], 0, &lt).is_err());
    }
}
