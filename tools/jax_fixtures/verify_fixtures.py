#!/usr/bin/env python3
"""Re-run every fixture from its module.hlo text alone, with XLA:CPU.

    python3 tools/jax_fixtures/verify_fixtures.py [FIXTURE_DIR] [-k REGEX]

For each case folder: parse module.hlo with XLA's own HLO text parser, convert
to StableHLO, compile for CPU, run on in*.npy and compare bit-for-bit with
out*.npy (NaN matches NaN, whatever the payload).  This checks that the text is
self-contained and that meta.json's "xla_cpu_agrees": true holds when starting
from the text.  Uses jaxlib internals (jax 0.10.x); not needed to generate.
"""

import argparse
import json
import os
import re
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import jax  # noqa: E402

jax.config.update("jax_enable_x64", True)

import jax.extend.mlir as jax_mlir  # noqa: E402
from jax._src import compiler  # noqa: E402
from jax._src.lib import xla_client  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_DIR = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "fixtures", "jax")


def load(path, dtype):
    arr = np.load(path, allow_pickle=False)
    return arr.view(ml_dtypes.bfloat16) if dtype == "bf16" else arr


def same_bits(got, want):
    if got.shape != want.shape or got.dtype != want.dtype:
        return False
    if want.dtype.kind == "c":
        return same_bits(got.real.copy(), want.real.copy()) and same_bits(got.imag.copy(), want.imag.copy())
    if want.dtype.kind == "f" or want.dtype == ml_dtypes.bfloat16:
        nan = np.isnan(want.astype(np.float64))
        if not np.array_equal(nan, np.isnan(got.astype(np.float64))):
            return False
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[want.dtype.itemsize]
        return bool(np.array_equal(got.view(width)[~nan], want.view(width)[~nan]))
    return bool(np.array_equal(got, want))


def run_case(casedir, device):
    with open(os.path.join(casedir, "meta.json")) as f:
        meta = json.load(f)
    with open(os.path.join(casedir, "module.hlo")) as f:
        text = f.read()
    module = xla_client.hlo.hlo_module_from_text(text)
    stablehlo = jax_mlir.hlo_to_stablehlo(module.as_serialized_hlo_module_proto())
    # Use jax.jit's compile options: calling compile_and_load without options
    # gives XLA:CPU min/max/clamp that drop NaNs (see the README).
    options = compiler.get_compile_options(num_replicas=1, num_partitions=1)
    exe = device.client.compile_and_load(stablehlo, [device], options)
    args = [jax.device_put(load(os.path.join(casedir, f"in{i}.npy"), s["dtype"]), device)
            for i, s in enumerate(meta["inputs"])]
    outs = exe.execute_sharded(args).disassemble_into_single_device_arrays()
    outs = [np.asarray(o[0]) for o in outs]
    if len(outs) != len(meta["outputs"]):
        return f"{len(outs)} outputs, expected {len(meta['outputs'])}"
    for i, (o, s) in enumerate(zip(outs, meta["outputs"])):
        want = load(os.path.join(casedir, f"out{i}.npy"), s["dtype"])
        if not same_bits(o, want):
            return f"out{i} differs"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", nargs="?", default=DEFAULT_DIR)
    ap.add_argument("-k", "--filter", default=None, help="only cases matching this regex")
    args = ap.parse_args()
    device = jax.devices("cpu")[0]
    names = sorted(n for n in os.listdir(args.dir) if os.path.isfile(os.path.join(args.dir, n, "meta.json")))
    if args.filter:
        names = [n for n in names if re.search(args.filter, n)]
    failed = 0
    for n in names:
        try:
            msg = run_case(os.path.join(args.dir, n), device)
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
        if msg:
            failed += 1
            print(f"FAIL {n}: {msg}")
    print(f"{len(names) - failed} of {len(names)} cases reproduced from module.hlo")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
