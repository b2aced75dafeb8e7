//! JAX's LAPACK custom calls (`lapack_?potrf_ffi`, `lapack_?getrf_ffi`,
//! `lapack_?trsm_ffi`) run without registering anything, on both backends.
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

#[test]
fn lapack_targets_are_built_in() {
    let path = std::env::temp_dir().join(format!("oxla-lapack-{}.hlo", std::process::id()));
    std::fs::write(&path, MODULE).unwrap();
    for backend in ["interp", "cpu"] {
        let out = Command::new(env!("CARGO_BIN_EXE_oxla"))
            .args(["run", path.to_str().unwrap(), "--backend", backend])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "{backend}: {stderr}");
        // potrf: L = [[2, 0], [1, 2]] below the diagonal, the operand's 2
        // above it, info 0. trsm: the lower triangle [[4, 0], [2, 5]]
        // solved against b. getrf: no row swap (4 > 2), l = 1/2, u = 5 - 1.
        assert_eq!(
            String::from_utf8_lossy(&out.stdout).trim(),
            "((f64[2,2] {{2, 2}, {1, 2}}, s32[] 0), \
             f64[2,3] {{0.5, 1, 1.5}, {0.4, -0.2, 1.2}}, \
             (f64[2,2] {{4, 2}, {0.5, 4}}, s32[2] {1, 2}, s32[] 0))",
            "{backend}"
        );
    }
    let _ = std::fs::remove_file(&path);
}
