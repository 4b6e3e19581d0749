#!/usr/bin/env python3
"""Reads the CSV of scripts/kernel-trace.cpp (kernels as they ran, graphs and overlap included) and prints,
for the decode steps of the run (the kernels between two reads of logits, device-to-host copies, or without
such copies runs of kernels separated by idle gaps of the GPU; the first steps, before the step graphs exist,
are skipped): the step's time, and per kernel
(name and grid) its launches per step, its own time, and its share of the step's critical path: the kernels
are taken in order of their ends, and each is given the time by which it moved the latest end so far (its
part not hidden under kernels before it; idle time goes to the kernel after it). The shares sum to the step.
Then what happened between those steps (gaps over 3x the median, the host starting another run, left out),
while the GPU ran no kernel: the host's CUDA runtime calls and the copies, by time spent inside the gap. The
tracing itself slows the host's calls (a graph launch most: ~600 us traced against ~200 us of untraced
step-to-step time), so read those as where the host's time goes, not as its size.
Last, a middle layer as it ran: its kernels in order of their starts, each one's start and end after the
layer's first kernel started (means over the steps), so that a kernel that starts late (waiting for room on
the SMs, or for a kernel on another stream) shows; with the layer before's kernels still running then and
the next layer's first (a kernel in only some steps' window is averaged over those). A layer runs from one
launch of the step's first kernel that runs once per layer to the next.
Usage: kernel-trace.py trace.csv [steps to skip, default 4]"""
import collections
import csv
import re
import statistics
import sys

GAP_NS = 15_000  # the GPU idle this long ends a step where no reads mark the steps


def short(name):
    name = re.sub(r"\(anonymous namespace\)::|strata::|sdk::cuda::|cuda::|iq3::|quant_k::", "", name)
    name = re.sub(r"^void ", "", name)
    depth, result = 0, ""
    for c in name:  # drop the parameter list: the first parenthesis outside template arguments
        depth += {"<": 1, ">": -1}.get(c, 0)
        if c == "(" and depth == 0:
            break
        result += c
    return result[:90]


def steps_of(kernels, reads):
    """A step's kernels: those between two device-to-host copies (each decode step ends by reading its logits),
    or without such copies runs of kernels separated by GAP_NS of GPU idle (a step of several graphs may have
    such a gap inside it when tracing slows the host's launches)."""
    steps, current, latest_end = [], [], None
    ends = iter(sorted(read["end"] for read in reads))
    next_read = next(ends, None)
    for kernel in kernels:
        past_read = False
        while next_read is not None and kernel["start"] >= next_read:
            past_read, next_read = True, next(ends, None)
        if current and (past_read if reads else kernel["start"] - latest_end > GAP_NS):
            steps.append(current)
            current = []
        latest_end = kernel["end"] if not current else max(latest_end, kernel["end"])
        current.append(kernel)
    if current:
        steps.append(current)
    return steps


def main():
    kernels, others, reads = [], [], []
    for row in csv.DictReader(open(sys.argv[1])):
        event = {"start": int(row["start_ns"]), "end": int(row["end_ns"]), "graph": int(row["graph"])}
        if row["kind"] == "kernel":
            kernels.append(dict(event, key=f"{short(row['name'])} [{row['grid']}]"))
        else:
            others.append(dict(event, key=f"{row['kind']} {row['name']}"))
            if row["kind"] == "copy" and row["name"].endswith("kind 2"):  # CUPTI's device-to-host
                reads.append(event)
    if not kernels:
        sys.exit(f"{sys.argv[1]}: no kernels traced")
    kernels.sort(key=lambda k: k["start"])
    skip = int(sys.argv[2]) if len(sys.argv) > 2 else 4
    steps = steps_of(kernels, reads)
    graph_steps = [s for s in steps if any(k["graph"] for k in s)]
    if not graph_steps:
        graph_steps = steps
    sizes = collections.Counter(len(s) for s in graph_steps)
    size = sizes.most_common(1)[0][0]
    chosen = [s for s in graph_steps if len(s) == size][skip:] or [s for s in graph_steps if len(s) == size]
    walls, own, share, launches = [], collections.defaultdict(float), collections.defaultdict(float), collections.Counter()
    for step in chosen:
        walls.append(max(k["end"] for k in step) - step[0]["start"])
        frontier = step[0]["start"]
        for kernel in sorted(step, key=lambda k: k["end"]):
            share[kernel["key"]] += max(0, kernel["end"] - frontier)
            frontier = max(frontier, kernel["end"])
            own[kernel["key"]] += kernel["end"] - kernel["start"]
            launches[kernel["key"]] += 1
    n = len(chosen)
    print(f"{n} steps of {size} kernels: {statistics.mean(walls) / 1e3:.1f} us per step (median "
          f"{statistics.median(walls) / 1e3:.1f}), kernels' own time {sum(own.values()) / n / 1e3:.1f} us per step")
    print(f"{'share us':>9} {'own us':>8} {'x/step':>6} {'own/launch':>10}  kernel [grid]")
    for key in sorted(share, key=lambda k: -share[k]):
        print(f"{share[key] / n / 1e3:9.1f} {own[key] / n / 1e3:8.1f} {launches[key] / n:6.0f} "
              f"{own[key] / launches[key] / 1e3:10.2f}  {key}")
    print_between_steps(chosen, others)
    print_middle_layer(chosen)


