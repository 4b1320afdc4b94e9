"""fp8wb.watch() on a user's own PyTorch model, end to end, with Debian's python3-torch.

Run by ctest (label `python`) with PYTHONPATH at the build tree and FP8WB_BINARY the fp8wb
program: the statistics a watched run stores are checked against the project's quantize of
the very tensors the model saw (saved by the test's own hooks), against the recipe's
formulas recomputed here in fp64 (amax, scale, delayed scaling's history), and the run's
ending (finished, failed, stopped, interrupted) against what `fp8wb runs` reports.
"""

import json
import math
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import time
import unittest

import torch

import fp8wb

FP8WB = os.environ.get("FP8WB_BINARY", "fp8wb")
# FP8WB_TEST_DEVICE=cuda (tests/gpu/run.sh PART=watch): the models train on the GPU, where a
# library built with CUDA takes the statistics; each is checked against the CPU kernels'.
DEVICE = os.environ.get("FP8WB_TEST_DEVICE", "cpu")
E4M3_MAX, E5M2_MAX = 448.0, 57344.0


def f32(v):
    """v rounded to fp32, as a Python float."""
    return float(torch.tensor(v, dtype=torch.float64).to(torch.float32))


def scale_for(amax, fmax, margin=0):
    """numerics.md: fp32(fmax / max(fp64(amax), 1e-12)) / 2^margin; 1 for amax 0."""
    if amax == 0 or not math.isfinite(amax):
        return 1.0
    return f32(f32(fmax / max(amax, 1e-12)) / 2.0 ** margin)


def unpack_histogram(blob):
    """The run store's histogram: the first nonzero bin, then LEB128 counts."""
    h = [0] * 66
    if not blob:
        return h
    b, i = blob[0], 1
    while i < len(blob):
        v, shift = 0, 0
        while True:
            byte = blob[i]
            i += 1
            v |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                break
        h[b] = v
        b += 1
    return h


def runs_json(db):
    out = subprocess.run([FP8WB, "runs", "list", "--json", "--db", db], check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out)


def model_and_data(seed=0):
    torch.manual_seed(seed)
    layer = torch.nn.TransformerEncoderLayer(d_model=32, nhead=4, dim_feedforward=64,
                                             dropout=0.0, batch_first=True)
    model = torch.nn.Sequential(torch.nn.Linear(16, 32),
                                torch.nn.TransformerEncoder(layer, num_layers=2),
                                torch.nn.Linear(32, 1))
    g = torch.Generator().manual_seed(seed + 1)
    batches = [torch.randn(8, 12, 16, generator=g).to(DEVICE) for _ in range(50)]
    return model.to(DEVICE), batches


class Saver:
    """The tensors each nn.Linear saw at the given steps, as the watch saw them."""

    def __init__(self, model, steps):
        self.steps, self.step, self.saved = steps, 0, {}
        for name, m in model.named_modules():
            if isinstance(m, torch.nn.Linear):
                m.register_forward_hook(self.hook(name))

    def hook(self, name):
        def f(m, inputs, out):
            if self.step not in self.steps:
                return
            s, x = self.step, inputs[0].detach().to("cpu", copy=True)
            self.saved.setdefault((s, name, "input"), x)
            self.saved.setdefault((s, name, "weight"), m.weight.detach().to("cpu", copy=True))
            def grad(g):  # returns None: the gradient flows on unchanged
                self.saved.setdefault((s, name, "grad_output"), g.detach().to("cpu", copy=True))
            out.register_hook(grad)
        return f


def train(model, batches, w, saver=None, steps=50, amaxes=None):
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    losses = []
    for step in range(steps):
        x = batches[step]
        loss = torch.nn.functional.mse_loss(model(x), x.sum(-1, keepdim=True))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        w.step(loss=loss, lr=1e-2)
        if saver:
            saver.step += 1
    return losses


class WatchTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.db = os.path.join(self.tmp.name, "runs.sqlite")

    def tearDown(self):
        self.tmp.cleanup()

    def rows(self, sql, *args):
        con = sqlite3.connect(self.db)
        try:
            return con.execute(sql, args).fetchall()
        finally:
            con.close()

    def stored_stats(self, run_id):
        cols = ("step, layer, role, amax, scale, numel, zeros, underflow, saturated, nonfinite, "
                "subnormal, sq_err, sq_sum, histogram")
        out = {}
        for r in self.rows(f"SELECT {cols} FROM tensor_stats WHERE run_id = ?", run_id):
            d = dict(zip([c.strip() for c in cols.split(",")], r))
            d["histogram"] = unpack_histogram(d["histogram"])
            out[(d["step"], d["layer"], d["role"])] = d
        return out

    def assert_equal_stats(self, stored, mine, key):
        for f in ("amax", "scale", "numel", "zeros", "underflow", "saturated", "nonfinite",
                  "subnormal", "sq_err", "sq_sum", "histogram"):
            if DEVICE != "cpu" and f in ("sq_err", "sq_sum"):
                # The GPU adds in another order: the sums agree to their last bits.
                self.assertAlmostEqual(stored[f], mine[f], delta=1e-9 * abs(mine[f]),
                                       msg=f"{key}: {f}")
                continue
            self.assertEqual(stored[f], mine[f], f"{key}: {f}")

    def test_transformer_50_steps_current_scaling(self):
        model, batches = model_and_data()
        sampled = {0, 10, 20, 30, 40}
        saver = Saver(model, sampled)
        with fp8wb.watch(model, db=self.db, name="encoder", recipe="tensorwise",
                         formats="hybrid", scaling="current", stats_interval=10,
                         config={"lr": 1e-2, "note": "test"}) as w:
            losses = train(model, batches, w, saver)
        run = self.rows("SELECT id, name, kind, status, config_json FROM runs")[0]
        self.assertEqual(run[1:4], ("encoder", "python", "finished"))
        cfg = json.loads(run[4])
        self.assertEqual(cfg["source"], "python")
        self.assertEqual(cfg["config"], {"lr": 1e-2, "note": "test"})
        # Every step's loss, as the script computed it.
        stored = self.rows("SELECT step, value FROM scalars JOIN series ON series.id = series_id "
                           "WHERE name = 'loss' ORDER BY step")
        self.assertEqual([s for s, _ in stored], list(range(50)))
        self.assertEqual([v for _, v in stored], losses)
        # The statistics: at the sampled steps only, for every layer that ran (the attention's
        # out_proj is called by F.multi_head_attention_forward, not through its forward).
        stats = self.stored_stats(w.run_id)
        self.assertEqual({k[0] for k in stats}, sampled)
        self.assertEqual(set(stats), set(saver.saved))
        self.assertEqual(len(stats), 5 * 6 * 3)
        for key, x in saver.saved.items():
            fmt = "e5m2" if key[2] == "grad_output" else "e4m3fn"
            mine = fp8wb.quantize_stats(x, scaling="tensorwise", format=fmt)
            self.assert_equal_stats(stats[key], mine, key)
            # And against the formulas, in fp64 here.
            amax = float(x.double().abs().max())
            self.assertEqual(stats[key]["amax"], amax, key)
            self.assertEqual(stats[key]["scale"],
                             scale_for(amax, E5M2_MAX if fmt == "e5m2" else E4M3_MAX), key)
            self.assertEqual(stats[key]["numel"], x.numel(), key)
            self.assertEqual(stats[key]["zeros"], int((x == 0).sum()), key)
            self.assertAlmostEqual(stats[key]["sq_sum"] / float((x.double() ** 2).sum()), 1.0,
                                   places=9)
        # `fp8wb runs` reads the run as any other.
        listed = runs_json(self.db)
        self.assertEqual((listed[0]["status"], listed[0]["steps"]), ("finished", 50))

    def test_delayed_scaling_follows_its_history(self):
        model, batches = model_and_data(seed=3)
        saver = Saver(model, set(range(12)))
        with fp8wb.watch(model, db=self.db, scaling="delayed", window=4, margin=1,
                         stats_interval=5) as w:
            train(model, batches, w, saver, steps=12)
        stats = self.stored_stats(w.run_id)
        self.assertEqual({k[0] for k in stats}, {0, 5, 10})
        history = {}
        for r in self.rows("SELECT step, layer, role, data FROM blobs "
                           "WHERE kind = 'amax_history' AND run_id = ?", w.run_id):
            history[r[:3]] = list(torch.frombuffer(bytearray(r[3]), dtype=torch.float32))
        layers = {k[1] for k in stats}
        for layer in layers:
            for role in ("input", "weight", "grad_output"):
                fmax = E5M2_MAX if role == "grad_output" else E4M3_MAX
                amaxes = [float(saver.saved[(s, layer, role)].double().abs().max())
                          for s in range(12)]
                for s in (0, 5, 10):
                    # Transformer Engine's rule: the scale of step s from the window of
                    # steps before it (max of the last 4), step 0 with scale 1.
                    past = amaxes[max(0, s - 4):s]
                    want = 1.0 if not past else scale_for(max(past), fmax, margin=1)
                    key = (s, layer, role)
                    self.assertEqual(stats[key]["scale"], want, key)
                    mine = fp8wb.quantize_stats(saver.saved[key],
                                                format="e5m2" if role == "grad_output"
                                                else "e4m3fn", scale=want)
                    self.assert_equal_stats(stats[key], mine, key)
                    window = list(reversed(amaxes[max(0, s - 3):s + 1]))
                    window += [0.0] * (4 - len(window))
                    self.assertEqual(history[key], [f32(a) for a in window], key)

    def test_every_steps_amax_is_stored_and_replays(self):
        model, batches = model_and_data(seed=5)
        saver = Saver(model, set(range(15)))
        with fp8wb.watch(model, db=self.db, scaling="delayed", window=4, margin=0,
                         stats_interval=5) as w:
            train(model, batches, w, saver, steps=15)
        con = sqlite3.connect(self.db)
        try:
            columns = con.execute("SELECT idx, layer, role FROM amax_tensors WHERE run_id = ? "
                                  "ORDER BY idx", (w.run_id,)).fetchall()
            rows = con.execute("SELECT step, amax FROM step_amax WHERE run_id = ? ORDER BY step",
                               (w.run_id,)).fetchall()
        finally:
            con.close()
        # Every layer's three roles, every step; each amax the fp64 max |x| of the tensor
        # the model saw, rounded to fp32.
        self.assertEqual(len(columns), 6 * 3)
        self.assertEqual([r[0] for r in rows], list(range(15)))
        for step, blob in rows:
            amax = list(torch.frombuffer(bytearray(blob), dtype=torch.float32))
            self.assertEqual(len(amax), len(columns))
            for (idx, layer, role), got in zip(columns, amax):
                want = f32(float(saver.saved[(step, layer, role)].double().abs().max()))
                self.assertEqual(float(got), want, (step, layer, role))
        # `fp8wb replay` takes the watched run: its own cell reproduces the stored scales.
        out = subprocess.run([FP8WB, "replay", str(w.run_id), "--db", self.db, "--json",
                              "--grid", "margin=0,1"], capture_output=True, text=True)
        self.assertEqual(out.returncode, 0, out.stderr)
        report = json.loads(out.stdout)
        self.assertEqual(len(report["cells"]), 2)
        self.assertEqual(report["steps"], 15)
        self.assertEqual(report["own_settings_check"], {"compared": 6 * 3 * 3,
                                                        "matches_stored_scales": True})

    def run_script(self, body, env=None, wait=True):
        script = os.path.join(self.tmp.name, "script.py")
        with open(script, "w") as f:
            f.write(textwrap.dedent("""\
                import sys, torch, fp8wb
                torch.manual_seed(0)
                model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(),
                                            torch.nn.Linear(16, 1))
                opt = torch.optim.SGD(model.parameters(), lr=1e-2)
                def one_step(w):
                    x = torch.randn(4, 8)
                    loss = model(x).pow(2).mean()
                    opt.zero_grad(); loss.backward(); opt.step()
                    w.step(loss=loss)
                """) + textwrap.dedent(body))
        e = dict(os.environ, **(env or {}))
        p = subprocess.Popen([sys.executable, script], env=e, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if wait:
            out, err = p.communicate(timeout=120)
            return p.returncode, out, err
        return p

    def test_sigkilled_script_leaves_its_run_interrupted(self):
        p = self.run_script("""
            with fp8wb.watch(model, stats_interval=2) as w:
                step = 0
                while True:
                    one_step(w)
                    step += 1
                    if step == 6:
                        print("six", flush=True)
            """, env={"FP8WB_DB": self.db, "FP8WB_RUN_NAME": "killed"}, wait=False)
        try:
            self.assertEqual(p.stdout.readline().strip(), "six")
            # The six steps are committed (the store's writer commits as they come).
            deadline = time.time() + 30
            while time.time() < deadline:
                if runs_json(self.db)[0]["steps"] >= 6:
                    break
                time.sleep(0.05)
            p.send_signal(signal.SIGKILL)
        finally:
            p.wait(timeout=30)
            p.stdout.close()
            p.stderr.close()
        run = runs_json(self.db)[0]
        self.assertEqual(run["name"], "killed")
        self.assertEqual(run["status"], "interrupted")
        self.assertGreaterEqual(run["steps"], 6)
        self.assertGreater(len(self.rows("SELECT * FROM tensor_stats")), 0)

    def test_exception_leaves_the_run_failed_with_its_message(self):
        rc, out, err = self.run_script("""
            with fp8wb.watch(model, db=sys.argv[0] + ".sqlite", name="boom") as w:
                for step in range(10):
                    if step == 3:
                        raise RuntimeError("the data loader broke at step 3")
                    one_step(w)
            """)
        self.assertNotEqual(rc, 0)
        self.assertIn("the data loader broke at step 3", err)  # still raised
        self.db = os.path.join(self.tmp.name, "script.py.sqlite")
        run = runs_json(self.db)[0]
        self.assertEqual((run["name"], run["status"], run["steps"]), ("boom", "failed", 3))
        msg = self.rows("SELECT message FROM runs")[0][0]
        self.assertEqual(msg, "RuntimeError: the data loader broke at step 3")

    def test_keyboard_interrupt_stops_the_run(self):
        rc, out, err = self.run_script("""
            with fp8wb.watch(model, db=sys.argv[0] + ".sqlite") as w:
                one_step(w); one_step(w)
                raise KeyboardInterrupt
            """)
        self.assertNotEqual(rc, 0)
        self.db = os.path.join(self.tmp.name, "script.py.sqlite")
        self.assertEqual(self.rows("SELECT status, message FROM runs")[0],
                         ("stopped", "stopped after 2 steps (KeyboardInterrupt)"))

    def test_bad_arguments_name_the_problem(self):
        model, _ = model_and_data()
        with self.assertRaisesRegex(ValueError, "recipe.*tensorwise"):
            fp8wb.watch(model, db=self.db, recipe="fastest")
        with self.assertRaisesRegex(ValueError, "window"):
            fp8wb.watch(model, db=self.db, window=0)
        with self.assertRaisesRegex(ValueError, "delayed scaling is tensorwise"):
            fp8wb.watch(model, db=self.db, recipe="rowwise", scaling="delayed")
        with self.assertRaisesRegex(ValueError, "ReLU has no torch.nn.Linear"):
            fp8wb.watch(torch.nn.ReLU(), db=self.db)
        with self.assertRaisesRegex(TypeError, "int64 tensor"):
            fp8wb.quantize_stats(torch.arange(12).reshape(3, 4))
        # None of these started a run.
        self.assertFalse(os.path.exists(self.db) and self.rows("SELECT * FROM runs"))
        # A run database of a newer schema is refused, and left as it was.
        with fp8wb.watch(model, db=self.db) as w:
            with self.assertRaisesRegex(TypeError, "loss is a str"):
                w.step(loss="low")
        con = sqlite3.connect(self.db)
        con.execute("PRAGMA user_version = 999")
        con.close()
        with self.assertRaisesRegex(fp8wb.StoreError, "schema version 999, newer than"):
            fp8wb.watch(model, db=self.db)
        self.assertEqual(len(self.rows("SELECT * FROM runs")), 1)


if __name__ == "__main__":
    unittest.main()
