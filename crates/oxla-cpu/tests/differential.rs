//! The CPU backend against the interpreter on shapes large enough to take
//! the multi-threaded paths, for each kernel family: fused element-wise
//! loops (broadcasts, transposes, slices, reverses, iotas, predicates),
//! reductions in every layout, and dots with every kind of dimension numbers.

use oxla_hlo::{ArrayData, ArrayLiteral, HloModule, Literal, PrimitiveType, Shape};
use oxla_interp::{EvalOptions, NoServices};

/// Uniform values in [-2, 2) (integers in [-8, 8), preds fair), deterministic.
fn random(shape: &Shape, seed: &mut u64) -> Literal {
    let Shape::Array(a) = shape else {
        panic!("array parameters only")
    };
    let n = a.element_count().unwrap();
    let mut next = || {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((*seed >> 11) as f64) / (1u64 << 53) as f64
    };
    let data = match a.element_type() {
        PrimitiveType::F32 => ArrayData::F32((0..n).map(|_| (next() * 4.0 - 2.0) as f32).collect()),
        PrimitiveType::F64 => ArrayData::F64((0..n).map(|_| next() * 4.0 - 2.0).collect()),
        PrimitiveType::Pred => ArrayData::Pred((0..n).map(|_| next() < 0.5).collect()),
        PrimitiveType::S32 => ArrayData::S32((0..n).map(|_| (next() * 16.0) as i32 - 8).collect()),
        PrimitiveType::S64 => ArrayData::S64((0..n).map(|_| (next() * 16.0) as i64 - 8).collect()),
        PrimitiveType::U8 => ArrayData::U8((0..n).map(|_| (next() * 16.0) as u8).collect()),
        // The whole range, so products and sums wrap.
        PrimitiveType::S8 => {
            ArrayData::S8((0..n).map(|_| (next() * 256.0 - 128.0) as i8).collect())
        }
        PrimitiveType::U16 => ArrayData::U16((0..n).map(|_| (next() * 65536.0) as u16).collect()),
        PrimitiveType::BF16 => ArrayData::BF16(
            (0..n)
                .map(|_| oxla_hlo::half::bf16::from_f64(next() * 4.0 - 2.0))
                .collect(),
        ),
        PrimitiveType::F16 => ArrayData::F16(
            (0..n)
                .map(|_| oxla_hlo::half::f16::from_f64(next() * 4.0 - 2.0))
                .collect(),
        ),
        // Half in [0, 40) (shift amounts in and past range), half anywhere.
        PrimitiveType::U32 => ArrayData::U32(
            (0..n)
                .map(|_| match next() {
                    r if r < 0.5 => (r * 80.0) as u32,
                    r => (r * 8.0e9) as u32,
                })
                .collect(),
        ),
        // Small values, and now and then one past i64's range.
        PrimitiveType::U64 => ArrayData::U64(
            (0..n)
                .map(|_| match next() {
                    r if r < 0.1 => u64::MAX - (r * 1000.0) as u64,
                    r => (r * 16.0) as u64,
                })
                .collect(),
        ),
        PrimitiveType::C64 => ArrayData::C64(
            (0..n)
                .map(|_| {
                    oxla_hlo::num_complex::Complex32::new(
                        (next() * 4.0 - 2.0) as f32,
                        (next() * 4.0 - 2.0) as f32,
                    )
                })
                .collect(),
        ),
        PrimitiveType::C128 => ArrayData::C128(
            (0..n)
                .map(|_| {
                    oxla_hlo::num_complex::Complex64::new(next() * 4.0 - 2.0, next() * 4.0 - 2.0)
                })
                .collect(),
        ),
        other => panic!("no random {other}"),
    };
    Literal::Array(ArrayLiteral::new(a.clone(), data).unwrap())
}

/// Random arguments for every parameter of `module`, from `seed`.
fn arguments(module: &HloModule, mut seed: u64) -> Vec<Literal> {
    module
        .program_shape()
        .parameters
        .iter()
        .map(|s| random(s, &mut seed))
        .collect()
}

/// `text` parsed, and run on `args` on both backends: (CPU, interpreter).
fn run_both(text: &str, args: &[Literal]) -> (Literal, Literal) {
    let module = oxla_text::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let options = EvalOptions::default();
    let exe = oxla_cpu::compile(&module).unwrap();
    let got = exe.execute(args, &options, &NoServices).unwrap();
    let want = oxla_interp::evaluate(&module, args, &options, &NoServices).unwrap();
    (got, want)
}

/// Runs `text` on both backends. The executable runs three times, on two
/// argument sets (A, B, A), with each result handed back to it: buffers it
/// reuses hold an earlier execution's values, which must never show.
fn check(text: &str, rtol: f64) {
    check_exe(text, rtol);
}

/// Like `check`; returns the executable's program listing.
fn check_exe(text: &str, rtol: f64) -> String {
    let module: HloModule = oxla_text::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let options = EvalOptions::default();
    let exe = oxla_cpu::compile(&module).unwrap();
    for (run, seed) in [7, 8, 7].into_iter().enumerate() {
        let args = arguments(&module, seed);
        let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
        let got = exe.execute(&args, &options, &NoServices).unwrap();
        if let Some(m) = got.first_mismatch(&want, rtol, rtol) {
            panic!("run {run}: {m}\n{text}");
        }
        exe.recycle(got);
    }
    assert!(exe.native_steps() > 0, "nothing ran natively:\n{text}");
    exe.describe()
}

#[test]
fn fused_elementwise_with_broadcasts() {
    check(
        "HloModule t\nENTRY e {\n  a = f32[300000] parameter(0)\n  b = f32[300000] parameter(1)\n  c = f32[300000] parameter(2)\n  m = f32[300000] multiply(a, b)\n  s = f32[300000] add(m, c)\n  ROOT t = f32[300000] tanh(s)\n}\n",
        2e-6,
    );
    check(
        "HloModule t\nENTRY e {\n  x = f32[700,513] parameter(0)\n  v = f32[513] parameter(1)\n  b = f32[700,513] broadcast(v), dimensions={1}\n  s = f32[700,513] add(x, b)\n  e = f32[700,513] exponential(s)\n  ROOT l = f32[700,513] log(e)\n}\n",
        1e-5,
    );
    check(
        "HloModule t\nENTRY e {\n  x = f64[600,400] parameter(0)\n  t = f64[400,600] transpose(x), dimensions={1,0}\n  y = f64[400,600] parameter(1)\n  ROOT m = f64[400,600] maximum(t, y)\n}\n",
        0.0,
    );
    // Outputs too large to stay in cache are streamed: a long row split
    // among tasks, rows, and short rows packed several to a tile.
    check(
        "HloModule t\nENTRY e {\n  a = f32[2400001] parameter(0)\n  b = f32[2400001] parameter(1)\n  m = f32[2400001] multiply(a, b)\n  ROOT t = f32[2400001] tanh(m)\n}\n",
        2e-6,
    );
    check(
        "HloModule t\nENTRY e {\n  x = f32[2100,1030] parameter(0)\n  v = f32[1030] parameter(1)\n  b = f32[2100,1030] broadcast(v), dimensions={1}\n  ROOT s = f32[2100,1030] add(x, b)\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = f32[150000,15] parameter(0)\n  v = f32[15] parameter(1)\n  b = f32[150000,15] broadcast(v), dimensions={1}\n  ROOT s = f32[150000,15] subtract(x, b)\n}\n",
        0.0,
    );
}

#[test]
fn fused_index_operations_and_predicates() {
    check(
        "HloModule t\nENTRY e {\n  x = f32[500,800] parameter(0)\n  s = f32[250,400] slice(x), slice={[0:500:2], [1:800:2]}\n  r = f32[250,400] reverse(s), dimensions={0}\n  i = f32[250,400] iota(), iota_dimension=1\n  c = pred[250,400] compare(r, i), direction=LT\n  z = f32[] constant(0)\n  zb = f32[250,400] broadcast(z), dimensions={}\n  ROOT o = f32[250,400] select(c, r, zb)\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = f32[400,700] parameter(0)\n  p = pred[400,700] parameter(1)\n  r = f32[700,400] reshape(x)\n  q = pred[700,400] reshape(p)\n  n = pred[700,400] not(q)\n  f = pred[700,400] is-finite(r)\n  ROOT a = pred[700,400] and(n, f)\n}\n",
        0.0,
    );
}

#[test]
fn reductions_in_every_layout() {
    let reduce = |dims: &str, out: &str, op: &str| {
        format!(
            "HloModule r\nr {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] {op}(a, b)\n}}\nENTRY e {{\n  x = f32[64,300,40] parameter(0)\n  z = f32[] constant(0)\n  ROOT s = f32[{out}] reduce(x, z), dimensions={{{dims}}}, to_apply=r\n}}\n"
        )
    };
    for (dims, out) in [
        ("0", "300,40"),
        ("1", "64,40"),
        ("2", "64,300"),
        ("0,2", "300"),
        ("1,2", "64"),
        ("0,1", "40"),
        ("0,1,2", ""),
    ] {
        // Up to 768000 values a sum, in another order than the
        // interpreter's (threads sum bands of rows): f32 rounding differs by
        // a few 1e-4 where a sum cancels to near 0.
        check(&reduce(dims, out, "add"), 1e-3);
        check(&reduce(dims, out, "maximum"), 0.0);
    }
    // A wide kept innermost dimension: rows split across threads, partial
    // results combined.
    let wide = |op: &str| {
        format!(
            "HloModule r\nr {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] {op}(a, b)\n}}\nENTRY e {{\n  x = f32[300,2500] parameter(0)\n  z = f32[] constant(1)\n  ROOT s = f32[2500] reduce(x, z), dimensions={{0}}, to_apply=r\n}}\n"
        )
    };
    check(&wide("add"), 1e-4);
    check(&wide("maximum"), 0.0);
    check(&wide("minimum"), 0.0);
    // Long rows read two at a time (in turns, two streams from memory),
    // an odd number of them, over each axis. Summed down the columns on
    // one thread, each output meets the rows in order, as the
    // interpreter's do: exactly its sums.
    for rows in [7, 301] {
        let pairs = wide("add").replace("f32[300,2500]", &format!("f32[{rows},2500]"));
        let exact = if rows < 10 { 0.0 } else { 1e-4 };
        check(&pairs, exact);
        check(&pairs.replace("add(a, b)", "maximum(a, b)"), 0.0);
        let across = pairs
            .replace("dimensions={0}", "dimensions={1}")
            .replace("f32[2500] reduce", &format!("f32[{rows}] reduce"));
        check(&across, 1e-4);
    }
    // Short kept rows (batch norm's statistics over N, H and W), split too;
    // sums of 3000 values cancel to near 0, where f32's rounding in either
    // order is a few 1e-4.
    let short = wide("add")
        .replace("f32[300,2500]", "f32[3000,64]")
        .replace("f32[2500]", "f32[64]");
    check(&short, 1e-3);
    check(&short.replace("add(a, b)", "maximum(a, b)"), 0.0);
    // Softmax's pattern: the reduced input is computed in the fused loop.
    check(
        "HloModule s\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] maximum(a, b)\n}\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\nENTRY e {\n  x = f32[512,1024] parameter(0)\n  ninf = f32[] constant(-inf)\n  m = f32[512] reduce(x, ninf), dimensions={1}, to_apply=max\n  mb = f32[512,1024] broadcast(m), dimensions={0}\n  d = f32[512,1024] subtract(x, mb)\n  ex = f32[512,1024] exponential(d)\n  z = f32[] constant(0)\n  s = f32[512] reduce(ex, z), dimensions={1}, to_apply=add\n  sb = f32[512,1024] broadcast(s), dimensions={0}\n  ROOT y = f32[512,1024] divide(ex, sb)\n}\n",
        1e-5,
    );
}

/// Integer dots (exact: wrapping sums do not depend on the order) and
/// half-precision dots (summed in f32, rounded once), with operand types
/// converted as the interpreter converts them.
#[test]
fn integer_and_half_precision_dots() {
    let dot = |l: &str, r: &str, o: &str, attrs: &str| {
        format!(
            "HloModule d\nENTRY e {{\n  a = {l} parameter(0)\n  b = {r} parameter(1)\n  ROOT d = {o} dot(a, b), {attrs}\n}}\n"
        )
    };
    let plain = "lhs_contracting_dims={1}, rhs_contracting_dims={0}";
    let cases = [
        // int8 quantised matmul into s32, large enough for threads.
        (
            "s8[300,200]",
            "s8[200,500]",
            "s32[300,500]",
            plain,
            "dot (integer)",
            0.0,
        ),
        // Wrapping in the narrow type itself.
        (
            "s8[40,64]",
            "s8[64,30]",
            "s8[40,30]",
            plain,
            "dot (integer)",
            0.0,
        ),
        (
            "u8[40,64]",
            "u8[64,30]",
            "u16[40,30]",
            plain,
            "dot (integer)",
            0.0,
        ),
        (
            "u16[40,64]",
            "u16[64,30]",
            "u16[40,30]",
            plain,
            "dot (integer)",
            0.0,
        ),
        (
            "u64[50,70]",
            "u64[70,40]",
            "u64[50,40]",
            plain,
            "dot (integer)",
            0.0,
        ),
        (
            "s32[4,50,60]",
            "s32[4,70,60]",
            "s32[4,50,70]",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}",
            "dot (integer)",
            0.0,
        ),
        (
            "s64[30,4,20,6]",
            "s64[6,4,20,25]",
            "s64[4,30,25]",
            "lhs_batch_dims={1}, lhs_contracting_dims={2,3}, rhs_batch_dims={1}, rhs_contracting_dims={2,0}",
            "dot (integer)",
            0.0,
        ),
        (
            "s32[0,5]",
            "s32[5,7]",
            "s32[0,7]",
            plain,
            "dot (integer)",
            0.0,
        ),
        (
            "s32[3,0]",
            "s32[0,7]",
            "s32[3,7]",
            plain,
            "dot (integer)",
            0.0,
        ),
        // Half precision: f32 sums in another order, so a bf16 ulp apart at most.
        (
            "bf16[128,256]",
            "bf16[256,64]",
            "bf16[128,64]",
            plain,
            "dot (gemm)",
            1e-2,
        ),
        (
            "f16[128,256]",
            "f16[256,64]",
            "f32[128,64]",
            plain,
            "dot (gemm)",
            1e-5,
        ),
        (
            "bf16[64,256]",
            "bf16[256,64]",
            "f32[64,64]",
            plain,
            "dot (gemm)",
            1e-5,
        ),
        (
            "f32[64,100]",
            "f32[100,64]",
            "f64[64,64]",
            plain,
            "dot (gemm)",
            1e-12,
        ),
    ];
    for (l, r, o, attrs, kernel, rtol) in cases {
        let listing = check_exe(&dot(l, r, o, attrs), rtol);
        assert!(listing.contains(kernel), "{l} x {r} -> {o}:\n{listing}");
    }
}

