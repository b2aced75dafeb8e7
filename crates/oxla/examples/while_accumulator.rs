//! The While example of XLA's operation semantics: a tuple of an s32
//! iteration count and an f32[10] accumulator; 1000 times, the count goes up
//! by one and a constant vector is added to the accumulator.
//!
//! Run with `cargo run -p oxla --example while_accumulator`.

use oxla::{Client, CompileOptions, Literal, PrimitiveType, Shape, XlaBuilder, XlaComputation};

/// Builds the loop and returns its result: `(1000, [1000, 2000, ..., 10000])`.
pub fn run() -> oxla::Result<Literal> {
    let state = Shape::tuple(vec![
        Shape::scalar(PrimitiveType::S32),
        Shape::array(PrimitiveType::F32, [10]).map_err(usage)?,
    ]);
    let constant: Vec<f32> = (1..=10).map(|i| i as f32).collect();

    let condition: XlaComputation = {
        let b = XlaBuilder::new("condition");
        let p = b.parameter(0, &state, "p");
        b.build(p.get_tuple_element(0).lt(b.constant_r0(1000i32)))?
    };
    let body: XlaComputation = {
        let b = XlaBuilder::new("body");
        let p = b.parameter(0, &state, "p");
        let iteration = p.get_tuple_element(0) + b.constant_r0(1i32);
        let new_vector = p.get_tuple_element(1) + b.constant_r1(&constant);
        b.build(b.tuple(&[iteration, new_vector]))?
    };
    let b = XlaBuilder::new("while_accumulator");
    let init = b.tuple(&[b.constant_r0(0i32), b.constant_r1(&[0.0f32; 10])]);
    let computation = b.build(b.while_loop(&condition, &body, init))?;

    let executable = Client::default().compile(&computation, &CompileOptions::default())?;
    executable.execute(&[])
}

fn usage(e: impl std::fmt::Display) -> oxla::Error {
    oxla::Error::Usage(e.to_string())
}

#[allow(dead_code)]
fn main() -> oxla::Result<()> {
    println!("{}", run()?);
    Ok(())
}
