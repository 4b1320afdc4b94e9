#!/usr/bin/python3
"""The Llama-family forward from its published equations, as llama_test.cpp checks the
engine's against: RMSNorm (Zhang and Sennrich 2019), rotary position embeddings (Su et al.
2021; each head's dimensions i and i + dh/2 rotate as one pair, Hugging Face's layout),
SwiGLU (Shazeer 2020), grouped-query attention (Ainslie et al. 2023), computed in fp64.

Writes, under OUT, random tiny checkpoints in Hugging Face's layout (config.json and
model.safetensors with Hugging Face's tensor names, by the small safetensors writer below)
and, beside each, reference.safetensors: token ids [B, T] (I64) and this forward's logits
[B, T, vocab] (F64); tokens.bin (llm.c's format), tokens_raw.bin (the same, raw uint16)
and their loss (eval_loss, write_tokens()). For the first one also OUT/llama_sharded: the same tensors in two
shards with a model.safetensors.index.json.

Usage: /usr/bin/python3 llama_reference.py OUT
"""
import json
import math
import os
import struct
import sys

import torch

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.bfloat16: "BF16",
          torch.float16: "F16", torch.int64: "I64"}


def write_safetensors(path, tensors):
    """tensors: list of (name, tensor). The format: an 8-byte little-endian header length,
    the JSON header (name -> dtype, shape, data_offsets), the tensors' bytes in order."""
    header, blobs, at = {}, [], 0
    for name, t in tensors:
        t = t.contiguous()
        if t.dtype in (torch.bfloat16, torch.float16):
            raw = t.view(torch.int16).numpy().tobytes()
        else:
            raw = t.numpy().tobytes()
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def rms_norm(x, w, eps):
    return w * (x / torch.sqrt((x * x).mean(-1, keepdim=True) + eps))


def rotary(x, theta):
    """x [B, H, T, dh]: the pair (i, i + dh/2) of each head rotated by the angle
    p * theta^(-2i/dh) at position p."""
    dh = x.shape[-1]
    half = dh // 2
    pos = torch.arange(x.shape[-2], dtype=torch.float64)
    freq = torch.tensor([theta ** (-2.0 * i / dh) for i in range(half)], dtype=torch.float64)
    ang = pos[:, None] * freq[None, :]
    c, s = torch.cos(ang), torch.sin(ang)
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * c - b * s, a * s + b * c], dim=-1)


def forward(cfg, w, ids):
    d = cfg["hidden_size"]
    H = cfg["num_attention_heads"]
    KV = cfg["num_key_value_heads"]
    dh = d // H
    eps = cfg["rms_norm_eps"]
    theta = cfg["rope_theta"]
    bias = cfg["architectures"][0] == "Qwen2ForCausalLM"
    B, T = ids.shape
    x = w["model.embed_tokens.weight"][ids]
    causal = torch.ones(T, T, dtype=torch.bool).triu(1)
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i

        def lin(name, v, with_bias=False):
            y = v @ w[p + name + ".weight"].T
            return y + w[p + name + ".bias"] if with_bias else y

        a = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = lin("self_attn.q_proj", a, bias).view(B, T, H, dh).transpose(1, 2)
        k = lin("self_attn.k_proj", a, bias).view(B, T, KV, dh).transpose(1, 2)
        v = lin("self_attn.v_proj", a, bias).view(B, T, KV, dh).transpose(1, 2)
        q, k = rotary(q, theta), rotary(k, theta)
        heads = []
        for h in range(H):
            g = h // (H // KV)  # the key/value head this query head shares
            s = (q[:, h] @ k[:, g].transpose(-1, -2)) / math.sqrt(dh)
            s = s.masked_fill(causal, float("-inf"))
            heads.append(torch.softmax(s, dim=-1) @ v[:, g])
        y = torch.stack(heads, dim=1).transpose(1, 2).reshape(B, T, d)
        x = x + lin("self_attn.o_proj", y)
        m = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = lin("mlp.gate_proj", m)
        x = x + lin("mlp.down_proj", gate * torch.sigmoid(gate) * lin("mlp.up_proj", m))
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else w["lm_head.weight"]
    return x @ head.T


