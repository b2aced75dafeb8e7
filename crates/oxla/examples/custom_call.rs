//! The CustomCall example of XLA's operation semantics: `myfunc` takes
//! x: f32[2] and y: f32[2x3] and writes an f32[3x3], through the C signature
//! `void myfunc(void* out, void** in)`. oxla finds the symbol in the running
//! process (this example is linked with `-rdynamic`, see build.rs).
//!
//! Run with `cargo run -p oxla --example custom_call`.

use std::ffi::c_void;

use oxla::{Client, CompileOptions, Literal, PrimitiveType, Shape, XlaBuilder};

/// `z[i][j] = x[i % 2] + y[i % 2][j] * (i + 1)`: every output depends on both inputs.
///
/// # Safety
/// `out` must point to 9 f32s and `ins` to two pointers, to 2 and to 6 f32s.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn myfunc(out: *mut c_void, ins: *const *const c_void) {
    // SAFETY: the caller passes buffers of the sizes stated above.
    unsafe {
        let x = std::slice::from_raw_parts(*ins as *const f32, 2);
        let y = std::slice::from_raw_parts(*ins.add(1) as *const f32, 6);
        let z = std::slice::from_raw_parts_mut(out as *mut f32, 9);
        for i in 0..3 {
            for j in 0..3 {
                z[i * 3 + j] = x[i % 2] + y[(i % 2) * 3 + j] * (i + 1) as f32;
            }
        }
    }
}

/// Calls `myfunc` on the spec's inputs.
pub fn run() -> oxla::Result<Literal> {
    let shape = |dims: &[i64]| {
        Shape::array(PrimitiveType::F32, dims).map_err(|e| oxla::Error::Usage(e.to_string()))
    };
    let b = XlaBuilder::new("custom_call");
    let x = b.constant_r1(&[1.0f32, 2.0]);
    let y = b.constant_literal(
        &Literal::from_nested([[10.0f32, 20.0, 30.0], [40.0, 50.0, 60.0]])
            .map_err(|e| oxla::Error::Usage(e.to_string()))?,
    );
    let computation = b.build(b.custom_call("myfunc", &[x, y], &shape(&[3, 3])?))?;

    let client = Client::default();
    // SAFETY: `myfunc` above has the spec's signature and stays within its buffers.
    unsafe { client.register_custom_call_symbol("myfunc")? };
    client
        .compile(&computation, &CompileOptions::default())?
        .execute(&[])
}

#[allow(dead_code)]
fn main() -> oxla::Result<()> {
    println!("{}", run()?);
    Ok(())
}
