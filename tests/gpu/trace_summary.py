#!/usr/bin/env python3
"""Summarises Kineto traces written by `fp8wb_float8_linear_bench --trace DIR`.

  python3 tests/gpu/trace_summary.py TRACE.json [OTHER.json]
  python3 tests/gpu/trace_summary.py --start TRACE.json


For each trace: per step (the bench's "fp8wb_step" scope: a step and its
synchronisation), the wall time of the step, the time the GPU is busy (the union of
kernels, copies and memsets), the idle rest, and the GPU operations with their time by
name. Given two traces, also the difference by name (OTHER minus TRACE), which shows
what a variant adds to a step. With --start: the start of each step up to its first
GEMM on the GPU (when the first GPU operation and the first GEMM began, and the GPU's idle
time before it), and the host's operators of the middle step in that time, nested, with
their start and duration: what keeps the GPU waiting after a synchronisation.
"""
import collections
import json
import re
import sys

def short(name):
    """A kernel's name without its parameters and namespaces' clutter; template
    arguments shortened, so that instances of one template stay apart."""
    name = name.replace("void ", "", 1).replace("(anonymous namespace)::", "")
    depth, out = 0, []
    for ch in name:  # drop the parameter list: the first "(" outside template arguments
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "(" and depth == 0:
            break
        out.append(ch)
    name = "".join(out)
    name = re.sub(r"\(fp8wb::Format\)", "F", name)
    name = re.sub(r"at::native::|fp8wb::qgpu::|std::", "", name)
    return name[:90]


def load(path):
    events = json.load(open(path))
    gpu = sorted(({"name": e["name"], "ts": e["start_ns"] / 1000, "dur": e["dur_ns"] / 1000}
                  for e in events if e["cuda"] and e["name"] != "fp8wb_step"), key=lambda e: e["ts"])
    windows = sorted((e["start_ns"] / 1000, (e["start_ns"] + e["dur_ns"]) / 1000)
                     for e in events if not e["cuda"] and e["name"] == "fp8wb_step")
    steps = []
    for a, b in windows:
        ops = [e for e in gpu if a <= e["ts"] < b]
        busy, cur_end = 0.0, a
        for e in ops:
            s, t = max(e["ts"], cur_end), e["ts"] + e["dur"]
            if t > s:
                busy += t - s
                cur_end = t
        steps.append({"wall": b - a, "busy": busy, "ops": ops})
    return steps


GEMM = re.compile(r"gemm|nvjet|xmma|cutlass", re.IGNORECASE)


def start_report(path):
    """The start of each step up to its first GEMM: see the module's text."""
    events = json.load(open(path))
    host = sorted(({"name": e["name"], "ts": e["start_ns"] / 1000, "dur": e["dur_ns"] / 1000}
                   for e in events if not e["cuda"] and e["name"] != "fp8wb_step"),
                  key=lambda e: (e["ts"], -e["dur"]))
    steps = load(path)
    windows = sorted((e["start_ns"] / 1000, (e["start_ns"] + e["dur_ns"]) / 1000)
                     for e in events if not e["cuda"] and e["name"] == "fp8wb_step")
    print(f"{path}: the start of each step (us from the step's start)")
    for (a, _), st in zip(windows, steps):
        gemm = next((e for e in st["ops"] if GEMM.search(e["name"])), None)
        if not st["ops"] or gemm is None:
            continue
        busy = sum(e["dur"] for e in st["ops"] if e["ts"] < gemm["ts"])
        print(f"  first GPU operation {st['ops'][0]['ts'] - a:7.1f}, first GEMM {gemm['ts'] - a:7.1f} "
              f"(GPU busy {busy:6.1f} before it)")
    if not windows:
        return
    a, _ = windows[len(windows) // 2]
    st = steps[len(windows) // 2]
    gemm = next((e for e in st["ops"] if GEMM.search(e["name"])), None)
    stop = gemm["ts"] if gemm else a
    print(f"  the middle step's host operators until its first GEMM began ({stop - a:.1f} us):")
    open_ends = []
    for e in host:
        if not a <= e["ts"] < stop:
            continue
        while open_ends and open_ends[-1] <= e["ts"]:
            open_ends.pop()
        print(f"  {e['ts'] - a:8.1f} {e['dur']:7.1f}  {'  ' * len(open_ends)}{e['name'][:80]}")
        open_ends.append(e["ts"] + e["dur"])
    for e in st["ops"]:
        if e["ts"] <= stop:
            print(f"  GPU {e['ts'] - a:8.1f} {e['dur']:7.1f}  {short(e['name'])}")


def by_name(steps):
    tot = collections.defaultdict(float)
    cnt = collections.Counter()
    for st in steps:
        for e in st["ops"]:
            tot[short(e["name"])] += e["dur"] / len(steps)
            cnt[short(e["name"])] += 1
    return tot, {k: v / len(steps) for k, v in cnt.items()}


def report(path):
    steps = load(path)
    if not steps:
        print(f"{path}: no whole step")
        return {}, {}
    n = len(steps)
    wall = sum(s["wall"] for s in steps) / n
    busy = sum(s["busy"] for s in steps) / n
    ops = sum(len(s["ops"]) for s in steps) / n
    small = [e for s in steps for e in s["ops"] if e["dur"] < 10]
    print(f"{path}: {n} steps; per step: wall {wall / 1000:.3f} ms, GPU busy {busy / 1000:.3f} ms, "
          f"idle {(wall - busy) / 1000:.3f} ms; {ops:.0f} GPU operations, of them "
          f"{len(small) / n:.0f} under 10 us ({sum(e['dur'] for e in small) / n / 1000:.3f} ms)")
    tot, cnt = by_name(steps)
    for k in sorted(tot, key=tot.get, reverse=True)[:25]:
        print(f"  {tot[k] / 1000:8.3f} ms  x{cnt[k]:5.1f}  {k}")
    return tot, cnt


def main():
    if sys.argv[1] == "--start":
        for path in sys.argv[2:]:
            start_report(path)
        return
    a = report(sys.argv[1])
    if len(sys.argv) > 2:
        b = report(sys.argv[2])
        print(f"difference per step, {sys.argv[2]} minus {sys.argv[1]}:")
        names = set(a[0]) | set(b[0])
        diff = {k: b[0].get(k, 0) - a[0].get(k, 0) for k in names}
        for k in sorted(diff, key=lambda k: abs(diff[k]), reverse=True)[:20]:
            dc = b[1].get(k, 0) - a[1].get(k, 0)
            print(f"  {diff[k] / 1000:+8.3f} ms  {dc:+5.1f} ops  {k}")


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # the reader (| head) had enough
        sys.stderr.close()
