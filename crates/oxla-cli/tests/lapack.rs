//! JAX's LAPACK custom calls (`lapack_?potrf_ffi`, `lapack_?getrf_ffi`,
//! `lapack_?trsm_ffi`, ...) and its sharding annotations run without
//! registering anything, on both backends.
//! (The JAX fixtures `tests/fixtures/jax/lapack_*` check them against
//! XLA:CPU on batches, every element type and every trsm variant.)

use std::process::Command;

const MODULE: &str = r#"HloModule m

ENTRY e {
  a = f64[2,2] constant({{4, 2}, {2, 5}})
  c = (f64[2,2], s32[]) custom-call(a), custom_call_target="lapack_dpotrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={uplo = 76 : ui8}
  b = f64[2,3] constant({{2, 4, 6}, {3, 1, 9}})
  s = f64[2,3] custom-call(a, b), custom_call_target="lapack_dtrsm_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}
  l = (f64[2,2], s32[2], s32[]) custom-call(a), custom_call_target="lapack_dgetrf_ffi", api_version=API_VERSION_TYPED_FFI, backend_config={}
  ROOT t = ((f64[2,2], s32[]), f64[2,3], (f64[2,2], s32[2], s32[])) tuple(c, s, l)
}
"#;

/// Runs `module` (no parameters) with `oxla run` on both backends and
/// asserts that each prints `want`.
#[track_caller]
fn prints_on_both_backends(name: &str, module: &str, want: &str) {
    let path = std::env::temp_dir().join(format!("oxla-{name}-{}.hlo", std::process::id()));
    std::fs::write(&path, module).unwrap();
    for backend in ["interp", "cpu"] {
        let out = Command::new(env!("CARGO_BIN_EXE_oxla"))
            .args(["run", path.to_str().unwrap(), "--backend", backend])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend}: {stderr}");
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            want,
            "{backend}"
        );
    }
    let _ = std::fs::remove_file(&path);
}

#[test]
fn lapack_targets_are_built_in() {
    // potrf: L = [[2, 0], [1, 2]] below the diagonal, the operand's 2
    // above it, info 0. trsm: the lower triangle [[4, 0], [2, 5]] solved
    // against b. getrf: no row swap (4 > 2), l = 1/2, u = 5 - 1.
    prints_on_both_backends(
        "lapack",
        MODULE,
        "((f64[2,2] {{2, 2}, {1, 2}}, s32[] 0), \
         f64[2,3] {{0.5, 1, 1.5}, {0.4, -0.2, 1.2}}, \
         (f64[2,2] {{4, 2}, {0.5, 4}}, s32[2] {1, 2}, s32[] 0))",
    );
}

/// What `jax.jit(f).lower(x).as_text(dialect="hlo")` writes for
/// `f = lambda a: with_sharding_constraint(a * 2, SingleDeviceSharding(...))`,
/// with the parameter made a constant.
const SHARDED: &str = r##"HloModule jit_f1, entry_computation_layout={()->f32[4]{0}}, frontend_attributes={xla.sdy.meshes={empty_mesh = #sdy.mesh<[]>}}

ENTRY main.1 {
  a.1 = f32[4]{0} constant({1, -2, 3.5, 0})
  constant.1 = f32[] constant(2)
  broadcast.1 = f32[4]{0} broadcast(constant.1), dimensions={}
  mul.1 = f32[4]{0} multiply(a.1, broadcast.1)
  ROOT sharding_constraint.1 = f32[4]{0} custom-call(mul.1), custom_call_target="Sharding", sharding={replicated}, frontend_attributes={xla.sdy.sharding="#sdy.sharding_per_value<[<@empty_mesh, [{}]>]>"}
}
"##;

#[test]
fn sharding_annotations_are_the_identity() {
    prints_on_both_backends("sharding", SHARDED, "f32[4] {2, -4, 7, 0}");
}
