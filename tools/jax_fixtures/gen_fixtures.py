#!/usr/bin/env python3
"""Generate HLO test fixtures for oxla, with XLA:CPU (through JAX) as the oracle.

Run from the repository root:

    python3 tools/jax_fixtures/gen_fixtures.py

For every case in the registry below this (re)writes tests/fixtures/jax/<case>/:

    module.hlo   jax.jit(fn, keep_unused=True).lower(*args).as_text(dialect="hlo")
    in0.npy ...  one array per entry parameter, in order
    out0.npy ... XLA:CPU's results, flattened depth-first (tree_leaves order)
    meta.json    dtypes, shapes and the comparison rule (the layout of
                 /work/shared/conformance/stablehlo-interpret/*/meta.json)

bf16 arrays are stored as uint16 bit patterns, pred as numpy bool.  The script
then writes tools/jax_fixtures/COVERAGE.md (HLO opcode -> number of cases whose
module contains it, plus every attribute name seen) and prints the same table.

A case is a small record: name, function, arguments, the main op it tests, its
tolerance, the HLO opcodes that must appear in its module, and optionally a
numpy reference used only as a self-check: the generator verifies that the
reference (correctly rounded where it matters) passes the case's own tolerance
against XLA's output, so the stated tolerances are known to be attainable.
"""

import json
import math
import os
import re
import shutil
import sys
from dataclasses import dataclass
from typing import Callable, Optional

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax import lax  # noqa: E402
from jax.extend.core import Primitive  # noqa: E402
from jax.extend.mlir import ir  # noqa: E402
from jax.extend.mlir.dialects import stablehlo as shlo  # noqa: E402
from jax.interpreters import mlir  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
OUT_DIR = os.path.join(REPO, "tests", "fixtures", "jax")
COVERAGE_MD = os.path.join(HERE, "COVERAGE.md")
SOURCE = "tools/jax_fixtures/gen_fixtures.py"

BF16 = np.dtype(ml_dtypes.bfloat16)
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
C64, C128 = np.dtype(np.complex64), np.dtype(np.complex128)
PRED = np.dtype(np.bool_)
S8, S16, S32, S64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))

class _DtypeNames(dict):
    """dtype (or scalar type) -> XLA type name."""

    def __getitem__(self, dt):
        return dict.__getitem__(self, np.dtype(dt))


XLA_NAME = _DtypeNames({
    PRED: "pred", S8: "s8", S16: "s16", S32: "s32", S64: "s64",
    U8: "u8", U16: "u16", U32: "u32", U64: "u64",
    F16: "f16", BF16: "bf16", F32: "f32", F64: "f64", C64: "c64", C128: "c128",
})
FLOATS = (F16, BF16, F32, F64)
COMPLEX = (C64, C128)

# The HLO ops the fixture set must cover (checked at the end).
REQUIRED_OPS = """
add subtract multiply divide remainder maximum minimum power atan2 and or xor not
shift-left shift-right-arithmetic shift-right-logical popcnt count-leading-zeros
compare select clamp abs negate sign ceil floor round-nearest-afz round-nearest-even
exponential exponential-minus-one log log-plus-one logistic sqrt rsqrt cbrt tanh
sine cosine tan erf is-finite real imag complex convert bitcast-convert
reduce-precision iota broadcast reshape transpose reverse slice dynamic-slice
dynamic-update-slice pad concatenate dot convolution reduce reduce-window
select-and-scatter sort gather scatter while conditional call rng-bit-generator
topk opt-barrier after-all map fft
""".split()


# --------------------------------------------------------------------------
# Tolerances.  "eq" = exact (NaN matches NaN); "close" = |a-e| <= atol + rtol*|e|.

@dataclass(frozen=True)
class Tol:
    check: str
    rtol: float = 0.0
    atol: float = 0.0


EXACT = Tol("eq")


def close(rtol, atol):
    return Tol("close", rtol, atol)


def transcendental(dt):
    """Elementwise transcendental functions: XLA:CPU uses its own polynomial
    approximations, the reference a correctly rounded libm (about 1 ulp of
    f16/bf16 allowed; f32 ~ 100 ulp; f64 ~ 5000 ulp)."""
    return {
        F16: close(2e-3, 1e-5), BF16: close(1e-2, 1e-5),
        F32: close(1e-5, 1e-6), F64: close(1e-12, 1e-13),
        C64: close(1e-5, 1e-6), C128: close(1e-12, 1e-13),
    }[np.dtype(dt)]


def summation(dt):
    """Reductions / dot / convolution with O(10) terms of magnitude O(1..10):
    the association order may differ from the reference's."""
    return {
        F16: close(1e-2, 1e-2), BF16: close(2e-2, 2e-2),
        F32: close(1e-5, 1e-5), F64: close(1e-12, 1e-12),
        C64: close(1e-5, 1e-5), C128: close(1e-12, 1e-12),
    }[np.dtype(dt)]


# --------------------------------------------------------------------------
# The case record and the registry.

@dataclass
class Case:
    name: str
    fn: Callable
    args: list
    op: str                       # main op tested (meta.json "op")
    tol: Tol = EXACT
    hlo_ops: tuple = ()           # HLO opcodes that must appear; default (op,)
    hlo_text: tuple = ()          # substrings that must appear in module.hlo
    ref: Optional[Callable] = None  # numpy reference, self-check only
    note: str = ""
    may_custom_call: bool = False  # a custom-call drops the case (reported)
    allow_denormals: bool = False  # data movement that keeps denormal bits
    source: str = ""


def case(name, fn, args, op, tol=EXACT, hlo_ops=None, hlo_text=(), ref=None,
         note="", may_custom_call=False, allow_denormals=False):
    return Case(name=name, fn=fn, args=list(args), op=op, tol=tol,
                hlo_ops=tuple(hlo_ops) if hlo_ops is not None else (op,),
                hlo_text=tuple(hlo_text), ref=ref, note=note,
                may_custom_call=may_custom_call, allow_denormals=allow_denormals)


# The custom-call targets oxla runs itself (crates/oxla-interp/src/eval/lapack.rs,
# and the sharding annotation, the identity on one device):
# cases whose only custom-calls are these are written; others are dropped.
BUILTIN_TARGET = re.compile(r"lapack_([sdcz](potrf|getrf|trsm|geqrf)|[sd](orgqr|syevd)|[cz](ungqr|heevd)|[sdcz](gesdd|gtsv))_ffi|Sharding")


# --------------------------------------------------------------------------
# Deterministic inputs.

def rng(seed):
    return np.random.default_rng(seed)


def finfo(dt):
    return ml_dtypes.finfo(np.dtype(dt))


# XLA:CPU runs with denormals flushed to zero (FTZ + DAZ) in f32 and f64
# arithmetic, and so in bf16 (computed in f32).  f16 is computed in f32 too, so
# its denormals (normal f32 numbers) survive.  General cases keep denormals of
# the FTZ types out of their inputs and exact results; the ftz_* cases pin the
# flushing down separately.
FTZ_TYPES = (BF16, F32, F64)


def is_denormal(arr):
    """Elementwise: a nonzero value below the smallest normal of its type."""
    arr = np.asarray(arr)
    if arr.dtype.kind == "c":
        return is_denormal(arr.real) | is_denormal(arr.imag)
    if arr.dtype not in FLOATS:
        return np.zeros(arr.shape, bool)
    a = np.abs(arr.astype(np.float64))
    return (a > 0) & (a < float(finfo(arr.dtype).tiny))


def float_specials(dt):
    fi = finfo(dt)
    sub, tiny, big = (float(fi.smallest_subnormal), float(fi.tiny), float(fi.max))
    sp = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, tiny, -tiny, big, -big]
    if np.dtype(dt) not in FTZ_TYPES:
        sp += [sub, -sub]
    return sp


def floats(dt, shape, seed, lo=-4.0, hi=4.0, specials=True):
    """Uniform values in [lo, hi), the first entries replaced by specials."""
    n = int(np.prod(shape))
    vals = rng(seed).uniform(lo, hi, n)
    if specials:
        sp = float_specials(dt)[:n]
        vals[:len(sp)] = sp
    with np.errstate(over="ignore"):
        return vals.astype(dt).reshape(shape)


def float_pairs(dt, extra=(), big=None):
    """All pairs of some special values (x varies slowest), for binary ops.
    The small value is the smallest denormal, except for the FTZ types, where
    it is chosen so that no exact result of the usual binary ops is denormal."""
    fi = finfo(dt)
    small = {F32: 1e-25, BF16: 1e-25, F64: 1e-200}.get(np.dtype(dt), float(fi.smallest_subnormal))
    big = float(fi.max) if big is None else big
    sp = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.5, 3.0, small, big] + list(extra)
    x, y = np.meshgrid(np.array(sp), np.array(sp), indexing="ij")
    with np.errstate(over="ignore"):
        return x.reshape(-1).astype(dt), y.reshape(-1).astype(dt)


# A large value whose reciprocal is still normal (x / big stays out of FTZ range).
BIG_NO_FTZ = {F32: 1e30, BF16: 1e30, F64: 1e300}


def int_specials(dt):
    info = np.iinfo(dt)
    vals = [info.min, info.min + 1, -2, -1, 0, 1, 2, 7, info.max - 1, info.max]
    return [v for v in vals if info.min <= v <= info.max]


def ints(dt, shape, seed, lo=None, hi=None, specials=True):
    info = np.iinfo(dt)
    lo = info.min if lo is None else lo
    hi = info.max if hi is None else hi
    n = int(np.prod(shape))
    vals = rng(seed).integers(lo, hi, size=n, endpoint=True, dtype=dt)
    if specials:
        sp = int_specials(dt)[:n]
        vals[:len(sp)] = np.array(sp, dtype=dt)
    return vals.reshape(shape)


def int_pairs(dt):
    """All pairs of the special integers (x varies slowest)."""
    sp = np.array(int_specials(dt), dtype=dt)
    x, y = np.meshgrid(sp, sp, indexing="ij")
    return x.reshape(-1), y.reshape(-1)


def bools(shape, seed):
    return rng(seed).integers(0, 2, size=shape).astype(np.bool_)


def cplx(dt, shape, seed, lo=-3.0, hi=3.0):
    r = rng(seed)
    re_ = r.uniform(lo, hi, shape)
    im_ = r.uniform(lo, hi, shape)
    return (re_ + 1j * im_).astype(dt)


def arange(dt, shape, start=0):
    return (np.arange(int(np.prod(shape))) + start).astype(dt).reshape(shape)


def scalar(dt, v):
    return np.array(v, dtype=dt)


# --------------------------------------------------------------------------
# numpy references (self-check only).

def wide(f):
    """Evaluate f in float64 / complex128 and round to the first input's dtype."""
    def ref(*xs):
        dt = xs[0].dtype
        w = np.complex128 if np.iscomplexobj(xs[0]) else np.float64
        with np.errstate(all="ignore"):
            return np.asarray(f(*[x.astype(w) for x in xs])).astype(dt)
    return ref


def same(f):
    """Evaluate f directly in the inputs' dtype (numpy is IEEE exact there)."""
    def ref(*xs):
        with np.errstate(all="ignore"):
            return f(*xs)
    return ref


def _ints_py(x):
    return [int(v) for v in x.reshape(-1)]


def xla_int_div(x, y):
    """XLA: truncating; x/0 = -1 (signed) or all ones (unsigned); MIN/-1 = MIN."""
    info = np.iinfo(x.dtype)
    out = []
    for a, b in zip(_ints_py(x), _ints_py(y)):
        if b == 0:
            out.append(-1 if info.min < 0 else info.max)
        elif a == info.min and b == -1:
            out.append(info.min)
        else:
            q = abs(a) // abs(b)
            out.append(q if (a < 0) == (b < 0) else -q)
    return np.array(out, dtype=x.dtype).reshape(x.shape)


def xla_int_rem(x, y):
    """XLA: sign of the dividend; x%0 = x; MIN % -1 = 0."""
    info = np.iinfo(x.dtype)
    out = []
    for a, b in zip(_ints_py(x), _ints_py(y)):
        if b == 0:
            out.append(a)
        elif a == info.min and b == -1:
            out.append(0)
        else:
            r = abs(a) % abs(b)
            out.append(-r if a < 0 else r)
    return np.array(out, dtype=x.dtype).reshape(x.shape)


def xla_shift(kind):
    """Shift amounts are read as unsigned; >= bit width gives 0 (or the sign)."""
    def ref(x, y):
        bits = x.dtype.itemsize * 8
        mask = (1 << bits) - 1
        signed = np.iinfo(x.dtype).min < 0
        out = []
        for a, s in zip(_ints_py(x), _ints_py(y)):
            s &= mask
            ua = a & mask
            if kind == "shl":
                r = 0 if s >= bits else (ua << s) & mask
            elif kind == "shrl":
                r = 0 if s >= bits else ua >> s
            else:
                sa = ua - (1 << bits) if ua >> (bits - 1) else ua  # top bit = sign, even if unsigned
                r = (sa >> min(s, bits - 1)) & mask
            if signed and r >= 1 << (bits - 1):
                r -= 1 << bits
            out.append(r)
        return np.array(out, dtype=x.dtype).reshape(x.shape)
    return ref


def popcount_ref(x):
    mask = (1 << (x.dtype.itemsize * 8)) - 1
    return np.array([bin(v & mask).count("1") for v in _ints_py(x)],
                    dtype=x.dtype).reshape(x.shape)


def clz_ref(x):
    bits = x.dtype.itemsize * 8
    mask = (1 << bits) - 1
    return np.array([bits - (v & mask).bit_length() for v in _ints_py(x)],
                    dtype=x.dtype).reshape(x.shape)


def round_afz_ref(x):
    with np.errstate(invalid="ignore"):
        t = np.trunc(x)
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t).astype(x.dtype)


def float_to_int_ref(dt):
    """XLA:CPU float->int convert: truncate, saturate, NaN -> 0."""
    def ref(x):
        info = np.iinfo(dt)
        xs = x.astype(np.float64)
        out = []
        for v in xs.reshape(-1):
            if math.isnan(v):
                out.append(0)
            elif v >= info.max:
                out.append(info.max)
            elif v <= info.min:
                out.append(info.min)
            else:
                out.append(int(math.trunc(v)))
        return np.array(out, dtype=dt).reshape(x.shape)
    return ref


# --------------------------------------------------------------------------
# Ops JAX's public API never emits as such (logistic, after-all, map): a tiny
# jax Primitive whose MLIR lowering is the single StableHLO op.

def _same_aval(x, *rest):
    return jax.core.ShapedArray(x.shape, x.dtype)


logistic_p = Primitive("logistic_op")
logistic_p.def_abstract_eval(_same_aval)
mlir.register_lowering(logistic_p, lambda ctx, x: [shlo.logistic(x)])


def hlo_logistic(x):
    return logistic_p.bind(x)


int_power_p = Primitive("power_op")
int_power_p.def_abstract_eval(_same_aval)
mlir.register_lowering(int_power_p, lambda ctx, x, y: [shlo.power(x, y)])


def hlo_power(x, y):
    """HLO power on any element type (lax.pow rejects integer bases)."""
    return int_power_p.bind(x, y)


def _lower_token_barrier(ctx, x):
    t1 = shlo.create_token()          # printed as after-all()
    t2 = shlo.after_all([t1, t1])     # after-all(t, t)
    return [shlo.OptimizationBarrierOp([x, t2]).results[0]]


token_barrier_p = Primitive("token_barrier")
token_barrier_p.def_abstract_eval(_same_aval)
mlir.register_lowering(token_barrier_p, _lower_token_barrier)


def _lower_map_fma(ctx, x, y):
    """map(x, y) with the scalar computation a*a + b."""
    scalar_t = ir.RankedTensorType.get([], x.type.element_type)
    dims = mlir.dense_int_array(list(range(len(ctx.avals_out[0].shape))))
    op = shlo.MapOp(x.type, [x, y], dimensions=dims)
    block = op.computation.blocks.append(scalar_t, scalar_t)
    with ir.InsertionPoint(block):
        a, b = block.arguments
        shlo.return_([shlo.add(shlo.multiply(a, a), b)])
    return op.results


map_fma_p = Primitive("map_fma")
map_fma_p.def_abstract_eval(_same_aval)
mlir.register_lowering(map_fma_p, _lower_map_fma)

DIRECT_NOTE = ("emitted through a one-op jax Primitive lowered straight to "
               "StableHLO, since no public jax API emits this op")


# ==========================================================================
# Case definitions.  Each function returns a list of cases; meta.json's
# "source" names the function.

