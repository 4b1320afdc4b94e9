"""The engine's llama written in plain PyTorch: the peer that `fp8wb train --set model=llama`
is measured against. The same model as core/src/train/llama.cpp: token embedding, decoder layers
of RMSNorm, grouped-query attention with rotary embeddings (Hugging Face's layout) through
SDPA, RMSNorm, SwiGLU, a final RMSNorm and an untied head, no biases; fp32 master weights,
AdamW (weight decay 0.01), the gradient's global norm clipped to 1, cross-entropy over fp32
logits. Tokens are random ids.

  python3 tests/gpu/llama_peer.py --d-model 576 --intermediate 1536 --layers 30 --heads 9
      --kv-heads 3 --vocab 49152 --context 1024 --batch 8 --mode eager|compile [--json FILE]

Modes: eager (bf16 autocast, SDPA, fused AdamW), compile (the same under torch.compile).
Prints one JSON line: tokens/s (median over timed steps) and the allocator's peak."""
import argparse
import json
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class RmsNorm(nn.Module):
    def __init__(self, d, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d))
        self.eps = eps

    def forward(self, x):
        f = x.float()
        return (f * torch.rsqrt(f.pow(2).mean(-1, keepdim=True) + self.eps)).to(x.dtype) * \
            self.weight.to(x.dtype)


def rotate(x, cos, sin):
    half = x.shape[-1] // 2
    f = x.float()
    r = torch.cat([-f[..., half:], f[..., :half]], dim=-1)
    return (f * cos + r * sin).to(x.dtype)


class Layer(nn.Module):
    def __init__(self, d, inter, heads, kv, eps):
        super().__init__()
        self.h, self.kv, self.dh = heads, kv, d // heads
        self.q = nn.Linear(d, d, bias=False)
        self.k = nn.Linear(d, kv * self.dh, bias=False)
        self.v = nn.Linear(d, kv * self.dh, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, inter, bias=False)
        self.up = nn.Linear(d, inter, bias=False)
        self.down = nn.Linear(inter, d, bias=False)
        self.n1, self.n2 = RmsNorm(d, eps), RmsNorm(d, eps)

    def forward(self, x, cos, sin):
        b, t, d = x.shape
        a = self.n1(x)
        q = self.q(a).view(b, t, self.h, self.dh).transpose(1, 2)
        k = self.k(a).view(b, t, self.kv, self.dh).transpose(1, 2)
        v = self.v(a).view(b, t, self.kv, self.dh).transpose(1, 2)
        rep = self.h // self.kv
        k = rotate(k, cos, sin).repeat_interleave(rep, dim=1)
        v = v.repeat_interleave(rep, dim=1)
        y = F.scaled_dot_product_attention(rotate(q, cos, sin), k, v, is_causal=True)
        x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
        m = self.n2(x)
        return x + self.down(F.silu(self.gate(m)) * self.up(m))


class Llama(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed = nn.Embedding(a.vocab, a.d_model)
        self.layers = nn.ModuleList(Layer(a.d_model, a.intermediate, a.heads, a.kv_heads, 1e-5)
                                    for _ in range(a.layers))
        self.norm = RmsNorm(a.d_model, 1e-5)
        self.head = nn.Linear(a.d_model, a.vocab, bias=False)
        dh = a.d_model // a.heads
        inv = 1.0 / (a.rope_theta ** (torch.arange(0, dh, 2).float() / dh))
        ang = torch.outer(torch.arange(a.context).float(), inv)
        emb = torch.cat([ang, ang], -1)
        self.register_buffer("cos", emb.cos(), persistent=False)
        self.register_buffer("sin", emb.sin(), persistent=False)

    def forward(self, x, y):
        h = self.embed(x)
        for layer in self.layers:
            h = layer(h, self.cos, self.sin)
        logits = self.head(self.norm(h)).float()
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--d-model", type=int, default=576)
    ap.add_argument("--intermediate", type=int, default=1536)
    ap.add_argument("--layers", type=int, default=30)
    ap.add_argument("--heads", type=int, default=9)
    ap.add_argument("--kv-heads", type=int, default=3)
    ap.add_argument("--vocab", type=int, default=49152)
    ap.add_argument("--rope-theta", type=float, default=10000.0)
    ap.add_argument("--context", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--mode", default="eager", choices=["eager", "compile"])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    torch.manual_seed(1)
    dev = torch.device("cuda")
    model = Llama(a).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.01, fused=True)
    params = list(model.parameters())
    fwd = torch.compile(model) if a.mode == "compile" else model

    def step(x, y):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = fwd(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    gen = torch.Generator().manual_seed(1)

    def batch():
        x = torch.randint(0, a.vocab, (a.batch, a.context + 1), generator=gen)
        return x[:, :-1].to(dev, non_blocking=True), x[:, 1:].to(dev, non_blocking=True)

    for _ in range(a.warmup):
        step(*batch())
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    times, loss = [], None
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step(*batch())
        torch.cuda.synchronize()
        t1 = time.perf_counter()
        times.append(t1 - t0)
        t0 = t1
    ms = statistics.median(times) * 1e3
    out = {"peer": "pytorch " + a.mode, "torch": torch.__version__, "d_model": a.d_model,
           "layers": a.layers, "heads": a.heads, "kv_heads": a.kv_heads, "context": a.context,
           "batch": a.batch, "step_ms": ms, "tokens_per_s": a.batch * a.context / (ms / 1e3),
           "peak_gb": torch.cuda.max_memory_allocated() / 1e9, "loss": float(loss)}
    print(json.dumps(out))
    if a.json:
        with open(a.json, "a") as f:
            f.write(json.dumps(out) + "\n")


if __name__ == "__main__":
    sys.exit(main())
