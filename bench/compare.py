#!/usr/bin/env python3
"""Compare oxla against XLA's CPU backend (through JAX) on the same HLO.

Run from anywhere (paths are resolved from this file):

    python3 bench/compare.py                      # oxla --backend cpu vs XLA, all workloads
    python3 bench/compare.py --backend interp --only 'while|matmul_256'
    python3 bench/compare.py --xla-only --machine-info --json /tmp/xla.json
    python3 bench/compare.py --hlo-only           # just (re)write bench/workloads/*.hlo

For each workload in the registry below the script

1. builds it in JAX with fixed shapes and writes its HLO text,
   `jax.jit(fn, keep_unused=True).lower(*args).as_text(dialect="hlo")`, to
   bench/workloads/<name>.hlo, and its inputs as in0.npy, in1.npy, ... into a
   temporary directory (never into the repository);
2. times XLA: the compile step (`jax.jit(fn).lower(*args).compile()` after
   `jax.clear_caches()`; the table shows `.compile()`, the JSON also has the
   lowering time), then N runs of `compiled(*args)` on arrays placed with
   `jax.device_put`, after a warm-up;
3. times oxla on the same HLO file and inputs with
   `oxla bench MODULE --backend B --iters N --compile-reps R --json --input ...`
   (R compiles in the one process, the median reported, as on XLA's side: the
   first compile of a process also faults in the compiler's own code pages,
   which XLA's side pays once before its first measured compile);
4. checks oxla's result (`oxla run MODULE --input ... --output-dir DIR`)
   against XLA's with the workload's tolerance;
5. prints a table and the geometric mean of the oxla/XLA run-time ratios.
"""

import argparse
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from dataclasses import dataclass
from typing import Callable

os.environ.setdefault("JAX_PLATFORMS", "cpu")

# XLA allocates every run's outputs, from whichever of its threads runs the
# step. Under glibc's default heap settings the memory of a large freed
# output is often handed back to the kernel (unmapped, trimmed off a heap's
# top, or left in another thread's arena), and the next run faults its pages
# in again, about 4100 faults for 16 MiB: XLA's broadcast_add took 6 ms a
# run that way against 0.6-1.2 ms without faults, and softmax_bf16 7.4 ms
# against 2.2, depending on what the process had compiled before. One arena
# and no trimming make every run reuse the memory, so XLA is timed at its
# best. glibc reads these variables at start, so the script runs itself
# again with them set (oxla's processes inherit them too). 32 MiB is the
# largest mmap threshold glibc accepts: larger outputs (transpose's 64 MiB)
# are still mapped afresh on every XLA run. --glibc-heap-defaults measures
# without them.
HEAP_ENV = {"MALLOC_ARENA_MAX": "1", "MALLOC_MMAP_THRESHOLD_": str(32 << 20),
            "MALLOC_TRIM_THRESHOLD_": str(4 << 30)}
if (sys.platform.startswith("linux") and "--glibc-heap-defaults" not in sys.argv
        and any(os.environ.get(k) != v for k, v in HEAP_ENV.items())):
    os.execve(sys.executable, [sys.executable] + sys.argv, {**os.environ, **HEAP_ENV})

import numpy as np  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402

# No workload needs 64-bit types, so x64 stays off (f32 and s32 throughout).

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
WORKLOAD_DIR = os.path.join(HERE, "workloads")
DEFAULT_BIN = os.path.join(REPO, "target", "release", "oxla")

F32 = np.float32


# --------------------------------------------------------------------------
# The workloads
# --------------------------------------------------------------------------

@dataclass
class Workload:
    name: str
    fn: Callable                   # the JAX function (all arguments are arrays)
    make_args: Callable            # rng -> list of numpy arrays, in parameter order
    rtol: float                    # |oxla - xla| <= max(atol, rtol * |xla|) elementwise
    atol: float
    hlo_ops: tuple = ()            # opcodes the HLO must contain
    note: str = ""
    group: str = "issue"           # "issue": the workloads issue 7 names; "linalg": LAPACK calls


REGISTRY: list = []


def workload(name, make_args, rtol, atol, hlo_ops=(), note="", group="issue"):
    """Decorator: registers `fn` as a workload."""
    def register(fn):
        REGISTRY.append(Workload(name, fn, make_args, rtol, atol, tuple(hlo_ops), note, group))
        return fn
    return register


def normal(rng, shape, scale=1.0):
    return (rng.standard_normal(shape, dtype=F32) * F32(scale)).astype(F32)


# Tolerances. Exact ops (adds of two values, selection, sorting, copying) must
# agree bit for bit; transcendental elementwise ops within a few ulp (the
# atol covers a*b+c with or without FMA near zero); anything that sums (and
# thus depends on the order of additions) within rtol 1e-3.
EXACT = dict(rtol=0.0, atol=0.0)
ELEMENTWISE = dict(rtol=1e-5, atol=1e-5)
REDUCTION = dict(rtol=1e-3, atol=1e-4)


@workload("fused_tanh", lambda r: [normal(r, (4194304,)) for _ in range(3)], **ELEMENTWISE,
          hlo_ops=("multiply", "add", "tanh"), note="tanh(a*b+c), 3 x f32[4194304]")
def fused_tanh(a, b, c):
    return jnp.tanh(a * b + c)


@workload("broadcast_add", lambda r: [normal(r, (4096, 1024)), normal(r, (1024,))], **EXACT,
          hlo_ops=("broadcast", "add"), note="f32[4096,1024] + f32[1024]")
def broadcast_add(x, y):
    return x + y


@workload("reduce_sum_axis0", lambda r: [normal(r, (4096, 4096))], rtol=1e-3, atol=1e-3,
          hlo_ops=("reduce",), note="sum of f32[4096,4096] over axis 0")
def reduce_sum_axis0(x):
    return jnp.sum(x, axis=0)


@workload("reduce_sum_axis1", lambda r: [normal(r, (4096, 4096))], rtol=1e-3, atol=1e-3,
          hlo_ops=("reduce",), note="sum of f32[4096,4096] over axis 1")
def reduce_sum_axis1(x):
    return jnp.sum(x, axis=1)


