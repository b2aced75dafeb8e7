//! `array-api-broadcasting.md` as tests: its examples, its non-examples,
//! properties of `broadcast_shapes`, and the front end's lowering to strict XLA.

use oxla::np::{self, Tensor, broadcast_pair, broadcast_shapes};
use oxla::{PrimitiveType, PrimitiveType::*, Shape, XlaBuilder};
use oxla_hlo::ir::Opcode;
use proptest::prelude::*;

#[test]
fn the_specs_examples_broadcast() {
    let cases: &[(&[i64], &[i64], &[i64])] = &[
        (&[8, 1, 6, 1], &[7, 1, 5], &[8, 7, 6, 5]),
        (&[5, 4], &[1], &[5, 4]),
        (&[5, 4], &[4], &[5, 4]),
        (&[15, 3, 5], &[15, 1, 5], &[15, 3, 5]),
        (&[15, 3, 5], &[3, 5], &[15, 3, 5]),
        (&[15, 3, 5], &[3, 1], &[15, 3, 5]),
    ];
    for (a, b, want) in cases {
        assert_eq!(
            broadcast_pair(a, b).as_deref(),
            Ok(*want),
            "{a:?} with {b:?}"
        );
        assert_eq!(
            broadcast_pair(b, a).as_deref(),
            Ok(*want),
            "{b:?} with {a:?}"
        );
    }
}

#[test]
fn the_specs_non_examples_fail_with_their_reason() {
    assert_eq!(
        broadcast_pair(&[3], &[4]).unwrap_err().to_string(),
        "cannot broadcast 3 with 4: dimension 0 is 3 vs 4"
    );
    assert_eq!(
        broadcast_pair(&[2, 1], &[8, 4, 3]).unwrap_err().to_string(),
        "cannot broadcast 2x1 with 8x4x3: dimension 1 is 2 vs 4"
    );
    assert_eq!(
        broadcast_pair(&[15, 3, 5], &[15, 3])
            .unwrap_err()
            .to_string(),
        "cannot broadcast 15x3x5 with 15x3: dimension 2 is 5 vs 3, dimension 1 is 3 vs 15 (singleton dimensions can only be prepended)"
    );
}

#[test]
fn several_shapes() {
    assert_eq!(
        broadcast_shapes(&[&[2, 1, 4], &[3, 1], &[1]]),
        Ok(vec![2, 3, 4])
    );
    assert_eq!(broadcast_shapes(&[]), Ok(vec![]));
    assert!(broadcast_shapes(&[&[2], &[3], &[1]]).is_err());
}

/// The spec's loop, transcribed a second time independently: pad with
/// leading 1s, then compare position by position.
fn transcription(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let n = a.len().max(b.len());
    let pad = |s: &[i64]| -> Vec<i64> {
        std::iter::repeat_n(1, n - s.len())
            .chain(s.iter().copied())
            .collect()
    };
    let (a, b) = (pad(a), pad(b));
    a.iter()
        .zip(&b)
        .map(|(&x, &y)| {
            if x == 1 {
                Some(y)
            } else if y == 1 || x == y {
                Some(x)
            } else {
                None
            }
        })
        .collect()
}

proptest! {
    #[test]
    fn broadcast_matches_the_algorithm_and_is_symmetric(
        a in prop::collection::vec(0i64..4, 0..5),
        b in prop::collection::vec(0i64..4, 0..5),
    ) {
        let got = broadcast_pair(&a, &b).ok();
        prop_assert_eq!(&got, &transcription(&a, &b));
        prop_assert_eq!(got, broadcast_pair(&b, &a).ok());
    }
}

fn tensor<'b>(b: &'b XlaBuilder, n: usize, ty: PrimitiveType, dims: &[i64]) -> Tensor<'b> {
    Tensor::parameter(b, n, &Shape::array(ty, dims).unwrap(), &format!("p{n}"))
}

fn shape_of(t: Tensor<'_>) -> String {
    match t.op().shape() {
        Ok(s) => s.to_string(),
        Err(e) => format!("error: {}: {}", e.op, e.message),
    }
}

