#!/usr/bin/env python3
"""Writes the small PyTorch files of tests/data/pt with torch.save itself, and
expected.json: for each file, every tensor the workbench should list (nested dicts and
lists flattened to dotted names), its safetensors dtype, shape and values (as fp64), or
the error it should give. Run once where PyTorch is (tests/gpu/run.sh does, into $OUT):

    python3 tests/gpu/make_pt_files.py tests/data/pt
"""
import collections
import json
import os
import sys

import torch

out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/pt"
os.makedirs(out, exist_ok=True)
torch.manual_seed(0)

DTYPES = {torch.float64: "F64", torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16",
          torch.int64: "I64", torch.int32: "I32", torch.int16: "I16", torch.int8: "I8",
          torch.uint8: "U8", torch.bool: "BOOL", torch.float8_e4m3fn: "F8_E4M3",
          torch.float8_e5m2: "F8_E5M2"}


def flatten(v, prefix, into):
    if isinstance(v, torch.Tensor):
        into[prefix] = {"dtype": DTYPES[v.dtype], "shape": list(v.shape),
                        "values": v.detach().to(torch.float64).flatten().tolist()}
    elif isinstance(v, dict):
        for k, x in v.items():
            flatten(x, f"{prefix}.{k}" if prefix else str(k), into)
    elif isinstance(v, (list, tuple)):
        for i, x in enumerate(v):
            flatten(x, f"{prefix}.{i}" if prefix else str(i), into)
    return into


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8)
        self.fc1 = torch.nn.Linear(8, 16)
        self.norm = torch.nn.LayerNorm(16)
        self.fc2 = torch.nn.Linear(16, 4, bias=False)

    def forward(self, ids):
        return self.fc2(self.norm(torch.relu(self.fc1(self.embed(ids)))))


net = Net()
opt = torch.optim.AdamW(net.parameters(), lr=1e-3)
net(torch.tensor([1, 2, 3])).square().mean().backward()
opt.step()

expected = {}


def save(name, obj, **kw):
    torch.save(obj, os.path.join(out, name), **kw)
    expected[name] = {"tensors": flatten(obj, "", {})}


# An nn.Module's state dict (an OrderedDict with _metadata), as most .pt files are.
save("model_state.pt", net.state_dict())
# A training checkpoint: the model, AdamW's state (integer keys), numbers beside tensors.
save("training.pth", {"model": net.state_dict(), "optimizer": opt.state_dict(), "epoch": 3,
                      "note": "after one step"})
# The Hugging Face name for a bf16 state dict.
save("model_bf16.bin", {k: v.to(torch.bfloat16) for k, v in net.state_dict().items()})
# Every dtype the workbench reads, a strided view (saved with its storage), a list.
base = torch.randn(6, 8)
save("dtypes.pt", collections.OrderedDict([
    ("f64", torch.randn(3, 2, dtype=torch.float64)),
    ("f16", torch.randn(4, 3).half()),
    ("i32", torch.arange(-3, 3, dtype=torch.int32)),
    ("i16", torch.tensor([-300, 7], dtype=torch.int16)),
    ("i8", torch.tensor([-128, 127], dtype=torch.int8)),
    ("u8", torch.tensor([0, 255], dtype=torch.uint8)),
    ("mask", torch.tensor([True, False, True])),
    ("e4m3", (torch.randn(4, 16) * 50).to(torch.float8_e4m3fn)),
    ("e5m2", (torch.randn(4, 16) * 1000).to(torch.float8_e5m2)),
    ("view", base[1:5, ::2]),
    ("layers", [torch.ones(2, 2), torch.full((3,), -0.5)]),
]))
# The legacy (pre-zip) format: the workbench names it rather than reading it.
torch.save(net.state_dict(), os.path.join(out, "legacy.pt"), _use_new_zipfile_serialization=False)
expected["legacy.pt"] = {"error": "legacy"}

with open(os.path.join(out, "expected.json"), "w") as f:
    json.dump({"written_by": f"torch {torch.__version__}", "files": expected}, f, indent=1)
for name in sorted(os.listdir(out)):
    print(f"{name:20} {os.path.getsize(os.path.join(out, name)):7} bytes")
