#!/usr/bin/env python3
"""Where a step's time went, read from a ringtrain --timeline trace.

  timeline_summary.py FILE [--skip STEPS] [--overlap on|off] [--spans] [--json]

Per rank, from the step that follows the first STEPS (warm-up: first touch of the buffers), in
milliseconds per step: forward and backward (the layers' spans), gradient all-reduce (the buckets'
spans on the communication thread), the waits for averaged gradients, the optimiser; and the share
of the all-reduce time that was exposed, i.e. not hidden behind computation: the waits over the
all-reduce time with overlap on, all of it with overlap off (the step then runs the all-reduces
itself). Also the step's tail: from the end of the last rank's backward to the end of the last
optimiser update on any rank, the median over the steps (what a rank that finishes backward last
still adds to the step), and the same median for steps grouped by the lag between the first and
the last rank's end of backward (the tail depends on it: the longer the others wait, the more of
the average they have done), so that two builds can be compared at equal lag; and when each of
the two ends, the rank that finished backward first and the one that finished last. With --spans
also the median duration of every span name (each layer's forward and backward, ...), per rank.
Where the trace has the model's stage samples (CPU training: "model stages (ms)", one a step),
the median milliseconds per step of each stage (the products against the kernels between them),
per rank, over the same steps. Prints tables, or one JSON object with --json.
"""
import argparse
import collections
import statistics
import json
import sys


def summarise(events, skip, overlap, with_spans=False):
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
    result = {"ranks": ranks, "mean": mean,
              "tail_us_median": statistics.median(t[0] for t in tails) if tails else None,
              "tail_by_lag": tail_by_lag(tails)}
    if tails and len(by_rank) > 1:
        result["end_after_last_backward_us_median"] = {
            "rank_first_to_finish_backward": statistics.median(t[2] for t in tails),
            "rank_last_to_finish_backward": statistics.median(t[3] for t in tails)}
    if with_spans:
        result["span_us_median"] = span_medians(by_rank, skip)
    return result


def span_medians(by_rank, skip):
    """Per rank, the median duration of each span name, over the spans from step `skip` on."""
    medians = {}
    for rank, spans in sorted(by_rank.items()):
        begin = sorted(e["ts"] for e in spans if e["cat"] == "data")[skip]
        durations = collections.defaultdict(list)
        for e in spans:
            if e["ts"] >= begin:
                durations[e["name"]].append(e["dur"])
        medians[rank] = {name: statistics.median(d) for name, d in durations.items()}
    return medians


LAG_BINS_US = (0, 100, 200, 300, 500)


def step_tails(by_rank, skip):
    """Per step, in microseconds: (last optimiser end on any rank) - (last backward end on any
    rank); the lag (last backward end) - (first backward end); and the optimiser end of the rank
    that finished backward first, and of the one that finished it last, after the last backward
    end."""
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
            last = max(backward)
            first_rank = backward.index(min(backward))
            last_rank = backward.index(last)
            tails.append((max(optimiser) - last, last - min(backward),
                          optimiser[first_rank] - last, optimiser[last_rank] - last))
    return tails


def tail_by_lag(tails):
    """The median tail of the steps in each lag bin (only with several ranks)."""
    if not tails or all(t[1] == 0 for t in tails):
        return []
    bins = []
    for i, low in enumerate(LAG_BINS_US):
        high = LAG_BINS_US[i + 1] if i + 1 < len(LAG_BINS_US) else None
        chosen = [t[0] for t in tails if t[1] >= low and (high is None or t[1] < high)]
        if chosen:
            bins.append({"lag_from_us": low, "lag_to_us": high, "steps": len(chosen),
                         "tail_us_median": statistics.median(chosen)})
    return bins


def stage_medians(events, skip):
    """rank -> stage -> median ms per step of the "model stages (ms)" samples after `skip`."""
    samples = collections.defaultdict(list)
    for e in events:
        if e.get("ph") == "C" and e.get("name") == "model stages (ms)":
            samples[e["pid"]].append(e)
    medians = {}
    for rank in sorted(samples):
        kept = sorted(samples[rank], key=lambda e: e["ts"])[skip:]
        if kept:
            medians[rank] = {stage: statistics.median(e["args"][stage] for e in kept)
                             for stage in kept[0]["args"]}
    return medians


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--skip", type=int, default=2)
    parser.add_argument("--overlap", choices=["on", "off"], default="on")
    parser.add_argument("--spans", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    try:
        with open(args.file, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        print(f"error: {args.file}: {e}", file=sys.stderr)
        return 2
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    result = summarise(events, args.skip, args.overlap == "on", args.spans)
    result["stage_ms_median"] = stage_medians(events, args.skip)
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
    ends = result.get("end_after_last_backward_us_median")
    if ends:
        print(f"optimiser end after the last backward end, median: rank first to finish backward "
              f"{ends['rank_first_to_finish_backward']:.0f} us, rank last to finish "
              f"{ends['rank_last_to_finish_backward']:.0f} us")
    stages = result["stage_ms_median"]
    if stages:
        names = list(next(iter(stages.values())))
        print(f"{'model stage, median ms/step':<36}" + "".join(f"{'rank ' + str(r):>10}" for r in stages))
        for name in names:
            print(f"{name:<36}" + "".join(f"{stages[r].get(name, 0):>10.2f}" for r in stages))
    if args.spans:
        medians = result["span_us_median"]
        names = sorted({n for m in medians.values() for n in m})
        print(f"{'span median us':<36}" + "".join(f"{'rank ' + str(r):>10}" for r in medians))
        for name in names:
            print(f"{name:<36}" + "".join(
                f"{medians[r][name]:>10.1f}" if name in medians[r] else f"{'-':>10}"
                for r in medians))
    return 0


if __name__ == "__main__":
    sys.exit(main())
