#!/usr/bin/env python3
"""cnn_speed.sh's summary: RESULTS JSON BATCH STEPS BACKEND. Reads the runs' JSON lines, writes
the medians and ranges over the rounds (and the per-round ratios ringtrain / PyTorch) to JSON and
prints them as a table."""
import json
import statistics
import sys

results, json_path, batch, steps, backend = sys.argv[1:6]
rows = [json.loads(line) for line in open(results)]
rounds = sorted({r["round"] for r in rows})


def figure(config, what=None):
    """{round: value}: ms per step of a step row, samples/s of a training run."""
    key = "ms_per_step" if config.startswith("step-") else "samples_per_second"
    return {r["round"]: r[key] for r in rows
            if r["config"] == config and (what is None or r.get("what") == what)}


def spread(values):
    return {"median": statistics.median(values), "min": min(values), "max": max(values),
            "values": values}


def ratio(a, b):
    """a[r] / b[r] over the rounds where both ran."""
    return [a[r] / b[r] for r in rounds if r in a and r in b]


# FLOPs per step as ringtrain counts them (model_step_perf's GFLOP/s times its time).
flops_per_step = next(r["ms_per_step"] * r["gflops"] * 1e6 for r in rows
                      if r["config"] == "step-ringtrain")
# (label, config, what): ms per step rows, then samples/s rows.
steps_rows = [("ringtrain step (forward+backward)", "step-ringtrain", "cnn step"),
              ("ringtrain@compare step", "step-ringtrain@compare", "cnn step"),
              ("PyTorch step (forward+backward)", "step-pytorch", "cnn forward+backward"),
              ("PyTorch step + SGD", "step-pytorch", "cnn forward+backward+sgd")]
train_rows = [(f"ringtrain 2 ranks ({backend})", "ringtrain-2"),
              ("ringtrain@compare 2 ranks", "ringtrain-2@compare"),
              ("PyTorch DDP gloo 2 ranks", "pytorch-ddp-2")]
summary = {"model": "cnn", "batch_per_rank": int(batch), "train_steps": int(steps),
           "backend_2_ranks": backend, "rounds": len(rounds), "flops_per_step": flops_per_step,
           "one_core_ms_per_step": {}, "two_ranks_samples_per_second": {}, "ratios": {}}
for label, config, what in steps_rows:
    f = figure(config, what)
    if f:
        summary["one_core_ms_per_step"][label] = spread(list(f.values()))
for label, config in train_rows:
    f = figure(config)
    if f:
        summary["two_ranks_samples_per_second"][label] = spread(list(f.values()))
pytorch_step = figure("step-pytorch", "cnn forward+backward")
pytorch_sgd = figure("step-pytorch", "cnn forward+backward+sgd")
pytorch_ddp = figure("pytorch-ddp-2")
for name in ("", "@compare"):
    mine = figure("step-ringtrain" + name, "cnn step")
    if mine and pytorch_step:
        # Speed ratios: PyTorch's time over ringtrain's.
        summary["ratios"][f"step{name} / pytorch forward+backward"] = spread(ratio(pytorch_step, mine))
        summary["ratios"][f"step{name} / pytorch with sgd"] = spread(ratio(pytorch_sgd, mine))
    trained = figure("ringtrain-2" + name)
    if trained and pytorch_ddp:
        summary["ratios"][f"2 ranks{name} / pytorch ddp"] = spread(ratio(trained, pytorch_ddp))
json.dump(summary, open(json_path, "w"), indent=1)

fmt = lambda s, p=0: f"{s['median']:,.{p}f} ({s['min']:,.{p}f}-{s['max']:,.{p}f})"
print(f"# cnn, batch {batch} per rank, one thread per rank bound to a core, {len(rounds)} "
      f"round(s) interleaved; medians (range) over the rounds; {flops_per_step / 1e9:.3f} GFLOP "
      f"per step (products only)")
print("| one core | ms/step | GFLOP/s |")
print("|---|---:|---:|")
for label, s in summary["one_core_ms_per_step"].items():
    g = spread([flops_per_step / v * 1e-6 for v in s["values"]])
    print(f"| {label} | {fmt(s, 2)} | {fmt(g, 1)} |")
print(f"\n| 2 ranks, {steps} steps each | samples/s |")
print("|---|---:|")
for label, s in summary["two_ranks_samples_per_second"].items():
    print(f"| {label} | {fmt(s)} |")
if summary["ratios"]:
    print("\n| ringtrain's speed / PyTorch's, per round | median (range) |")
    print("|---|---:|")
for label, s in summary["ratios"].items():
    print(f"| {label} | {fmt(s, 3)} |")
