//! Tuples, control flow, random numbers and the token-ordered side effects:
//! get-tuple-element, call, conditional, while, rng, rng-bit-generator,
//! after-all, infeed and outfeed.

use super::{InferResult, check_signature, err, expect_array, expect_scalar};
use crate::element_type::PrimitiveType;
use crate::ir::RngDistribution;
use crate::shape::{ProgramShape, Shape};

/// Shape of `get-tuple-element(tuple), index=i`.
pub fn get_tuple_element(operand: &Shape, index: usize) -> InferResult {
    let op = "get-tuple-element";
    match operand {
        Shape::Tuple(t) => match t.get(index) {
            Some(s) => Ok(s.clone()),
            None => err(
                op,
                format!(
                    "index {index} is out of range for a tuple of {} elements ({operand})",
                    t.len()
                ),
            ),
        },
        other => err(op, format!("operand must be a tuple, got {other}")),
    }
}

/// Shape of `call`: the arguments must match the computation's parameters.
pub fn call(args: &[&Shape], computation: &ProgramShape) -> InferResult {
    let params: Vec<Shape> = args.iter().map(|s| (*s).clone()).collect();
    check_signature("call", "called", computation, &params, &computation.result)?;
    Ok(computation.result.clone())
}

/// Shape of `while`: `condition: T -> pred[]`, `body: T -> T`, `init: T`.
pub fn while_loop(condition: &ProgramShape, body: &ProgramShape, init: &Shape) -> InferResult {
    let op = "while";
    check_signature(
        op,
        "condition",
        condition,
        std::slice::from_ref(init),
        &Shape::scalar(PrimitiveType::Pred),
    )?;
    check_signature(op, "body", body, std::slice::from_ref(init), init)?;
    Ok(init.clone())
}

/// Shape of `conditional`: a pred selector with two branches or an s32
/// selector with N >= 1 branches; branch `i` takes operand `i + 1` and all
/// branches return the same shape.
pub fn conditional(selector: &Shape, args: &[&Shape], branches: &[ProgramShape]) -> InferResult {
    let op = "conditional";
    let s = expect_scalar(op, "branch selector", selector)?;
    match s.element_type() {
        PrimitiveType::Pred if branches.len() != 2 => {
            return err(
                op,
                format!(
                    "a pred selector needs exactly 2 branches, got {}",
                    branches.len()
                ),
            );
        }
        PrimitiveType::Pred | PrimitiveType::S32 => {}
        _ => {
            return err(
                op,
                format!("the branch selector must be pred[] or s32[], got {s}"),
            );
        }
    }
    if branches.is_empty() {
        return err(op, "needs at least one branch");
    }
    if args.len() != branches.len() {
        return err(
            op,
            format!(
                "needs one operand per branch ({}), got {}",
                branches.len(),
                args.len()
            ),
        );
    }
    let result = &branches[0].result;
    for (i, (b, arg)) in branches.iter().zip(args).enumerate() {
        check_signature(
            op,
            &format!("branch {i}"),
            b,
            std::slice::from_ref(*arg),
            result,
        )?;
    }
    Ok(result.clone())
}

/// Shape check of `rng`: scalar parameters of the result's element type.
pub fn rng(distribution: RngDistribution, a: &Shape, b: &Shape, result: &Shape) -> InferResult {
    let op = "rng";
    let x = expect_scalar(op, "first parameter", a)?;
    let y = expect_scalar(op, "second parameter", b)?;
    let r = expect_array(op, "result", result)?;
    if x.element_type() != y.element_type() || x.element_type() != r.element_type() {
        return err(
            op,
            format!("parameters {x}, {y} and result {r} must have the same element type"),
        );
    }
    let ty = r.element_type();
    let ok = match distribution {
        RngDistribution::Uniform => ty.is_float() || ty.is_integral() || ty.is_pred(),
        RngDistribution::Normal => ty.is_float(),
    };
    if !ok {
        return err(
            op,
            format!("{distribution} does not support element type {ty}"),
        );
    }
    Ok(result.clone())
}