def print_between_steps(chosen, others):
    gaps = [(max(k["end"] for k in a), b[0]["start"]) for a, b in zip(chosen, chosen[1:]) if a[-1]["end"] < b[0]["start"]]
    if not gaps:
        return
    # A gap far longer than most is the host starting another run (or the warm-up's end), not a step's turn.
    typical = statistics.median(last - first for first, last in gaps)
    gaps = [(first, last) for first, last in gaps if last - first < 3 * typical]
    inside = collections.defaultdict(float)
    for event in others:
        for first, last in gaps:
            overlap = min(event["end"], last) - max(event["start"], first)
            if overlap > 0:
                inside[event["key"]] += overlap
    print(f"between steps: {statistics.mean(last - first for first, last in gaps) / 1e3:.1f} us without a kernel "
          f"(over {len(gaps)} gaps); inside it, per gap:")
    for key in sorted(inside, key=lambda k: -inside[k])[:15]:
        print(f"{inside[key] / len(gaps) / 1e3:9.1f} us  {key}")


def print_middle_layer(chosen):
    counts = collections.Counter(k["key"] for k in chosen[0])
    n_layers = collections.Counter(counts.values()).most_common(1)[0][0]
    if n_layers < 2:
        return
    anchor = next(k["key"] for k in chosen[0] if counts[k["key"]] == n_layers)
    starts, ends = collections.defaultdict(list), collections.defaultdict(list)
    for step in chosen:
        firsts = [i for i, k in enumerate(step) if k["key"] == anchor]
        middle = len(firsts) // 2
        if middle + 1 >= len(firsts):
            continue
        begin = step[firsts[middle]]["start"]
        # The layer before's last kernels (those still running when this layer's first starts, which shows
        # how far the layers overlap), this layer's, and the next layer's first (the layer's period).
        before = [k for k in step[firsts[middle - 1]:firsts[middle]] if k["end"] > begin] if middle > 0 else []
        tagged = [(k, " (layer before)") for k in before] + [(k, "") for k in step[firsts[middle]:firsts[middle + 1]]]
        tagged.append((step[firsts[middle + 1]], " (next layer)"))
        seen = collections.Counter()
        for kernel, tag in tagged:  # a kernel that runs twice a layer (k and v of one type) is told apart by its turn
            key = kernel["key"] + tag
            seen[key] += 1
            starts[(key, seen[key])].append(kernel["start"] - begin)
            ends[(key, seen[key])].append(kernel["end"] - begin)
    print(f"layer {n_layers // 2} of {n_layers} (from the start of its {anchor}), us after its start:")
    print(f"{'start':>7} {'end':>7}  kernel [grid]")
    for key in sorted(starts, key=lambda key: statistics.mean(starts[key])):
        print(f"{statistics.mean(starts[key]) / 1e3:7.2f} {statistics.mean(ends[key]) / 1e3:7.2f}  {key[0]}")

main()
