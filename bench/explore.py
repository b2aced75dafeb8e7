#!/usr/bin/env python3
"""Runs a set of ordinary JAX programs through XLA and oxla side by side.

Each program is lowered to HLO text, run by XLA (jax.jit) and by
`oxla run` on the same inputs, and timed by both (XLA: median of 30 runs;
oxla: `oxla bench`, median of 30). It prints, per program, both times,
their ratio and the largest difference from XLA's outputs relative to the
largest output value (chaotic programs, such as an RNN with large weights,
amplify rounding differences, so their weights here are small).

This is how the patterns in compare.py's `programs` group were found: a
quick survey, not a benchmark (one round, no heap settings of its own; run
it as compare.py runs XLA, with MALLOC_ARENA_MAX=1
MALLOC_MMAP_THRESHOLD_=33554432 MALLOC_TRIM_THRESHOLD_=4294967296).

    python3 bench/explore.py [NAME ...]       # all programs, or those named
    OXLA=path/to/oxla OUT=/tmp/dir python3 bench/explore.py

Writes each program's module, inputs and oxla's outputs under $OUT
(default /tmp/oxla-explore/NAME/).
"""
import os, sys, time, subprocess, re
import numpy as np, jax, jax.numpy as jnp
from jax import lax

jax.config.update("jax_enable_x64", True)
HERE = os.path.dirname(os.path.abspath(__file__))
OX = os.environ.get("OXLA", os.path.join(HERE, "..", "target", "release", "oxla"))
OUT = os.environ.get("OUT", "/tmp/oxla-explore")
r = np.random.default_rng(0)


def n(*s, dt=np.float32):
    return r.standard_normal(s).astype(dt)


cases = {}
def case(name, *args):
    def reg(f): cases[name] = (f, args); return f
    return reg

@case("attention", n(8, 256, 64), n(8, 256, 64), n(8, 256, 64))
def attention(q, k, v):
    s = jnp.einsum("hqd,hkd->hqk", q, k) / 8.0
    return jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), v)

@case("gelu_mlp", n(512, 768), n(768, 3072), n(3072, 768))
def gelu_mlp(x, w1, w2):
    return jax.nn.gelu(x @ w1) @ w2

@case("scan_rnn", n(64, 128), n(128, 128), n(100, 64, 128))
def scan_rnn(h0, w, xs):
    def step(h, x): h = jnp.tanh(h @ (w * 0.05) + x); return h, h.sum()
    return lax.scan(step, h0, xs)

@case("argsort", n(1 << 18))
def argsort(x): return jnp.argsort(x)

@case("topk", n(256, 4096))
def topk(x): return lax.top_k(x, 16)

@case("cumsum_f32", n(1024, 1024))
def cumsum_f32(x): return jnp.cumsum(x, axis=1)

@case("fft", n(64, 1024))
def fft(x): return jnp.abs(jnp.fft.rfft(x))

@case("conv_nhwc_bf16", n(8, 56, 56, 64).astype(jnp.bfloat16), n(3, 3, 64, 64).astype(jnp.bfloat16))
def conv_nhwc_bf16(x, w):
    return lax.conv_general_dilated(x, w, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))

@case("batchnorm_train", n(64, 32, 32, 64))
def batchnorm_train(x):
    m = x.mean((0, 1, 2)); v = x.var((0, 1, 2))
    return (x - m) * lax.rsqrt(v + 1e-5)

@case("logsumexp", n(4096, 1024))
def logsumexp(x): return jax.nn.logsumexp(x, axis=-1)

@case("one_hot_xent", n(1024, 1000), r.integers(0, 1000, 1024).astype(np.int32))
def one_hot_xent(logits, y):
    return -(jax.nn.one_hot(y, 1000) * jax.nn.log_softmax(logits)).sum(-1).mean()

@case("grad_mlp", n(256, 784), n(784, 512), n(512, 10))
def grad_mlp(x, w1, w2):
    def loss(w1, w2): return jnp.sum(jax.nn.relu(x @ w1) @ w2) ** 2
    return jax.grad(loss, argnums=(0, 1))(w1, w2)

@case("where_clip", n(2048, 2048))
def where_clip(x): return jnp.where(x > 0, jnp.clip(x, 0, 1), jnp.exp(x) - 1)

