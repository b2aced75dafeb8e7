//! The client and runtime: the examples with their exact values, and every
//! failure path ending in an error rather than a panic or a hang.

use std::time::{Duration, Instant};

use oxla::{
    Client, CompileOptions, Error, ExecuteOptions, Literal, PrimitiveType, Shape, XlaBuilder,
    XlaComputation,
};

#[path = "../examples/cross_replica_sum.rs"]
mod cross_replica_sum;
#[path = "../examples/custom_call.rs"]
mod custom_call;
#[path = "../examples/infeed_loop.rs"]
mod infeed_loop;
#[path = "../examples/while_accumulator.rs"]
mod while_accumulator;

fn f32_shape(dims: &[i64]) -> Shape {
    Shape::array(PrimitiveType::F32, dims).unwrap()
}

#[test]
fn example_while_accumulator() {
    let result = while_accumulator::run().unwrap();
    let expected: Vec<f32> = (1..=10).map(|i| 1000.0 * i as f32).collect();
    assert_eq!(
        result,
        Literal::tuple(vec![Literal::scalar(1000i32), Literal::vec1(&expected)])
    );
}

#[test]
fn example_cross_replica_sum() {
    let results = cross_replica_sum::run().unwrap();
    assert_eq!(results.len(), 4);
    for r in results {
        assert_eq!(r, Literal::vec1(&[6.0f32, 60.0, 600.0]));
    }
}

#[test]
fn example_infeed_loop() {
    assert_eq!(
        infeed_loop::run(&[1.0, 2.0, 3.5, -0.5]).unwrap(),
        Literal::scalar(6.0f32)
    );
}

#[test]
fn example_custom_call() {
    let z = custom_call::run().unwrap();
    // z[i][j] = x[i % 2] + y[i % 2][j] * (i + 1) with x = {1, 2}, y = {{10, 20, 30}, {40, 50, 60}}.
    let want = Literal::from_nested([
        [11.0f32, 21.0, 31.0],
        [82.0, 102.0, 122.0],
        [31.0, 61.0, 91.0],
    ])
    .unwrap();
    assert_eq!(z, want);
}

#[test]
fn rust_closure_custom_call() {
    let client = Client::default();
    client.register_custom_call("twice", |args, _shape| {
        let v = args[0].to_vec::<f32>().map_err(|e| e.to_string())?;
        Ok(Literal::vec1(
            &v.iter().map(|x| 2.0 * x).collect::<Vec<_>>(),
        ))
    });
    let b = XlaBuilder::new("c");
    let x = b.parameter(0, &f32_shape(&[3]), "x");
    let c = b
        .build(b.custom_call("twice", &[x], &f32_shape(&[3])))
        .unwrap();
    let exe = client.compile(&c, &CompileOptions::default()).unwrap();
    assert_eq!(
        exe.execute(&[Literal::vec1(&[1.0f32, 2.0, 3.0])]).unwrap(),
        Literal::vec1(&[2.0f32, 4.0, 6.0])
    );
    // A target returning the wrong shape is an error, not a corrupt value.
    client.register_custom_call("twice", |_, _| Ok(Literal::scalar(1i32)));
    let e = exe
        .execute(&[Literal::vec1(&[1.0f32, 2.0, 3.0])])
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("returned s32[] where f32[3] was expected"),
        "{e}"
    );
}

#[test]
fn unknown_custom_call_fails_at_compile_time() {
    let b = XlaBuilder::new("c");
    let x = b.constant_r0(1.0f32);
    let c = b
        .build(b.custom_call("nowhere", &[x], &f32_shape(&[])))
        .unwrap();
    let e = Client::default()
        .compile(&c, &CompileOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(
        e.contains("calls the target `nowhere`, which is not registered"),
        "{e}"
    );
    let e = unsafe { Client::default().register_custom_call_symbol("no_such_symbol_anywhere") }
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("no exported symbol `no_such_symbol_anywhere`"),
        "{e}"
    );
}

#[test]
fn wrong_argument_shapes_are_errors() {
    let b = XlaBuilder::new("c");
    let x = b.parameter(0, &f32_shape(&[3]), "x");
    let exe = Client::default()
        .compile(&b.build(x.exp()).unwrap(), &CompileOptions::default())
        .unwrap();
    assert!(exe.execute(&[Literal::vec1(&[1.0f32, 2.0])]).is_err());
    assert!(exe.execute(&[Literal::vec1(&[1i32, 2, 3])]).is_err());
    assert!(exe.execute(&[]).is_err());
    assert!(matches!(
        exe.execute_replicated(&[vec![], vec![]], &ExecuteOptions::default()),
        Err(Error::Usage(_))
    ));
}