/// Shape check of `rng-bit-generator`: a u64 state vector in, `(state, bits)` out.
pub fn rng_bit_generator(state: &Shape, result: &Shape) -> InferResult {
    let op = "rng-bit-generator";
    let s = expect_array(op, "state", state)?;
    if s.element_type() != PrimitiveType::U64 || s.rank() != 1 {
        return err(op, format!("state must be a rank-1 u64 array, got {s}"));
    }
    let parts = match result {
        Shape::Tuple(t) if t.len() == 2 => t,
        other => {
            return err(
                op,
                format!("result must be a (state, bits) tuple, got {other}"),
            );
        }
    };
    if !parts[0].compatible(state) {
        return err(
            op,
            format!("the new state {} must have the state's shape {s}", parts[0]),
        );
    }
    let bits = expect_array(op, "bits", &parts[1])?;
    if !bits.element_type().is_integral() && !bits.element_type().is_float() {
        return err(op, format!("bits must be integers, got {bits}"));
    }
    Ok(result.clone())
}

/// Shape of `after-all`: every operand is a token; the result is a token.
pub fn after_all(operands: &[&Shape]) -> InferResult {
    if let Some(s) = operands.iter().find(|s| !s.is_token()) {
        return err("after-all", format!("operands must be tokens, got {s}"));
    }
    Ok(Shape::Token)
}

/// Shape check of `infeed(token)`: the result is `(data, token)`.
pub fn infeed(token: &Shape, result: &Shape) -> InferResult {
    let op = "infeed";
    if !token.is_token() {
        return err(op, format!("operand must be a token, got {token}"));
    }
    match result {
        Shape::Tuple(t) if t.len() == 2 && t[1].is_token() => Ok(result.clone()),
        other => err(
            op,
            format!("result must be a (data, token) tuple, got {other}"),
        ),
    }
}

/// Shape of `outfeed(data, token)`: a token.
pub fn outfeed(data: &Shape, token: &Shape) -> InferResult {
    if !token.is_token() {
        return err(
            "outfeed",
            format!("second operand must be a token, got {token}"),
        );
    }
    if data.is_token() {
        return err("outfeed", "cannot outfeed a token");
    }
    Ok(Shape::Token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use PrimitiveType::*;

    #[test]
    fn while_signatures() {
        let t = Shape::tuple(vec![Shape::scalar(S32), Shape::array(F32, [10]).unwrap()]);
        let cond = ProgramShape {
            parameters: vec![t.clone()],
            result: Shape::scalar(Pred),
        };
        let body = ProgramShape {
            parameters: vec![t.clone()],
            result: t.clone(),
        };
        assert_eq!(while_loop(&cond, &body, &t).unwrap(), t);
        let bad_cond = ProgramShape {
            parameters: vec![t.clone()],
            result: Shape::scalar(S32),
        };
        let e = while_loop(&bad_cond, &body, &t).unwrap_err().to_string();
        assert_eq!(
            e,
            "while: condition computation has signature ((s32[], f32[10])) -> s32[] but ((s32[], f32[10])) -> pred[] is required"
        );
        let bad_body = ProgramShape {
            parameters: vec![t.clone()],
            result: Shape::scalar(S32),
        };
        assert!(while_loop(&cond, &bad_body, &t).is_err());
    }

    #[test]
    fn tuple_indexing() {
        let t = Shape::tuple(vec![Shape::array(F32, [10]).unwrap(), Shape::scalar(S32)]);
        assert_eq!(get_tuple_element(&t, 1).unwrap(), Shape::scalar(S32));
        assert!(get_tuple_element(&t, 2).is_err());
        assert!(get_tuple_element(&Shape::scalar(S32), 0).is_err());
    }

    #[test]
    fn conditional_branches() {
        let f = Shape::scalar(F32);
        let b = ProgramShape {
            parameters: vec![f.clone()],
            result: f.clone(),
        };
        assert!(conditional(&Shape::scalar(Pred), &[&f, &f], &[b.clone(), b.clone()]).is_ok());
        assert!(conditional(&Shape::scalar(Pred), &[&f], std::slice::from_ref(&b)).is_err());
        assert!(
            conditional(
                &Shape::scalar(S32),
                &[&f, &f, &f],
                &[b.clone(), b.clone(), b.clone()]
            )
            .is_ok()
        );
        assert!(conditional(&Shape::scalar(F32), &[&f], &[b]).is_err());
    }
}
