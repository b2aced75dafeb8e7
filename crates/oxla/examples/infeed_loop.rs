//! An infeed-driven loop: a While whose body reads one value from the infeed
//! per iteration and adds it to a running sum; the host queues the values.
//!
//! Run with `cargo run -p oxla --example infeed_loop`.

use oxla::{Client, CompileOptions, Literal, PrimitiveType, Shape, XlaBuilder};

/// Queues `values` and sums them on the device with a loop of `values.len()` infeeds.
pub fn run(values: &[f32]) -> oxla::Result<Literal> {
    let state = Shape::tuple(vec![
        Shape::scalar(PrimitiveType::S32),
        Shape::scalar(PrimitiveType::F32),
    ]);
    let condition = {
        let b = XlaBuilder::new("more");
        let p = b.parameter(0, &state, "p");
        b.build(
            p.get_tuple_element(0)
                .lt(b.constant_r0(values.len() as i32)),
        )?
    };
    let body = {
        let b = XlaBuilder::new("read_and_add");
        let p = b.parameter(0, &state, "p");
        let next = b.infeed(&Shape::scalar(PrimitiveType::F32));
        b.build(b.tuple(&[
            p.get_tuple_element(0) + b.constant_r0(1i32),
            p.get_tuple_element(1) + next,
        ]))?
    };
    let b = XlaBuilder::new("infeed_loop");
    let init = b.tuple(&[b.constant_r0(0i32), b.constant_r0(0.0f32)]);
    let computation = b.build(b.while_loop(&condition, &body, init).get_tuple_element(1))?;

    let client = Client::default();
    let executable = client.compile(&computation, &CompileOptions::default())?;
    for &v in values {
        client.transfer_to_infeed(0, Literal::scalar(v))?;
    }
    executable.execute(&[])
}

#[allow(dead_code)]
fn main() -> oxla::Result<()> {
    println!("{}", run(&[1.0, 2.0, 3.5])?);
    Ok(())
}