#[test]
fn empty_infeed_times_out_with_an_error() {
    let b = XlaBuilder::new("c");
    let v = b.infeed(&f32_shape(&[2]));
    let c = b.build(v).unwrap();
    let client = Client::default();
    let exe = client
        .compile(
            &c,
            &CompileOptions::default().with_infeed_timeout(Duration::from_millis(50)),
        )
        .unwrap();
    let start = Instant::now();
    let e = exe.execute(&[]).unwrap_err().to_string();
    assert!(e.contains("infeed queue of replica 0 stayed empty"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(5));
    // A queued value of the wrong shape is reported as such.
    client
        .transfer_to_infeed(0, Literal::vec1(&[1i32, 2]))
        .unwrap();
    let e = exe.execute(&[]).unwrap_err().to_string();
    assert!(
        e.contains("the queued value has shape s32[2] but the program reads f32[2]"),
        "{e}"
    );
    client
        .transfer_to_infeed(0, Literal::vec1(&[1.0f32, 2.0]))
        .unwrap();
    assert_eq!(exe.execute(&[]).unwrap(), Literal::vec1(&[1.0f32, 2.0]));
    // Nested tuples are rejected on both sides.
    let nested = Literal::tuple(vec![Literal::tuple(vec![Literal::scalar(1.0f32)])]);
    assert!(client.transfer_to_infeed(0, nested).is_err());
}

#[test]
fn empty_tuple_infeed_reads_nothing() {
    let b = XlaBuilder::new("c");
    let v = b.infeed(&Shape::tuple(vec![]));
    let c = b.build(v).unwrap();
    let exe = Client::default()
        .compile(
            &c,
            &CompileOptions::default().with_infeed_timeout(Duration::from_millis(10)),
        )
        .unwrap();
    assert_eq!(exe.execute(&[]).unwrap(), Literal::tuple(vec![]));
}

#[test]
fn unordered_infeeds_fail_at_compile_time() {
    let b = XlaBuilder::new("c");
    let first = b.infeed(&f32_shape(&[2]));
    let second = b.infeed(&f32_shape(&[2]));
    let c = b.build(first + second).unwrap();
    let e = Client::default()
        .compile(&c, &CompileOptions::default())
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("have no order between them"), "{e}");

    // Ordered by a token, the same two reads compile and read in order.
    let b = XlaBuilder::new("ordered");
    let t0 = b.after_all(&[]);
    let r1 = b.infeed_with_token(t0, &f32_shape(&[2]));
    let r2 = b.infeed_with_token(r1.get_tuple_element(1), &f32_shape(&[2]));
    let c = b
        .build(r1.get_tuple_element(0) - r2.get_tuple_element(0))
        .unwrap();
    let client = Client::default();
    let exe = client.compile(&c, &CompileOptions::default()).unwrap();
    client
        .transfer_to_infeed(0, Literal::vec1(&[10.0f32, 20.0]))
        .unwrap();
    client
        .transfer_to_infeed(0, Literal::vec1(&[1.0f32, 2.0]))
        .unwrap();
    assert_eq!(exe.execute(&[]).unwrap(), Literal::vec1(&[9.0f32, 18.0]));
}

/// A loop that runs `n` times (n from the replica's argument) with a
/// CrossReplicaSum in its body.
fn loop_with_collective() -> XlaComputation {
    let state = Shape::tuple(vec![
        Shape::scalar(PrimitiveType::S32),
        Shape::scalar(PrimitiveType::S32),
        Shape::scalar(PrimitiveType::F32),
    ]);
    let cond = {
        let b = XlaBuilder::new("cond");
        let p = b.parameter(0, &state, "p");
        b.build(p.get_tuple_element(0).lt(p.get_tuple_element(1)))
            .unwrap()
    };
    let body = {
        let b = XlaBuilder::new("body");
        let p = b.parameter(0, &state, "p");
        let s = p.get_tuple_element(2).cross_replica_sum();
        b.build(b.tuple(&[
            p.get_tuple_element(0) + b.constant_r0(1i32),
            p.get_tuple_element(1),
            s,
        ]))
        .unwrap()
    };
    let b = XlaBuilder::new("main");
    let n = b.parameter(0, &Shape::scalar(PrimitiveType::S32), "n");
    let init = b.tuple(&[b.constant_r0(0i32), n, b.constant_r0(1.0f32)]);
    b.build(b.while_loop(&cond, &body, init).get_tuple_element(2))
        .unwrap()
}

