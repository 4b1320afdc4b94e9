"""The GPT table of docs/performance.md (E1-E4, E7) from one call of `PART=gpt tests/gpu/run.sh`:
the engine's runs (a run store) beside the PyTorch peers (gpt_peer.py's JSON lines).

  python3 tests/gpu/gpt_table.py RUNS.sqlite PEERS.jsonl OUT.json
  python3 tests/gpu/gpt_table.py --curves CURVES.sqlite   runs "before N" / "after N": loss
      curves apart (largest and mean relative difference over the steps, and of the final
      loss), each engine against itself (the GPU's run-to-run spread) and against the other
  python3 tests/gpu/gpt_table.py --base BASE.sqlite RUNS.sqlite   the engine before and after
  python3 tests/gpu/gpt_table.py --trace TRACE.json [STEPS]   a Kineto trace of STEPS (5) steps
      (FP8WB_TRACE=... fp8wb train, or gpt_peer.py --trace): per step, the GPU's busy time
      (the union of its operations), the span from the first to the last, the host's time in
      the steps' "fp8wb_step" scopes (the engine's: launching), kernels by total time

Engine tokens/s: the median of the stored per-step figure over steps 20 and later (one
model's step: the FP8 model's alone where a reference trains beside it); wall: tokens of
one step over the run's wall-clock time per step (both models, everything else the run
does). Peaks: the allocator's, as stored (mem_fp8, mem_ref) and as the peer reports."""
import json
import sqlite3
import statistics
import sys


def reader(db_path):
    db = sqlite3.connect(db_path)

    def series(run, name, with_steps=False):
        rows = db.execute(
            "select c.step, c.value from scalars c join series s on c.series_id = s.id "
            "join runs r on r.id = s.run_id where r.name = ? and s.name = ? order by c.step",
            (run, name)).fetchall()
        return rows if with_steps else [v for (_, v) in rows]
    return series


