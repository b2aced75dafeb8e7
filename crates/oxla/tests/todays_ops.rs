//! Today's HLO operations (beyond the 2017 text) through the builder and the
//! client, with hand-computed values.

use oxla::{
    Client, CompileOptions, Literal, PrimitiveType, Shape, XlaBuilder, XlaComputation, XlaOp,
};
use oxla_hlo::ir::{
    ComparisonDirection, ComparisonType, DotDimensionNumbers, FftType, GatherDimensionNumbers,
    ScatterDimensionNumbers, TriangularSolveOptions, TriangularTranspose, Window, WindowDim,
};
use oxla_hlo::num_complex::Complex32;

fn eval(f: impl for<'b> Fn(&'b XlaBuilder) -> XlaOp<'b>) -> Literal {
    let b = XlaBuilder::new("todays_ops");
    let root = f(&b);
    let c = b.build(root).unwrap();
    Client::default()
        .compile(&c, &CompileOptions::default())
        .unwrap()
        .execute(&[])
        .unwrap()
}

fn lit<A: oxla_hlo::literal::NestedArray>(a: A) -> Literal {
    Literal::from_nested(a).unwrap()
}

fn scalar_fn(
    name: &str,
    params: &[PrimitiveType],
    f: impl for<'b> Fn(&'b XlaBuilder, &[XlaOp<'b>]) -> XlaOp<'b>,
) -> XlaComputation {
    let b = XlaBuilder::new(name);
    let ps: Vec<XlaOp<'_>> = params
        .iter()
        .enumerate()
        .map(|(i, &t)| b.parameter(i, &Shape::scalar(t), &format!("p{i}")))
        .collect();
    let root = f(&b, &ps);
    b.build(root).unwrap()
}

#[test]
fn argmax_with_a_variadic_reduce() {
    use PrimitiveType::{F32, S32};
    // (value, index) pairs: keep the larger value, the lower index on ties.
    let argmax = scalar_fn("argmax", &[F32, S32, F32, S32], |b, p| {
        let take_left = p[0].gt(p[2]).or(p[0].eq(p[2]).and(p[1].lt(p[3])));
        b.tuple(&[take_left.select(p[0], p[2]), take_left.select(p[1], p[3])])
    });
    let r = eval(|b| {
        let x = b.constant_literal(&lit([[1.0f32, 7.0, 3.0, 7.0], [-1.0, -2.0, -0.5, -9.0]]));
        let idx = b.iota(S32, &[2, 4], 1);
        b.reduce_variadic(
            &[x, idx],
            &[b.constant_r0(f32::NEG_INFINITY), b.constant_r0(0i32)],
            &argmax,
            &[1],
        )
    });
    assert_eq!(
        r,
        Literal::tuple(vec![
            Literal::vec1(&[7.0f32, -0.5]),
            Literal::vec1(&[1i32, 2])
        ])
    );
}

#[test]
fn variadic_reduce_window_and_top_k() {
    use PrimitiveType::{F32, S32};
    let sum2 = scalar_fn("sum2", &[F32, S32, F32, S32], |b, p| {
        b.tuple(&[p[0] + p[2], p[1] + p[3]])
    });
    let window = Window {
        dims: vec![WindowDim {
            stride: 2,
            ..WindowDim::new(2)
        }],
    };
    let r = eval(|b| {
        let x = b.constant_r1(&[1.0f32, 2.0, 3.0, 4.0]);
        let n = b.constant_r1(&[10i32, 20, 30, 40]);
        b.reduce_window_variadic(
            &[x, n],
            &[b.constant_r0(0.0f32), b.constant_r0(0i32)],
            &sum2,
            &window,
        )
    });
    assert_eq!(
        r,
        Literal::tuple(vec![
            Literal::vec1(&[3.0f32, 7.0]),
            Literal::vec1(&[30i32, 70])
        ])
    );
    let r = eval(|b| {
        b.constant_literal(&lit([
            [3.0f32, 1.0, 4.0, 1.0, 5.0],
            [9.0, 2.0, 6.0, 5.0, 3.0],
        ]))
        .top_k(3)
    });
    assert_eq!(
        r,
        Literal::tuple(vec![
            lit([[5.0f32, 4.0, 3.0], [9.0, 6.0, 5.0]]),
            lit([[4i32, 2, 0], [0, 2, 3]])
        ])
    );
}

#[test]
fn gather_and_variadic_scatter() {
    use PrimitiveType::S32;
    // x[idx] along axis 0 (jnp.take), with an out-of-range index clamped.
    let g = GatherDimensionNumbers {
        offset_dims: vec![1],
        collapsed_slice_dims: vec![0],
        start_index_map: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let r = eval(|b| {
        let x = b.constant_literal(&lit([[1i32, 2], [3, 4], [5, 6]]));
        x.gather(
            b.constant_literal(&lit([[2i32], [0], [7]])),
            &g,
            &[1, 2],
            false,
        )
    });
    assert_eq!(r, lit([[5i32, 6], [1, 2], [5, 6]]));
    // Scatter-add into two arrays at once; index 1 appears twice.
    let add2 = scalar_fn("add2", &[S32, S32, S32, S32], |b, p| {
        b.tuple(&[p[0] + p[2], p[1] + p[3]])
    });
    let d = ScatterDimensionNumbers {
        update_window_dims: vec![],
        inserted_window_dims: vec![0],
        scatter_dims_to_operand_dims: vec![0],
        index_vector_dim: 1,
        ..Default::default()
    };
    let r = eval(|b| {
        let idx = b.constant_literal(&lit([[1i32], [1], [3]]));
        b.scatter_variadic(
            &[b.constant_r1(&[0i32; 4]), b.constant_r1(&[100i32; 4])],
            idx,
            &[
                b.constant_r1(&[1i32, 2, 3]),
                b.constant_r1(&[10i32, 20, 30]),
            ],
            &add2,
            &d,
        )
    });
    assert_eq!(
        r,
        Literal::tuple(vec![
            Literal::vec1(&[0i32, 3, 0, 3]),
            Literal::vec1(&[100i32, 130, 100, 130])
        ])
    );
}

#[test]
fn sort_with_a_comparator_over_two_operands() {
    use PrimitiveType::{F32, S32};
    // Descending by key, stable, carrying a payload.
    let gt = scalar_fn("gt", &[F32, F32, S32, S32], |_, p| {
        p[0].compare(
            p[1],
            ComparisonDirection::Gt,
            Some(ComparisonType::TotalOrder),
        )
    });
    let r = eval(|b| {
        b.sort_with(
            &[
                b.constant_r1(&[2.0f32, 5.0, 2.0, -1.0]),
                b.constant_r1(&[0i32, 1, 2, 3]),
            ],
            &gt,
            0,
            true,
        )
    });
    assert_eq!(
        r,
        Literal::tuple(vec![
            Literal::vec1(&[5.0f32, 2.0, 2.0, -1.0]),
            Literal::vec1(&[1i32, 0, 2, 3])
        ])
    );
}

#[test]
fn scan_and_switch() {
    use PrimitiveType::F32;
    let cumsum = scalar_fn("cumsum", &[F32, F32], |b, p| {
        let s = p[0] + p[1];
        b.tuple(&[s, s])
    });
    let r = eval(|b| {
        b.scan(
            &[b.constant_r1(&[1.0f32, 2.0, 3.0, 4.0])],
            &[b.constant_r0(0.0f32)],
            &cumsum,
            0,
            true,
        )
    });
    assert_eq!(
        r,
        Literal::tuple(vec![
            Literal::vec1(&[10.0f32, 9.0, 7.0, 4.0]),
            Literal::scalar(10.0f32)
        ])
    );
    let double = scalar_fn("double", &[F32], |_, p| p[0] + p[0]);
    let negate = scalar_fn("negate", &[F32], |_, p| -p[0]);
    let square = scalar_fn("square", &[F32], |_, p| p[0] * p[0]);
    for (index, want) in [(0i32, 6.0f32), (1, -3.0), (2, 9.0), (17, 9.0), (-4, 9.0)] {
        let r = eval(|b| {
            let x = b.constant_r0(3.0f32);
            b.switch(
                b.constant_r0(index),
                &[x, x, x],
                &[&double, &negate, &square],
            )
        });
        assert_eq!(r, Literal::scalar(want), "index {index}");
    }
}

#[test]
fn batched_dot_general_clamp_and_mulhi() {
    let d = DotDimensionNumbers {
        lhs_batch_dimensions: vec![0],
        rhs_batch_dimensions: vec![0],
        lhs_contracting_dimensions: vec![2],
        rhs_contracting_dimensions: vec![1],
    };
    let r = eval(|b| {
        let x = b.constant_literal(&lit([[[1.0f32, 2.0]], [[3.0, 4.0]]]));
        let y = b.constant_literal(&lit([[[1.0f32], [1.0]], [[2.0], [-1.0]]]));
        x.dot_general(y, &d)
    });
    assert_eq!(r, lit([[[3.0f32]], [[2.0]]]));
    let r = eval(|b| {
        b.constant_r1(&[-5i32, 0, 5, 12])
            .clamp(b.constant_r0(-1i32), b.constant_r0(10i32))
    });
    assert_eq!(r, Literal::vec1(&[-1i32, 0, 5, 10]));
    let r = eval(|b| {
        b.constant_r1(&[-100i8, 100, 127])
            .mulhi(b.constant_r1(&[100i8, 100, 127]))
    });
    // (-10000) >> 8 = -40, 10000 >> 8 = 39, 16129 >> 8 = 63.
    assert_eq!(r, Literal::vec1(&[-40i8, 39, 63]));
}

#[test]
fn linear_algebra_and_fft() {
    // Lower-triangular a, solve a x = b.
    let opts = TriangularSolveOptions {
        left_side: true,
        lower: true,
        unit_diagonal: false,
        transpose_a: TriangularTranspose::NoTranspose,
    };
    let r = eval(|b| {
        let a = b.constant_literal(&lit([[2.0f32, 0.0], [1.0, 4.0]]));
        a.triangular_solve(b.constant_literal(&lit([[4.0f32], [10.0]])), opts)
    });
    assert_eq!(r, lit([[2.0f32], [2.0]]));
    let r = eval(|b| {
        b.constant_literal(&lit([[4.0f64, 2.0], [2.0, 5.0]]))
            .cholesky(true)
    });
    assert_eq!(r, lit([[2.0f64, 0.0], [1.0, 2.0]]));
    let r = eval(|b| {
        b.constant_r1(&[
            Complex32::new(1.0, 0.0),
            Complex32::new(2.0, 0.0),
            Complex32::new(3.0, 0.0),
            Complex32::new(4.0, 0.0),
        ])
        .fft(FftType::Fft, &[4])
    });
    let want = Literal::vec1(&[
        Complex32::new(10.0, 0.0),
        Complex32::new(-2.0, 2.0),
        Complex32::new(-2.0, 0.0),
        Complex32::new(-2.0, -2.0),
    ]);
    assert!(r.approx_eq(&want, 1e-6, 1e-5), "{r}");
}

#[test]
fn opt_barrier_rng_bit_generator_and_trig() {
    use oxla_hlo::ir::RngAlgorithm;
    let r = eval(|b| {
        b.tuple(&[b.constant_r0(1i32), b.constant_r0(2.0f32)])
            .optimization_barrier()
    });
    assert_eq!(
        r,
        Literal::tuple(vec![Literal::scalar(1i32), Literal::scalar(2.0f32)])
    );
    // Same state, same bits; the new state differs from the old.
    let run = || {
        eval(|b| {
            let state = b.constant_r1(&[1u64, 2]);
            b.rng_bit_generator(
                RngAlgorithm::ThreeFry,
                state,
                &Shape::array(PrimitiveType::U32, [8]).unwrap(),
            )
        })
    };
    let (a, again) = (run(), run());
    assert!(a.bitwise_eq(&again));
    assert_ne!(a.tuple_elements().unwrap()[0], Literal::vec1(&[1u64, 2]));
    let r = eval(|b| {
        let x = b.constant_r1(&[0.5f64]);
        b.tuple(&[
            x.asin(),
            x.acos(),
            x.atan(),
            x.sinh(),
            x.cosh(),
            x.atanh(),
            x.asinh(),
            (x + 1.0f64).acosh(),
        ])
    });
    let got: Vec<f64> = r
        .tuple_elements()
        .unwrap()
        .iter()
        .map(|l| l.to_vec::<f64>().unwrap()[0])
        .collect();
    let want = [
        0.5f64.asin(),
        0.5f64.acos(),
        0.5f64.atan(),
        0.5f64.sinh(),
        0.5f64.cosh(),
        0.5f64.atanh(),
        0.5f64.asinh(),
        1.5f64.acosh(),
    ];
    assert_eq!(got, want);
}