def elementwise_add_sub_mul():
    cs = []
    for dt in (S8, U8, S16, U32, S64, U64):
        x, y = int_pairs(dt)
        cs.append(case(f"add_{XLA_NAME[dt]}", lax.add, [x, y], "add",
                       ref=same(lambda a, b: a + b), note="wraps on overflow"))
    for dt in FLOATS:
        x, y = float_pairs(dt)
        cs.append(case(f"add_{XLA_NAME[dt]}", lax.add, [x, y], "add",
                       ref=same(lambda a, b: a + b)))
    cs.append(case("add_c64", lax.add, [cplx(C64, (6,), 1), cplx(C64, (6,), 2)], "add",
                   ref=same(lambda a, b: a + b)))
    for dt in (S32, U16, U64):
        x, y = int_pairs(dt)
        cs.append(case(f"subtract_{XLA_NAME[dt]}", lax.sub, [x, y], "subtract",
                       ref=same(lambda a, b: a - b)))
    for dt in (F32, BF16, F64):
        x, y = float_pairs(dt)
        cs.append(case(f"subtract_{XLA_NAME[dt]}", lax.sub, [x, y], "subtract",
                       ref=same(lambda a, b: a - b)))
    cs.append(case("subtract_c128", lax.sub, [cplx(C128, (5,), 3), cplx(C128, (5,), 4)],
                   "subtract", ref=same(lambda a, b: a - b)))
    for dt in (S8, U16, S32, U32, S64):
        x, y = int_pairs(dt)
        cs.append(case(f"multiply_{XLA_NAME[dt]}", lax.mul, [x, y], "multiply",
                       ref=same(lambda a, b: a * b), note="wraps on overflow"))
    for dt in (F16, F32, F64):
        x, y = float_pairs(dt, extra=[-0.1, 3e10])
        cs.append(case(f"multiply_{XLA_NAME[dt]}", lax.mul, [x, y], "multiply",
                       ref=same(lambda a, b: a * b)))
    cs.append(case("multiply_c64", lax.mul, [cplx(C64, (8,), 5), cplx(C64, (8,), 6)],
                   "multiply", tol=close(1e-6, 1e-6), ref=wide(lambda a, b: a * b),
                   note="complex multiply: XLA may fuse/reassociate the 4 products"))
    return cs


def elementwise_div_rem():
    cs = []
    for dt in (S8, S16, S32, S64, U8, U32, U64):
        x, y = int_pairs(dt)
        cs.append(case(f"divide_{XLA_NAME[dt]}", lax.div, [x, y], "divide",
                       ref=xla_int_div,
                       note="x/0 = -1 (signed) / all ones (unsigned); MIN/-1 = MIN"))
    for dt in FLOATS:
        x, y = float_pairs(dt, extra=[7.0, -1e-3], big=BIG_NO_FTZ.get(dt))
        cs.append(case(f"divide_{XLA_NAME[dt]}", lax.div, [x, y], "divide",
                       ref=same(lambda a, b: a / b)))
    cs.append(case("divide_c64", lax.div, [cplx(C64, (8,), 7), cplx(C64, (8,), 8)],
                   "divide", tol=close(1e-6, 1e-6), ref=wide(lambda a, b: a / b)))
    cs.append(case("divide_c128", lax.div, [cplx(C128, (8,), 9), cplx(C128, (8,), 10)],
                   "divide", tol=close(1e-14, 1e-15), ref=wide(lambda a, b: a / b)))
    for dt in (S8, S32, S64, U16, U32):
        x, y = int_pairs(dt)
        cs.append(case(f"remainder_{XLA_NAME[dt]}", lax.rem, [x, y], "remainder",
                       ref=xla_int_rem,
                       note="sign follows the dividend; x%0 = x; MIN % -1 = 0"))
    for dt in (F16, F32, F64):
        x, y = float_pairs(dt, extra=[7.25, -0.75])
        cs.append(case(f"remainder_{XLA_NAME[dt]}", lax.rem, [x, y], "remainder",
                       ref=same(np.fmod), note="C fmod semantics"))
    return cs


def elementwise_max_min():
    cs = []
    for dt in (F32, F64, F16, BF16):
        x, y = float_pairs(dt)
        cs.append(case(f"maximum_{XLA_NAME[dt]}", lax.max, [x, y], "maximum",
                       ref=same(np.maximum), note="NaN propagates"))
        cs.append(case(f"minimum_{XLA_NAME[dt]}", lax.min, [x, y], "minimum",
                       ref=same(np.minimum), note="NaN propagates"))
    for dt in (S8, U32, S64, U64):
        x, y = int_pairs(dt)
        cs.append(case(f"maximum_{XLA_NAME[dt]}", lax.max, [x, y], "maximum",
                       ref=same(np.maximum)))
        cs.append(case(f"minimum_{XLA_NAME[dt]}", lax.min, [x, y], "minimum",
                       ref=same(np.minimum)))
    cs.append(case("maximum_pred", lax.max, [np.array([0, 0, 1, 1], bool),
                                              np.array([0, 1, 0, 1], bool)],
                   "maximum", ref=same(np.maximum)))
    return cs


def elementwise_power_atan2():
    cs = []
    x = np.array([2.0, -2.0, 0.5, 0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan,
                  3.0, 10.0, 1e-3, 1.5, -8.0, 2.0], np.float64)
    y = np.array([3.0, 3.0, -2.0, -1.0, -3.0, np.nan, np.inf, -0.5, 3.0, 0.0,
                  0.5, -3.5, 2.5, 30.0, 1.0 / 3.0, 0.0], np.float64)
    for dt in (F32, F64, F16):
        cs.append(case(f"power_{XLA_NAME[dt]}", lax.pow, [x.astype(dt), y.astype(dt)],
                       "power", tol=transcendental(dt), ref=wide(np.power),
                       note="pow special cases (C99 Annex F)"))
    xr = floats(F32, (24,), 11, 0.1, 8.0, specials=False)
    yr = floats(F32, (24,), 12, -6.0, 6.0, specials=False)
    cs.append(case("power_f32_random", lax.pow, [xr, yr], "power",
                   tol=transcendental(F32), ref=wide(np.power)))
    bi = np.array([2, -2, 3, 0, 1, -1, -1, 7, 2, 0], np.int32)
    ei = np.array([10, 3, -1, 0, -5, -5, 4, 11, 31, 5], np.int32)
    cs.append(case("power_s32", hlo_power, [bi, ei], "power",
                   note="integer power; negative exponents give 0 unless |base| = 1, wraps; " + DIRECT_NOTE))
    cs.append(case("power_c64", lax.pow, [cplx(C64, (6,), 13, 0.2, 2.0), cplx(C64, (6,), 14, -1.0, 1.0)],
                   "power", tol=close(1e-5, 1e-5), ref=wide(np.power)))
    for dt in (F32, F64):
        a, b = float_pairs(dt, extra=[-7.0, 0.25], big=BIG_NO_FTZ.get(dt))
        cs.append(case(f"atan2_{XLA_NAME[dt]}", lax.atan2, [a, b], "atan2",
                       tol=transcendental(dt), ref=wide(np.arctan2),
                       note="signed zeros and infinities select the quadrant"))
    cs.append(case("atan2_f16", lax.atan2, [floats(F16, (12,), 15, specials=False),
                                             floats(F16, (12,), 16, specials=False)],
                   "atan2", tol=transcendental(F16), ref=wide(np.arctan2)))
    return cs


def bitwise_ops():
    cs = []
    a, b = bools((16,), 21), bools((16,), 22)
    cs.append(case("and_pred", lax.bitwise_and, [a, b], "and", ref=same(np.logical_and)))
    cs.append(case("or_pred", lax.bitwise_or, [a, b], "or", ref=same(np.logical_or)))
    cs.append(case("xor_pred", lax.bitwise_xor, [a, b], "xor", ref=same(np.logical_xor)))
    cs.append(case("not_pred", lax.bitwise_not, [a], "not", ref=same(np.logical_not)))
    for dt in (S8, U16, S32, U64):
        x, y = ints(dt, (12,), 23), ints(dt, (12,), 24)
        n = XLA_NAME[dt]
        cs.append(case(f"and_{n}", lax.bitwise_and, [x, y], "and", ref=same(np.bitwise_and)))
        cs.append(case(f"or_{n}", lax.bitwise_or, [x, y], "or", ref=same(np.bitwise_or)))
        cs.append(case(f"xor_{n}", lax.bitwise_xor, [x, y], "xor", ref=same(np.bitwise_xor)))
        cs.append(case(f"not_{n}", lax.bitwise_not, [x], "not", ref=same(np.invert)))
    for dt in (S8, U8, S32, U32, S64, U64):
        bits = dt.itemsize * 8
        x = ints(dt, (12,), 25)
        amounts = [0, 1, 3, bits - 1, bits, bits + 1, 2 * bits, 5, 7, 2, 1, 0]
        if np.iinfo(dt).min < 0:
            amounts[-1] = -1
        s = np.array(amounts, dtype=dt)
        n = XLA_NAME[dt]
        note = "shift amounts >= bit width (and negative = huge unsigned) included"
        sra_note = note + ("; on unsigned types the top bit is still replicated"
                           if np.iinfo(dt).min == 0 else "")
        cs.append(case(f"shift_left_{n}", lax.shift_left, [x, s], "shift-left",
                       ref=xla_shift("shl"), note=note))
        cs.append(case(f"shift_right_logical_{n}", lax.shift_right_logical, [x, s],
                       "shift-right-logical", ref=xla_shift("shrl"), note=note))
        cs.append(case(f"shift_right_arithmetic_{n}", lax.shift_right_arithmetic, [x, s],
                       "shift-right-arithmetic", ref=xla_shift("shra"), note=sra_note))
    for dt in (S8, U16, S32, U64, S64):
        cs.append(case(f"popcnt_{XLA_NAME[dt]}", lax.population_count, [ints(dt, (12,), 26)],
                       "popcnt", ref=popcount_ref))
    for dt in (U8, S16, S32, U32, S64):
        x = ints(dt, (12,), 27)
        x[-1] = 0
        cs.append(case(f"clz_{XLA_NAME[dt]}", lax.clz, [x], "count-leading-zeros",
                       ref=clz_ref))
    return cs


COMPARE_FNS = {"EQ": lax.eq, "NE": lax.ne, "LT": lax.lt, "LE": lax.le, "GT": lax.gt, "GE": lax.ge}
NP_COMPARE = {"EQ": np.equal, "NE": np.not_equal, "LT": np.less, "LE": np.less_equal,
              "GT": np.greater, "GE": np.greater_equal}


def compare_select_clamp():
    cs = []
    x, y = float_pairs(F32)
    for d, f in COMPARE_FNS.items():
        cs.append(case(f"compare_{d.lower()}_f32", f, [x, y], "compare",
                       hlo_text=(f"direction={d}",), ref=same(NP_COMPARE[d]),
                       note="NaN compares unordered; -0 == +0"))
    xi, yi = int_pairs(S32)
    for d in ("LT", "GE"):
        cs.append(case(f"compare_{d.lower()}_s32", COMPARE_FNS[d], [xi, yi], "compare",
                       hlo_text=(f"direction={d}",), ref=same(NP_COMPARE[d])))
    xu, yu = int_pairs(U32)
    for d in ("LT", "GT"):
        cs.append(case(f"compare_{d.lower()}_u32", COMPARE_FNS[d], [xu, yu], "compare",
                       hlo_text=(f"direction={d}",), ref=same(NP_COMPARE[d]),
                       note="unsigned order (values >= 2^31)"))
    xu8, yu8 = int_pairs(U64)
    cs.append(case("compare_le_u64", lax.le, [xu8, yu8], "compare",
                   hlo_text=("direction=LE",), ref=same(np.less_equal)))
    xs, ys = int_pairs(S8)
    cs.append(case("compare_ne_s8", lax.ne, [xs, ys], "compare", hlo_text=("direction=NE",),
                   ref=same(np.not_equal)))
    for dt in (F16, BF16, F64):
        a, b = float_pairs(dt)
        cs.append(case(f"compare_lt_{XLA_NAME[dt]}", lax.lt, [a, b], "compare",
                       hlo_text=("direction=LT",), ref=same(np.less)))
    pa, pb = np.array([0, 0, 1, 1], bool), np.array([0, 1, 0, 1], bool)
    cs.append(case("compare_pred", lambda a, b: (lax.eq(a, b), lax.lt(a, b), lax.ge(a, b)),
                   [pa, pb], "compare", hlo_text=("direction=EQ", "direction=LT", "direction=GE"),
                   note="false < true"))
    ca = np.array([1 + 2j, np.nan, 3 - 1j, 0.0, -0.0 + 0j, 2j], np.complex64)
    cb = np.array([1 + 2j, np.nan, 3 + 1j, -0.0, 0.0, 2j], np.complex64)
    cs.append(case("compare_c64", lambda a, b: (lax.eq(a, b), lax.ne(a, b)), [ca, cb],
                   "compare", hlo_text=("direction=EQ", "direction=NE")))

    p = bools((3, 4), 31)
    for dt in (F32, S32, C64, PRED, BF16):
        if dt == PRED:
            a, b = bools((3, 4), 32), bools((3, 4), 33)
        elif dt == C64:
            a, b = cplx(C64, (3, 4), 34), cplx(C64, (3, 4), 35)
        elif dt in FLOATS:
            a, b = floats(dt, (3, 4), 36), floats(dt, (3, 4), 37)
        else:
            a, b = ints(dt, (3, 4), 38), ints(dt, (3, 4), 39)
        cs.append(case(f"select_{XLA_NAME[dt]}", lax.select, [p, a, b], "select",
                       ref=same(np.where)))
    cs.append(case("select_scalar_pred", lambda q, a, b: lax.select_n(q, b, a),
                   [np.array(True), floats(F32, (2, 3), 40), floats(F32, (2, 3), 41)], "select",
                   note="scalar predicate selects whole arrays"))
    cs.append(case("clamp_f32", lax.clamp,
                   [scalar(F32, -1.5), floats(F32, (16,), 42), scalar(F32, 2.0)], "clamp",
                   ref=same(lambda lo, v, hi: np.minimum(np.maximum(v, lo), hi)),
                   note="scalar bounds; NaN operand stays NaN"))
    lo = ints(S32, (10,), 43, -100, 0, specials=False)
    hi = ints(S32, (10,), 44, 0, 100, specials=False)
    cs.append(case("clamp_s32_arrays", lax.clamp, [lo, ints(S32, (10,), 45), hi], "clamp",
                   ref=same(lambda lo_, v, hi_: np.minimum(np.maximum(v, lo_), hi_))))
    cs.append(case("clamp_u8", lax.clamp, [scalar(U8, 10), ints(U8, (10,), 46), scalar(U8, 200)],
                   "clamp", ref=same(lambda lo_, v, hi_: np.minimum(np.maximum(v, lo_), hi_))))
    cs.append(case("clamp_f64_nan_bounds", lax.clamp,
                   [floats(F64, (6,), 47, -1, 0, specials=False), floats(F64, (6,), 48),
                    floats(F64, (6,), 49, 0, 1, specials=False)], "clamp",
                   ref=same(lambda lo_, v, hi_: np.minimum(np.maximum(v, lo_), hi_))))
    return cs


def unary_exact():
    cs = []
    for dt in (S8, S32, S64):
        cs.append(case(f"abs_{XLA_NAME[dt]}", lax.abs, [ints(dt, (10,), 51)], "abs",
                       ref=same(np.abs), note="abs(MIN) = MIN"))
        cs.append(case(f"negate_{XLA_NAME[dt]}", lax.neg, [ints(dt, (10,), 52)], "negate",
                       ref=same(np.negative), note="-MIN = MIN"))
    cs.append(case("negate_u8", lax.neg, [ints(U8, (10,), 53)], "negate",
                   ref=same(lambda a: (0 - a.astype(np.int64)).astype(np.uint8)),
                   note="unsigned negate wraps"))
    for dt in FLOATS:
        n = XLA_NAME[dt]
        x = floats(dt, (20,), 54)
        cs.append(case(f"abs_{n}", lax.abs, [x], "abs", ref=same(np.abs)))
        cs.append(case(f"negate_{n}", lax.neg, [x], "negate", ref=same(np.negative)))
        cs.append(case(f"sign_{n}", lax.sign, [x], "sign", ref=same(np.sign)))
        cs.append(case(f"is_finite_{n}", lax.is_finite, [x], "is-finite", ref=same(np.isfinite)))
    for dt in (S8, S32, S64):
        cs.append(case(f"sign_{XLA_NAME[dt]}", lax.sign, [ints(dt, (10,), 55)], "sign",
                       ref=same(np.sign)))
    cs.append(case("abs_c64", lax.abs, [cplx(C64, (8,), 56)], "abs",
                   tol=close(2e-7, 0.0), ref=wide(np.abs), note="complex abs = hypot, f32 result"))
    cs.append(case("abs_c128_big", lax.abs,
                   [np.array([3e200 + 4e200j, 1e-300 + 1e-300j, np.inf + 1j, np.nan + 0j, 0j], C128)],
                   "abs", tol=close(1e-15, 0.0), ref=wide(np.abs),
                   note="hypot must not overflow/underflow"))
    cs.append(case("negate_c128", lax.neg, [cplx(C128, (5,), 57)], "negate", ref=same(np.negative)))
    cs.append(case("sign_c64", lax.sign, [np.array([3 + 4j, 0j, -2j, 1e-30 + 1e-30j], C64)], "sign",
                   tol=close(1e-6, 1e-7), ref=wide(lambda a: np.where(a == 0, 0, a / np.abs(a))),
                   note="x / |x|, 0 -> 0"))
    rounding = [0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 0.49999997, -0.49999997, 1.0000001,
                8388607.5, -8388607.5, 16777217.0, -0.0, 0.0, np.nan, np.inf, -np.inf,
                1e-7, -1e-7, 2.7, -2.7, 1e30, 0.75, -0.25]
    for dt in FLOATS:
        n = XLA_NAME[dt]
        with np.errstate(over="ignore"):
            x = np.array(rounding, np.float64).astype(dt)
        cs.append(case(f"ceil_{n}", lax.ceil, [x], "ceil", ref=same(np.ceil)))
        cs.append(case(f"floor_{n}", lax.floor, [x], "floor", ref=same(np.floor)))
        cs.append(case(f"round_afz_{n}", lambda a: lax.round(a, lax.RoundingMethod.AWAY_FROM_ZERO),
                       [x], "round-nearest-afz", ref=round_afz_ref, note="ties away from zero"))
        cs.append(case(f"round_even_{n}", lambda a: lax.round(a, lax.RoundingMethod.TO_NEAREST_EVEN),
                       [x], "round-nearest-even", ref=same(np.rint), note="ties to even"))
    for dt in FLOATS:
        x = floats(dt, (20,), 58, 0.0, 100.0)
        cs.append(case(f"sqrt_{XLA_NAME[dt]}", lax.sqrt, [x], "sqrt", ref=same(np.sqrt),
                       note="correctly rounded; sqrt(-0) = -0, sqrt(<0) = NaN"))
    cs.append(case("sqrt_c64", lax.sqrt, [cplx(C64, (8,), 59)], "sqrt",
                   tol=close(1e-6, 1e-6), ref=wide(np.sqrt)))
    return cs