#[test]
fn dots_with_every_kind_of_dimension_numbers() {
    let dot = |l: &str, r: &str, o: &str, attrs: &str| {
        format!(
            "HloModule d\nENTRY e {{\n  a = f32[{l}] parameter(0)\n  b = f32[{r}] parameter(1)\n  ROOT d = f32[{o}] dot(a, b), {attrs}\n}}\n"
        )
    };
    check(
        &dot(
            "256,300",
            "300,200",
            "256,200",
            "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        ),
        1e-4,
    );
    check(
        &dot(
            "300,256",
            "300,200",
            "256,200",
            "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        ),
        1e-4,
    );
    check(
        &dot(
            "256,300",
            "200,300",
            "256,200",
            "lhs_contracting_dims={1}, rhs_contracting_dims={1}",
        ),
        1e-4,
    );
    check(
        &dot(
            "4,50,60",
            "4,60,70",
            "4,50,70",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
        ),
        1e-4,
    );
    // Batch in the middle and two contracting dimensions in swapped order: copied first.
    check(
        &dot(
            "30,4,20,6",
            "6,4,20,25",
            "4,30,25",
            "lhs_batch_dims={1}, lhs_contracting_dims={2,3}, rhs_batch_dims={1}, rhs_contracting_dims={2,0}",
        ),
        1e-4,
    );
    check(
        &dot(
            "300",
            "300",
            "",
            "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        ),
        1e-4,
    );
    check(
        &dot(
            "128,300",
            "300",
            "128",
            "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        ),
        1e-4,
    );
    // Matrix times vector and vector times matrix, large enough to split
    // across threads, with row lengths that leave remainders.
    for (l, r, o, attrs) in [
        (
            "2050,1030",
            "1030",
            "2050",
            "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
        ),
        (
            "1030,2050",
            "1030",
            "2050",
            "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        ),
        (
            "1030",
            "1030,2050",
            "2050",
            "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        ),
        (
            "1030",
            "2050,1030",
            "2050",
            "lhs_contracting_dims={0}, rhs_contracting_dims={1}",
        ),
        (
            "100003",
            "100003",
            "",
            "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        ),
        (
            "3,700,500",
            "3,500,1",
            "3,700,1",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
        ),
        (
            "3,1,500",
            "3,500,700",
            "3,1,700",
            "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
        ),
    ] {
        check(&dot(l, r, o, attrs), 1e-3);
    }
}

#[test]
fn copies_and_transposes_of_any_type() {
    check(
        "HloModule t\nENTRY e {\n  x = f32[2048,1000] parameter(0)\n  ROOT t = f32[1000,2048] transpose(x), dimensions={1,0}\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = s32[30,50,70] parameter(0)\n  ROOT t = s32[70,30,50] transpose(x), dimensions={2,0,1}\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = s32[30,50,70] parameter(0)\n  ROOT t = s32[50,30,70] transpose(x), dimensions={1,0,2}\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = s32[300] parameter(0)\n  ROOT b = s32[200,300] broadcast(x), dimensions={1}\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = pred[600,500] parameter(0)\n  s = pred[300,500] slice(x), slice={[100:400], [0:500]}\n  ROOT r = pred[300,500] reverse(s), dimensions={1}\n}\n",
        0.0,
    );
}

#[test]
fn register_transposes_of_32_and_64_bit_elements() {
    // Whole 16x16 (32-bit) and 16x8 (64-bit) blocks transpose in registers;
    // the edges of these shapes are partial blocks, done element by element.
    let cases = [
        "x = f32[67,1029] parameter(0)\n  ROOT t = f32[1029,67] transpose(x), dimensions={1,0}",
        "x = u32[512,640] parameter(0)\n  ROOT t = u32[640,512] transpose(x), dimensions={1,0}",
        "x = u64[2,100,300] parameter(0)\n  ROOT t = u64[2,300,100] transpose(x), dimensions={0,2,1}",
        "x = f64[130,70] parameter(0)\n  ROOT t = f64[70,130] transpose(x), dimensions={1,0}",
        "x = f32[20,48,33] parameter(0)\n  ROOT t = f32[33,20,48] transpose(x), dimensions={2,0,1}",
        // The input runs are read backwards: a negative stride between runs.
        "x = s64[300,200] parameter(0)\n  t = s64[200,300] transpose(x), dimensions={1,0}\n  ROOT r = s64[200,300] reverse(t), dimensions={1}",
        "x = s32[300,200] parameter(0)\n  t = s32[200,300] transpose(x), dimensions={1,0}\n  ROOT r = s32[200,300] reverse(t), dimensions={1}",
    ];
    for body in cases {
        check_kernel(&format!("HloModule t\nENTRY e {{\n  {body}\n}}\n"), "copy");
    }
}

#[test]
fn fused_loops_reading_operands_down_their_columns() {
    // A transposed operand in a fused loop is gathered 16 rows at a time:
    // whole register blocks where 16 rows are neighbours in the input,
    // element by element at the edges (rows and columns that are not
    // multiples of 16), for strided and reversed reads, and for several
    // outer dimensions in one block.
    let cases = [
        // JAX's symmetrisation before a Cholesky factorisation.
        "a = f32[300,300] parameter(0)\n  t = f32[300,300] transpose(a), dimensions={1,0}\n  s = f32[300,300] add(a, t)\n  h = f32[] constant(0.5)\n  b = f32[300,300] broadcast(h), dimensions={}\n  ROOT r = f32[300,300] multiply(s, b)",
        "a = f32[1029,67] parameter(0)\n  t = f32[67,1029] transpose(a), dimensions={1,0}\n  y = f32[67,1029] parameter(1)\n  ROOT r = f32[67,1029] subtract(t, y)",
        "a = f64[530,100] parameter(0)\n  t = f64[100,530] transpose(a), dimensions={1,0}\n  ROOT r = f64[100,530] exponential(t)",
        // Reversed along the rows: the gathered rows run backwards.
        "a = f32[200,300] parameter(0)\n  t = f32[300,200] transpose(a), dimensions={1,0}\n  v = f32[300,200] reverse(t), dimensions={0,1}\n  ROOT r = f32[300,200] multiply(v, t)",
        // Every second input row: not neighbours, element by element.
        "a = f32[400,300] parameter(0)\n  s = f32[200,300] slice(a), slice={[0:400:2], [0:300]}\n  t = f32[300,200] transpose(s), dimensions={1,0}\n  ROOT r = f32[300,200] negate(t)",
        // A batch of transposes, 5 rows per matrix: blocks span matrices.
        "a = f32[7,40,5] parameter(0)\n  t = f32[7,5,40] transpose(a), dimensions={0,2,1}\n  y = f32[7,5,40] parameter(1)\n  ROOT r = f32[7,5,40] maximum(t, y)",
        // Two gathered operands and a plain one, large enough for threads.
        "a = f32[700,600] parameter(0)\n  b = f32[700,600] parameter(1)\n  c = f32[600,700] parameter(2)\n  ta = f32[600,700] transpose(a), dimensions={1,0}\n  tb = f32[600,700] transpose(b), dimensions={1,0}\n  m = f32[600,700] multiply(ta, tb)\n  ROOT r = f32[600,700] add(m, c)",
    ];
    for body in cases {
        let listing = check_exe(&format!("HloModule t\nENTRY e {{\n  {body}\n}}\n"), 0.0);
        assert!(listing.contains("fused loop"), "no fused loop:\n{listing}");
    }
}

#[test]
fn index_chains_a_view_cannot_express_run_natively() {
    // A reshape merging dimensions a transpose permuted needs the transpose
    // in memory first; the fused loop, reduction or copy reading the chain
    // cuts it there instead of leaving the whole chain to the interpreter.
    // A reshape splitting a sliced dimension (attention heads out of a
    // fused QKV product) stays a view.
    let cases = [
        // JAX's attention: slice the QKV product, split heads, transpose.
        "p = f32[2,16,24] parameter(0)\n  s = f32[2,16,8] slice(p), slice={[0:2], [0:16], [8:16]}\n  r = f32[2,16,2,4] reshape(s)\n  t = f32[2,2,16,4] transpose(r), dimensions={0,2,1,3}\n  q = f32[2,2,16,4] parameter(1)\n  ROOT d = f32[2,2,16,16] dot(t, q), lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}",
        // Heads merged back after a transpose: a copy, then a view.
        "p = f32[2,3,5,4] parameter(0)\n  t = f32[2,5,3,4] transpose(p), dimensions={0,2,1,3}\n  ROOT r = f32[2,5,12] reshape(t)",
        "p = f32[2,3,5,4] parameter(0)\n  t = f32[2,5,3,4] transpose(p), dimensions={0,2,1,3}\n  r = f32[2,5,12] reshape(t)\n  y = f32[2,5,12] parameter(1)\n  ROOT a = f32[2,5,12] add(r, y)",
        "p = f32[6,7] parameter(0)\n  t = f32[7,6] transpose(p), dimensions={1,0}\n  r = f32[42] reshape(t)\n  e = f32[42] exponential(r)\n  z = f32[] constant(0)\n  ROOT s = f32[] reduce(e, z), dimensions={0}, to_apply=add",
        // An iota the reshape cannot see through.
        "i = f32[5,3] iota(), iota_dimension=0\n  t = f32[3,5] transpose(i), dimensions={1,0}\n  r = f32[15] reshape(t)\n  y = f32[15] parameter(0)\n  ROOT m = f32[15] multiply(r, y)",
    ];
    for body in cases {
        let listing = check_exe(
            &format!(
                "HloModule t\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}}\nENTRY e {{\n  {body}\n}}\n"
            ),
            1e-6,
        );
        let entry = listing.split("e:\n").nth(1).unwrap_or(&listing);
        assert!(
            !entry.contains("interpreted"),
            "interpreted steps:\n{listing}"
        );
    }
}

#[test]
fn convolutions_in_several_layouts() {
    let conv = |l: &str, r: &str, o: &str, attrs: &str| {
        format!(
            "HloModule c\nENTRY e {{\n  a = f32[{l}] parameter(0)\n  b = f32[{r}] parameter(1)\n  ROOT c = f32[{o}] convolution(a, b), {attrs}\n}}\n"
        )
    };
    // NCHW, 3x3 SAME.
    check(
        &conv(
            "2,8,20,20",
            "16,8,3,3",
            "2,16,20,20",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01",
        ),
        1e-4,
    );
    // NHWC with strides, lhs and rhs dilation and negative padding.
    check(
        &conv(
            "2,17,19,6",
            "3,2,6,10",
            "2,8,17,10",
            "window={size=3x2 stride=2x1 pad=1_-1x0_0 lhs_dilate=1x1 rhs_dilate=1x2}, dim_labels=b01f_01io->b01f",
        ),
        1e-4,
    );
    check(
        &conv(
            "1,4,9,9",
            "6,4,2,2",
            "1,6,18,18",
            "window={size=2x2 pad=1_1x1_1 lhs_dilate=2x2}, dim_labels=bf01_oi01->bf01",
        ),
        1e-4,
    );
    // Feature groups (depthwise) and a 1-D convolution with an unusual output layout.
    check(
        &conv(
            "3,12,30",
            "12,1,5",
            "3,12,26",
            "window={size=5}, dim_labels=bf0_oi0->bf0, feature_group_count=12",
        ),
        1e-4,
    );
    check(
        &conv(
            "3,12,30",
            "12,4,5",
            "26,3,12",
            "window={size=5}, dim_labels=bf0_oi0->0bf, feature_group_count=3",
        ),
        1e-4,
    );
    // Weight gradients as JAX writes them (the output's batch dimension is
    // not its first, so batch elements compute privately in parallel), with
    // and without feature groups.
    check(
        &conv(
            "16,24,24,6",
            "16,24,24,24",
            "3,3,6,24",
            "window={size=24x24 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf",
        ),
        // Sums of 9216 products near 100 in size, some cancelling to near 0.
        2e-3,
    );
    check(
        &conv(
            "16,32,32,6",
            "8,32,32,24",
            "3,3,6,24",
            "window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, feature_group_count=2",
        ),
        2e-3,
    );
    // Inputs with their features innermost (NHWC and its 1-D and 3-D kin)
    // copy each tap's features as one run: with feature groups, a kernel in
    // another layout, strides, input dilation, padding at either end, and
    // an output in another layout.
    check(
        &conv(
            "2,12,12,8",
            "3,3,4,6",
            "2,12,12,6",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2",
        ),
        1e-4,
    );
    check(
        &conv(
            "3,15,13,5",
            "7,5,3,3",
            "3,7,7,7",
            "window={size=3x3 stride=2x2 pad=0_1x1_1}, dim_labels=b01f_oi01->b01f",
        ),
        1e-4,
    );
    check(
        &conv(
            "4,20,3",
            "5,3,4",
            "4,39,4",
            "window={size=5 pad=2_2 lhs_dilate=2}, dim_labels=b0f_0io->b0f",
        ),
        1e-4,
    );
    check(
        &conv(
            "2,6,5,7,3",
            "2,3,2,3,4",
            "2,6,5,6,4",
            "window={size=2x3x2 pad=0_1x1_1x0_0}, dim_labels=b012f_012io->b012f",
        ),
        1e-4,
    );
    check(
        &conv(
            "2,10,10,4",
            "3,3,4,5",
            "2,5,10,10",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->bf01",
        ),
        1e-4,
    );
    // Weight gradients whose batch (the input features) is innermost in the
    // input and among the output positions fold into one product: a strided
    // convolution's (the stride becomes kernel dilation); a kernel whose
    // (feature, position) rows have no single stride (gathered first); one
    // and three spatial dimensions with padding at either end.
    check(
        &conv(
            "4,17,17,5",
            "4,8,8,7",
            "3,3,5,7",
            "window={size=8x8 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf",
        ),
        1e-4,
    );
    check(
        &conv(
            "4,17,17,5",
            "7,8,8,4",
            "3,3,5,7",
            "window={size=8x8 rhs_dilate=2x2}, dim_labels=f01b_o01i->01bf",
        ),
        1e-4,
    );
    check(
        &conv(
            "3,20,6",
            "3,9,2",
            "15,6,2",
            "window={size=9 pad=2_1}, dim_labels=f0b_i0o->0bf",
        ),
        1e-4,
    );
    check(
        &conv(
            "2,5,6,4,3",
            "2,4,5,3,2",
            "4,3,3,3,2",
            "window={size=4x5x3 pad=1_1x0_1x1_0}, dim_labels=f012b_i012o->012bf",
        ),
        1e-4,
    );
    // A kernel wider than the output, with strides, padding and both
    // dilations (patches built one output position at a time).
    check(
        &conv(
            "2,5,30",
            "4,5,12",
            "2,4,6",
            "window={size=12 stride=8 pad=3_3 lhs_dilate=2 rhs_dilate=2}, dim_labels=bf0_oi0->bf0",
        ),
        1e-4,
    );
}

/// Batch groups, reversed windows, integer and half-precision operands:
/// each runs natively and agrees with the interpreter (integers exactly).
#[test]
fn grouped_reversed_integer_and_half_convolutions() {
    let conv = |ty: [&str; 3], l: &str, r: &str, o: &str, attrs: &str| {
        format!(
            "HloModule c\nENTRY e {{\n  a = {}[{l}] parameter(0)\n  b = {}[{r}] parameter(1)\n  ROOT c = {}[{o}] convolution(a, b), {attrs}\n}}\n",
            ty[0], ty[1], ty[2]
        )
    };
    let native = |text: &str, rtol: f64| {
        let listing = check_exe(text, rtol);
        assert!(listing.contains("= convolution"), "not native:\n{listing}");
    };
    let f32s = ["f32"; 3];
    // Weight gradients with a small output over a deep sum, which split the
    // sum across threads (cnn_grad_nhwc's, then with strides, dilation and
    // uneven padding, then in integers, which must wrap exactly alike).
    native(
        &conv(
            f32s,
            "8,32,32,16",
            "8,32,32,32",
            "3,3,16,32",
            "window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf",
        ),
        2e-3,
    );
    native(
        &conv(
            f32s,
            "6,45,37,8",
            "6,21,17,12",
            "7,9,8,12",
            "window={size=21x17 pad=2_0x1_3 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf",
        ),
        2e-3,
    );
    native(
        &conv(
            ["s32"; 3],
            "8,32,32,16",
            "8,32,32,32",
            "3,3,16,32",
            "window={size=32x32 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf",
        ),
        0.0,
    );
    // A depthwise convolution's weight gradient as JAX writes it: the
    // channels are the batch, one batch group each; small, then large
    // enough for the groups to run in parallel.
    native(
        &conv(
            f32s,
            "4,9,9,6",
            "4,9,9,6",
            "3,3,1,6",
            "window={size=9x9 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, batch_group_count=6",
        ),
        1e-4,
    );
    native(
        &conv(
            f32s,
            "8,40,40,32",
            "8,40,40,32",
            "3,3,1,32",
            "window={size=40x40 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf, batch_group_count=32",
        ),
        2e-3,
    );
    // Batch groups with two output features a group and an output batch of
    // three, batch first (batch elements in parallel) and not.
    native(
        &conv(
            f32s,
            "6,5,20,20",
            "4,5,3,3",
            "3,4,18,18",
            "window={size=3x3}, dim_labels=bf01_oi01->bf01, batch_group_count=2",
        ),
        1e-4,
    );
    native(
        &conv(
            f32s,
            "6,5,20,20",
            "4,5,3,3",
            "18,3,4,18",
            "window={size=3x3}, dim_labels=bf01_oi01->0bf1, batch_group_count=2",
        ),
        1e-4,
    );
    // Reversed windows, with feature groups, and in a weight gradient that
    // would otherwise read its kernel in place.
    native(
        &conv(
            f32s,
            "2,6,11,13",
            "4,3,3,2",
            "2,4,9,14",
            "window={size=3x2 pad=0_0x1_1 rhs_reversal=1x0}, dim_labels=bf01_oi01->bf01, feature_group_count=2",
        ),
        1e-4,
    );
    native(
        &conv(
            f32s,
            "4,17,17,5",
            "4,8,8,7",
            "3,3,5,7",
            "window={size=8x8 rhs_dilate=2x2 rhs_reversal=1x1}, dim_labels=f01b_i01o->01bf",
        ),
        1e-4,
    );
    // Integers: products and sums wrap, in the result's type.
    for ty in [
        ["s32"; 3],
        ["s8", "s8", "s32"],
        ["s8"; 3],
        ["u8", "u8", "u16"],
        ["s64"; 3],
    ] {
        native(
            &conv(
                ty,
                "2,12,12,8",
                "3,3,4,6",
                "2,12,12,6",
                "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=2",
            ),
            0.0,
        );
    }
    native(
        &conv(
            ["s32"; 3],
            "4,17,17,5",
            "4,8,8,7",
            "3,3,5,7",
            "window={size=8x8 rhs_dilate=2x2}, dim_labels=f01b_i01o->01bf",
        ),
        0.0,
    );
    native(
        &conv(
            ["s32"; 3],
            "8,64,32,32",
            "64,64,3,3",
            "8,64,32,32",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01",
        ),
        0.0,
    );
    // Halves sum in f32 and round once.
    for ty in [
        ["bf16"; 3],
        ["f16"; 3],
        ["bf16", "bf16", "f32"],
        ["f16", "f16", "f32"],
    ] {
        native(
            &conv(
                ty,
                "2,8,20,20",
                "16,8,3,3",
                "2,16,20,20",
                "window={size=3x3 pad=1_1x1_1}, dim_labels=bf01_oi01->bf01",
            ),
            1e-2,
        );
    }
}

const MAX: &str = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] maximum(a, b)\n}\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\nge {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GE\n}\ngt {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=GT\n}\nle {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = pred[] compare(a, b), direction=LE\n}\n";

#[test]
fn pooling_and_its_gradient() {
    let pool = |window: &str, out: &str, op: &str| {
        format!(
            "HloModule p\n{MAX}ENTRY e {{\n  x = f32[4,16,40,40] parameter(0)\n  i = f32[] constant(-inf)\n  ROOT r = f32[{out}] reduce-window(x, i), window={{{window}}}, to_apply={op}\n}}\n"
        )
    };
    check(
        &pool("size=1x1x3x3 stride=1x1x2x2", "4,16,19,19", "max"),
        0.0,
    );
    check(
        &pool(
            "size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1",
            "4,16,20,20",
            "max",
        ),
        0.0,
    );
    check(
        &pool(
            "size=1x1x2x3 stride=1x1x1x2 pad=0_0x0_0x1_0x0_2 lhs_dilate=1x1x2x1 rhs_dilate=1x1x1x2",
            "4,16,79,19",
            "add",
        ),
        1e-5,
    );
    // cumsum-style window along the last dimension.
    check(
        &pool("size=1x1x1x40 pad=0_0x0_0x0_0x39_0", "4,16,40,40", "add"),
        1e-4,
    );
    // The gradient of max pooling, with overlapping windows and padding.
    check(
        &format!(
            "HloModule g\n{MAX}ENTRY e {{\n  x = f32[4,16,40,40] parameter(0)\n  s = f32[4,16,20,20] parameter(1)\n  z = f32[] constant(0)\n  ROOT g = f32[4,16,40,40] select-and-scatter(x, s, z), window={{size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x1_1x1_1}}, select=ge, scatter=add\n}}\n"
        ),
        1e-5,
    );
    // Windows not on the innermost dimensions (NHWC), dilated windows, and
    // the other selections.
    check(
        &format!(
            "HloModule g\n{MAX}ENTRY e {{\n  x = f32[4,40,40,16] parameter(0)\n  s = f32[4,20,20,16] parameter(1)\n  z = f32[] constant(0)\n  ROOT g = f32[4,40,40,16] select-and-scatter(x, s, z), window={{size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0}}, select=ge, scatter=add\n}}\n"
        ),
        1e-5,
    );
    for select in ["gt", "le"] {
        check(
            &format!(
                "HloModule g\n{MAX}ENTRY e {{\n  x = f32[4,16,40,40] parameter(0)\n  s = f32[4,16,19,20] parameter(1)\n  z = f32[] constant(0)\n  ROOT g = f32[4,16,40,40] select-and-scatter(x, s, z), window={{size=1x1x3x3 stride=1x1x2x2 pad=0_0x0_0x0_1x1_1 rhs_dilate=1x1x2x1}}, select={select}, scatter=add\n}}\n"
            ),
            1e-5,
        );
    }
    // NHWC with many ties (values rounded to halves), dilated windows.
    for select in ["ge", "gt", "le"] {
        check(
            &format!(
                "HloModule g\n{MAX}ENTRY e {{\n  p = f32[3,30,40,24] parameter(0)\n  two = f32[] constant(2)\n  tb = f32[3,30,40,24] broadcast(two), dimensions={{}}\n  m = f32[3,30,40,24] multiply(p, tb)\n  x = f32[3,30,40,24] round-nearest-even(m)\n  s = f32[3,14,20,24] parameter(1)\n  z = f32[] constant(0)\n  ROOT g = f32[3,30,40,24] select-and-scatter(x, s, z), window={{size=1x3x3x1 stride=1x2x2x1 pad=0_0x0_1x1_1x0_0 rhs_dilate=1x2x1x1}}, select={select}, scatter=add\n}}\n"
            ),
            1e-5,
        );
    }
}

#[test]
fn half_precision_element_wise_loops() {
    // bf16 and f16 arithmetic fuses into f32 loops that round each result
    // back to its type, as XLA:CPU computes it: exact for the correctly
    // rounded operations, within a unit of bf16 or f16 for the polynomial
    // functions (computed in f32, then rounded once).
    let exact = [
        // JAX's mixed precision: f32 in, bf16 arithmetic, f32 out.
        "x = f32[64,300] parameter(0)\n  y = f32[64,300] parameter(1)\n  a = bf16[64,300] convert(x)\n  b = bf16[64,300] convert(y)\n  m = bf16[64,300] multiply(a, b)\n  c = bf16[] constant(1)\n  cb = bf16[64,300] broadcast(c), dimensions={}\n  s = bf16[64,300] add(m, cb)\n  ROOT r = f32[64,300] convert(s)",
        // bf16 in and out, with a broadcast row, a transpose and division.
        "x = bf16[40,50] parameter(0)\n  v = bf16[50] parameter(1)\n  vb = bf16[40,50] broadcast(v), dimensions={1}\n  d = bf16[40,50] divide(x, vb)\n  t = bf16[50,40] transpose(d), dimensions={1,0}\n  ROOT n = bf16[50,40] subtract(t, t)",
        "x = f16[3000] parameter(0)\n  y = f16[3000] parameter(1)\n  m = f16[3000] multiply(x, y)\n  s = f16[3000] sqrt(m)\n  ROOT a = f16[3000] add(s, x)",
        // Comparisons and selects of half values, and converts between them.
        "x = bf16[500] parameter(0)\n  y = bf16[500] parameter(1)\n  p = pred[500] compare(x, y), direction=GT\n  mx = bf16[500] select(p, x, y)\n  h = f16[500] convert(mx)\n  ROOT r = f16[500] negate(h)",
        "x = f32[700] parameter(0)\n  h = bf16[700] convert(x)\n  f = f16[700] convert(h)\n  w = f32[700] convert(f)\n  ROOT d = f32[700] subtract(x, w)",
    ];
    for body in exact {
        let listing = check_exe(&format!("HloModule h\nENTRY e {{\n  {body}\n}}\n"), 0.0);
        assert!(listing.contains("fused loop"), "{listing}");
        assert!(!listing.contains("element-wise"), "{listing}");
    }
    let functions = [
        "x = bf16[2000] parameter(0)\n  e = bf16[2000] exponential(x)\n  t = bf16[2000] tanh(e)\n  ROOT l = bf16[2000] log(e)",
        "x = f16[2000] parameter(0)\n  e = f16[2000] exponential(x)\n  ROOT t = f16[2000] tanh(e)",
        "x = f32[64,100] parameter(0)\n  h = bf16[64,100] convert(x)\n  g = bf16[64,100] logistic(h)\n  ROOT r = f32[64,100] convert(g)",
    ];
    for body in functions {
        let listing = check_exe(&format!("HloModule h\nENTRY e {{\n  {body}\n}}\n"), 8e-3);
        assert!(listing.contains("fused loop"), "{listing}");
    }
    // Maxima and minima of half values reduce in f32, exactly (softmax's
    // row maximum in bf16); sums, which XLA rounds partial by partial in an
    // order of its own, do not.
    let reductions = [
        ("bf16", "maximum", "-inf", "300,200", "{1}", "300", true),
        ("f16", "minimum", "inf", "300,200", "{0}", "200", true),
        ("bf16", "maximum", "0", "30,20,10", "{0,2}", "20", true),
        ("bf16", "add", "0", "300,200", "{1}", "300", false),
    ];
    for (ty, op, init, dims, reduced, out, fused) in reductions {
        let listing = check_exe(
            &format!(
                "HloModule r\nf {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT c = {ty}[] {op}(a, b)\n}}\nENTRY e {{\n  x = {ty}[{dims}] parameter(0)\n  y = {ty}[{dims}] exponential(x)\n  i = {ty}[] constant({init})\n  ROOT r = {ty}[{out}] reduce(y, i), dimensions={reduced}, to_apply=f\n}}\n"
            ),
            8e-3,
        );
        assert_eq!(listing.contains("r = fused reduction"), fused, "{listing}");
    }
}

#[test]
fn integer_reduce_windows() {
    // JAX's cumsum and cummax on integers (prefix and reversed windows over
    // a whole dimension), pooling of integers, and sums and products that
    // wrap (s8 and u16 over their whole range); non-identity inits fold in.
    let cases = [
        (
            "s32",
            "64,300",
            "size=1x300 pad=0_0x299_0",
            "64,300",
            "add",
            "0",
        ),
        (
            "s32",
            "300,64",
            "size=300x1 pad=0_299x0_0",
            "300,64",
            "add",
            "0",
        ),
        (
            "s64",
            "20,30,40",
            "size=1x30x1 pad=0_0x29_0x0_0",
            "20,30,40",
            "maximum",
            "-9223372036854775808",
        ),
        (
            "u8",
            "9,200",
            "size=1x200 pad=0_0x0_199",
            "9,200",
            "minimum",
            "255",
        ),
        (
            "s8",
            "8,100",
            "size=1x100 pad=0_0x99_0",
            "8,100",
            "add",
            "3",
        ),
        (
            "u16",
            "8,60",
            "size=1x4 stride=1x2 pad=0_0x1_1",
            "8,30",
            "multiply",
            "1",
        ),
        (
            "s32",
            "4,40,40,3",
            "size=1x3x3x1 stride=1x2x2x1 pad=0_0x1_1x1_1x0_0",
            "4,20,20,3",
            "maximum",
            "-2147483648",
        ),
        (
            "s8",
            "6,33",
            "size=2x5 stride=1x3 pad=1_0x2_2 rhs_dilate=1x2",
            "6,10",
            "multiply",
            "1",
        ),
    ];
    for (ty, dims, window, out, op, init) in cases {
        let text = format!(
            "HloModule w\nf {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT c = {ty}[] {op}(a, b)\n}}\nENTRY e {{\n  x = {ty}[{dims}] parameter(0)\n  i = {ty}[] constant({init})\n  ROOT r = {ty}[{out}] reduce-window(x, i), window={{{window}}}, to_apply=f\n}}\n"
        );
        let listing = check_exe(&text, 0.0);
        assert!(listing.contains("r = reduce-window"), "{listing}");
    }
}

#[test]
fn sorts_with_key_functions_and_payloads() {
    // JAX's float comparator: NaN and -0 canonicalised, then a total order.
    let jax_cmp = "cmp {\n  a = f32[] parameter(0)\n  ne.a = pred[] compare(a, a), direction=NE\n  qnan = f32[] constant(nan)\n  zero = f32[] constant(0)\n  eq.a = pred[] compare(a, zero), direction=EQ\n  z.a = f32[] select(eq.a, zero, a)\n  c.a = f32[] select(ne.a, qnan, z.a)\n  b = f32[] parameter(1)\n  ne.b = pred[] compare(b, b), direction=NE\n  eq.b = pred[] compare(b, zero), direction=EQ\n  z.b = f32[] select(eq.b, zero, b)\n  c.b = f32[] select(ne.b, qnan, z.b)\n  ROOT lt = pred[] compare(c.a, c.b), direction=LT, type=TOTALORDER\n}\n";
    check(
        &format!(
            "HloModule s\n{jax_cmp}ENTRY e {{\n  x = f32[300000] parameter(0)\n  ROOT s = f32[300000] sort(x), dimensions={{0}}, is_stable=true, to_apply=cmp\n}}\n"
        ),
        0.0,
    );
    check(
        &format!(
            "HloModule s\n{jax_cmp}ENTRY e {{\n  x = f32[64,500] parameter(0)\n  ROOT s = f32[64,500] sort(x), dimensions={{0}}, is_stable=true, to_apply=cmp\n}}\n"
        ),
        0.0,
    );
    // argsort: an s32 payload follows the keys, ties stay in order (integer keys repeat a lot).
    let argsort = "cmp {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  p = s32[] parameter(2)\n  q = s32[] parameter(3)\n  ROOT gt = pred[] compare(a, b), direction=GT\n}\n";
    check(
        &format!(
            "HloModule s\n{argsort}ENTRY e {{\n  x = s32[200,300] parameter(0)\n  i = s32[200,300] iota(), iota_dimension=1\n  ROOT s = (s32[200,300], s32[200,300]) sort(x, i), dimensions={{1}}, is_stable=true, to_apply=cmp\n}}\n"
        ),
        0.0,
    );
    // A plain FLOAT comparison, NaNs included: the interpreter's merge order.
    let plain = "cmp {\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n  ROOT lt = pred[] compare(a, b), direction=LT\n}\n";
    check(
        &format!(
            "HloModule s\n{plain}ENTRY e {{\n  x = f64[5000] parameter(0)\n  l = f64[5000] log(x)\n  ROOT s = f64[5000] sort(l), dimensions={{0}}, to_apply=cmp\n}}\n"
        ),
        0.0,
    );
}

#[test]
fn pads_with_interior_and_negative_edges() {
    check(
        "HloModule t\nENTRY e {\n  x = f32[700,513] parameter(0)\n  v = f32[] parameter(1)\n  ROOT p = f32[1402,514] pad(x, v), padding=1_2_1x3_-2\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = s32[9,7,5] parameter(0)\n  v = s32[] parameter(1)\n  ROOT p = s32[8,18,12] pad(x, v), padding=-1_0x2_3_1x0_-1_2\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = pred[1000] parameter(0)\n  v = pred[] parameter(1)\n  ROOT p = pred[2995] pad(x, v), padding=-5_2_2\n}\n",
        0.0,
    );
    // Extreme amounts that cancel, and any interior padding of a size-1
    // dimension, are valid: both backends compute them without overflow.
    check(
        "HloModule t\nENTRY e {\n  x = f32[1,3] parameter(0)\n  v = f32[] parameter(1)\n  ROOT p = f32[1,5] pad(x, v), padding=-9223372036854775807_9223372036854775807_9223372036854775807x1_1_0\n}\n",
        0.0,
    );
    // The max-pool gradient's pattern: pad with -inf, then select-and-scatter.
    check(
        "HloModule t\nENTRY e {\n  x = f64[8,64,112,112] parameter(0)\n  v = f64[] constant(-inf)\n  ROOT p = f64[8,64,113,113] pad(x, v), padding=0_0x0_0x0_1x0_1\n}\n",
        0.0,
    );
}

#[test]
fn integer_element_wise_operations() {
    check(
        "HloModule t\nENTRY e {\n  a = s32[300,400] parameter(0)\n  b = s32[300,400] parameter(1)\n  d = s32[300,400] divide(a, b)\n  r = s32[300,400] remainder(a, b)\n  s = s32[300,400] shift-right-arithmetic(a, b)\n  l = s32[300,400] shift-left(d, b)\n  c = pred[300,400] compare(r, s), direction=LT\n  m = s32[300,400] select(c, l, r)\n  f = f32[300,400] convert(m)\n  ROOT t = (s32[300,400], f32[300,400]) tuple(m, f)\n}\n",
        0.0,
    );
}

#[test]
fn concatenates_and_dynamic_slices_of_any_type() {
    check(
        "HloModule t\nENTRY e {\n  a = f32[300,17,40] parameter(0)\n  b = f32[300,5,40] parameter(1)\n  c = f32[300,1,40] parameter(2)\n  ROOT k = f32[300,23,40] concatenate(a, b, c), dimensions={1}\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  a = s32[3,7] parameter(0)\n  b = s32[5,7] parameter(1)\n  ROOT k = s32[8,7] concatenate(a, b), dimensions={0}\n}\n",
        0.0,
    );
    // Starts past the end and negative are clamped; the second form takes
    // its starts from arguments.
    check(
        "HloModule t\nENTRY e {\n  x = f64[40,50,60] parameter(0)\n  i = s32[] constant(35)\n  j = s32[] constant(-4)\n  k = s32[] constant(7)\n  ROOT d = f64[10,20,30] dynamic-slice(x, i, j, k), dynamic_slice_sizes={10,20,30}\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = s32[40,50] parameter(0)\n  i = s32[] parameter(1)\n  j = s32[] parameter(2)\n  ROOT d = s32[4,5] dynamic-slice(x, i, j), dynamic_slice_sizes={4,5}\n}\n",
        0.0,
    );
    check(
        "HloModule t\nENTRY e {\n  x = f32[40,50] parameter(0)\n  u = f32[4,50] parameter(1)\n  i = s32[] parameter(2)\n  z = s32[] constant(0)\n  ROOT d = f32[40,50] dynamic-update-slice(x, u, i, z)\n}\n",
        0.0,
    );
}

#[test]
fn fused_loops_read_dynamic_slices_in_place() {
    // A scan step's slice of its `xs` at a start from an argument (random
    // in [-8, 8): negative ones clamp to 0), reshaped and added in one
    // loop; no step copies the slice out first.
    let listing = check_exe(
        "HloModule t\nENTRY e {\n  x = f32[12,64,40] parameter(0)\n  y = f32[64,40] parameter(1)\n  i = s32[] parameter(2)\n  z = s32[] constant(0)\n  d = f32[1,64,40] dynamic-slice(x, i, z, z), dynamic_slice_sizes={1,64,40}\n  r = f32[64,40] reshape(d)\n  a = f32[64,40] add(r, y)\n  ROOT t = f32[64,40] tanh(a)\n}\n",
        2e-6,
    );
    assert!(!listing.contains("dynamic-slice"), "{listing}");
    // Starts in two dimensions, one past the end (clamped to 4 - 2) and
    // one negative, read through a transpose; s64 starts of an f64 loop;
    // the slice also a result of its own.
    check(
        "HloModule t\nENTRY e {\n  x = f64[4,9,30] parameter(0)\n  v = f64[30] parameter(1)\n  i = s64[] constant(7)\n  j = s64[] parameter(2)\n  k = s64[] constant(0)\n  d = f64[2,5,30] dynamic-slice(x, i, j, k), dynamic_slice_sizes={2,5,30}\n  t = f64[30,5,2] transpose(d), dimensions={2,1,0}\n  b = f64[30,5,2] broadcast(v), dimensions={0}\n  m = f64[30,5,2] multiply(t, b)\n  ROOT o = (f64[30,5,2], f64[2,5,30]) tuple(m, d)\n}\n",
        0.0,
    );
    // A recurrence over the slices of its input, one a step.
    check(
        "HloModule t\nbody {\n  p = (s32[], f32[16,128], f32[10,16,128]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  h = f32[16,128] get-tuple-element(p), index=1\n  xs = f32[10,16,128] get-tuple-element(p), index=2\n  z = s32[] constant(0)\n  d = f32[1,16,128] dynamic-slice(xs, i, z, z), dynamic_slice_sizes={1,16,128}\n  r = f32[16,128] reshape(d)\n  a = f32[16,128] add(h, r)\n  t = f32[16,128] tanh(a)\n  one = s32[] constant(1)\n  n = s32[] add(i, one)\n  ROOT o = (s32[], f32[16,128], f32[10,16,128]) tuple(n, t, xs)\n}\ncond {\n  p = (s32[], f32[16,128], f32[10,16,128]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  k = s32[] constant(10)\n  ROOT c = pred[] compare(i, k), direction=LT\n}\nENTRY e {\n  h = f32[16,128] parameter(0)\n  xs = f32[10,16,128] parameter(1)\n  z = s32[] constant(0)\n  s = (s32[], f32[16,128], f32[10,16,128]) tuple(z, h, xs)\n  w = (s32[], f32[16,128], f32[10,16,128]) while(s), condition=cond, body=body\n  ROOT r = f32[16,128] get-tuple-element(w), index=1\n}\n",
        1e-5,
    );
}

#[test]
fn a_loop_updating_one_row_per_iteration() {
    // The scan pattern: the carried buffer is updated in place.
    check(
        "HloModule t\nbody {\n  p = (s32[], f32[64,1000]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  b = f32[64,1000] get-tuple-element(p), index=1\n  one = s32[] constant(1)\n  z = s32[] constant(0)\n  r = f32[1,1000] dynamic-slice(b, i, z), dynamic_slice_sizes={1,1000}\n  t = f32[1,1000] tanh(r)\n  u = f32[64,1000] dynamic-update-slice(b, t, i, z)\n  n = s32[] add(i, one)\n  ROOT o = (s32[], f32[64,1000]) tuple(n, u)\n}\ncond {\n  p = (s32[], f32[64,1000]) parameter(0)\n  i = s32[] get-tuple-element(p), index=0\n  k = s32[] constant(64)\n  ROOT c = pred[] compare(i, k), direction=LT\n}\nENTRY e {\n  x = f32[64,1000] parameter(0)\n  z = s32[] constant(0)\n  s = (s32[], f32[64,1000]) tuple(z, x)\n  w = (s32[], f32[64,1000]) while(s), condition=cond, body=body\n  ROOT r = f32[64,1000] get-tuple-element(w), index=1\n}\n",
        2e-6,
    );
}

#[test]
fn tiny_products_as_plain_loops() {
    check(
        "HloModule t\nENTRY e {\n  a = f32[3,5,4] parameter(0)\n  b = f32[3,6,5] parameter(1)\n  ROOT d = f32[3,4,6] dot(a, b), lhs_batch_dims={0}, rhs_batch_dims={0}, lhs_contracting_dims={1}, rhs_contracting_dims={2}\n}\n",
        1e-6,
    );
    check(
        "HloModule t\nENTRY e {\n  a = f64[7] parameter(0)\n  b = f64[7,2] parameter(1)\n  ROOT d = f64[2] dot(a, b), lhs_contracting_dims={0}, rhs_contracting_dims={0}\n}\n",
        1e-12,
    );
}

#[test]
fn iotas_and_broadcasts_of_any_type() {
    check(
        "HloModule t\nENTRY e {\n  i = s32[300,700] iota(), iota_dimension=1\n  u = u8[600,3] iota(), iota_dimension=0\n  h = bf16[5,400] iota(), iota_dimension=1\n  c = s32[] constant(7)\n  b = s32[300,700] broadcast(c), dimensions={}\n  ROOT t = (s32[300,700], u8[600,3], bf16[5,400], s32[300,700]) tuple(i, u, h, b)\n}\n",
        0.0,
    );
}

const SOFTMAX: &str = "HloModule s
max {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT m = f32[] maximum(a, b)
}
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[700,513] parameter(0)
  ninf = f32[] constant(-inf)
  m = f32[700] reduce(x, ninf), dimensions={1}, to_apply=max
  mb = f32[700,513] broadcast(m), dimensions={0}
  d = f32[700,513] subtract(x, mb)
  ex = f32[700,513] exponential(d)
  zero = f32[] constant(0)
  s = f32[700] reduce(ex, zero), dimensions={1}, to_apply=sum
  sb = f32[700,513] broadcast(s), dimensions={0}
  ROOT q = f32[700,513] divide(ex, sb)
}
";

#[test]
fn softmax_and_layer_norm_run_as_row_pipelines() {
    assert!(check_exe(SOFTMAX, 1e-5).contains("row pipeline"));
    // Layer norm over the last of three dimensions, in f64, with a
    // per-row stage (the mean) between the reductions.
    let layer_norm = "HloModule l
sum {
  a = f64[] parameter(0)
  b = f64[] parameter(1)
  ROOT s = f64[] add(a, b)
}
ENTRY e {
  x = f64[3,300,257] parameter(0)
  g = f64[257] parameter(1)
  zero = f64[] constant(0)
  s = f64[3,300] reduce(x, zero), dimensions={2}, to_apply=sum
  n = f64[] constant(257)
  nb = f64[3,300] broadcast(n), dimensions={}
  mean = f64[3,300] divide(s, nb)
  mb = f64[3,300,257] broadcast(mean), dimensions={0,1}
  c = f64[3,300,257] subtract(x, mb)
  c2 = f64[3,300,257] multiply(c, c)
  v = f64[3,300] reduce(c2, zero), dimensions={2}, to_apply=sum
  vm = f64[3,300] divide(v, nb)
  eps = f64[] constant(1e-5)
  eb = f64[3,300] broadcast(eps), dimensions={}
  ve = f64[3,300] add(vm, eb)
  r = f64[3,300] rsqrt(ve)
  rb = f64[3,300,257] broadcast(r), dimensions={0,1}
  y = f64[3,300,257] multiply(c, rb)
  gb = f64[3,300,257] broadcast(g), dimensions={2}
  ROOT o = f64[3,300,257] multiply(y, gb)
}
";
    assert!(check_exe(layer_norm, 1e-12).contains("row pipeline"));
    // A reduction over a middle dimension keeps a run of outputs per row.
    let middle = "HloModule m
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[640,33,40] parameter(0)
  zero = f32[] constant(0)
  s = f32[640,40] reduce(x, zero), dimensions={1}, to_apply=sum
  sb = f32[640,33,40] broadcast(s), dimensions={0,2}
  ROOT d = f32[640,33,40] subtract(x, sb)
}
";
    assert!(check_exe(middle, 1e-5).contains("row pipeline"));
}

#[test]
fn half_precision_arithmetic_rounds_each_result() {
    // Each bf16 or f16 operation is its f32 operation rounded; run with the
    // rounding in the operation's own pass, as splats and arrays, into
    // registers and into the result. Exact: the interpreter's bits.
    for ty in ["bf16", "f16"] {
        let text = format!(
            "HloModule h
ENTRY e {{
  x = {ty}[300,701] parameter(0)
  y = {ty}[300,701] parameter(1)
  v = {ty}[701] parameter(2)
  vb = {ty}[300,701] broadcast(v), dimensions={{1}}
  d = {ty}[300,701] subtract(x, vb)
  q = {ty}[300,701] divide(d, y)
  s = {ty}[300,701] add(q, x)
  c = {ty}[] constant(0.3)
  cb = {ty}[300,701] broadcast(c), dimensions={{}}
  ROOT m = {ty}[300,701] multiply(s, cb)
}}
"
        );
        check(&text, 0.0);
        let widened = text
            .replace(&format!("ROOT m = {ty}"), &format!("m = {ty}"))
            .replace("\n}\n", "\n  ROOT w = f32[300,701] convert(m)\n}\n");
        check(&widened, 0.0);
    }
}

/// A bf16 row maximum (computed in f32, exact) read by a loop that
/// subtracts it in bf16: its values pass between a pipeline's stages
/// rounded to bf16, so the result is the interpreter's bit for bit.
const CENTRED_BF16: &str = "HloModule c
max {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT m = bf16[] maximum(a, b)
}
ENTRY e {
  x = f32[600,700] parameter(0)
  h = bf16[600,700] convert(x)
  ninf = bf16[] constant(-inf)
  m = bf16[600] reduce(h, ninf), dimensions={1}, to_apply=max
  mb = bf16[600,700] broadcast(m), dimensions={0}
  d = bf16[600,700] subtract(h, mb)
  three = bf16[] constant(3)
  tb = bf16[600,700] broadcast(three), dimensions={}
  p = bf16[600,700] multiply(d, tb)
  ROOT y = f32[600,700] convert(p)
}
";

#[test]
fn half_precision_rows_run_as_one_pipeline() {
    let listing = check_exe(CENTRED_BF16, 0.0);
    assert!(listing.contains("row pipeline"), "{listing}");
    assert!(!listing.contains("fused reduction"), "{listing}");
    // softmax of bf16 as XLA:CPU computes it (after its normalization):
    // the bf16 row maximum, exp in f32 summed in f32, the quotient in
    // bf16. One pipeline, no intermediate array. (exp differs from the
    // interpreter's in the last f32 bits, which can move a bf16 rounding.)
    let softmax = "HloModule s
max {
  a = bf16[] parameter(0)
  b = bf16[] parameter(1)
  ROOT m = bf16[] maximum(a, b)
}
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[512,1024] parameter(0)
  h = bf16[512,1024] convert(x)
  ninf = bf16[] constant(-inf)
  m = bf16[512] reduce(h, ninf), dimensions={1}, to_apply=max
  hf = f32[512,1024] convert(h)
  mf = f32[512] convert(m)
  mb = f32[512,1024] broadcast(mf), dimensions={0}
  d = f32[512,1024] subtract(hf, mb)
  dh = bf16[512,1024] convert(d)
  df = f32[512,1024] convert(dh)
  ex = f32[512,1024] exponential(df)
  eh = bf16[512,1024] convert(ex)
  zero = f32[] constant(0)
  s = f32[512] reduce(ex, zero), dimensions={1}, to_apply=sum
  sh = bf16[512] convert(s)
  sf = f32[512] convert(sh)
  one = f32[] constant(1)
  ob = f32[512] broadcast(one), dimensions={}
  r = f32[512] divide(ob, sf)
  rb = f32[512,1024] broadcast(r), dimensions={0}
  ef = f32[512,1024] convert(eh)
  ROOT q = f32[512,1024] multiply(ef, rb)
}
";
    let listing = check_exe(softmax, 8e-3);
    let entry = listing.split("\ne:\n").nth(1).unwrap_or_default();
    assert!(entry.contains("row pipeline"), "{listing}");
    assert!(
        !entry.contains("fused reduction") && !entry.contains("fused loop"),
        "{listing}"
    );
    // The listing names the stages: exp is computed once, kept for a block
    // of rows, and read by the row sum and the quotient.
    assert!(
        entry.contains(
            "row pipeline of 6 stages, 32 rows a block: m (row reduction), \
             mf (one value a row), ex (loop, one block kept), \
             s (row reduction, folded as the rows are written), \
             r (one value a row), q (loop)"
        ),
        "{listing}"
    );
    // Layer norm of bf16 as XLA:CPU computes it: x rounded, and x - mean
    // rounded, are each kept for the stages after the one that computes
    // them (a loop stage first, before the row sum), bit for bit.
    let norm = "HloModule n
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[300,1000] parameter(0)
  h = bf16[300,1000] convert(x)
  r = f32[300,1000] convert(h)
  zero = f32[] constant(0)
  s = f32[300] reduce(r, zero), dimensions={1}, to_apply=sum
  k = f32[] constant(0.001)
  kb = f32[300] broadcast(k), dimensions={}
  m = f32[300] multiply(s, kb)
  mh = bf16[300] convert(m)
  mf = f32[300] convert(mh)
  mb = f32[300,1000] broadcast(mf), dimensions={0}
  c = f32[300,1000] subtract(r, mb)
  ch = bf16[300,1000] convert(c)
  cr = f32[300,1000] convert(ch)
  sq = f32[300,1000] multiply(cr, cr)
  v = f32[300] reduce(sq, zero), dimensions={1}, to_apply=sum
  vm = f32[300] multiply(v, kb)
  eps = f32[] constant(1e-5)
  eb = f32[300] broadcast(eps), dimensions={}
  ve = f32[300] add(vm, eb)
  rs = f32[300] rsqrt(ve)
  rh = bf16[300] convert(rs)
  rf = f32[300] convert(rh)
  rb = f32[300,1000] broadcast(rf), dimensions={0}
  ROOT y = f32[300,1000] multiply(cr, rb)
}
";
    // The interpreter sums rows in another order, which can move the bf16
    // rounding of a row's mean or scale by one step; with |x| in [1, 2),
    // far from the mean, that moves an output by at most 2^-7 twice.
    let module = oxla_text::parse_module(norm).unwrap();
    let exe = oxla_cpu::compile(&module).unwrap();
    let options = EvalOptions::default();
    let mut seed = 11u64;
    let x: Vec<f32> = (0..300 * 1000)
        .map(|_| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let u = (seed >> 40) as f32 / (1u64 << 24) as f32;
            if seed & (1 << 20) == 0 {
                1.0 + u
            } else {
                -1.0 - u
            }
        })
        .collect();
    let args = [Literal::from_vec(&[300, 1000], x).unwrap()];
    let got = exe.execute(&args, &options, &NoServices).unwrap();
    let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
    if let Some(m) = got.first_mismatch(&want, 1.6e-2, 0.0) {
        panic!("{m}");
    }
    let listing = exe.describe();
    let entry = listing.split("\ne:\n").nth(1).unwrap_or_default();
    assert!(
        entry.contains(
            "y = row pipeline of 7 stages, 32 rows a block: r (loop, one block kept), \
             s (row reduction, folded as the rows are written), mf (one value a row), \
             cr (loop, one block kept), v (row reduction, folded as the rows are written), \
             rf (one value a row), y (loop) (x, zero)"
        ),
        "{listing}"
    );
    assert!(
        !entry.contains("fused reduction") && !entry.contains("fused loop"),
        "{listing}"
    );
}

