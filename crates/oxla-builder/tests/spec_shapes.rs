//! The shape examples of `xla-operation-semantics.md` and `xla-broadcasting.md`,
//! valid and invalid, through the builder: result shapes, error messages and
//! the caller locations errors carry.

use oxla_builder::{Padding, XlaBuilder, XlaComputation, XlaOp};
use oxla_hlo::ir::{ConvDimensionNumbers, Opcode, PadDim};
use oxla_hlo::{Literal, PrimitiveType, PrimitiveType::*, Shape};

fn shape(ty: PrimitiveType, dims: &[i64]) -> Shape {
    Shape::array(ty, dims).unwrap()
}

fn param<'b>(b: &'b XlaBuilder, n: usize, ty: PrimitiveType, dims: &[i64]) -> XlaOp<'b> {
    b.parameter(n, &shape(ty, dims), &format!("p{n}"))
}

/// The result shape of `op`, or the builder's error message without its location.
fn result(op: XlaOp<'_>) -> String {
    match op.shape() {
        Ok(s) => s.to_string(),
        Err(e) => format!("error: {}: {}", e.op, e.message),
    }
}

fn binary_computation(
    name: &str,
    ty: PrimitiveType,
    f: impl for<'b> Fn(XlaOp<'b>, XlaOp<'b>) -> XlaOp<'b>,
) -> XlaComputation {
    let b = XlaBuilder::new(name);
    let x = b.parameter(0, &Shape::scalar(ty), "x");
    let y = b.parameter(1, &Shape::scalar(ty), "y");
    b.build(f(x, y)).unwrap()
}

fn add_f32() -> XlaComputation {
    binary_computation("add", F32, |x, y| x + y)
}

// ---- xla-broadcasting.md ----

#[test]
fn broadcasting_examples() {
    let b = XlaBuilder::new("bcast");
    let m23 = param(&b, 0, F32, &[2, 3]);
    let v3 = param(&b, 1, F32, &[3]);
    let s = b.constant_r0(7.0f32);
    assert_eq!(result(m23 + s), "f32[2,3]");
    assert_eq!(result(m23.add_with_dims(v3, &[1])), "f32[2,3]");
    assert_eq!(
        result(m23 + v3),
        "error: add: operands of different ranks ([2,3] and [3]) need broadcast_dimensions unless one of them is a scalar"
    );
    // "when adding a 2x3 matrix to a 3-element vector, a broadcasting dimension of 0 is invalid"
    assert_eq!(
        result(m23.add_with_dims(v3, &[0])),
        "error: add: broadcast dimension 0 of the lower-rank operand (size 3) does not match dimension 0 of the higher-rank operand (size 2); operands [2,3] and [3]"
    );
    let m33 = param(&b, 2, F32, &[3, 3]);
    assert_eq!(result(m33.add_with_dims(v3, &[0])), "f32[3,3]");
    assert_eq!(result(m33.add_with_dims(v3, &[1])), "f32[3,3]");
    let cuboid = param(&b, 3, F32, &[2, 3, 4]);
    let m34 = param(&b, 4, F32, &[3, 4]);
    assert_eq!(result(cuboid.add_with_dims(m34, &[1, 2])), "f32[2,3,4]");
    assert!(result(cuboid.add_with_dims(m34, &[2, 1])).contains("must be strictly increasing"));
}

#[test]
fn degenerate_and_composed_broadcasting() {
    let b = XlaBuilder::new("degenerate");
    let cases: &[(&[i64], &[i64], &[i64], &str)] = &[
        (&[2, 1], &[2, 3], &[], "f32[2,3]"),
        (&[1, 2, 5], &[7, 2, 5], &[], "f32[7,2,5]"),
        (&[7, 2, 5], &[7, 1, 5], &[], "f32[7,2,5]"),
        (&[2, 1], &[1, 3], &[], "f32[2,3]"),
        (&[4], &[1, 2], &[0], "f32[4,2]"),
        (&[1, 2], &[4, 3, 1], &[1, 2], "f32[4,3,2]"),
    ];
    for (i, (l, r, dims, want)) in cases.iter().enumerate() {
        let x = param(&b, 2 * i, F32, l);
        let y = param(&b, 2 * i + 1, F32, r);
        assert_eq!(
            result(x.add_with_dims(y, dims)),
            *want,
            "{l:?} + {r:?} with {dims:?}"
        );
    }
    let x = param(&b, 100, F32, &[7, 2, 5]);
    let y = param(&b, 101, F32, &[7, 2, 6]);
    assert_eq!(
        result(x + y),
        "error: add: incompatible shapes [7,2,5] and [7,2,6]: dimension 2 is 5 vs 6 (dimensions must be equal or one of them 1)"
    );
}

