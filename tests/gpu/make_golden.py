#!/usr/bin/env python3
"""Writes the codec golden tables from ml_dtypes, cross-checked with PyTorch's float8 casts.

Usage: python3 tests/gpu/make_golden.py OUTDIR

For every format it writes two text files:
  OUTDIR/<FORMAT>.codes   one line per code: "code value", the value as fp32 bits (hex)
  OUTDIR/<FORMAT>.encode  one line per fp32 input: "input ieee saturate" (hex); ieee is
                          ml_dtypes' own cast, saturate is ml_dtypes' cast of the input
                          clamped to +-max (Inf -> +-max, NaN unchanged).
The inputs cover every representable value, every rounding midpoint (ties) and the fp32
neighbours of both, the subnormal edges, values just over max, +-0, +-Inf, NaNs, and a
seeded random set. A report of PyTorch's casts (CPU and CUDA) against ml_dtypes goes to
stdout.
"""
import os
import sys

import ml_dtypes
import numpy as np

FORMATS = [
    ("E4M3FN", ml_dtypes.float8_e4m3fn, 8),
    ("E5M2", ml_dtypes.float8_e5m2, 8),
    ("E4M3FNUZ", ml_dtypes.float8_e4m3fnuz, 8),
    ("E5M2FNUZ", ml_dtypes.float8_e5m2fnuz, 8),
    ("E8M0FNU", ml_dtypes.float8_e8m0fnu, 8),
    ("E2M1FN", ml_dtypes.float4_e2m1fn, 4),
    ("E3M2FN", ml_dtypes.float6_e3m2fn, 6),
    ("E2M3FN", ml_dtypes.float6_e2m3fn, 6),
]
TORCH_DTYPES = {
    "E4M3FN": "float8_e4m3fn",
    "E5M2": "float8_e5m2",
    "E4M3FNUZ": "float8_e4m3fnuz",
    "E5M2FNUZ": "float8_e5m2fnuz",
    "E8M0FNU": "float8_e8m0fnu",
}


def f32(a):
    return np.asarray(a, dtype=np.float32)


def bits(a):
    return f32(a).view(np.uint32)


def up(a):
    return np.nextafter(f32(a), f32(np.inf))


def down(a):
    return np.nextafter(f32(a), f32(-np.inf))


def code_values(dt, nbits):
    codes = np.arange(2**nbits, dtype=np.uint8)
    return codes, codes.view(dt).astype(np.float32)


def inputs_for(dt, nbits, rng):
    _, vals = code_values(dt, nbits)
    fin = np.unique(np.abs(vals[np.isfinite(vals)]))
    fin.sort()
    mids = (fin[:-1].astype(np.float64) + fin[1:].astype(np.float64)) / 2
    mids = f32(mids)
    assert np.all(mids.astype(np.float64) == (fin[:-1].astype(np.float64) + fin[1:]) / 2)
    fmax = fin[-1]
    smallest = fin[fin > 0][0]
    ulp_max = fin[-1] - fin[-2]
    over = [fmax + ulp_max / 2, fmax + ulp_max, fmax * 2, fmax * 1.0001, 1e30, 3.4028235e38]
    under = [smallest / 2, smallest / 4, smallest / 8, 1e-30, 1e-40, 1.4e-45, 1.1754944e-38]
    pos = np.concatenate([fin, up(fin), down(fin), mids, up(mids), down(mids), f32(over),
                          up(f32(over)), down(f32(over)), f32(under), up(f32(under)),
                          down(f32(under))])
    pos = pos[np.isfinite(pos) & (pos >= 0)]
    # Random values around the format's range, and random bit patterns anywhere.
    lo, hi = np.log2(float(smallest)) - 4, np.log2(float(fmax)) + 4
    rnd = f32(2.0 ** rng.uniform(lo, hi, 3000)) * rng.choice([-1, 1], 3000)
    raw = rng.integers(0, 2**32, 1000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    special = np.array([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000,
                        0xFFC00000, 0x7F800001, 0x7FBFFFFF, 0x00000001, 0x80000001,
                        0x7F7FFFFF, 0xFF7FFFFF], dtype=np.uint32).view(np.float32)
    allv = np.concatenate([pos, -pos, rnd.astype(np.float32), raw, special])
    # Unique by bit pattern (keeps NaN payloads and -0 apart), in a stable order.
    b = allv.view(np.uint32)
    _, idx = np.unique(b, return_index=True)
    return allv[np.sort(idx)]


def cast_codes(x, dt):
    return x.astype(dt).view(np.uint8)


def saturate_inputs(x, fmax):
    y = x.copy()
    fin = ~np.isnan(y)
    y[fin] = np.clip(y[fin], -fmax, fmax)
    return y


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    rng = np.random.default_rng(20261129)
    try:
        import torch
    except ImportError:  # the golden tables need ml_dtypes only
        torch = None
    versions = f"ml_dtypes {ml_dtypes.__version__}, numpy {np.__version__}"
    if torch is not None:
        versions += f", torch {torch.__version__}"
    print("generator:", versions)
    for name, dt, nbits in FORMATS:
        codes, vals = code_values(dt, nbits)
        with open(os.path.join(out, f"{name}.codes"), "w") as fh:
            fh.write(f"# {name}: code -> value as fp32 bits; {versions}\n")
            for c, v in zip(codes, bits(vals)):
                fh.write(f"{c:02x} {v:08x}\n")
        fmax = np.float32(np.max(np.abs(vals[np.isfinite(vals)])))
        x = inputs_for(dt, nbits, rng)
        ieee = cast_codes(x, dt)
        sat = cast_codes(saturate_inputs(x, fmax), dt)
        with open(os.path.join(out, f"{name}.encode"), "w") as fh:
            fh.write(f"# {name}: fp32 input bits, code (ieee), code (saturate); {versions}\n")
            for xb, a, s in zip(bits(x), ieee, sat):
                fh.write(f"{xb:08x} {a:02x} {s:02x}\n")
        print(f"{name}: {len(x)} inputs, max {fmax}")
        if torch is not None and name in TORCH_DTYPES and hasattr(torch, TORCH_DTYPES[name]):
            tdt = getattr(torch, TORCH_DTYPES[name])
            devs = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
            for dev in devs:
                t = torch.from_numpy(x).to(dev).to(tdt).view(torch.uint8).cpu().numpy()
                tn = torch.from_numpy(x).to(dev).to(tdt).float().cpu().numpy()
                gv = vals[ieee]
                same_val = (tn.view(np.uint32) == gv.view(np.uint32)) | (np.isnan(tn) & np.isnan(gv))
                d_ieee = np.count_nonzero(t != ieee)
                d_sat = np.count_nonzero(t != sat)
                d_val = np.count_nonzero(~same_val)
                print(f"  torch {dev}: codes differ from ml_dtypes ieee {d_ieee}, saturate {d_sat}; "
                      f"values differ {d_val}")
                for i in np.nonzero(t != ieee)[0][:6]:
                    print(f"    x={x[i]!r} ({bits(x)[i]:08x}) torch {t[i]:02x} ml_dtypes {ieee[i]:02x}"
                          f" sat {sat[i]:02x}")


if __name__ == "__main__":
    main()