#[test]
fn chains_that_cross_rows_or_escape_stay_separate() {
    // Row sums added along columns: each row reads every sum.
    let across = "HloModule a
sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}
ENTRY e {
  x = f32[512,512] parameter(0)
  zero = f32[] constant(0)
  s = f32[512] reduce(x, zero), dimensions={1}, to_apply=sum
  sb = f32[512,512] broadcast(s), dimensions={1}
  ROOT y = f32[512,512] add(x, sb)
}
";
    // (Sums of 512 values in [-2, 2) cancel: compare within 1e-4.)
    assert!(!check_exe(across, 1e-4).contains("row pipeline"));
    // The row maxima are also a result: the chain starts after them.
    let escaping = SOFTMAX.replace(
        "ROOT q = f32[700,513] divide(ex, sb)",
        "q = f32[700,513] divide(ex, sb)\n  ROOT t = (f32[700], f32[700,513]) tuple(m, q)",
    );
    let listing = check_exe(&escaping, 1e-5);
    assert!(listing.contains("m = fused reduction"), "{listing}");
    assert!(listing.contains("row pipeline"), "{listing}");
}

#[test]
fn row_maxima_and_minima_keep_xlas_zeros_and_nans() {
    // Rows of 3000: all -0 but one +0 somewhere; negatives and a zero;
    // NaNs among numbers at several positions; plain values. Max and min must match the
    // interpreter bit for bit (the fast fold defers to the full rule).
    let (rows, cols) = (8usize, 3000usize);
    let mut x = vec![0f32; rows * cols];
    for (r, row) in x.chunks_mut(cols).enumerate() {
        for (c, v) in row.iter_mut().enumerate() {
            *v = match r {
                0 | 1 => -0.0,
                2 => -1.0 - (c % 5) as f32,
                3 => (c as f32 * 0.37).sin(),
                _ => (c as f32 * 0.11).cos() * 3.0,
            };
        }
        match r {
            0 => row[1234] = 0.0,
            2 => row[2999] = -0.0,
            3 => row[17] = f32::NAN,
            5 => row[0] = f32::from_bits(0x7fc0_1234),
            // A NaN in each quarter of a fold's 64-element step, and one
            // past the last whole step of the last tile.
            6 => row[2990] = f32::NAN,
            7 => row[40] = f32::from_bits(0xffc0_0007),
            _ => {}
        }
    }
    let x = Literal::from_vec(&[rows as i64, cols as i64], x).unwrap();
    for (name, op, init) in [("max", "maximum", "-inf"), ("min", "minimum", "inf")] {
        let text = format!(
            "HloModule m\nf {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT r = f32[] {op}(a, b)\n}}\nENTRY e {{\n  x = f32[{rows},{cols}] parameter(0)\n  i = f32[] constant({init})\n  ROOT r = f32[{rows}] reduce(x, i), dimensions={{1}}, to_apply=f\n}}\n"
        );
        let module = oxla_text::parse_module(&text).unwrap();
        let exe = oxla_cpu::compile(&module).unwrap();
        let options = EvalOptions::default();
        let args = [x.clone()];
        let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
        let got = exe.execute(&args, &options, &NoServices).unwrap();
        let (w, g) = (want.to_vec::<f32>().unwrap(), got.to_vec::<f32>().unwrap());
        for (k, (a, b)) in w.iter().zip(&g).enumerate() {
            assert!(
                a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()),
                "{name} of row {k}: got {b:?}, want {a:?}"
            );
        }
        assert!(g[3].is_nan() && g[5].is_nan() && g[6].is_nan() && g[7].is_nan());
        if name == "max" {
            assert!(g[0] == 0.0 && g[0].is_sign_positive());
            assert!(g[1] == 0.0 && g[1].is_sign_negative());
            assert!(g[2] == 0.0 && g[2].is_sign_negative());
        } else {
            assert!(g[0] == 0.0 && g[0].is_sign_negative());
            assert_eq!(g[2], -5.0);
        }
    }
}

