//! Convolution against an independent naive implementation on random data:
//! the naive version materialises the dilated, padded input and the
//! reversed, dilated kernel, then slides the window; the configurations cover
//! strides, padding (negative too), lhs and rhs dilation, reversal, batch,
//! features, feature groups, batch groups, 1 to 3 spatial dimensions and
//! random dimension layouts. Values are small integers in f32, so every sum
//! is exact whatever the order.

use oxla_hlo::ir::{Attrs, ConvDimensionNumbers, Window, WindowDim};
use oxla_hlo::{Literal, Opcode, PrimitiveType, Shape};
use oxla_interp::{EvalOptions, NoServices, evaluate};

use crate::common::{CompBuilder, build_module, check_op};

/// A small deterministic generator (no dependency needed).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + (self.next() % (hi - lo + 1) as u64) as i64
    }
    fn permutation(&mut self, n: usize) -> Vec<usize> {
        let mut p: Vec<usize> = (0..n).collect();
        for i in (1..n).rev() {
            let j = self.next() as usize % (i + 1);
            p.swap(i, j);
        }
        p
    }
}

fn strides(dims: &[usize]) -> Vec<usize> {
    let mut s = vec![1; dims.len()];
    for i in (0..dims.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * dims[i + 1];
    }
    s
}

