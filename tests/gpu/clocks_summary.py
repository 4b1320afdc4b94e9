#!/usr/bin/env python3
"""The GPU's clocks, power and temperature while each variant of the MLP benchmark took its
timed steps: nvidia-smi's samples (--query-gpu=timestamp,clocks.sm,power.draw,
temperature.gpu --format=csv,noheader,nounits -lms 10) matched to each row's unix_ms
window in the benchmark's JSON.

    clocks_summary.py SMI_CSV BENCH_JSON
"""
import csv
import datetime
import json
import statistics
import sys


def samples(path):
    rows = []
    with open(path) as f:
        for r in csv.reader(f):
            try:
                t = datetime.datetime.strptime(r[0].strip(), "%Y/%m/%d %H:%M:%S.%f").timestamp() * 1e3
                rows.append((t, float(r[1]), float(r[2]), float(r[3])))
            except (ValueError, IndexError):
                pass  # a header, or a line cut short when sampling stopped
    return rows


def main():
    rows = samples(sys.argv[1])
    bench = json.load(open(sys.argv[2]))
    print(f"{'tokens x d':14} {'variant':36} {'ms':>8} {'SM MHz':>7} {'W':>6} {'C':>4} {'samples':>7}")
    for row in bench["rows"]:
        a, b = row.get("unix_ms", [0, 0])
        s = [x for x in rows if a <= x[0] <= b]
        if not s:
            continue
        med = lambda k: statistics.median(x[k] for x in s)
        print(f'{row["m"]}x{row["d"]:<9} {row["variant"]:36} {row["ms"]:8.3f} {med(1):7.0f} '
              f'{med(2):6.1f} {med(3):4.0f} {len(s):7d}')


if __name__ == "__main__":
    main()
