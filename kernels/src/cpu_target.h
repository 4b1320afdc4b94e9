// defines: FP8WB_TARGET_CLONES: on x86-64 with GCC, an AVX2 clone of a hot loop next to
// the baseline SSE2 one, picked at load time.
#pragma once

// Not under ThreadSanitizer: the clones' ifunc resolver runs while the dynamic loader
// relocates, before the TSan runtime is set up, and the instrumented resolver crashes the
// program before main().
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define FP8WB_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FP8WB_TARGET_CLONES
#endif
