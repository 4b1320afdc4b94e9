#!/usr/bin/env python3
"""Watch a plain PyTorch MLP's FP8 numerics in FP8 Workbench.

    PYTHONPATH=build python3 examples/watch_mlp.py            # from a build tree
    python3 examples/watch_mlp.py --steps 500 --device cuda    # the Debian package's fp8wb

The run goes to $FP8WB_DB (the GUI sets it for a script it starts) or the workbench's
default database; open the Runs tab, or `fp8wb runs list`, while it trains.
"""

import argparse
import math

import torch

import fp8wb


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--db", default=None, help="run database (default: $FP8WB_DB, else the "
                                              "workbench's default)")
    p.add_argument("--scaling", default="delayed", choices=["delayed", "current"])
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--margin", type=int, default=0)
    args = p.parse_args()

    torch.manual_seed(0)
    features, width = 64, 256
    model = torch.nn.Sequential(
        torch.nn.Linear(features, width), torch.nn.GELU(),
        torch.nn.Linear(width, width), torch.nn.GELU(),
        torch.nn.Linear(width, features)).to(args.device)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: 0.5 * (1 + math.cos(math.pi * min(1.0, s / args.steps))))
    # A target with a few outlier channels: what makes FP8's range matter.
    w_true = torch.randn(features, features, device=args.device) / math.sqrt(features)
    outliers = torch.ones(features, device=args.device)
    outliers[:4] = 50.0

    with fp8wb.watch(model, db=args.db, recipe="tensorwise", formats="hybrid",
                     scaling=args.scaling, window=args.window, margin=args.margin,
                     stats_interval=25, config={"lr": 3e-3, "steps": args.steps,
                                                "width": width}) as w:
        for step in range(args.steps):
            x = torch.randn(64, features, device=args.device) * outliers
            y = x @ w_true
            loss = torch.nn.functional.mse_loss(model(x), y)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            sched.step()
            w.step(loss=loss, lr=sched.get_last_lr()[0], tokens=x.shape[0])
            if step % 50 == 0:
                print(f"step {step}", flush=True)
    print(f"run {w.run_id} in {w.db}")


if __name__ == "__main__":
    main()