#[test]
fn outputs_large_enough_to_stream_past_the_cache() {
    // Outputs of 8 MiB and more (row pipelines', gathers', fused loops')
    // are written with non-temporal stores: an odd row length puts the
    // stores at every alignment.
    check(
        "HloModule t\nENTRY e {\n  a = f32[1100,2001] parameter(0)\n  b = f32[2001] parameter(1)\n  bb = f32[1100,2001] broadcast(b), dimensions={1}\n  m = f32[1100,2001] multiply(a, bb)\n  ROOT t = f32[1100,2001] tanh(m)\n}\n",
        2e-6,
    );
    check(
        "HloModule t\nENTRY e {\n  x = f32[3000,1001] parameter(0)\n  i = s32[2200,1] parameter(1)\n  ROOT g = f32[2200,1001] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,1001}\n}\n",
        0.0,
    );
    let big_softmax = SOFTMAX
        .replace("700,513", "2100,1001")
        .replace("f32[700]", "f32[2100]");
    assert!(check_exe(&big_softmax, 1e-5).contains("row pipeline"));
    // A streamed pipeline in bf16 at an odd row length: exact, as the
    // interpreter computes it.
    let centred = CENTRED_BF16
        .replace("600,700", "2100,1003")
        .replace("bf16[600]", "bf16[2100]");
    assert!(check_exe(&centred, 0.0).contains("row pipeline"));
}

#[test]
fn streamed_loops_of_several_results_are_exact() {
    // Streamed loops write every result with non-temporal stores: three
    // results (two of them the loop's other results) of an odd length, so
    // tiles and lines fall at every alignment, and rows split among tasks.
    check_kernel(
        "HloModule t\nENTRY e {\n  a = f32[1100,2003] parameter(0)\n  b = f32[1100,2003] parameter(1)\n  c = f32[1100,2003] parameter(2)\n  m = f32[1100,2003] multiply(a, b)\n  s = f32[1100,2003] add(m, c)\n  d = f32[1100,2003] subtract(s, a)\n  q = f32[1100,2003] multiply(d, d)\n  n = f32[1100,2003] maximum(q, b)\n  ROOT t = (f32[1100,2003], f32[1100,2003], f32[1100,2003]) tuple(s, q, n)\n}\n",
        "fused loop",
    );
    // One long row, split among tasks at tile boundaries.
    check(
        "HloModule t\nENTRY e {\n  a = f32[2400007] parameter(0)\n  b = f32[2400007] parameter(1)\n  m = f32[2400007] multiply(a, b)\n  s = f32[2400007] subtract(m, a)\n  ROOT t = f32[2400007] multiply(s, b)\n}\n",
        0.0,
    );
    // An integer tiled loop of two results, both streamed.
    check_kernel(
        "HloModule t\nENTRY e {\n  x = s32[1200007] parameter(0)\n  seven = s32[] constant(7)\n  k = s32[1200007] broadcast(seven), dimensions={}\n  m = s32[1200007] multiply(x, k)\n  three = s32[] constant(3)\n  t3 = s32[1200007] broadcast(three), dimensions={}\n  a = s32[1200007] add(m, t3)\n  r = s32[1200007] shift-right-arithmetic(x, t3)\n  y = s32[1200007] xor(a, r)\n  z = s32[1200007] and(y, m)\n  ROOT t = (s32[1200007], s32[1200007]) tuple(z, y)\n}\n",
        "tiled loop",
    );
}

/// Runs `text` on both backends and checks `kernel` ran natively.
fn check_kernel(text: &str, kernel: &str) {
    let listing = check_exe(text, 0.0);
    assert!(listing.contains(kernel), "no native {kernel}:\n{listing}");
}

#[test]
fn gathers_in_every_layout_and_index_type() {
    // An embedding lookup, large enough to split across threads; indices
    // in [-8, 8) clamp to the first row when negative.
    check_kernel(
        "HloModule t\nENTRY e {\n  x = f32[1000,64] parameter(0)\n  i = s32[4096,1] parameter(1)\n  ROOT g = f32[4096,64] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,64}\n}\n",
        "gather",
    );
    // Window dimensions before and after the batch dimensions of the
    // result, a two-component index vector, starts clamped at both ends.
    check_kernel(
        "HloModule t\nENTRY e {\n  x = f64[10,12,5] parameter(0)\n  i = s32[3,4,2] parameter(1)\n  ROOT g = f64[12,3,4,3] gather(x, i), offset_dims={0,3}, collapsed_slice_dims={0}, start_index_map={0,2}, index_vector_dim=2, slice_sizes={1,12,3}\n}\n",
        "gather",
    );
    // Batching dimensions; the index vector dimension in the middle.
    check_kernel(
        "HloModule t\nENTRY e {\n  x = f32[4,6,5] parameter(0)\n  i = s32[1,4,3] parameter(1)\n  ROOT g = f32[4,3,5] gather(x, i), offset_dims={2}, collapsed_slice_dims={1}, start_index_map={1}, operand_batching_dims={0}, start_indices_batching_dims={1}, index_vector_dim=0, slice_sizes={1,1,5}\n}\n",
        "gather",
    );
    // Scalar indices (the vector dimension implicit), s64 and u8 indices,
    // integer and pred operands.
    check_kernel(
        "HloModule t\nENTRY e {\n  x = s32[20] parameter(0)\n  i = s64[7,3] parameter(1)\n  ROOT g = s32[7,3] gather(x, i), offset_dims={}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=2, slice_sizes={1}\n}\n",
        "gather",
    );
    check_kernel(
        "HloModule t\nENTRY e {\n  x = pred[9,4] parameter(0)\n  i = u8[6] parameter(1)\n  ROOT g = pred[6,2] gather(x, i), offset_dims={1}, collapsed_slice_dims={0}, start_index_map={0}, index_vector_dim=1, slice_sizes={1,2}\n}\n",
        "gather",
    );
    // Columns gathered side by side (JAX's row permutation in lu_solve):
    // one strided window per index, adjacent in the result; indices past
    // the end clamp.
    check_kernel(
        "HloModule t\nENTRY e {\n  x = f32[37,29,1] parameter(0)\n  i = s32[29,1] parameter(1)\n  ROOT g = f32[37,29,1] gather(x, i), offset_dims={0,2}, collapsed_slice_dims={1}, start_index_map={1}, index_vector_dim=1, slice_sizes={37,1,1}\n}\n",
        "gather",
    );
    // u64 indices past i64's range clamp to the last start.
    check_kernel(
        "HloModule t\nENTRY e {\n  x = f32[30,3] parameter(0)\n  i = u64[50,1] parameter(1)\n  ROOT g = f32[50,2,3] gather(x, i), offset_dims={1,2}, collapsed_slice_dims={}, start_index_map={0}, index_vector_dim=1, slice_sizes={2,3}\n}\n",
        "gather",
    );
}

#[test]
fn scatters_in_every_layout_and_combiner() {
    let add = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";
    // Sums with many repeated rows (float order matters: row-major order
    // of the updates), windows at negative starts skipped; enough to split
    // the operand between threads mid-row.
    check_kernel(
        &format!(
            "HloModule t\n{add}ENTRY e {{\n  x = f32[999,70] parameter(0)\n  i = s32[4096,1] parameter(1)\n  u = f32[4096,70] parameter(2)\n  ROOT s = f32[999,70] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=add\n}}\n"
        ),
        "scatter",
    );
    // Assignment with repeated indices, the window dimension first in the
    // updates, windows of 3 that overrun the end skipped.
    check_kernel(
        "HloModule t\nset {\n  a = s32[] parameter(0)\n  ROOT b = s32[] parameter(1)\n}\nENTRY e {\n  x = s32[8,9] parameter(0)\n  i = s32[6] parameter(1)\n  u = s32[3,6] parameter(2)\n  ROOT s = s32[8,9] scatter(x, i, u), update_window_dims={0}, inserted_window_dims={1}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=set\n}\n",
        "scatter",
    );
    // The same, large, with the scatter dimension last: split between
    // threads element by element.
    check_kernel(
        &format!(
            "HloModule t\n{add}ENTRY e {{\n  x = f32[8,20000] parameter(0)\n  i = s32[50000] parameter(1)\n  u = f32[3,50000] parameter(2)\n  ROOT s = f32[8,20000] scatter(x, i, u), update_window_dims={{0}}, inserted_window_dims={{1}}, scatter_dims_to_operand_dims={{1}}, index_vector_dim=1, to_apply=add\n}}\n"
        ),
        "scatter",
    );
    // Maximum and a multiply with its parameters swapped, f64, two-component
    // indices.
    for op in ["maximum(a, b)", "minimum(a, b)", "multiply(b, a)"] {
        check_kernel(
            &format!(
                "HloModule t\nf {{\n  a = f64[] parameter(0)\n  b = f64[] parameter(1)\n  ROOT r = f64[] {op}\n}}\nENTRY e {{\n  x = f64[9,10,4] parameter(0)\n  i = s64[5,2,2] parameter(1)\n  u = f64[5,2,4] parameter(2)\n  ROOT s = f64[9,10,4] scatter(x, i, u), update_window_dims={{2}}, inserted_window_dims={{0,1}}, scatter_dims_to_operand_dims={{1,0}}, index_vector_dim=2, to_apply=f\n}}\n"
            ),
            "scatter",
        );
    }
    // Half precision (each combination computed in f32 and rounded) and
    // narrow integers (wrapping), large enough to split across threads.
    for (ty, op) in [
        ("bf16", "add(a, b)"),
        ("f16", "add(a, b)"),
        ("bf16", "maximum(a, b)"),
        ("f16", "multiply(b, a)"),
        ("s8", "add(a, b)"),
        ("u16", "multiply(a, b)"),
        ("u8", "minimum(a, b)"),
    ] {
        check_kernel(
            &format!(
                "HloModule t\nf {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT r = {ty}[] {op}\n}}\nENTRY e {{\n  x = {ty}[999,70] parameter(0)\n  i = s32[4096,1] parameter(1)\n  u = {ty}[4096,70] parameter(2)\n  ROOT s = {ty}[999,70] scatter(x, i, u), update_window_dims={{1}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, to_apply=f\n}}\n"
            ),
            "scatter",
        );
    }
    // Batching dimensions, scalar updates, pred assignment.
    check_kernel(
        "HloModule t\nset {\n  a = pred[] parameter(0)\n  ROOT b = pred[] parameter(1)\n}\nENTRY e {\n  x = pred[4,8] parameter(0)\n  i = u8[4,3,1] parameter(1)\n  u = pred[4,3] parameter(2)\n  ROOT s = pred[4,8] scatter(x, i, u), update_window_dims={}, inserted_window_dims={1}, scatter_dims_to_operand_dims={1}, input_batching_dims={0}, scatter_indices_batching_dims={0}, index_vector_dim=2, to_apply=set\n}\n",
        "scatter",
    );
    // One scalar update at a scalar index; u64 indices past i64's range.
    check_kernel(
        &format!(
            "HloModule t\n{add}ENTRY e {{\n  x = f32[10] parameter(0)\n  i = s32[] parameter(1)\n  u = f32[] parameter(2)\n  ROOT s = f32[10] scatter(x, i, u), update_window_dims={{}}, inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=0, to_apply=add\n}}\n"
        ),
        "scatter",
    );
    check_kernel(
        "HloModule t\nadd {\n  a = u64[] parameter(0)\n  b = u64[] parameter(1)\n  ROOT s = u64[] add(a, b)\n}\nENTRY e {\n  x = u64[12,2] parameter(0)\n  i = u64[40,1] parameter(1)\n  u = u64[40,2] parameter(2)\n  ROOT s = u64[12,2] scatter(x, i, u), update_window_dims={1}, inserted_window_dims={0}, scatter_dims_to_operand_dims={0}, index_vector_dim=1, to_apply=add\n}\n",
        "scatter",
    );
}

#[test]
fn integer_arithmetic_comparisons_and_selects_fused_into_tiled_loops() {
    // Products that overflow s32 wrap; unsigned comparisons of values past
    // i64's range; predicates combined with and/or/xor.
    // The chain is one tiled loop.
    check_kernel(
        "HloModule t\nENTRY e {\n  a = s32[300,400] parameter(0)\n  b = s32[300,400] parameter(1)\n  big = s32[] constant(1000003)\n  k = s32[300,400] broadcast(big), dimensions={}\n  m = s32[300,400] multiply(a, k)\n  m2 = s32[300,400] multiply(m, m)\n  s = s32[300,400] subtract(m2, b)\n  x = s32[300,400] maximum(s, a)\n  n = s32[300,400] minimum(x, m)\n  o = s32[300,400] xor(n, b)\n  c = pred[300,400] compare(o, a), direction=GE\n  d = pred[300,400] compare(a, b), direction=NE\n  e = pred[300,400] xor(c, d)\n  r = s32[300,400] select(e, o, m2)\n  p = u64[300,400] parameter(2)\n  q = u64[300,400] parameter(3)\n  pq = u64[300,400] add(p, q)\n  lt = pred[300,400] compare(pq, q), direction=LT\n  u = u64[300,400] select(lt, p, pq)\n  v = s64[300,400] parameter(4)\n  w = s64[300,400] and(v, v)\n  g = pred[300,400] compare(w, v), direction=LE\n  h = pred[300,400] or(g, lt)\n  ROOT t = (s32[300,400], u64[300,400], pred[300,400]) tuple(r, u, h)\n}\n",
        "tiled loop",
    );
}

#[test]
fn exponentials_shared_by_a_row_sum_and_a_quotient_are_computed_once() {
    // Softmax over the last two of three dimensions, in f64: exp(x - max)
    // is a stage of its own whose rows stay in a block-sized buffer.
    let two_dims = SOFTMAX
        .replace("f32", "f64")
        .replace("700,513", "5,90,33")
        .replace("[700]", "[5]")
        .replace("dimensions={1}", "dimensions={1,2}");
    assert!(check_exe(&two_dims, 1e-12).contains("row pipeline"));
    // The exponentials also a result: no pipeline can keep them, so they
    // are stored, and both users read them.
    let escaping = SOFTMAX.replace(
        "ROOT q = f32[700,513] divide(ex, sb)",
        "q = f32[700,513] divide(ex, sb)\n  ROOT t = (f32[700,513], f32[700,513]) tuple(q, ex)",
    );
    check(&escaping, 1e-5);
    // Many rows, each in a different block: rows of 4100 elements.
    let long_rows = SOFTMAX
        .replace("700,513", "64,4100")
        .replace("[700]", "[64]");
    assert!(check_exe(&long_rows, 1e-5).contains("row pipeline"));
}

#[test]
fn integer_shifts_and_conversions_in_typed_and_tiled_loops() {
    // Shift amounts from -8 to 15: negative ones are huge unsigned amounts,
    // and u8 amounts of 8 and more shift everything out.
    let listing = check_exe(
        "HloModule t\nENTRY e {\n  a = s32[300,400] parameter(0)\n  b = s32[300,400] parameter(1)\n  big = s32[] constant(-1000003)\n  k = s32[300,400] broadcast(big), dimensions={}\n  m = s32[300,400] multiply(a, k)\n  l = s32[300,400] shift-left(m, b)\n  r = s32[300,400] shift-right-logical(m, b)\n  s = s32[300,400] shift-right-arithmetic(m, b)\n  x = s32[300,400] xor(l, r)\n  y = s32[300,400] or(x, s)\n  p = u8[300,400] parameter(2)\n  q = u8[300,400] parameter(3)\n  pl = u8[300,400] shift-left(p, q)\n  pr = u8[300,400] shift-right-arithmetic(pl, q)\n  u = u64[300,400] parameter(4)\n  n = u64[300,400] parameter(5)\n  ul = u64[300,400] shift-right-logical(u, n)\n  ua = u64[300,400] shift-right-arithmetic(u, n)\n  ROOT t = (s32[300,400], u8[300,400], u64[300,400], u64[300,400]) tuple(y, pr, ul, ua)\n}\n",
        0.0,
    );
    assert!(listing.contains("tiled loop"), "{listing}");
    // Conversions between integers (wrapping), to floats (rounding), from
    // floats (toward zero, saturating, NaN as 0), between f32 and f64.
    let listing = check_exe(
        "HloModule t\nENTRY e {\n  f = f32[300,400] parameter(0)\n  big = f32[] constant(3e9)\n  k = f32[300,400] broadcast(big), dimensions={}\n  g = f32[300,400] multiply(f, k)\n  gi = s32[300,400] convert(g)\n  gu = u8[300,400] convert(g)\n  gl = u64[300,400] convert(g)\n  w = u64[300,400] parameter(1)\n  wf = f32[300,400] convert(w)\n  wd = f64[300,400] convert(w)\n  ws = s32[300,400] convert(w)\n  wb = u8[300,400] convert(gi)\n  d = f64[300,400] convert(g)\n  df = f32[300,400] convert(wd)\n  ROOT t = (s32[300,400], u8[300,400], u64[300,400], f32[300,400], f64[300,400], s32[300,400], u8[300,400], f64[300,400], f32[300,400]) tuple(gi, gu, gl, wf, wd, ws, wb, d, df)\n}\n",
        0.0,
    );
    // (The conversions are the tuple's alone: one multi-output loop.)
    assert!(listing.contains("multi-output tiled loop"), "{listing}");
    // One alone is a typed element-wise kernel, split between threads.
    let listing = check_exe(
        "HloModule t\nENTRY e {\n  w = u64[300,400] parameter(0)\n  ROOT ws = s32[300,400] convert(w)\n}\n",
        0.0,
    );
    assert!(listing.contains("element-wise (typed)"), "{listing}");
    // NaN, infinities and values past every integer range, converted.
    let text = "HloModule t\nENTRY e {\n  c = f32[8] constant({nan, inf, -inf, 3e9, -3e9, 1e20, -0.5, 255.9})\n  x = f32[8] parameter(0)\n  s = f32[8] add(c, x)\n  a = s32[8] convert(s)\n  b = u8[8] convert(s)\n  d = u64[8] convert(s)\n  e = s64[8] convert(s)\n  ROOT t = (s32[8], u8[8], u64[8], s64[8]) tuple(a, b, d, e)\n}\n";
    let (got, want) = run_both(text, &[Literal::vec1(&[0f32; 8])]);
    assert!(got.bitwise_eq(&want), "got {got}, want {want}");
    let parts = got.tuple_elements().unwrap();
    assert_eq!(
        parts[0].to_vec::<i32>().unwrap(),
        vec![0, i32::MAX, i32::MIN, i32::MAX, i32::MIN, i32::MAX, 0, 255]
    );
    assert_eq!(
        parts[1].to_vec::<u8>().unwrap(),
        vec![0, 255, 0, 255, 0, 255, 0, 255]
    );
}