#[test]
fn mixed_ranks_and_types_promote_and_broadcast() {
    let b = XlaBuilder::new("np");
    let a = tensor(&b, 0, F32, &[8, 1, 6, 1]);
    let c = tensor(&b, 1, S16, &[7, 1, 5]);
    assert_eq!(shape_of(a + c), "f32[8,7,6,5]");
    let u = tensor(&b, 2, U8, &[5, 4]);
    let i = tensor(&b, 3, S8, &[4]);
    assert_eq!(shape_of(u + i), "s16[5,4]");
    assert_eq!(shape_of(u * 3), "u8[5,4]");
    assert_eq!(shape_of(u * 2.5), "f64[5,4]");
    assert_eq!(shape_of(u / i), "f64[5,4]");
    assert_eq!(shape_of(np::less(u, i)), "pred[5,4]");
    assert_eq!(
        shape_of(u + 300),
        "error: add: the scalar 300 does not fit in u8"
    );
    let h = tensor(&b, 4, F16, &[4]);
    assert_eq!(shape_of(h * 2.0), "f16[4]");
    assert_eq!(shape_of(2.0 - h), "f16[4]");
    let big = tensor(&b, 5, U64, &[4]);
    let signed = tensor(&b, 6, S64, &[4]);
    assert!(shape_of(big + signed).contains("no signed integer type holds every u64 value"));
    assert_eq!(
        shape_of(tensor(&b, 7, F32, &[15, 3, 5]) + tensor(&b, 8, F32, &[15, 3])),
        "error: add: cannot broadcast 15x3x5 with 15x3: dimension 2 is 5 vs 3, dimension 1 is 3 vs 15 (singleton dimensions can only be prepended)"
    );
}

#[test]
fn where_and_logical_ops() {
    let b = XlaBuilder::new("where");
    let cond = tensor(&b, 0, Pred, &[3, 1]);
    let x = tensor(&b, 1, S32, &[4]);
    assert_eq!(shape_of(np::where_(cond, x, 0.5)), "f64[3,4]");
    assert_eq!(shape_of(np::where_(cond, 1, 2)), "s64[3,1]");
    assert_eq!(shape_of(np::logical_and(cond, true)), "pred[3,1]");
    assert_eq!(
        shape_of(np::logical_or(cond, x)),
        "error: logical_or: needs bool operands, got s32[4]"
    );
    assert_eq!(shape_of(!cond), "pred[3,1]");
    assert_eq!(
        shape_of(np::where_(x, x, x)),
        "error: where: the condition must be bool, got s32[4]"
    );
}

#[test]
fn implicit_steps_become_explicit_instructions() {
    let b = XlaBuilder::new("lowering");
    let m = tensor(&b, 0, F32, &[2, 3]);
    let v = tensor(&b, 1, S32, &[3]);
    let c = b.build((m + v).op()).unwrap();
    let entry = c.module().entry();
    let ops: Vec<Opcode> = entry.instructions().iter().map(|i| i.opcode).collect();
    // s32 with f32 promotes to f64 (NumPy's rule), so both sides convert; the vector broadcasts.
    assert_eq!(
        ops,
        [
            Opcode::Parameter,
            Opcode::Parameter,
            Opcode::Convert,
            Opcode::Convert,
            Opcode::Broadcast,
            Opcode::Add
        ]
    );
    let b = XlaBuilder::new("lowering2");
    let m = tensor(&b, 0, F32, &[2, 3]);
    let v = tensor(&b, 1, F32, &[3]);
    let c = b.build((m * v).op()).unwrap();
    let broadcast = c
        .module()
        .entry()
        .instructions()
        .iter()
        .find(|i| i.opcode == Opcode::Broadcast)
        .unwrap();
    assert_eq!(broadcast.attrs.dimensions.as_deref(), Some(&[1i64][..]));
}

#[test]
fn errors_point_at_the_callers_line() {
    let b = XlaBuilder::new("located");
    let x = tensor(&b, 0, F32, &[3]);
    let y = tensor(&b, 1, F32, &[4]);
    let line = line!() + 1;
    let z = x + y;
    let e = b.build(z.op()).unwrap_err();
    assert_eq!((e.location.file(), e.location.line()), (file!(), line));
}