@workload("softmax", lambda r: [normal(r, (4096, 1024), 2.0)], rtol=1e-3, atol=1e-7,
          hlo_ops=("reduce", "exponential", "divide"), note="softmax over the last axis of f32[4096,1024]")
def softmax(x):
    return jax.nn.softmax(x, axis=-1)


@workload("layer_norm",
          lambda r: [normal(r, (4096, 1024), 3.0) + F32(1.0), normal(r, (1024,)) + F32(1.0), normal(r, (1024,))],
          **REDUCTION, hlo_ops=("reduce", "rsqrt"),
          note="layer norm over the last axis of f32[4096,1024], scale and bias f32[1024], eps 1e-5")
def layer_norm(x, scale, bias):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    centered = x - mean
    var = jnp.mean(centered * centered, axis=-1, keepdims=True)
    return centered * lax.rsqrt(var + F32(1e-5)) * scale + bias


def _matmul_args(n):
    # b is scaled by 1/sqrt(K) so the products are O(1).
    return lambda r: [normal(r, (n, n)), normal(r, (n, n), 1.0 / math.sqrt(n))]


def matmul(a, b):
    return jnp.dot(a, b)


for _n in (256, 1024, 2048):
    workload(f"matmul_{_n}", _matmul_args(_n), **REDUCTION, hlo_ops=("dot",),
             note=f"f32[{_n},{_n}] x f32[{_n},{_n}]")(matmul)


def _matvec_args(r):
    return [normal(r, (4096, 4096), 1.0 / 64.0), normal(r, (4096,))]


@workload("matvec", _matvec_args, **REDUCTION, hlo_ops=("dot",),
          note="f32[4096,4096] x f32[4096]: bandwidth-bound, one pass over the matrix")
def matvec(a, x):
    return a @ x


@workload("vecmat", _matvec_args, **REDUCTION, hlo_ops=("dot",),
          note="f32[4096] x f32[4096,4096]: the matrix read by rows into every output")
def vecmat(a, x):
    return x @ a


def _mlp_args(r):
    sizes = [784, 1024, 1024, 10]
    args = [normal(r, (256, 784))]
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        args += [normal(r, (fan_in, fan_out), math.sqrt(2.0 / fan_in)), normal(r, (fan_out,), 0.1)]
    return args


@workload("mlp", _mlp_args, **REDUCTION, hlo_ops=("dot", "maximum"),
          note="MLP 784-1024-1024-10, batch 256, relu, returns logits")
def mlp(x, w1, b1, w2, b2, w3, b3):
    h = jax.nn.relu(x @ w1 + b1)
    h = jax.nn.relu(h @ w2 + b2)
    return h @ w3 + b3


@workload("conv2d", lambda r: [normal(r, (8, 64, 56, 56)), normal(r, (64, 64, 3, 3), 1.0 / 24.0)],
          **REDUCTION, hlo_ops=("convolution",),
          note="NCHW f32[8,64,56,56] * OIHW f32[64,64,3,3], stride 1, SAME")
def conv2d(x, w):
    return lax.conv_general_dilated(x, w, window_strides=(1, 1), padding="SAME",
                                    dimension_numbers=("NCHW", "OIHW", "NCHW"))


def maxpool(x):
    # 3x3 window, stride 2, SAME padding: [8,64,112,112] -> [8,64,56,56]
    # (pads one row/column of -inf at the high end of each spatial axis).
    return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 3, 3), (1, 1, 2, 2), "SAME")


workload("maxpool", lambda r: [normal(r, (8, 64, 112, 112))], **EXACT, hlo_ops=("reduce-window",),
         note="max-pool 3x3 stride 2 SAME on f32[8,64,112,112]")(maxpool)


@workload("maxpool_grad", lambda r: [normal(r, (8, 64, 112, 112)), normal(r, (8, 64, 56, 56))],
          rtol=1e-6, atol=1e-6, hlo_ops=("select-and-scatter",),
          note="d/dx sum(maxpool(x) * g): select-and-scatter (overlapping windows add up to 4 values)")
def maxpool_grad(x, g):
    return jax.grad(lambda x: jnp.sum(maxpool(x) * g))(x)


@workload("sort_1m", lambda r: [normal(r, (1 << 20,))], **EXACT, hlo_ops=("sort",),
          note="jnp.sort of f32[1048576]")
def sort_1m(x):
    return jnp.sort(x)


@workload("while_loop", lambda r: [np.zeros(10, F32), np.arange(1, 11, dtype=F32)], **EXACT,
          hlo_ops=("while",),
          note="the spec's While: 1000 iterations of (s32 i, f32[10] acc) -> (i+1, acc+v); acc0 and v are inputs")
def while_loop(acc0, v):
    return lax.while_loop(lambda s: s[0] < 1000, lambda s: (s[0] + 1, s[1] + v), (jnp.int32(0), acc0))


@workload("gather_rows",
          lambda r: [normal(r, (50000, 256)), r.integers(0, 50000, (16384,), dtype=np.int32)],
          **EXACT, hlo_ops=("gather",),
          note="embedding lookup: 16384 rows of f32[50000,256] at random s32 indices")
def gather_rows(table, idx):
    return table[idx]


@workload("scatter_add_rows",
          lambda r: [normal(r, (16384, 256)), r.integers(0, 4096, (16384,), dtype=np.int32)],
          **REDUCTION, hlo_ops=("scatter",),
          note="segment sum: 16384 rows of f32[16384,256] added into f32[4096,256] at random s32 indices")
def scatter_add_rows(rows, idx):
    return jnp.zeros((4096, 256), F32).at[idx].add(rows)


@workload("prng_uniform", lambda r: [np.asarray([0, 42], dtype=np.uint32)], **EXACT,
          hlo_ops=("shift-left", "while"),
          note="jax.random.uniform of f32[1048576] from raw threefry key data u32[2]")
def prng_uniform(key):
    return jax.random.uniform(jax.random.wrap_key_data(key), (1 << 20,))


