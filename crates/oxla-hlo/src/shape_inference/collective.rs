//! Collectives across replicas: all-reduce (the seed's CrossReplicaSum),
//! reduce-scatter, all-gather and all-to-all. Group sizes are known only at
//! run time, so results stated in the text are checked for element type and
//! rank here and for sizes when the replicas run.

use super::{InferResult, check_signature, err, expect_array};
use crate::shape::{ProgramShape, Shape};

fn tuple_or_single(shapes: Vec<Shape>) -> Shape {
    if shapes.len() == 1 {
        shapes.into_iter().next().unwrap_or(Shape::Tuple(vec![]))
    } else {
        Shape::Tuple(shapes)
    }
}

/// Checks that `computation` is `(T, T) -> T` for every operand's element type.
fn check_reduction(op: &str, operands: &[&Shape], computation: &ProgramShape) -> InferResult<()> {
    for (k, s) in operands.iter().enumerate() {
        let a = expect_array(op, &format!("operand {k}"), s)?;
        let t = Shape::scalar(a.element_type());
        check_signature(op, "reduction", computation, &[t.clone(), t.clone()], &t)?;
    }
    Ok(())
}

/// Shape of `all-reduce`: the operands' shapes (a tuple when there are several).
pub fn all_reduce(operands: &[&Shape], computation: &ProgramShape) -> InferResult {
    check_reduction("all-reduce", operands, computation)?;
    Ok(tuple_or_single(
        operands.iter().map(|s| (*s).clone()).collect(),
    ))
}

fn check_stated(
    op: &str,
    operands: &[&Shape],
    result: &Shape,
    dimension: Option<&[i64]>,
) -> InferResult {
    let results: Vec<&Shape> = match result {
        Shape::Tuple(t) if operands.len() > 1 => t.iter().collect(),
        other => vec![other],
    };
    if results.len() != operands.len() {
        return err(
            op,
            format!(
                "needs one result per operand, got {result} for {} operands",
                operands.len()
            ),
        );
    }
    for (k, (o, r)) in operands.iter().zip(&results).enumerate() {
        let a = expect_array(op, &format!("operand {k}"), o)?;
        let b = expect_array(op, &format!("result {k}"), r)?;
        if a.element_type() != b.element_type() || a.rank() != b.rank() {
            return err(
                op,
                format!("result {b} must have the element type and rank of operand {a}"),
            );
        }
        if let Some(dims) = dimension {
            if dims.len() != 1 || dims[0] < 0 || dims[0] as usize >= a.rank() {
                return err(
                    op,
                    format!("dimensions {dims:?} must name one dimension of {a}"),
                );
            }
            let d = dims[0] as usize;
            if (0..a.rank()).any(|i| i != d && a.dim(i) != b.dim(i)) {
                return err(
                    op,
                    format!("result {b} may differ from operand {a} only in dimension {d}"),
                );
            }
        }
    }
    Ok(result.clone())
}

/// Shape check of `reduce-scatter` along `dimensions`.
pub fn reduce_scatter(
    operands: &[&Shape],
    computation: &ProgramShape,
    result: &Shape,
    dimensions: &[i64],
) -> InferResult {
    check_reduction("reduce-scatter", operands, computation)?;
    check_stated("reduce-scatter", operands, result, Some(dimensions))
}

/// Shape check of `all-gather` along `dimensions`.
pub fn all_gather(operands: &[&Shape], result: &Shape, dimensions: &[i64]) -> InferResult {
    check_stated("all-gather", operands, result, Some(dimensions))
}

/// Shape check of `all-to-all`.
pub fn all_to_all(operands: &[&Shape], result: &Shape) -> InferResult {
    check_stated("all-to-all", operands, result, None)
}
