//! CrossReplicaSum over 4 replicas: each replica contributes its own vector
//! and every replica receives the sum.
//!
//! Run with `cargo run -p oxla --example cross_replica_sum`.

use oxla::{Client, CompileOptions, ExecuteOptions, Literal, PrimitiveType, Shape, XlaBuilder};

/// Replica `r` holds `[r, 10 r, 100 r]`; returns each replica's result.
pub fn run() -> oxla::Result<Vec<Literal>> {
    let b = XlaBuilder::new("cross_replica_sum");
    let shape =
        Shape::array(PrimitiveType::F32, [3]).map_err(|e| oxla::Error::Usage(e.to_string()))?;
    let x = b.parameter(0, &shape, "x");
    let computation = b.build(x.cross_replica_sum())?;
    let executable =
        Client::default().compile(&computation, &CompileOptions::default().with_replicas(4))?;
    let args: Vec<Vec<Literal>> = (0..4)
        .map(|r| {
            vec![Literal::vec1(&[
                r as f32,
                10.0 * r as f32,
                100.0 * r as f32,
            ])]
        })
        .collect();
    executable.execute_replicated(&args, &ExecuteOptions::default())
}

#[allow(dead_code)]
fn main() -> oxla::Result<()> {
    for (replica, result) in run()?.iter().enumerate() {
        println!("replica {replica}: {result}");
    }
    Ok(())
}