fn for_each(dims: &[usize], mut f: impl FnMut(&[usize])) {
    if dims.contains(&0) {
        return;
    }
    let mut idx = vec![0; dims.len()];
    loop {
        f(&idx);
        let mut d = dims.len();
        loop {
            if d == 0 {
                return;
            }
            d -= 1;
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
}

struct Config {
    n: usize,
    batch: usize,
    features: usize,
    out_features: usize,
    feature_groups: usize,
    batch_groups: usize,
    input: Vec<usize>,
    window: Vec<WindowDim>,
}

/// Canonical layouts: input [batch, feature, spatial...], kernel [out, in, spatial...],
/// output [batch, feature, spatial...]. Returns output dims and values.
fn naive(c: &Config, x: &[f32], k: &[f32]) -> (Vec<usize>, Vec<f32>) {
    let n = c.n;
    let in_per_group = c.features / c.feature_groups;
    // 1. The input dilated by lhs_dilate and padded (negative padding crops).
    let padded: Vec<usize> = (0..n)
        .map(|i| {
            let w = &c.window[i];
            let dilated = if c.input[i] == 0 {
                0
            } else {
                (c.input[i] as i64 - 1) * w.base_dilation + 1
            };
            (dilated + w.pad_low + w.pad_high).max(0) as usize
        })
        .collect();
    let mut pdims = vec![c.batch, c.features];
    pdims.extend(&padded);
    let mut p = vec![0f32; pdims.iter().product()];
    let mut xdims = vec![c.batch, c.features];
    xdims.extend(&c.input);
    let (ps, xs) = (strides(&pdims), strides(&xdims));
    for_each(&xdims, |idx| {
        let mut at = idx[0] * ps[0] + idx[1] * ps[1];
        for i in 0..n {
            let w = &c.window[i];
            let q = idx[2 + i] as i64 * w.base_dilation + w.pad_low;
            if q < 0 || q >= padded[i] as i64 {
                return;
            }
            at += q as usize * ps[2 + i];
        }
        let from: usize = idx.iter().zip(&xs).map(|(a, b)| a * b).sum();
        p[at] = x[from];
    });
    // 2. The kernel reversed, then dilated by rhs_dilate.
    let kdil: Vec<usize> = (0..n)
        .map(|i| ((c.window[i].size - 1) * c.window[i].window_dilation + 1) as usize)
        .collect();
    let mut kdims = vec![c.out_features, in_per_group];
    kdims.extend(c.window.iter().map(|w| w.size as usize));
    let mut kddims = vec![c.out_features, in_per_group];
    kddims.extend(&kdil);
    let (ks, kds) = (strides(&kdims), strides(&kddims));
    let mut kd = vec![0f32; kddims.iter().product()];
    for_each(&kdims, |idx| {
        let mut at = idx[0] * kds[0] + idx[1] * kds[1];
        for i in 0..n {
            let w = &c.window[i];
            let k = if w.window_reversal {
                w.size as usize - 1 - idx[2 + i]
            } else {
                idx[2 + i]
            };
            at += k * w.window_dilation as usize * kds[2 + i];
        }
        let from: usize = idx.iter().zip(&ks).map(|(a, b)| a * b).sum();
        kd[at] = k[from];
    });
    // 3. Slide the window.
    let out_spatial: Vec<usize> = (0..n)
        .map(|i| {
            if padded[i] < kdil[i] {
                0
            } else {
                (padded[i] - kdil[i]) / c.window[i].stride as usize + 1
            }
        })
        .collect();
    let mut odims = vec![c.batch / c.batch_groups, c.out_features];
    odims.extend(&out_spatial);
    let mut out = Vec::new();
    let window: Vec<usize> = kdil.clone();
    for_each(&odims, |o| {
        let (b, oz) = (o[0], o[1]);
        let g = oz / (c.out_features / c.feature_groups);
        let bg = oz / (c.out_features / c.batch_groups);
        let bin = bg * (c.batch / c.batch_groups) + b;
        let mut sum = 0f32;
        for ci in 0..in_per_group {
            let cin = g * in_per_group + ci;
            for_each(&window, |w| {
                let mut pa = bin * ps[0] + cin * ps[1];
                let mut ka = oz * kds[0] + ci * kds[1];
                for i in 0..n {
                    pa += (o[2 + i] * c.window[i].stride as usize + w[i]) * ps[2 + i];
                    ka += w[i] * kds[2 + i];
                }
                sum += p[pa] * kd[ka];
            });
        }
        out.push(sum);
    });
    (odims, out)
}

/// Reorders a canonical array (dims `canon`) into the layout where canonical
/// dimension `k` sits at position `pos[k]`.
fn permute(canon: &[usize], values: &[f32], pos: &[usize]) -> (Vec<usize>, Vec<f32>) {
    let mut dims = vec![0; canon.len()];
    for (k, &p) in pos.iter().enumerate() {
        dims[p] = canon[k];
    }
    let st = strides(&dims);
    let mut out = vec![0f32; values.len()];
    let mut i = 0;
    for_each(canon, |idx| {
        let at: usize = idx.iter().enumerate().map(|(k, &v)| v * st[pos[k]]).sum();
        out[at] = values[i];
        i += 1;
    });
    (dims, out)
}

fn array(dims: &[usize], values: Vec<f32>) -> Literal {
    Literal::from_vec(&dims.iter().map(|&d| d as i64).collect::<Vec<_>>(), values).unwrap()
}

fn random_config(r: &mut Lcg) -> Config {
    let n = [1, 1, 2, 2, 2, 3][r.range(0, 5) as usize];
    let feature_groups = if r.range(0, 2) == 0 {
        r.range(2, 3) as usize
    } else {
        1
    };
    let batch_groups = if feature_groups == 1 && r.range(0, 3) == 0 {
        2
    } else {
        1
    };
    let groups = feature_groups.max(batch_groups);
    Config {
        n,
        batch: batch_groups * r.range(1, 2) as usize,
        features: feature_groups * r.range(1, 3) as usize,
        out_features: groups * r.range(1, 2) as usize,
        feature_groups,
        batch_groups,
        input: (0..n)
            .map(|_| r.range(1, if n == 3 { 3 } else { 5 }) as usize)
            .collect(),
        window: (0..n)
            .map(|_| WindowDim {
                size: r.range(1, 3),
                stride: r.range(1, 3),
                pad_low: r.range(-1, 2),
                pad_high: r.range(-1, 2),
                window_dilation: r.range(1, 2),
                base_dilation: r.range(1, 2),
                window_reversal: r.range(0, 1) == 1,
            })
            .collect(),
    }
}

fn run_config(c: &Config, r: &mut Lcg) {
    let n = c.n;
    let mut xcanon = vec![c.batch, c.features];
    xcanon.extend(&c.input);
    let mut kcanon = vec![c.out_features, c.features / c.feature_groups];
    kcanon.extend(c.window.iter().map(|w| w.size as usize));
    let x: Vec<f32> = (0..xcanon.iter().product::<usize>())
        .map(|_| r.range(-3, 3) as f32)
        .collect();
    let k: Vec<f32> = (0..kcanon.iter().product::<usize>())
        .map(|_| r.range(-3, 3) as f32)
        .collect();
    let (ocanon, expected) = naive(c, &x, &k);
    // Random layouts for the three arrays.
    let (xpos, kpos, opos) = (
        r.permutation(n + 2),
        r.permutation(n + 2),
        r.permutation(n + 2),
    );
    let (xdims, xv) = permute(&xcanon, &x, &xpos);
    let (kdims, kv) = permute(&kcanon, &k, &kpos);
    let (odims, ov) = permute(&ocanon, &expected, &opos);
    let dnums = ConvDimensionNumbers {
        input_batch_dimension: xpos[0] as i64,
        input_feature_dimension: xpos[1] as i64,
        input_spatial_dimensions: xpos[2..].iter().map(|&d| d as i64).collect(),
        kernel_output_feature_dimension: kpos[0] as i64,
        kernel_input_feature_dimension: kpos[1] as i64,
        kernel_spatial_dimensions: kpos[2..].iter().map(|&d| d as i64).collect(),
        output_batch_dimension: opos[0] as i64,
        output_feature_dimension: opos[1] as i64,
        output_spatial_dimensions: opos[2..].iter().map(|&d| d as i64).collect(),
    };
    let xs = Shape::array(
        PrimitiveType::F32,
        xdims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
    )
    .unwrap();
    let ks = Shape::array(
        PrimitiveType::F32,
        kdims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
    )
    .unwrap();
    let os = Shape::array(
        PrimitiveType::F32,
        odims.iter().map(|&d| d as i64).collect::<Vec<_>>(),
    )
    .unwrap();
    let mut b = CompBuilder::new("conv");
    let p0 = b.param(0, xs);
    let p1 = b.param(1, ks);
    let attrs = Attrs {
        window: Some(Window {
            dims: c.window.clone(),
        }),
        conv_dnums: Some(dnums),
        feature_group_count: Some(c.feature_groups as i64),
        batch_group_count: Some(c.batch_groups as i64),
        ..Attrs::default()
    };
    let root = b.add(Opcode::Convolution, os, &[p0, p1], attrs);
    let module = build_module(vec![b.finish(root)]);
    let got = evaluate(
        &module,
        &[array(&xdims, xv), array(&kdims, kv)],
        &EvalOptions::default(),
        &NoServices,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        got.to_vec::<f32>().unwrap(),
        ov,
        "config n={n} window={:?} groups={}/{}",
        c.window,
        c.feature_groups,
        c.batch_groups
    );
}

#[test]
fn random_convolutions_match_a_naive_implementation() {
    let mut r = Lcg(0x5eed);
    let mut checked = 0;
    for _ in 0..300 {
        let c = random_config(&mut r);
        // Skip configurations whose padding crops more than the whole base.
        let ok = (0..c.n).all(|i| {
            let w = &c.window[i];
            (c.input[i] as i64 - 1) * w.base_dilation + 1 + w.pad_low + w.pad_high >= 0
        });
        if ok {
            run_config(&c, &mut r);
            checked += 1;
        }
    }
    assert!(checked > 200, "only {checked} configurations ran");
    println!("{checked} convolution configurations checked");
}

#[test]
fn spec_example_2d() {
    // 1x1x3x3 input, 1x1x2x2 kernel of ones, stride 1, no padding: 2x2 window sums.
    check_op(
        "f32[1,1,2,2]",
        "convolution",
        "window={size=2x2}, dim_labels=bf01_oi01->bf01",
        &[
            ("f32[1,1,3,3]", "{{{{1, 2, 3}, {4, 5, 6}, {7, 8, 9}}}}"),
            ("f32[1,1,2,2]", "{{{{1, 1}, {1, 1}}}}"),
        ],
        "{{{{12, 16}, {24, 28}}}}",
    );
}

#[test]
fn integer_and_half_convolutions() {
    check_op(
        "s32[1,3,1]",
        "convolution",
        "window={size=2 pad=1_1}, dim_labels=b0f_0io->b0f",
        &[
            ("s32[1,2,1]", "{{{1}, {2}}}"),
            ("s32[2,1,1]", "{{{10}}, {{1}}}"),
        ],
        "{{{1}, {12}, {20}}}",
    );
}
