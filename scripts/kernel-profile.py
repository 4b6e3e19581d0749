#!/usr/bin/env python3
"""Sums kernel times by kernel: time, launches and average, largest first. Input: an ncu --csv with the metric
gpu__time_duration.sum (kernels measured one at a time with cold caches: read them as shares, not as speeds),
or with --nsys the csv of `nsys stats --report cuda_gpu_kern_sum` (times as the kernels really ran)."""
import collections
import csv
import re
import sys

if sys.argv[1] == "--nsys":
    rows = list(csv.DictReader(line for line in open(sys.argv[2]) if "," in line))
    total = sum(float(row["Total Time (ns)"]) for row in rows)
    print(f"{total / 1e3:.1f} us in {sum(int(row['Instances']) for row in rows)} kernels")
    for row in rows[:25]:
        name = re.sub(r"\(.*", "", row["Name"])[:100]
        print(f"{float(row['Total Time (ns)']) / 1e3:10.1f} us {int(row['Instances']):5d} x "
              f"{float(row['Avg (ns)']) / 1e3:8.2f} us  {name}")
    sys.exit(0)

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