def make(out, name, cfg, dtype, seed):
    g = torch.Generator().manual_seed(seed)
    d, inter, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    H, KV = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    dh = d // H
    bias = cfg["architectures"][0] == "Qwen2ForCausalLM"

    def rnd(*shape, std=0.2):
        return torch.randn(*shape, generator=g, dtype=torch.float64) * std

    t = [("model.embed_tokens.weight", rnd(V, d, std=1.0))]
    for i in range(cfg["num_hidden_layers"]):
        p = "model.layers.%d." % i
        t += [(p + "input_layernorm.weight", 1 + rnd(d, std=0.1)),
              (p + "self_attn.q_proj.weight", rnd(H * dh, d)),
              (p + "self_attn.k_proj.weight", rnd(KV * dh, d)),
              (p + "self_attn.v_proj.weight", rnd(KV * dh, d)),
              (p + "self_attn.o_proj.weight", rnd(d, H * dh))]
        if bias:
            t += [(p + "self_attn.q_proj.bias", rnd(H * dh)),
                  (p + "self_attn.k_proj.bias", rnd(KV * dh)),
                  (p + "self_attn.v_proj.bias", rnd(KV * dh))]
        t += [(p + "post_attention_layernorm.weight", 1 + rnd(d, std=0.1)),
              (p + "mlp.gate_proj.weight", rnd(inter, d)),
              (p + "mlp.up_proj.weight", rnd(inter, d)),
              (p + "mlp.down_proj.weight", rnd(d, inter))]
    t.append(("model.norm.weight", 1 + rnd(d, std=0.1)))
    if not cfg["tie_word_embeddings"]:
        t.append(("lm_head.weight", rnd(V, d)))
    # Stored in the checkpoint's dtype; the reference computes with the stored values.
    t = [(n, v.to(dtype)) for n, v in t]
    folder = os.path.join(out, name)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
    write_safetensors(os.path.join(folder, "model.safetensors"), t)
    ids = torch.randint(0, V, (2, 13), generator=g, dtype=torch.int64)
    w = {n: v.to(torch.float64) for n, v in t}
    logits = forward(cfg, w, ids)
    eval_loss = write_tokens(folder, cfg, w, seed + 100)
    write_safetensors(os.path.join(folder, "reference.safetensors"),
                      [("ids", ids), ("logits", logits), ("eval_loss", eval_loss)])
    return folder, t


def write_tokens(folder, cfg, w, seed):
    """A token file in llm.c's format (tokens.bin) and the same tokens raw (tokens_raw.bin),
    with the mean cross-entropy over its non-overlapping windows of T = 16 (window k
    predicts tokens kT+1..kT+T from kT..kT+T-1) in reference.safetensors' eval_loss."""
    g = torch.Generator().manual_seed(seed)
    n, T = 200, 16
    toks = torch.randint(0, cfg["vocab_size"], (n,), generator=g, dtype=torch.int64)
    header = [0] * 256
    header[0], header[1], header[2] = 20240520, 1, n
    raw = toks.to(torch.int32).numpy().astype("<u2").tobytes()
    with open(os.path.join(folder, "tokens.bin"), "wb") as f:
        f.write(struct.pack("<256i", *header))
        f.write(raw)
    with open(os.path.join(folder, "tokens_raw.bin"), "wb") as f:
        f.write(raw)
    k = (n - 1) // T
    x = torch.stack([toks[i * T:i * T + T] for i in range(k)])
    y = torch.stack([toks[i * T + 1:i * T + T + 1] for i in range(k)])
    logits = forward(cfg, w, x)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                             y.reshape(-1)).reshape(1)


def base(arch, **kw):
    cfg = {"architectures": [arch], "hidden_size": 32, "intermediate_size": 48,
           "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
           "vocab_size": 40, "max_position_embeddings": 128, "rope_theta": 10000.0,
           "rms_norm_eps": 1e-5, "tie_word_embeddings": False, "hidden_act": "silu",
           "torch_dtype": "float32"}
    cfg.update(kw)
    return cfg


def main():
    out = sys.argv[1]
    folder, tensors = make(out, "llama", base("LlamaForCausalLM", rope_theta=500000.0),
                           torch.float32, 1)
    make(out, "qwen2", base("Qwen2ForCausalLM", num_key_value_heads=1, rope_theta=1e6,
                            rms_norm_eps=1e-6, tie_word_embeddings=True), torch.float32, 2)
    make(out, "mistral", base("MistralForCausalLM", num_key_value_heads=4, sliding_window=4096,
                              torch_dtype="bfloat16"), torch.bfloat16, 3)
    # The first checkpoint again, in two shards with their index.
    sharded = os.path.join(out, "llama_sharded")
    os.makedirs(sharded, exist_ok=True)
    with open(os.path.join(folder, "config.json")) as f:
        cfg_text = f.read()
    with open(os.path.join(sharded, "config.json"), "w") as f:
        f.write(cfg_text)
    half = len(tensors) // 2
    shards = [("model-00001-of-00002.safetensors", tensors[:half]),
              ("model-00002-of-00002.safetensors", tensors[half:])]
    weight_map = {}
    for file, part in shards:
        write_safetensors(os.path.join(sharded, file), part)
        weight_map.update({n: file for n, _ in part})
    with open(os.path.join(sharded, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)


if __name__ == "__main__":
    main()
