// defines: GoldenCodes, GoldenEncode, load_golden_codes(), load_golden_encode(): readers
// for the tables that tests/gpu/make_golden.py writes from ml_dtypes.
#pragma once

#include <cstdint>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef FP8WB_GOLDEN_DIR
#error "FP8WB_GOLDEN_DIR must name tests/data/golden"
#endif

namespace fp8wb::test {

struct GoldenCodes {
  std::vector<uint32_t> value_bits;  // index = code
};

struct GoldenEncodeRow {
  uint32_t input_bits;
  uint8_t ieee;
  uint8_t saturate;
};

inline std::vector<std::vector<std::string>> read_rows(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open golden file " + path);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream ss(line);
    std::vector<std::string> cols;
    std::string c;
    while (ss >> c) cols.push_back(c);
    rows.push_back(cols);
  }
  return rows;
}

inline GoldenCodes load_golden_codes(const std::string& format) {
  GoldenCodes g;
  for (const auto& r : read_rows(std::string(FP8WB_GOLDEN_DIR) + "/" + format + ".codes")) {
    g.value_bits.push_back(static_cast<uint32_t>(std::stoul(r.at(1), nullptr, 16)));
  }
  return g;
}

inline std::vector<GoldenEncodeRow> load_golden_encode(const std::string& format) {
  std::vector<GoldenEncodeRow> rows;
  for (const auto& r : read_rows(std::string(FP8WB_GOLDEN_DIR) + "/" + format + ".encode")) {
    rows.push_back({static_cast<uint32_t>(std::stoul(r.at(0), nullptr, 16)),
                    static_cast<uint8_t>(std::stoul(r.at(1), nullptr, 16)),
                    static_cast<uint8_t>(std::stoul(r.at(2), nullptr, 16))});
  }
  return rows;
}

}  // namespace fp8wb::test
