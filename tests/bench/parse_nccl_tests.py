#!/usr/bin/env python3
"""Reads all_reduce_perf output the way scripts written for nccl-tests do, and checks it.

    parse_nccl_tests.py OUTPUT --tables N --sizes 8,32,... [--cases N] [--wrong W]
                        [--backends NAME,...]

Rows are the lines not starting with '#', split on blanks, columns taken by position (size,
count, type, redop, root, then time, algbw, busbw, #wrong out of place and in place); the
summary is the '# Out of bounds values' and '# Avg bus bandwidth' lines. Checks: N tables (one
'# Avg bus bandwidth' line each), each with every size of --sizes for each of --cases (type, redop)
pairs, every #wrong equal to W, and 'Out of bounds values' 0 OK when W is 0. With --backends, the
tables' '# backend:' lines name those backends, in that order. Prints what is wrong and exits 1, or prints a one-line summary and exits 0.
"""
import argparse
import sys


def parse(lines):
    """Tables: {'rows': [...], 'oob': text, 'avg_busbw': float}, in order of appearance."""
    tables, rows, oob = [], [], None
    for line in lines:
        if line.startswith("# Out of bounds values"):
            oob = line.split(":", 1)[1].strip()
        elif line.startswith("# Avg bus bandwidth"):
            tables.append({"rows": rows, "oob": oob, "avg_busbw": float(line.split(":", 1)[1])})
            rows = []
        elif line.strip() and not line.startswith("#"):
            f = line.split()
            rows.append({"size": int(f[0]), "count": int(f[1]), "type": f[2], "redop": f[3],
                         "root": int(f[4]), "busbw": (float(f[7]), float(f[11])),
                         "wrong": (int(f[8]), int(f[12])), "columns": len(f)})
    return tables, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("output")
    ap.add_argument("--tables", type=int, required=True)
    ap.add_argument("--sizes", required=True)
    ap.add_argument("--cases", type=int, default=1)
    ap.add_argument("--wrong", type=int, default=0)
    ap.add_argument("--backends")
    a = ap.parse_args()
    sizes = [int(s) for s in a.sizes.split(",")]
    with open(a.output) as f:
        tables, leftover = parse(f)
    problems = []
    if len(tables) != a.tables:
        problems.append(f"{len(tables)} tables, want {a.tables}")
    if a.backends is not None:
        with open(a.output) as f:
            named = [line.split(":", 1)[1].strip() for line in f if line.startswith("# backend:")]
        if named != a.backends.split(","):
            problems.append(f"tables of backends {named}, want {a.backends.split(',')}")
    if leftover:
        problems.append(f"{len(leftover)} rows after the last '# Avg bus bandwidth' line")
    for i, t in enumerate(tables):
        got = sorted(r["size"] for r in t["rows"])
        if got != sorted(sizes * a.cases):
            problems.append(f"table {i}: sizes {got}, want {sizes} x {a.cases}")
        if any(r["columns"] != 13 or r["root"] != -1 for r in t["rows"]):
            problems.append(f"table {i}: a row without 13 columns or with root other than -1")
        bad = [(r["size"], r["wrong"]) for r in t["rows"] if r["wrong"] != (a.wrong, a.wrong)]
        if bad:
            problems.append(f"table {i}: #wrong (out, in) other than {a.wrong}: {bad}")
        if a.wrong == 0 and t["oob"] != "0 OK":
            problems.append(f"table {i}: Out of bounds values '{t['oob']}', want '0 OK'")
        if a.wrong > 0 and not t["oob"].endswith("FAILED"):
            problems.append(f"table {i}: Out of bounds values '{t['oob']}', want FAILED")
        if a.wrong >= 0 and not t["avg_busbw"] > 0:
            problems.append(f"table {i}: Avg bus bandwidth {t['avg_busbw']}")
    for p in problems:
        print("  " + p)
    if not problems:
        print(f"{len(tables)} table(s) of {len(tables[0]['rows']) if tables else 0} rows, "
              f"avg busbw {[t['avg_busbw'] for t in tables]}")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
