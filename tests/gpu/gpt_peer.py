"""The engine's GPT written in plain PyTorch: the peer that `fp8wb train` is measured against
(docs/performance.md, E1/E2/E5). The same model as core/src/train/models.cpp: token embedding plus
learned positions, pre-LN blocks (LayerNorm, causal self-attention through one qkv linear and
a projection, LayerNorm, GELU MLP 4x), a final LayerNorm and a linear head, every linear with
a bias; fp32 master weights, AdamW (weight decay 0.01), the gradient's global norm clipped
to 1, cross-entropy over fp32 logits. Tokens are random ids over the engine's vocabulary.

  python3 tests/gpu/gpt_peer.py --d-model 1024 --layers 4 --heads 16 --context 256 --batch 32
      --mode eager|compile|fp8 [--device cuda] [--steps 60] [--json FILE]

Modes: eager (bf16 autocast, SDPA, fused AdamW where this PyTorch has them), compile
(the same under torch.compile), fp8 (every block linear through torch._scaled_mm with
tensorwise current scaling, E4M3 forward and E5M2 gradients, as torchao's Float8Linear
does by default, under torch.compile; the head stays bf16), fp32 (the CPU peer: no
autocast). On the CPU with Debian's python3-torch (1.13): fp32 or eager, attention as two
matmuls and a softmax where SDPA is missing, AdamW's foreach loop.
Prints one JSON line: tokens/s (median over timed steps) and the allocator's peak."""
import argparse
import json
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HAS_SDPA = hasattr(F, "scaled_dot_product_attention")


def scaled(x, dtype):
    amax = x.abs().amax().float()
    fmax = torch.finfo(dtype).max
    scale = fmax / torch.clamp(amax, min=1e-12)
    return (x.float() * scale).clamp(-fmax, fmax).to(dtype), scale.reciprocal()


class Fp8Matmul(torch.autograd.Function):
    """y = x w^T with FP8 operands (tensorwise current scaling): fprop E4M3 x E4M3,
    dgrad E5M2 x E4M3, wgrad E5M2 x E4M3 (HYBRID), as torchao's default recipe."""

    @staticmethod
    def forward(ctx, x, w):
        e4, e5 = torch.float8_e4m3fn, torch.float8_e5m2
        xq, xs = scaled(x, e4)
        wq, ws = scaled(w, e4)
        ctx.save_for_backward(xq, xs, wq, ws)
        return torch._scaled_mm(xq, wq.t(), scale_a=xs, scale_b=ws, out_dtype=torch.bfloat16,
                                use_fast_accum=True)

    @staticmethod
    def backward(ctx, dy):
        e5 = torch.float8_e5m2
        xq, xs, wq, ws = ctx.saved_tensors
        dyq, dys = scaled(dy, e5)
        # dx = dy w: w^T's codes laid out as the GEMM's column-major operand.
        dx = torch._scaled_mm(dyq, wq.t().contiguous().t(), scale_a=dys, scale_b=ws,
                              out_dtype=torch.bfloat16)
        # dw = dy^T x
        dw = torch._scaled_mm(dyq.t().contiguous(), xq.t().contiguous().t(), scale_a=dys,
                              scale_b=xs, out_dtype=torch.bfloat16)
        return dx, dw


class Linear(nn.Linear):
    fp8 = False

    def forward(self, x):
        if not self.fp8:
            return super().forward(x)
        shape = x.shape
        y = Fp8Matmul.apply(x.reshape(-1, shape[-1]).to(torch.bfloat16),
                            self.weight.to(torch.bfloat16))
        return (y + self.bias.to(torch.bfloat16)).reshape(*shape[:-1], -1)


class Block(nn.Module):
    def __init__(self, d, heads):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = Linear(d, 3 * d), Linear(d, d)
        self.fc1, self.fc2 = Linear(d, 4 * d), Linear(4 * d, d)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(b, t, 3, self.heads, d // self.heads).permute(
            2, 0, 3, 1, 4)
        if HAS_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
            mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
            y = torch.softmax(att.masked_fill(mask, float("-inf")), -1) @ v
        x = x + self.proj(y.transpose(1, 2).reshape(b, t, d))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, d, layers, heads, context):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Parameter(torch.randn(context, d) * 0.02)
        self.blocks = nn.ModuleList(Block(d, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab)

    def forward(self, x, y):
        h = self.tok(x) + self.pos[: x.shape[1]]
        for blk in self.blocks:
            h = blk(h)
        logits = self.head(self.ln_f(h)).float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, default=1024)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--context", type=int, default=256)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--vocab", type=int, default=62)  # the bundled corpus's characters
    ap.add_argument("--mode", default="eager", choices=["eager", "compile", "fp8", "fp32"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--json", default="")
    ap.add_argument("--trace", default="", help="after the timed steps, five more under the "
                    "profiler, written as tests/gpu/trace_summary.py reads them")
    a = ap.parse_args()
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(1)
    dev = torch.device(a.device)
    model = Gpt(a.vocab, a.d_model, a.layers, a.heads, a.context).to(dev)
    if a.mode == "fp8":
        for blk in model.blocks:
            for lin in (blk.qkv, blk.proj, blk.fc1, blk.fc2):
                lin.fp8 = True
    kw = {"weight_decay": 0.01, "lr": 1e-4}
    if dev.type == "cuda" and "fused" in torch.optim.AdamW.__init__.__code__.co_varnames:
        kw["fused"] = True
    opt = torch.optim.AdamW(model.parameters(), **kw)
    params = list(model.parameters())
    autocast = a.mode != "fp32"
    amp_dtype = torch.bfloat16

    def step(x, y):
        with torch.autocast(dev.type, dtype=amp_dtype, enabled=autocast):
            loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    if a.mode in ("compile", "fp8"):
        model = torch.compile(model)
    gen = torch.Generator().manual_seed(1)

    def batch():
        x = torch.randint(0, a.vocab, (a.batch, a.context + 1), generator=gen)
        return x[:, :-1].to(dev, non_blocking=True), x[:, 1:].to(dev, non_blocking=True)

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(a.warmup):
        step(*batch())
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    times = []
    loss = None
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step(*batch())
        sync()  # per step, as a training loop that logs its loss would
        t1 = time.perf_counter()
        times.append(t1 - t0)
        t0 = t1
    ms = statistics.median(times) * 1e3
    if a.trace:
        from torch.autograd import DeviceType
        from torch.profiler import ProfilerActivity, profile, record_function
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(5):
                with record_function("fp8wb_step"):
                    step(*batch())
                    sync()
        events = [{"name": e.name, "cuda": e.device_type == DeviceType.CUDA,
                   "start_ns": int(e.time_range.start * 1000),
                   "dur_ns": int(e.time_range.elapsed_us() * 1000)} for e in prof.events()]
        with open(a.trace, "w") as f:
            json.dump(events, f)
    out = {"mode": a.mode, "device": str(dev), "torch": torch.__version__, "sdpa": HAS_SDPA,
           "d_model": a.d_model, "layers": a.layers, "heads": a.heads, "context": a.context,
           "batch": a.batch, "step_ms": ms, "tokens_per_s": a.batch * a.context / (ms / 1e3),
           "peak_gb": torch.cuda.max_memory_allocated() / 1e9 if dev.type == "cuda" else None,
           "loss": float(loss)}
    print(json.dumps(out))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
