#!/usr/bin/env python3
"""Sums an ncu --csv (metric gpu__time_duration.sum) by kernel: time, launches and average, largest first.
ncu runs kernels one at a time: nothing overlaps, and unless told otherwise it flushes caches and locks base
clocks, so read the figures as shares of a step rather than as its speed."""
import collections
import csv
import re
import sys

rows = [row for row in csv.reader(open(sys.argv[1])) if len(row) > 10]
header = rows[0]
name_column, value_column = header.index("Kernel Name"), header.index("Metric Value")
total_ns = collections.defaultdict(float)
launches = collections.Counter()
for row in rows[1:]:
    try:
        value = float(row[value_column].replace(",", ""))
    except ValueError:
        continue
    name = re.sub(r"\(.*", "", row[name_column])[:100]
    total_ns[name] += value
    launches[name] += 1
print(f"{sum(total_ns.values()) / 1e3:.1f} us in {sum(launches.values())} kernels")
for name, ns in sorted(total_ns.items(), key=lambda item: -item[1])[:25]:
    print(f"{ns / 1e3:10.1f} us {launches[name]:5d} x {ns / launches[name] / 1e3:8.2f} us  {name}")
