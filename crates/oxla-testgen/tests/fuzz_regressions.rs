//! Inputs the `builder_calls` fuzz target found crashes with, replayed
//! through the same generator and the same checks. Each names the fix; the
//! crate that had the bug has its own test of it too.

use arbitrary::Unstructured;
use oxla_interp::{EvalOptions, NoServices, evaluate};
use oxla_testgen::{Options, generate};

/// The fuzz target's checks, as a function of the input bytes.
fn check(data: &[u8]) -> Result<(), String> {
    let mut u = Unstructured::new(data);
    let wild = u.arbitrary::<u8>().unwrap_or(0) & 1 == 1;
    let options = Options {
        max_ops: 24,
        max_depth: 2,
        wild,
    };
    let generated = generate(&mut u, &options).map_err(|e| e.to_string())?;
    let computation = match generated.built {
        Ok(c) => c,
        Err(e) if wild => return Err(e.to_string()),
        Err(e) => panic!("a valid-mode computation did not build: {e}"),
    };
    let module = computation.module();
    oxla_hlo::verifier::verify(module).map_err(|e| format!("does not verify: {e}"))?;
    let printed = oxla_text::print_module(module);
    let parsed = oxla_text::parse_module(&printed)
        .unwrap_or_else(|e| panic!("a built module does not parse back: {e}\n{printed}"));
    assert!(
        parsed == *module,
        "round trip changed the module:\n{printed}"
    );
    let eval = EvalOptions::with_seed(1)
        .while_iteration_limit(64)
        .max_array_bytes(1 << 20);
    evaluate(module, &generated.args, &eval, &NoServices)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// A parameter of shape `(pred[-1,0,0], pred[])` (made unchecked) built,
/// verified, and printed as text that does not parse. Fixed by validating
/// declared shapes in the builder and the verifier.
#[test]
fn an_unchecked_negative_dimension_is_a_build_error() {
    let e = check(b"s16J1\x08\x0a").unwrap_err();
    assert!(
        e.starts_with("parameter: dimension 0 of pred[-1,0,0] is negative (-1)"),
        "{e}"
    );
}

/// `dot` of an empty `f32[2^40,0]` with itself over its long dimension
/// hung building a 2^40-entry index table. Fixed in the interpreter (no
/// table for an empty result).
#[test]
fn an_empty_dot_with_a_huge_contracting_dimension_is_quick() {
    let input = [
        0x5d, 0xf5, 0xbe, 0xec, 0xfd, 0xa3, 0x73, 0x60, 0x99, 0x6c, 0x6d, 0x63, 0x65,
    ];
    assert_eq!(check(&input), Ok(()));
}

/// A constant `f32[1099511627776,0]` (no elements) printed as 2^40 empty
/// rows: the printer ran out of memory. Fixed in oxla-hlo and oxla-text
/// (large empty arrays print as `{}`).
#[test]
fn a_huge_empty_constant_prints_and_reads_back() {
    let input = [
        3, 0, 74, 42, 59, 49, 10, 161, 45, 0, 16, 49, 74, 49, 0, 112, 97, 219, 50, 209, 255, 209,
        209, 209, 209, 59, 255,
    ];
    assert_eq!(check(&input), Ok(()));
}

/// `sort` of an empty `f32[1,0,9223372036854775807]` sized its permutation
/// by the 2^63-long dimension: a capacity overflow. Fixed in the
/// interpreter (nothing is sized by the dimensions of an empty array).
#[test]
fn sorting_an_empty_array_with_a_huge_dimension() {
    let input = [
        255, 27, 49, 251, 49, 227, 97, 151, 108, 108, 9, 192, 255, 255, 255, 255, 255, 118, 0, 0,
        0, 108, 111, 103, 0, 0, 0, 0, 4, 126, 36,
    ];
    // Evaluation gets past the sort to the module's next problem.
    assert_eq!(
        check(&input),
        Err("in computation `main`, instruction `custom-call.2` (custom-call): custom-call: custom-call target `missing_target` is not registered".into())
    );
}

/// A reduce-window whose result has no elements but a huge dimension sized
/// its table of window runs by it: a capacity overflow. Fixed in the
/// interpreter.
#[test]
fn an_empty_reduce_window_with_a_huge_dimension() {
    let input = [
        241, 1, 111, 168, 217, 7, 0, 45, 0, 99, 97, 241, 255, 255, 245, 245, 245, 245, 111, 168,
        217, 7, 0, 45, 0, 99, 97, 241, 255, 255, 245, 245, 245, 245, 245, 245, 245, 245, 245, 245,
        245, 245, 245, 245, 245, 245, 245, 245, 245, 255, 46, 255, 255, 117, 54, 245, 63, 41,
    ];
    assert_eq!(check(&input), Ok(()));
}

/// Reducing an empty `s32[0,143699050343152533]` over its long dimension
/// built a table with an entry per position (out of memory). Fixed in the
/// interpreter.
#[test]
fn reducing_an_empty_array_over_a_huge_dimension() {
    let input = [
        241, 1, 111, 168, 217, 7, 0, 45, 0, 99, 97, 108, 168, 217, 7, 7, 0, 103, 101, 116, 45, 116,
        117, 112, 108, 101, 45, 101, 108, 101, 109, 101, 110, 116, 45, 0, 99, 39, 97, 108, 168, 13,
        255, 17, 251, 243, 252, 255, 45, 101, 108, 101, 109, 101, 110, 116, 45, 0, 99, 39, 97, 108,
        168, 13, 255, 17, 251, 243, 252, 255, 45, 0, 0, 206, 41,
    ];
    assert_eq!(check(&input), Ok(()));
}

/// A convolution with 14 spatial dimensions built, then printed dim_labels
/// that do not parse. Fixed in shape inference (at most 10, as the text
/// format can name).
#[test]
fn a_convolution_with_more_than_10_spatial_dimensions() {
    let input = [
        252, 117, 49, 54, 62, 101, 102, 64, 114, 244, 155, 39, 10, 114, 102, 54, 155, 39, 212, 212,
        91, 212, 212, 212, 126, 169, 99, 108, 212, 47, 212, 54, 155, 39, 212, 212, 91, 212, 212,
        212, 126, 169, 99, 108, 212, 10, 0, 0, 0, 0, 0, 0, 0, 47, 212, 212, 212, 220, 212, 212,
        212, 68, 114, 97, 110, 115, 112, 46, 54, 255, 111, 115, 101, 43, 49, 102, 98, 212, 153,
        153, 125, 44, 153, 212, 212, 212, 212, 97, 108, 139, 49, 212, 212, 212, 212, 67, 212, 212,
        212, 212, 148, 108, 139, 67, 212, 212, 220, 212, 212, 212, 68, 10, 97, 110, 115, 112, 46,
        54, 255, 111, 115, 101, 43, 49, 102, 98, 212, 153, 153, 125, 44, 153, 212, 212, 212, 212,
        97, 108, 139, 49, 212, 212, 212, 212, 67, 212, 212, 212, 212, 148, 108, 139, 67, 94, 126,
        255, 46, 0, 0, 126, 62,
    ];
    // The builder now refuses the convolution, so the module builds without it.
    assert_eq!(check(&input), Ok(()));
}

/// Tuples of tuples of the same values grew exponentially (shapes are
/// trees): generation took minutes and gigabytes. Fixed in oxla-hlo (shapes
/// have at most `MAX_SHAPE_PARTS` parts, checked by the builder and the
/// verifier); the generator now keeps its tuples small.
#[test]
fn nested_tuples_of_the_same_values_stay_small() {
    let input = [
        116, 85, 2, 88, 87, 53, 188, 188, 188, 188, 188, 188, 4, 145, 255, 255, 255, 247, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179,
        179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179,
        179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179,
        179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179,
        179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179,
        179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179,
        179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179, 179,
        179, 179, 179, 179, 179, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255, 255,
        255, 255, 255, 255, 255, 4,
    ];
    assert_eq!(check(&input), Ok(()));
}

/// A convolution of an empty `f64[4,9223372036854775807,0]` with itself
/// (a zero-size window, so a non-empty result) looped over 2^63 input
/// features. Fixed in the interpreter (empty operands give zeros at once).
#[test]
fn a_convolution_of_empty_operands() {
    let input = [
        145, 204, 204, 0, 6, 255, 50, 188, 143, 77, 55, 255, 36, 255, 0, 39, 7, 65, 101, 89, 89,
        10, 52,
    ];
    assert_eq!(check(&input), Ok(()));
}
