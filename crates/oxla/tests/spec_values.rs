//! Every worked example of `xla-operation-semantics.md` and
//! `xla-broadcasting.md`, built with the builder and run, with the exact values
//! the spec gives.

use oxla::{
    Client, CompileOptions, Literal, PrimitiveType, Shape, XlaBuilder, XlaComputation, XlaOp,
};

fn run(computation: &XlaComputation, args: &[Literal]) -> Literal {
    Client::default()
        .compile(computation, &CompileOptions::default())
        .unwrap()
        .execute(args)
        .unwrap()
}

/// Builds `f(builder)` as the root and runs it without arguments.
fn eval(f: impl for<'b> Fn(&'b XlaBuilder) -> XlaOp<'b>) -> Literal {
    let b = XlaBuilder::new("example");
    let root = f(&b);
    run(&b.build(root).unwrap(), &[])
}

fn lit<A: oxla_hlo::literal::NestedArray>(a: A) -> Literal {
    Literal::from_nested(a).unwrap()
}

/// The spec's `v`: f32[4x2x3] with values 10..47.
fn v() -> Literal {
    lit([
        [[10.0f32, 11.0, 12.0], [15.0, 16.0, 17.0]],
        [[20.0, 21.0, 22.0], [25.0, 26.0, 27.0]],
        [[30.0, 31.0, 32.0], [35.0, 36.0, 37.0]],
        [[40.0, 41.0, 42.0], [45.0, 46.0, 47.0]],
    ])
}

fn add_f32() -> XlaComputation {
    let b = XlaBuilder::new("add");
    let x = b.parameter(0, &Shape::scalar(PrimitiveType::F32), "x");
    let y = b.parameter(1, &Shape::scalar(PrimitiveType::F32), "y");
    b.build(x + y).unwrap()
}

#[test]
fn broadcast_scalar() {
    assert_eq!(
        eval(|b| b.constant_r0(2.0f32).broadcast(&[2, 3])),
        lit([[2.0f32; 3]; 2])
    );
}

#[test]
fn collapse() {
    let flat = [
        10.0f32, 11., 12., 15., 16., 17., 20., 21., 22., 25., 26., 27., 30., 31., 32., 35., 36.,
        37., 40., 41., 42., 45., 46., 47.,
    ];
    assert_eq!(
        eval(|b| b.constant_literal(&v()).collapse(&[0, 1, 2])),
        Literal::vec1(&flat)
    );
    assert_eq!(
        eval(|b| b.constant_literal(&v()).collapse(&[0, 1])),
        lit([
            [10.0f32, 11., 12.],
            [15., 16., 17.],
            [20., 21., 22.],
            [25., 26., 27.],
            [30., 31., 32.],
            [35., 36., 37.],
            [40., 41., 42.],
            [45., 46., 47.]
        ])
    );
    assert_eq!(
        eval(|b| b.constant_literal(&v()).collapse(&[1, 2])),
        lit([
            [10.0f32, 11., 12., 15., 16., 17.],
            [20., 21., 22., 25., 26., 27.],
            [30., 31., 32., 35., 36., 37.],
            [40., 41., 42., 45., 46., 47.]
        ])
    );
}

#[test]
fn concatenate() {
    let r = eval(|b| {
        b.concat_in_dim(
            &[
                b.constant_r1(&[2i32, 3]),
                b.constant_r1(&[4, 5]),
                b.constant_r1(&[6, 7]),
            ],
            0,
        )
    });
    assert_eq!(r, Literal::vec1(&[2i32, 3, 4, 5, 6, 7]));
    let r = eval(|b| {
        let a = b.constant_literal(&lit([[1i32, 2], [3, 4], [5, 6]]));
        let c = b.constant_literal(&lit([[7i32, 8]]));
        b.concat_in_dim(&[a, c], 0)
    });
    assert_eq!(r, lit([[1i32, 2], [3, 4], [5, 6], [7, 8]]));
}

#[test]
fn convert_element_type() {
    let r = eval(|b| {
        b.constant_r1(&[0i32, 1, 2])
            .convert_element_type(PrimitiveType::F32)
    });
    assert_eq!(r, Literal::vec1(&[0.0f32, 1.0, 2.0]));
}

