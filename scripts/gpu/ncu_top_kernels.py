#!/usr/bin/env python3
"""Where a GPU program's time goes, kernel by kernel, from Nsight Compute's per-kernel summary.

    ncu --clock-control none --metrics gpu__time_duration.sum --print-summary per-kernel \\
        PROGRAM ... > ncu.txt
    scripts/gpu/ncu_top_kernels.py ncu.txt [--top 25] [--json top.json]

Each summary block names a kernel with its grid and block and how often it ran, then the metric's
minimum, maximum and average with their unit. Prints the kernels by total time (average x
invocations), largest first, with their share of the whole; exits 1 when the file holds no block
(ncu failed, or was run without that metric). Launches of one name with different grids are
separate blocks, and so separate rows.
"""
import argparse
import json
import re
import sys

_HEADER = re.compile(r"^  (\S.*?) \((\d+), (\d+), (\d+)\)x\((\d+), (\d+), (\d+)\), .*Invocations (\d+)\s*$")
_METRIC = re.compile(r"^\s+gpu__time_duration\.sum\s+(\w+)\s+([\d.,]+)\s+([\d.,]+)\s+([\d.,]+)\s*$")
_MICROSECONDS = {"ns": 1e-3, "usecond": 1.0, "us": 1.0, "ms": 1e3, "msecond": 1e3, "s": 1e6,
                 "second": 1e6, "nsecond": 1e-3}


def parse(lines):
    """[{'kernel', 'grid', 'block', 'invocations', 'average_us', 'total_us'}] in file order."""
    kernels, current = [], None
    for line in lines:
        header = _HEADER.match(line)
        if header:
            current = {"kernel": header.group(1), "grid": [int(v) for v in header.group(2, 3, 4)],
                       "block": [int(v) for v in header.group(5, 6, 7)],
                       "invocations": int(header.group(8))}
            continue
        metric = _METRIC.match(line)
        if metric and current is not None:
            unit = metric.group(1)
            if unit not in _MICROSECONDS:
                raise ValueError(f"unknown time unit '{unit}' in: {line.strip()}")
            average = float(metric.group(4).replace(",", "")) * _MICROSECONDS[unit]
            current.update(average_us=average, total_us=average * current["invocations"])
            kernels.append(current)
            current = None
    return kernels


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("file")
    p.add_argument("--top", type=int, default=25, help="rows to print (default 25)")
    p.add_argument("--json", help="also write every kernel, sorted, to this file")
    args = p.parse_args()
    with open(args.file, errors="replace") as f:
        kernels = parse(f)
    if not kernels:
        print(f"ncu_top_kernels.py: no per-kernel summary with gpu__time_duration.sum in {args.file}",
              file=sys.stderr)
        return 1
    kernels.sort(key=lambda k: k["total_us"], reverse=True)
    whole = sum(k["total_us"] for k in kernels)
    print(f"{'total us':>10} {'share':>6} {'calls':>6} {'avg us':>9}  kernel (grid, block)")
    for k in kernels[:args.top]:
        grid = "x".join(map(str, k["grid"]))
        block = "x".join(map(str, k["block"]))
        print(f"{k['total_us']:10.1f} {100 * k['total_us'] / whole:5.1f}% {k['invocations']:6d} "
              f"{k['average_us']:9.1f}  {k['kernel'][:100]} ({grid}, {block})")
    print(f"# {len(kernels)} kernels, {whole:.1f} us in all")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kernels": kernels, "total_us": whole}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