#[test]
fn tiled_loops_a_tuple_alone_reads_become_one_multi_output_loop() {
    // JAX's floor division and remainder by constants and a shifted xor,
    // both of x, as a function's two outputs, beside a pred output, x
    // itself and a float loop's value: 300001 elements (threads, and a
    // last partial tile).
    let text = "HloModule t\nENTRY e {\n  x = s32[300001] parameter(0)\n  f = f32[300001] parameter(1)\n  \
        five = s32[] constant(5)\n  b5 = s32[300001] broadcast(five), dimensions={}\n  \
        zero = s32[] constant(0)\n  b0 = s32[300001] broadcast(zero), dimensions={}\n  \
        one = s32[] constant(1)\n  b1 = s32[300001] broadcast(one), dimensions={}\n  \
        sg = s32[300001] sign(x)\n  ne = pred[300001] compare(sg, b1), direction=NE\n  \
        r = s32[300001] remainder(x, b5)\n  nz = pred[300001] compare(r, b0), direction=NE\n  \
        both = pred[300001] and(ne, nz)\n  q = s32[300001] divide(x, b5)\n  \
        q1 = s32[300001] subtract(q, b1)\n  fd = s32[300001] select(both, q1, q)\n  \
        three = s32[] constant(3)\n  b3 = s32[300001] broadcast(three), dimensions={}\n  \
        sh = s32[300001] shift-right-arithmetic(x, b3)\n  xo = s32[300001] xor(x, sh)\n  \
        lt = pred[300001] compare(xo, fd), direction=LT\n  \
        g = f32[300001] exponential(f)\n  \
        ROOT t = (s32[300001], s32[300001], pred[300001], s32[300001], f32[300001], s32[300001]) \
        tuple(fd, xo, lt, x, g, fd)\n}\n";
    let listing = check_exe(text, 1e-6);
    assert_eq!(
        listing.matches("multi-output tiled loop").count(),
        1,
        "{listing}"
    );
    // Outputs too large to stay in cache (38 MB in all) are streamed.
    let big = text.replace("300001", "2100001");
    assert!(check_exe(&big, 1e-6).contains("multi-output tiled loop"));
    // Exact values: floor division rounds toward minus infinity.
    let x = Literal::vec1(&[-7i32, -5, -1, 0, 4, 12, i32::MIN, i32::MAX]);
    let small = text.replace("300001", "8");
    let f = Literal::vec1(&[0f32; 8]);
    let (got, want) = run_both(&small, &[x, f]);
    assert!(got.bitwise_eq(&want), "got {got}, want {want}");
    let parts = got.tuple_elements().unwrap();
    let floor = [-2, -1, -1, 0, 0, 2, i32::MIN / 5 - 1, i32::MAX / 5];
    assert_eq!(parts[0].to_vec::<i32>().unwrap(), floor);
    assert_eq!(parts[5].to_vec::<i32>().unwrap(), floor);
    // A remainder takes the quotient by the same scalar, whatever it is
    // (XLA's results for 0 and -1).
    let by = "HloModule t\nENTRY e {\n  x = s32[3000] parameter(0)\n  d = s32[] parameter(1)\n  \
        b = s32[3000] broadcast(d), dimensions={}\n  q = s32[3000] divide(x, b)\n  \
        r = s32[3000] remainder(x, b)\n  s = s32[3000] add(q, r)\n  \
        ROOT t = (s32[3000], s32[3000]) tuple(s, r)\n}\n";
    let listing = check_exe(by, 0.0);
    assert!(listing.contains("multi-output tiled loop"), "{listing}");
    let xs: Vec<i32> = (0..3000)
        .map(|i| [i32::MIN, i32::MAX, -7, 7, 0][i % 5].wrapping_add(i as i32 % 3))
        .collect();
    for d in [0, -1, 1, 5, -3, i32::MIN] {
        let (got, want) = run_both(by, &[Literal::vec1(&xs), Literal::scalar(d)]);
        assert!(got.bitwise_eq(&want), "divisor {d}: got {got}, want {want}");
    }
    // Scalars (a loop state's counters) stay apart.
    let scalars = "HloModule t\nENTRY e {\n  i = s32[] parameter(0)\n  j = s32[] parameter(1)\n  \
        one = s32[] constant(1)\n  a = s32[] add(i, one)\n  b = s32[] multiply(j, i)\n  \
        ROOT t = (s32[], s32[]) tuple(a, b)\n}\n";
    let listing = check_exe(scalars, 0.0);
    assert!(!listing.contains("multi-output"), "{listing}");
    // A loop read by the tuple and by another loop stays apart.
    let shared = text
        .replace(
            "lt = pred[300001] compare(xo, fd)",
            "lt = pred[300001] compare(x, b0)",
        )
        .replace(
            "g = f32[300001] exponential(f)",
            "xs = s32[300001] add(xo, xo)\n  g = f32[300001] convert(xs)",
        );
    // (It is a root too, so all of them merge, g computed from xo inside.)
    let listing = check_exe(&shared, 0.0);
    assert_eq!(
        listing.matches("multi-output tiled loop").count(),
        1,
        "{listing}"
    );
    assert!(!listing.contains("xo = "), "{listing}");
    // A loop whose buffer a step outside the merge reads (a sort) stays
    // apart; the others still merge.
    let sorted = text
        .replace(
            "HloModule t\nENTRY e {",
            "HloModule t\nless {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  \
             ROOT l = pred[] compare(a, b), direction=LT\n}\nENTRY e {",
        )
        .replace(
            "g = f32[300001] exponential(f)",
            "g = f32[300001] exponential(f)\n  \
             st = s32[300001] sort(xo), dimensions={0}, to_apply=less",
        )
        .replace("tuple(fd, xo, lt, x, g, fd)", "tuple(fd, xo, lt, x, g, st)");
    // (g is a polynomial exp: within 1e-6, as above.)
    let listing = check_exe(&sorted, 1e-6);
    assert!(listing.contains("multi-output tiled loop"), "{listing}");
    assert!(listing.contains("xo = tiled loop"), "{listing}");
}

#[test]
fn fused_loops_a_tuple_alone_reads_become_one_multi_output_loop() {
    // One Adam step, as JAX writes it: new parameters and both moments,
    // beside a pred and a bf16 output of the new parameters, a parameter
    // passed through and a moment listed twice. 700 rows of 513 (threads,
    // rows that are not whole tiles).
    let adam = "HloModule t\nENTRY e {\n  p = f32[700,513] parameter(0)\n  g = f32[700,513] parameter(1)\n  \
        m = f32[700,513] parameter(2)\n  w = f32[700,513] parameter(3)\n  k = f32[] parameter(4)\n  \
        v = f32[700,513] abs(w)\n  \
        c9 = f32[] constant(0.9)\n  b9 = f32[700,513] broadcast(c9), dimensions={}\n  \
        c1 = f32[] constant(0.1)\n  b1 = f32[700,513] broadcast(c1), dimensions={}\n  \
        c999 = f32[] constant(0.999)\n  b999 = f32[700,513] broadcast(c999), dimensions={}\n  \
        c001 = f32[] constant(0.001)\n  b001 = f32[700,513] broadcast(c001), dimensions={}\n  \
        ce = f32[] constant(1e-8)\n  be = f32[700,513] broadcast(ce), dimensions={}\n  \
        bk = f32[700,513] broadcast(k), dimensions={}\n  \
        m9 = f32[700,513] multiply(m, b9)\n  g1 = f32[700,513] multiply(g, b1)\n  \
        mn = f32[700,513] add(m9, g1)\n  v9 = f32[700,513] multiply(v, b999)\n  \
        gb = f32[700,513] multiply(g, b001)\n  g2 = f32[700,513] multiply(gb, g)\n  \
        vn = f32[700,513] add(v9, g2)\n  sq = f32[700,513] sqrt(vn)\n  \
        den = f32[700,513] add(sq, be)\n  num = f32[700,513] multiply(mn, bk)\n  \
        d = f32[700,513] divide(num, den)\n  pn = f32[700,513] subtract(p, d)\n  \
        up = pred[700,513] compare(pn, p), direction=LT\n  h = bf16[700,513] convert(pn)\n  \
        ROOT t = (f32[700,513], f32[700,513], f32[700,513], pred[700,513], bf16[700,513], f32[700,513], f32[700,513]) \
        tuple(pn, mn, vn, up, h, p, mn)\n}\n";
    let listing = check_exe(adam, 0.0);
    assert!(listing.contains("t = multi-output fused loop"), "{listing}");
    assert_eq!(listing.matches("fused loop").count(), 1, "{listing}");
    // Outputs too large to stay in cache (13.5 MB in all) are streamed.
    let big = adam.replace("700,513", "1024,1100");
    assert!(check_exe(&big, 0.0).contains("multi-output fused loop"));
    // Exact values from known inputs.
    let small = adam.replace("700,513", "2,3");
    let mat = |v: [f32; 6]| Literal::from_vec(&[2, 3], v.to_vec()).unwrap();
    let args = [
        mat([1.0, -2.0, 0.5, 3.0, 0.0, -1.0]),
        mat([0.5, 1.0, -2.0, 0.0, 4.0, 1.0]),
        mat([0.0, 1.0, 2.0, -1.0, 0.0, 0.5]),
        mat([0.25, 0.0, 1.0, 4.0, 0.0, 1.0]),
        Literal::scalar(0.001f32),
    ];
    let (got, want) = run_both(&small, &args);
    assert!(got.bitwise_eq(&want), "got {got}, want {want}");
    let parts = got.tuple_elements().unwrap();
    let mn: Vec<f32> = [0.0f32, 1.0, 2.0, -1.0, 0.0, 0.5]
        .iter()
        .zip([0.5f32, 1.0, -2.0, 0.0, 4.0, 1.0])
        .map(|(&m, g)| m * 0.9 + g * 0.1)
        .collect();
    assert_eq!(parts[1].to_vec::<f32>().unwrap(), mn);
    assert_eq!(parts[6].to_vec::<f32>().unwrap(), mn);
    assert_eq!(
        parts[5].to_vec::<f32>().unwrap(),
        [1.0, -2.0, 0.5, 3.0, 0.0, -1.0]
    );

    // Results that are the operands of a closing function and of a pair
    // (tanh(a * b + c), with a * b + c and a * b themselves results) keep
    // their values; one long row of 300001 (parts of a row, a last partial
    // tile).
    for order in ["th, s, mu", "s, th, mu", "mu, s, th"] {
        let text = format!(
            "HloModule t\nENTRY e {{\n  a = f32[300001] parameter(0)\n  b = f32[300001] parameter(1)\n  \
             c = f32[300001] parameter(2)\n  mu = f32[300001] multiply(a, b)\n  \
             s = f32[300001] add(mu, c)\n  th = f32[300001] tanh(s)\n  \
             ROOT t = (f32[300001], f32[300001], f32[300001]) tuple({order})\n}}\n"
        );
        let listing = check_exe(&text, 2e-6);
        assert!(
            listing.contains("multi-output fused loop"),
            "{order}: {listing}"
        );
        let small = text.replace("300001", "3");
        let v = |x: [f32; 3]| Literal::vec1(&x);
        let args = [
            v([1.0, 2.0, -3.0]),
            v([0.5, -0.25, 2.0]),
            v([0.25, 1.0, 5.0]),
        ];
        let (got, _) = run_both(&small, &args);
        let parts = got.tuple_elements().unwrap();
        let at = |name: &str| order.split(", ").position(|n| n == name).unwrap();
        assert_eq!(parts[at("mu")].to_vec::<f32>().unwrap(), [0.5, -0.5, -6.0]);
        assert_eq!(parts[at("s")].to_vec::<f32>().unwrap(), [0.75, 0.5, -1.0]);
        let th = parts[at("th")].to_vec::<f32>().unwrap();
        for (t, x) in th.iter().zip([0.75f32, 0.5, -1.0]) {
            assert!((t - x.tanh()).abs() <= 2e-7, "tanh({x}) = {t}");
        }
    }

    // A loop whose value another step also reads (here a reduction) stays
    // apart; the others still merge.
    let read = adam
        .replace(
            "h = bf16[700,513] convert(pn)",
            "h = bf16[700,513] convert(pn)\n  z = f32[] constant(0)\n  \
             r = f32[700] reduce(vn, z), dimensions={1}, to_apply=add",
        )
        .replace("HloModule t\n", "HloModule t\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT s = f32[] add(x, y)\n}\n")
        .replace("bf16[700,513], f32[700,513], f32[700,513])", "bf16[700,513], f32[700,513], f32[700])")
        .replace("tuple(pn, mn, vn, up, h, p, mn)", "tuple(pn, mn, vn, up, h, p, r)");
    let listing = check_exe(&read, 1e-5);
    assert!(listing.contains("multi-output fused loop"), "{listing}");
    assert!(listing.contains("vn = fused loop"), "{listing}");
    // Small arrays stay apart.
    let tiny = adam.replace("700,513", "3,5");
    let listing = check_exe(&tiny, 0.0);
    assert!(!listing.contains("multi-output"), "{listing}");
}

#[test]
fn tiled_loops_with_splats_shared_values_and_partial_tiles() {
    // A threefry-like round on u32 (rotations by a broadcast amount, xors
    // and adds), 300001 elements (threads, and a last partial tile), its
    // intermediate values read by two results, one with a pred select.
    let text = "HloModule t\nENTRY e {\n  a = u32[300001] parameter(0)\n  b = u32[300001] parameter(1)\n  r = u32[] parameter(2)\n  rb = u32[300001] broadcast(r), dimensions={}\n  w = u32[] constant(32)\n  s = u32[] subtract(w, r)\n  sb = u32[300001] broadcast(s), dimensions={}\n  x = u32[300001] add(a, b)\n  l = u32[300001] shift-left(b, rb)\n  h = u32[300001] shift-right-logical(b, sb)\n  o = u32[300001] or(l, h)\n  y = u32[300001] xor(x, o)\n  z = u32[300001] add(x, y)\n  c = pred[300001] compare(y, z), direction=LT\n  m = u32[300001] select(c, y, z)\n  f = f32[300001] convert(m)\n  ROOT t = (u32[300001], u32[300001], f32[300001]) tuple(z, m, f)\n}\n";
    let listing = check_exe(text, 0.0);
    assert!(listing.contains("tiled loop"), "{listing}");
}

/// Threefry-2x32's rounds and key injections on `x0`, `x1` of `n` words of
/// `ty`, written as JAX writes them (rotations as two shifts and an or),
/// for `rounds` rounds; `root` combines the final words `a` and `b`.
fn threefry_text(ty: &str, n: usize, rounds: usize, root: &str) -> String {
    let mut t = format!(
        "HloModule t\nENTRY e {{\n  x0 = {ty}[{n}] parameter(0)\n  x1 = {ty}[{n}] parameter(1)\n  \
         k0 = {ty}[] parameter(2)\n  k1 = {ty}[] parameter(3)\n  w = {ty}[] constant(32)\n"
    );
    let (mut a, mut b) = ("x0".to_string(), "x1".to_string());
    for i in 0..rounds {
        let r = [13, 15, 26, 6, 17, 29, 16, 24][i % 8];
        t += &format!(
            "  r{i} = {ty}[] constant({r})\n  rb{i} = {ty}[{n}] broadcast(r{i}), dimensions={{}}\n  \
             s{i} = {ty}[] subtract(w, r{i})\n  sb{i} = {ty}[{n}] broadcast(s{i}), dimensions={{}}\n  \
             a{i} = {ty}[{n}] add({a}, {b})\n  l{i} = {ty}[{n}] shift-left({b}, rb{i})\n  \
             h{i} = {ty}[{n}] shift-right-logical({b}, sb{i})\n  o{i} = {ty}[{n}] or(l{i}, h{i})\n  \
             b{i} = {ty}[{n}] xor(a{i}, o{i})\n"
        );
        (a, b) = (format!("a{i}"), format!("b{i}"));
        if i % 4 == 3 {
            // The key injection: a scalar added to each word (to `b` with
            // the scalar first).
            t += &format!(
                "  kb{i} = {ty}[{n}] broadcast(k0), dimensions={{}}\n  ka{i} = {ty}[{n}] add({a}, kb{i})\n  \
                 jb{i} = {ty}[{n}] broadcast(k1), dimensions={{}}\n  kj{i} = {ty}[{n}] add(jb{i}, {b})\n"
            );
            (a, b) = (format!("ka{i}"), format!("kj{i}"));
        }
    }
    t + &format!(
        "  ROOT t = {}\n}}\n",
        root.replace("{a}", &a)
            .replace("{b}", &b)
            .replace("{ty}", ty)
            .replace("{n}", &n.to_string())
    )
}

#[test]
fn threefry_rounds_run_in_registers_as_the_operations_compute_them() {
    // Rounds and key injections chained into one mix per loop, on u32 and
    // s32 (the same bits), 300001 words (threads, a partial tile, lanes
    // past the last group of 64): exact against the interpreter.
    for ty in ["u32", "s32"] {
        let text = threefry_text(ty, 300001, 10, "{ty}[{n}] xor({a}, {b})");
        let listing = check_exe(&text, 0.0);
        assert!(
            listing.contains("  t = tiled loop (threefry mixes)"),
            "{listing}"
        );
        // Mixes keep the long tiles whatever their buffers take.
        assert!(listing.contains("2048 elements a tile"), "{listing}");
    }
    // Each final word a result of its own: each loop mixes as far as its
    // word needs (the last round's rotation only `b` reads).
    let text = threefry_text("u32", 1000, 8, "(u32[{n}], u32[{n}]) tuple({a}, {b})");
    let listing = check_exe(&text, 0.0);
    assert!(listing.contains("threefry mixes"), "{listing}");
    // A round's value read by another result as well: the chain stops
    // there, and that value is still computed once for both.
    let text = threefry_text("u32", 5000, 8, "u32[{n}] xor({a}, {b})").replace(
        "  ROOT t = u32[5000] xor(ka7, kj7)",
        "  m = u32[5000] xor(ka7, kj7)\n  ROOT t = u32[5000] add(m, a2)",
    );
    assert!(text.contains("add(m, a2)"), "{text}");
    let listing = check_exe(&text, 0.0);
    assert!(listing.contains("threefry mixes"), "{listing}");
}

#[test]
fn arithmetic_pairs_in_one_pass_compute_each_rounding() {
    // Layer norm's tail, (x - m) * r * s + b, runs as two pairs of
    // operations per pass; a pair whose first operand is a splat in some
    // tiles (the broadcast scalar `k`) runs as two passes there; `u` is
    // read twice, so it pairs with nothing. Exact against the interpreter.
    let text = "HloModule t\nENTRY e {\n  x = f32[300,1000] parameter(0)\n  m = f32[300] parameter(1)\n  r = f32[300] parameter(2)\n  s = f32[1000] parameter(3)\n  b = f32[1000] parameter(4)\n  mb = f32[300,1000] broadcast(m), dimensions={0}\n  rb = f32[300,1000] broadcast(r), dimensions={0}\n  sb = f32[300,1000] broadcast(s), dimensions={1}\n  bb = f32[300,1000] broadcast(b), dimensions={1}\n  c = f32[300,1000] subtract(x, mb)\n  n = f32[300,1000] multiply(c, rb)\n  p = f32[300,1000] multiply(n, sb)\n  o = f32[300,1000] add(p, bb)\n  k = f32[] parameter(5)\n  kb = f32[300,1000] broadcast(k), dimensions={}\n  t = f32[300,1000] subtract(kb, o)\n  u = f32[300,1000] multiply(t, x)\n  v = f32[300,1000] add(u, bb)\n  ROOT w = f32[300,1000] multiply(v, u)\n}\n";
    let listing = check_exe(text, 0.0);
    assert!(listing.contains("  w = fused loop"), "{listing}");
    // A variance's squares, (x - mean)^2, summed: the square is a pair too.
    let variance = "HloModule t\nadd {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\nENTRY e {\n  x = f32[300,1000] parameter(0)\n  m = f32[300] parameter(1)\n  mb = f32[300,1000] broadcast(m), dimensions={0}\n  c = f32[300,1000] subtract(x, mb)\n  q = f32[300,1000] multiply(c, c)\n  z = f32[] constant(0)\n  ROOT v = f32[300] reduce(q, z), dimensions={1}, to_apply=add\n}\n";
    check(variance, 1e-5);
    let squares = variance.replace(
        "  z = f32[] constant(0)\n  ROOT v = f32[300] reduce(q, z), dimensions={1}, to_apply=add\n",
        "  k = f32[300,1000] add(q, x)\n  ROOT w = f32[300,1000] multiply(k, q)\n",
    );
    assert!(squares.contains("ROOT w"));
    check(&squares, 0.0);
    check(&squares.replace("subtract(x, mb)", "multiply(x, mb)"), 0.0);
    // f64, long rows split into tiles, with a partial last tile.
    check(
        &text
            .replace("f32", "f64")
            .replace("300,1000", "40,5000")
            .replace("[300]", "[40]")
            .replace("[1000]", "[5000]"),
        0.0,
    );
}

#[test]
fn float_arithmetic_finishing_integer_bits_joins_the_tiled_loop() {
    // JAX's uniform floats: bits shifted into a mantissa, bitcast, then
    // shifted, scaled and clamped by scalars. The u32 inputs include NaN
    // and infinity patterns (values past 2^31), which the maximum keeps
    // as the interpreter does.
    let text = "HloModule t\nENTRY e {\n  a = u32[300001] parameter(0)\n  b = u32[300001] parameter(1)\n  x = u32[300001] xor(a, b)\n  nine = u32[] constant(9)\n  n = u32[300001] broadcast(nine), dimensions={}\n  s = u32[300001] shift-right-logical(x, n)\n  one = u32[] constant(1065353216)\n  o = u32[300001] broadcast(one), dimensions={}\n  m = u32[300001] or(s, o)\n  f = f32[300001] bitcast-convert(m)\n  c1 = f32[] constant(1)\n  b1 = f32[300001] broadcast(c1), dimensions={}\n  d = f32[300001] subtract(f, b1)\n  lo = f32[] parameter(2)\n  hi = f32[] parameter(3)\n  w = f32[] subtract(hi, lo)\n  wb = f32[300001] broadcast(w), dimensions={}\n  p = f32[300001] multiply(d, wb)\n  lb = f32[300001] broadcast(lo), dimensions={}\n  q = f32[300001] add(p, lb)\n  raw = f32[300001] bitcast-convert(a)\n  r = f32[300001] maximum(q, raw)\n  ROOT t = f32[300001] divide(r, lb)\n}\n";
    let listing = check_exe(text, 0.0);
    // One loop computes the result; only the scalar `hi - lo` is apart.
    assert!(listing.contains("  t = tiled loop"), "{listing}");
    for value in ["f", "d", "q", "r"] {
        assert!(!listing.contains(&format!("  {value} = ")), "{listing}");
    }
    // Float arithmetic on a row broadcast stays a fused loop, which reads
    // the broadcast in place: the tiled loop would need it in memory.
    let text = "HloModule t\nENTRY e {\n  a = u32[300,1000] parameter(0)\n  f = f32[300,1000] bitcast-convert(a)\n  v = f32[1000] parameter(1)\n  vb = f32[300,1000] broadcast(v), dimensions={1}\n  ROOT s = f32[300,1000] add(f, vb)\n}\n";
    let listing = check_exe(text, 0.0);
    assert!(listing.contains("fused loop"), "{listing}");
}

