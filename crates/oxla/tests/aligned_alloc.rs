//! A program with `AlignedAlloc` installed: its large arrays, inputs and
//! the compiled backend's outputs alike, start on a cache line, and the
//! backend computes the same values as without it.

use oxla::{
    AlignedAlloc, Backend, Client, CompileOptions, Literal, PrimitiveType, Shape, XlaBuilder,
};

#[global_allocator]
static ALLOC: AlignedAlloc = AlignedAlloc;

#[test]
fn large_arrays_start_on_a_line() {
    for n in [1024usize, 4096, 100_000, 1 << 20] {
        let v = vec![1.0f32; n];
        assert_eq!(v.as_ptr() as usize % 64, 0, "{n} f32");
        let mut w: Vec<f64> = Vec::new();
        w.extend((0..n).map(|i| i as f64));
        assert_eq!(w.as_ptr() as usize % 64, 0, "{n} f64 grown by push");
        assert!(w.iter().enumerate().all(|(i, &x)| x == i as f64));
    }
}

#[test]
fn the_cpu_backend_runs_on_aligned_arrays() {
    // x[i, j] + y[j] over [512, 1000]: rows of 4000 bytes, so most rows
    // start off a line even though the array does.
    let (rows, cols) = (512usize, 1000usize);
    let b = XlaBuilder::new("aligned");
    let x = b.parameter(
        0,
        &Shape::array(PrimitiveType::F32, [512, 1000]).unwrap(),
        "x",
    );
    let y = b.parameter(1, &Shape::array(PrimitiveType::F32, [1000]).unwrap(), "y");
    let root = x.add_with_dims(y, &[1]);
    let computation = b.build(root).unwrap();
    let xs: Vec<f32> = (0..rows * cols).map(|i| (i % 977) as f32 * 0.5).collect();
    let ys: Vec<f32> = (0..cols).map(|j| j as f32 * -0.25).collect();
    let args = [
        Literal::from_vec(&[rows as i64, cols as i64], xs.clone()).unwrap(),
        Literal::vec1(&ys),
    ];
    let out = Client::new(Backend::Cpu)
        .compile(&computation, &CompileOptions::default())
        .unwrap()
        .execute(&args)
        .unwrap();
    let got = out.as_slice::<f32>().unwrap();
    assert_eq!(got.as_ptr() as usize % 64, 0);
    for (i, &g) in got.iter().enumerate() {
        assert_eq!(g, xs[i] + ys[i % cols], "element {i}");
    }
}
