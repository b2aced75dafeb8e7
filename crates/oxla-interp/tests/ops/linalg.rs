//! triangular-solve, cholesky and fft.

use crate::common::{eval_op, lit};

fn close(actual: &oxla_hlo::Literal, expected: &str, shape: &str, tol: f64) {
    let e = lit(shape, expected);
    assert!(actual.approx_eq(&e, tol, tol), "got {actual}\nexpected {e}");
}

#[test]
fn triangular_solve_left_lower() {
    // The upper triangle holds garbage that must not be read.
    let a = ("f64[3,3]", "{{2, 1e6, 1e6}, {1, 3, 1e6}, {4, 5, 6}}");
    let b = ("f64[3,1]", "{{2}, {7}, {32}}");
    let x = eval_op(
        "f64[3,1]",
        "triangular-solve",
        "left_side=true, lower=true, unit_diagonal=false, transpose_a=NO_TRANSPOSE",
        &[a, b],
    );
    // 2x0 = 2 -> 1; x0 + 3x1 = 7 -> 2; 4 + 10 + 6x2 = 32 -> 3.
    close(&x, "{{1}, {2}, {3}}", "f64[3,1]", 1e-12);
}

#[test]
fn triangular_solve_right_transposed_unit_diagonal() {
    // x op(a) = b with op(a) = a^T, a lower with an implicit unit diagonal (diagonal is garbage).
    let a = ("f32[2,2]", "{{99, 0}, {2, 99}}");
    let b = ("f32[1,2]", "{{1, 4}}");
    let x = eval_op(
        "f32[1,2]",
        "triangular-solve",
        "left_side=false, lower=true, unit_diagonal=true, transpose_a=TRANSPOSE",
        &[a, b],
    );
    // a^T = {{1, 2}, {0, 1}}: [x0, 2x0 + x1] = [1, 4] -> x = [1, 2].
    close(&x, "{{1, 2}}", "f32[1,2]", 1e-6);
}

#[test]
fn triangular_solve_adjoint_complex() {
    let a = ("c128[2,2]", "{{(1, 1), (0, 0)}, {(2, 0), (1, -1)}}");
    let b = ("c128[2,1]", "{{(3, 1)}, {(2, 0)}}");
    let x = eval_op(
        "c128[2,1]",
        "triangular-solve",
        "left_side=true, lower=true, unit_diagonal=false, transpose_a=ADJOINT",
        &[a, b],
    );
    // op(a) = a^H = {{(1,-1), (2,0)}, {(0,0), (1,1)}}: x1 = 2/(1+i) = (1,-1); (1-i)x0 = (3,1) - 2(1,-1) = (1,3) -> x0 = (-1, 2).
    close(&x, "{{(-1, 2)}, {(1, -1)}}", "c128[2,1]", 1e-12);
}

#[test]
fn cholesky_factors_and_zeroes_the_other_triangle() {
    let a = (
        "f64[2,3,3]",
        "{{{4, 1e9, 1e9}, {2, 5, 1e9}, {-2, 1, 11}}, {{1, 0, 0}, {0, -1, 0}, {0, 0, 1}}}",
    );
    let l = eval_op("f64[2,3,3]", "cholesky", "lower=true", &[a]);
    let v = l.to_vec::<f64>().unwrap();
    let expected = [2.0, 0.0, 0.0, 1.0, 2.0, 0.0, -1.0, 1.0, 3.0];
    for (g, e) in v[..9].iter().zip(expected) {
        assert!((g - e).abs() < 1e-12, "{v:?}");
    }
    // Not positive definite: all NaN.
    assert!(v[9..].iter().all(|x| x.is_nan()), "{v:?}");
    let u = eval_op(
        "f32[2,2]",
        "cholesky",
        "lower=false",
        &[("f32[2,2]", "{{4, 2}, {-7, 5}}")],
    );
    close(&u, "{{2, 1}, {0, 2}}", "f32[2,2]", 1e-6);
}

#[test]
fn fft_kinds() {
    let x = eval_op(
        "c64[4]",
        "fft",
        "fft_type=FFT, fft_length={4}",
        &[("c64[4]", "{(1, 0), (0, 0), (0, 0), (0, 0)}")],
    );
    close(&x, "{(1, 0), (1, 0), (1, 0), (1, 0)}", "c64[4]", 1e-6);
    let x = eval_op(
        "c128[4]",
        "fft",
        "fft_type=FFT, fft_length={4}",
        &[("c128[4]", "{(0, 0), (1, 0), (0, 0), (0, 0)}")],
    );
    close(&x, "{(1, 0), (0, -1), (-1, 0), (0, 1)}", "c128[4]", 1e-12);
    let x = eval_op(
        "c128[4]",
        "fft",
        "fft_type=IFFT, fft_length={4}",
        &[("c128[4]", "{(4, 0), (0, 0), (0, 0), (0, 0)}")],
    );
    close(&x, "{(1, 0), (1, 0), (1, 0), (1, 0)}", "c128[4]", 1e-12);
    let x = eval_op(
        "c128[3]",
        "fft",
        "fft_type=RFFT, fft_length={5}",
        &[("f64[5]", "{1, 2, 3, 4, 5}")],
    );
    close(
        &x,
        "{(15, 0), (-2.5, 3.440954801177933), (-2.5, 0.8122992405822659)}",
        "c128[3]",
        1e-12,
    );
    // IRFFT ignores the imaginary parts of the DC and Nyquist bins (numpy's irfft).
    let x = eval_op(
        "f64[4]",
        "fft",
        "fft_type=IRFFT, fft_length={4}",
        &[("c128[3]", "{(1, 5), (2, 3), (3, 7)}")],
    );
    close(&x, "{2, -2, 0, 1}", "f64[4]", 1e-12);
    // 2-D FFT of a constant: all energy in the DC bin.
    let x = eval_op(
        "c64[2,2,3]",
        "fft",
        "fft_type=FFT, fft_length={2,3}",
        &[(
            "c64[2,2,3]",
            "{{{(1,0),(1,0),(1,0)},{(1,0),(1,0),(1,0)}},{{(2,0),(2,0),(2,0)},{(2,0),(2,0),(2,0)}}}",
        )],
    );
    close(
        &x,
        "{{{(6,0),(0,0),(0,0)},{(0,0),(0,0),(0,0)}},{{(12,0),(0,0),(0,0)},{(0,0),(0,0),(0,0)}}}",
        "c64[2,2,3]",
        1e-5,
    );
}
