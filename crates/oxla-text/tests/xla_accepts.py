#!/usr/bin/env python3
"""Checks that XLA's own HLO parser accepts every module oxla printed.

Usage:
    OXLA_DUMP_PRINTED=/tmp/printed cargo test -p oxla-text --test conformance dump
    python3 crates/oxla-text/tests/xla_accepts.py /tmp/printed [--compare]

Every *.hlo under the directory (recursively) is given to
`xla_client.hlo.hlo_module_from_text` from the installed jaxlib. With
--compare it also reports how many files XLA prints back byte for byte
(with print_large_constants), and how many differ only in instruction
order, which XLA sets by its own post-order walk.

XLA aborts the process on some malformed input (a CHECK failure) instead of
raising, so the files are parsed by a worker process that is restarted after
a crash; the file it was on is reported as a crash. Not run by cargo.
"""

import argparse
import json
import os
import subprocess
import sys


def worker():
    """Reads file paths from stdin, answers one JSON line per file."""
    from jax._src.lib import xla_client as xc

    options = xc.hlo.HloPrintOptions()
    options.print_large_constants = True
    for line in sys.stdin:
        path = line.rstrip("\n")
        text = open(path, encoding="utf-8").read()
        try:
            module = xc.hlo.hlo_module_from_text(text)
        except Exception as e:  # XLA raises a plain RuntimeError/XlaRuntimeError
            answer = {"ok": False, "error": str(e)}
        else:
            reprinted = module.to_string(options)
            if reprinted == text:
                same = "identical"
            elif sorted(reprinted.splitlines()) == sorted(text.splitlines()):
                same = "reordered"
            else:
                same = "different"
            answer = {"ok": True, "same": same}
        print(json.dumps(answer), flush=True)


def hlo_files(root):
    out = []
    for dirpath, _, names in os.walk(root):
        out.extend(os.path.join(dirpath, n) for n in names if n.endswith(".hlo"))
    return sorted(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("directory")
    ap.add_argument("--compare", action="store_true", help="also compare XLA's re-print with the file")
    args = ap.parse_args()

    files = hlo_files(args.directory)
    if not files:
        print(f"no .hlo files under {args.directory}")
        return 1
    results = {}
    pending = list(files)
    while pending:
        proc = subprocess.Popen(
            [sys.executable, __file__, "--worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        proc.stdin.write("".join(p + "\n" for p in pending))
        proc.stdin.close()
        done = 0
        for line in proc.stdout:
            results[pending[done]] = json.loads(line)
            done += 1
        proc.wait()
        if done < len(pending):
            results[pending[done]] = {"ok": False, "error": "XLA crashed (CHECK failure) on this file"}
            done += 1
        pending = pending[done:]

    rejected = [(p, r["error"]) for p, r in results.items() if not r["ok"]]
    for path, error in rejected:
        detail = "\n    ".join(error.strip().splitlines()[:4])
        print(f"REJECTED {path}\n    {detail}")
    print(f"{len(files) - len(rejected)} of {len(files)} accepted by XLA's parser")
    if args.compare:
        counts = {"identical": 0, "reordered": 0, "different": 0}
        for p, r in results.items():
            if r["ok"]:
                counts[r["same"]] += 1
                if r["same"] == "different":
                    print(f"XLA prints differently: {p}")
        print(
            f"XLA's re-print: {counts['identical']} identical, "
            f"{counts['reordered']} identical up to instruction order, {counts['different']} different"
        )
    return 1 if rejected else 0


if __name__ == "__main__":
    if sys.argv[1:] == ["--worker"]:
        worker()
    else:
        sys.exit(main())