#[test]
fn quotients_divide_as_written_and_as_xla_rewrites_them() {
    // As written, every quotient is a true division on both backends, a
    // broadcast divisor included (rows of one divisor, and one divisor per
    // element along the minor dimension), with divisors whose reciprocal is
    // not a normal number among them.
    let divisors = [
        1e-40f32,
        3e38,
        0.0,
        f32::INFINITY,
        f32::NAN,
        -2.5e-39,
        0.25,
        3.0,
        41.0,
    ];
    let n = divisors.len();
    let x: Vec<f32> = (0..n * 1000)
        .map(|i| (i % 97) as f32 * 0.37 - 11.0)
        .collect();
    for (rows, text) in [
        (
            true,
            format!(
                "HloModule d\nENTRY e {{\n  x = f32[{n},1000] parameter(0)\n  y = f32[{n}] parameter(1)\n  b = f32[{n},1000] broadcast(y), dimensions={{0}}\n  ROOT q = f32[{n},1000] divide(x, b)\n}}\n"
            ),
        ),
        (
            false,
            format!(
                "HloModule d\nENTRY e {{\n  x = f32[1000,{n}] parameter(0)\n  y = f32[{n}] parameter(1)\n  b = f32[1000,{n}] broadcast(y), dimensions={{1}}\n  ROOT q = f32[1000,{n}] divide(x, b)\n}}\n"
            ),
        ),
    ] {
        let shape = if rows {
            [n as i64, 1000]
        } else {
            [1000, n as i64]
        };
        let args = [
            Literal::from_vec(&shape, x.clone()).unwrap(),
            Literal::vec1(&divisors),
        ];
        let divisor = |i: usize| {
            if rows {
                divisors[i / 1000]
            } else {
                divisors[i % n]
            }
        };
        let (got, want) = run_both(&text, &args);
        assert!(got.bitwise_eq(&want), "as written");
        for (i, q) in got.to_vec::<f32>().unwrap().into_iter().enumerate() {
            let d = x[i] / divisor(i);
            assert!(
                q.to_bits() == d.to_bits() || (q.is_nan() && d.is_nan()),
                "element {i}"
            );
        }
        // XLA rewrites a / broadcast(b) as a * broadcast(1 / b): after
        // `match_xla` both backends compute that, bit for bit.
        let module = oxla_passes::match_xla(&oxla_text::parse_module(&text).unwrap());
        let options = EvalOptions::default();
        let got = oxla_cpu::compile(&module)
            .unwrap()
            .execute(&args, &options, &NoServices)
            .unwrap();
        let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
        assert!(got.bitwise_eq(&want), "as XLA rewrites it");
        for (i, q) in got.to_vec::<f32>().unwrap().into_iter().enumerate() {
            let p = x[i] * (1.0 / divisor(i));
            assert!(
                q.to_bits() == p.to_bits() || (q.is_nan() && p.is_nan()),
                "element {i}"
            );
        }
    }
}

#[test]
fn rotations_scalar_operands_and_bitcasts_in_tiled_loops() {
    // or(shl(x, k), shr(x, w - k)) by constants is a rotation, k from 0 to
    // the width; amounts that do not add up to the width, and a shift read
    // by something else too, stay shifts. Scalars on either side of an
    // operation, and bitcasts between u32, s32 and f32 (NaN bits kept).
    let mut body = String::from(
        "  x = u32[70001] parameter(0)\n  y = s64[70001] parameter(1)\n  acc0 = u32[70001] add(x, x)\n",
    );
    let mut last = "acc0".to_string();
    for (i, (k, j)) in [(0, 32), (1, 31), (13, 19), (31, 1), (32, 0), (5, 20)]
        .iter()
        .enumerate()
    {
        body.push_str(&format!(
            "  k{i} = u32[] constant({k})\n  j{i} = u32[] constant({j})\n  kb{i} = u32[70001] broadcast(k{i}), dimensions={{}}\n  jb{i} = u32[70001] broadcast(j{i}), dimensions={{}}\n  l{i} = u32[70001] shift-left({last}, kb{i})\n  r{i} = u32[70001] shift-right-logical({last}, jb{i})\n  o{i} = u32[70001] or(l{i}, r{i})\n  acc{n} = u32[70001] xor(o{i}, x)\n",
            n = i + 1
        ));
        last = format!("acc{}", i + 1);
    }
    body.push_str(&format!(
        "  ten = u32[] constant(10)\n  tb = u32[70001] broadcast(ten), dimensions={{}}\n  d = u32[70001] subtract(tb, {last})\n  e = u32[70001] shift-right-logical(d, tb)\n  both = u32[70001] add(l0, e)\n  f = f32[70001] bitcast-convert(both)\n  g = s32[70001] bitcast-convert(f)\n  h = u32[70001] bitcast-convert(g)\n  sixty = s64[] constant(60)\n  sb = s64[70001] broadcast(sixty), dimensions={{}}\n  ys = s64[70001] shift-left(y, sb)\n  four = s64[] constant(4)\n  fb = s64[70001] broadcast(four), dimensions={{}}\n  yr = s64[70001] shift-right-logical(y, fb)\n  yo = s64[70001] or(ys, yr)\n  yf = f64[70001] bitcast-convert(yo)\n  ROOT t = (u32[70001], f32[70001], u32[70001], f64[70001]) tuple(both, f, h, yf)\n"
    ));
    let text = format!("HloModule t\nENTRY e {{\n{body}}}\n");
    let listing = check_exe(&text, 0.0);
    assert!(listing.contains("tiled loop"), "{listing}");
    // f32 NaNs and infinities from u32 bits, bit for bit.
    let (got, want) = run_both(
        "HloModule t\nENTRY e {\n  x = u32[6] parameter(0)\n  f = f32[6] bitcast-convert(x)\n  ROOT g = s32[6] bitcast-convert(f)\n}\n",
        &[Literal::vec1(&[
            0x7fc0_0001u32,
            0xffc0_0000,
            0x7f80_0000,
            0xff80_0001,
            0,
            0x8000_0000,
        ])],
    );
    assert!(got.bitwise_eq(&want), "got {got}, want {want}");
    assert_eq!(
        got.to_vec::<i32>().unwrap(),
        vec![
            0x7fc0_0001,
            0xffc0_0000u32 as i32,
            0x7f80_0000,
            0xff80_0001u32 as i32,
            0,
            i32::MIN
        ]
    );
}

/// JAX's argmax reducer (`jnp.argmax`): the larger value, a NaN over any
/// number, and on a tie the smaller index. `GT` to `LT` makes argmin; without
/// the NaN test it is JAX's reducer for integers.
const ARGMAX: &str = "am {\n  a = V[] parameter(0)\n  c = V[] parameter(2)\n  gt = pred[] compare(a, c), direction=GT\n  ne = pred[] compare(a, a), direction=NE\n  o = pred[] or(gt, ne)\n  sv = V[] select(o, a, c)\n  eq = pred[] compare(a, c), direction=EQ\n  i = I[] parameter(1)\n  j = I[] parameter(3)\n  lt = pred[] compare(i, j), direction=LT\n  an = pred[] and(eq, lt)\n  o2 = pred[] or(o, an)\n  si = I[] select(o2, i, j)\n  ROOT t = (V[], I[]) tuple(sv, si)\n}\n";

/// A module reducing `x` (made with many ties, NaNs and signed zeros from
/// the parameter) and an iota along `iota_dim` over `dims`.
fn argmax_module(
    reducer: &str,
    v: &str,
    i: &str,
    shape: &str,
    iota_dim: usize,
    dims: &str,
    out: &str,
) -> String {
    let reducer = reducer
        .replace("V[]", &format!("{v}[]"))
        .replace("I[]", &format!("{i}[]"));
    let values = if v.starts_with('f') {
        format!(
            "  p = {v}[{shape}] parameter(0)\n  two = {v}[] constant(2)\n  tb = {v}[{shape}] broadcast(two), dimensions={{}}\n  m = {v}[{shape}] multiply(p, tb)\n  r = {v}[{shape}] round-nearest-even(m)\n  big = {v}[] constant(3.5)\n  bb = {v}[{shape}] broadcast(big), dimensions={{}}\n  hot = pred[{shape}] compare(m, bb), direction=GT\n  qn = {v}[] constant(nan)\n  nb = {v}[{shape}] broadcast(qn), dimensions={{}}\n  z = {v}[] constant(-0)\n  zb = {v}[{shape}] broadcast(z), dimensions={{}}\n  zero = pred[{shape}] compare(r, zb), direction=EQ\n  nz = {v}[{shape}] select(zero, zb, r)\n  x = {v}[{shape}] select(hot, nb, nz)\n"
        )
    } else {
        format!("  x = {v}[{shape}] parameter(0)\n")
    };
    let init = if v.starts_with('f') { "-inf" } else { "0" };
    format!(
        "HloModule a\n{reducer}ENTRY e {{\n{values}  ix = {i}[{shape}] iota(), iota_dimension={iota_dim}\n  v0 = {v}[] constant({init})\n  i0 = {i}[] constant(0)\n  ROOT red = ({v}[{out}], {i}[{out}]) reduce(x, ix, v0, i0), dimensions={{{dims}}}, to_apply=am\n}}\n"
    )
}

#[test]
fn argmax_and_argmin_reductions_select_exactly_as_the_interpreter() {
    let argmin = ARGMAX.replace("direction=GT", "direction=LT");
    let ints = ARGMAX
        .replace(
            "  ne = pred[] compare(a, a), direction=NE\n  o = pred[] or(gt, ne)\n",
            "",
        )
        .replace("select(o, a, c)", "select(gt, a, c)")
        .replace("or(o, an)", "or(gt, an)");
    let cases = [
        (ARGMAX, "f32", "s32", "300,1001", 1, "1", "300"),
        (ARGMAX, "f32", "s32", "1001,300", 0, "0", "300"),
        (argmin.as_str(), "f64", "s64", "40,30,20", 1, "1,2", "40"),
        (ARGMAX, "f32", "u32", "6,50,7", 1, "0,1", "7"),
        (ints.as_str(), "s32", "s32", "200,600", 1, "1", "200"),
        (ints.as_str(), "u8", "s64", "3,40000", 1, "1", "3"),
    ];
    for (reducer, v, i, shape, iota_dim, dims, out) in cases {
        let text = argmax_module(reducer, v, i, shape, iota_dim, dims, out);
        let module = oxla_text::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let listing = oxla_cpu::compile(&module).unwrap().describe();
        assert!(listing.contains("selection reduce"), "{listing}");
        for seed in [3, 4] {
            let (got, want) = run_both(&text, &arguments(&module, seed));
            assert!(got.bitwise_eq(&want), "{v} {shape} over {dims}:\n{text}");
        }
    }
    // Without NaNs, so whole rows pass through the skip over elements that
    // change nothing, with ties and signed zeros; init indices before, at
    // and past the first element's.
    for (reducer, v, i, first) in [
        (ARGMAX, "f32", "s32", "0"),
        (argmin.as_str(), "f64", "s64", "7"),
        (ARGMAX, "f32", "s32", "-3"),
    ] {
        let text = argmax_module(reducer, v, i, "300,1001", 1, "1", "300")
            .replace("constant(3.5)", "constant(100)")
            .replace(
                &format!("i0 = {i}[] constant(0)"),
                &format!("i0 = {i}[] constant({first})"),
            );
        let module = oxla_text::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let listing = oxla_cpu::compile(&module).unwrap().describe();
        assert!(listing.contains("selection reduce"), "{listing}");
        for seed in [5, 6] {
            let (got, want) = run_both(&text, &arguments(&module, seed));
            assert!(
                got.bitwise_eq(&want),
                "{v} without NaNs, init index {first}"
            );
        }
    }
    // The first NaN wins; a tie keeps the first index but takes the later
    // value's bits (JAX's reducer selects the value and index apart).
    let text = "HloModule a\n".to_string()
        + &ARGMAX.replace("V[]", "f32[]").replace("I[]", "s32[]")
        + "ENTRY e {\n  x = f32[8] parameter(0)\n  ix = s32[8] iota(), iota_dimension=0\n  v0 = f32[] constant(-inf)\n  i0 = s32[] constant(0)\n  ROOT red = (f32[], s32[]) reduce(x, ix, v0, i0), dimensions={0}, to_apply=am\n}\n";
    let x = Literal::vec1(&[1f32, 0.0, -0.0, f32::NAN, 5.0, -f32::NAN, 2.0, 0.0]);
    let (got, want) = run_both(&text, std::slice::from_ref(&x));
    assert!(got.bitwise_eq(&want), "got {got}, want {want}");
    let parts = got.tuple_elements().unwrap();
    assert_eq!(
        parts[0].to_scalar::<f32>().unwrap().to_bits(),
        f32::NAN.to_bits()
    );
    assert_eq!(parts[1].to_scalar::<i32>().unwrap(), 3);
    let zeros = Literal::vec1(&[-1f32, 0.0, -0.0, -3.0, -0.0, -2.0, -1.0, -5.0]);
    let (got, want) = run_both(&text, &[zeros]);
    assert!(got.bitwise_eq(&want), "got {got}, want {want}");
    let parts = got.tuple_elements().unwrap();
    assert_eq!(
        parts[0].to_scalar::<f32>().unwrap().to_bits(),
        (-0f32).to_bits()
    );
    assert_eq!(parts[1].to_scalar::<i32>().unwrap(), 1);
    // A reducer that reads a constant is not a selection: interpreted.
    let other = argmax_module(
        &ARGMAX.replace(
            "  lt = pred[] compare(i, j), direction=LT\n",
            "  k = I[] constant(4)\n  lt = pred[] compare(i, k), direction=LT\n",
        ),
        "f32",
        "s32",
        "30,40",
        1,
        "1",
        "30",
    );
    let listing = check_exe(&other, 0.0);
    assert!(listing.contains("interpreted reduce"), "{listing}");
}

#[test]
fn integer_and_predicate_reductions_fold_natively() {
    let reduce = |ty: &str, op: &str, shape: &str, dims: &str, out: &str, init: &str| {
        format!(
            "HloModule r\nr {{\n  a = {ty}[] parameter(0)\n  b = {ty}[] parameter(1)\n  ROOT c = {ty}[] {op}(b, a)\n}}\nENTRY e {{\n  x = {ty}[{shape}] parameter(0)\n  z = {ty}[] constant({init})\n  ROOT s = {ty}[{out}] reduce(x, z), dimensions={{{dims}}}, to_apply=r\n}}\n"
        )
    };
    let cases = [
        // Sums that wrap, in every layout.
        reduce("s32", "add", "64,300,40", "2", "64,300", "2147483000"),
        reduce("s32", "add", "64,300,40", "0", "300,40", "0"),
        reduce("s32", "add", "64,300,40", "0,2", "300", "0"),
        reduce("s32", "add", "64,300,40", "0,1,2", "", "7"),
        reduce("u8", "multiply", "500,33", "1", "500", "1"),
        reduce("s64", "maximum", "70,9000", "1", "70", "-100"),
        reduce("s64", "minimum", "9000,70", "0", "70", "100"),
        reduce("u32", "xor", "30,50,60", "1", "30,60", "5"),
        reduce("u64", "add", "1000,300", "1", "1000", "0"),
        reduce("pred", "or", "400,700", "1", "400", "false"),
        reduce("pred", "and", "400,700", "0", "700", "true"),
    ];
    for text in cases {
        let listing = check_exe(&text, 0.0);
        assert!(listing.contains("fold"), "{listing}\n{text}");
    }
    // The sum of a known array: 0 + 1 + ... + 99 per row, wrapped in u8.
    let text = reduce("u8", "add", "3,100", "1", "3", "0");
    let x = Literal::from_vec(&[3, 100], (0..300).map(|k| (k % 100) as u8).collect()).unwrap();
    let (got, want) = run_both(&text, &[x]);
    assert!(got.bitwise_eq(&want));
    assert_eq!(got.to_vec::<u8>().unwrap(), vec![(4950 % 256) as u8; 3]);
}

#[test]
fn iotas_inside_tiled_loops() {
    // JAX's PRNG counter: a u64 iota split into 32-bit halves, and iotas
    // along an inner and an outer dimension of a 2-D loop, over partial tiles.
    let text = "HloModule t\nENTRY e {\n  i = u64[70001] iota(), iota_dimension=0\n  k = u64[] constant(32)\n  kb = u64[70001] broadcast(k), dimensions={}\n  hi = u64[70001] shift-right-logical(i, kb)\n  h = u32[70001] convert(hi)\n  l = u32[70001] convert(i)\n  x = u32[70001] parameter(0)\n  a = u32[70001] add(x, l)\n  ROOT o = u32[70001] xor(a, h)\n}\n";
    assert!(check_exe(text, 0.0).contains("tiled loop"));
    let text = "HloModule t\nENTRY e {\n  r = s32[300,513] iota(), iota_dimension=0\n  c = s32[300,513] iota(), iota_dimension=1\n  x = s32[300,513] parameter(0)\n  m = s32[300,513] multiply(r, x)\n  ROOT o = s32[300,513] subtract(m, c)\n}\n";
    assert!(check_exe(text, 0.0).contains("tiled loop"));
}

#[test]
fn an_empty_iota_with_huge_dimensions_in_an_integer_loop() {
    // The iota's stride overflows usize; the array is empty.
    let text = "HloModule t\nENTRY e {\n  p = s32[0,4,4294967296,4294967296] parameter(0)\n  i = s32[0,4,4294967296,4294967296] iota(), iota_dimension=1\n  ROOT a = s32[0,4,4294967296,4294967296] add(p, i)\n}\n";
    let shape =
        oxla_hlo::ArrayShape::new(PrimitiveType::S32, vec![0i64, 4, 4294967296, 4294967296])
            .unwrap();
    let empty = Literal::Array(ArrayLiteral::new(shape, ArrayData::S32(vec![])).unwrap());
    let (got, want) = run_both(text, &[empty]);
    assert!(got.bitwise_eq(&want));
}

#[test]
fn exclusive_ors_of_rotations_run_in_one_pass_with_the_same_bits() {
    // Threefry's mix, x0 += x1; x1 = rotate(x1, 13) ^ x0, with the xor's
    // operands in both orders, on u32 and s64; and a rotation read twice,
    // which stays a rotation of its own.
    let text = "HloModule t\nENTRY e {\n  a = u32[300001] parameter(0)\n  b = u32[300001] parameter(1)\n  k = u32[] constant(13)\n  kb = u32[300001] broadcast(k), dimensions={}\n  j = u32[] constant(19)\n  jb = u32[300001] broadcast(j), dimensions={}\n  x = u32[300001] add(a, b)\n  l = u32[300001] shift-left(b, kb)\n  h = u32[300001] shift-right-logical(b, jb)\n  o = u32[300001] or(l, h)\n  y = u32[300001] xor(o, x)\n  z = u32[300001] add(x, y)\n  l2 = u32[300001] shift-left(y, jb)\n  h2 = u32[300001] shift-right-logical(y, kb)\n  o2 = u32[300001] or(h2, l2)\n  w = u32[300001] xor(z, o2)\n  v = u32[300001] add(o2, w)\n  ROOT t = (u32[300001], u32[300001]) tuple(w, v)\n}\n";
    let listing = check_exe(text, 0.0);
    assert!(listing.contains("tiled loop"), "{listing}");
    let wide = "HloModule t\nENTRY e {\n  a = s64[5000] parameter(0)\n  b = s64[5000] parameter(1)\n  k = s64[] constant(60)\n  kb = s64[5000] broadcast(k), dimensions={}\n  j = s64[] constant(4)\n  jb = s64[5000] broadcast(j), dimensions={}\n  x = s64[5000] add(a, b)\n  l = s64[5000] shift-left(b, kb)\n  h = s64[5000] shift-right-logical(b, jb)\n  o = s64[5000] or(l, h)\n  y = s64[5000] xor(x, o)\n  ROOT z = s64[5000] add(x, y)\n}\n";
    check(wide, 0.0);
    // Values: rotate(b, 1) ^ a for known bits.
    let one = "HloModule t\nENTRY e {\n  a = u32[4] parameter(0)\n  b = u32[4] parameter(1)\n  k = u32[] constant(1)\n  kb = u32[4] broadcast(k), dimensions={}\n  j = u32[] constant(31)\n  jb = u32[4] broadcast(j), dimensions={}\n  s = u32[4] add(a, b)\n  l = u32[4] shift-left(b, kb)\n  h = u32[4] shift-right-logical(b, jb)\n  o = u32[4] or(l, h)\n  ROOT y = u32[4] xor(o, s)\n}\n";
    let b = [0x8000_0001u32, 0xffff_ffff, 0x1234_5678, 0];
    let a = [0u32, 1, 0xf0f0_f0f0, 7];
    let (got, want) = run_both(one, &[Literal::vec1(&a), Literal::vec1(&b)]);
    assert!(got.bitwise_eq(&want), "got {got}, want {want}");
    let expected: Vec<u32> = a
        .iter()
        .zip(&b)
        .map(|(&a, &b)| b.rotate_left(1) ^ a.wrapping_add(b))
        .collect();
    assert_eq!(got.to_vec::<u32>().unwrap(), expected);
}

/// Empty arrays whose other dimensions multiply past `usize` (found by
/// fuzzing: a fused loop's element count overflowed before reaching the
/// zero). Both backends give the empty results and the interpreter's
/// state; nothing overflows.
#[test]
fn empty_arrays_with_huge_dimensions() {
    let huge = "10,800000000000,1,2000000001";
    for text in [
        format!(
            "HloModule h\nENTRY e {{\n  x = f32[{huge},0,4] parameter(0)\n  ROOT r = f32[{huge},0,4] round-nearest-even(x)\n}}\n"
        ),
        format!(
            "HloModule h\nENTRY e {{\n  s = u64[2] parameter(0)\n  ROOT r = (u64[2], u32[{huge},0]) rng-bit-generator(s), algorithm=rng_three_fry\n}}\n"
        ),
        format!(
            "HloModule h\nENTRY e {{\n  s = u64[3] parameter(0)\n  ROOT r = (u64[3], f32[0,{huge}]) rng-bit-generator(s), algorithm=rng_philox\n}}\n"
        ),
        "HloModule h\nENTRY e {\n  a = s32[3,0,800000000000,2000000001] parameter(0)\n  b = s32[800000000000,2000000001,0,5] parameter(1)\n  ROOT d = s32[3,5] dot(a, b), lhs_contracting_dims={2,3,1}, rhs_contracting_dims={0,1,2}\n}\n".to_string(),
        "HloModule h\nENTRY e {\n  a = f32[3,800000000000,2000000001,0] parameter(0)\n  b = f32[0,800000000000,2000000001,5] parameter(1)\n  ROOT d = f32[3,5] dot(a, b), lhs_contracting_dims={3,1,2}, rhs_contracting_dims={0,1,2}\n}\n".to_string(),
    ] {
        let module = oxla_text::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let args = arguments(&module, 5);
        let (got, want) = run_both(&text, &args);
        assert!(got.first_mismatch(&want, 0.0, 0.0).is_none(), "{text}");
    }
}

