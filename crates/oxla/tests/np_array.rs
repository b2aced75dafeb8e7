//! The eager `Array`: the Array API broadcasting examples on real data, the
//! in-place rules, mixed ranks and dtypes, and NumPy-like printing.

use oxla::PrimitiveType::*;
use oxla::np::{Array, Ix, where_array};

/// An array of `dims` whose element at flat position `i` is `f(i)`.
fn filled(dims: &[i64], f: impl Fn(usize) -> f32) -> Array {
    let n: i64 = dims.iter().product();
    Array::from_vec(dims, (0..n as usize).map(f).collect())
}

/// Row-major multi-index of flat position `i` in `dims`.
fn unravel(mut i: usize, dims: &[i64]) -> Vec<usize> {
    let mut out = vec![0; dims.len()];
    for k in (0..dims.len()).rev() {
        out[k] = i % dims[k] as usize;
        i /= dims[k] as usize;
    }
    out
}

/// Flat position in `dims` of the broadcast source of result index `idx`.
fn source(idx: &[usize], dims: &[i64]) -> usize {
    let offset = idx.len() - dims.len();
    dims.iter().enumerate().fold(0, |acc, (k, &d)| {
        acc * d as usize + if d == 1 { 0 } else { idx[k + offset] }
    })
}

#[test]
fn the_six_broadcasting_examples_with_values() {
    let cases: &[(&[i64], &[i64], &[i64])] = &[
        (&[8, 1, 6, 1], &[7, 1, 5], &[8, 7, 6, 5]),
        (&[5, 4], &[1], &[5, 4]),
        (&[5, 4], &[4], &[5, 4]),
        (&[15, 3, 5], &[15, 1, 5], &[15, 3, 5]),
        (&[15, 3, 5], &[3, 5], &[15, 3, 5]),
        (&[15, 3, 5], &[3, 1], &[15, 3, 5]),
    ];
    for (da, db, dout) in cases {
        let fa = |i: usize| i as f32;
        let fb = |i: usize| 1000.0 * (i as f32 + 1.0);
        let r = &filled(da, fa) + &filled(db, fb);
        assert_eq!(r.shape().unwrap(), dout.to_vec(), "{da:?} + {db:?}");
        let values = r.to_vec::<f32>().unwrap();
        for (i, &v) in values.iter().enumerate() {
            let idx = unravel(i, dout);
            assert_eq!(
                v,
                fa(source(&idx, da)) + fb(source(&idx, db)),
                "{da:?} + {db:?} at {idx:?}"
            );
        }
    }
}

#[test]
fn the_three_non_examples_fail() {
    let a = filled(&[3], |i| i as f32);
    let b = filled(&[4], |i| i as f32);
    assert_eq!(
        (&a + &b).check().unwrap_err().to_string(),
        "add: cannot broadcast 3 with 4: dimension 0 is 3 vs 4"
    );
    let c = filled(&[2, 1], |i| i as f32) + &filled(&[8, 4, 3], |i| i as f32);
    assert_eq!(
        c.check().unwrap_err().to_string(),
        "add: cannot broadcast 2x1 with 8x4x3: dimension 1 is 2 vs 4"
    );
    let d = filled(&[15, 3, 5], |i| i as f32) + &filled(&[15, 3], |i| i as f32);
    assert!(
        d.check()
            .unwrap_err()
            .to_string()
            .ends_with("(singleton dimensions can only be prepended)")
    );
    // Errors propagate through later operations.
    assert!((d * 2.0).check().is_err());
}

#[test]
fn in_place_semantics_from_the_spec() {
    let mut x = Array::zeros(F32, &[2, 3, 4]);
    let a = filled(&[1, 3, 4], |i| i as f32);
    // x[...] = a: (1,3,4) broadcasts to (2,3,4).
    x.assign(&a).unwrap();
    let v = x.to_vec::<f32>().unwrap();
    assert_eq!(&v[..12], &v[12..]);
    assert_eq!(v[13], 1.0);
    // x[1, ...] = a: (1,3,4) cannot broadcast to (3,4) without changing it.
    let e = x.set(&[Ix::At(1), Ix::Ellipsis], &a).unwrap_err();
    assert_eq!(
        e.to_string(),
        "assignment: a value of shape 1x3x4 cannot be stored in shape 3x4: broadcasting would change it to 1x3x4"
    );
    // x is unchanged by the failed assignment; a fitting one works.
    x.set(&[Ix::At(1), Ix::Ellipsis], filled(&[3, 4], |_| 7.0))
        .unwrap();
    assert_eq!(
        x.index(&[Ix::At(1)]).to_vec::<f32>().unwrap(),
        vec![7.0; 12]
    );
    assert_eq!(
        x.index(&[Ix::At(0), Ix::At(2), Ix::At(3)])
            .to_vec::<f32>()
            .unwrap(),
        vec![11.0]
    );
}

