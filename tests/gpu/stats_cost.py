"""What sampling statistics costs the engine's GPT on the GPU (issue 47, E3).

    python3 tests/gpu/stats_cost.py FP8WB [--base BASE_FP8WB] [--set k=v ...]

Runs `FP8WB train --device cuda` with the given settings at stats_interval 0, 1 and 25
(and, with --base, an earlier build's CLI at 0 and 1), every configuration twice in turn
so that a drift of the machine falls on all alike. Prints, per run, the median and
harmonic mean of wall-clock tokens/s over steps 10 on, the medians near a sample of every
25 steps (steps 0 and 1 mod 25) and far from one, and the minor page faults and CPU
seconds the run took.
"""
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile


def main(binary, base, settings, steps=100, rounds=2):
    configs = [("stats0", binary, 0), ("stats1", binary, 1), ("stats25", binary, 25)]
    if base:
        configs += [("base stats0", base, 0), ("base stats1", base, 1)]
    db = os.path.join(tempfile.mkdtemp(prefix="fp8wb-stats-cost-"), "runs.sqlite")
    runs = []
    for rnd in range(rounds):
        for name, cli, interval in configs:
            tag = f"{name} #{rnd}"
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            subprocess.run([cli, "train", "--db", db, "--device", "cuda", "--quiet", *settings,
                            "--set", f"steps={steps}", "--set", f"stats_interval={interval}",
                            "--set", f"name={tag}"], check=True, stdout=subprocess.DEVNULL)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            runs.append((tag, after.ru_minflt - before.ru_minflt, after.ru_utime - before.ru_utime,
                         after.ru_stime - before.ru_stime))
    c = sqlite3.connect(db)
    for tag, faults, user, system in runs:
        rows = c.execute(
            "select c.step, c.value from scalars c join series s on c.series_id = s.id "
            "join runs r on r.id = s.run_id where r.name = ? and s.name = 'wall_tokens_per_s' "
            "order by c.step", (tag,)).fetchall()
        v = [x for s, x in rows if s >= 10]
        near = [x for s, x in rows if s >= 10 and s % 25 in (0, 1)]
        far = [x for s, x in rows if s >= 10 and s % 25 not in (0, 1)]
        print(f"{tag:16s} median {statistics.median(v) / 1e3:7.1f}k"
              f"  hmean {statistics.harmonic_mean(v) / 1e3:7.1f}k"
              f"  near samples {statistics.median(near) / 1e3:7.1f}k"
              f"  far {statistics.median(far) / 1e3:7.1f}k"
              f"  minor faults {faults / steps:7.0f} a step  user {user:5.1f} s  sys {system:5.1f} s")


if __name__ == "__main__":
    args = sys.argv[1:]
    base = None
    if len(args) > 2 and args[1] == "--base":
        base = args[2]
        del args[1:3]
    main(args[0], base, args[1:])