@workload("prng_rbg_uniform", lambda r: [np.asarray([0, 42, 0, 7], dtype=np.uint32)], **EXACT,
          hlo_ops=("rng-bit-generator",),
          note="jax.random.uniform of f32[1048576] from an rbg key (rng-bit-generator, Philox on CPU)")
def prng_rbg_uniform(key):
    return jax.random.uniform(jax.random.wrap_key_data(key, impl="rbg"), (1 << 20,))


@workload("argmax_rows", lambda r: [normal(r, (4096, 1000))], **EXACT, hlo_ops=("reduce",),
          note="jnp.argmax over the last axis of f32[4096,1000] (a reduce of values and an iota)")
def argmax_rows(x):
    return jnp.argmax(x, axis=1)


@workload("int_sum_rows", lambda r: [r.integers(-1000, 1000, (4096, 1000), dtype=np.int32)],
          **EXACT, hlo_ops=("reduce",),
          note="jnp.sum over the last axis of s32[4096,1000] (wrapping integer sums)")
def int_sum_rows(x):
    return jnp.sum(x, axis=1)


@workload("cnn_grad_nhwc",
          lambda r: [normal(r, (3, 3, 16, 32), 0.1), normal(r, (8, 32, 32, 16))], **REDUCTION,
          hlo_ops=("convolution", "select-and-scatter"),
          note="weight gradient of an NHWC conv 3x3 16->32, relu, 2x2 max-pool, mean, on [8,32,32,16]")
