// defines: FP8WB_TARGET_CLONES: on x86-64 with GCC, an AVX2 clone of a hot loop next to
// the baseline SSE2 one, picked at load time; FP8WB_TARGET_CLONES_512: the same with an
// AVX-512 (x86-64-v4) clone as well, for loops that gain from the wider vectors.
#pragma once

// Not under ThreadSanitizer: the clones' ifunc resolver runs while the dynamic loader
// relocates, before the TSan runtime is set up, and the instrumented resolver crashes the
// program before main().
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && !defined(__SANITIZE_THREAD__)
#define FP8WB_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#define FP8WB_TARGET_CLONES_512 __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#else
#define FP8WB_TARGET_CLONES
#define FP8WB_TARGET_CLONES_512
#endif