/// `topk` of rows with many ties (small integers, repeated floats), NaNs of
/// both signs, zeros of both signs and infinities, largest and smallest,
/// short and long `k`: the CPU's values and indices are the interpreter's
/// (a stable sort's first `k`: ties to the lower index).
#[test]
fn topk_keeps_the_interpreters_order_and_ties() {
    let topk = |ty: &str, dims: &str, out: &str, k: usize, largest: bool| {
        format!(
            "HloModule t\nENTRY e {{\n  x = {ty}[{dims}] parameter(0)\n  ROOT t = ({ty}[{out}], s32[{out}]) topk(x), k={k}, largest={largest}\n}}\n"
        )
    };
    for largest in [true, false] {
        // Short k (the kept-keys buffer) and long (selection), on rows
        // large enough to split across threads; integers with many ties.
        for (ty, k) in [
            ("f32", 5),
            ("f32", 300),
            ("s32", 7),
            ("s32", 1000),
            ("u8", 3),
            ("bf16", 9),
        ] {
            check_kernel(
                &topk(ty, "300,1000", &format!("300,{k}"), k, largest),
                "topk",
            );
        }
        check_kernel(&topk("f64", "4,3,50", "4,3,50", 50, largest), "topk");
        check_kernel(&topk("s64", "77", "1", 1, largest), "topk");
        check_kernel(&topk("f16", "0,5", "0,2", 2, largest), "topk");
    }
    // Special values, each several times, in every order.
    let specials = [
        f32::NAN,
        -f32::NAN,
        0.0,
        -0.0,
        f32::INFINITY,
        f32::NEG_INFINITY,
        1.0,
        -1.0,
        f32::MIN_POSITIVE,
    ];
    let mut seed = 5u64;
    let row: Vec<f32> = (0..3 * 40)
        .map(|_| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
            specials[(seed >> 33) as usize % specials.len()]
        })
        .collect();
    let x = Literal::Array(
        ArrayLiteral::new(
            oxla_hlo::ArrayShape::new(PrimitiveType::F32, [3, 40]).unwrap(),
            ArrayData::F32(row),
        )
        .unwrap(),
    );
    for largest in [true, false] {
        for k in [1, 6, 40] {
            let (got, want) = run_both(
                &topk("f32", "3,40", &format!("3,{k}"), k, largest),
                std::slice::from_ref(&x),
            );
            assert!(
                got.bitwise_eq(&want),
                "k={k} largest={largest}: {got:?} against {want:?}"
            );
        }
    }
}

/// `convert` between every pair of non-complex types runs as a typed (or
/// fused) loop
/// and gives the interpreter's bits: NaNs (payloads and signs), infinities,
/// zeros of both signs, halves, values past every integer range and at
/// the half types' rounding midpoints, on one thread and across the pool.
#[test]
fn conversions_between_every_pair_of_types_are_exact() {
    use PrimitiveType::*;
    use oxla_hlo::{NativeType, Scalar};
    let types = [
        ("pred", Pred),
        ("s8", S8),
        ("s16", S16),
        ("s32", S32),
        ("s64", S64),
        ("u8", U8),
        ("u16", U16),
        ("u32", U32),
        ("u64", U64),
        ("f16", F16),
        ("bf16", BF16),
        ("f32", F32),
        ("f64", F64),
    ];
    let mut specials: Vec<Scalar> = [
        f64::NAN,
        -f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.5,
        2.5,
        -2.5,
        127.5,
        128.0,
        -129.0,
        255.9,
        65504.0,
        65520.0,
        70000.0,
        3e9,
        -3e9,
        1e20,
        -1e20,
        1.0 + 1.0 / 256.0,
        1.0 + 3.0 / 512.0,
        6e-8,
        1e-40,
        -1e-45,
        f64::MAX,
    ]
    .into_iter()
    .map(Scalar::Float)
    .collect();
    specials.extend(
        [
            0,
            1,
            -1,
            127,
            -128,
            255,
            256,
            32767,
            -32768,
            65535,
            1 << 24,
            (1 << 24) + 1,
        ]
        .into_iter()
        .map(Scalar::Int),
    );
    specials.extend([i64::MAX as i128, i64::MIN as i128, u64::MAX as i128].map(Scalar::Int));
    // NaNs with payloads, through f32 bits.
    specials.extend(
        [0x7fc0_0001u32, 0xffa0_0000, 0x7f80_0001, 0x7fff_ffff]
            .map(|b| Scalar::Float(f32::from_bits(b) as f64)),
    );
    for (from_name, from) in types {
        for n in [specials.len(), 300_001] {
            let values: Vec<Scalar> = (0..n)
                .map(|i| match i % 3 {
                    0 => specials[i % specials.len()],
                    // Spread values, fractional and large.
                    1 => Scalar::Float(((i as f64) * 0.37).sin() * 10f64.powi((i % 23) as i32 - 4)),
                    _ => Scalar::Int((i as i128 * 7919) % 100_003 - 50_000),
                })
                .collect();
            let data = oxla_hlo::with_native_type!(from, T => T::wrap(
                values.iter().map(|&v| T::from_scalar(v)).collect()
            ));
            let x = Literal::Array(
                ArrayLiteral::new(oxla_hlo::ArrayShape::new(from, [n as i64]).unwrap(), data)
                    .unwrap(),
            );
            for (to_name, _) in types {
                let text = format!(
                    "HloModule c\nENTRY e {{\n  x = {from_name}[{n}] parameter(0)\n  ROOT c = {to_name}[{n}] convert(x)\n}}\n"
                );
                if from_name == to_name {
                    continue;
                }
                let module = oxla_text::parse_module(&text).unwrap();
                let exe = oxla_cpu::compile(&module).unwrap();
                let listing = exe.describe();
                assert!(
                    listing.contains("element-wise (typed)") || listing.contains("fused loop"),
                    "{from_name} to {to_name} is not a typed or fused loop:\n{listing}"
                );
                let options = EvalOptions::default();
                let got = exe
                    .execute(std::slice::from_ref(&x), &options, &NoServices)
                    .unwrap();
                let want =
                    oxla_interp::evaluate(&module, std::slice::from_ref(&x), &options, &NoServices)
                        .unwrap();
                assert!(
                    got.bitwise_eq(&want),
                    "{from_name} to {to_name} (n = {n}) differs"
                );
            }
        }
    }
}

/// Cumulative sums, products, maxima and minima (a window over the whole
/// dimension, padded to its start; reversed, to its end), as JAX writes
/// them, along the innermost, outermost and a middle dimension, with init
/// values that are and are not the exact identity: running scans, agreeing
/// with the interpreter's windows.
#[test]
fn cumulative_windows_run_as_scans() {
    let ops = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\nmul {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] multiply(a, b)\n}\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] maximum(a, b)\n}\nmin {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] minimum(b, a)\n}\n";
    // Small (the interpreter's windows are each as long as the dimension),
    // then one large enough to split across threads.
    let dims = [40usize, 3, 51];
    for (axis, &n) in dims.iter().enumerate() {
        for (op, init, rtol) in [
            ("add", "0", 1e-4),
            ("add", "-0", 1e-4),
            ("add", "1.5", 1e-4),
            ("max", "-inf", 0.0),
            ("min", "inf", 0.0),
            ("min", "0.25", 0.0),
        ] {
            for pad in [format!("{}_0", n - 1), format!("0_{}", n - 1)] {
                let size: Vec<String> = (0..3)
                    .map(|d| if d == axis { n.to_string() } else { "1".into() })
                    .collect();
                let pads: Vec<String> = (0..3)
                    .map(|d| if d == axis { pad.clone() } else { "0_0".into() })
                    .collect();
                let text = format!(
                    "HloModule s\n{ops}ENTRY e {{\n  x = f32[40,3,51] parameter(0)\n  i = f32[] constant({init})\n  ROOT r = f32[40,3,51] reduce-window(x, i), window={{size={} pad={}}}, to_apply={op}\n}}\n",
                    size.join("x"),
                    pads.join("x")
                );
                let listing = check_exe(&text, rtol);
                assert!(listing.contains("reduce-window"), "{listing}");
            }
        }
    }
    check(
        &format!(
            "HloModule s\n{ops}ENTRY e {{\n  x = f32[403,300] parameter(0)\n  i = f32[] constant(0)\n  ROOT r = f32[403,300] reduce-window(x, i), window={{size=1x300 pad=0_0x299_0}}, to_apply=add\n}}\n"
        ),
        1e-4,
    );
    // Products along a short dimension (longer ones overflow to inf).
    check(
        &format!(
            "HloModule s\n{ops}ENTRY e {{\n  x = f32[2000,9] parameter(0)\n  i = f32[] constant(1)\n  ROOT r = f32[2000,9] reduce-window(x, i), window={{size=1x9 pad=0_0x8_0}}, to_apply=mul\n}}\n"
        ),
        1e-5,
    );
}

/// The largest magnitude among `l`'s elements (complex ones by their
/// larger part).
fn largest(l: &Literal) -> f64 {
    let Literal::Array(a) = l else {
        panic!("an array")
    };
    (0..a.data().len())
        .map(|i| match a.data().scalar(i) {
            oxla_hlo::Scalar::Complex(re, im) => re.abs().max(im.abs()),
            s => s.as_f64().abs(),
        })
        .fold(0.0, f64::max)
}

