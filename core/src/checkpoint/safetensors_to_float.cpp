// Checkpoint::to_float(): a tensor of any stored dtype as fp32 values, FP8 ones with their
// `<name>_scale_inv` companion applied where the checkpoint has one.
#include <cmath>
#include <cstring>
#include <limits>

#include "fp8wb/core/checkpoint/safetensors.h"
#include "fp8wb/kernels/codec.h"
#include "safetensors_internal.h"

namespace fp8wb {
using namespace safetensors_detail;
namespace {

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      uint32_t m = man;
      do {
        ++e;
        m <<= 1;
      } while (!(m & 0x400));
      bits = sign | static_cast<uint32_t>(127 - 15 - e) << 23 | (m & 0x3FF) << 13;
    }
  } else if (exp == 31) {
    bits = sign | 0x7F800000u | man << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | man << 13;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Why to_float() cannot apply an FP8 tensor's `<name>_scale_inv` companion `sc` (neither one
// F32 scale nor an F32 grid of its 128x128 blocks); empty when it can, or when there is none.
std::string unfit_scale_inv(const Checkpoint::Ref& r, const Checkpoint::Ref* sc) {
  const TensorEntry& t = *r.entry;
  if (!sc || (sc->entry->dtype == StDtype::F32 && sc->entry->numel() == 1)) return {};
  if (t.shape.size() != 2 || sc->entry->dtype != StDtype::F32 || sc->entry->shape.size() != 2) {
    return r.file->path() + ": '" + sc->entry->name + "' (" +
           std::string(st_dtype_name(sc->entry->dtype)) + " " + shape_text(sc->entry->shape) +
           ") is neither one F32 scale for the whole of '" + t.name + "' " + shape_text(t.shape) +
           " nor an F32 grid of its 128x128 blocks, so it cannot be applied";
  }
  const int64_t br = (t.shape[0] + 127) / 128, bc = (t.shape[1] + 127) / 128;
  if (sc->entry->shape[0] != br || sc->entry->shape[1] != bc) {
    return r.file->path() + ": '" + sc->entry->name + "' " + shape_text(sc->entry->shape) +
           " is not [" + std::to_string(br) + ", " + std::to_string(bc) +
           "], the 128x128 blocks of '" + t.name + "' " + shape_text(t.shape);
  }
  return {};
}

}  // namespace

std::vector<float> Checkpoint::to_float(const Ref& r) const {
  const TensorEntry& t = *r.entry;
  r.file->require_present(t);
  const auto n = static_cast<size_t>(t.numel());
  std::vector<float> out(n);
  if (n == 0) return out;
  if (t.dtype == StDtype::F32) {
    r.file->read(t, out.data());
    return out;
  }
  const std::vector<uint8_t> bytes = r.file->bytes(t);
  const uint8_t* p = bytes.data();
  switch (t.dtype) {
    case StDtype::F64:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<double>(p + 8 * i));
      break;
    case StDtype::F32: break;  // read above
    case StDtype::F16:
      for (size_t i = 0; i < n; ++i) out[i] = half_to_float(load<uint16_t>(p + 2 * i));
      break;
    case StDtype::BF16:
      for (size_t i = 0; i < n; ++i) {
        const uint32_t b = static_cast<uint32_t>(load<uint16_t>(p + 2 * i)) << 16;
        std::memcpy(&out[i], &b, 4);
      }
      break;
    case StDtype::F8_E4M3:
    case StDtype::F8_E5M2: {
      const CodecSpec s = codec_spec(t.dtype == StDtype::F8_E4M3 ? Format::E4M3FN : Format::E5M2);
      for (size_t i = 0; i < n; ++i) out[i] = decode(p[i], s);
      // `<name>_scale_inv`: one fp32 for the whole tensor ([] or [1]), or (DeepSeek-V3)
      // one per 128x128 block of a 2-D weight. Any other companion is an error: dropping
      // it would give the raw FP8 values as if they were the weight's.
      const Ref* sc = find(t.name + "_scale_inv");
      if (const std::string why = unfit_scale_inv(r, sc); !why.empty()) throw TensorValueError(why);
      if (sc && sc->entry->numel() == 1) {
        const float scale = load<float>(sc->file->bytes(*sc->entry).data());
        for (size_t i = 0; i < n; ++i) out[i] *= scale;
      } else if (sc) {
        const int64_t rows = t.shape[0], cols = t.shape[1];
        const int64_t bc = (cols + 127) / 128;
        const std::vector<uint8_t> scales = sc->file->bytes(*sc->entry);
        const uint8_t* sp = scales.data();
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t j = 0; j < cols; ++j) {
            out[static_cast<size_t>(i * cols + j)] *=
                load<float>(sp + 4 * static_cast<size_t>((i / 128) * bc + j / 128));
          }
        }
      }
      break;
    }
    case StDtype::F8_E8M0:  // 2^(byte - 127), exact in fp32 (2^-127 as a subnormal)
      for (size_t i = 0; i < n; ++i) {
        out[i] = p[i] == 0xFF ? std::numeric_limits<float>::quiet_NaN()
                              : std::ldexp(1.0f, static_cast<int>(p[i]) - 127);
      }
      break;
    case StDtype::I64:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int64_t>(p + 8 * i));
      break;
    case StDtype::U64:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<uint64_t>(p + 8 * i));
      break;
    case StDtype::U32:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<uint32_t>(p + 4 * i));
      break;
    case StDtype::U16:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<uint16_t>(p + 2 * i));
      break;
    case StDtype::I32:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int32_t>(p + 4 * i));
      break;
    case StDtype::I16:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(load<int16_t>(p + 2 * i));
      break;
    case StDtype::I8:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(static_cast<int8_t>(p[i]));
      break;
    case StDtype::U8:
      for (size_t i = 0; i < n; ++i) out[i] = static_cast<float>(p[i]);
      break;
    case StDtype::BOOL:  // 0 or 1: any other byte is no boolean
      for (size_t i = 0; i < n; ++i) {
        if (p[i] > 1) {
          throw TensorValueError(r.file->path() + ": BOOL tensor '" + t.name + "' holds byte " +
                                 std::to_string(p[i]) + " at element " + std::to_string(i) +
                                 " (a BOOL byte is 0 or 1)");
        }
        out[i] = static_cast<float>(p[i]);
      }
      break;
  }
  return out;
}

}  // namespace fp8wb