#[test]
fn broadcasts_are_lowered_to_explicit_instructions() {
    let b = XlaBuilder::new("lowered");
    let v = param(&b, 0, F32, &[4]);
    let m = param(&b, 1, F32, &[1, 2]);
    let c = b.build(v.add_with_dims(m, &[0])).unwrap();
    let entry = c.module().entry();
    let broadcasts: Vec<_> = entry
        .instructions()
        .iter()
        .filter(|i| i.opcode == Opcode::Broadcast)
        .map(|i| i.shape.to_string())
        .collect();
    assert_eq!(broadcasts, ["f32[4,2]", "f32[4,2]"]);
    let add = entry.root_instruction();
    assert_eq!(add.opcode, Opcode::Add);
    for &o in &add.operands {
        assert_eq!(entry.instruction(o).shape.to_string(), "f32[4,2]");
    }
}

#[test]
fn comparisons_give_pred() {
    let b = XlaBuilder::new("cmp");
    let m = param(&b, 0, S32, &[2, 3]);
    let v = param(&b, 1, S32, &[3]);
    assert_eq!(result(m.ge_with_dims(v, &[1])), "pred[2,3]");
    assert_eq!(result(m.eq(m)), "pred[2,3]");
    let f = param(&b, 2, F32, &[2, 3]);
    assert_eq!(
        result(m.lt(f)),
        "error: compare: operands must have the same element type, got s32[2,3] and f32[2,3]"
    );
}

// ---- xla-operation-semantics.md, op by op ----

#[test]
fn broadcast_sizes() {
    let b = XlaBuilder::new("broadcast");
    let two = b.constant_r0(2.0f32);
    assert_eq!(result(two.broadcast(&[2, 3])), "f32[2,3]");
    let v = param(&b, 0, F32, &[4]);
    assert_eq!(result(v.broadcast(&[2, 3])), "f32[2,3,4]");
    assert_eq!(
        result(v.broadcast(&[-1])),
        "error: Broadcast: broadcast sizes [-1] contain the negative size -1"
    );
}

#[test]
fn call_checks_arguments() {
    let b = XlaBuilder::new("call");
    let add = add_f32();
    let x = b.constant_r0(1.0f32);
    assert_eq!(result(b.call(&add, &[x, x])), "f32[]");
    assert_eq!(
        result(b.call(&add, &[x])),
        "error: call: called computation has signature (f32[], f32[]) -> f32[] but (f32[]) -> f32[] is required"
    );
    let nullary = {
        let nb = XlaBuilder::new("seven");
        nb.build(nb.constant_r0(7i32)).unwrap()
    };
    assert_eq!(result(b.call(&nullary, &[])), "s32[]");
}

#[test]
fn collapse() {
    let b = XlaBuilder::new("collapse");
    let v = param(&b, 0, F32, &[4, 2, 3]);
    assert_eq!(result(v.collapse(&[0, 1, 2])), "f32[24]");
    assert_eq!(result(v.collapse(&[0, 1])), "f32[8,3]");
    assert_eq!(result(v.collapse(&[1, 2])), "f32[4,6]");
    let msg = "must be an in-order, consecutive subset of the dimensions of f32[4,2,3]";
    assert!(result(v.collapse(&[1, 0])).contains(msg));
    assert!(result(v.collapse(&[0, 2])).contains(msg));
}

