#!/usr/bin/env python3
"""What fp8wb.watch() costs a PyTorch training step on a GPU (issue 48's targets).

A GPT of d_model 1024 in plain PyTorch (its attention and MLP as nn.Linear layers, bf16
autocast), trained with and without fp8wb.watch(), timed step by step with CUDA events
after a warm-up:
  - the mean step over whole stats_interval=25 cycles, against the unwatched mean
    (target: at most 3 % more);
  - the median step between samples (steps that take no statistics), against the
    unwatched median (target: at most 1 % more).
For scaling "current" (nothing recorded between samples) and "delayed" (every step's amax
into the history). Prints one line per figure and exits 1 when a target is missed.

    PYTHONPATH=<build> python3 tests/gpu/watch_overhead.py [--layers 8] [--steps 150]
"""

import argparse
import math
import statistics
import sys
import tempfile

import torch

import fp8wb


class Block(torch.nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = torch.nn.LayerNorm(d)
        self.qkv = torch.nn.Linear(d, 3 * d)
        self.proj = torch.nn.Linear(d, d)
        self.ln2 = torch.nn.LayerNorm(d)
        self.fc1 = torch.nn.Linear(d, 4 * d)
        self.fc2 = torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        a = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class GPT(torch.nn.Module):
    def __init__(self, vocab, d, layers, heads, context):
        super().__init__()
        self.tok = torch.nn.Embedding(vocab, d)
        self.pos = torch.nn.Embedding(context, d)
        self.blocks = torch.nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln = torch.nn.LayerNorm(d)
        self.head = torch.nn.Linear(d, vocab, bias=False)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x))


def step_times(args, watch_kwargs):
    torch.manual_seed(0)
    model = GPT(args.vocab, args.d_model, args.layers, args.heads, args.context).cuda()
    opt = torch.optim.AdamW(model.parameters(), lr=3e-4, fused=True)
    data = torch.randint(0, args.vocab, (args.batch, args.context + 1), device="cuda")
    w = None
    if watch_kwargs is not None:
        db = tempfile.NamedTemporaryFile(suffix=".sqlite", delete=False).name
        w = fp8wb.watch(model, db=db, name="overhead", **watch_kwargs)
    times = []
    for step in range(args.warmup + args.steps):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(data[:, :-1])
            loss = torch.nn.functional.cross_entropy(logits.float().view(-1, args.vocab),
                                                     data[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if w is not None:
            w.step(loss=loss)
        end.record()
        end.synchronize()
        if step >= args.warmup:
            times.append(start.elapsed_time(end))
    if w is not None:
        w.close()
    return times


def amax_floor(args):
    """What reading every watched tensor of one step once costs the GPU: the inputs, weights
    and output gradients of every nn.Linear, their amaxes by torch._foreach_norm (one
    multi-tensor reduction, no hooks, no host work), in ms; the floor under any watcher that
    takes every step's amax of every tensor."""
    torch.manual_seed(0)
    model = GPT(args.vocab, args.d_model, args.layers, args.heads, args.context).cuda()
    data = torch.randint(0, args.vocab, (args.batch, args.context + 1), device="cuda")
    seen = []

    def hook(m, inputs, out):
        seen.append(inputs[0].detach())
        seen.append(m.weight.detach())
        out.register_hook(lambda g: seen.append(g.detach()) and None)
    for m in model.modules():
        if isinstance(m, torch.nn.Linear):
            m.register_forward_hook(hook)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(data[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.float().view(-1, args.vocab),
                                                 data[:, 1:].reshape(-1))
    loss.backward()
    ts = [t.reshape(-1) for t in seen]
    gb = sum(t.numel() * t.element_size() for t in ts) / 1e9
    times = []
    for i in range(25):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        torch._foreach_norm(ts, float("inf"))
        b.record()
        b.synchronize()
        if i >= 5:
            times.append(a.elapsed_time(b))
    return len(ts), gb, statistics.median(times)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--d-model", type=int, default=1024)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=8192)
    p.add_argument("--warmup", type=int, default=25)  # also the first sample's step 0
    p.add_argument("--steps", type=int, default=150)  # whole cycles of 25
    p.add_argument("--profile", action="store_true",
                   help="only the host's time in a watched run (delayed), by function")
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("watch_overhead.py needs a CUDA GPU")
    print(f"GPT d_model {args.d_model}, {args.layers} layers, batch {args.batch} x "
          f"{args.context}, {torch.cuda.get_device_name()}, PyTorch {torch.__version__}")
    if args.profile:
        import cProfile
        import pstats
        prof = cProfile.Profile()
        prof.runcall(step_times, args, {"scaling": "delayed", "stats_interval": 25})
        pstats.Stats(prof).sort_stats("tottime").print_stats(18)
        return
    base = step_times(args, None)
    base_mean, base_median = statistics.fmean(base), statistics.median(base)
    print(f"unwatched: mean {base_mean:.2f} ms, median {base_median:.2f} ms a step")
    n, gb, ms = amax_floor(args)
    print(f"floor: reading the step's {n} watched tensors once ({gb:.2f} GB) for their amaxes "
          f"(torch._foreach_norm) takes {ms:.2f} ms, {100 * ms / base_median:.1f} % of a step")
    ok = True
    for scaling in ("current", "delayed"):
        t = step_times(args, {"scaling": scaling, "stats_interval": 25})
        # Step k of the timed ones is step warmup + k of the run: samples where that is a
        # multiple of 25.
        between = [x for k, x in enumerate(t) if (args.warmup + k) % 25 != 0]
        mean_over = statistics.fmean(t) / base_mean - 1
        between_over = statistics.median(between) / base_median - 1
        ok &= mean_over <= 0.03 and between_over <= 0.01
        print(f"scaling {scaling}: stats_interval=25 mean {statistics.fmean(t):.2f} ms "
              f"({100 * mean_over:+.1f} %, target <= +3 %); between samples median "
              f"{statistics.median(between):.2f} ms ({100 * between_over:+.1f} %, "
              f"target <= +1 %)")
    again = step_times(args, None)  # the GPU's clocks drift: the baseline once more, last
    print(f"unwatched again: mean {statistics.fmean(again):.2f} ms, median "
          f"{statistics.median(again):.2f} ms a step")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
