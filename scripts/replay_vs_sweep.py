#!/usr/bin/python3
"""Replay against real training (docs/sweeps.md, "Replay against training").

Trains a base run, replays its per-step amax over a margin x window grid (`fp8wb replay`),
trains the same grid as a real sweep (`fp8wb sweep`, same seed and data), and prints a
Markdown table a cell a row: the saturating steps the replay of the base run predicts,
those each trained cell had (its own amax under its own setting, the same definition),
the median headroom of both, and each trained cell's final loss and loss gap.

    scripts/replay_vs_sweep.py FP8WB DB [--steps 150] [--set key=value ...]
"""
import argparse
import json
import subprocess
import sys


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
    return r.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("fp8wb")
    ap.add_argument("db")
    ap.add_argument("--margins", default="0,1,2,3")
    ap.add_argument("--windows", default="1,16,128,1024")
    ap.add_argument("--base-margin", default="0")
    ap.add_argument("--base-window", default="16")
    ap.add_argument("--set", action="append", default=[])
    a = ap.parse_args()
    sets = []
    for s in a.set:
        sets += ["--set", s]
    exe, db = a.fp8wb, a.db
    run([exe, "train", "--db", db, *sets, "--set", f"margin={a.base_margin}",
         "--set", f"window={a.base_window}", "--set", "amax_algo=max", "-q"])
    base = max(r["id"] for r in json.loads(run([exe, "runs", "list", "--db", db, "--json"])))
    rep = json.loads(run([exe, "replay", str(base), "--db", db, "--grid", f"margin={a.margins}",
                          "--grid", f"window={a.windows}", "--grid", "amax_algo=max", "--json"]))
    assert rep["own_settings_check"]["matches_stored_scales"] is True, rep["own_settings_check"]
    sweep = json.loads(run([exe, "sweep", "--db", db, *sets, "--set", "amax_algo=max",
                            "--grid", f"margin={a.margins}", "--grid", f"window={a.windows}",
                            "--json"]))
    keys = [x["key"] for x in sweep["axes"]]
    trained = {}
    for p in sweep["points"]:
        v = dict(zip(keys, p["values"]))
        trained[(int(v["margin"]), int(v["window"]))] = p
    print(f"base run {base} (margin {a.base_margin}, window {a.base_window}, max): "
          f"{rep['steps']} steps x {len(rep['tensors'])} tensors; own scales reproduced: "
          f"{rep['own_settings_check']['matches_stored_scales']}")
    print()
    print("| margin | window | saturating steps: replay of base / trained | "
          "median headroom (binades): replay / trained | trained final loss | trained loss gap |")
    print("|---|---|---|---|---|---|")
    agree = 0
    cells = sorted(rep["cells"], key=lambda c: (c["margin"], c["window"]))
    for c in cells:
        p = trained[(c["margin"], c["window"])]
        rid = p["run_ids"][0]
        own = json.loads(run([exe, "replay", str(rid), "--db", db, "--json"]))
        oc = own["cells"][0]
        assert own["own_settings_check"]["matches_stored_scales"] is True, own["own_settings_check"]
        same = (c["saturating_steps"] == 0) == (oc["saturating_steps"] == 0)
        agree += same
        fl = p.get("final_loss")
        gap = p.get("loss_gap")
        print(f"| {c['margin']} | {c['window']} | {c['saturating_steps']} / {oc['saturating_steps']}"
              f"{'' if same else ' (differ)'} | {c['median_headroom_binades']:.2f} / "
              f"{oc['median_headroom_binades']:.2f} | "
              f"{'-' if fl is None else f'{fl:.4f}'} | {'-' if gap is None else f'{gap:+.4f}'} |")
    print()
    print(f"{agree} of {len(cells)} cells agree on whether any step saturates.")
    best = rep["best"]
    print(f"replay's best: margin {best['margin']}, window {best['window']} "
          f"({'saturates' if best['saturates'] else 'no saturating step'})")


if __name__ == "__main__":
    main()