#[test]
fn concatenate() {
    let b = XlaBuilder::new("concat");
    let a = param(&b, 0, F32, &[3, 2]);
    let c = param(&b, 1, F32, &[1, 2]);
    assert_eq!(result(b.concat_in_dim(&[a, c], 0)), "f32[4,2]");
    let v = param(&b, 2, S32, &[2]);
    assert_eq!(result(b.concat_in_dim(&[v, v, v], 0)), "s32[6]");
    assert_eq!(
        result(b.concat_in_dim(&[], 0)),
        "error: concatenate: needs at least one operand"
    );
    let s = b.constant_r0(1.0f32);
    assert!(result(b.concat_in_dim(&[s, s], 0)).contains("cannot concatenate rank-0 values"));
    assert!(
        result(b.concat_in_dim(&[a, v], 0)).contains("must have the element type of operand 0")
    );
    assert!(
        result(b.concat_in_dim(&[a, c], 1))
            .contains("differs from operand 0 (f32[3,2]) in dimension 0")
    );
    assert!(result(b.concat_in_dim(&[a, c], 2)).contains("dimension 2 is not a dimension"));
    let r3 = param(&b, 3, F32, &[3, 2, 1]);
    assert!(result(b.concat_in_dim(&[a, r3], 0)).contains("must have the rank of operand 0"));
}

#[test]
fn convert_element_type() {
    let b = XlaBuilder::new("convert");
    let a = param(&b, 0, S32, &[3]);
    assert_eq!(result(a.convert_element_type(F32)), "f32[3]");
    let c = param(&b, 1, C64, &[3]);
    assert!(result(c.convert_element_type(F32)).contains("complex to real"));
    let t = b.tuple(&[a]);
    assert_eq!(
        result(t.convert_element_type(F32)),
        "error: convert: operand must be an array, got (s32[3])"
    );
}

#[test]
fn conv_shapes() {
    let b = XlaBuilder::new("conv");
    let lhs = param(&b, 0, F32, &[2, 3, 10, 10]);
    let rhs = param(&b, 1, F32, &[8, 3, 3, 3]);
    assert_eq!(
        result(lhs.conv(rhs, &[1, 1], Padding::Valid)),
        "f32[2,8,8,8]"
    );
    assert_eq!(
        result(lhs.conv(rhs, &[1, 1], Padding::Same)),
        "f32[2,8,10,10]"
    );
    assert_eq!(
        result(lhs.conv(rhs, &[2, 3], Padding::Same)),
        "f32[2,8,5,4]"
    );
    assert_eq!(
        result(lhs.conv_with_general_padding(rhs, &[1, 1], &[(2, 3), (-1, 0)], &[1, 1], &[1, 1])),
        "f32[2,8,13,7]"
    );
    // lhs dilation 2: base 19; rhs dilation 2: window 5.
    assert_eq!(
        result(lhs.conv_with_general_padding(rhs, &[1, 1], &[(0, 0), (0, 0)], &[2, 1], &[1, 2])),
        "f32[2,8,17,6]"
    );
    let wrong_z = param(&b, 2, F32, &[8, 4, 3, 3]);
    assert!(result(lhs.conv(wrong_z, &[1, 1], Padding::Valid)).contains("input features (3"));
    assert!(result(lhs.conv(rhs, &[1], Padding::Valid)).contains("window_strides [1] n entries"));
    assert!(
        result(lhs.conv_with_general_padding(rhs, &[1, 1], &[(0, 0)], &[1, 1], &[1, 1]))
            .contains("one entry per spatial dimension")
    );
    assert!(
        result(lhs.conv_with_general_padding(rhs, &[0, 1], &[(0, 0), (0, 0)], &[1, 1], &[1, 1]))
            .contains("stride")
    );
    let nhwc = ConvDimensionNumbers {
        input_batch_dimension: 0,
        input_feature_dimension: 3,
        input_spatial_dimensions: vec![1, 2],
        kernel_input_feature_dimension: 2,
        kernel_output_feature_dimension: 3,
        kernel_spatial_dimensions: vec![0, 1],
        output_batch_dimension: 0,
        output_feature_dimension: 3,
        output_spatial_dimensions: vec![1, 2],
    };
    let x = param(&b, 3, F32, &[1, 5, 5, 4]);
    let k = param(&b, 4, F32, &[3, 3, 2, 6]);
    assert_eq!(
        result(x.conv_general_dilated(
            k,
            &[1, 1],
            &[(1, 1), (1, 1)],
            &[1, 1],
            &[1, 1],
            &nhwc,
            2,
            1
        )),
        "f32[1,5,5,6]"
    );
}