def unary_transcendental():
    cs = []

    def tcase(name, fn, ref, op, dt, lo, hi, seed, specials=True, extra=(), note=""):
        x = floats(dt, (24,), seed, lo, hi, specials)
        if extra:
            x[-len(extra):] = np.array(extra, np.float64).astype(dt)
        return case(name, fn, [x], op, tol=transcendental(dt), ref=wide(ref), note=note)

    for dt in FLOATS:
        n = XLA_NAME[dt]
        big = {F16: 11.0, BF16: 87.0, F32: 87.0, F64: 700.0}[dt]
        cs.append(tcase(f"exp_{n}", lax.exp, np.exp, "exponential", dt, -big, big + 2, 61,
                        note="large arguments overflow to inf"))
        cs.append(tcase(f"log_{n}", lax.log, np.log, "log", dt, 0.0, 1000.0, 62))
        cs.append(tcase(f"tanh_{n}", lax.tanh, np.tanh, "tanh", dt, -10.0, 10.0, 63))
        cs.append(tcase(f"sine_{n}", lax.sin, np.sin, "sine", dt, -10.0, 10.0, 64))
        cs.append(tcase(f"cosine_{n}", lax.cos, np.cos, "cosine", dt, -10.0, 10.0, 65))
    for dt in (F32, F64):
        n = XLA_NAME[dt]
        cs.append(tcase(f"expm1_{n}", lax.expm1, np.expm1, "exponential-minus-one", dt, -3, 3, 66,
                        extra=(1e-9, -1e-9, 1e-5, 20.0)))
        cs.append(tcase(f"log1p_{n}", lax.log1p, np.log1p, "log-plus-one", dt, -0.99, 10, 67,
                        extra=(1e-9, -1e-9, -1.0, -2.0)))
        cs.append(tcase(f"rsqrt_{n}", lax.rsqrt, lambda a: 1.0 / np.sqrt(a), "rsqrt", dt, 0, 100, 68))
        cs.append(tcase(f"cbrt_{n}", lax.cbrt, np.cbrt, "cbrt", dt, -100, 100, 69,
                        extra=(27.0, -8.0, 1e-30)))
        cs.append(tcase(f"tan_{n}", lax.tan, np.tan, "tan", dt, -1.5, 1.5, 70,
                        extra=(3.0, -4.0, 10.0)))
        cs.append(tcase(f"erf_{n}", lax.erf, np.vectorize(math.erf), "erf", dt, -4, 4, 71,
                        extra=(1e-8, -1e-8, 0.5)))
        cs.append(tcase(f"logistic_{n}", hlo_logistic, lambda a: 1.0 / (1.0 + np.exp(-a)),
                        "logistic", dt, -20, 20, 72, note=DIRECT_NOTE))
    cs.append(tcase("expm1_f16", lax.expm1, np.expm1, "exponential-minus-one", F16, -3, 3, 73))
    cs.append(tcase("log1p_bf16", lax.log1p, np.log1p, "log-plus-one", BF16, -0.9, 10, 74))
    cs.append(tcase("rsqrt_f16", lax.rsqrt, lambda a: 1.0 / np.sqrt(a), "rsqrt", F16, 0, 100, 75))
    cs.append(tcase("erf_f16", lax.erf, np.vectorize(math.erf), "erf", F16, -3, 3, 76))
    cs.append(tcase("logistic_f16", hlo_logistic, lambda a: 1.0 / (1.0 + np.exp(-a)),
                    "logistic", F16, -10, 10, 77, note=DIRECT_NOTE))
    cs.append(tcase("tan_bf16", lax.tan, np.tan, "tan", BF16, -1.5, 1.5, 78))
    cs.append(tcase("cbrt_f16", lax.cbrt, np.cbrt, "cbrt", F16, -100, 100, 79))
    cs.append(case("exp_c64", lax.exp, [cplx(C64, (8,), 80)], "exponential",
                   tol=transcendental(C64), ref=wide(np.exp)))
    cs.append(case("log_c128", lax.log, [cplx(C128, (8,), 81)], "log",
                   tol=transcendental(C128), ref=wide(np.log)))
    cs.append(case("exp_f32_accuracy_highest",
                   lambda a: lax.exp(a, accuracy=lax.AccuracyMode.HIGHEST),
                   [floats(F32, (8,), 82, -10, 10, specials=False)], "exponential",
                   tol=transcendental(F32), ref=wide(np.exp), hlo_text=("result_accuracy=",),
                   note="carries result_accuracy={mode=highest}"))
    cs.append(case("tanh_f32_accuracy_tolerance",
                   lambda a: lax.tanh(a, accuracy=lax.Tolerance(atol=1e-6, rtol=1e-6, ulps=2)),
                   [floats(F32, (8,), 83, -3, 3, specials=False)], "tanh",
                   tol=transcendental(F32), ref=wide(np.tanh), hlo_text=("result_accuracy=",),
                   note="carries result_accuracy={tolerance={atol=..,rtol=..,ulps=..}}"))
    cs.append(case("erf_inv_f32", lax.erf_inv, [floats(F32, (16,), 84, -0.999, 0.999, specials=False)],
                   "erf_inv", tol=close(2e-5, 1e-6), hlo_ops=("log-plus-one", "sqrt", "select"),
                   note="jax expands erf_inv into a polynomial (no HLO erf-inv op)"))
    cs.append(case("logistic_composite_f32", lax.logistic,
                   [floats(F32, (12,), 85, -20, 20, specials=False)], "logistic",
                   tol=transcendental(F32), hlo_ops=("exponential", "divide"),
                   ref=wide(lambda a: 1.0 / (1.0 + np.exp(-a))),
                   note="what lax.logistic really emits: 1/(1+exp(-x))"))
    return cs


def make_complex(x, y, dt):
    z = np.empty(x.shape, dt)
    z.real, z.imag = x, y
    return z


def complex_parts():
    cs = []
    for dt, part in ((C64, F32), (C128, F64)):
        z = cplx(dt, (6,), 91)
        z[0] = complex(np.nan, -0.0)
        z[1] = complex(-np.inf, 1.0)
        cs.append(case(f"real_{XLA_NAME[dt]}", lax.real, [z], "real", ref=same(np.real)))
        cs.append(case(f"imag_{XLA_NAME[dt]}", lax.imag, [z], "imag", ref=same(np.imag)))
        a, b = floats(part, (8,), 92), floats(part, (8,), 93)
        cs.append(case(f"complex_{XLA_NAME[dt]}", lax.complex, [a, b], "complex",
                       ref=same(lambda x, y, dt=dt: make_complex(x, y, dt))))
    cs.append(case("conj_c64", lax.conj, [cplx(C64, (4,), 94)], "complex",
                   hlo_ops=("real", "imag", "negate", "complex"), ref=same(np.conj),
                   note="lax.conj lowers to real/imag/negate/complex"))
    return cs


def conversions():
    cs = []
    f32_specials = np.array([np.nan, np.inf, -np.inf, -0.0, 0.4, -0.6, 1.5, -1.5, 127.9, 128.0,
                             -128.9, -129.0, 255.5, 256.0, 32767.5, 65535.9, 2147483520.0,
                             2147483648.0, -2147483904.0, 4294967040.0, 4294967296.0,
                             9.2e18, -9.3e18, 1.9e19, 1e-30, 3e38], np.float32)
    for dt in (S8, U8, S16, U16, S32, U32, S64, U64):
        cs.append(case(f"convert_f32_to_{XLA_NAME[dt]}", lambda a, dt=dt: lax.convert_element_type(a, dt),
                       [f32_specials], "convert", ref=float_to_int_ref(dt),
                       note="float->int truncates toward zero, saturates, NaN -> 0 (XLA:CPU)"))
    f64_vals = np.concatenate([f32_specials.astype(np.float64),
                               [9223372036854775807.0, -9223372036854775808.0, 1e300, 4.5]])
    for dt in (S32, S64, U64):
        cs.append(case(f"convert_f64_to_{XLA_NAME[dt]}", lambda a, dt=dt: lax.convert_element_type(a, dt),
                       [f64_vals], "convert", ref=float_to_int_ref(dt),
                       note="float->int truncates toward zero, saturates, NaN -> 0 (XLA:CPU)"))
    cs.append(case("convert_f16_to_s8", lambda a: lax.convert_element_type(a, np.int8),
                   [np.array([np.nan, np.inf, -np.inf, 127.5, -128.5, 300, -300, 2.75], F16)],
                   "convert", ref=float_to_int_ref(S8)))
    cs.append(case("convert_bf16_to_s32", lambda a: lax.convert_element_type(a, np.int32),
                   [np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.75, -0.0, 1e-30], BF16)],
                   "convert", ref=float_to_int_ref(S32)))

    def fconv(src, dst, x, note=""):
        return case(f"convert_{XLA_NAME[src]}_to_{XLA_NAME[dst]}",
                    lambda a: lax.convert_element_type(a, dst), [x.astype(src)], "convert",
                    ref=same(lambda a: a.astype(dst)), note=note)

    narrow = np.array([np.nan, np.inf, -np.inf, -0.0, 65504.0, 65519.0, 65520.0, 1e5,
                       6e-8, 2.9e-8, 3.1e-8, 1e-10, 1.0009765625, 1.00048828125, 1.000732421875,
                       3.3895314e38, 3.4e38, 1.00390625, 1.005859375, 0.1, -1e-30], np.float64)
    cs.append(fconv(F32, F16, narrow, "round to nearest even, overflow -> inf, f16 denormals"))
    cs.append(fconv(F32, BF16, narrow, "round to nearest even (not truncation)"))
    cs.append(fconv(F64, F32, np.concatenate([narrow, [1e300, 1e-300, 1.0000000596046448,
                                                       1.0000001788139343]]), "round to nearest even"))
    cs.append(fconv(F64, F16, narrow))
    cs.append(fconv(F64, BF16, narrow))
    cs.append(fconv(F16, F32, floats(F16, (16,), 101)))
    cs.append(fconv(BF16, F32, floats(BF16, (16,), 102)))
    cs.append(fconv(F16, BF16, floats(F16, (16,), 103, -1000, 1000)))
    cs.append(fconv(BF16, F16, floats(BF16, (16,), 104, -1000, 1000), "overflow -> inf"))
    cs.append(fconv(F32, F64, floats(F32, (16,), 105)))
    big_ints = np.array([0, 1, -1, 16777217, -16777217, 2147483647, -2147483648, 123456789,
                         33554435, 67108867], np.int64)
    cs.append(fconv(S32, F32, big_ints.astype(np.int32), "int->float rounds to nearest even"))
    cs.append(fconv(S64, F32, np.concatenate([big_ints, [2**63 - 1, -2**63, 2**53 + 1]]).astype(np.int64)))
    cs.append(fconv(S64, F64, np.array([2**53 + 1, 2**63 - 1, -2**63, 3, -3], np.int64)))
    cs.append(fconv(U64, F32, np.array([2**64 - 1, 2**63, 2**63 + 2**40 + 1, 0, 16777217], np.uint64)))
    cs.append(fconv(U32, F64, np.array([2**32 - 1, 2**31, 0, 7], np.uint32)))
    cs.append(fconv(S64, F16, np.array([65504, 65520, 70000, -70000, 2049, 2051, 0], np.int64),
                    "overflow -> inf"))
    cs.append(fconv(U8, BF16, np.arange(250, 256).astype(np.uint8)))
    cs.append(fconv(S32, S8, ints(S32, (12,), 106), "integer narrowing keeps the low bits"))
    cs.append(fconv(U8, S8, ints(U8, (10,), 107)))
    cs.append(fconv(S8, U32, ints(S8, (10,), 108), "sign extension then reinterpretation"))
    cs.append(fconv(S64, U16, ints(S64, (10,), 109)))
    cs.append(fconv(U64, S32, ints(U64, (10,), 110)))
    cs.append(fconv(U16, S64, ints(U16, (10,), 111)))
    cs.append(fconv(PRED, S32, np.array([True, False, True])))
    cs.append(fconv(PRED, F32, np.array([True, False, True])))
    cs.append(fconv(PRED, BF16, np.array([True, False])))
    cs.append(case("convert_s32_to_pred", lambda a: lax.convert_element_type(a, np.bool_),
                   [np.array([0, 1, -1, 2, 256], np.int32)], "convert", hlo_ops=("compare",),
                   ref=same(lambda a: a != 0),
                   note="jax lowers x->pred as compare(x, 0), direction=NE"))
    cs.append(fconv(F32, C64, floats(F32, (8,), 112)))
    cs.append(fconv(S32, C128, ints(S32, (6,), 113)))
    cs.append(fconv(C64, C128, cplx(C64, (6,), 114)))
    cs.append(fconv(C128, C64, np.array([1e300 + 1j, 1 / 3 + 2j / 3, 1e-50j], C128)))
    return cs


