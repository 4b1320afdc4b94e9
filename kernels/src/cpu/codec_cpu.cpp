#include "fp8wb/kernels/codec_cpu.h"
#include "cpu_target.h"

#include <algorithm>
#include <thread>

#include "fp8wb/kernels/codec.h"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace fp8wb {
namespace {

// Chunks big enough to amortise thread start-up, small enough to balance two cores.
constexpr size_t kChunk = size_t{1} << 16;

FP8WB_INLINE uint32_t input_bits(const float* in, size_t i) {
  return float_bits(in[i]);
}
FP8WB_INLINE uint32_t input_bits(const uint16_t* in, size_t i) {
  return static_cast<uint32_t>(in[i]) << 16;
}

template <class In, Format F, Overflow O, Rounding R>
FP8WB_TARGET_CLONES void encode_range(const In* in, uint8_t* out, size_t begin, size_t end,
                                      uint64_t seed) {
  constexpr CodecSpec s = codec_spec(F);
  for (size_t i = begin; i < end; ++i) {
    const uint32_t rnd = R == Rounding::Stochastic ? sr_bits(seed, i) : 0u;
    out[i] = encode_bits(input_bits(in, i), s, O, R, rnd);
  }
}

template <class Fn>
void parallel_chunks(size_t n, int threads, Fn&& fn) {
  const size_t chunks = (n + kChunk - 1) / kChunk;
  if (threads <= 0) threads = hardware_threads();
  if (chunks <= 1 || threads == 1) {
    fn(size_t{0}, n);
    return;
  }
#if defined(_OPENMP)
#pragma omp parallel for schedule(static) num_threads(threads)
  for (long long c = 0; c < static_cast<long long>(chunks); ++c) {
    const size_t b = static_cast<size_t>(c) * kChunk;
    fn(b, std::min(n, b + kChunk));
  }
#else
  fn(size_t{0}, n);
#endif
}

template <class In, Format F, Overflow O>
void encode_dispatch_rounding(const In* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                              int threads) {
  if (opt.rounding == Rounding::Stochastic) {
    parallel_chunks(n, threads, [&](size_t b, size_t e) {
      encode_range<In, F, O, Rounding::Stochastic>(in, out, b, e, opt.seed);
    });
  } else {
    parallel_chunks(n, threads, [&](size_t b, size_t e) {
      encode_range<In, F, O, Rounding::NearestEven>(in, out, b, e, opt.seed);
    });
  }
}

template <class In, Format F>
void encode_dispatch_overflow(const In* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                              int threads) {
  if (opt.overflow == Overflow::Saturate) {
    encode_dispatch_rounding<In, F, Overflow::Saturate>(in, out, n, opt, threads);
  } else {
    encode_dispatch_rounding<In, F, Overflow::Ieee>(in, out, n, opt, threads);
  }
}

template <class In>
void encode_any(const In* in, uint8_t* out, size_t n, const EncodeOptions& opt, int threads) {
  dispatch_format(opt.format, [&](auto tag) {
    encode_dispatch_overflow<In, decltype(tag)::value>(in, out, n, opt, threads);
  });
}

std::array<std::array<float, 256>, kFormatCount> build_tables() {
  std::array<std::array<float, 256>, kFormatCount> t{};
  for (Format f : kAllFormats) {
    for (int c = 0; c < 256; ++c) {
      t[static_cast<size_t>(f)][static_cast<size_t>(c)] =
          decode(static_cast<uint8_t>(c), codec_spec(f));
    }
  }
  return t;
}

}  // namespace

int hardware_threads() {
  const unsigned h = std::thread::hardware_concurrency();
  return h == 0 ? 1 : static_cast<int>(h);
}

void encode_f32(const float* in, uint8_t* out, size_t n, const EncodeOptions& opt, int threads) {
  encode_any(in, out, n, opt, threads);
}

void encode_bf16(const uint16_t* in, uint8_t* out, size_t n, const EncodeOptions& opt,
                 int threads) {
  encode_any(in, out, n, opt, threads);
}

const std::array<float, 256>& decode_table(Format format) {
  static const auto tables = build_tables();
  return tables.at(static_cast<size_t>(format));
}

void decode_f32(const uint8_t* in, float* out, size_t n, Format format, int threads) {
  const float* lut = decode_table(format).data();
  parallel_chunks(n, threads, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) out[i] = lut[in[i]];
  });
}

}  // namespace fp8wb