#[test]
fn cross_replica_sum_and_custom_call() {
    let b = XlaBuilder::new("runtime");
    let x = param(&b, 0, F32, &[2]);
    assert_eq!(result(x.cross_replica_sum()), "f32[2]");
    let y = param(&b, 1, F32, &[2, 3]);
    assert_eq!(
        result(b.custom_call("myfunc", &[x, y], &shape(F32, &[3, 3]))),
        "f32[3,3]"
    );
    assert_eq!(
        result(b.custom_call("", &[x], &shape(F32, &[3]))),
        "error: custom-call: the target name must not be empty"
    );
}

#[test]
fn dot_rank_table() {
    let b = XlaBuilder::new("dot");
    let v = param(&b, 0, F32, &[3]);
    let m = param(&b, 1, F32, &[2, 3]);
    let n = param(&b, 2, F32, &[3, 4]);
    assert_eq!(result(v.dot(v)), "f32[]");
    assert_eq!(result(m.dot(v)), "f32[2]");
    assert_eq!(result(m.dot(n)), "f32[2,4]");
    assert_eq!(result(v.dot(n)), "f32[4]");
    assert_eq!(
        result(n.dot(m)),
        "error: Dot: contracted dimensions differ: dimension 1 of lhs f32[3,4] has size 4 but dimension 0 of rhs f32[2,3] has size 2"
    );
    let t = param(&b, 3, F32, &[2, 2, 3]);
    assert!(result(t.dot(v)).contains("rank 1 or 2 only"));
}

#[test]
fn elementwise_binary_and_unary() {
    let b = XlaBuilder::new("ew");
    let f = param(&b, 0, F32, &[2, 2]);
    let i = param(&b, 1, S32, &[2, 2]);
    let p = param(&b, 2, Pred, &[2, 2]);
    for op in [
        f + f,
        f - f,
        f * f,
        f / f,
        f % f,
        f.max(f),
        f.min(f),
        f.pow(f),
    ] {
        assert_eq!(result(op), "f32[2,2]");
    }
    assert_eq!(result(p.logical_and(p)), "pred[2,2]");
    assert_eq!(result(p.logical_or(p)), "pred[2,2]");
    assert_eq!(
        result(i.logical_and(i)),
        "error: and: logical operations need pred operands, got s32[2,2]"
    );
    assert_eq!(
        result(f + i),
        "error: add: operands must have the same element type, got f32[2,2] and s32[2,2]"
    );
    for op in [
        f.abs(),
        f.ceil(),
        f.exp(),
        f.floor(),
        f.log(),
        -f,
        f.sign(),
        f.tanh(),
    ] {
        assert_eq!(result(op), "f32[2,2]");
    }
    assert_eq!(result(f.is_finite()), "pred[2,2]");
    assert_eq!(result(p.logical_not()), "pred[2,2]");
    assert_eq!(
        result(f.logical_not()),
        "error: not: logical operations need pred operands, got f32[2,2]"
    );
    assert_eq!(
        result(i.exp()),
        "error: exponential: expects a float or complex element type, got s32[2,2]"
    );
    assert_eq!(result(i.abs()), "s32[2,2]");
    // Unary functions accept scalars.
    assert_eq!(result(b.constant_r0(1.0f32).tanh()), "f32[]");
    let u = param(&b, 3, U32, &[2]);
    assert_eq!(result(-u), "u32[2]");
    assert!(result(u.abs()).contains("signed integer, float or complex"));
}

