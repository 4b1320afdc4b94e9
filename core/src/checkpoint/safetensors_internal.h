// defines: kMaxHeader, DtypeInfo, kDtypes, shape_text(), load(), parse_json_once(): what
// the safetensors reader's three files share (private to core): safetensors.cpp (files,
// checkpoints, the writer), safetensors_header.cpp (the header's JSON, checked) and
// safetensors_to_float.cpp (Checkpoint::to_float()).
#pragma once

#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/core/checkpoint/safetensors.h"

namespace fp8wb::safetensors_detail {

constexpr uint64_t kMaxHeader = uint64_t{100} << 20;  // 100 MB, as the reference reader

struct DtypeInfo {
  StDtype d;
  const char* name;
  size_t size;
};

constexpr DtypeInfo kDtypes[] = {{StDtype::F64, "F64", 8},         {StDtype::F32, "F32", 4},
                                 {StDtype::F16, "F16", 2},         {StDtype::BF16, "BF16", 2},
                                 {StDtype::F8_E4M3, "F8_E4M3", 1}, {StDtype::F8_E5M2, "F8_E5M2", 1},
                                 {StDtype::F8_E8M0, "F8_E8M0", 1}, {StDtype::I64, "I64", 8},
                                 {StDtype::I32, "I32", 4},         {StDtype::I16, "I16", 2},
                                 {StDtype::I8, "I8", 1},           {StDtype::U64, "U64", 8},
                                 {StDtype::U32, "U32", 4},         {StDtype::U16, "U16", 2},
                                 {StDtype::U8, "U8", 1},           {StDtype::BOOL, "BOOL", 1}};

inline std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(static_cast<uint64_t>(shape[i]));
  }
  return s + "]";
}

template <class T>
inline T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

// Parses JSON and reports the first key that an object gives twice (and its depth: 1
// for the keys of the outermost object). Both passes take O(n log n) time.
nlohmann::json parse_json_once(std::string_view text, std::string& duplicate, int& duplicate_depth);

}  // namespace fp8wb::safetensors_detail
