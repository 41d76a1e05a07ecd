#!/usr/bin/env python3
"""Where a step's time went, read from a ringtrain --timeline trace.

  timeline_summary.py FILE [--skip STEPS] [--overlap on|off] [--json]

Per rank, from the step that follows the first STEPS (warm-up: first touch of the buffers), in
milliseconds per step: forward and backward (the layers' spans), gradient all-reduce (the buckets'
spans on the communication thread), the waits for averaged gradients, the optimiser; and the share
of the all-reduce time that was exposed, i.e. not hidden behind computation: the waits over the
all-reduce time with overlap on, all of it with overlap off (the step then runs the all-reduces
itself). Also the step's tail: from the end of the last rank's backward to the end of the last
optimiser update on any rank, the median over the steps (what a rank that finishes backward last
still adds to the step), and the same median for steps grouped by the lag between the first and
the last rank's end of backward (the tail depends on it: the longer the others wait, the more of
the average they have done), so that two builds can be compared at equal lag. Prints a table, or
one JSON object with --json.
"""
import argparse
import collections
import statistics
import json
import sys


def summarise(events, skip, overlap):
    by_rank = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "X":
            by_rank[e["pid"]].append(e)
    ranks = {}
    for rank, spans in sorted(by_rank.items()):
        starts = sorted(e["ts"] for e in spans if e["cat"] == "data")
        if len(starts) <= skip:
            raise SystemExit(f"rank {rank}: {len(starts)} steps, fewer than --skip {skip} + 1")
        begin = starts[skip]
        steps = len(starts) - skip
        total = collections.Counter()
        for e in spans:
            if e["ts"] >= begin:
                total[e["cat"]] += e["dur"]
        compute = total["forward"] + total["backward"]
        reduce = total["all-reduce"]
        wait = total["wait"] if overlap else reduce
        ranks[rank] = {
            "steps": steps,
            "compute_ms": compute / steps / 1e3,
            "allreduce_ms": reduce / steps / 1e3,
            "wait_ms": wait / steps / 1e3,
            "optimizer_ms": total["optimizer"] / steps / 1e3,
            "exposed_share": (wait / reduce) if reduce > 0 else 0.0,
        }
    mean = {k: sum(r[k] for r in ranks.values()) / len(ranks)
            for k in ("compute_ms", "allreduce_ms", "wait_ms", "optimizer_ms", "exposed_share")}
    tails = step_tails(by_rank, skip)
    return {"ranks": ranks, "mean": mean,
            "tail_us_median": statistics.median(t for t, _ in tails) if tails else None,
            "tail_by_lag": tail_by_lag(tails)}


LAG_BINS_US = (0, 100, 200, 300, 500)


def step_tails(by_rank, skip):
    """Per step: (last optimiser end on any rank) - (last backward end on any rank), and the lag
    (last backward end) - (first backward end), in microseconds."""
    ends = {}  # rank -> per step [backward end, optimiser end]
    for rank, spans in by_rank.items():
        steps = []
        for e in sorted(spans, key=lambda e: e["ts"]):
            if e["cat"] == "data":
                steps.append([None, None])
            elif steps and e["cat"] in ("backward", "optimizer"):
                steps[-1][0 if e["cat"] == "backward" else 1] = e["ts"] + e["dur"]
        ends[rank] = steps
    count = min(len(s) for s in ends.values())
    tails = []
    for i in range(skip, count):
        backward = [ends[r][i][0] for r in ends]
        optimiser = [ends[r][i][1] for r in ends]
        if None not in backward and None not in optimiser:
            tails.append((max(optimiser) - max(backward), max(backward) - min(backward)))
    return tails


def tail_by_lag(tails):
    """The median tail of the steps in each lag bin (only with several ranks)."""
    if not tails or all(lag == 0 for _, lag in tails):
        return []
    bins = []
    for i, low in enumerate(LAG_BINS_US):
        high = LAG_BINS_US[i + 1] if i + 1 < len(LAG_BINS_US) else None
        chosen = [t for t, lag in tails if lag >= low and (high is None or lag < high)]
        if chosen:
            bins.append({"lag_from_us": low, "lag_to_us": high, "steps": len(chosen),
                         "tail_us_median": statistics.median(chosen)})
    return bins


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--overlap", choices=["on", "off"], default="on")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        with open(args.file, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        print(f"error: {args.file}: {e}", file=sys.stderr)
        return 2
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    result = summarise(events, args.skip, args.overlap == "on")
    if args.json:
        print(json.dumps(result))
        return 0
    print(f"{'rank':>4} {'compute ms':>10} {'all-reduce ms':>13} {'wait ms':>8} "
          f"{'optimiser ms':>12} {'exposed':>8}")
    for rank, r in result["ranks"].items():
        print(f"{rank:>4} {r['compute_ms']:>10.2f} {r['allreduce_ms']:>13.2f} {r['wait_ms']:>8.2f} "
              f"{r['optimizer_ms']:>12.2f} {100 * r['exposed_share']:>7.0f}%")
    if result["tail_us_median"] is not None:
        print(f"tail: last backward end to last optimiser end, median "
              f"{result['tail_us_median']:.0f} us per step")
    for b in result["tail_by_lag"]:
        span = f"{b['lag_from_us']}-{b['lag_to_us']}" if b["lag_to_us"] else f">= {b['lag_from_us']}"
        print(f"  lag {span:>9} us: {b['steps']:>5} steps, tail median {b['tail_us_median']:.0f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