def cnn_grad_nhwc(w, x):
    def f(w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        y = jax.nn.relu(y)
        y = lax.reduce_window(y, -jnp.inf, lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
        return jnp.mean(y, axis=(1, 2)).sum()
    return jax.grad(f)(w)


@workload("depthwise_grad_nhwc",
          lambda r: [normal(r, (3, 3, 1, 64), 0.3), normal(r, (16, 56, 56, 64))], **REDUCTION,
          hlo_ops=("convolution",),
          note="weight gradient of a depthwise NHWC conv 3x3 over 64 channels, relu, mean, on [16,56,56,64]")
def depthwise_grad_nhwc(w, x):
    def f(w):
        y = lax.conv_general_dilated(x, w, (1, 1), "SAME", feature_group_count=64,
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
        return jnp.mean(jax.nn.relu(y))
    return jax.grad(f)(w)


@workload("transpose", lambda r: [normal(r, (4096, 4096))], **EXACT, hlo_ops=("transpose",),
          note="f32[4096,4096] transposed (the result has the default layout, so it is a real copy)")
def transpose(x):
    return jnp.transpose(x)


# Linear algebra: JAX lowers these to LAPACK custom-calls, which XLA runs
# through LAPACK (jaxlib's kernels) and oxla natively. Reported as their own
# group, beside the workloads. Eigen- and singular vectors are only
# defined up to sign, so those two return the matrix rebuilt from them (one
# extra 256^3 product on both sides) with the values.

def _well_conditioned(n, cols=None):
    def make(r):
        a = normal(r, (n, n), 1.0 / math.sqrt(n)) + 2 * np.eye(n, dtype=F32)
        return [a] if cols is None else [a, normal(r, (n, cols))]
    return make


def _spd(n):
    def make(r):
        g = normal(r, (n, n), 1.0 / math.sqrt(n))
        return [(g @ g.T + np.eye(n, dtype=F32)).astype(F32)]
    return make


LINALG = dict(rtol=1e-3, atol=1e-4, group="linalg")


@workload("cholesky_1024", _spd(1024), **LINALG, note="jnp.linalg.cholesky of an SPD f32[1024,1024] (potrf)")
def cholesky_1024(a):
    return jnp.linalg.cholesky(a)


@workload("solve_1024", _well_conditioned(1024, 16), **LINALG,
          note="jnp.linalg.solve, f32[1024,1024] with 16 right-hand sides (getrf + trsm)")
def solve_1024(a, b):
    return jnp.linalg.solve(a, b)


@workload("inv_512", _well_conditioned(512), **LINALG, note="jnp.linalg.inv of f32[512,512] (getrf + trsm)")
def inv_512(a):
    return jnp.linalg.inv(a)


@workload("triangular_solve_1024",
          lambda r: [np.tril(normal(r, (1024, 1024), 1.0 / 32)) + 2 * np.eye(1024, dtype=F32),
                     normal(r, (1024, 256))], **LINALG,
          note="lower triangular f32[1024,1024] solve with 256 right-hand sides (trsm)")
def triangular_solve_1024(a, b):
    return jax.scipy.linalg.solve_triangular(a, b, lower=True)


@workload("qr_512", lambda r: [normal(r, (512, 512))], **LINALG, note="jnp.linalg.qr of f32[512,512] (geqrf + orgqr)")
def qr_512(a):
    return jnp.linalg.qr(a)


@workload("eigh_256", lambda r: [(lambda g: (g + g.T) / 2)(normal(r, (256, 256)))], **LINALG,
          note="jnp.linalg.eigh of symmetric f32[256,256] (syevd): values and V diag(w) V^T")
def eigh_256(a):
    w, v = jnp.linalg.eigh(a)
    return w, (v * w) @ v.T


@workload("eigh_1024", lambda r: [(lambda g: (g + g.T) / 2)(normal(r, (1024, 1024)))], **LINALG,
          note="jnp.linalg.eigh of symmetric f32[1024,1024] (syevd): values and V diag(w) V^T")
def eigh_1024(a):
    w, v = jnp.linalg.eigh(a)
    return w, (v * w) @ v.T


@workload("svd_256", lambda r: [normal(r, (256, 256))], **LINALG,
          note="jnp.linalg.svd of f32[256,256] (gesdd): values and U diag(s) V^T")
def svd_256(a):
    u, s_, vt = jnp.linalg.svd(a)
    return s_, (u * s_) @ vt


# Other element types: half-precision arithmetic and integer scans, which
# JAX programs use and which once ran through oxla's interpreter (bf16
# element-wise operations, bf16 row maxima, integer cumulative sums).
# Reported as their own group.

@workload("softmax_bf16", lambda r: [normal(r, (4096, 1024), 2.0)], rtol=2e-2, atol=1e-3,
          hlo_ops=("reduce", "exponential"), group="dtypes",
          note="softmax over the last axis of [4096,1024] in bf16 (f32 in and out)")
def softmax_bf16(x):
    return jax.nn.softmax(x.astype(jnp.bfloat16), axis=-1).astype(jnp.float32)


@workload("layer_norm_bf16", lambda r: [normal(r, (4096, 1024), 3.0) + F32(1.0)], rtol=2e-2, atol=2e-2,
          hlo_ops=("reduce", "rsqrt"), group="dtypes",
          note="layer norm (no scale) over the last axis of [4096,1024] in bf16 (f32 in and out)")
def layer_norm_bf16(x):
    h = x.astype(jnp.bfloat16)
    centered = h - h.mean(axis=-1, keepdims=True)
    var = (centered * centered).mean(axis=-1, keepdims=True)
    return (centered * lax.rsqrt(var + 1e-5)).astype(jnp.float32)


@workload("cumsum_s32", lambda r: [r.integers(0, 10, (4096, 1024)).astype(np.int32)], rtol=0.0, atol=0.0,
          hlo_ops=("reduce-window",), group="dtypes",
          note="jnp.cumsum of s32[4096,1024] along the rows (a reduce-window over the whole row)")
def cumsum_s32(x):
    return jnp.cumsum(x, axis=1)


# Patterns of JAX programs that once left oxla's fast paths: integer floor
# division and modulo (the scalar interpreter code, 180 ms for the first
# one here), a fori_loop stacking rows with dynamic-update-slice (the
# general executor, 2 us an iteration), and the magnitude of an rfft
# (planned per run, its complex abs through the interpreter); and two
# still behind XLA: an RNN scan and batch normalisation's statistics over
# short rows. Reported as their own group.

@workload("int_floordiv_mod", lambda r: [r.integers(-1000, 1000, (1 << 20,)).astype(np.int32)],
          **EXACT, hlo_ops=("divide", "remainder", "sign", "xor"), group="programs",
          note="(x * 7 + 3) // 5 % 11 and x ^ (x >> 3) on s32[1048576]")
def int_floordiv_mod(x):
    return (x * 7 + 3) // 5 % 11, jnp.bitwise_xor(x, x >> 3)


@workload("fori_rows", lambda r: [normal(r, (1000, 64))], **EXACT,
          hlo_ops=("while", "dynamic-update-slice", "dynamic-slice"), group="programs",
          note="lax.fori_loop over 1000 rows of f32[1000,64], each doubled into a zeros array")
def fori_rows(x):
    def body(i, acc):
        return lax.dynamic_update_slice(acc, x[i][None] * 2, (i, 0))
    return lax.fori_loop(0, 1000, body, jnp.zeros_like(x))


@workload("scan_rnn", lambda r: [normal(r, (64, 128)), normal(r, (128, 128), 0.05), normal(r, (100, 64, 128))],
          **REDUCTION, hlo_ops=("while", "dot", "tanh", "dynamic-update-slice"), group="programs",
          note="lax.scan of h = tanh(h @ w + x_t) over 100 steps, h f32[64,128], stacking each step's sum")
def scan_rnn(h0, w, xs):
    def step(h, x):
        h = jnp.tanh(h @ w + x)
        return h, h.sum()
    return lax.scan(step, h0, xs)


@workload("batchnorm_train", lambda r: [normal(r, (64, 32, 32, 64))], **REDUCTION,
          hlo_ops=("reduce", "rsqrt"), group="programs",
          note="batch normalisation of f32[64,32,32,64] over every axis but the channels (training: batch statistics)")
def batchnorm_train(x):
    m = x.mean((0, 1, 2))
    v = x.var((0, 1, 2))
    return (x - m) * lax.rsqrt(v + 1e-5)


@workload("rfft_abs", lambda r: [normal(r, (64, 1024))], **REDUCTION,
          hlo_ops=("fft", "abs"), group="programs",
          note="|rfft| of 64 rows of f32[64,1024]")
def rfft_abs(x):
    return jnp.abs(jnp.fft.rfft(x))


@workload("adam_update",
          lambda r: [normal(r, (4096, 1024)), normal(r, (4096, 1024)), normal(r, (4096, 1024), 0.1),
                     np.abs(normal(r, (4096, 1024), 0.01))],
          **ELEMENTWISE, hlo_ops=("sqrt", "divide", "tuple"), group="programs",
          note="one Adam step on f32[4096,1024] parameters: new parameters and both moments (a tuple)")
def adam_update(p, g, m, v):
    b1, b2, lr, eps = 0.9, 0.999, 1e-3, 1e-8
    m = b1 * m + (1 - b1) * g
    v = b2 * v + (1 - b2) * g * g
    return p - lr * m / (jnp.sqrt(v) + eps), m, v


# --------------------------------------------------------------------------
# HLO text helpers
# --------------------------------------------------------------------------

def _skip_shape(s, i):
    """Index just past the shape starting at s[i] (balanced parentheses for tuples)."""
    if s[i] == "(":
        depth = 0
        while i < len(s):
            depth += {"(": 1, ")": -1}.get(s[i], 0)
            i += 1
            if depth == 0:
                return i
        return i
    while i < len(s) and s[i] != " ":
        i += 1
    return i


def hlo_opcodes(text):
    """Opcode -> count over every instruction of an HLO module's text."""
    counts = {}
    for line in text.splitlines():
        m = re.match(r"\s*(?:ROOT\s+)?[\w.\-]+\s*=\s*", line)
        if not m:
            continue
        i = _skip_shape(line, m.end())
        op = re.match(r"\s*([a-z][a-z0-9\-]*)\(", line[i:])
        if op:
            counts[op.group(1)] = counts.get(op.group(1), 0) + 1
    return counts


def custom_call_targets(text):
    return sorted(set(re.findall(r'custom_call_target="([^"]*)"', text)))


# --------------------------------------------------------------------------
# Timing and checking
# --------------------------------------------------------------------------

def summarize(times_ms):
    return {"median": statistics.median(times_ms), "min": min(times_ms), "max": max(times_ms),
            "iters": len(times_ms)}


def time_xla(w, args, opts):
    """Compiles and runs `w` with XLA; returns (result dict, output leaves, optimized HLO)."""
    lower_ms, compile_ms = [], []
    for _ in range(max(1, opts.compile_reps)):
        jax.clear_caches()  # so the compile below is not an in-memory cache hit
        t0 = time.perf_counter()
        lowered = jax.jit(w.fn, keep_unused=True).lower(*args)
        t1 = time.perf_counter()
        compiled = lowered.compile()
        t2 = time.perf_counter()
        lower_ms.append((t1 - t0) * 1e3)
        compile_ms.append((t2 - t1) * 1e3)

    dev_args = [jax.device_put(a) for a in args]
    jax.block_until_ready(dev_args)

    def once():
        t = time.perf_counter()
        jax.block_until_ready(compiled(*dev_args))
        return time.perf_counter() - t

    out = compiled(*dev_args)
    jax.block_until_ready(out)
    leaves = [np.asarray(o) for o in jax.tree_util.tree_leaves(out)]
    del out
    # Warm-up: at least two runs and 0.1 s; the fastest warm-up run sizes N.
    warm, spent = [], 0.0
    while len(warm) < 2 or spent < 0.1:
        warm.append(once())
        spent += warm[-1]
    if opts.iters:
        n = opts.iters
    else:
        n = max(5, min(10000, math.ceil(opts.target_seconds / min(warm))))
    result = {"lower_ms": statistics.median(lower_ms), "compile_ms": statistics.median(compile_ms),
              "compile_ms_all": compile_ms, "iters": n}
    # The timed runs happen in rounds, alternating with oxla's (see main).
    return result, leaves, compiled.as_text(), once


def round_summary(medians, mins, maxes, iters):
    """One side's figures over rounds: the median of the rounds' medians."""
    return {"median": statistics.median(medians), "min": min(mins), "max": max(maxes),
            "iters": iters, "round_medians": medians}


def first_error_line(stderr, returncode):
    for line in (stderr or "").splitlines():
        if line.strip():
            line = line.strip()
            return line[len("error:"):].strip() if line.startswith("error:") else line
    return f"exit status {returncode}"


def run_oxla(cmd, timeout):
    """Runs one oxla command: (status, stdout, seconds) with status 'ok', 'timeout' or 'error: ...'."""
    t = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:  # subprocess.run kills the child it started
        return "timeout", "", time.perf_counter() - t
    except OSError as e:
        return f"error: {e}", "", time.perf_counter() - t
    seconds = time.perf_counter() - t
    if p.returncode != 0:
        return "error: " + first_error_line(p.stderr, p.returncode), p.stdout, seconds
    return "ok", p.stdout, seconds


def compare(got, want, rtol, atol):
    """(ok, detail dict) for one output leaf: |got - want| <= max(atol, rtol*|want|)."""
    if got.shape != want.shape:
        return False, {"reason": f"shape {list(got.shape)} vs XLA {list(want.shape)}"}
    if got.dtype != want.dtype:
        return False, {"reason": f"dtype {got.dtype} vs XLA {want.dtype}"}
    if got.size == 0:
        return True, {"max_abs_err": 0.0, "max_rel_err": 0.0}
    if not np.issubdtype(want.dtype, np.inexact):
        bad = int(np.count_nonzero(got != want))
        return bad == 0, {"max_abs_err": float(np.max(np.abs(got.astype(np.float64) - want))),
                          "max_rel_err": 0.0 if bad == 0 else math.inf, "bad": bad}
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_g, nan_w = np.isnan(g), np.isnan(w)
    same = (g == w) | (nan_g & nan_w)        # exact, equal infinities, NaN with NaN
    err = np.where(same, 0.0, np.abs(g - w))
    err = np.where(np.isnan(err), np.inf, err)
    floor = atol / rtol if rtol > 0 else np.finfo(want.dtype).tiny
    rel = err / np.maximum(np.abs(np.where(np.isfinite(w), w, 0.0)), floor)
    bad = err > np.maximum(atol, rtol * np.abs(np.where(np.isfinite(w), w, 0.0)))
    worst = np.unravel_index(int(np.argmax(rel)), rel.shape)
    detail = {"max_abs_err": float(np.max(err)), "max_rel_err": float(rel[worst]),
              "bad": int(np.count_nonzero(bad)),
              "worst": {"index": [int(i) for i in worst], "oxla": float(g[worst]), "xla": float(w[worst])}}
    return not bad.any(), detail


def check_outputs(outdir, want_leaves, w):
    files = sorted((f for f in os.listdir(outdir) if re.fullmatch(r"out\d+\.npy", f)),
                   key=lambda f: int(f[3:-4]))
    if len(files) != len(want_leaves):
        return f"MISMATCH ({len(files)} outputs, XLA has {len(want_leaves)})", {}
    details, status = [], "ok"
    for i, (f, want) in enumerate(zip(files, want_leaves)):
        ok, d = compare(np.load(os.path.join(outdir, f)), want, w.rtol, w.atol)
        details.append(d)
        if not ok and status == "ok":
            status = (f"MISMATCH (out{i}: {d['reason']})" if "reason" in d else
                      f"MISMATCH (out{i}: max rel err {d['max_rel_err']:.2e}, {d['bad']} bad)")
    return status, {"outputs": details}


# --------------------------------------------------------------------------
# Reporting
# --------------------------------------------------------------------------

# XLA's CPU backend hands some fusions to YNNPACK (`__ynn_fusion` in the
# optimized HLO), which evaluates them in f32 and skips the module's bf16
# roundings: bf16 softmax then equals f32 softmax of the unrounded input.
# Where oxla disagrees with such a run, the check is repeated against XLA
# with that fusion turned off, which computes what the HLO says.
NO_YNN_FLAG = "--xla_cpu_experimental_ynn_fusion_type="


def exact_reference(w, inputs, outdir):
    """XLA's outputs for `w` on the .npy `inputs` with YNNPACK fusion off, as
    leaves, computed in a child process (XLA reads XLA_FLAGS once)."""
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " " + NO_YNN_FLAG).strip()
    os.makedirs(outdir, exist_ok=True)
    cmd = [sys.executable, os.path.abspath(__file__), "--reference-of", w.name,
           "--reference-dir", outdir] + inputs
    p = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"reference run failed: {first_error_line(p.stderr, p.returncode)}")
    files = sorted((f for f in os.listdir(outdir) if re.fullmatch(r"ref\d+\.npy", f)),
                   key=lambda f: int(f[3:-4]))
    return [np.load(os.path.join(outdir, f)) for f in files]


def write_reference(name, inputs, outdir):
    """The child side of `exact_reference`."""
    w = next(w for w in REGISTRY if w.name == name)
    out = jax.jit(w.fn, keep_unused=True)(*[np.load(i) for i in inputs])
    for i, leaf in enumerate(jax.tree_util.tree_leaves(out)):
        np.save(os.path.join(outdir, f"ref{i}.npy"), np.asarray(leaf))
    return 0


def machine_info():
    info = {"platform": platform.platform(), "python": platform.python_version(),
            "jax": jax.__version__, "numpy": np.__version__,
            "xla_flags": os.environ.get("XLA_FLAGS", ""),
            "glibc_heap": {k: os.environ[k] for k in HEAP_ENV if k in os.environ}}
    try:
        import jaxlib
        info["jaxlib"] = jaxlib.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
        procs = text.strip().split("\n\n")
        first = dict(re.findall(r"^([^\t:]+)\s*:\s*(.*)$", procs[0], re.M))
        flags = set(first.get("flags", "").split())
        interesting = ["sse4_2", "avx", "avx2", "fma", "f16c", "avx512f", "avx512dq", "avx512bw", "avx512vl",
                       "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile", "amx_bf16"]
        info.update({"cpu": first.get("model name", "?"), "logical_cpus": len(procs),
                     "cache": first.get("cache size", "?"),
                     "simd": [fl for fl in interesting if fl in flags]})
    except OSError:
        pass
    caches = {}
    for index in range(8):
        base = f"/sys/devices/system/cpu/cpu0/cache/index{index}"
        try:
            level, kind, size = (open(f"{base}/{k}").read().strip() for k in ("level", "type", "size"))
        except OSError:
            break
        if kind != "Instruction":
            caches[f"L{level}"] = size
    if caches:
        info["cache"] = ", ".join(f"{k} {v}" for k, v in sorted(caches.items()))
    try:
        info["loadavg"] = open("/proc/loadavg").read().split()[:3]
    except OSError:
        pass
    return info


def fmt_ms(x):
    if not isinstance(x, (int, float)):
        return "-"
    return f"{x:.3f}" if x < 1 else f"{x:.2f}" if x < 100 else f"{x:.0f}"


def fmt_ratio(a, b):
    if not (isinstance(a, (int, float)) and isinstance(b, (int, float)) and b > 0):
        return "-"
    r = a / b
    return f"{r:.2f}x" if 0.1 <= r < 1000 else f"{r:.2g}x"


def _short(text, width=60):
    return text if len(text) <= width else text[:width - 3] + "..."


def print_table(rows, backend):
    head = ["workload", "XLA ms", f"oxla-{backend} ms", "oxla/XLA", "XLA compile ms",
            "oxla compile ms", "compile ratio", "check"]
    body = []
    for r in rows:
        x, o = r.get("xla", {}), r.get("oxla", {})
        xm, om = x.get("run_ms", {}).get("median"), o.get("run_ms", {}).get("median")
        xc, oc = x.get("compile_ms"), o.get("compile_ms")
        ostat = o.get("status", "-")
        short = _short(ostat)
        body.append([r["name"], fmt_ms(xm), fmt_ms(om) if ostat == "ok" else short, fmt_ratio(om, xm),
                     fmt_ms(xc), fmt_ms(oc) if ostat == "ok" else "-", fmt_ratio(oc, xc),
                     _short(r.get("check", "-"))])
    widths = [max(len(str(row[i])) for row in [head] + body) for i in range(len(head))]
    right = {1, 2, 3, 4, 5, 6}

    def line(row):
        return "  ".join(str(c).rjust(wd) if i in right and not str(c).startswith(("error", "timeout"))
                         else str(c).ljust(wd) for i, (c, wd) in enumerate(zip(row, widths))).rstrip()

    print(line(head))
    print("  ".join("-" * wd for wd in widths))
    for row in body:
        print(line(row))


def geomean(xs):
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


# --------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--backend", default="cpu", choices=["cpu", "interp"], help="oxla backend (default cpu)")
    ap.add_argument("--oxla-bin", default=DEFAULT_BIN, help="the oxla binary (default target/release/oxla)")
    ap.add_argument("--only", metavar="REGEX", help="run only the workloads whose name matches (re.search)")
    ap.add_argument("--list", action="store_true", help="list the workloads and exit")
    ap.add_argument("--hlo-only", action="store_true", help="write bench/workloads/*.hlo and exit (no timing)")
    ap.add_argument("--xla-only", action="store_true", help="time XLA only; skip oxla")
    ap.add_argument("--no-check", action="store_true", help="skip the correctness check against XLA")
    ap.add_argument("--iters", type=int, help="runs per workload for XLA (and for oxla --backend cpu); default: sized per workload")
    ap.add_argument("--oxla-iters", type=int,
                    help="runs per workload for oxla (default: XLA's count for cpu, 3 for interp)")
    ap.add_argument("--target-seconds", type=float, default=1.5,
                    help="time XLA's timed runs should take per workload when --iters is not given (default 1.5)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="timing rounds per workload, alternating XLA and oxla so that both meet the same "
                         "background load; each side reports the median of its rounds' medians (default 3)")
    ap.add_argument("--compile-reps", type=int, default=3,
                    help="compiles per workload on each side (XLA in-process after jax.clear_caches, oxla "
                         "inside each bench process); the table shows the median (default 3)")
    ap.add_argument("--timeout", type=float, default=20.0,
                    help="seconds allowed for each oxla command (default 20)")
    ap.add_argument("--json", metavar="PATH", help="write every number to PATH")
    ap.add_argument("--machine-info", action="store_true", help="print CPU model and SIMD flags first")
    ap.add_argument("--glibc-heap-defaults", action="store_true",
                    help="run under glibc's default heap settings, where XLA's runs may fault their outputs' "
                         "pages in afresh each time (by default the script sets MALLOC_ARENA_MAX, "
                         "MALLOC_MMAP_THRESHOLD_ and MALLOC_TRIM_THRESHOLD_ so that freed memory is reused)")
    ap.add_argument("--keep-tmp", action="store_true",
                    help="keep the temporary directory (inputs, outputs, XLA's optimized HLO)")
    ap.add_argument("--reference-of", metavar="NAME", help=argparse.SUPPRESS)
    ap.add_argument("--reference-dir", help=argparse.SUPPRESS)
    ap.add_argument("reference_inputs", nargs="*", help=argparse.SUPPRESS)
    opts = ap.parse_args()
    if opts.reference_of:
        return write_reference(opts.reference_of, opts.reference_inputs, opts.reference_dir)

    selected = [w for w in REGISTRY if not opts.only or re.search(opts.only, w.name)]
    if opts.list:
        for w in REGISTRY:
            print(f"{w.name:22} {w.group:7} {w.note}")
        return 0
    if not selected:
        print(f"no workload matches {opts.only!r}", file=sys.stderr)
        return 2
    use_oxla = not (opts.xla_only or opts.hlo_only)
    if use_oxla and not os.path.isfile(opts.oxla_bin):
        print(f"{opts.oxla_bin} does not exist; build it with `cargo build --release -p oxla-cli`, "
              "pass --oxla-bin, or use --xla-only", file=sys.stderr)
        return 2

    info = machine_info()
    if opts.machine_info:
        print(f"CPU: {info.get('cpu')} ({info.get('logical_cpus')} logical CPUs; caches {info.get('cache')})")
        print(f"SIMD: {' '.join(info.get('simd', []))}")
        print(f"load average: {' '.join(info.get('loadavg', []))}; jax {info['jax']}, numpy {info['numpy']}"
              + (f"; XLA_FLAGS={info['xla_flags']}" if info["xla_flags"] else ""))
        print()

    os.makedirs(WORKLOAD_DIR, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="oxla-bench-")
    if not opts.hlo_only:
        # Pay XLA's one-time initialisation before the first measured compile.
        jax.jit(lambda x: x + 1).lower(np.float32(1)).compile()

    rows = []
    try:
        for k, w in enumerate(selected):
            row = {"name": w.name, "note": w.note, "rtol": w.rtol, "atol": w.atol}
            rows.append(row)
            rng = np.random.default_rng(zlib.crc32(w.name.encode()))
            args = w.make_args(rng)

            hlo = jax.jit(w.fn, keep_unused=True).lower(*args).as_text(dialect="hlo")
            hlo_path = os.path.join(WORKLOAD_DIR, f"{w.name}.hlo")
            old = open(hlo_path).read() if os.path.exists(hlo_path) else None
            if old != hlo:
                with open(hlo_path, "w") as f:
                    f.write(hlo)
            ops = hlo_opcodes(hlo)
            row["hlo"] = os.path.relpath(hlo_path, REPO)
            row["hlo_opcodes"] = ops
            row["inputs"] = [{"dtype": str(a.dtype), "shape": list(a.shape)} for a in args]
            warnings = [f"HLO lacks {op}" for op in w.hlo_ops if op not in ops]
            if "custom-call" in ops and w.group != "linalg":
                warnings.append(f"HLO has custom-call {custom_call_targets(hlo)}")
            for msg in warnings:
                print(f"warning: {w.name}: {msg}", file=sys.stderr)
            row["warnings"] = warnings
            if opts.hlo_only:
                print(f"wrote {row['hlo']}")
                continue

            wdir = os.path.join(tmp, w.name)
            os.makedirs(wdir)
            inputs = []
            for i, a in enumerate(args):
                inputs.append(os.path.join(wdir, f"in{i}.npy"))
                np.save(inputs[-1], a)

            xla, want, optimized, xla_once = time_xla(w, args, opts)
            del args
            rounds = max(1, opts.rounds)
            xla_rounds = []  # (median, min, max) of each round's XLA runs

            def xla_round(count):
                t = [xla_once() * 1e3 for _ in range(max(1, count))]
                xla_rounds.append((statistics.median(t), min(t), max(t)))

            def finish_xla():
                xla["run_ms"] = round_summary([r[0] for r in xla_rounds], [r[1] for r in xla_rounds],
                                              [r[2] for r in xla_rounds], xla["iters"])
            row["xla"] = xla
            row["xla_optimized"] = {"fusions": optimized.count(" fusion("),
                                    "custom_calls": custom_call_targets(optimized),
                                    "while": " while(" in optimized}
            if opts.keep_tmp:
                with open(os.path.join(wdir, "xla_optimized.hlo"), "w") as f:
                    f.write(optimized)
            if not use_oxla:
                for _ in range(rounds):
                    xla_round(xla["iters"] // rounds)
                finish_xla()
            else:
                ins = [x for p in inputs for x in ("--input", p)]
                # Iterations: --oxla-iters, else --iters (cpu only), else XLA's count for cpu
                # and 3 for interp, both then sized below from the check's wall time.
                n = opts.oxla_iters or (opts.iters if opts.backend == "cpu" else None)
                sized = n is None
                if sized:
                    n = xla["iters"] if opts.backend == "cpu" else 3
                o = {}
                check_seconds = None
                if not opts.no_check:
                    outdir = os.path.join(wdir, "oxla_out")
                    cmd = [opts.oxla_bin, "run", hlo_path, "--backend", opts.backend, "--output-dir", outdir] + ins
                    status, _, check_seconds = run_oxla(cmd, opts.timeout)
                    if status == "ok":
                        row["check"], row["check_detail"] = check_outputs(outdir, want, w)
                        if row["check"] != "ok" and "__ynn_fusion" in optimized:
                            exact = exact_reference(w, inputs, os.path.join(wdir, "xla_exact"))
                            check, detail = check_outputs(outdir, exact, w)
                            row["check_ynn"], row["check_ynn_detail"] = row["check"], row["check_detail"]
                            row["check"], row["check_detail"] = check, detail
                            if check == "ok":
                                row["check"] = "ok (XLA without YNN)"
                    else:
                        row["check"] = status
                        row["check_error"] = status
                    o["run_wall_s"] = check_seconds
                    if status == "timeout":
                        o["status"] = "timeout"  # one execution did not fit; the bench would not either
                if "status" not in o:
                    if sized and check_seconds:
                        if opts.backend == "interp":  # fast enough: up to target-seconds of runs
                            n = max(n, min(xla["iters"], int(opts.target_seconds / check_seconds)))
                        # The check's wall time bounds one load + compile + run; keep the bench
                        # (load + compile + warm-up + n runs) within about 3/4 of the timeout.
                        n = max(1, min(n, int(0.75 * opts.timeout / check_seconds) - 1))
                    per_round = max(1, n // rounds)
                    cmd = [opts.oxla_bin, "bench", hlo_path, "--backend", opts.backend,
                           "--iters", str(per_round), "--compile-reps", str(max(1, opts.compile_reps)),
                           "--json"] + ins
                    benches = []
                    status = "ok"
                    for _ in range(rounds):
                        xla_round(xla["iters"] // rounds)
                        status, out, _ = run_oxla(cmd, opts.timeout)
                        if status != "ok":
                            break
                        try:
                            benches.append(json.loads([l for l in out.splitlines() if l.strip()][-1]))
                        except (ValueError, IndexError):
                            status = "error: unreadable bench output: " + out.strip()[:80]
                            break
                    if status == "ok":
                        runs = [b["run_ms"] for b in benches]
                        o["compile_ms"] = statistics.median(b["compile_ms"] for b in benches)
                        o["compile_first_ms_all"] = [b.get("compile_first_ms") for b in benches]
                        o["run_ms"] = round_summary([r["median"] for r in runs], [r["min"] for r in runs],
                                                    [r["max"] for r in runs], sum(r["iters"] for r in runs))
                    o["status"] = status
                    o["command"] = " ".join(cmd) + f"  (x{rounds} rounds)"
                while len(xla_rounds) < rounds:
                    xla_round(xla["iters"] // rounds)
                finish_xla()
                row["oxla"] = o
                progress = (f"[{k + 1}/{len(selected)}] {w.name}: XLA {fmt_ms(xla['run_ms']['median'])} ms "
                            f"(N={xla['run_ms']['iters']}), compile {fmt_ms(xla['compile_ms'])} ms")
                if row.get("check_error") == o["status"]:
                    row["check"] = "error (same)" if o["status"] != "timeout" else "timeout"
                if o["status"] == "ok":
                    progress += (f"; oxla {fmt_ms(o['run_ms']['median'])} ms (N={o['run_ms']['iters']}), "
                                 f"compile {fmt_ms(o['compile_ms'])} ms")
                else:
                    progress += f"; oxla {o['status']}"
                progress += f"; check {row.get('check', '-')}"
            if not use_oxla:
                progress = (f"[{k + 1}/{len(selected)}] {w.name}: XLA {fmt_ms(xla['run_ms']['median'])} ms "
                            f"(N={xla['run_ms']['iters']}), compile {fmt_ms(xla['compile_ms'])} ms")
            print(progress, file=sys.stderr, flush=True)
            if not opts.keep_tmp:
                shutil.rmtree(wdir, ignore_errors=True)
    finally:
        if opts.keep_tmp:
            print(f"temporary files kept in {tmp}", file=sys.stderr)
        else:
            shutil.rmtree(tmp, ignore_errors=True)

    if opts.hlo_only:
        return 0
    print()
    print_table(rows, opts.backend)
    for r in rows:
        if "check_ynn" in r:
            print(f"note: {r['name']}: XLA's default run (a YNNPACK fusion, in f32 without the "
                  f"module's roundings) differs from oxla: {r['check_ynn']}; the check is against "
                  f"XLA run with {NO_YNN_FLAG}")
    groups = {w.name: w.group for w in selected}

    def ratios(group=None):
        ok = [r for r in rows if r.get("oxla", {}).get("status") == "ok"
              and (group is None or groups[r["name"]] == group)]
        return ([r["oxla"]["run_ms"]["median"] / r["xla"]["run_ms"]["median"] for r in ok],
                [r["oxla"]["compile_ms"] / r["xla"]["compile_ms"] for r in ok])
    run_ratios, compile_ratios = ratios()
    gm, gc = geomean(run_ratios), geomean(compile_ratios)
    by_group = {}
    print()
    if use_oxla:
        for group in sorted(set(groups.values()), key=lambda g: g != "issue"):
            runs, compiles = ratios(group)
            g_run, g_compile = geomean(runs), geomean(compiles)
            by_group[group] = {"geomean_run_ratio": g_run, "geomean_compile_ratio": g_compile}
            print(f"{group} workloads ({len(runs)}): geometric mean of oxla/XLA run-time ratios "
                  + (fmt_ratio(g_run, 1.0) if g_run else "-") + ", of compile-time ratios "
                  + (fmt_ratio(g_compile, 1.0) if g_compile else "-"))
        print(f"all {len(run_ratios)} workload(s): run-time "
              + (fmt_ratio(gm, 1.0) if gm else "-") + ", compile-time " + (fmt_ratio(gc, 1.0) if gc else "-"))
    load = machine_info().get("loadavg")
    if load and float(load[0]) > 0.5 * info.get("logical_cpus", 1):
        print(f"note: load average {' '.join(load)} on {info.get('logical_cpus')} CPUs; "
              "other processes were running, so the timings are noisy")
    if opts.json:
        info["loadavg_after"] = load
        with open(opts.json, "w") as f:
            json.dump({"backend": None if not use_oxla else opts.backend, "oxla_bin": opts.oxla_bin,
                       "machine": info, "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                       "workloads": rows, "geomean_run_ratio": gm, "geomean_compile_ratio": gc,
                       "groups": by_group},
                      f, indent=1)
        print(f"wrote {opts.json}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
