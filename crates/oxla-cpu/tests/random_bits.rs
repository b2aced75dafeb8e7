//! `rng-bit-generator` on the CPU backend against the interpreter (itself
//! bit-exact with XLA:CPU on the JAX fixtures): every output width, both
//! algorithms, states whose counters carry or wrap, and shapes that take
//! each of the kernel's layouts, on one thread and split across the pool.

use oxla_hlo::{ArrayData, ArrayLiteral, ArrayShape, Literal, PrimitiveType};
use oxla_interp::{EvalOptions, NoServices};

/// Runs `rng-bit-generator` of `ty[dims]` from `state` on both backends
/// (three times on the CPU, handing each result back, so reused buffers
/// are exercised) and requires the same state and bits.
fn check(algorithm: &str, ty: &str, dims: &[usize], state: &[u64]) {
    let dims_text = dims
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let k = state.len();
    let text = format!(
        "HloModule r\nENTRY e {{\n  s = u64[{k}] parameter(0)\n  ROOT r = (u64[{k}], {ty}[{dims_text}]) rng-bit-generator(s), algorithm={algorithm}\n}}\n"
    );
    let module = oxla_text::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let shape = ArrayShape::new(PrimitiveType::U64, [k as i64]).unwrap();
    let args = [Literal::Array(
        ArrayLiteral::new(shape, ArrayData::U64(state.to_vec())).unwrap(),
    )];
    let options = EvalOptions::default();
    let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
    let exe = oxla_cpu::compile(&module).unwrap();
    let listing = exe.describe();
    assert!(
        listing.contains("rng-bit-generator") && !listing.contains("interpreted"),
        "not native:\n{listing}"
    );
    for run in 0..3 {
        let got = exe.execute(&args, &options, &NoServices).unwrap();
        assert!(
            bytes(&got) == bytes(&want),
            "run {run}: {algorithm} {ty}[{dims_text}] from {state:x?} differs"
        );
        exe.recycle(got);
    }
}

/// Each array of a (state, bits) result as raw bytes (NaN bits included).
fn bytes(l: &Literal) -> Vec<Vec<u8>> {
    match l {
        Literal::Tuple(parts) => parts.iter().flat_map(bytes).collect(),
        Literal::Array(a) => vec![a.to_bytes()],
        Literal::Token => Vec::new(),
    }
}

const NEAR_END: u64 = u64::MAX - 5;

#[test]
fn threefry_in_every_layout() {
    for state in [[0x1234_5678_9abc_def0, 7], [u64::MAX, NEAR_END]] {
        for dims in [
            &[][..],
            &[0],
            &[3, 0],
            &[7],
            &[2, 3],
            &[1 << 18],
            &[4096, 64],
            &[513, 256],
            &[1023, 257],
            &[5, 64, 33],
            &[3, 6, 32],
            &[1001, 3, 65],
        ] {
            check("rng_three_fry", "u32", dims, &state);
        }
        for ty in ["u8", "s16", "f32", "bf16"] {
            check("rng_three_fry", ty, &[601, 300], &state);
        }
        for ty in ["u64", "s64", "f64"] {
            check("rng_three_fry", ty, &[300_001], &state);
            check("rng_three_fry", ty, &[5], &state);
        }
    }
}

#[test]
fn philox_with_two_and_three_word_states() {
    let states: [&[u64]; 4] = [
        &[0x1234_5678_9abc_def0, 7],
        // The counter's low word carries into its high word (the key).
        &[42, NEAR_END],
        &[42, NEAR_END, 9],
        // ... and the whole 128-bit counter wraps.
        &[42, NEAR_END, u64::MAX],
    ];
    for state in states {
        for algorithm in ["rng_philox", "rng_default"] {
            for dims in [&[][..], &[0], &[7], &[3, 5], &[1 << 18], &[1001, 3, 65]] {
                check(algorithm, "u32", dims, state);
            }
        }
        for ty in ["u8", "u16", "s32", "f16", "f32"] {
            check("rng_philox", ty, &[601, 300], state);
        }
        for ty in ["u64", "s64", "f64"] {
            check("rng_philox", ty, &[300_001], state);
            check("rng_philox", ty, &[3], state);
        }
    }
}

#[test]
fn a_short_state_is_an_error_on_both_backends() {
    for algorithm in ["rng_three_fry", "rng_philox"] {
        let text = format!(
            "HloModule r\nENTRY e {{\n  s = u64[1] parameter(0)\n  ROOT r = (u64[1], u32[4]) rng-bit-generator(s), algorithm={algorithm}\n}}\n"
        );
        let module = oxla_text::parse_module(&text).unwrap();
        let shape = ArrayShape::new(PrimitiveType::U64, [1]).unwrap();
        let args = [Literal::Array(
            ArrayLiteral::new(shape, ArrayData::U64(vec![3])).unwrap(),
        )];
        let options = EvalOptions::default();
        let exe = oxla_cpu::compile(&module).unwrap();
        let err = exe.execute(&args, &options, &NoServices).unwrap_err();
        assert!(err.to_string().contains("state"), "{err}");
        assert!(oxla_interp::evaluate(&module, &args, &options, &NoServices).is_err());
    }
}
