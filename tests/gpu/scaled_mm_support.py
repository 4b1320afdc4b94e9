"""Which FP8 GEMMs at::_scaled_mm takes on this GPU and PyTorch, with the scale layouts
Float8Linear passes (A [M, K] row-major, B [N, K] passed as its column-major transpose),
and how far each result is from an fp32 GEMM of the dequantized operands."""
import torch

M, N, K = 256, 384, 512
F = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}


def quant(x, dtype, block_rows, block_cols):
    """Per-block scales (block_rows x block_cols; 0 = whole dimension), codes and scale_inv grid."""
    r, c = x.shape
    br, bc = block_rows or r, block_cols or c
    g = x.reshape(r // br, br, c // bc, bc).abs().amax(dim=(1, 3)).float().clamp(min=1e-12)
    scale = torch.finfo(dtype).max / g
    full = scale.repeat_interleave(br, 0).repeat_interleave(bc, 1)
    codes = (x.float() * full).clamp(-torch.finfo(dtype).max, torch.finfo(dtype).max).to(dtype)
    return codes, (1 / scale)


def deq(codes, sinv, br, bc):
    r, c = codes.shape
    br, bc = br or r, bc or c
    return codes.float() * sinv.repeat_interleave(br, 0).repeat_interleave(bc, 1)


KINDS = {"tensorwise": (0, 0), "rowwise": (1, 0), "1x128": (1, 128), "128x128": (128, 128)}


def scale_arg(kind, s, is_b):
    if kind == "tensorwise":
        return s.reshape(())
    if kind == "rowwise":
        return s.reshape(1, -1) if is_b else s.reshape(-1, 1)
    if kind == "1x128":
        return s.t().contiguous() if is_b else s.t().contiguous().t()
    return s.t() if is_b else s


torch.manual_seed(0)
a = torch.randn(M, K, device="cuda")
b = torch.randn(N, K, device="cuda")
pairs = [("tensorwise", "tensorwise"), ("rowwise", "rowwise"), ("1x128", "128x128"),
         ("1x128", "1x128"), ("128x128", "1x128")]
print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
for ka, kb in pairs:
    for fa, fb in [("e4m3", "e4m3"), ("e5m2", "e4m3"), ("e4m3", "e5m2"), ("e5m2", "e5m2")]:
        for out in [torch.float32, torch.bfloat16]:
            ca, sa = quant(a, F[fa], *KINDS[ka])
            cb, sb = quant(b, F[fb], *KINDS[kb])
            ref = deq(ca, sa, *KINDS[ka]) @ deq(cb, sb, *KINDS[kb]).t()
            try:
                y = torch._scaled_mm(ca, cb.t(), scale_arg(ka, sa, False), scale_arg(kb, sb, True),
                                     out_dtype=out)
                err = ((y.float() - ref).norm() / ref.norm()).item()
                res = f"ok, rel err {err:.1e}"
            except Exception as e:  # noqa: BLE001 - we report what PyTorch says
                res = "refused: " + str(e).splitlines()[0][:90]
            print(f"{ka:>10} x {kb:<10} {fa} x {fb} -> {str(out)[6:]:<8} {res}")

# Block scaling at other shapes (contraction shorter than the output, as in dgrad), and
# the B-scale layouts one could pass for a 128x128 weight.
print("block scaling, 1x128 x 128x128, e4m3 -> float32, by shape and B-scale layout")
for (m, k, n) in [(256, 512, 384), (256, 256, 512), (512, 256, 256), (256, 1024, 512), (384, 128, 256)]:
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(n, k, device="cuda")
    ca, sa = quant(a, F["e4m3"], 1, 128)
    cb, sb = quant(b, F["e4m3"], 128, 128)
    ref = deq(ca, sa, 1, 128) @ deq(cb, sb, 128, 128).t()
    for name, sbv in [("grid.t()", sb.t()), ("grid.t().contiguous()", sb.t().contiguous()),
                      ("grid.t() of a transposed copy", sb.t().contiguous().t().t())]:
        try:
            y = torch._scaled_mm(ca, cb.t(), sa.t().contiguous().t(), sbv, out_dtype=torch.float32)
            res = f"rel err {((y - ref).norm() / ref.norm()).item():.1e}"
        except Exception as e:  # noqa: BLE001
            res = "refused: " + str(e).splitlines()[0][:80]
        print(f"  M={m:<5} K={k:<5} N={n:<5} scale_b {name:<30} {res}")