/// Runs the `fft` module `text` on both backends, three times: a double
/// precision transform agrees with the interpreter's direct sums to 1e-5
/// in each element; a single precision one, computed in f32 as XLA does,
/// to `1e-6 * log2(n)` of the result's largest magnitude (an f32 FFT's
/// error is relative to the transform's norm, not to each bin). Returns
/// the listing.
fn check_fft(text: &str, n: usize, single: bool) -> String {
    let module = oxla_text::parse_module(text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let options = EvalOptions::default();
    let exe = oxla_cpu::compile(&module).unwrap();
    for seed in [7, 8, 7] {
        let args = arguments(&module, seed);
        let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
        let got = exe.execute(&args, &options, &NoServices).unwrap();
        let bits = (n.max(2) as f64).log2();
        let (rtol, atol) = match single {
            true => (0.0, 1e-6 * bits * largest(&want)),
            false => (1e-5, 1e-5),
        };
        if let Some(m) = got.first_mismatch(&want, rtol, atol) {
            panic!("{m} (atol {atol:e})\n{text}");
        }
        exe.recycle(got);
    }
    exe.describe()
}

/// `fft` of every kind, complex and real, single and double precision,
/// over one to three trailing dimensions of lengths with and without
/// small factors (and one), and large enough to split across the pool:
/// the CPU's O(n log n) transforms agree with the interpreter's direct
/// sums.
#[test]
fn ffts_of_every_kind_agree_with_the_direct_sums() {
    let fft = |ty: &str, dims: &str, out_ty: &str, out: &str, kind: &str, len: &str| {
        format!(
            "HloModule f\nENTRY e {{\n  x = {ty}[{dims}] parameter(0)\n  ROOT r = {out_ty}[{out}] fft(x), fft_type={kind}, fft_length={{{len}}}\n}}\n"
        )
    };
    // The points a transform sums over.
    let points = |len: &str| -> usize {
        len.split(',')
            .map(|d| d.parse::<usize>().unwrap())
            .product()
    };
    for (c, r) in [("c64", "f32"), ("c128", "f64")] {
        let single = c == "c64";
        for (dims, len) in [
            ("3,12", "12"),
            ("2,7,10", "7,10"),
            ("5,1", "1"),
            ("2,3,4,6", "3,4,6"),
        ] {
            for kind in ["FFT", "IFFT"] {
                let listing = check_fft(&fft(c, dims, c, dims, kind, len), points(len), single);
                assert!(listing.contains("= fft"), "{listing}");
            }
        }
        for (dims, out, len) in [
            ("3,12", "3,7", "12"),
            ("2,7,9", "2,7,5", "7,9"),
            ("4,1", "4,1", "1"),
        ] {
            let n = points(len);
            let listing = check_fft(&fft(r, dims, c, out, "RFFT", len), n, single);
            assert!(listing.contains("= fft"), "{listing}");
            let listing = check_fft(&fft(c, out, r, dims, "IRFFT", len), n, single);
            assert!(listing.contains("= fft"), "{listing}");
        }
    }
    // Large: many lines along the last axis, and a transform of the
    // outermost axis (one block of many lines).
    for (text, n) in [
        (
            fft("c64", "128,1030", "c64", "128,1030", "FFT", "1030"),
            1030,
        ),
        (
            fft("c64", "1030,130", "c64", "1030,130", "IFFT", "1030,130"),
            1030 * 130,
        ),
        (
            fft("f32", "130,1024", "c64", "130,513", "RFFT", "1024"),
            1024,
        ),
        (
            fft("c64", "130,513", "f32", "130,1024", "IRFFT", "1024"),
            1024,
        ),
        (
            fft("c128", "64,1030", "c128", "64,1030", "FFT", "1030"),
            1030,
        ),
    ] {
        check_fft(&text, n, !text.contains("c128"));
    }
}

/// `abs` of a one-axis RFFT that only it reads is one kernel, which takes
/// each line's absolute values right after its transform: they agree with
/// the interpreter's direct sums, and bit for bit with `abs` of the same
/// transform run as two steps.
#[test]
fn absolute_values_of_an_rfft_are_taken_line_by_line() {
    for (dims, out, n) in [
        ("130,1024", "130,513", 1024),
        ("8,1001", "8,501", 1001),
        ("3,1", "3,1", 1),
    ] {
        let text = format!(
            "HloModule f\nENTRY e {{\n  x = f32[{dims}] parameter(0)\n  s = c64[{out}] fft(x), fft_type=RFFT, fft_length={{{n}}}\n  ROOT a = f32[{out}] abs(s)\n}}\n"
        );
        let listing = check_fft(&text, n, true);
        assert!(
            listing.contains("fft with the absolute values"),
            "{listing}"
        );
        assert!(!listing.contains("element-wise"), "{listing}");
        // The spectrum also a result: two steps.
        let both = text.replace("ROOT a =", "a =").replace(
            "abs(s)\n",
            &format!("abs(s)\n  ROOT t = (f32[{out}], c64[{out}]) tuple(a, s)\n"),
        );
        let module = oxla_text::parse_module(&both).unwrap_or_else(|e| panic!("{e}\n{both}"));
        let two = oxla_cpu::compile(&module).expect("it compiles");
        assert!(
            !two.describe().contains("with the absolute values"),
            "{}",
            two.describe()
        );
        let one =
            oxla_cpu::compile(&oxla_text::parse_module(&text).expect("parses")).expect("compiles");
        let options = EvalOptions::default();
        let args = arguments(&module, 3);
        let fused = one.execute(&args, &options, &NoServices).expect("cpu");
        let apart = two.execute(&args, &options, &NoServices).expect("cpu");
        let Literal::Tuple(parts) = &apart else {
            panic!("a tuple")
        };
        assert!(fused.bitwise_eq(&parts[0]), "{dims}");
    }
}

#[test]
fn a_select_on_one_predicate_hands_on_the_operand_it_picks() {
    // JAX's factorisations end with `select(broadcast(ok), x, nan)`: the
    // loop forwards `x` (or the NaNs) whole. `t` picks between two
    // computed arrays and `u` between parameters, so both kinds of value
    // are forwarded, and `v` uses `t` afterwards.
    let text = "HloModule t\nlt {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  ROOT c = pred[] compare(x, y), direction=LT\n}\nENTRY e {\n  p = pred[] parameter(0)\n  a = f32[300,500] parameter(1)\n  b = f32[300,500] parameter(2)\n  pb = pred[300,500] broadcast(p), dimensions={}\n  n = f32[] constant(nan)\n  nb = f32[300,500] broadcast(n), dimensions={}\n  s = f32[300,500] select(pb, a, nb)\n  ta = f32[300,500] sort(a), dimensions={1}, to_apply=lt\n  tb = f32[300,500] sort(b), dimensions={1}, to_apply=lt\n  t = f32[300,500] select(pb, ta, tb)\n  u = f32[300,500] select(pb, b, a)\n  v = f32[300,500] add(t, a)\n  ROOT r = (f32[300,500], f32[300,500], f32[300,500], f32[300,500]) tuple(s, t, u, v)\n}\n";
    let module = oxla_text::parse_module(text).unwrap();
    let exe = oxla_cpu::compile(&module).unwrap();
    let options = EvalOptions::default();
    let mut seed = 3;
    let shape = module.program_shape().parameters[1].clone();
    let (a, b) = (random(&shape, &mut seed), random(&shape, &mut seed));
    for p in [true, false, true] {
        let args = [Literal::scalar(p), a.clone(), b.clone()];
        let got = exe.execute(&args, &options, &NoServices).unwrap();
        let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
        if let Some(m) = got.first_mismatch(&want, 0.0, 0.0) {
            panic!("p = {p}: {m}");
        }
        let Literal::Tuple(parts) = &got else {
            panic!("not a tuple")
        };
        // The NaNs where p is false, the operand's values where true.
        let first = parts[0].as_array().unwrap().data().clone();
        match (p, first, a.as_array().unwrap().data()) {
            (true, ArrayData::F32(x), ArrayData::F32(y)) => assert_eq!(&x, y),
            (false, ArrayData::F32(x), _) => assert!(x.iter().all(|v| v.is_nan())),
            _ => panic!("not f32"),
        }
        exe.recycle(got);
    }
    assert!(exe.describe().contains("fused loop"), "{}", exe.describe());
}

#[test]
fn lapack_calls_overwrite_an_operand_only_when_nothing_else_reads_it() {
    // `m` and `x` are made here and read only by the LU and the solve,
    // which then factor and solve in their buffers; `n` is read again
    // after its LU, so that LU works on a copy and `later` sees `n` itself.
    let lu = "custom_call_target=\"lapack_sgetrf_ffi\", api_version=API_VERSION_TYPED_FFI, backend_config={}";
    let trsm = "custom_call_target=\"lapack_strsm_ffi\", api_version=API_VERSION_TYPED_FFI, backend_config={diag = 78 : ui8, side = 76 : ui8, trans_x = 78 : ui8, uplo = 76 : ui8}";
    let text = format!(
        "HloModule t
ENTRY e {{
  p = f32[160,160] parameter(0)
  b = f32[160,24] parameter(1)
  m = f32[160,160] multiply(p, p)
  l = (f32[160,160], s32[160], s32[]) custom-call(m), {lu}
  f = f32[160,160] get-tuple-element(l), index=0
  x = f32[160,24] add(b, b)
  s = f32[160,24] custom-call(f, x), {trsm}
  n = f32[160,160] negate(p)
  l2 = (f32[160,160], s32[160], s32[]) custom-call(n), {lu}
  f2 = f32[160,160] get-tuple-element(l2), index=0
  later = f32[160,160] add(n, f2)
  ROOT r = (f32[160,160], f32[160,24], f32[160,160]) tuple(f, s, later)
}}
"
    );
    // Were `n` overwritten by its factors, `later` would be about 2 * f2
    // instead of n + f2, far outside the tolerance.
    check(&text, 1e-3);
}

/// A row maximum or minimum of f32 values converted to bf16 or f16 rounds
/// once per row, the f32 extremum, instead of every element: the results
/// are those of rounding every element first, bit for bit, through ties to
/// even, signed zeros, infinities, values that round to infinity or up a
/// binade, denormals and NaN.
#[test]
fn half_row_extrema_round_the_extremum_once() {
    let specials = [
        0.0f32,
        -0.0,
        1.0,
        1.0 + 1.0 / 256.0,     // a bf16 tie, to 1
        1.0 + 3.0 / 256.0,     // a bf16 tie, up to 1 + 4/256
        1.0 + 1.0 / 2048.0,    // an f16 tie, to 1
        -(1.0 + 3.0 / 2048.0), // an f16 tie, down to -(1 + 4/2048)
        f32::MAX,              // to infinity in bf16 and f16
        65519.0,               // f16's largest finite
        65520.0,               // f16: to infinity
        -3.0e38,
        1.0e-40,  // an f32 denormal
        -1.0e-45, // to -0
        6.0e-8,   // an f16 denormal
        f32::INFINITY,
        f32::NEG_INFINITY,
        2.0 - 1.0 / 65536.0, // up a binade in bf16
    ];
    let (rows, cols) = (64usize, 300usize);
    let mut seed = 5u64;
    let x: Vec<f32> = (0..rows * cols)
        .map(|i| {
            let (r, c) = (i / cols, i % cols);
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let pick = (seed >> 33) as usize;
            if r % 8 == 3 && c == (r * 37) % cols {
                // A NaN in some rows, quiet or signalling, either sign.
                f32::from_bits([0x7fc0_0000, 0xff80_0001, 0x7f80_1234][r % 3])
            } else if r % 2 == 0 {
                specials[pick % specials.len()]
            } else {
                // Near values that straddle rounding boundaries.
                let base = specials[(r / 2) % specials.len()];
                f32::from_bits(
                    base.to_bits()
                        .wrapping_add((pick % 5) as u32)
                        .wrapping_sub(2),
                )
            }
        })
        .collect();
    let args = [Literal::from_vec(&[rows as i64, cols as i64], x).unwrap()];
    for half in ["bf16", "f16"] {
        for (op, init) in [("maximum", "-inf"), ("minimum", "inf")] {
            let text = format!(
                "HloModule m
r {{
  a = {half}[] parameter(0)
  b = {half}[] parameter(1)
  ROOT m = {half}[] {op}(a, b)
}}
ENTRY e {{
  x = f32[{rows},{cols}] parameter(0)
  h = {half}[{rows},{cols}] convert(x)
  i = {half}[] constant({init})
  ROOT m = {half}[{rows}] reduce(h, i), dimensions={{1}}, to_apply=r
}}
"
            );
            let module = oxla_text::parse_module(&text).unwrap();
            let exe = oxla_cpu::compile(&module).unwrap();
            let options = EvalOptions::default();
            let got = exe.execute(&args, &options, &NoServices).unwrap();
            let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
            let bits = |l: &Literal| -> Vec<u16> {
                match l {
                    Literal::Array(a) => match a.data() {
                        ArrayData::BF16(v) => v.iter().map(|h| h.to_bits()).collect(),
                        ArrayData::F16(v) => v.iter().map(|h| h.to_bits()).collect(),
                        other => panic!("{half} {op}: {:?}", other.element_type()),
                    },
                    other => panic!("{half} {op}: {}", other.shape()),
                }
            };
            let (g, w) = (bits(&got), bits(&want));
            // NaN when the row has one (its payload is not pinned down).
            let exp_mask = if half == "bf16" { 0x7f80 } else { 0x7c00 };
            let nan = |b: u16| b & exp_mask == exp_mask && b & !(exp_mask | 0x8000) != 0;
            for (r, (a, b)) in g.iter().zip(&w).enumerate() {
                assert!(
                    a == b || (nan(*a) && nan(*b)),
                    "{half} {op}, row {r}: {a:#06x}, expected {b:#06x}"
                );
            }
            assert!(w.iter().any(|&b| nan(b)) && w.iter().any(|&b| !nan(b)));
            assert!(
                exe.describe().contains("fused reduction"),
                "{}",
                exe.describe()
            );
        }
    }
}

/// `n` values of an integer type cycling through its edge cases (zero, one,
/// minus one, the minimum and maximum) and a spread of others, as i128.
fn integer_edges(bits: u32, signed: bool, n: usize, seed: u64) -> Vec<i128> {
    let (min, max) = if signed {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    };
    let edges = [0, 1, -1, 2, -2, 7, -7, min, max, min + 1, max - 1];
    let mut s = seed;
    (0..n)
        .map(|i| {
            s = s
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let v = match i % 3 {
                0 => edges[(s >> 33) as usize % edges.len()],
                1 => ((s >> 40) as i128 % 200) - 100,
                _ => min + (s >> 1) as i128 % (max - min + 1),
            };
            v.clamp(min, max)
        })
        .collect()
}

fn integer_literal(ty: PrimitiveType, dims: &[i64], v: &[i128]) -> Literal {
    let data = match ty {
        PrimitiveType::S8 => ArrayData::S8(v.iter().map(|&x| x as i8).collect()),
        PrimitiveType::S16 => ArrayData::S16(v.iter().map(|&x| x as i16).collect()),
        PrimitiveType::S32 => ArrayData::S32(v.iter().map(|&x| x as i32).collect()),
        PrimitiveType::S64 => ArrayData::S64(v.iter().map(|&x| x as i64).collect()),
        PrimitiveType::U8 => ArrayData::U8(v.iter().map(|&x| x as u8).collect()),
        PrimitiveType::U16 => ArrayData::U16(v.iter().map(|&x| x as u16).collect()),
        PrimitiveType::U32 => ArrayData::U32(v.iter().map(|&x| x as u32).collect()),
        PrimitiveType::U64 => ArrayData::U64(v.iter().map(|&x| x as u64).collect()),
        other => panic!("not an integer type: {other}"),
    };
    let shape = oxla_hlo::ArrayShape::new(ty, dims.to_vec()).unwrap();
    Literal::Array(ArrayLiteral::new(shape, data).unwrap())
}

/// Every integer type, with its width and whether it is signed.
const INTEGER_TYPES: [(PrimitiveType, u32, bool); 8] = {
    use PrimitiveType::*;
    [
        (S8, 8, true),
        (S16, 16, true),
        (S32, 32, true),
        (S64, 64, true),
        (U8, 8, false),
        (U16, 16, false),
        (U32, 32, false),
        (U64, 64, false),
    ]
};

#[test]
fn integer_division_and_operations_of_one_integer_in_every_width() {
    for (ty, bits, signed) in INTEGER_TYPES {
        let t = ty.to_string();
        // (abs, negate and sign are for signed integers only.)
        let ones = if signed {
            format!(
                "x = {t}[300,400] abs(a)\n  n = {t}[300,400] negate(x)\n  g = {t}[300,400] sign(n)"
            )
        } else {
            format!(
                "x = {t}[300,400] not(a)\n  n = {t}[300,400] popcnt(x)\n  g = {t}[300,400] count-leading-zeros(n)"
            )
        };
        // Quotients and remainders of arrays (zero and MIN / -1 included),
        // by a broadcast divisor (fused with it), and a chain of the
        // operations of one integer.
        let text = format!(
            "HloModule t\nENTRY e {{\n  a = {t}[300,400] parameter(0)\n  b = {t}[300,400] parameter(1)\n  \
             d = {t}[300,400] divide(a, b)\n  r = {t}[300,400] remainder(a, b)\n  \
             seven = {t}[] constant(7)\n  s = {t}[300,400] broadcast(seven), dimensions={{}}\n  \
             q = {t}[300,400] divide(a, s)\n  m = {t}[300,400] remainder(q, s)\n  \
             {ones}\n  \
             o = {t}[300,400] not(g)\n  p = {t}[300,400] popcnt(b)\n  c = {t}[300,400] count-leading-zeros(p)\n  \
             y = {t}[300,400] add(o, c)\n  z = {t}[300,400] multiply(m, y)\n  \
             ROOT t = ({t}[300,400], {t}[300,400], {t}[300,400], {t}[300,400]) tuple(d, r, z, g)\n}}\n"
        );
        let module = oxla_text::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let options = EvalOptions::default();
        let exe = oxla_cpu::compile(&module).unwrap();
        let listing = exe.describe();
        assert!(
            !listing.contains("(scalar)"),
            "{t}: scalar loops remain:\n{listing}"
        );
        for seed in [3, 4] {
            let args = [
                integer_literal(ty, &[300, 400], &integer_edges(bits, signed, 120_000, seed)),
                integer_literal(
                    ty,
                    &[300, 400],
                    &integer_edges(bits, signed, 120_000, seed + 9),
                ),
            ];
            let want = oxla_interp::evaluate(&module, &args, &options, &NoServices).unwrap();
            let got = exe.execute(&args, &options, &NoServices).unwrap();
            if let Some(m) = got.first_mismatch(&want, 0.0, 0.0) {
                panic!("{t}, seed {seed}: {m}\n{listing}");
            }
        }
    }
}

#[test]
fn integer_division_follows_xla_at_zero_and_overflow() {
    // Exact values (the interpreter's rules are XLA's): x / 0 is all ones,
    // x % 0 is x, MIN / -1 is MIN and MIN % -1 is 0, truncation toward
    // zero with the remainder taking the dividend's sign; on vectors long
    // enough for the vector loops.
    let a: Vec<i32> = [i32::MIN, i32::MIN, 7, -7, 7, -7, 5, i32::MAX, 0, i32::MIN]
        .repeat(1000)
        .to_vec();
    let b: Vec<i32> = [-1, 0, 2, 2, -2, -2, 0, -1, 0, 1].repeat(1000).to_vec();
    let text = "HloModule t\nENTRY e {\n  a = s32[10000] parameter(0)\n  b = s32[10000] parameter(1)\n  d = s32[10000] divide(a, b)\n  r = s32[10000] remainder(a, b)\n  ROOT t = (s32[10000], s32[10000]) tuple(d, r)\n}\n";
    let module = oxla_text::parse_module(text).unwrap();
    let exe = oxla_cpu::compile(&module).unwrap();
    let lit = |v: &[i32]| {
        let shape = oxla_hlo::ArrayShape::new(PrimitiveType::S32, vec![v.len() as i64]).unwrap();
        Literal::Array(ArrayLiteral::new(shape, ArrayData::S32(v.to_vec())).unwrap())
    };
    let got = exe
        .execute(&[lit(&a), lit(&b)], &EvalOptions::default(), &NoServices)
        .unwrap();
    let Literal::Tuple(parts) = got else {
        panic!("a tuple")
    };
    let values = |l: &Literal| match l {
        Literal::Array(x) => match x.data() {
            ArrayData::S32(v) => v[..10].to_vec(),
            other => panic!("{other:?}"),
        },
        other => panic!("{other:?}"),
    };
    assert_eq!(
        values(&parts[0]),
        [i32::MIN, -1, 3, -3, -3, 3, -1, -i32::MAX, -1, i32::MIN]
    );
    assert_eq!(values(&parts[1]), [0, i32::MIN, 1, -1, 1, -1, 5, 0, 0, 0]);
}

/// Division and remainder by one divisor (a broadcast scalar parameter),
/// which types of up to 32 bits compute with the divisor's reciprocal:
/// every dividend of the 8- and 16-bit types and the edges and random
/// values of the wider ones, by edge, power-of-two, prime and random
/// divisors, against XLA's rules computed exactly.
#[test]
fn division_by_one_divisor_is_exact_for_every_dividend() {
    let values = |l: &Literal| -> Vec<i128> {
        let Literal::Array(x) = l else {
            panic!("{l:?}")
        };
        match x.data() {
            ArrayData::S8(v) => v.iter().map(|&x| x as i128).collect(),
            ArrayData::S16(v) => v.iter().map(|&x| x as i128).collect(),
            ArrayData::S32(v) => v.iter().map(|&x| x as i128).collect(),
            ArrayData::S64(v) => v.iter().map(|&x| x as i128).collect(),
            ArrayData::U8(v) => v.iter().map(|&x| x as i128).collect(),
            ArrayData::U16(v) => v.iter().map(|&x| x as i128).collect(),
            ArrayData::U32(v) => v.iter().map(|&x| x as i128).collect(),
            ArrayData::U64(v) => v.iter().map(|&x| x as i128).collect(),
            other => panic!("{other:?}"),
        }
    };
    for (ty, bits, signed) in INTEGER_TYPES {
        let (min, max) = if signed {
            (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
        } else {
            (0, (1i128 << bits) - 1)
        };
        let a: Vec<i128> = if bits <= 16 {
            (min..=max).collect()
        } else {
            let mut a = integer_edges(bits, signed, 60_000, 5);
            // Multiples of the divisors below and their neighbours, where
            // a quotient is an integer or just misses one.
            for m in [3i128, 5, 7, 11, 641, 6_700_417, 1 << 20] {
                for k in [1i128, 2, 1000, 65_537, max / m] {
                    for e in [-1, 0, 1] {
                        a.extend([m * k + e, -(m * k) + e]);
                    }
                }
            }
            a.iter().map(|&v| v.clamp(min, max)).collect()
        };
        let mut divisors: Vec<i128> = vec![
            0,
            1,
            -1,
            2,
            -2,
            3,
            -3,
            5,
            7,
            -7,
            10,
            11,
            13,
            100,
            255,
            256,
            641,
            65_535,
            65_536,
            65_537,
            6_700_417,
            min,
            max,
            min + 1,
            max - 1,
            max / 2,
            max / 2 + 1,
            max / 3,
        ];
        divisors.extend(integer_edges(bits, signed, 40, 17));
        let divisors: std::collections::BTreeSet<i128> =
            divisors.into_iter().map(|d| d.clamp(min, max)).collect();
        let t = ty.to_string();
        let n = a.len();
        let text = format!(
            "HloModule t\nENTRY e {{\n  a = {t}[{n}] parameter(0)\n  s = {t}[] parameter(1)\n  \
             b = {t}[{n}] broadcast(s), dimensions={{}}\n  q = {t}[{n}] divide(a, b)\n  \
             r = {t}[{n}] remainder(a, b)\n  ROOT t = ({t}[{n}], {t}[{n}]) tuple(q, r)\n}}\n"
        );
        let module = oxla_text::parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let exe = oxla_cpu::compile(&module).unwrap();
        let listing = exe.describe();
        assert!(
            !listing.contains("(scalar)"),
            "{t}: scalar loops remain:\n{listing}"
        );
        let dividends = integer_literal(ty, &[n as i64], &a);
        for &d in &divisors {
            let args = [dividends.clone(), integer_literal(ty, &[], &[d])];
            let got = exe
                .execute(&args, &EvalOptions::default(), &NoServices)
                .unwrap();
            let Literal::Tuple(parts) = got else {
                panic!("a tuple")
            };
            let (q, r) = (values(&parts[0]), values(&parts[1]));
            for (i, &x) in a.iter().enumerate() {
                let want = match d {
                    0 => (if signed { -1 } else { max }, x),
                    -1 if x == min => (min, 0),
                    _ => (x / d, x % d),
                };
                assert_eq!((q[i], r[i]), want, "{t}: {x} / {d}");
            }
        }
    }
}

#[test]
fn complex_absolute_values_match_the_interpreter_bit_for_bit() {
    use oxla_hlo::num_complex::Complex32;
    // Parts over the whole f32 range: random bit patterns (NaNs, infinities,
    // subnormals, huge and tiny values), Pythagorean triples, and values
    // whose magnitude is tiny next to the other part's.
    let mut s = 11u64;
    let mut bits = || {
        s = s
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (s >> 32) as u32
    };
    let mut z: Vec<Complex32> = (0..60_000)
        .map(|_| Complex32::new(f32::from_bits(bits()), f32::from_bits(bits())))
        .collect();
    z.extend((1..2000).map(|k| Complex32::new(3.0 * k as f32, 4.0 * k as f32)));
    z.extend((0..2000).map(|k| Complex32::new(1.0 + k as f32, 1e-30 * k as f32)));
    z.extend([
        Complex32::new(f32::INFINITY, f32::NAN),
        Complex32::new(f32::NAN, f32::NEG_INFINITY),
        Complex32::new(f32::MAX, f32::MAX),
        Complex32::new(1e-45, -1e-45),
        Complex32::new(0.0, -0.0),
    ]);
    let n = z.len() as i64;
    let text = format!(
        "HloModule t\nENTRY e {{\n  z = c64[{n}] parameter(0)\n  ROOT a = f32[{n}] abs(z)\n}}\n"
    );
    let shape = oxla_hlo::ArrayShape::new(PrimitiveType::C64, vec![n]).unwrap();
    let args = [Literal::Array(
        ArrayLiteral::new(shape, ArrayData::C64(z)).unwrap(),
    )];
    let (got, want) = run_both(&text, &args);
    assert!(
        got.bitwise_eq(&want),
        "c64 abs differs from the interpreter"
    );
    let listing = oxla_cpu::compile(&oxla_text::parse_module(&text).unwrap())
        .unwrap()
        .describe();
    assert!(listing.contains("(typed)"), "{listing}");
}

/// Rows shorter than a tile run several to a tile (`Packing`): leaves read
/// in place across rows, splats, rows broadcast down the others (gathered
/// once), column broadcasts, transposed, iota, pred and bf16 leaves
/// (gathered row by row), blocks that stop where the second-innermost
/// dimension wraps, and threads' shares that start mid-run.
#[test]
fn short_rows_run_several_to_a_tile() {
    let body = |n: usize, c: usize, l: usize| {
        format!(
            "  x = f32[{n},{c},{l}] parameter(0)\n  v = f32[{l}] parameter(1)\n  w = f32[{n},{c}] parameter(2)\n  y = f32[{l},{c},{n}] parameter(3)\n  p = pred[{n},{c},{l}] parameter(4)\n  h = bf16[{n},{c},{l}] parameter(5)\n  vb = f32[{n},{c},{l}] broadcast(v), dimensions={{2}}\n  wb = f32[{n},{c},{l}] broadcast(w), dimensions={{0,1}}\n  yt = f32[{n},{c},{l}] transpose(y), dimensions={{2,1,0}}\n  i = f32[{n},{c},{l}] iota(), iota_dimension=2\n  j = f32[{n},{c},{l}] iota(), iota_dimension=0\n  hf = f32[{n},{c},{l}] convert(h)\n  k = f32[] constant(0.5)\n  kb = f32[{n},{c},{l}] broadcast(k), dimensions={{}}\n  a = f32[{n},{c},{l}] subtract(x, vb)\n  b = f32[{n},{c},{l}] multiply(a, wb)\n  d = f32[{n},{c},{l}] add(b, yt)\n  e = f32[{n},{c},{l}] multiply(i, kb)\n  f = f32[{n},{c},{l}] add(d, e)\n  g = f32[{n},{c},{l}] subtract(f, j)\n  q = f32[{n},{c},{l}] select(p, g, hf)\n"
        )
    };
    let add = "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] add(a, b)\n}\nmax {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT c = f32[] maximum(a, b)\n}\n";
    for (n, c, l) in [(2000, 3, 48), (700, 7, 5), (50, 3, 64), (3, 2, 3)] {
        let elementwise = format!(
            "HloModule t\nENTRY e {{\n{}  ROOT r = f32[{n},{c},{l}] multiply(q, q)\n}}\n",
            body(n, c, l)
        );
        check(&elementwise, 0.0);
        for (dims, out) in [
            ("0,1", format!("{l}")),
            ("2", format!("{n},{c}")),
            ("0,2", format!("{c}")),
        ] {
            for (op, rtol) in [("add", 1e-3), ("max", 0.0)] {
                let init = if op == "add" { "0" } else { "-inf" };
                check(
                    &format!(
                        "HloModule t\n{add}ENTRY e {{\n{}  z = f32[] constant({init})\n  ROOT r = f32[{out}] reduce(q, z), dimensions={{{dims}}}, to_apply={op}\n}}\n",
                        body(n, c, l)
                    ),
                    rtol,
                );
            }
        }
    }
    // f64, where a tile holds half as many bytes.
    check(
        "HloModule t\nENTRY e {\n  x = f64[9000,24] parameter(0)\n  v = f64[24] parameter(1)\n  vb = f64[9000,24] broadcast(v), dimensions={1}\n  ROOT s = f64[9000,24] subtract(x, vb)\n}\n",
        0.0,
    );
}

/// `jnp.floor_divide(x, d)` and `jnp.remainder(x, d)` of a signed integer
/// array by a constant, as JAX writes them (its calls inlined), with the
/// remainder's sign test in `test`: `(r < 0) != (d < 0)` is JAX's.
fn floor_module(ty: &str, n: usize, d: i64, test: &str) -> String {
    format!(
        "HloModule f
ENTRY e {{
  x = {ty}[{n}] parameter(0)
  d = {ty}[] constant({d})
  sd = {ty}[] sign(d)
  sx = {ty}[{n}] sign(x)
  sdb = {ty}[{n}] broadcast(sd), dimensions={{}}
  ne = pred[{n}] compare(sx, sdb), direction=NE
  db = {ty}[{n}] broadcast(d), dimensions={{}}
  rem = {ty}[{n}] remainder(x, db)
  zero = {ty}[] constant(0)
  zb = {ty}[{n}] broadcast(zero), dimensions={{}}
  nz = pred[{n}] compare(rem, zb), direction=NE
  both = pred[{n}] and(ne, nz)
  div = {ty}[{n}] divide(x, db)
  one = {ty}[] constant(1)
  ob = {ty}[{n}] broadcast(one), dimensions={{}}
  less = {ty}[{n}] subtract(div, ob)
  fd = {ty}[{n}] select(both, less, div)
  eq0 = pred[] compare(d, zero), direction=EQ
  d2 = {ty}[] select(eq0, one, d)
  d2b = {ty}[{n}] broadcast(d2), dimensions={{}}
  r = {ty}[{n}] remainder(x, d2b)
  lt = pred[{n}] compare(r, zb), direction={test}
  dlt = pred[] compare(d2, zero), direction=LT
  dltb = pred[{n}] broadcast(dlt), dimensions={{}}
  ne2 = pred[{n}] compare(lt, dltb), direction=NE
  nz2 = pred[{n}] compare(r, zb), direction=NE
  and2 = pred[{n}] and(ne2, nz2)
  plus = {ty}[{n}] add(r, d2b)
  fm = {ty}[{n}] select(and2, plus, r)
  ROOT t = ({ty}[{n}], {ty}[{n}]) tuple(fd, fm)
}}
"
    )
}

#[test]
fn floor_divisions_and_modulos_by_constants_share_one_floor_division() {
    let n = 70_001;
    for (ty, bits) in [("s8", 8), ("s16", 16), ("s32", 32), ("s64", 64)] {
        let (min, max) = (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1);
        // The ends of the range, values near 0, and values spread over the
        // whole range.
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let values: Vec<i128> = (0..n)
            .map(|i| match i % 8 {
                0 => [min, min + 1, max, max - 1, 0, 1, -1, 2][(i / 8) % 8],
                1 | 2 => (i as i128 % 41) - 20,
                _ => {
                    seed = seed
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    (seed as i64 as i128) >> (64 - bits)
                }
            })
            .collect();
        let data = match ty {
            "s8" => ArrayData::S8(values.iter().map(|&v| v as i8).collect()),
            "s16" => ArrayData::S16(values.iter().map(|&v| v as i16).collect()),
            "s32" => ArrayData::S32(values.iter().map(|&v| v as i32).collect()),
            _ => ArrayData::S64(values.iter().map(|&v| v as i64).collect()),
        };
        let element: PrimitiveType = ty.parse().expect("an element type");
        let shape = oxla_hlo::ArrayShape::new(element, vec![n as i64]).expect("a shape");
        let args = [Literal::Array(
            ArrayLiteral::new(shape, data).expect("values"),
        )];
        let divisors = [
            5, -5, 1, -1, 2, -2, 7, 11, 127, -128, max as i64, min as i64,
        ];
        // A module's plan, and its results, which agree with the
        // interpreter's.
        let run = |text: &str, what: &str| {
            let module = oxla_text::parse_module(text).expect("the module parses");
            let exe = oxla_cpu::compile(&module).expect("it compiles");
            let options = EvalOptions::default();
            let want =
                oxla_interp::evaluate(&module, &args, &options, &NoServices).expect("interp");
            let got = exe.execute(&args, &options, &NoServices).expect("cpu");
            assert_eq!(got, want, "{ty}: {what}");
            (exe.describe(), got)
        };
        for d in divisors.into_iter().chain((bits > 8).then_some(1000)) {
            let (plan, got) = run(&floor_module(ty, n, d, "LT"), &format!("by {d}"));
            // (A division by 1 simplifies away.) The modulo is the
            // dividend less the floor quotient times the divisor: one
            // floor division for both.
            assert!(
                d == 1 || plan.contains("1 floor divisions or modulos"),
                "{ty} by {d}: {plan}"
            );
            // Its buffers (the input and the two results at least, 12
            // bytes an element in s32) would take more than half of L1 at
            // 2048 elements a tile.
            assert!(
                d == 1 || ty != "s32" || plan.contains("1024 elements a tile"),
                "{ty} by {d}: {plan}"
            );
            // The exact values, from Euclidean division in i128.
            let Literal::Tuple(parts) = &got else {
                panic!("a tuple")
            };
            let wrap = |v: i128| {
                let m = 1i128 << bits;
                let v = v.rem_euclid(m);
                if v > max { v - m } else { v }
            };
            let floor = |x: i128| {
                let q = x.div_euclid(d as i128);
                // The Euclidean quotient is the floor for positive divisors,
                // the ceiling for negative ones.
                if d < 0 && x.rem_euclid(d as i128) != 0 {
                    q - 1
                } else {
                    q
                }
            };
            for (k, part) in parts.iter().enumerate() {
                let Literal::Array(a) = part else {
                    panic!("arrays")
                };
                for (i, &x) in values.iter().enumerate().step_by(97) {
                    let q = wrap(floor(x));
                    let want = if k == 0 {
                        q
                    } else {
                        wrap(x - floor(x) * d as i128)
                    };
                    let got = a.data().scalar(i).as_i128();
                    assert_eq!(got, want, "{ty}: {x} by {d}, result {k}");
                }
            }
        }
        // Modules of one floor division or modulo.
        let one_floor = |text: &str, what: &str| {
            let (plan, got) = run(text, what);
            assert!(
                plan.contains("1 floor divisions or modulos"),
                "{ty}, {what}: {plan}"
            );
            got
        };
        // A sign test that is not JAX's (`r > 0` for a positive divisor):
        // the modulo's selects stay.
        one_floor(&floor_module(ty, n, 5, "GT"), "GT");
        // The modulo alone (the division dead): its own floor modulo.
        let text = floor_module(ty, n, -7, "LT").replace(
            &format!("({ty}[{n}], {ty}[{n}]) tuple(fd, fm)"),
            &format!("({ty}[{n}]) tuple(fm)"),
        );
        let got = one_floor(&text, "the modulo alone");
        let Literal::Tuple(parts) = &got else {
            panic!("a tuple")
        };
        let Some(Literal::Array(a)) = parts.first() else {
            panic!("an array")
        };
        for (i, &x) in values.iter().enumerate().step_by(89) {
            // The sign of the divisor, or 0.
            let m = x.rem_euclid(7);
            let want = if m == 0 { 0 } else { m - 7 };
            assert_eq!(a.data().scalar(i).as_i128(), want, "{ty}: {x} mod -7");
        }
    }
}