#[test]
fn replicas_that_agree_sum_every_iteration() {
    let c = loop_with_collective();
    let exe = Client::default()
        .compile(&c, &CompileOptions::default().with_replicas(3))
        .unwrap();
    let args = vec![vec![Literal::scalar(2i32)]; 3];
    // 1 -> 3 -> 9 on every replica.
    for r in exe
        .execute_replicated(&args, &ExecuteOptions::default())
        .unwrap()
    {
        assert_eq!(r, Literal::scalar(9.0f32));
    }
}

#[test]
fn mismatched_replicas_end_in_an_error_not_a_hang() {
    let c = loop_with_collective();
    let options = CompileOptions::default()
        .with_replicas(2)
        .with_collective_timeout(Duration::from_secs(20));
    let exe = Client::default().compile(&c, &options).unwrap();
    let args = vec![vec![Literal::scalar(1i32)], vec![Literal::scalar(3i32)]];
    let start = Instant::now();
    let e = exe
        .execute_replicated(&args, &ExecuteOptions::default())
        .unwrap_err()
        .to_string();
    // Replica 0 finishes after one sum; replica 1 is told at once, well before the timeout.
    assert!(e.contains("finished without reaching"), "{e}");
    assert!(start.elapsed() < Duration::from_secs(10));
}

#[test]
fn collective_timeout_when_a_replica_is_stuck() {
    // Each replica reads one infeed value, then sums; only replica 0 gets a value,
    // so replica 1 waits at the infeed and replica 0 times out at the sum.
    let b = XlaBuilder::new("stuck");
    let value = b.infeed(&Shape::scalar(PrimitiveType::F32));
    let c = b.build(value.cross_replica_sum()).unwrap();
    let options = CompileOptions::default()
        .with_replicas(2)
        .with_collective_timeout(Duration::from_millis(100))
        .with_infeed_timeout(Duration::from_millis(500));
    let client = Client::default();
    let exe = client.compile(&c, &options).unwrap();
    client
        .transfer_to_infeed(0, Literal::scalar(1.0f32))
        .unwrap();
    let e = exe
        .execute_replicated(&[vec![], vec![]], &ExecuteOptions::default())
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("replica 0:") && e.contains("timed out after 100ms"),
        "{e}"
    );
}

#[test]
fn seeds_decide_random_numbers() {
    let b = XlaBuilder::new("rng");
    let (lo, hi) = (b.constant_r0(0.0f32), b.constant_r0(1.0f32));
    let c = b.build(b.rng_uniform(lo, hi, &f32_shape(&[8]))).unwrap();
    let exe = Client::default()
        .compile(&c, &CompileOptions::default())
        .unwrap();
    let a = exe
        .execute_with(&[], &ExecuteOptions::with_seed(7))
        .unwrap();
    let again = exe
        .execute_with(&[], &ExecuteOptions::with_seed(7))
        .unwrap();
    let other = exe
        .execute_with(&[], &ExecuteOptions::with_seed(8))
        .unwrap();
    assert!(a.bitwise_eq(&again));
    assert!(!a.bitwise_eq(&other));
    assert!(
        a.to_vec::<f32>()
            .unwrap()
            .iter()
            .all(|&v| (0.0..1.0).contains(&v))
    );
}

#[test]
fn many_threads_execute_at_once() {
    let b = XlaBuilder::new("square");
    let x = b.parameter(0, &Shape::scalar(PrimitiveType::S64), "x");
    let exe = Client::default()
        .compile(&b.build(x * x).unwrap(), &CompileOptions::default())
        .unwrap();
    std::thread::scope(|s| {
        for t in 0..8i64 {
            let exe = &exe;
            s.spawn(move || {
                for i in 0..50i64 {
                    let v = t * 100 + i;
                    assert_eq!(
                        exe.execute(&[Literal::scalar(v)]).unwrap(),
                        Literal::scalar(v * v)
                    );
                }
            });
        }
    });
}

#[test]
fn runaway_loops_stop_at_the_limit() {
    let cond = {
        let b = XlaBuilder::new("forever");
        let _ = b.parameter(0, &Shape::scalar(PrimitiveType::S32), "p");
        b.build(b.constant_r0(true)).unwrap()
    };
    let body = {
        let b = XlaBuilder::new("step");
        let p = b.parameter(0, &Shape::scalar(PrimitiveType::S32), "p");
        b.build(p + b.constant_r0(1i32)).unwrap()
    };
    let b = XlaBuilder::new("runaway");
    let c = b
        .build(b.while_loop(&cond, &body, b.constant_r0(0i32)))
        .unwrap();
    let exe = Client::default()
        .compile(
            &c,
            &CompileOptions::default().with_while_iteration_limit(1000),
        )
        .unwrap();
    let e = exe.execute(&[]).unwrap_err().to_string();
    assert!(e.contains("1000"), "{e}");
}