@case("int_ops", r.integers(-1000, 1000, (1 << 20,)).astype(np.int32))
def int_ops(x): return (x * 7 + 3) // 5 % 11, jnp.bitwise_xor(x, x >> 3)

@case("dynamic_update_loop", n(1000, 64))
def dynamic_update_loop(x):
    def body(i, acc): return lax.dynamic_update_slice(acc, x[i][None] * 2, (i, 0))
    return lax.fori_loop(0, 1000, body, jnp.zeros_like(x))

@case("layernorm_bf16_model", n(1024, 1024).astype(jnp.bfloat16), n(1024, 1024).astype(jnp.bfloat16))
def layernorm_bf16_model(x, w):
    y = x @ w
    m = y.mean(-1, keepdims=True); v = ((y - m) ** 2).mean(-1, keepdims=True)
    return (y - m) * lax.rsqrt(v + 1e-5)

@case("f64_matmul", n(512, 512, dt=np.float64), n(512, 512, dt=np.float64))
def f64_matmul(a, b): return a @ b

@case("reduce_max_axis0", n(4096, 4096))
def reduce_max_axis0(x): return x.max(0)

@case("pad_concat", n(1024, 1024))
def pad_concat(x): return jnp.concatenate([jnp.pad(x, ((1, 1), (2, 2))), jnp.pad(x, ((1, 1), (2, 2)))[::-1]], 1)

@case("gather_2d", n(1000, 1000), r.integers(0, 1000, (4096, 2)).astype(np.int32))
def gather_2d(x, idx): return x[idx[:, 0], idx[:, 1]]


def main():
    only = sys.argv[1:] or None
    for name, (f, args) in cases.items():
        if only and name not in only:
            continue
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        j = jax.jit(f)
        txt = j.lower(*args).as_text(dialect="hlo")
        with open(f"{d}/m.hlo", "w") as fh:
            fh.write(txt)
        ins = []
        for i, a in enumerate(args):
            p = f"{d}/in{i}.npy"
            a = np.asarray(a)
            # bf16 travels as its bit patterns.
            np.save(p, a.view(np.uint16) if a.dtype == jnp.bfloat16 else a)
            ins += ["--input", p]
        leaves = jax.tree_util.tree_leaves(jax.block_until_ready(j(*args)))
        ts = []
        for _ in range(30):
            t = time.perf_counter()
            jax.block_until_ready(j(*args))
            ts.append(time.perf_counter() - t)
        xla = np.median(ts) * 1e3
        od = f"{d}/out"
        os.makedirs(od, exist_ok=True)
        p = subprocess.run([OX, "run", f"{d}/m.hlo", *ins, "--output-dir", od],
                           capture_output=True, text=True)
        if p.returncode:
            print(f"{name:24s} RUN FAILED: {p.stderr.strip()[:300]}")
            continue
        worst, bad = 0.0, ""
        for i, want in enumerate(leaves):
            want = np.asarray(want)
            got = np.load(f"{od}/out{i}.npy")
            if want.dtype == jnp.bfloat16 and got.dtype == np.uint16:
                got = got.view(jnp.bfloat16)
            if got.shape != want.shape:
                bad += f" out{i} shape {got.shape} vs {want.shape}"
            elif want.dtype.kind in "iub":
                if not np.array_equal(got, want):
                    bad += f" out{i}: {np.sum(got != want)} integers differ"
            elif want.size:
                g, w = got.astype(np.float64), want.astype(np.float64)
                worst = max(worst, np.max(np.abs(g - w)) / (np.max(np.abs(w)) + 1e-30))
        p = subprocess.run([OX, "bench", f"{d}/m.hlo", *ins, "--iters", "30"],
                           capture_output=True, text=True)
        m = re.search(r"median ([0-9.]+) ms", p.stdout)
        ox = float(m.group(1)) if m else float("nan")
        print(f"{name:24s} xla {xla:8.3f} ms  oxla {ox:8.3f} ms  ratio {ox / xla:5.2f}x  "
              f"max |oxla - xla| / max |xla| {worst:.2e}{bad}", flush=True)


if __name__ == "__main__":
    main()
