#!/usr/bin/env python3
"""Summarizes a --trace-experts timeline (docs/experts.md): per split layer, the means in microseconds of what the
caller and the pool did, and the gaps between them that the device's work fills.

  scripts/trace-summary.py TRACE.json [--skip-steps N]

read: the caller waiting for a layer's routing; split: deciding the tiers; queue: queueing the GPU's part; pool: the
pool's run; pool lag: from the routing read to the pool's start (the pool thread waking); after pool: from the pool's
end to the next layer's routing on the host (its result's copy, the next attention and router, the read back);
layer: from one routing read to the next. A step starts where the layer number falls."""
import argparse
import json
import statistics


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--skip-steps", type=int, default=1, help="steps left out at the start (warm-up)")
    args = parser.parse_args()
    events = json.load(open(args.trace))["traceEvents"]
    lanes = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M"}
    spans = sorted((e for e in events if e["ph"] == "X"), key=lambda e: e["ts"])
    # Group the caller's routing reads into steps (a step's layers rise), and give each its pool run.
    steps, pools = [], {}
    for e in spans:
        layer = e["args"]["layer"]
        if e["name"] == "read routing":
            if not steps or layer <= steps[-1][-1]["layer"]:
                steps.append([])
            steps[-1].append({"layer": layer, "read_start": e["ts"], "read_end": e["ts"] + e["dur"]})
        elif steps and steps[-1] and steps[-1][-1]["layer"] == layer:
            entry = steps[-1][-1]
            if e["name"] == "pool" and lanes.get(e["tid"]) in ("pool", "caller"):
                entry["pool_start"], entry["pool_end"] = e["ts"], e["ts"] + e["dur"]
            elif e["name"] in ("split", "queue device part"):
                entry[e["name"]] = e["dur"]
    figures = {k: [] for k in ("read", "split", "queue", "pool", "pool lag", "after pool", "layer")}
    step_ms = []
    for step in steps[args.skip_steps:]:
        for i, entry in enumerate(step):
            figures["read"].append(entry["read_end"] - entry["read_start"])
            for key, name in (("split", "split"), ("queue", "queue device part")):
                if name in entry:
                    figures[key].append(entry[name])
            if "pool_start" in entry:
                figures["pool"].append(entry["pool_end"] - entry["pool_start"])
                figures["pool lag"].append(entry["pool_start"] - entry["read_end"])
                if i + 1 < len(step):
                    figures["after pool"].append(step[i + 1]["read_end"] - entry["pool_end"])
            if i + 1 < len(step):
                figures["layer"].append(step[i + 1]["read_end"] - entry["read_end"])
        if len(step) > 1:
            step_ms.append((step[-1]["read_end"] - step[0]["read_end"]) / 1e3)
    print(f"{len(steps) - args.skip_steps} steps, {len(figures['read'])} split layers, "
          f"{len(figures['pool'])} with pool runs")
    for key, values in figures.items():
        if values:
            q = statistics.quantiles(values, n=10) if len(values) > 1 else [values[0]] * 9
            print(f"  {key:>10}: mean {statistics.fmean(values):8.1f} us  p10 {q[0]:8.1f}  p50 {q[4]:8.1f}  "
                  f"p90 {q[8]:8.1f}")
    if step_ms:
        print(f"  first to last routing read of a step: mean {statistics.fmean(step_ms):.2f} ms")


if __name__ == "__main__":
    main()