#[test]
fn augmented_assignment_keeps_shape_and_dtype() {
    let mut x = Array::from_nested([[1i32, 2, 3], [4, 5, 6]]);
    x += &Array::from_nested([10i32, 20, 30]);
    assert_eq!(x, Array::from_nested([[11i32, 22, 33], [14, 25, 36]]));
    x *= 2;
    assert_eq!(x, Array::from_nested([[22i32, 44, 66], [28, 50, 72]]));
    // A float result cannot be stored in an int array; the array is left as it was.
    let e = x.try_op_assign(oxla::np::BinaryOp::Add, 0.5).unwrap_err();
    assert!(
        e.to_string()
            .contains("cannot be stored in the left operand's s32"),
        "{e}"
    );
    assert_eq!(x.dtype().unwrap(), S32);
    // Broadcasting that would grow the left operand is refused.
    let mut y = Array::from_nested([1.0f32, 2.0]);
    let e = y
        .try_op_assign(
            oxla::np::BinaryOp::Add,
            Array::from_nested([[1.0f32], [2.0]]),
        )
        .unwrap_err();
    assert!(e.to_string().contains("cannot be stored in shape 2"), "{e}");
    // `+=` that fails leaves the error in the array.
    y += &Array::from_nested([[1.0f32], [2.0]]);
    assert!(!y.is_ok());
}

#[test]
fn mixed_ranks_and_dtypes() {
    let u = Array::from_nested([[200u8, 100], [0, 255]]);
    let i = Array::from_nested([-1i8, 2]);
    let r = &u + &i;
    assert_eq!(r.dtype().unwrap(), S16);
    assert_eq!(r, Array::from_nested([[199i16, 102], [-1, 257]]));
    let f = Array::from_nested([0.5f32, 0.25]);
    let g = &i * &f;
    // int8 with float32 promotes to float32 (int8 fits in float16, float16 with float32 is float32).
    assert_eq!(g, Array::from_nested([-0.5f32, 0.5]));
    assert_eq!(
        &Array::from_nested([7i32, -7]) / 2,
        Array::from_nested([3.5f64, -3.5])
    );
    // remainder takes the divisor's sign, like Python's %.
    assert_eq!(
        &Array::from_nested([7i32, -7, 7, -7]) % &Array::from_nested([3i32, 3, -3, -3]),
        Array::from_nested([1i32, 2, -2, -1])
    );
    assert_eq!(
        &Array::from_nested([5.5f64, -5.5]) % 2.0,
        Array::from_nested([1.5f64, 0.5])
    );
    assert_eq!(
        2.0 - &Array::from_nested([1.0f32, 3.0]),
        Array::from_nested([1.0f32, -1.0])
    );
    assert_eq!(
        Array::from_nested([1i64, 5, 3]).maximum(2),
        Array::from_nested([2i64, 5, 3])
    );
    let mask = Array::from_nested([1.0f32, 5.0, 3.0]).less(Array::from_nested([2.0f32]));
    assert_eq!(mask, Array::from_nested([true, false, false]));
    assert_eq!(
        where_array(&mask, 1, Array::from_nested([[9.0f32], [8.0]])),
        Array::from_nested([[1.0f32, 9.0, 9.0], [1.0, 8.0, 8.0]])
    );
    assert!(
        (&Array::from_nested([1u8, 2]) + 300)
            .check()
            .unwrap_err()
            .to_string()
            .contains("does not fit in u8")
    );
}

#[test]
fn indexing_follows_numpy() {
    let x = Array::from_vec(&[3, 4], (0..12).collect::<Vec<i32>>());
    assert_eq!(
        x.index(&[Ix::At(-1)]),
        Array::from_nested([8i32, 9, 10, 11])
    );
    assert_eq!(
        x.index(&[
            Ix::All,
            Ix::Range {
                start: None,
                stop: None,
                step: -2
            }
        ]),
        Array::from_nested([[3i32, 1], [7, 5], [11, 9]])
    );
    assert_eq!(
        x.index(&[Ix::range(1, 10), Ix::At(0)]),
        Array::from_nested([4i32, 8])
    );
    assert_eq!(
        x.index(&[Ix::NewAxis, Ix::At(0)]).shape().unwrap(),
        vec![1, 4]
    );
    assert!(
        x.index(&[Ix::At(3)])
            .check()
            .unwrap_err()
            .to_string()
            .contains("out of bounds")
    );
    assert!(x.index(&[Ix::At(0), Ix::At(0), Ix::At(0)]).check().is_err());
}

#[test]
fn numpy_printing() {
    let x = Array::from_nested([[1.0f32, 2.5], [-3.0, 4.0]]);
    assert_eq!(x.to_string(), "[[ 1.   2.5]\n [-3.   4. ]]");
    assert_eq!(
        x.repr(),
        "array([[ 1. ,  2.5],\n       [-3. ,  4. ]], dtype=float32)"
    );
    assert_eq!(
        Array::from_nested([1i64, 20, 300]).to_string(),
        "[  1  20 300]"
    );
    assert_eq!(
        Array::from_nested([true, false]).repr(),
        "array([ True, False])"
    );
    assert_eq!(Array::scalar(0.1f32).to_string(), "0.1");
    let cube = Array::from_vec(&[2, 2, 2], (0..8).collect::<Vec<i32>>());
    assert_eq!(cube.to_string(), "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]");
    assert_eq!(
        Array::from_nested([1e-5f64, 1.0]).to_string(),
        "[1.e-05 1.e+00]"
    );
}
