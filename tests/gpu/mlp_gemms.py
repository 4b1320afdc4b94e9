"""The GEMMs of the MLP block alone (d -> 4d -> d, forward and backward: six GEMMs), bf16
against FP8 (at::_scaled_mm, tensorwise, operands already quantized), and GELU: the
ceiling for an FP8 MLP step and what its quantization passes may cost."""
import torch


def ms(fn, reps=20):
    for _ in range(3):
        fn()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    ts = []
    for _ in range(reps):
        a.record(); fn(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b))
    return sorted(ts)[len(ts) // 2]


one = torch.ones((), device="cuda")
for m, d in [(16384, 2048), (16384, 4096), (32768, 4096)]:
    h = 4 * d
    # (rows, contraction, cols) of the six GEMMs: fprop, dgrad, wgrad of both layers.
    shapes = [(m, d, h), (m, h, d), (m, d, h), (m, h, d), (h, m, d), (d, m, h)]
    bf = [(torch.randn(r, k, device="cuda", dtype=torch.bfloat16),
           torch.randn(c, k, device="cuda", dtype=torch.bfloat16)) for r, k, c in shapes]
    f8 = [(a.to(torch.float8_e4m3fn), b.to(torch.float8_e4m3fn)) for a, b in bf]
    t_bf = ms(lambda: [torch.mm(a, b.t()) for a, b in bf])
    fast = [True, False, False, True, False, False]
    t_f8 = ms(lambda: [torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16,
                                         use_fast_accum=f) for (a, b), f in zip(f8, fast)])
    t_f8_fast = ms(lambda: [torch._scaled_mm(a, b.t(), one, one, out_dtype=torch.bfloat16,
                                              use_fast_accum=True) for a, b in f8])
    x = torch.randn(m, h, device="cuda", dtype=torch.bfloat16, requires_grad=True)
    g = torch.randn(m, h, device="cuda", dtype=torch.bfloat16)
    t_gelu = ms(lambda: torch.nn.functional.gelu(x).backward(g))
    print(f"MLP GEMMs {m}x{d}: bf16 {t_bf:.3f} ms, FP8 (fast accum fprop) {t_f8:.3f} ms "
          f"({t_bf / t_f8:.2f}x), FP8 all fast accum {t_f8_fast:.3f} ms ({t_bf / t_f8_fast:.2f}x); "
          f"GELU fwd+bwd {t_gelu:.3f} ms")
