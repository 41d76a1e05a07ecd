#!/usr/bin/env python3
"""Checks a ringtrain --timeline file: valid JSON in Chrome's trace format with, on every rank,
forward and backward spans for every layer, each bucket's all-reduce with its bytes and backend,
waits, optimiser updates and evaluation (and, when asked, checkpoints on rank 0); counter samples
("ph": "C") with non-negative numbers only, and with --stage, on every rank the "model stages (ms)"
samples with that stage's time above 0.

  check_timeline.py FILE --ranks N --layers fc1,relu1,... --backend ring [--require CATEGORY]...
                     [--require-rank0 CATEGORY]... [--shared] [--stage NAME]...

--shared (backend shm): whichever rank is idle averages, so all-reduce ("averaging") and wait spans
are required on some rank, not on every rank.

Prints one line per problem and exits 1 if there is any.
"""
import argparse
import collections
import json
import sys


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("file")
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--layers", required=True, help="comma-separated layer names")
    parser.add_argument("--backend", required=True)
    parser.add_argument("--require", action="append", default=[],
                        help="a further category every rank must have")
    parser.add_argument("--require-rank0", action="append", default=[],
                        help="a further category rank 0 must have (checkpoint: rank 0 writes)")
    parser.add_argument("--stage", action="append", default=[],
                        help="a model stage whose time every rank's samples must show")
    parser.add_argument("--shared", action="store_true",
                        help="all-reduce and wait spans on some rank suffice (shm)")
    args = parser.parse_args()

    try:
        with open(args.file, encoding="utf-8") as f:
            trace = json.load(f)
    except (OSError, ValueError) as e:
        print(f"{args.file}: not a valid JSON file: {e}")
        return 1
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    problems = []
    spans = collections.defaultdict(list)  # pid -> complete events
    names = collections.defaultdict(set)  # pid -> process_name metadata
    stages = collections.defaultdict(collections.Counter)  # pid -> stage -> total ms
    for e in events:
        if e.get("ph") == "M":
            if e.get("name") == "process_name":
                names[e["pid"]].add(e["args"]["name"])
            continue
        if e.get("ph") == "C":
            values = e.get("args", {})
            if not values or not all(isinstance(v, (int, float)) and v >= 0
                                     for v in values.values()):
                problems.append(f"counter sample without non-negative values: {e}")
            if e.get("name") == "model stages (ms)":
                stages[e.get("pid")].update(values)
            continue
        if e.get("ph") != "X":
            problems.append(f"event of phase {e.get('ph')!r} (only X, C and M expected): {e}")
            continue
        for key in ("name", "cat", "pid", "tid", "ts", "dur"):
            if key not in e:
                problems.append(f"event without {key!r}: {e}")
        if e.get("dur", 0) < 0 or e.get("ts", 0) < 0:
            problems.append(f"negative time: {e}")
        spans[e.get("pid")].append(e)

    if sorted(spans) != list(range(args.ranks)):
        problems.append(f"ranks with events: {sorted(spans)}, want 0..{args.ranks - 1}")
    layers = args.layers.split(",")
    some_rank = {"all-reduce": False, "wait": False}  # --shared: seen on any rank
    for rank in range(args.ranks):
        mine = spans.get(rank, [])
        if not names.get(rank):
            problems.append(f"rank {rank}: no process_name")
        have = collections.Counter((e["cat"], e["name"]) for e in mine)
        for layer in layers:
            for phase in ("forward", "backward"):
                if have[(phase, f"{phase} {layer}")] == 0:
                    problems.append(f"rank {rank}: no '{phase} {layer}' span")
        reduces = [e for e in mine if e["cat"] == "all-reduce"]
        some_rank["all-reduce"] |= bool(reduces)
        some_rank["wait"] |= any(e["cat"] == "wait" for e in mine)
        if not reduces and not args.shared:
            problems.append(f"rank {rank}: no all-reduce span")
        for e in reduces:
            a = e.get("args", {})
            if not isinstance(a.get("bytes"), int) or a["bytes"] <= 0:
                problems.append(f"rank {rank}: all-reduce without a byte count: {e}")
            if a.get("backend") != args.backend:
                problems.append(f"rank {rank}: all-reduce backend {a.get('backend')!r}, "
                                f"want {args.backend!r}: {e}")
                break
        categories = {e["cat"] for e in mine}
        wanted = ([] if args.shared else ["wait"]) + ["optimizer", "evaluation", "data"]
        for category in wanted + args.require + (args.require_rank0 if rank == 0 else []):
            if category not in categories:
                problems.append(f"rank {rank}: no '{category}' span")
        for stage in args.stage:
            if not stages[rank][stage] > 0:
                problems.append(f"rank {rank}: no time in model stage '{stage}' "
                                f"(samples: {dict(stages[rank])})")
    if args.shared:
        for category, seen in some_rank.items():
            if not seen:
                problems.append(f"no '{category}' span on any rank")
    for p in problems[:20]:
        print(f"{args.file}: {p}")
    if not problems:
        total = sum(len(v) for v in spans.values())
        print(f"{args.file}: {total} spans on {args.ranks} ranks, every expected event present")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