def bitcasts_and_precision():
    cs = []

    def bcast(src_arr, dst, note="", name=None):
        src = src_arr.dtype
        name = name or f"bitcast_{XLA_NAME[src]}_to_{XLA_NAME[dst]}"
        ref = None
        if src.itemsize == np.dtype(dst).itemsize:
            ref = same(lambda a: a.view(dst))
        elif src.itemsize > np.dtype(dst).itemsize:
            ref = same(lambda a: np.ascontiguousarray(a).view(dst).reshape(
                a.shape + (src.itemsize // np.dtype(dst).itemsize,)))
        else:
            ref = same(lambda a: np.ascontiguousarray(a).view(dst).reshape(a.shape[:-1]))
        return case(name, lambda a: lax.bitcast_convert_type(a, dst), [src_arr],
                    "bitcast-convert", ref=ref, note=note, allow_denormals=True)

    cs.append(bcast(floats(F32, (8,), 121), np.int32))
    cs.append(bcast(ints(U32, (8,), 122), np.float32,
                    "includes NaN and denormal patterns (bitcast keeps them)"))
    cs.append(bcast(floats(F64, (6,), 123), np.uint64))
    cs.append(bcast(ints(S64, (6,), 124), np.float64))
    cs.append(bcast(floats(F16, (6,), 125), np.int16))
    cs.append(bcast(floats(BF16, (6,), 126), np.uint16))
    cs.append(bcast(ints(U16, (6,), 127), ml_dtypes.bfloat16))
    cs.append(bcast(ints(S16, (6,), 128), np.float16))
    cs.append(bcast(floats(F32, (2, 3), 129), np.uint8,
                    "narrowing: adds a trailing dim of 4, little-endian byte order"))
    cs.append(bcast(ints(U8, (3, 4), 130), np.float32, "widening: drops the trailing dim of 4"))
    cs.append(bcast(floats(F64, (3,), 131), np.float32, "f64 -> f32[3,2] (low word first)"))
    cs.append(bcast(ints(S32, (3, 2), 132), np.int64, "s32[3,2] -> s64[3]"))
    cs.append(bcast(ints(S8, (2, 2), 133), np.float16, "s8[2,2] -> f16[2]"))

    def rp(name, x, e, m, note=""):
        return case(name, lambda a: lax.reduce_precision(a, exponent_bits=e, mantissa_bits=m), [x],
                    "reduce-precision", note=note)

    vals = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0009765625, 1.00048828125, 1.000732421875,
                     65504.0, 65519.0, 65520.0, 1e5, 6e-8, 2.9e-8, 3.1e-8, 1e-10, 0.1, -3.3,
                     3.4e38, 1.00390625, 1.005859375], np.float64)
    cs.append(rp("reduce_precision_f32_e5m10", vals.astype(F32), 5, 10, "f16-like: RNE, overflow -> inf, denormals"))
    cs.append(rp("reduce_precision_f32_e8m7", vals.astype(F32), 8, 7, "bf16-like"))
    cs.append(rp("reduce_precision_f64_e8m23", vals, 8, 23, "f32-like on f64"))
    cs.append(rp("reduce_precision_f32_e5m2", vals.astype(F32), 5, 2, "e5m2-like"))
    with np.errstate(over="ignore"):
        vals16 = vals.astype(F16)
    cs.append(rp("reduce_precision_f16_e4m3", vals16, 4, 3, "e4m3-like on f16 (IEEE-style inf)"))
    return cs


def shape_ops():
    cs = []
    cs.append(case("iota_s32", lambda: lax.iota(np.int32, 7), [], "iota"))
    cs.append(case("iota_f32", lambda: lax.iota(np.float32, 5), [], "iota"))
    cs.append(case("iota_u8_u64", lambda: (lax.iota(np.uint8, 4), lax.iota(np.uint64, 3)), [], "iota"))
    cs.append(case("iota_broadcasted_2d", lambda: lax.broadcasted_iota(np.int64, (3, 4), 0) * 10
                   + lax.broadcasted_iota(np.int64, (3, 4), 1), [], "iota",
                   hlo_ops=("iota", "broadcast")))
    x = floats(F32, (3,), 141, specials=False)
    cs.append(case("broadcast_in_dim_f32", lambda a: lax.broadcast_in_dim(a, (2, 3, 4), (1,)), [x],
                   "broadcast"))
    cs.append(case("broadcast_scalar_s64", lambda a: lax.broadcast_in_dim(a, (2, 5), ()),
                   [scalar(S64, -7)], "broadcast"))
    cs.append(case("broadcast_size1_dims_pred", lambda a: lax.broadcast_in_dim(a, (2, 3, 4), (0, 2)),
                   [bools((1, 4), 142)], "broadcast", hlo_ops=("broadcast", "reshape"),
                   note="a size-1 dim expanded: jax reshapes then broadcasts"))
    cs.append(case("reshape_f32", lambda a: lax.reshape(a, (4, 6)), [floats(F32, (2, 3, 4), 143)], "reshape"))
    cs.append(case("reshape_c64_to_scalar", lambda a: lax.reshape(a, ()), [cplx(C64, (1, 1), 144)], "reshape"))
    cs.append(case("transpose_3d_s16", lambda a: lax.transpose(a, (2, 0, 1)), [ints(S16, (2, 3, 4), 145)],
                   "transpose"))
    cs.append(case("transpose_4d_bf16", lambda a: lax.transpose(a, (3, 1, 0, 2)),
                   [floats(BF16, (2, 3, 2, 4), 146)], "transpose"))
    cs.append(case("reverse_f64", lambda a: lax.rev(a, (0, 2)), [floats(F64, (2, 3, 4), 147)], "reverse"))
    cs.append(case("reverse_u8", lambda a: lax.rev(a, (0,)), [ints(U8, (7,), 148)], "reverse"))
    cs.append(case("slice_strided_f32", lambda a: lax.slice(a, (1, 0), (6, 7), (2, 3)),
                   [floats(F32, (6, 8), 149)], "slice"))
    cs.append(case("slice_3d_s32", lambda a: lax.slice(a, (0, 1, 1), (2, 3, 4)),
                   [ints(S32, (2, 4, 5), 150)], "slice"))
    cs.append(case("slice_c128_stride", lambda a: lax.slice(a, (3,), (10,), (3,)),
                   [cplx(C128, (10,), 151)], "slice"))
    m = floats(F32, (5, 6), 152, specials=False)
    for name, i, j in (("in_range", 1, 2), ("clamped_high", 4, 9), ("clamped_big", 100000, 2**31 - 1)):
        cs.append(case(f"dynamic_slice_{name}", lambda a, p, q: lax.dynamic_slice(a, (p, q), (2, 3)),
                       [m, scalar(S32, i), scalar(S32, j)], "dynamic-slice",
                       note="XLA clamps start indices so the slice is in bounds"))
    cs.append(case("dynamic_slice_s64_idx",
                   lambda a, p, q: lax.dynamic_slice(a, (p, q), (3, 2)),
                   [ints(S8, (4, 4), 153), scalar(S64, 3), scalar(S64, -2**40)], "dynamic-slice",
                   note="s64 start indices"))
    cs.append(case("dynamic_slice_u32_idx",
                   lambda a, p, q: lax.dynamic_slice(a, (p, q), (2, 2)),
                   [ints(U16, (3, 5), 172), scalar(U32, 2**32 - 1), scalar(U32, 1)], "dynamic-slice",
                   note="unsigned start indices: 2^32-1 clamps to the last valid start"))
    cs.append(case("dynamic_slice_negative_s8_idx",
                   lambda a, p: lax.dynamic_slice(a, (p,), (3,)),
                   [floats(F16, (6,), 154), scalar(S8, -100)], "dynamic-slice",
                   note="jax wraps negative starts once (adds dim size) before XLA clamps"))
    base = floats(F32, (4, 5), 155, specials=False)
    upd = floats(F32, (2, 3), 156)
    for name, i, j in (("in_range", 1, 1), ("clamped", 3, 4), ("clamped_neg", -50, -50)):
        cs.append(case(f"dynamic_update_slice_{name}",
                       lambda a, u, p, q: lax.dynamic_update_slice(a, u, (p, q)),
                       [base, upd, scalar(S32, i), scalar(S32, j)], "dynamic-update-slice",
                       note="XLA clamps start indices so the update is in bounds"))
    cs.append(case("dynamic_update_slice_u64_idx",
                   lambda a, u, p: lax.dynamic_update_slice(a, u, (p,)),
                   [ints(S64, (6,), 157), ints(S64, (2,), 158), scalar(U64, 2**64 - 1)],
                   "dynamic-update-slice"))
    p = floats(F32, (3, 4), 159, specials=False)
    cs.append(case("pad_interior_negative_f32", lambda a: lax.pad(a, scalar(F32, -1.0), ((1, -1, 1), (-1, 2, 0))),
                   [p], "pad"))
    cs.append(case("pad_all_kinds_s32", lambda a, v: lax.pad(a, v, ((2, 1, 2), (0, 0, 0), (-1, -2, 1))),
                   [ints(S32, (2, 3, 4), 160), scalar(S32, 99)], "pad"))
    cs.append(case("pad_negative_only_bf16", lambda a: lax.pad(a, scalar(BF16, 0), ((-1, -2, 0),)),
                   [floats(BF16, (7,), 161)], "pad"))
    cs.append(case("pad_pred", lambda a: lax.pad(a, np.array(True), ((1, 1, 1),)), [bools((3,), 162)], "pad"))
    cs.append(case("concatenate_dim0_f32", lambda a, b: lax.concatenate([a, b], 0),
                   [floats(F32, (2, 3), 163), floats(F32, (1, 3), 164)], "concatenate"))
    cs.append(case("concatenate_dim1_three_s8", lambda a, b, c: lax.concatenate([a, b, c], 1),
                   [ints(S8, (2, 1), 165), ints(S8, (2, 3), 166), ints(S8, (2, 2), 167)], "concatenate"))
    cs.append(case("concatenate_pred_c64",
                   lambda a, b, c, d: (lax.concatenate([a, b], 0), lax.concatenate([c, d], 0)),
                   [bools((2,), 168), bools((3,), 169), cplx(C64, (2,), 170), cplx(C64, (1,), 171)],
                   "concatenate"))
    return cs


def dots():
    cs = []

    def d(name, fn, args, tol, note="", hlo_text=()):
        return case(name, fn, args, "dot", tol=tol, note=note, hlo_text=hlo_text)

    cs.append(d("dot_vv_f32", jnp.dot, [floats(F32, (8,), 181, specials=False),
                                       floats(F32, (8,), 182, specials=False)], summation(F32)))
    cs.append(d("dot_mv_f64", jnp.dot, [floats(F64, (4, 6), 183, specials=False),
                                       floats(F64, (6,), 184, specials=False)], summation(F64)))
    cs.append(d("dot_mm_f32", jnp.matmul, [floats(F32, (4, 8), 185, specials=False),
                                          floats(F32, (8, 3), 186, specials=False)], summation(F32)))
    cs.append(d("dot_mm_f32_inf_nan", jnp.matmul,
                [np.array([[1, np.inf], [np.nan, 0], [2, 3]], F32), np.array([[0, 1], [2, -np.inf]], F32)],
                summation(F32), "0*inf = NaN and NaN propagate through the sum"))
    cs.append(d("dot_batched_f32",
                lambda a, b: lax.dot_general(a, b, (((2,), (1,)), ((0,), (0,)))),
                [floats(F32, (2, 3, 4), 187, specials=False), floats(F32, (2, 4, 5), 188, specials=False)],
                summation(F32)))
    cs.append(d("dot_general_multi_contract_batch_not_leading",
                lambda a, b: lax.dot_general(a, b, (((2, 3), (2, 1)), ((1,), (0,)))),
                [floats(F32, (3, 2, 4, 5), 189, specials=False), floats(F32, (2, 5, 4, 3), 190, specials=False)],
                summation(F32), "batch dims not leading, two contracting dims"))
    cs.append(d("dot_s32_wrap", jnp.matmul, [ints(S32, (3, 4), 191), ints(S32, (4, 2), 192)], EXACT,
                "integer dot wraps on overflow"))
    cs.append(d("dot_s8_to_s32",
                lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=np.int32),
                [ints(S8, (3, 5), 193), ints(S8, (5, 2), 194)], EXACT, "preferred_element_type=s32"))
    cs.append(d("dot_u8_to_u32",
                lambda a, b: lax.dot_general(a, b, (((0,), (0,)), ((), ())), preferred_element_type=np.uint32),
                [ints(U8, (6, 2), 195), ints(U8, (6, 3), 196)], EXACT, "contract dim 0 of both"))
    cs.append(d("dot_f16_to_f32",
                lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=np.float32),
                [floats(F16, (3, 8), 197, specials=False), floats(F16, (8, 2), 198, specials=False)],
                summation(F32), "mixed precision: f16 operands, f32 result"))
    cs.append(d("dot_bf16_to_f32",
                lambda a, b: lax.dot_general(a, b, (((1,), (0,)), ((), ())), preferred_element_type=np.float32),
                [floats(BF16, (2, 16), 199, specials=False), floats(BF16, (16, 3), 200, specials=False)],
                summation(F32)))
    cs.append(d("dot_bf16", jnp.matmul, [floats(BF16, (3, 4), 201, specials=False),
                                        floats(BF16, (4, 3), 202, specials=False)], summation(BF16)))
    cs.append(d("dot_f16", jnp.matmul, [floats(F16, (3, 4), 203, specials=False),
                                       floats(F16, (4, 3), 204, specials=False)], summation(F16)))
    cs.append(d("dot_c64", jnp.matmul, [cplx(C64, (2, 3), 205), cplx(C64, (3, 2), 206)], summation(C64)))
    cs.append(d("dot_c128_vv", jnp.dot, [cplx(C128, (5,), 207), cplx(C128, (5,), 208)], summation(C128)))
    cs.append(d("dot_precision_highest",
                lambda a, b: lax.dot(a, b, precision=lax.Precision.HIGHEST),
                [floats(F32, (2, 3), 209, specials=False), floats(F32, (3, 2), 210, specials=False)],
                summation(F32), "carries operand_precision={highest,highest}",
                hlo_text=("operand_precision={highest,highest}",)))
    cs.append(d("dot_outer_no_contracting",
                lambda a, b: lax.dot_general(a, b, (((), ()), ((), ()))),
                [floats(F32, (3,), 211, specials=False), floats(F32, (4,), 212, specials=False)], EXACT,
                "no contracting dims: an outer product (exact)"))
    return cs


def convolutions():
    cs = []

    def conv(name, lhs, rhs, note="", **kw):
        fn = lambda a, b: lax.conv_general_dilated(a, b, **kw)  # noqa: E731
        return case(name, fn, [lhs, rhs], "convolution",
                    tol=summation(lhs.dtype) if lhs.dtype.kind in "fc" else EXACT, note=note)

    f = lambda shape, seed, dt=F32: floats(dt, shape, seed, -1, 1, specials=False)  # noqa: E731
    cs.append(conv("conv2d_nchw_valid", f((1, 2, 5, 5), 221), f((3, 2, 3, 3), 222),
                   window_strides=(1, 1), padding="VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")))
    cs.append(conv("conv2d_nhwc_same_stride2", f((2, 6, 5, 3), 223), f((3, 3, 3, 4), 224),
                   window_strides=(2, 2), padding="SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")))
    cs.append(conv("conv2d_negative_pad_dilations", f((1, 2, 5, 5), 225), f((2, 2, 3, 3), 226),
                   "negative padding, lhs_dilation (transposed conv) and rhs_dilation (atrous)",
                   window_strides=(2, 1), padding=[(1, -1), (0, 2)], lhs_dilation=(1, 2),
                   rhs_dilation=(2, 1), dimension_numbers=("NCHW", "OIHW", "NCHW")))
    cs.append(conv("conv2d_feature_groups", f((1, 4, 4, 4), 227), f((6, 2, 2, 2), 228),
                   "feature_group_count=2",
                   window_strides=(1, 1), padding="VALID", feature_group_count=2,
                   dimension_numbers=("NCHW", "OIHW", "NCHW")))
    cs.append(conv("conv2d_depthwise_nhwc", f((1, 5, 5, 3), 229), f((3, 3, 1, 3), 230),
                   "depthwise: feature_group_count = channels",
                   window_strides=(1, 1), padding=[(1, 1), (1, 1)], feature_group_count=3,
                   dimension_numbers=("NHWC", "HWIO", "NHWC")))
    cs.append(conv("conv2d_batch_groups", f((4, 4, 4, 2), 231), f((2, 2, 2, 4), 232),
                   "batch_group_count=2 (as in a weight gradient)",
                   window_strides=(1, 1), padding="VALID", batch_group_count=2,
                   dimension_numbers=("NHWC", "HWIO", "NHWC")))
    cs.append(conv("conv1d_nwc", f((2, 9, 3), 233), f((3, 3, 2), 234),
                   window_strides=(2,), padding=[(2, 1)], rhs_dilation=(2,),
                   dimension_numbers=("NWC", "WIO", "NWC")))
    cs.append(conv("conv3d_ncdhw", f((1, 2, 4, 4, 4), 235), f((2, 2, 2, 2, 2), 236),
                   window_strides=(1, 2, 1), padding=[(0, 0), (1, 0), (0, 1)],
                   dimension_numbers=("NCDHW", "OIDHW", "NCDHW")))
    cs.append(conv("conv2d_odd_layouts", f((3, 1, 5, 4), 237), f((3, 3, 3, 2), 238),
                   "unusual dimension orders (lhs CNWH, rhs IWHO, out WNHC)",
                   window_strides=(1, 1), padding="VALID", dimension_numbers=("CNWH", "IWHO", "WNHC")))
    cs.append(conv("conv2d_f64", f((1, 1, 4, 4), 239, F64), f((1, 1, 2, 2), 240, F64),
                   window_strides=(1, 1), padding="VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")))
    cs.append(conv("conv2d_f16", f((1, 2, 4, 4), 241, F16), f((2, 2, 2, 2), 242, F16),
                   window_strides=(1, 1), padding="VALID", dimension_numbers=("NCHW", "OIHW", "NCHW")))
    cs.append(conv("conv1d_s32", ints(S32, (1, 1, 8), 243, -5, 5), ints(S32, (1, 1, 3), 244, -3, 3),
                   "integer convolution", window_strides=(1,), padding="SAME",
                   dimension_numbers=("NCH", "OIH", "NCH")))
    tr = lambda a, b: lax.conv_transpose(a, b, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))  # noqa: E731
    cs.append(case("conv_transpose_nhwc", tr, [f((1, 3, 3, 2), 245), f((3, 3, 2, 2), 246)],
                   "convolution", tol=summation(F32), hlo_text=("lhs_dilate=",),
                   note="lax.conv_transpose: lhs_dilate"))
    return cs


def reductions():
    cs = []
    tol32 = summation(F32)
    x3 = floats(F32, (3, 4, 5), 251, specials=False)
    cs.append(case("reduce_sum_f32_dim0", lambda a: jnp.sum(a, axis=0), [x3], "reduce", tol=tol32,
                   hlo_ops=("reduce", "add")))
    cs.append(case("reduce_sum_f32_dims02", lambda a: jnp.sum(a, axis=(0, 2)), [x3], "reduce",
                   tol=tol32, hlo_ops=("reduce", "add")))
    cs.append(case("reduce_sum_f64_all", jnp.sum, [floats(F64, (4, 6), 252, specials=False)], "reduce",
                   tol=summation(F64)))
    cs.append(case("reduce_max_f32_nan", lambda a: jnp.max(a, axis=1), [floats(F32, (4, 6), 253)],
                   "reduce", hlo_ops=("reduce", "maximum"), note="NaN propagates; -inf init"))
    cs.append(case("reduce_min_s32", lambda a: jnp.min(a, axis=0), [ints(S32, (5, 3), 254)], "reduce",
                   hlo_ops=("reduce", "minimum")))
    cs.append(case("reduce_prod_s64_wrap", lambda a: jnp.prod(a, axis=1), [ints(S64, (3, 5), 255, -100, 100)],
                   "reduce", hlo_ops=("reduce", "multiply"), note="wraps"))
    cs.append(case("reduce_prod_f32", lambda a: jnp.prod(a, axis=0), [floats(F32, (4, 3), 256, 0.5, 2.0, False)],
                   "reduce", tol=tol32, hlo_ops=("reduce", "multiply")))
    b = bools((4, 5), 257)
    cs.append(case("reduce_and_or_pred", lambda a: (jnp.all(a, axis=1), jnp.any(a, axis=0), jnp.all(a)),
                   [b], "reduce", hlo_ops=("reduce", "and", "or")))
    cs.append(case("reduce_sum_u8_wrap", lambda a: lax.reduce(a, np.uint8(0), lax.add, (0,)),
                   [ints(U8, (6, 3), 258)], "reduce", note="u8 accumulation wraps"))
    cs.append(case("reduce_max_bf16", lambda a: jnp.max(a, axis=(0, 1)), [floats(BF16, (3, 4), 259)],
                   "reduce", hlo_ops=("reduce", "maximum")))
    cs.append(case("reduce_sum_f16_native", lambda a: lax.reduce(a, np.float16(0), lax.add, (1,)),
                   [floats(F16, (3, 8), 260, specials=False)], "reduce", tol=summation(F16),
                   note="accumulates in f16 (no upcast)"))
    cs.append(case("reduce_sum_c64", lambda a: jnp.sum(a, axis=1), [cplx(C64, (2, 5), 261)], "reduce",
                   tol=summation(C64)))
    cs.append(case("reduce_xor_u32", lambda a: lax.reduce(a, np.uint32(0), lax.bitwise_xor, (1,)),
                   [ints(U32, (3, 6), 262)], "reduce", hlo_ops=("reduce", "xor")))
    cs.append(case("reduce_variadic_min_max", lambda a, c: lax.reduce(
        (a, c), (np.float32(np.inf), np.int32(-2**31)),
        lambda x, y: (lax.min(x[0], y[0]), lax.max(x[1], y[1])), (0,)),
        [floats(F32, (4, 3), 263), ints(S32, (4, 3), 264)], "reduce",
        note="two operands reduced together"))
    cs.append(case("argmax_f32", lambda a: jnp.argmax(a, axis=1), [floats(F32, (4, 6), 265, specials=False)],
                   "reduce", note="variadic (value, index) reduce"))
    cs.append(case("argmax_f32_nan_ties",
                   lambda a: jnp.argmax(a, axis=0),
                   [np.array([[1, np.nan, 3, 2], [5, 1, 3, np.nan], [5, np.nan, 1, 0]], F32)],
                   "reduce", note="first NaN wins; ties pick the lowest index"))
    cs.append(case("argmin_s32", lambda a: jnp.argmin(a, axis=0), [ints(S32, (5, 4), 266, -3, 3)], "reduce"))
    cs.append(case("argmax_bf16_to_s32", lambda a: lax.argmax(a, 1, np.int32), [floats(BF16, (3, 5), 267)],
                   "reduce", note="index type s32"))
    return cs