#[test]
fn dot() {
    let r = eval(|b| {
        b.constant_r1(&[1.0f32, 2.0, 3.0])
            .dot(b.constant_r1(&[4.0f32, 5.0, 6.0]))
    });
    assert_eq!(r, Literal::scalar(32.0f32));
    let m = lit([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    let r = eval(|b| {
        b.constant_literal(&m)
            .dot(b.constant_r1(&[1.0f32, 0.0, -1.0]))
    });
    assert_eq!(r, Literal::vec1(&[-2.0f32, -2.0]));
    let n = lit([[1.0f32, 0.0], [0.0, 1.0], [2.0, 3.0]]);
    let r = eval(|b| b.constant_literal(&m).dot(b.constant_literal(&n)));
    assert_eq!(r, lit([[7.0f32, 11.0], [16.0, 23.0]]));
}

/// The 3-D reduce example: f32[4x2x3], the values 1..6 replicated along dimension 0.
#[test]
fn reduce_3d_example() {
    let x = lit([[[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]; 4]);
    let reduce = |dims: &'static [i64]| {
        let x = x.clone();
        eval(move |b| {
            b.constant_literal(&x)
                .reduce(b.constant_r0(0.0f32), &add_f32(), dims)
        })
    };
    assert_eq!(reduce(&[0]), lit([[4.0f32, 8.0, 12.0], [16.0, 20.0, 24.0]]));
    assert_eq!(
        reduce(&[2]),
        lit([[6.0f32, 15.0], [6.0, 15.0], [6.0, 15.0], [6.0, 15.0]])
    );
    assert_eq!(reduce(&[0, 1]), Literal::vec1(&[20.0f32, 28.0, 36.0]));
    assert_eq!(reduce(&[0, 1, 2]), Literal::scalar(84.0f32));
}

#[test]
fn reshape_examples() {
    let r = |dims: &'static [i64], sizes: &'static [i64]| {
        eval(move |b| {
            b.constant_literal(&v())
                .reshape_with_dimensions(dims, sizes)
        })
    };
    let in_order = [
        10.0f32, 11., 12., 15., 16., 17., 20., 21., 22., 25., 26., 27., 30., 31., 32., 35., 36.,
        37., 40., 41., 42., 45., 46., 47.,
    ];
    assert_eq!(r(&[0, 1, 2], &[24]), Literal::vec1(&in_order));
    assert_eq!(
        r(&[0, 1, 2], &[8, 3]),
        Literal::vec1(&in_order).reshape(&[8, 3]).unwrap()
    );
    let out_of_order = [
        10.0f32, 20., 30., 40., 11., 21., 31., 41., 12., 22., 32., 42., 15., 25., 35., 45., 16.,
        26., 36., 46., 17., 27., 37., 47.,
    ];
    assert_eq!(r(&[1, 2, 0], &[24]), Literal::vec1(&out_of_order));
    assert_eq!(
        r(&[1, 2, 0], &[8, 3]),
        lit([
            [10.0f32, 20., 30.],
            [40., 11., 21.],
            [31., 41., 12.],
            [22., 32., 42.],
            [15., 25., 35.],
            [45., 16., 26.],
            [36., 46., 17.],
            [27., 37., 47.]
        ])
    );
    assert_eq!(
        r(&[1, 2, 0], &[2, 6, 2]),
        lit([
            [
                [10.0f32, 20.],
                [30., 40.],
                [11., 21.],
                [31., 41.],
                [12., 22.],
                [32., 42.]
            ],
            [
                [15., 25.],
                [35., 45.],
                [16., 26.],
                [36., 46.],
                [17., 27.],
                [37., 47.]
            ]
        ])
    );
    assert_eq!(
        eval(|b| b
            .constant_literal(&lit([[5.0f32]]))
            .reshape_with_dimensions(&[0, 1], &[])),
        Literal::scalar(5.0f32)
    );
    assert_eq!(
        eval(|b| b.constant_r0(5.0f32).reshape(&[1, 1])),
        lit([[5.0f32]])
    );
}

fn b_matrix() -> Literal {
    lit([
        [0.0f32, 1.0, 2.0],
        [3.0, 4.0, 5.0],
        [6.0, 7.0, 8.0],
        [9.0, 10.0, 11.0],
    ])
}

#[test]
fn slices() {
    let a = [0.0f32, 1.0, 2.0, 3.0, 4.0];
    assert_eq!(
        eval(|b| b.constant_r1(&a).slice(&[2], &[4])),
        Literal::vec1(&[2.0f32, 3.0])
    );
    assert_eq!(
        eval(|b| b.constant_literal(&b_matrix()).slice(&[2, 1], &[4, 3])),
        lit([[7.0f32, 8.0], [10.0, 11.0]])
    );
}

#[test]
fn dynamic_slices() {
    let a = [0.0f32, 1.0, 2.0, 3.0, 4.0];
    assert_eq!(
        eval(|b| b
            .constant_r1(&a)
            .dynamic_slice(b.constant_r1(&[2i32]), &[2])),
        Literal::vec1(&[2.0f32, 3.0])
    );
    assert_eq!(
        eval(|b| b
            .constant_literal(&b_matrix())
            .dynamic_slice(b.constant_r1(&[2i32, 1]), &[2, 2])),
        lit([[7.0f32, 8.0], [10.0, 11.0]])
    );
    let r = eval(|b| {
        b.constant_r1(&a)
            .dynamic_update_slice(b.constant_r1(&[5.0f32, 6.0]), b.constant_r1(&[2i32]))
    });
    assert_eq!(r, Literal::vec1(&[0.0f32, 1.0, 5.0, 6.0, 4.0]));
    let u = lit([[12.0f32, 13.0], [14.0, 15.0], [16.0, 17.0]]);
    let r = eval(|b| {
        b.constant_literal(&b_matrix())
            .dynamic_update_slice(b.constant_literal(&u), b.constant_r1(&[1i32, 1]))
    });
    assert_eq!(
        r,
        lit([
            [0.0f32, 1.0, 2.0],
            [3.0, 12.0, 13.0],
            [6.0, 14.0, 15.0],
            [9.0, 16.0, 17.0]
        ])
    );
    // Out-of-range starts clamp into [0, dim - size] (today's XLA).
    assert_eq!(
        eval(|b| b
            .constant_r1(&a)
            .dynamic_slice(b.constant_r1(&[4i32]), &[2])),
        Literal::vec1(&[3.0f32, 4.0])
    );
    assert_eq!(
        eval(|b| b
            .constant_r1(&a)
            .dynamic_slice(b.constant_r1(&[-3i32]), &[2])),
        Literal::vec1(&[0.0f32, 1.0])
    );
}

#[test]
fn select() {
    let v1 = [1i32, 2, 3, 4];
    let v2 = [100i32, 200, 300, 400];
    let r = eval(|b| {
        b.constant_r1(&[true, false, false, true])
            .select(b.constant_r1(&v1), b.constant_r1(&v2))
    });
    assert_eq!(r, Literal::vec1(&[1i32, 200, 300, 4]));
    let r = eval(|b| {
        b.constant_r0(true)
            .select(b.constant_r1(&v1), b.constant_r1(&v2))
    });
    assert_eq!(r, Literal::vec1(&v1));
    let r = eval(|b| {
        let t = b.tuple(&[b.constant_r1(&v1), b.constant_r0(1.5f32)]);
        let f = b.tuple(&[b.constant_r1(&v2), b.constant_r0(2.5f32)]);
        b.constant_r0(false).select(t, f)
    });
    assert_eq!(
        r,
        Literal::tuple(vec![Literal::vec1(&v2), Literal::scalar(2.5f32)])
    );
}

#[test]
fn tuple_and_get_tuple_element() {
    let values: Vec<f32> = (0..10).map(|i| i as f32).collect();
    let r = eval(|b| {
        b.tuple(&[b.constant_r1(&values), b.constant_r0(5i32)])
            .get_tuple_element(1)
    });
    assert_eq!(r, Literal::scalar(5i32));
}

#[test]
fn broadcasting_examples_with_values() {
    let m = lit([[1.0f32, 2.0, 3.0], [4.0, 5.0, 6.0]]);
    assert_eq!(
        eval(|b| b.constant_literal(&m) + b.constant_r0(7.0f32)),
        lit([[8.0f32, 9.0, 10.0], [11.0, 12.0, 13.0]])
    );
    let r = eval(|b| {
        b.constant_literal(&m)
            .add_with_dims(b.constant_r1(&[7.0f32, 8.0, 9.0]), &[1])
    });
    assert_eq!(r, lit([[8.0f32, 10.0, 12.0], [11.0, 13.0, 15.0]]));
    let ones = lit([[1.0f32; 3]; 3]);
    let r = eval(|b| {
        b.constant_literal(&ones)
            .add_with_dims(b.constant_r1(&[7.0f32, 8.0, 9.0]), &[1])
    });
    assert_eq!(r, lit([[8.0f32, 9.0, 10.0]; 3]));
    let r = eval(|b| {
        b.constant_literal(&ones)
            .add_with_dims(b.constant_r1(&[7.0f32, 8.0, 9.0]), &[0])
    });
    assert_eq!(r, lit([[8.0f32; 3], [9.0; 3], [10.0; 3]]));
    // The outer operation: (2,1) + (1,3).
    let r = eval(|b| {
        b.constant_literal(&lit([[1.0f32], [2.0]]))
            + b.constant_literal(&lit([[10.0f32, 20.0, 30.0]]))
    });
    assert_eq!(r, lit([[11.0f32, 21.0, 31.0], [12.0, 22.0, 32.0]]));
    // Composition: |1 2 3 4| + [5 6] with dims (0).
    let r = eval(|b| {
        b.constant_r1(&[1.0f32, 2.0, 3.0, 4.0])
            .add_with_dims(b.constant_literal(&lit([[5.0f32, 6.0]])), &[0])
    });
    assert_eq!(r, lit([[6.0f32, 7.0], [7.0, 8.0], [8.0, 9.0], [9.0, 10.0]]));
    // Composition: 1x2 + 4x3x1 with dims (1, 2) gives 4x3x2: out[i][j][k] = small[0][k] + big[i][j][0].
    let small = lit([[1.0f32, 2.0]]);
    let big = lit([[[100.0f32], [200.0], [300.0]]; 4]);
    let r = eval(|b| {
        b.constant_literal(&small)
            .add_with_dims(b.constant_literal(&big), &[1, 2])
    });
    assert_eq!(
        r,
        lit([[[101.0f32, 102.0], [201.0, 202.0], [301.0, 302.0]]; 4])
    );
}

#[test]
fn while_example() {
    // 1000 iterations adding a constant vector to an accumulator.
    let state = Shape::tuple(vec![
        Shape::scalar(PrimitiveType::S32),
        Shape::array(PrimitiveType::F32, [10]).unwrap(),
    ]);
    let cond = {
        let b = XlaBuilder::new("cond");
        let p = b.parameter(0, &state, "p");
        b.build(p.get_tuple_element(0).lt(b.constant_r0(1000i32)))
            .unwrap()
    };
    let body = {
        let b = XlaBuilder::new("body");
        let p = b.parameter(0, &state, "p");
        let i = p.get_tuple_element(0) + b.constant_r0(1i32);
        let acc = p.get_tuple_element(1) + b.constant_r1(&[0.5f32; 10]);
        b.build(b.tuple(&[i, acc])).unwrap()
    };
    let r = eval(|b| {
        b.while_loop(
            &cond,
            &body,
            b.tuple(&[b.constant_r0(0i32), b.constant_r1(&[0.0f32; 10])]),
        )
    });
    assert_eq!(
        r,
        Literal::tuple(vec![
            Literal::scalar(1000i32),
            Literal::vec1(&[500.0f32; 10])
        ])
    );
}

#[test]
fn map_with_a_static_operand() {
    // Map(x, y, f, static) with f(a, b, s) = a * b + s[1].
    let f = {
        let b = XlaBuilder::new("f");
        let a = b.parameter(0, &Shape::scalar(PrimitiveType::F32), "a");
        let c = b.parameter(1, &Shape::scalar(PrimitiveType::F32), "c");
        let s = b.parameter(2, &Shape::array(PrimitiveType::F32, [2]).unwrap(), "s");
        b.build(a * c + s.slice(&[1], &[2]).reshape(&[])).unwrap()
    };
    let r = eval(|b| {
        b.map(
            &[
                b.constant_r1(&[1.0f32, 2.0, 3.0]),
                b.constant_r1(&[4.0f32, 5.0, 6.0]),
            ],
            &f,
            &[b.constant_r1(&[0.0f32, 100.0])],
        )
    });
    assert_eq!(r, Literal::vec1(&[104.0f32, 110.0, 118.0]));
}

#[test]
fn reduce_window_and_select_and_scatter() {
    let max = {
        let b = XlaBuilder::new("max");
        let x = b.parameter(0, &Shape::scalar(PrimitiveType::F32), "x");
        let y = b.parameter(1, &Shape::scalar(PrimitiveType::F32), "y");
        b.build(x.max(y)).unwrap()
    };
    let ge = {
        let b = XlaBuilder::new("ge");
        let x = b.parameter(0, &Shape::scalar(PrimitiveType::F32), "x");
        let y = b.parameter(1, &Shape::scalar(PrimitiveType::F32), "y");
        b.build(x.ge(y)).unwrap()
    };
    let input = lit([
        [1.0f32, 5.0, 2.0, 3.0, 9.0, 4.0],
        [7.0, 0.0, 8.0, 6.0, 1.0, 2.0],
        [1.0, 2.0, 3.0, 4.0, 5.0, 6.0],
        [6.0, 5.0, 4.0, 3.0, 2.0, 1.0],
    ]);
    let r = eval(|b| {
        b.constant_literal(&input).reduce_window(
            b.constant_r0(f32::MIN),
            &max,
            &[2, 3],
            &[2, 3],
            oxla::Padding::Valid,
        )
    });
    assert_eq!(r, lit([[8.0f32, 9.0], [6.0, 6.0]]));
    let r = eval(|b| {
        let source = b.constant_literal(&lit([[2.0f32, 6.0], [3.0, 1.0]]));
        b.constant_literal(&input).select_and_scatter(
            &ge,
            &[2, 3],
            &[2, 3],
            oxla::Padding::Valid,
            source,
            b.constant_r0(0.0f32),
            &add_f32(),
        )
    });
    let want = lit([
        [0.0f32, 0.0, 0.0, 0.0, 6.0, 0.0],
        [0.0, 0.0, 2.0, 0.0, 0.0, 0.0],
        [0.0, 0.0, 0.0, 0.0, 0.0, 1.0],
        [3.0, 0.0, 0.0, 0.0, 0.0, 0.0],
    ]);
    assert_eq!(r, want);
    // Overlapping windows (stride 1 along the rows) select 9 twice: the scatter adds both.
    let r = eval(|b| {
        let source = b.constant_literal(&lit([[2.0f32, 6.0], [3.0, 1.0], [4.0, 5.0]]));
        b.constant_literal(&input).select_and_scatter(
            &ge,
            &[2, 3],
            &[1, 3],
            oxla::Padding::Valid,
            source,
            b.constant_r0(0.0f32),
            &add_f32(),
        )
    });
    assert_eq!(r.get::<f32>(&[0, 4]).unwrap(), 6.0);
    assert_eq!(r.get::<f32>(&[1, 2]).unwrap(), 2.0 + 3.0);
}

#[test]
fn sort_is_ascending_and_puts_nan_last() {
    let r = eval(|b| {
        b.constant_r1(&[3.0f32, f32::NAN, -1.0, 2.0, -0.0, 0.0])
            .sort()
    });
    let got = r.to_vec::<f32>().unwrap();
    assert_eq!(&got[..5], &[-1.0, -0.0, 0.0, 2.0, 3.0]);
    assert!(got[1].is_sign_negative() && got[5].is_nan());
}

#[test]
fn rev_pad_transpose_iota() {
    assert_eq!(
        eval(|b| b.constant_literal(&lit([[1i32, 2], [3, 4]])).rev(&[0, 1])),
        lit([[4i32, 3], [2, 1]])
    );
    let p = |low, high, interior| oxla_hlo::ir::PadDim {
        low,
        high,
        interior,
    };
    let r = eval(|b| {
        b.constant_r1(&[1i32, 2, 3])
            .pad(b.constant_r0(0i32), &[p(1, -1, 1)])
    });
    assert_eq!(r, Literal::vec1(&[0i32, 1, 0, 2, 0]));
    assert_eq!(
        eval(|b| b.constant_literal(&lit([[1i32, 2, 3]])).transpose(&[1, 0])),
        lit([[1i32], [2], [3]])
    );
    assert_eq!(
        eval(|b| b.iota(PrimitiveType::S32, &[2, 3], 1)),
        lit([[0i32, 1, 2], [0, 1, 2]])
    );
}

#[test]
fn rng_bernoulli_has_the_requested_mean() {
    let b = XlaBuilder::new("bernoulli");
    let c = b
        .build(b.rng_bernoulli(
            b.constant_r0(0.25f32),
            &Shape::array(PrimitiveType::U32, [100_000]).unwrap(),
        ))
        .unwrap();
    let values = run(&c, &[]).to_vec::<u32>().unwrap();
    assert!(values.iter().all(|&v| v <= 1));
    let mean = values.iter().map(|&v| v as f64).sum::<f64>() / values.len() as f64;
    assert!((mean - 0.25).abs() < 0.01, "mean {mean}");
}