#[test]
fn get_tuple_element_and_tuple() {
    let b = XlaBuilder::new("tuple");
    let v = b.constant_r1(&[0.0f32, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    let s = b.constant_r0(5i32);
    let t = b.tuple(&[v, s]);
    assert_eq!(result(t), "(f32[10], s32[])");
    assert_eq!(result(t.get_tuple_element(1)), "s32[]");
    assert_eq!(result(t.get_tuple_element(0)), "f32[10]");
    assert_eq!(
        result(t.get_tuple_element(2)),
        "error: get-tuple-element: index 2 is out of range for a tuple of 2 elements ((f32[10], s32[]))"
    );
    assert_eq!(
        result(v.get_tuple_element(0)),
        "error: get-tuple-element: operand must be a tuple, got f32[10]"
    );
}

#[test]
fn infeed_shapes() {
    let b = XlaBuilder::new("infeed");
    assert_eq!(result(b.infeed(&shape(F32, &[2, 3]))), "f32[2,3]");
    let flat = Shape::tuple(vec![shape(F32, &[2]), Shape::scalar(S32)]);
    assert_eq!(result(b.infeed(&flat)), "(f32[2], s32[])");
    assert_eq!(result(b.infeed(&Shape::tuple(vec![]))), "()");
    let nested = Shape::tuple(vec![flat.clone()]);
    assert_eq!(
        result(b.infeed(&nested)),
        "error: infeed: nested tuple shapes are not supported, got ((f32[2], s32[]))"
    );
}

#[test]
fn map_with_static_operands() {
    let b = XlaBuilder::new("map");
    let x = param(&b, 0, F32, &[3]);
    let y = param(&b, 1, F32, &[3]);
    let z = param(&b, 2, F32, &[3]);
    let st = param(&b, 3, S32, &[2]);
    let f = {
        let fb = XlaBuilder::new("f");
        let a = fb.parameter(0, &Shape::scalar(F32), "a");
        let c = fb.parameter(1, &Shape::scalar(F32), "c");
        let d = fb.parameter(2, &Shape::scalar(F32), "d");
        let s = fb.parameter(3, &shape(S32, &[2]), "s");
        let s0 = s.slice(&[0], &[1]).reshape(&[]).convert_element_type(F32);
        fb.build((a + c + d + s0).lt(a)).unwrap()
    };
    assert_eq!(result(b.map(&[x, y, z], &f, &[st])), "pred[3]");
    let w = param(&b, 4, F32, &[4]);
    assert!(result(b.map(&[x, y, w], &f, &[st])).contains("must have the dimensions of operand 0"));
    assert!(result(b.map(&[x, y, z], &f, &[])).contains("mapped computation has signature"));
}

#[test]
fn pad_shapes() {
    let b = XlaBuilder::new("pad");
    let x = param(&b, 0, F32, &[2, 3]);
    let zero = b.constant_r0(0.0f32);
    let p = |low, high, interior| PadDim {
        low,
        high,
        interior,
    };
    assert_eq!(result(x.pad(zero, &[p(1, 2, 0), p(0, 0, 1)])), "f32[5,5]");
    assert_eq!(
        result(x.pad(zero, &[p(-1, 0, 0), p(-1, -1, 1)])),
        "f32[1,3]"
    );
    assert!(result(x.pad(zero, &[p(0, 0, 0)])).contains("padding config has 1 dimensions"));
    assert!(result(x.pad(zero, &[p(0, 0, -1), p(0, 0, 0)])).contains("interior padding -1"));
    assert!(result(x.pad(zero, &[p(-3, 0, 0), p(0, 0, 0)])).contains("negative"));
    let one = b.constant_r0(1i32);
    assert!(
        result(x.pad(one, &[p(0, 0, 0), p(0, 0, 0)]))
            .contains("padding value s32[] must have the operand's element type")
    );
}

#[test]
fn reduce_shapes() {
    let b = XlaBuilder::new("reduce");
    let x = param(&b, 0, F32, &[4, 2, 3]);
    let zero = b.constant_r0(0.0f32);
    let add = add_f32();
    assert_eq!(result(x.reduce(zero, &add, &[0])), "f32[2,3]");
    assert_eq!(result(x.reduce(zero, &add, &[2])), "f32[4,2]");
    assert_eq!(result(x.reduce(zero, &add, &[0, 1])), "f32[3]");
    assert_eq!(result(x.reduce(zero, &add, &[1, 0])), "f32[3]");
    assert_eq!(result(x.reduce(zero, &add, &[0, 1, 2])), "f32[]");
    assert!(result(x.reduce(zero, &add, &[3])).contains("not a dimension of a rank-3 array"));
    assert!(result(x.reduce(zero, &add, &[1, 1])).contains("repeats dimension 1"));
    let bad = binary_computation("lt", F32, |a, c| a.lt(c));
    assert_eq!(
        result(x.reduce(zero, &bad, &[0])),
        "error: reduce: reduction computation has signature (f32[], f32[]) -> pred[] but (f32[], f32[]) -> f32[] is required"
    );
    let vec_init = b.constant_r1(&[0.0f32]);
    assert!(result(x.reduce(vec_init, &add, &[0])).contains("must be a scalar"));
}

#[test]
fn reduce_window_and_select_and_scatter() {
    let b = XlaBuilder::new("window");
    let x = param(&b, 0, F32, &[4, 6]);
    let lowest = b.constant_r0(f32::MIN);
    let max = binary_computation("max", F32, |a, c| a.max(c));
    assert_eq!(
        result(x.reduce_window(lowest, &max, &[2, 3], &[2, 3], Padding::Valid)),
        "f32[2,2]"
    );
    assert_eq!(
        result(x.reduce_window(lowest, &max, &[2, 3], &[1, 1], Padding::Valid)),
        "f32[3,4]"
    );
    assert_eq!(
        result(x.reduce_window(lowest, &max, &[2, 3], &[1, 1], Padding::Same)),
        "f32[4,6]"
    );
    assert!(
        result(x.reduce_window(lowest, &max, &[2], &[1, 1], Padding::Valid))
            .contains("one entry per dimension")
    );
    let ge = binary_computation("ge", F32, |a, c| a.ge(c));
    let add = add_f32();
    let source = param(&b, 1, F32, &[2, 2]);
    let zero = b.constant_r0(0.0f32);
    assert_eq!(
        result(x.select_and_scatter(&ge, &[2, 3], &[2, 3], Padding::Valid, source, zero, &add)),
        "f32[4,6]"
    );
    let wrong_source = param(&b, 2, F32, &[3, 4]);
    assert!(result(x.select_and_scatter(&ge, &[2, 3], &[2, 3], Padding::Valid, wrong_source, zero, &add))
        .contains("source f32[3,4] must have the shape of a reduce-window of the operand f32[4,6], which is f32[2,2]"));
    assert!(
        result(x.select_and_scatter(&add, &[2, 3], &[2, 3], Padding::Valid, source, zero, &add))
            .contains("select computation")
    );
    assert!(
        result(x.select_and_scatter(&ge, &[2, 3], &[2, 3], Padding::Valid, source, zero, &ge))
            .contains("scatter computation")
    );
}

#[test]
fn reshape_shapes() {
    let b = XlaBuilder::new("reshape");
    let v = param(&b, 0, F32, &[4, 2, 3]);
    assert_eq!(
        result(v.reshape_with_dimensions(&[0, 1, 2], &[24])),
        "f32[24]"
    );
    assert_eq!(
        result(v.reshape_with_dimensions(&[0, 1, 2], &[8, 3])),
        "f32[8,3]"
    );
    assert_eq!(
        result(v.reshape_with_dimensions(&[1, 2, 0], &[24])),
        "f32[24]"
    );
    assert_eq!(
        result(v.reshape_with_dimensions(&[1, 2, 0], &[2, 6, 2])),
        "f32[2,6,2]"
    );
    assert!(result(v.reshape_with_dimensions(&[0, 0, 2], &[24])).contains("must be a permutation"));
    assert!(result(v.reshape(&[5, 5])).contains("the element counts differ"));
    let one = param(&b, 1, F32, &[1, 1]);
    assert_eq!(result(one.reshape_with_dimensions(&[0, 1], &[])), "f32[]");
    assert_eq!(result(b.constant_r0(5.0f32).reshape(&[1, 1])), "f32[1,1]");
}

#[test]
fn rev_rng_and_select() {
    let b = XlaBuilder::new("misc");
    let x = param(&b, 0, F32, &[2, 3]);
    assert_eq!(result(x.rev(&[0, 1])), "f32[2,3]");
    assert!(result(x.rev(&[2])).contains("not a dimension"));
    let (zero, one) = (b.constant_r0(0.0f32), b.constant_r0(1.0f32));
    assert_eq!(
        result(b.rng_uniform(zero, one, &shape(F32, &[5]))),
        "f32[5]"
    );
    assert_eq!(result(b.rng_normal(zero, one, &shape(F32, &[5]))), "f32[5]");
    let (lo, hi) = (b.constant_r0(0i32), b.constant_r0(10i32));
    assert_eq!(result(b.rng_uniform(lo, hi, &shape(S32, &[5]))), "s32[5]");
    assert!(
        result(b.rng_uniform(lo, hi, &shape(F32, &[5])))
            .contains("must have the same element type")
    );
    assert!(
        result(b.rng_uniform(zero, one, &shape(F64, &[5])))
            .contains("needs a result of element type f32, s32, u32")
    );
    assert!(
        result(b.rng_normal(lo, hi, &shape(S32, &[5])))
            .contains("needs a result of element type f32")
    );
    let vec = b.constant_r1(&[0.0f32]);
    assert!(result(b.rng_uniform(vec, one, &shape(F32, &[5]))).contains("must be a scalar"));
    let half = b.constant_r0(0.5f32);
    assert_eq!(result(b.rng_bernoulli(half, &shape(U32, &[5]))), "u32[5]");
    assert!(result(b.rng_bernoulli(half, &shape(F32, &[5]))).contains("u32 array"));
    assert!(result(b.rng_bernoulli(lo, &shape(U32, &[5]))).contains("f32 scalar"));

    let pred = b.constant_r1(&[true, false, false, true]);
    let v1 = b.constant_r1(&[1i32, 2, 3, 4]);
    let v2 = b.constant_r1(&[100i32, 200, 300, 400]);
    assert_eq!(result(pred.select(v1, v2)), "s32[4]");
    assert_eq!(result(b.constant_r0(true).select(v1, v2)), "s32[4]");
    let t1 = b.tuple(&[v1, half]);
    let t2 = b.tuple(&[v2, half]);
    assert_eq!(
        result(b.constant_r0(true).select(t1, t2)),
        "(s32[4], f32[])"
    );
    assert!(result(pred.select(t1, t2)).contains("scalar pred predicate"));
    assert!(result(pred.select(v1, b.constant_r1(&[1i32, 2]))).contains("same shape"));
    assert!(result(v1.select(v1, v2)).contains("pred must have element type pred"));
}

#[test]
fn slice_and_dynamic_slices() {
    let b = XlaBuilder::new("slice");
    let a = b.constant_r1(&[0.0f32, 1.0, 2.0, 3.0, 4.0]);
    assert_eq!(result(a.slice(&[2], &[4])), "f32[2]");
    let m = param(&b, 0, F32, &[4, 3]);
    assert_eq!(result(m.slice(&[2, 1], &[4, 3])), "f32[2,2]");
    assert!(
        result(m.slice(&[2, 1], &[2, 3])).contains("must be strictly greater than its start index")
    );
    assert!(result(m.slice(&[-1, 1], &[2, 3])).contains("0 <= start"));
    assert!(result(m.slice(&[0, 0], &[5, 3])).contains("<= 4"));
    assert!(result(m.slice(&[0], &[2])).contains("one [start:limit:stride] per dimension"));
    let s = b.constant_r1(&[2i32, 1]);
    assert_eq!(result(m.dynamic_slice(s, &[2, 2])), "f32[2,2]");
    assert!(result(m.dynamic_slice(s, &[0, 2])).contains("strictly greater than zero"));
    assert!(result(m.dynamic_slice(s, &[5, 2])).contains("slice size 5"));
    let bad_index = b.constant_r1(&[2i32]);
    assert!(result(m.dynamic_slice(bad_index, &[2, 2])).contains("one entry per dimension"));
    let u = param(&b, 1, F32, &[3, 2]);
    assert_eq!(result(m.dynamic_update_slice(u, s)), "f32[4,3]");
    let too_big = param(&b, 2, F32, &[5, 2]);
    assert!(result(m.dynamic_update_slice(too_big, s)).contains("does not fit"));
}

#[test]
fn sort_transpose_while() {
    let b = XlaBuilder::new("sort");
    let v = param(&b, 0, F32, &[5]);
    assert_eq!(result(v.sort()), "f32[5]");
    assert!(result(b.constant_r0(1.0f32).sort()).contains("rank >= 1"));
    let m = param(&b, 1, F32, &[2, 3, 4]);
    assert_eq!(result(m.transpose(&[2, 0, 1])), "f32[4,2,3]");
    assert!(result(m.transpose(&[0, 1])).contains("must be a permutation"));
    assert!(result(m.transpose(&[0, 1, 1])).contains("repeats dimension 1"));

    let t = Shape::tuple(vec![Shape::scalar(S32), shape(F32, &[10])]);
    let cond = {
        let cb = XlaBuilder::new("cond");
        let p = cb.parameter(0, &t, "p");
        cb.build(p.get_tuple_element(0).lt(cb.constant_r0(1000i32)))
            .unwrap()
    };
    let body = {
        let bb = XlaBuilder::new("body");
        let p = bb.parameter(0, &t, "p");
        let i = p.get_tuple_element(0) + bb.constant_r0(1i32);
        let acc = p.get_tuple_element(1) + bb.constant_literal(&Literal::vec1(&[1.0f32; 10]));
        bb.build(bb.tuple(&[i, acc])).unwrap()
    };
    let init = b.tuple(&[
        b.constant_r0(0i32),
        b.constant_literal(&Literal::vec1(&[0.0f32; 10])),
    ]);
    assert_eq!(result(b.while_loop(&cond, &body, init)), "(s32[], f32[10])");
    assert!(
        result(b.while_loop(&body, &body, init)).contains("condition computation has signature")
    );
    assert!(result(b.while_loop(&cond, &cond, init)).contains("body computation has signature"));
}

// ---- errors: first error wins, with the caller's location ----

#[test]
fn build_reports_the_first_error_with_its_location() {
    let b = XlaBuilder::new("errors");
    let x = param(&b, 0, F32, &[2, 3]);
    let y = param(&b, 1, F32, &[3]);
    let line = line!() + 1;
    let bad = x + y;
    let later = bad * x; // propagates without a second error
    let _other = x.transpose(&[0]);
    let e = b.build(later).unwrap_err();
    assert_eq!(e.op, "add");
    assert_eq!(e.location.file(), file!());
    assert_eq!(e.location.line(), line);
    assert!(
        e.to_string()
            .starts_with("add: operands of different ranks")
    );
    assert!(e.to_string().ends_with(&format!(
        "(at {}:{}:{})",
        file!(),
        line,
        e.location.column()
    )));
    assert!(!bad.is_valid() && !later.is_valid());
}

#[test]
fn parameter_rules() {
    let b = XlaBuilder::new("params");
    let _x = param(&b, 0, F32, &[2]);
    let dup = b.parameter(0, &Shape::scalar(F32), "again");
    assert_eq!(
        result(dup),
        "error: parameter: parameter number 0 is already declared"
    );
    let b = XlaBuilder::new("gap");
    let x = param(&b, 1, F32, &[2]);
    let e = b.build(x).unwrap_err();
    assert!(e.to_string().contains("number 0 is missing"), "{e}");
}

#[test]
fn operands_from_another_builder_are_rejected() {
    let a = XlaBuilder::new("a");
    let b = XlaBuilder::new("b");
    let x = a.constant_r0(1.0f32);
    let y = b.constant_r0(2.0f32);
    assert_eq!(
        result(x + y),
        "error: add: operand 1 was built by builder `b`, not by `a`"
    );
}

#[test]
fn computations_are_embedded_once() {
    let add = add_f32();
    let b = XlaBuilder::new("twice");
    let x = param(&b, 0, F32, &[4]);
    let zero = b.constant_r0(0.0f32);
    let r = x.reduce(zero, &add, &[0]) + x.reduce(zero, &add, &[0]);
    let c = b.build(r).unwrap();
    assert_eq!(c.module().computations().len(), 2);
    // A computation that itself calls `add`, used next to `add`: still one copy.
    let inner = {
        let ib = XlaBuilder::new("inner");
        let p = ib.parameter(0, &shape(F32, &[4]), "p");
        ib.build(p.reduce(ib.constant_r0(0.0f32), &add, &[0]))
            .unwrap()
    };
    let b = XlaBuilder::new("nested");
    let x = param(&b, 0, F32, &[4]);
    let r = b.call(&inner, &[x]) + x.reduce(b.constant_r0(0.0f32), &add, &[0]);
    let c = b.build(r).unwrap();
    let names: Vec<_> = c
        .module()
        .computations()
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    assert_eq!(names, ["add", "inner", "nested"]);
}

#[test]
fn scalar_operands_on_the_right() {
    let b = XlaBuilder::new("scalars");
    let x = param(&b, 0, F32, &[3]);
    assert_eq!(result(x * 2.0f32 + 1.0f32), "f32[3]");
    assert_eq!(
        result(x * 2i32),
        "error: multiply: operands must have the same element type, got f32[3] and s32[]"
    );
}
