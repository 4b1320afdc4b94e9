// defines: FP8WB_TARGET_CLONES: on x86-64 with GCC, an AVX2 clone of a hot loop next to
// the baseline SSE2 one, picked at load time.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FP8WB_TARGET_CLONES __attribute__((target_clones("avx2", "default")))
#else
#define FP8WB_TARGET_CLONES
#endif
