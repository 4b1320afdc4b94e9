#!/usr/bin/env python3
"""Watch a model trained with torchao's Float8Linear (FP8 GEMMs on an H100-class GPU) in
FP8 Workbench.

    python3 examples/watch_torchao.py --steps 300

torchao converts the model's nn.Linear layers to Float8Linear (tensorwise dynamic
scaling: each step's scale from the tensor's own amax, E4M3 forward, E5M2 gradients);
fp8wb.watch() hooks the same layers (Float8Linear is an nn.Linear) and records, with
recipe "tensorwise", scaling "current", formats "hybrid", the statistics of the very
quantization torchao performs: the scale fp8(max) / amax in fp32, as torchao computes it.
Needs torchao and a GPU with FP8 tensor cores (sm_89 or newer).
"""

import argparse

import torch

import fp8wb


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--db", default=None)
    p.add_argument("--d-model", type=int, default=1024)
    args = p.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("watch_torchao.py needs a CUDA GPU (torchao's FP8 GEMMs)")
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    from torchao.float8.float8_linear import Float8Linear

    torch.manual_seed(0)
    d = args.d_model
    model = torch.nn.Sequential(
        torch.nn.Linear(d, 4 * d, bias=False), torch.nn.GELU(),
        torch.nn.Linear(4 * d, d, bias=False), torch.nn.LayerNorm(d),
        torch.nn.Linear(d, d, bias=False)).to("cuda", torch.bfloat16)

    # torchao's filter, the same for the watch: FP8 where both dimensions are multiples of
    # 16 (what torch._scaled_mm takes).
    def fp8_ok(mod, fqn):
        return (isinstance(mod, torch.nn.Linear) and mod.in_features % 16 == 0
                and mod.out_features % 16 == 0)

    convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name("tensorwise"),
                               module_filter_fn=fp8_ok)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    with fp8wb.watch(model, db=args.db, recipe="tensorwise", formats="hybrid",
                     scaling="current", stats_interval=25,
                     module_filter=lambda m, n: isinstance(m, Float8Linear),
                     config={"torchao": "Float8Linear tensorwise", "d_model": d}) as w:
        for step in range(args.steps):
            x = torch.randn(32, 128, d, device="cuda", dtype=torch.bfloat16)
            loss = (model(x).float() - x.float()).pow(2).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            w.step(loss=loss, tokens=x.shape[0] * x.shape[1])
            if step % 50 == 0:
                print(f"step {step}", flush=True)
    print(f"run {w.run_id} in {w.db}")


if __name__ == "__main__":
    main()