def windows():
    cs = []
    tol = summation(F32)
    img = floats(F32, (1, 2, 6, 6), 271, specials=False)
    cs.append(case("maxpool_2x2_stride2", lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (1, 1, 2, 2),
                                                                       (1, 1, 2, 2), "VALID"),
                   [img], "reduce-window"))
    cs.append(case("sumpool_3x3_stride2_pad",
                   lambda a: lax.reduce_window(a, 0.0, lax.add, (1, 1, 3, 3), (1, 1, 2, 2),
                                               [(0, 0), (0, 0), (1, 1), (1, 2)]),
                   [img], "reduce-window", tol=tol))
    cs.append(case("reduce_window_dilations",
                   lambda a: lax.reduce_window(a, -jnp.inf, lax.max, (2, 2), (1, 2), [(1, 0), (0, 1)],
                                               base_dilation=(2, 1), window_dilation=(1, 2)),
                   [floats(F32, (4, 5), 272, specials=False)], "reduce-window",
                   note="base (lhs) and window (rhs) dilation; padding value = init"))
    cs.append(case("reduce_window_min_s32", lambda a: lax.reduce_window(a, np.int32(2**31 - 1), lax.min,
                                                                        (3,), (2,), "SAME"),
                   [ints(S32, (9,), 273)], "reduce-window"))
    cs.append(case("reduce_window_variadic",
                   lambda a, c: lax.reduce_window((a, c), (np.float32(-np.inf), np.int32(0)),
                                                  lambda x, y: (lax.max(x[0], y[0]), lax.add(x[1], y[1])),
                                                  (2,), (1,), "VALID"),
                   [floats(F32, (6,), 274, specials=False), ints(S32, (6,), 275, -10, 10)], "reduce-window",
                   note="two operands, tuple-valued window computation"))
    cs.append(case("avgpool_nhwc", lambda a: lax.reduce_window(a, 0.0, lax.add, (1, 2, 2, 1),
                                                                (1, 1, 1, 1), "VALID") / 4.0,
                   [floats(F32, (1, 3, 3, 2), 276, specials=False)], "reduce-window", tol=tol))
    cs.append(case("cumsum_f32", lambda a: lax.cumsum(a, axis=0), [floats(F32, (8,), 277, specials=False)],
                   "reduce-window", tol=tol, note="jax lowers cumsum on CPU to reduce-window"))
    cs.append(case("cumsum_reverse_s32", lambda a: lax.cumsum(a, axis=1, reverse=True),
                   [ints(S32, (2, 5), 278, -100, 100)], "reduce-window"))
    cs.append(case("cumprod_f64", lambda a: lax.cumprod(a, axis=0), [floats(F64, (6,), 279, 0.5, 2, False)],
                   "reduce-window", tol=summation(F64)))
    cs.append(case("cummax_f32_nan", lambda a: lax.cummax(a, axis=0), [floats(F32, (12,), 280)],
                   "reduce-window"))
    cs.append(case("cummin_u8", lambda a: lax.cummin(a, axis=0), [ints(U8, (8,), 281)], "reduce-window"))
    cs.append(case("cumlogsumexp_f32", lambda a: lax.cumlogsumexp(a, axis=0),
                   [floats(F32, (6,), 282, -5, 5, specials=False)], "reduce-window",
                   tol=transcendental(F32), hlo_ops=("reduce-window", "log-plus-one")))

    def maxpool_sum(a, window, strides, padding):
        return lax.reduce_window(a, -jnp.inf, lax.max, window, strides, padding).sum()

    cs.append(case("select_and_scatter_2x2",
                   jax.grad(lambda a: maxpool_sum(a, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")),
                   [floats(F32, (1, 2, 4, 4), 283, specials=False)], "select-and-scatter",
                   note="gradient of a 2x2/2 max-pool"))
    cs.append(case("select_and_scatter_overlap_pad",
                   jax.grad(lambda a: (maxpool_sum(a, (3, 3), (2, 2), [(1, 1), (1, 1)]) * 1.0)),
                   [floats(F32, (5, 5), 284, specials=False)], "select-and-scatter",
                   note="overlapping 3x3/2 windows with padding: contributions add"))
    ties = np.array([[1, 1, 2, 2], [1, 1, 2, 2], [3, 0, 0, 3], [0, 3, 3, 0]], F64)
    cs.append(case("select_and_scatter_ties_f64",
                   jax.grad(lambda a: maxpool_sum(a, (2, 2), (2, 2), "VALID")),
                   [ties], "select-and-scatter", note="ties: GE select keeps the first element"))
    cs.append(case("select_and_scatter_nhwc_weighted",
                   lambda a, g: jax.vjp(lambda t: lax.reduce_window(t, -jnp.inf, lax.max, (1, 2, 2, 1),
                                                                    (1, 1, 1, 1), "VALID"), a)[1](g)[0],
                   [floats(F32, (1, 3, 4, 2), 285, specials=False), arange(F32, (1, 2, 3, 2), 1)],
                   "select-and-scatter", note="stride 1 (overlapping) with distinct cotangents"))
    return cs


def sorting():
    cs = []
    fs = np.array([3.0, np.nan, -0.0, 0.0, -np.inf, 1.0, np.inf, -1.0, -np.nan, 2.0, 1e-30, -1e-30], F32)
    cs.append(case("sort_f32_specials", jnp.sort, [fs], "sort", hlo_text=("type=TOTALORDER",),
                   note="jax canonicalizes NaN and -0 then compares with TOTALORDER"))
    cs.append(case("sort_s32_dim0", lambda a: lax.sort(a, dimension=0), [ints(S32, (5, 3), 291)], "sort"))
    cs.append(case("sort_u64", jnp.sort, [ints(U64, (9,), 292)], "sort"))
    cs.append(case("sort_u8_descending", lambda a: jnp.sort(a, descending=True), [ints(U8, (10,), 293)],
                   "sort", hlo_ops=("sort", "reverse")))
    cs.append(case("sort_bf16_dim1", lambda a: jnp.sort(a, axis=1), [floats(BF16, (3, 5), 294)], "sort"))
    cs.append(case("sort_f16", jnp.sort, [floats(F16, (10,), 295)], "sort"))
    cs.append(case("sort_pred", jnp.sort, [bools((9,), 296)], "sort"))
    cs.append(case("sort_f64_2d", lambda a: jnp.sort(a, axis=0), [floats(F64, (4, 3), 297)], "sort"))
    keys1 = np.array([2, 1, 2, 1, 0, 2, 1, 0], np.int32)
    keys2 = np.array([0.5, 0.5, -1.0, 0.5, 3.0, 0.5, -2.0, 3.0], F32)
    vals = np.arange(8, dtype=np.int64)
    cs.append(case("sort_multi_operand_num_keys2",
                   lambda a, c, v: lax.sort((a, c, v), num_keys=2, is_stable=True),
                   [keys1, keys2, vals], "sort", note="lexicographic on two keys, stable, payload"))
    cs.append(case("sort_key_value_unstable_flag",
                   lambda a, v: lax.sort((a, v), num_keys=1, is_stable=False),
                   [ints(S16, (8,), 298, -1000, 1000), floats(F32, (8,), 299)], "sort",
                   note="is_stable=false with distinct keys (result still unique)"))
    cs.append(case("argsort_f32_stable", jnp.argsort,
                   [np.array([3, 1, 2, 1, 3, np.nan, 0, 1], F32)], "sort", hlo_ops=("sort", "iota"),
                   note="stable argsort: ties keep index order"))
    cs.append(case("argsort_s32_descending", lambda a: jnp.argsort(a, descending=True),
                   [np.array([5, 1, 5, 2, 1, 9], np.int32)], "sort"))
    cs.append(case("top_k_f32", lambda a: lax.top_k(a, 3), [floats(F32, (10,), 300, specials=False)], "topk"))
    cs.append(case("top_k_2d_s32_ties", lambda a: lax.top_k(a, 2),
                   [np.array([[1, 3, 3, 2], [7, 7, 7, 7], [-1, -5, 0, -1]], np.int32)], "topk",
                   note="ties: lower index first"))
    cs.append(case("top_k_f32_nan_inf", lambda a: lax.top_k(a, 4),
                   [np.array([1.0, np.nan, np.inf, -np.inf, 2.0, -0.0, 0.0], F32)], "topk",
                   note="NaN sorts above +inf (total order)"))
    cs.append(case("top_k_bf16", lambda a: lax.top_k(a, 2), [floats(BF16, (2, 6), 301, specials=False)],
                   "topk"))
    return cs


def gathers_scatters():
    cs = []
    table = arange(F32, (5, 4))
    cs.append(case("gather_rows_clamped", lambda a, i: a[i], [table, np.array([0, 2, 7, -1, -9], np.int32)],
                   "gather", note="jnp indexing: negative indices wrapped by jax; XLA clamps the rest"))
    cs.append(case("gather_fill_mode", lambda a, i: a.at[i].get(mode="fill", fill_value=-1.0),
                   [table, np.array([1, 5, -6, 3], np.int32)], "gather",
                   note="out-of-bounds rows filled by jax-emitted masking"))
    cs.append(case("gather_points_2d", lambda a, i, j: a[i, j],
                   [table, np.array([0, 4, 2, 3], np.int32), np.array([3, 0, 1, 9], np.int32)], "gather"))
    dn = lax.GatherDimensionNumbers(offset_dims=(1, 2), collapsed_slice_dims=(), start_index_map=(0, 1))
    cs.append(case("gather_windows_clamped",
                   lambda a, i: lax.gather(a, i, dn, slice_sizes=(2, 3), mode="clip"),
                   [arange(S32, (5, 6)), np.array([[0, 0], [4, 5], [2, 1], [-3, 2]], np.int32)], "gather",
                   note="2x3 windows; starts clamped so the window fits"))
    dn2 = lax.GatherDimensionNumbers(offset_dims=(0,), collapsed_slice_dims=(1,), start_index_map=(1,))
    cs.append(case("gather_offset_dim_first",
                   lambda a, i: lax.gather(a, i, dn2, slice_sizes=(3, 1), mode="promise_in_bounds"),
                   [arange(F64, (3, 5)), np.array([[4], [0], [2]], np.int64)], "gather",
                   note="offset dim before the batch dim; s64 indices"))
    cs.append(case("gather_take_along_axis", lambda a, i: jnp.take_along_axis(a, i, axis=1),
                   [arange(F32, (3, 4)), np.array([[3, 0], [1, 1], [2, 3]], np.int32)], "gather",
                   hlo_text=("operand_batching_dims=",),
                   note="jax emits operand_batching_dims/start_indices_batching_dims"))
    dnb = lax.GatherDimensionNumbers(offset_dims=(2,), collapsed_slice_dims=(1,), start_index_map=(1,),
                                     operand_batching_dims=(0,), start_indices_batching_dims=(1,))
    cs.append(case("gather_batching_dims_explicit",
                   lambda a, i: lax.gather(a, i, dnb, slice_sizes=(1, 1, 2), mode="clip"),
                   [arange(S16, (2, 5, 2)), np.array([[[4], [0]], [[1], [9]], [[2], [3]]], np.int32)],
                   "gather", hlo_text=("start_indices_batching_dims=",),
                   note="batch dim of the indices is dim 1"))
    cs.append(case("gather_u8_table_u32_idx", lambda a, i: a[i],
                   [ints(U8, (10,), 302), np.array([9, 0, 3, 3, 12], np.uint32)], "gather"))

    base = arange(F32, (6,))
    cs.append(case("scatter_set_oob_dropped", lambda a, i, u: a.at[i].set(u),
                   [base, np.array([1, 7, 4, -8], np.int32), np.array([10, 20, 30, 40], F32)], "scatter",
                   note="out-of-bounds updates are skipped"))
    cs.append(case("scatter_add_duplicates_s32", lambda a, i, u: a.at[i].add(u),
                   [arange(S32, (5,)), np.array([1, 1, 3, 1, 5, 0], np.int32), ints(S32, (6,), 303, -50, 50)],
                   "scatter", note="duplicate indices accumulate; out of bounds dropped"))
    cs.append(case("scatter_add_f32_exact", lambda a, i, u: a.at[i].add(u),
                   [floats(F32, (4, 3), 304, specials=False), np.array([2, 0, 2, 2], np.int32),
                    (arange(F32, (4, 3)) / 8.0).astype(F32)], "scatter", tol=summation(F32),
                   note="row updates with duplicates"))
    cs.append(case("scatter_mul", lambda a, i, u: a.at[i].multiply(u),
                   [np.ones(5, F64), np.array([0, 0, 4], np.int32), np.array([2.0, 3.0, -1.5], F64)], "scatter"))
    cs.append(case("scatter_min_s64", lambda a, i, u: a.at[i].min(u),
                   [ints(S64, (5,), 305), np.array([0, 1, 2, 2], np.int32), ints(S64, (4,), 306)], "scatter"))
    cs.append(case("scatter_max_f32_nan", lambda a, i, u: a.at[i].max(u),
                   [floats(F32, (6,), 307, specials=False), np.array([0, 1, 1, 5], np.int32),
                    np.array([np.nan, 3.0, 100.0, -np.inf], F32)], "scatter"))
    cs.append(case("scatter_2d_points_flags", lambda a, i, j, u: a.at[i, j].set(u, indices_are_sorted=True,
                                                                               unique_indices=True),
                   [np.zeros((3, 4), F32), np.array([0, 1, 2], np.int32), np.array([1, 3, 0], np.int32),
                    np.array([1.0, 2.0, 3.0], F32)], "scatter",
                   hlo_text=("indices_are_sorted=true", "unique_indices=true")))
    sdn = lax.ScatterDimensionNumbers(update_window_dims=(1,), inserted_window_dims=(0,),
                                      scatter_dims_to_operand_dims=(0,))
    cs.append(case("scatter_lax_rows_add",
                   lambda a, i, u: lax.scatter_add(a, i, u, sdn, mode=lax.GatherScatterMode.FILL_OR_DROP),
                   [arange(S32, (4, 3)), np.array([[3], [0], [4]], np.int32), arange(S32, (3, 3), 100)],
                   "scatter"))
    sdnb = lax.ScatterDimensionNumbers(update_window_dims=(), inserted_window_dims=(1,),
                                       scatter_dims_to_operand_dims=(1,), operand_batching_dims=(0,),
                                       scatter_indices_batching_dims=(0,))
    cs.append(case("scatter_batching_dims",
                   lambda a, i, u: lax.scatter(a, i, u, sdnb, mode=lax.GatherScatterMode.FILL_OR_DROP),
                   [np.zeros((2, 4), F32), np.array([[[3], [0]], [[1], [7]]], np.int32),
                    np.array([[1.0, 2.0], [3.0, 4.0]], F32)], "scatter",
                   hlo_text=("scatter_indices_batching_dims=",)))
    cs.append(case("scatter_pred_or", lambda a, i: a.at[i].max(True),
                   [np.zeros(5, bool), np.array([4, 1], np.int32)], "scatter"))
    return cs


def control_flow():
    cs = []

    def spec_while(counter, acc):
        step = jnp.arange(10, dtype=jnp.float32) * 0.125 + 0.1

        def cond(c):
            return c[0] < 1000

        def body(c):
            return (c[0] + 1, c[1] + step)

        return lax.while_loop(cond, body, (counter, acc))

    cs.append(case("while_spec_example", spec_while, [scalar(S32, 0), np.zeros(10, F32)], "while",
                   note="XLA operation-semantics example: (s32 counter, f32[10] acc), 1000 iterations; "
                        "sequential f32 adds so exact"))
    cs.append(case("while_fori_loop", lambda a: lax.fori_loop(0, 7, lambda i, c: c * 2 + i, a),
                   [ints(S64, (3,), 311, -10, 10)], "while"))

    def collatz(n):
        def body(c):
            v, k = c
            return (jnp.where(v % 2 == 0, v // 2, 3 * v + 1), k + 1)
        return lax.while_loop(lambda c: c[0] != 1, body, (n, jnp.int32(0)))

    cs.append(case("while_data_dependent", collatz, [scalar(S32, 27)], "while",
                   note="Collatz steps of 27 (111 iterations)"))
    cs.append(case("while_zero_trip", lambda a, n: lax.while_loop(lambda c: c[0] < n,
                                                                    lambda c: (c[0] + 1, c[1] * 3.0),
                                                                    (jnp.int32(5), a)),
                   [floats(F32, (4,), 312, specials=False), scalar(S32, 2)], "while",
                   note="condition false on entry"))

    def nested(a):
        def outer(i, acc):
            return lax.fori_loop(0, i, lambda j, t: t + j, acc)
        return lax.fori_loop(0, 5, outer, a)

    cs.append(case("while_nested", nested, [scalar(S32, 0)], "while"))

    def cond_fn(p, a, b):
        return lax.cond(p, lambda x, y: (x + y, x * 2), lambda x, y: (x - y, y * 3), a, b)

    for val in (True, False):
        cs.append(case(f"cond_pred_{str(val).lower()}", cond_fn,
                       [np.array(val), floats(F32, (3,), 313, specials=False),
                        floats(F32, (3,), 314, specials=False)], "conditional",
                       note="pred converted to s32 index by jax; branch_computations={...}"))
    branches = [lambda v: v + 1, lambda v: v * 2, lambda v: -v]
    for idx in (1, 7, -3):
        cs.append(case(f"switch_index_{'neg' if idx < 0 else idx}",
                       lambda i, a: lax.switch(i, branches, a),
                       [scalar(S32, idx), ints(S32, (4,), 315, -9, 9)], "conditional",
                       hlo_ops=("conditional", "clamp"),
                       note="jax clamps the index into range before the conditional"))
    cs.append(case("cond_in_while", lambda a: lax.fori_loop(
        0, 6, lambda i, x: lax.cond(i % 2 == 0, lambda y: y + 1.0, lambda y: y * 0.5, x), a),
        [floats(F64, (2,), 316, specials=False)], "conditional", hlo_ops=("conditional", "while")))

    inner = jax.jit(lambda v: v * 3 + 1)
    middle = jax.jit(lambda v: inner(v) - inner(v * 2))
    cs.append(case("call_nested_jit", lambda a: middle(a) + 1, [ints(S32, (5,), 317, -20, 20)], "call",
                   note="nested jax.jit becomes call(...), to_apply=..."))
    return cs


def rngs():
    cs = []
    algos = [("philox", lax.RandomAlgorithm.RNG_PHILOX), ("three_fry", lax.RandomAlgorithm.RNG_THREE_FRY),
             ("default", lax.RandomAlgorithm.RNG_DEFAULT)]
    shapes = {np.uint32: [(3, 4), (7,)], np.uint64: [(5,), (2, 3)]}
    seed = 321
    for aname, algo in algos:
        for dt, shps in shapes.items():
            for shp in shps:
                key = rng(seed).integers(0, 2**63, size=2, dtype=np.uint64)
                seed += 1
                sname = "x".join(map(str, shp))
                cs.append(case(f"rng_bit_generator_{aname}_{XLA_NAME[np.dtype(dt)]}_{sname}",
                               lambda k, shp=shp, dt=dt, algo=algo: lax.rng_bit_generator(k, shp, dtype=dt,
                                                                                          algorithm=algo),
                               [key], "rng-bit-generator",
                               hlo_text=(f"algorithm=rng_{aname}",),
                               note="outputs: (new state, bits); RNG_DEFAULT is XLA:CPU's choice"))
    cs.append(case("rng_bit_generator_three_fry_u8", lambda k: lax.rng_bit_generator(
        k, (6,), dtype=np.uint8, algorithm=lax.RandomAlgorithm.RNG_THREE_FRY),
        [np.array([1, 2], np.uint64)], "rng-bit-generator", note="8-bit output"))
    cs.append(case("rng_bit_generator_philox_u16_chain", lambda k: lax.rng_bit_generator(
        lax.rng_bit_generator(k, (2,), dtype=np.uint32, algorithm=lax.RandomAlgorithm.RNG_PHILOX)[0],
        (5,), dtype=np.uint16, algorithm=lax.RandomAlgorithm.RNG_PHILOX),
        [np.array([2**64 - 1, 2**63], np.uint64)], "rng-bit-generator",
        note="state threaded through two calls; key words near overflow"))
    cs.append(case("random_uniform_threefry_jax", lambda k: jax.random.uniform(jax.random.wrap_key_data(k), (5,)),
                   [np.array([0, 42], np.uint32)], "threefry", hlo_ops=("shift-left", "xor", "add"),
                   note="jax.random (threefry2x32 implemented in plain HLO ops)"))
    return cs


def misc_ops():
    cs = []
    cs.append(case("optimization_barrier", lambda a, c: lax.optimization_barrier((a * 2, c + 1)),
                   [floats(F32, (3,), 331, specials=False), ints(S32, (2,), 332, -5, 5)], "opt-barrier"))
    cs.append(case("after_all_token", lambda a: token_barrier_p.bind(a) * 2,
                   [floats(F32, (4,), 333, specials=False)], "after-all", hlo_ops=("after-all", "opt-barrier"),
                   note="token[] values created by after-all and passed through an opt-barrier; " + DIRECT_NOTE))
    cs.append(case("map_f32", lambda a, c: map_fma_p.bind(a, c),
                   [floats(F32, (2, 3), 334, specials=False), floats(F32, (2, 3), 335, specials=False)], "map",
                   tol=close(1e-6, 2e-6), ref=same(lambda a, c: a * a + c),
                   note="map(x, y) of a*a+b; XLA:CPU contracts it into an FMA; " + DIRECT_NOTE))
    cs.append(case("map_s32", lambda a, c: map_fma_p.bind(a, c),
                   [ints(S32, (5,), 336), ints(S32, (5,), 337)], "map",
                   ref=same(lambda a, c: a * a + c), note="wraps; " + DIRECT_NOTE))
    comp = lax.composite(lambda a, *, scale: a * scale, name="oxla.scale")
    cs.append(case("composite_call", lambda a: comp(a, scale=2.5), [floats(F32, (4,), 338)], "call",
                   hlo_text=("is_composite=true",),
                   note="lax.composite: call with is_composite=true and composite.* frontend_attributes; "
                        "the module also has an unused copy of the computation after ENTRY"))
    cs.append(case("fft_c64", jnp.fft.fft, [cplx(C64, (8,), 339)], "fft", tol=summation(C64),
                   hlo_text=("fft_type=FFT",)))
    cs.append(case("ifft_c128", jnp.fft.ifft, [cplx(C128, (6,), 340)], "fft", tol=summation(C128),
                   hlo_text=("fft_type=IFFT",)))
    cs.append(case("rfft_f32", jnp.fft.rfft, [floats(F32, (2, 8), 341, specials=False)], "fft",
                   tol=summation(C64), hlo_text=("fft_type=RFFT",)))
    cs.append(case("irfft_c64", lambda a: jnp.fft.irfft(a, n=8), [cplx(C64, (5,), 342)], "fft",
                   tol=summation(F32), hlo_text=("fft_type=IRFFT",)))
    cs.append(case("fft2_c64", jnp.fft.fft2, [cplx(C64, (3, 4), 343)], "fft", tol=summation(C64),
                   hlo_text=("fft_length={3,4}",)))
    return cs


def xla_rewrites():
    """What XLA does to a module before running it, pinned down bit for bit.
    Its algebraic simplifier rewrites some float expressions inexactly
    (x / C as x * (1/C), constants reassociated, pow(x, 3) as x * (x * x),
    log(exp(x)) as x, ...), and XLA:CPU computes bf16 arithmetic in f32,
    skipping the rounding to bf16 where a result only feeds a convert to f32.
    The inputs are chosen so that the module as written gives other bits (or
    other values altogether: inf against finite, NaN against 0)."""
    r = rng(2024)
    x = r.uniform(0.5, 3.0, 96).astype(F32)
    y = r.uniform(0.5, 3.0, 96).astype(F32)
    z = r.uniform(0.5, 3.0, 96).astype(F32)
    s = np.array(1.7, F32)
    bf = jnp.bfloat16
    cs = []

    def c(name, fn, args, op, tol=EXACT, note=""):
        cs.append(case(f"xla_{name}", fn, args, op, tol=tol, note=note))

    c("divide_by_constant", lambda a: a / 3.0, [x], "divide", note="x * (1/3)")
    c("divide_by_constants", lambda a: a / 3.0 / 7.0, [x], "divide",
      note="x * (1/3) * (1/7), then the constants folded: x * ((1/3) * (1/7))")
    # Sums of sixteenths: exact in any order, so only the division shows.
    sixteenths = (r.integers(1, 2000, 96) / 16).astype(F32)
    c("mean", lambda a: jnp.mean(a.reshape(16, 6), axis=1), [sixteenths], "divide",
      note="sum * (1/6)")
    c("divide_by_scalar", lambda a, b: a / b, [x, s], "divide",
      note="x / broadcast(s) becomes x * broadcast(1/s)")
    c("divide_by_rsqrt", lambda a, b: a / lax.rsqrt(b), [x, y], "divide", note="x * sqrt(y)")
    c("divide_of_divide", lambda a, b, d: (a / b) / d, [x, y, z], "divide", note="x / (y * z)")
    c("divide_by_divide", lambda a, b, d: a / (b / d), [x, y, z], "divide", note="(x * z) / y")
    c("divide_of_divides", lambda a, b, d, e: (a / b) / (d / e), [x, y, z, x[::-1].copy()],
      "divide", note="(x * w) / (y * z)")
    c("add_constants", lambda a: (a + 3.1) + 2.3, [x], "add", note="x + (3.1 + 2.3)")
    c("subtract_constants", lambda a: (a - 3.1) - 2.3, [x], "subtract",
      note="x + ((-3.1) + (-2.3))")
    c("constant_minus_plus_constant", lambda a: (3.1 - a) + 2.3, [x], "subtract",
      note="(3.1 + 2.3) - x")
    c("multiply_constants", lambda a: (a * 3.1) * 2.3, [x], "multiply", note="x * (3.1 * 2.3)")
    c("multiply_by_broadcast", lambda a, b: (a * 3.1) * jnp.broadcast_to(b, a.shape), [x, s],
      "multiply", note="x * broadcast(s * 3.1)")
    c("power_3", lambda a: lax.pow(a, np.float32(3.0)), [x], "power", note="x * (x * x)")
    c("power_minus_1", lambda a: lax.pow(a, np.float32(-1.0)), [x], "power", note="1 / x")
    big = np.array([3e38, -3e38, 1.0, 2.5], F32)
    c("distribute_power_of_two", lambda a, b: a * 2.0 + b * 2.0, [big, big[::-1].copy()],
      "multiply", note="(x + y) * 2: 3e38*2 + -3e38*2 is NaN, (3e38 - 3e38)*2 is 0")
    nan = np.array([np.nan, np.inf, -1.5, 2.0], F32)
    c("multiply_by_converted_pred", lambda a, b: (a > 1.0).astype(jnp.float32) * b,
      [np.array([0.0, 0.5, 2.0, 3.0], F32), nan], "multiply",
      note="select(p, y, 0): 0 * NaN and 0 * inf give 0, not NaN")
    c("sqrt_of_square", lambda a: jnp.sqrt(a * a), [np.array([1e30, -1e30, 2.0], F32)], "sqrt",
      note="|x|: (1e30)^2 overflows, |1e30| does not")
    c("log_of_exp", lambda a: jnp.log(jnp.exp(a * 40.0)), [x], "log", tol=close(1e-6, 0.0),
      note="x * 40: exp(120) overflows, the rewrite never computes it")
    c("exp_times_exp", lambda a, b: jnp.exp(a * 40.0) * jnp.exp(b * -20.0), [x, y],
      "exponential", tol=close(1e-5, 0.0), note="exp(40x - 20y): finite where exp(40x) is inf")
    c("bf16_multiply_to_f32", lambda a: (a.astype(bf) * 3).astype(jnp.float32), [x],
      "convert", note="the product is not rounded to bf16 on its way to f32")
    c("bf16_chain_to_f32", lambda a: ((a.astype(bf) * 3) + bf(0.001)).astype(jnp.float32),
      [x], "convert", note="the product is rounded (it feeds a bf16 add), the sum is not")
    c("bf16_divide_by_constant", lambda a: (a.astype(bf) / bf(3)).astype(jnp.float32), [x],
      "convert", note="normalized to f32 first: x * f32(1/3), unrounded")
    c("bf16_divide_by_constant_bf16", lambda a: a.astype(bf) / bf(3), [x], "divide",
      note="x * f32(1/3), rounded once to bf16")
    c("bf16_two_users", lambda a: (lambda m: (m.astype(jnp.float32), m + bf(1)))(a.astype(bf) * 3),
      [x], "convert", note="the convert reads the f32 product, the bf16 add the rounded one")
    c("bf16_dot_to_f32", lambda a, b: jnp.dot(a.reshape(8, 12).astype(bf),
                                              b.reshape(12, 8).astype(bf)).astype(jnp.float32),
      [x, y], "dot", tol=summation(F32), note="the f32 product is not rounded to bf16")
    c("bf16_softmax", lambda a: jax.nn.softmax(a.reshape(8, 12).astype(bf), axis=-1).astype(jnp.float32),
      [x * 3.0], "divide", tol=close(1e-5, 1e-7),
      note="exp / broadcast(sum) as exp * broadcast(1/sum) in f32, the quotient unrounded")
    c("f16_divide_by_constant", lambda a: (a.astype(jnp.float16) / jnp.float16(3)).astype(jnp.float32),
      [x], "divide", note="f16 is not normalized on XLA:CPU: x * f16(1/3), rounded to f16")
    return cs


def nn_blocks():
    cs = []
    x = floats(F32, (3, 7), 351, -5, 5, specials=False)
    cs.append(case("softmax_f32", lambda a: jax.nn.softmax(a, axis=-1), [x], "softmax",
                   tol=transcendental(F32), hlo_ops=("reduce", "exponential", "divide")))
    cs.append(case("log_softmax_f32", lambda a: jax.nn.log_softmax(a, axis=0), [x], "log_softmax",
                   tol=close(1e-5, 1e-5), hlo_ops=("reduce", "exponential", "log")))
    cs.append(case("softmax_bf16", lambda a: jax.nn.softmax(a), [floats(BF16, (2, 6), 352, -3, 3, False)],
                   "softmax", tol=close(3e-2, 1e-3), hlo_ops=("reduce", "exponential"),
                   note="op-by-op bf16 evaluation (sum in f32 as written) matches XLA; an exact "
                        "softmax rounded once to bf16 differs by up to ~1.3%"))
    cs.append(case("gelu_tanh_f32", jax.nn.gelu, [floats(F32, (12,), 353, -6, 6, False)], "gelu",
                   tol=transcendental(F32), hlo_ops=("tanh",)))
    cs.append(case("gelu_erf_f64", lambda a: jax.nn.gelu(a, approximate=False), [floats(F64, (12,), 354, -6, 6, False)],
                   "gelu", tol=transcendental(F64), hlo_ops=("exponential",),
                   note="jax computes the exact gelu via an erfc expansion"))
    cs.append(case("relu_silu_f32", lambda a: (jax.nn.relu(a), jax.nn.silu(a)), [floats(F32, (10,), 355)],
                   "silu", tol=transcendental(F32), hlo_ops=("maximum", "exponential")))

    def layer_norm(a, g, b):
        mu = jnp.mean(a, axis=-1, keepdims=True)
        var = jnp.mean((a - mu) ** 2, axis=-1, keepdims=True)
        return (a - mu) * lax.rsqrt(var + 1e-5) * g + b

    cs.append(case("layer_norm_f32", layer_norm,
                   [floats(F32, (4, 8), 356, -3, 3, False), floats(F32, (8,), 357, 0.5, 1.5, False),
                    floats(F32, (8,), 358, -0.5, 0.5, False)], "layer_norm", tol=close(1e-4, 1e-5),
                   hlo_ops=("reduce", "rsqrt")))

    def mlp(a, w1, b1, w2, b2):
        h = jax.nn.relu(a @ w1 + b1)
        return jax.nn.log_softmax(h @ w2 + b2)

    cs.append(case("mlp_f32", mlp,
                   [floats(F32, (4, 6), 359, -1, 1, False), floats(F32, (6, 8), 360, -1, 1, False),
                    floats(F32, (8,), 361, -0.1, 0.1, False), floats(F32, (8, 3), 362, -1, 1, False),
                    floats(F32, (3,), 363, -0.1, 0.1, False)], "mlp", tol=close(1e-4, 1e-5),
                   hlo_ops=("dot", "maximum", "reduce", "exponential", "log")))

    def mlp_grad(w, a, y):
        return jax.grad(lambda w_: jnp.mean((jnp.tanh(a @ w_) - y) ** 2))(w)

    cs.append(case("mlp_grad_f32", mlp_grad,
                   [floats(F32, (5, 3), 364, -1, 1, False), floats(F32, (4, 5), 365, -1, 1, False),
                    floats(F32, (4, 3), 366, -1, 1, False)], "grad", tol=close(1e-4, 1e-5),
                   hlo_ops=("dot", "tanh")))
    cs.append(case("logsumexp_f32", lambda a: jax.nn.logsumexp(a, axis=1),
                   [np.array([[1, 2, 3, 1000], [-np.inf, -np.inf, 0, 1], [-1e30, 5, 5, 5]], F32)],
                   "logsumexp", tol=transcendental(F32), hlo_ops=("reduce", "exponential", "log")))

    def attention(q, k, v):
        s = jnp.einsum("qd,kd->qk", q, k) / jnp.sqrt(jnp.float32(q.shape[-1]))
        return jax.nn.softmax(s, axis=-1) @ v

    cs.append(case("attention_f32", attention,
                   [floats(F32, (3, 4), 367, -1, 1, False), floats(F32, (5, 4), 368, -1, 1, False),
                    floats(F32, (5, 4), 369, -1, 1, False)], "attention", tol=close(1e-5, 1e-6),
                   hlo_ops=("dot", "exponential")))
    return cs


def linalg():
    cs = []
    m = floats(F32, (3, 3), 371, -1, 1, False) + np.eye(3, dtype=F32) * 3
    cs.append(case("linalg_norm_f32", lambda a: (jnp.linalg.norm(a), jnp.linalg.norm(a, axis=0)),
                   [m], "norm", tol=close(1e-5, 1e-6), hlo_ops=("reduce", "sqrt")))
    cs.append(case("linalg_matrix_power_f64", lambda a: jnp.linalg.matrix_power(a, 5),
                   [floats(F64, (3, 3), 372, -1, 1, False)], "matrix_power", tol=close(1e-12, 1e-12),
                   hlo_ops=("dot",)))
    cs.append(case("einsum_trace_outer", lambda a, b: (jnp.einsum("ii->", a), jnp.einsum("i,j->ij", b, b),
                                                        jnp.einsum("ij,jk,k->i", a, a, b)),
                   [floats(F32, (3, 3), 373, -1, 1, False), floats(F32, (3,), 374, -1, 1, False)],
                   "einsum", tol=close(1e-5, 1e-6), hlo_ops=("dot",)))
    cs.append(case("cross_product_f32", jnp.cross, [floats(F32, (2, 3), 375, False), floats(F32, (2, 3), 376, False)],
                   "cross", tol=close(1e-6, 1e-6), hlo_ops=("multiply", "subtract")))
    # Candidates that become LAPACK custom-calls on CPU: dropped (and reported).
    cs.append(case("linalg_det_3x3_f64", jnp.linalg.det, [floats(F64, (2, 3, 3), 377, -2, 2, False)],
                   "det", tol=close(1e-12, 1e-12), hlo_ops=("multiply",),
                   note="jax uses a closed form for 3x3 determinants (no LAPACK)"))
    for name, fn in (("linalg_cholesky", jnp.linalg.cholesky), ("linalg_inv", jnp.linalg.inv),
                     ("linalg_det_4x4", jnp.linalg.det), ("linalg_eigh", lambda a: jnp.linalg.eigh(a)[0])):
        m4 = floats(F32, (4, 4), 378, -1, 1, False) + np.eye(4, dtype=F32) * 4
        cs.append(case(name, fn, [m4 @ m4.T], name, tol=close(1e-4, 1e-5), hlo_ops=(), may_custom_call=True))
    cs.extend(lapack_cases())
    return cs


def spd(dt, batch, n, seed):
    """A batch of well-conditioned Hermitian positive-definite matrices."""
    shape = (*batch, n, n)
    m = floats(F64, shape, seed, -1, 1, False)
    if np.dtype(dt) in COMPLEX:
        m = m + 1j * floats(F64, shape, seed + 1, -1, 1, False)
    h = m @ np.conj(np.swapaxes(m, -1, -2)) + n * np.eye(n)
    return h.astype(dt)


def general(dt, shape, seed):
    m = floats(F64, shape, seed, -1, 1, False)
    if np.dtype(dt) in COMPLEX:
        m = m + 1j * floats(F64, shape, seed + 1, -1, 1, False)
    n = shape[-1]
    if shape[-2] == n:
        m = m + 2 * np.eye(n)  # keep the solves well conditioned
    return m.astype(dt)


def lapack_cases():
    """jnp.linalg and jax.scipy.linalg routines that lower to LAPACK custom-calls
    (potrf, getrf, trsm), which oxla runs itself."""
    from jax.scipy import linalg as sla
    cs = []
    tol = {F32: close(2e-4, 2e-5), F64: close(1e-10, 1e-12), C64: close(2e-4, 2e-5),
           C128: close(1e-10, 1e-12)}
    for i, dt in enumerate((F32, F64, C64, C128)):
        t = XLA_NAME[dt]
        a = spd(dt, (2,), 5, 400 + 10 * i)
        cs.append(case(f"lapack_cholesky_{t}", jnp.linalg.cholesky, [a], "potrf", tol=tol[dt],
                       hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_cholesky_upper_{t}", lambda x: sla.cholesky(x, lower=False), [a],
                       "potrf", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        g = general(dt, (2, 4, 4), 402 + 10 * i)
        cs.append(case(f"lapack_lu_factor_{t}", sla.lu_factor, [g], "getrf", tol=tol[dt],
                       hlo_ops=(), may_custom_call=True))
        rhs = general(dt, (2, 4, 3), 404 + 10 * i)
        cs.append(case(f"lapack_solve_{t}", jnp.linalg.solve, [g, rhs], "getrf", tol=tol[dt],
                       hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_inv_det_{t}", lambda x: (jnp.linalg.inv(x), jnp.linalg.det(x)), [g],
                       "getrf", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        for left, lower, trans, unit in ((True, True, 0, False), (True, False, 1, True),
                                         (False, True, 2, False), (False, False, 0, True)):
            shape_b = (2, 4, 3) if left else (2, 3, 4)
            b = general(dt, shape_b, 406 + 10 * i)
            name = (f"lapack_trsm_{'left' if left else 'right'}_{'lower' if lower else 'upper'}"
                    f"_{'NTC'[trans]}{'_unit' if unit else ''}_{t}")
            fn = (lambda left, lower, trans, unit: lambda x, y: lax.linalg.triangular_solve(
                x, y, left_side=left, lower=lower, transpose_a=trans > 0,
                conjugate_a=trans == 2, unit_diagonal=unit))(left, lower, trans, unit)
            cs.append(case(name, fn, [g, b], "trsm", tol=tol[dt], hlo_ops=(), may_custom_call=True))
    for i, dt in enumerate((F32, F64, C64, C128)):
        t = XLA_NAME[dt]
        tall = general(dt, (2, 5, 3), 460 + 10 * i)
        cs.append(case(f"lapack_qr_{t}", jnp.linalg.qr, [tall], "geqrf", tol=tol[dt],
                       hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_qr_complete_{t}", lambda x: jnp.linalg.qr(x, mode="complete"), [tall],
                       "geqrf", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        wide = general(dt, (3, 5), 462 + 10 * i)
        cs.append(case(f"lapack_qr_wide_{t}", jnp.linalg.qr, [wide], "geqrf", tol=tol[dt],
                       hlo_ops=(), may_custom_call=True))
    # Eigenvectors are unique only up to sign (or complex phase), which
    # LAPACK leaves to its algorithm: compare |V| and V diag(w) V^H.
    def eigh_invariants(x, uplo="L"):
        w, v = jnp.linalg.eigh(x, UPLO=uplo, symmetrize_input=False)
        return w, jnp.abs(v), (v * w[..., None, :].astype(v.dtype)) @ jnp.conj(jnp.swapaxes(v, -1, -2))
    for i, dt in enumerate((F32, F64, C64, C128)):
        t = XLA_NAME[dt]
        m = general(dt, (2, 5, 5), 480 + 10 * i)
        h = ((m + np.conj(np.swapaxes(m, -1, -2))) / 2).astype(dt)
        cs.append(case(f"lapack_eigvalsh_{t}", jnp.linalg.eigvalsh, [h], "syevd", tol=tol[dt],
                       hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_eigh_{t}", eigh_invariants, [h], "syevd", tol=tol[dt],
                       hlo_ops=(), may_custom_call=True))
    # Singular vectors likewise: compare s, |U|, |V^H|, U diag(s) V^H and U^H U.
    def svd_invariants(x, full):
        u, s_, vt = jnp.linalg.svd(x, full_matrices=full)
        k = s_.shape[-1]
        uk = u[..., :, :k]
        rebuilt = (uk * s_[..., None, :].astype(u.dtype)) @ vt[..., :k, :]
        gram = jnp.conj(jnp.swapaxes(u, -1, -2)) @ u
        return s_, jnp.abs(uk), jnp.abs(vt[..., :k, :]), rebuilt, gram
    for i, dt in enumerate((F32, F64, C64, C128)):
        t = XLA_NAME[dt]
        tall = general(dt, (2, 5, 3), 500 + 10 * i)
        wide = general(dt, (3, 5), 502 + 10 * i)
        cs.append(case(f"lapack_svd_full_{t}", lambda x: svd_invariants(x, True), [tall], "gesdd",
                       tol=tol[dt], hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_svd_wide_{t}", lambda x: svd_invariants(x, False), [wide], "gesdd",
                       tol=tol[dt], hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_svdvals_pinv_{t}",
                       lambda x: (jnp.linalg.svd(x, compute_uv=False), jnp.linalg.pinv(x)), [tall],
                       "gesdd", tol=tol[dt], hlo_ops=(), may_custom_call=True))
    cs.append(case("lapack_lstsq_norm2_rank_f64",
                   lambda a, b: (jnp.linalg.lstsq(a, b)[0], jnp.linalg.norm(a, ord=2),
                                 jnp.linalg.matrix_rank(a)),
                   [general(F64, (6, 4), 540), general(F64, (6, 2), 541)], "gesdd", tol=tol[F64],
                   hlo_ops=(), may_custom_call=True))
    for i, dt in enumerate((F32, F64, C64, C128)):
        t = XLA_NAME[dt]
        diag = general(dt, (2, 6), 520 + 10 * i) + 4
        lower = general(dt, (2, 6), 521 + 10 * i)
        upper = general(dt, (2, 6), 522 + 10 * i)
        lower[:, 0] = 0
        upper[:, -1] = 0
        rhs = general(dt, (2, 6, 3), 523 + 10 * i)
        cs.append(case(f"lapack_tridiagonal_solve_{t}", lax.linalg.tridiagonal_solve,
                       [lower, diag, upper, rhs], "gtsv", tol=tol[dt], hlo_ops=(), may_custom_call=True))
    # Small diagonal entries: the elimination swaps rows.
    pivoting = [np.array(v, F64) for v in ([0, 3, 1, 2, 5], [0.01, 1e-3, 2, 0.0, 4], [1, 1, 1, 7, 0])]
    cs.append(case("lapack_tridiagonal_solve_pivoting_f64", lax.linalg.tridiagonal_solve,
                   [*pivoting, general(F64, (5, 2), 560)], "gtsv", tol=tol[F64], hlo_ops=(),
                   may_custom_call=True))
    cs.append(case("sharding_constraint_f32",
                   lambda x: jax.lax.with_sharding_constraint(
                       x * 2, jax.sharding.SingleDeviceSharding(jax.devices()[0])) + 1,
                   [general(F32, (3, 4), 561)], "Sharding", tol=EXACT, hlo_ops=(), may_custom_call=True,
                   note="the identity on one device"))
    m = general(F32, (4, 4), 490)
    cs.append(case("lapack_eigh_upper_f32", lambda x: eigh_invariants(x, "U"), [m], "syevd",
                   tol=tol[F32], hlo_ops=(), may_custom_call=True,
                   note="only the upper triangle of a nonsymmetric input is read"))
    # A column with nothing below the diagonal to annihilate (tau = 0).
    cs.append(case("lapack_qr_triangular_f64", jnp.linalg.qr,
                   [np.array([[2, 1, 3], [0, -1, 2], [0, 0, 4]], F64)], "geqrf", tol=tol[F64],
                   hlo_ops=(), may_custom_call=True))
    # Wide and tall LU, a singular matrix (a zero pivot), a matrix that is not
    # positive definite (JAX masks the factor with NaN).
    cs.append(case("lapack_lu_wide_f32", lambda x: lax.linalg.lu(x),
                   [general(F32, (3, 5), 450)], "getrf", tol=tol[F32], hlo_ops=(), may_custom_call=True))
    cs.append(case("lapack_lu_tall_f64", lambda x: lax.linalg.lu(x), [general(F64, (2, 5, 3), 451)],
                   "getrf", tol=tol[F64], hlo_ops=(), may_custom_call=True))
    singular = np.array([[1, 2, 3], [2, 4, 6], [1, 0, 1]], F64)
    cs.append(case("lapack_lu_singular_f64", sla.lu_factor, [singular], "getrf", tol=tol[F64],
                   hlo_ops=(), may_custom_call=True))
    # Matrices large enough for the CPU backend's recursive routines (which
    # split down to 16 rows): pivoting LU without a dominant diagonal, wide
    # and tall LU, every triangular-solve form, both Cholesky triangles.
    for i, dt in enumerate((F32, F64)):
        t = XLA_NAME[dt]
        square = floats(F64, (45, 45), 570 + 10 * i, -1, 1, False).astype(dt)
        cs.append(case(f"lapack_blocked_lu_{t}", lambda x: lax.linalg.lu(x), [square], "getrf",
                       tol=tol[dt], hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_blocked_solve_inv_{t}",
                       lambda x, y: (jnp.linalg.solve(x, y), jnp.linalg.inv(x)),
                       [general(dt, (40, 40), 571 + 10 * i), general(dt, (40, 7), 572 + 10 * i)],
                       "getrf", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_blocked_lu_wide_tall_{t}",
                       lambda x, y: (lax.linalg.lu(x), lax.linalg.lu(y)),
                       [floats(F64, (20, 45), 573 + 10 * i, -1, 1, False).astype(dt),
                        floats(F64, (45, 20), 574 + 10 * i, -1, 1, False).astype(dt)],
                       "getrf", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        big = spd(dt, (), 40, 575 + 10 * i)
        cs.append(case(f"lapack_blocked_cholesky_{t}",
                       lambda x: (jnp.linalg.cholesky(x), sla.cholesky(x, lower=False)), [big],
                       "potrf", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        # Small off-diagonal entries keep unit triangles well conditioned.
        tri = (floats(F64, (2, 40, 40), 576 + 10 * i, -1, 1, False) / 20 + 2 * np.eye(40)).astype(dt)
        for left, lower, trans, unit in ((True, True, 0, False), (True, False, 1, True),
                                         (False, True, 1, False), (False, False, 0, True)):
            b = general(dt, (2, 40, 9) if left else (2, 9, 40), 577 + 10 * i)
            name = (f"lapack_blocked_trsm_{'left' if left else 'right'}_{'lower' if lower else 'upper'}"
                    f"_{'NT'[trans]}{'_unit' if unit else ''}_{t}")
            fn = (lambda left, lower, trans, unit: lambda x, y: lax.linalg.triangular_solve(
                x, y, left_side=left, lower=lower, transpose_a=trans > 0,
                unit_diagonal=unit))(left, lower, trans, unit)
            cs.append(case(name, fn, [tri, b], "trsm", tol=tol[dt], hlo_ops=(), may_custom_call=True))
    # QR and eigh with more columns than one panel (32) of the CPU backend's
    # blocked Householder routines.
    for i, dt in enumerate((F32, F64)):
        t = XLA_NAME[dt]
        cs.append(case(f"lapack_blocked_qr_{t}",
                       lambda x, y: (jnp.linalg.qr(x), jnp.linalg.qr(y, mode="complete")),
                       [general(dt, (70, 40), 590 + 10 * i), general(dt, (36, 50), 591 + 10 * i)],
                       "geqrf", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        cs.append(case(f"lapack_blocked_svd_{t}",
                       lambda x, y: (svd_invariants(x, True), svd_invariants(y, False)),
                       [general(dt, (50, 40), 593 + 10 * i), general(dt, (36, 45), 594 + 10 * i)],
                       "gesdd", tol=tol[dt], hlo_ops=(), may_custom_call=True))
        m = general(dt, (48, 48), 592 + 10 * i)
        cs.append(case(f"lapack_blocked_eigh_{t}", eigh_invariants, [((m + m.T) / 2).astype(dt)],
                       "syevd", tol=tol[dt], hlo_ops=(), may_custom_call=True))
    not_pd = np.array([[[1, 2], [2, 1]], [[4, 2], [2, 5]]], F32)
    cs.append(case("lapack_cholesky_not_pd_f32", jnp.linalg.cholesky, [not_pd], "potrf",
                   tol=tol[F32], hlo_ops=(), may_custom_call=True))
    return cs


def denormals_ftz():
    """XLA:CPU flushes f32/f64 denormals to zero, on input (DAZ) and on output
    (FTZ), in arithmetic, comparisons and conversions; bf16 follows (computed
    in f32); f16 keeps its denormals.  An IEEE implementation differs here."""
    cs = []
    note = ("XLA:CPU flushes f32/f64/bf16 denormals to zero (inputs and results); "
            "IEEE arithmetic would not")
    d32 = np.array([1e-45, -1e-45, 1e-40, -3e-39, 1.1e-38, 0.0, 1.0, 1e-30], F32)
    e32 = np.array([1e-45, 2e-45, -1e-40, 3e-39, 1e-38, 1e-45, 1e-45, 1e-15], F32)
    cs.append(case("ftz_add_sub_f32", lambda a, b: (a + b, a - b), [d32, e32], "ftz",
                   hlo_ops=("add", "subtract"), note=note))
    cs.append(case("ftz_mul_div_underflow_f32", lambda a, b: (a * b, a / b),
                   [np.array([1e-20, 3e-20, 1e-19, 1e-30, 2.0], F32),
                    np.array([1e-20, 1e-20, 1e-19, 1e10, 1e-45], F32)], "ftz",
                   hlo_ops=("multiply", "divide"), note=note + "; normal inputs, denormal exact results"))
    d64 = np.array([5e-324, -5e-324, 1e-310, 2.2e-308, 0.0, 1.0], F64)
    cs.append(case("ftz_f64_arith", lambda a, b: (a + b, a * b, a / b),
                   [d64, np.array([5e-324, 1e-310, 1e-10, 0.5, 5e-324, 1e300], F64)], "ftz",
                   hlo_ops=("add", "multiply", "divide"), note=note))
    cs.append(case("ftz_compare_f32", lambda a, b: (a < b, a == b, a > b),
                   [d32, np.zeros(8, F32)], "ftz", hlo_ops=("compare",), note=note))
    cs.append(case("ftz_unary_f32",
                   lambda a: (lax.sqrt(a), lax.sign(a), lax.ceil(a), lax.floor(a), lax.log(a),
                              lax.abs(a), lax.neg(a), lax.exp(a)),
                   [d32], "ftz", tol=transcendental(F32),
                   hlo_ops=("sqrt", "sign", "ceil", "floor", "log", "abs", "negate"),
                   note=note + "; abs/negate are sign-bit operations"))
    cs.append(case("ftz_convert_f64_to_f32", lambda a: lax.convert_element_type(a, np.float32),
                   [np.array([1e-39, -2.5e-45, 1e-45, 1.2e-38, 1e-300, 5e-324], F64)], "ftz",
                   hlo_ops=("convert",), note=note))
    cs.append(case("ftz_convert_f32_to_f64_f16", lambda a: (lax.convert_element_type(a, np.float64),
                                                            lax.convert_element_type(a, np.float16)),
                   [d32], "ftz", hlo_ops=("convert",), note=note))
    cs.append(case("ftz_bf16_add", lambda a, b: a + b,
                   [np.array([9.2e-41, -9.2e-41, 1e-39, 1.2e-38, 1.0], BF16),
                    np.array([0.0, 0.0, 1e-39, -1e-40, 1e-39], BF16)], "ftz", hlo_ops=("add",), note=note))
    cs.append(case("ftz_f16_denormals_kept", lambda a, b: (a + b, a * b, a < b),
                   [np.array([6e-8, -6e-8, 3e-5, 1e-4, 0.0], F16),
                    np.array([6e-8, 0.0, 3e-5, 0.5, 6e-8], F16)], "ftz",
                   hlo_ops=("add", "multiply", "compare"),
                   note="f16 denormals are NOT flushed (f16 math is done in f32)"))
    cs.append(case("ftz_data_movement_f32",
                   lambda a, p: (lax.rev(a, (0,)), lax.concatenate([a, a], 0), lax.select(p, a, -a),
                                 lax.max(a, lax.full_like(a, 0.0)), jnp.sort(a)),
                   [d32, bools((8,), 379)], "ftz",
                   hlo_ops=("reverse", "concatenate", "select", "maximum", "sort"),
                   note=note + "; which ops move bits and which compute decides what survives"))
    cs.append(case("ftz_reduce_dot_f32", lambda a, b: (jnp.sum(a), jnp.dot(a, b)),
                   [d32[:5], np.ones(5, F32)], "ftz", hlo_ops=("reduce", "dot"), note=note))
    cs.append(case("ftz_reduce_precision_f32", lambda a: lax.reduce_precision(a, exponent_bits=8, mantissa_bits=7),
                   [d32], "ftz", hlo_ops=("reduce-precision",), note=note))
    return cs


CASE_GROUPS = [
    elementwise_add_sub_mul, elementwise_div_rem, elementwise_max_min, elementwise_power_atan2,
    bitwise_ops, compare_select_clamp, unary_exact, unary_transcendental, complex_parts,
    conversions, bitcasts_and_precision, shape_ops, dots, convolutions, reductions, windows,
    sorting, gathers_scatters, control_flow, rngs, misc_ops, nn_blocks, linalg, denormals_ftz,
    xla_rewrites,
]


# ==========================================================================
# Writer.

def to_file(arr):
    arr = np.require(arr, requirements="C")  # (np.ascontiguousarray would make scalars 1-d)
    if arr.dtype == BF16:
        return arr.view(np.uint16)
    return arr


def spec_of(arr):
    return {"dtype": XLA_NAME[np.dtype(arr.dtype)], "shape": [int(d) for d in arr.shape]}


def within(actual, expected, tol):
    """The check_corpus.py rule: exact for integers/pred and "eq"; NaN matches NaN,
    infinities must agree; complex part by part."""
    if actual.shape != expected.shape or actual.dtype != expected.dtype:
        return False
    if expected.dtype.kind in "biu":
        return bool(np.array_equal(actual, expected))
    parts = [(actual, expected)]
    if expected.dtype.kind == "c":
        parts = [(actual.real, expected.real), (actual.imag, expected.imag)]
    for a, e in parts:
        a = a.astype(np.float64)
        e = e.astype(np.float64)
        good = (np.isnan(a) & np.isnan(e)) | (a == e)
        if tol.check != "eq":
            with np.errstate(invalid="ignore", over="ignore"):
                good |= np.isfinite(a) & np.isfinite(e) & (np.abs(a - e) <= tol.atol + tol.rtol * np.abs(e))
        if not good.all():
            return False
    return True


def output_tol(arr, tol):
    if np.dtype(arr.dtype).kind in "biu":
        return EXACT
    return tol


def meta_json(c, ins, outs):
    def fl(v):
        return float(v)

    lines = ["{"]
    lines.append(f'  "source": {json.dumps(SOURCE + ":" + c.source)},')
    lines.append(f'  "op": {json.dumps(c.op)},')
    if ins:
        lines.append('  "inputs": [')
        lines.append(",\n".join("    " + json.dumps(spec_of(a)) for a in ins))
        lines.append("  ],")
    else:
        lines.append('  "inputs": [],')
    items = []
    for o in outs:
        t = output_tol(o, c.tol)
        d = spec_of(o)
        d.update({"check": t.check, "rtol": fl(t.rtol), "atol": fl(t.atol)})
        items.append("    " + json.dumps(d))
    lines.append('  "outputs": [')
    lines.append(",\n".join(items))
    lines.append("  ],")
    lines.append(f'  "check": {json.dumps(c.tol.check)},')
    lines.append(f'  "rtol": {json.dumps(fl(c.tol.rtol))},')
    lines.append(f'  "atol": {json.dumps(fl(c.tol.atol))},')
    lines.append('  "xla_cpu_agrees": true,')
    lines.append(f'  "note": {json.dumps(c.note)}')
    lines.append("}")
    return "\n".join(lines) + "\n"


OPCODE_RE = re.compile(r"^\s*(?:ROOT\s+)?\S+\s*=\s*.*?[\]\})]\s([a-z][a-z0-9\-]*)\(", re.M)


def opcodes_in(hlo):
    return set(OPCODE_RE.findall(hlo))


def split_top(s):
    """Split 'a, (b, c), d' at top-level commas; drop /*...*/ comments."""
    s = re.sub(r"/\*.*?\*/", "", s)
    parts, depth, cur = [], 0, ""
    for ch in s:
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append(cur.strip())
            cur = ""
        else:
            cur += ch
    if cur.strip():
        parts.append(cur.strip())
    return parts


def shape_str(arr):
    return f"{XLA_NAME[np.dtype(arr.dtype)]}[{','.join(str(d) for d in arr.shape)}]"


def check_signature(c, hlo, ins, outs):
    # Module-level frontend attributes (sharding meshes) follow the layout.
    first = re.sub(r", frontend_attributes=.*$", "", hlo.splitlines()[0])
    m = re.search(r"entry_computation_layout=\{\((.*)\)->(.*)\}$", first)
    assert m, f"{c.name}: no entry_computation_layout"
    params = [re.sub(r"\{[^}]*\}", "", p) for p in split_top(m.group(1))]
    want = [shape_str(a) for a in ins]
    assert params == want, f"{c.name}: entry params {params} != inputs {want}"
    result = m.group(2)
    if result.startswith("("):
        res = [re.sub(r"\{[^}]*\}", "", p) for p in split_top(result[1:-1])]
    else:
        res = [re.sub(r"\{[^}]*\}", "", result)]
    got = [shape_str(o) for o in outs]
    assert res == got, f"{c.name}: entry result {res} != outputs {got}"


def run_case(c):
    """-> (hlo text, inputs, outputs) using XLA:CPU."""
    for a in c.args:
        assert isinstance(a, np.ndarray), f"{c.name}: pass numpy arrays with explicit dtypes"
    fn = c.fn
    try:
        fn.__name__ = c.name  # cosmetic: HloModule jit_<case name>
    except (AttributeError, TypeError):
        pass
    jitted = jax.jit(fn, keep_unused=True)
    hlo = jitted.lower(*c.args).as_text(dialect="hlo")
    outs = [np.asarray(o) for o in jax.tree_util.tree_leaves(jitted(*c.args))]
    return hlo, list(c.args), outs


def check_no_denormals(c, ins):
    """Outside the ftz_* cases, no f32/f64/bf16 input, and no exact (reference)
    result, may be denormal, so that XLA:CPU's flushing does not leak in."""
    for i, a in enumerate(ins):
        if np.dtype(a.dtype) in FTZ_TYPES or a.dtype.kind == "c":
            assert not is_denormal(a).any(), f"input {i} has denormals: XLA:CPU flushes them"
    if c.ref is not None:
        want = c.ref(*ins)
        for i, w in enumerate(want if isinstance(want, (tuple, list)) else [want]):
            w = np.asarray(w)
            if np.dtype(w.dtype) in FTZ_TYPES or w.dtype.kind == "c":
                assert not is_denormal(w).any(), f"exact result {i} has denormals: XLA:CPU flushes them"


def self_check(c, ins, outs):
    """Does the numpy reference pass this case's tolerance against XLA?"""
    if c.ref is None:
        return None
    want = c.ref(*ins)
    want = want if isinstance(want, (tuple, list)) else [want]
    bad = []
    for i, (o, w) in enumerate(zip(outs, want)):
        w = np.asarray(w)
        if w.dtype.kind == "c" and o.dtype.kind != "c":
            w = w.real
        w = w.astype(o.dtype)
        if not within(w, o, output_tol(o, c.tol)):
            bad.append(i)
    return bad


def write_case(c, hlo, ins, outs):
    d = os.path.join(OUT_DIR, c.name)
    os.makedirs(d)
    with open(os.path.join(d, "module.hlo"), "w") as f:
        f.write(hlo)
    for i, a in enumerate(ins):
        np.save(os.path.join(d, f"in{i}.npy"), to_file(a), allow_pickle=False)
    for i, a in enumerate(outs):
        np.save(os.path.join(d, f"out{i}.npy"), to_file(a), allow_pickle=False)
    with open(os.path.join(d, "meta.json"), "w") as f:
        f.write(meta_json(c, ins, outs))


def clear_old_cases():
    """Remove case folders this script wrote before (and nothing else)."""
    if not os.path.isdir(OUT_DIR):
        return
    for name in sorted(os.listdir(OUT_DIR)):
        meta = os.path.join(OUT_DIR, name, "meta.json")
        if os.path.isfile(meta):
            with open(meta) as f:
                src = json.load(f).get("source", "")
            if src.startswith(SOURCE + ":"):
                shutil.rmtree(os.path.join(OUT_DIR, name))


ATTR_RE = re.compile(r"[,{]\s*([a-z_][a-z0-9_.]*)=")


def attributes_in(hlo):
    """Attribute names of instructions (name=...), incl. keys nested in {...}."""
    names = set()
    for line in hlo.splitlines():
        if "=" not in line:
            continue
        if line.startswith("HloModule"):
            names.update(re.findall(r"[ ,]([a-z_][a-z0-9_]*)=", line))
            continue
        m = re.match(r"^\s*(?:ROOT\s+)?\S+\s*=\s*.*?[\]\})]\s[a-z][a-z0-9\-]*\((.*)$", line)
        if not m:
            continue
        tail = m.group(1)
        # operands end at the matching ')'
        depth, k = 1, 0
        while k < len(tail) and depth:
            depth += {"(": 1, ")": -1}.get(tail[k], 0)
            k += 1
        attrs = tail[k:]
        names.update(re.findall(r"(?:^|[,{ ])([a-z_][a-z0-9_.]*)=", attrs))
    return names


def main():
    cases = []
    for group in CASE_GROUPS:
        for c in group():
            c.source = group.__name__
            cases.append(c)
    names = [c.name for c in cases]
    dups = sorted({n for n in names if names.count(n) > 1})
    assert not dups, f"duplicate case names: {dups}"

    clear_old_cases()
    os.makedirs(OUT_DIR, exist_ok=True)

    written, dropped, ref_failures = [], [], []
    op_cases = {}      # HLO opcode -> cases whose module contains it
    attr_cases = {}    # attribute name -> cases
    main_ops = {}      # meta "op" -> count
    errors = []
    for c in cases:
        try:
            hlo, ins, outs = run_case(c)
        except Exception as e:  # noqa: BLE001 - report every broken case at once
            errors.append((c.name, f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"))
            continue
        targets = sorted(set(re.findall(r'custom_call_target="([^"]+)"', hlo)))
        if "custom-call" in hlo:
            if not c.may_custom_call:
                errors.append((c.name, "unexpected custom-call in HLO"))
                continue
            unsupported = [t for t in targets if not BUILTIN_TARGET.fullmatch(t)]
            if unsupported or not targets:
                dropped.append((c.name, ", ".join(unsupported) or "?"))
                continue
        ops = opcodes_in(hlo)
        try:
            assert not c.may_custom_call or targets, "expected a custom-call but got plain HLO"
            for op in c.hlo_ops:
                assert op in ops, f"HLO has no '{op}' instruction (has {sorted(ops)})"
            for text in c.hlo_text:
                assert text in hlo, f"HLO lacks '{text}'"
            check_signature(c, hlo, ins, outs)
            if c.source != "denormals_ftz" and not c.allow_denormals:
                check_no_denormals(c, ins)
        except AssertionError as e:
            errors.append((c.name, str(e)))
            continue
        bad = self_check(c, ins, outs)
        if bad:
            ref_failures.append((c.name, bad))
        write_case(c, hlo, ins, outs)
        written.append(c.name)
        for op in ops:
            op_cases.setdefault(op, []).append(c.name)
        for a in attributes_in(hlo):
            attr_cases.setdefault(a, []).append(c.name)
        main_ops[c.op] = main_ops.get(c.op, 0) + 1

    missing = [op for op in REQUIRED_OPS if op not in op_cases]
    write_coverage(written, dropped, op_cases, attr_cases, main_ops, missing)

    print(f"{'HLO opcode':<28} cases")
    for op in sorted(op_cases):
        print(f"{op:<28} {len(op_cases[op])}")
    print(f"total cases written: {len(written)}")
    for name, target in dropped:
        print(f"dropped {name}: custom-call {target}")
    if missing:
        print(f"MISSING required ops: {missing}")
    for name, msg in errors:
        print(f"ERROR {name}: {msg}")
    if ref_failures:
        print("numpy reference outside the case tolerance (check these):")
        for name, bad in ref_failures:
            print(f"  {name}: outputs {bad}")
    return 1 if (missing or errors) else 0


def write_coverage(written, dropped, op_cases, attr_cases, main_ops, missing):
    out = ["# JAX fixture coverage", "",
           "Generated by `python3 tools/jax_fixtures/gen_fixtures.py`; do not edit.", "",
           f"Cases written: {len(written)} (in `tests/fixtures/jax/`).", "",
           "## HLO opcode -> number of cases whose module.hlo contains it", "",
           "| HLO opcode | cases |", "|---|---|"]
    for op in sorted(op_cases):
        out.append(f"| `{op}` | {len(op_cases[op])} |")
    out += ["", f"Total: {len(written)} cases.", ""]
    if missing:
        out += [f"Required ops with no case: {', '.join(missing)}", ""]
    out += ["## Main op tested (meta.json `op`) -> cases", "", "| op | cases |", "|---|---|"]
    for op in sorted(main_ops):
        out.append(f"| `{op}` | {main_ops[op]} |")
    out += ["", "## Attribute names appearing in the modules (incl. keys inside `{...}`)", "",
            "| attribute | cases |", "|---|---|"]
    for a in sorted(attr_cases):
        out.append(f"| `{a}` | {len(attr_cases[a])} |")
    out += ["", "## Dropped (module contains a custom-call)", ""]
    for name, target in dropped:
        out.append(f"- `{name}`: custom-call `{target}`")
    out += ["", "## Cases", ""]
    out += [f"- `{n}`" for n in written]
    with open(COVERAGE_MD, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