def curves(db_path):
    series = reader(db_path)

    def apart(a, b):
        x, y = series(a, "loss"), series(b, "loss")
        if not x or len(x) != len(y):
            return f"{a} / {b}: {len(x)} and {len(y)} steps"
        r = [abs(p - q) / abs(q) for p, q in zip(x, y)]
        tail = max(1, len(x) // 10)
        fx, fy = sum(x[-tail:]) / tail, sum(y[-tail:]) / tail
        return (f"{a} / {b}: loss apart by {max(r):.2e} at most, {statistics.mean(r):.2e} on "
                f"average; final loss (last 10%) {fx:.4f} / {fy:.4f} ({abs(fx - fy) / fy:.2e})")
    for a, b in (("after 1", "after 2"), ("before 1", "before 2"), ("after 1", "before 1"),
                 ("after 2", "before 2")):
        print(apart(a, b))


def base(base_path, db_path):
    old, new = reader(base_path), reader(db_path)
    for tag in ("d1024", "d768"):
        for kind in ("bf16", "fp8"):
            o = old(f"{tag} {kind}", "tokens_per_s")[20:]
            n = new(f"{tag} {kind}", "tokens_per_s")[20:]
            if o and n:
                mo, mn = statistics.median(o), statistics.median(n)
                print(f"engine {tag} {kind}: before {mo / 1e3:.1f}k, after {mn / 1e3:.1f}k "
                      f"tokens/s ({mn / mo:.2f}x)")


def main(db_path, peers_path, out_path):
    series = reader(db_path)

    peers = [json.loads(line) for line in open(peers_path)] if peers_path else []
    out = {}
    for tag, d in (("d1024", 1024), ("d768", 768)):
        e = {}
        for kind in ("bf16", "fp8", "fp8 stats25", "fp8 stats1", "fp8 + reference"):
            tps = series(f"{tag} {kind}", "tokens_per_s")[20:]
            wall = series(f"{tag} {kind}", "wall_tokens_per_s")[20:]
            mem = series(f"{tag} {kind}", "mem_fp8")
            ref = series(f"{tag} {kind}", "mem_ref")
            e[kind] = {"tokens_per_s": statistics.median(tps) if tps else None,
                       "wall_tokens_per_s": statistics.median(wall) if wall else None,
                       "mem_gb": mem[-1] / 1e9 if mem else None,
                       "ref_mem_gb": ref[-1] / 1e9 if ref else None}
        # The statistics' cost split: sampled steps (and their neighbours, which the host
        # cannot overlap) against the others.
        for kind, every in (("fp8 stats25", 25),):
            rows = [(st, v) for st, v in series(f"{tag} {kind}", "wall_tokens_per_s", True)
                    if st >= 20 and v is not None]
            near = [v for st, v in rows if st % every in (0, 1, every - 1)]
            far = [v for st, v in rows if st % every not in (0, 1, every - 1)]
            e[kind]["wall_near_samples"] = statistics.median(near) if near else None
            e[kind]["wall_elsewhere"] = statistics.median(far) if far else None
            e[kind]["wall_mean"] = statistics.harmonic_mean([v for _, v in rows]) if rows else None
        p = {r["mode"]: r for r in peers if r["d_model"] == d}
        out[tag] = {"engine": e, "peers": p}
    json.dump(out, open(out_path, "w"), indent=1)

    def f(v):
        return f"{v / 1e3:8.1f}k" if v else "       -"

    # The engine's figure beside the peers': per wall-clock step (the peers time their loop,
    # a synchronisation each step); the per-model figure in parentheses in the JSON.
    w = lambda k, e: e[k]["wall_tokens_per_s"] or e[k]["tokens_per_s"]
    print("GPT tokens/s (wall-clock, median)  engine bf16  engine FP8  FP8+st25  FP8+st1 |"
          "  eager bf16  compile bf16  FP8 compiled")
    for tag, r in out.items():
        e, p = r["engine"], r["peers"]
        g = lambda m: p.get(m, {}).get("tokens_per_s")
        print(f"{tag:<35}{f(w('bf16', e))}  {f(w('fp8', e))}"
              f"  {f(w('fp8 stats25', e))} {f(w('fp8 stats1', e))} |"
              f"  {f(g('eager'))}  {f(g('compile'))}  {f(g('fp8'))}")
    for tag, r in out.items():
        e, p = r["engine"], r["peers"]
        bf, f8 = w("bf16", e), w("fp8", e)
        comp, pf8 = p.get("compile", {}).get("tokens_per_s"), p.get("fp8", {}).get("tokens_per_s")
        eager = p.get("eager", {}).get("tokens_per_s")
        s25, s1 = w("fp8 stats25", e), w("fp8 stats1", e)
        ratio = lambda a, b: f"{a / b:.2f}x" if a and b else "-"
        cost = lambda a: f"{100 * (f8 / a - 1):+.1f}%" if a and f8 else "-"
        ref = e["fp8 + reference"]
        # E4: a lockstep step (wall) against the two models' steps apart (bf16 and FP8 runs).
        lock = ref["wall_tokens_per_s"]
        apart = 1 / (1 / f8 + 1 / bf) if f8 and bf else None
        print(f"{tag}: E1 bf16/compile {ratio(bf, comp)} (/eager {ratio(bf, eager)}); "
              f"E2 FP8/peer FP8 {ratio(f8, pf8)}, FP8/bf16 {ratio(f8, bf)}; "
              f"E3 stats25 {cost(s25)}, stats1 {cost(s1)}; "
              f"E4 lockstep {f(lock)} vs apart {f(apart)} ({ratio(lock, apart)}); "
              f"stats25 steps near a sample {f(e['fp8 stats25']['wall_near_samples'])}, "
              f"elsewhere {f(e['fp8 stats25']['wall_elsewhere'])}, mean {f(e['fp8 stats25']['wall_mean'])}; "
              f"E7 peak FP8 {ref['mem_gb'] or 0:.2f} GB / reference {ref['ref_mem_gb'] or 0:.2f} GB"
              f" = {ratio(ref['mem_gb'], ref['ref_mem_gb'])}; peers' peaks "
              + ", ".join(f"{m} {p[m]['peak_gb']:.2f} GB" for m in p if p[m].get("peak_gb")))


CATEGORIES = [  # (kind, substrings of a kernel's name), first match wins
    ("attention", ("sdpa", "flash", "fmha", "cudnn", "attention")),
    ("gemm", ("nvjet", "gemm", "cutlass", "xmma", "cublas")),
    ("layer norm", ("layer_norm", "GammaBeta")),
    ("optimizer", ("FusedOptimizer", "LpNorm", "multi_tensor_apply")),
    ("fp8wb", ("fp8wb",)),
    ("triton", ("triton",)),
    ("copy/cast", ("copy", "Cat", "Memcpy")),
    ("reduce", ("reduce_kernel",)),
    ("memset", ("Memset", "Fill")),
]


def category(name):
    for kind, keys in CATEGORIES:
        if any(k in name for k in keys):
            return kind
    return "elementwise/other"


def trace(path, steps=5):
    events = json.load(open(path))
    # Kineto's GPU-side copies of annotations ("fp8wb_step", "Optimizer.step#AdamW.step")
    # are no GPU work.
    gpu = sorted((e for e in events if e["cuda"] and e["name"] != "fp8wb_step"
                  and not e["name"].startswith(("Optimizer.", "ProfilerStep"))),
                 key=lambda e: e["start_ns"])
    if not gpu:
        print(f"{path}: no GPU operations")
        return
    busy, end = 0, gpu[0]["start_ns"]
    for e in gpu:
        a, b = max(e["start_ns"], end), e["start_ns"] + e["dur_ns"]
        if b > a:
            busy += b - a
            end = b
    span = max(e["start_ns"] + e["dur_ns"] for e in gpu) - gpu[0]["start_ns"]
    host = sum(e["dur_ns"] for e in events if not e["cuda"] and e["name"] == "fp8wb_step")
    done = sum(e["dur_ns"] for e in events if not e["cuda"] and e["name"] == "fp8wb_complete")
    print(f"{path}: per step GPU busy {busy / steps / 1e6:.3f} ms, span {span / steps / 1e6:.3f} ms, "
          f"host in steps {host / steps / 1e6:.3f} ms, reading the step before "
          f"{done / steps / 1e6:.3f} ms, {len(gpu) / steps:.0f} GPU operations")
    # The host's operators by inclusive time (nested ones count in their callers too).
    cpu_tot, cpu_cnt = {}, {}
    for e in events:
        if e["cuda"] or e["name"] in ("fp8wb_step", "fp8wb_complete"):
            continue
        k = e["name"][:80]
        cpu_tot[k] = cpu_tot.get(k, 0) + e["dur_ns"]
        cpu_cnt[k] = cpu_cnt.get(k, 0) + 1
    def listed(keys):
        return ", ".join(f"{k} {cpu_tot[k] / steps / 1e3:.0f} us ({cpu_cnt[k] / steps:.0f}x)"
                         for k in sorted(keys, key=cpu_tot.get, reverse=True))
    ours = [k for k in cpu_tot if k.startswith("fp8wb_")]
    print("  host operators (inclusive): " +
          listed(sorted((k for k in cpu_tot if k not in ours), key=cpu_tot.get)[-20:]))
    # The engine's own spans (FP8WB_TRACE_SCOPE): its code between the operators.
    if ours:
        print("  engine's spans: " + listed(ours))
    cats = {}
    for e in gpu:
        c = category(e["name"])
        cats[c] = cats.get(c, 0) + e["dur_ns"]
    print("  by kind: " + ", ".join(f"{c} {v / steps / 1e6:.2f} ms"
                                    for c, v in sorted(cats.items(), key=lambda kv: -kv[1])))
    tot, cnt = {}, {}
    for e in gpu:
        k = e["name"][:110]
        tot[k] = tot.get(k, 0) + e["dur_ns"]
        cnt[k] = cnt.get(k, 0) + 1
    for k in sorted(tot, key=tot.get, reverse=True)[:20]:
        print(f"  {tot[k] / steps / 1e3:8.1f} us  {cnt[k] / steps:5.1f}x  {k}")


if __name__ == "__main__":
    if sys.argv[1] == "--trace":
        trace(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 5)
    elif sys.argv[1] == "--curves":
        curves(sys.argv[2])
    elif sys.argv[1] == "--base":
        base(sys.argv[2], sys.argv[3])
    else:
        main(*sys.argv[1:4])
