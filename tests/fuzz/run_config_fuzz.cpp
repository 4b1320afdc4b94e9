// libFuzzer target: the run configuration and the sweep grid syntax. Whatever the bytes,
// a config parses into one that passes validation (and reads back from its own JSON), or
// is refused with std::invalid_argument; never a crash, another exception, a deep
// recursion or an allocation beyond the memory limit (-rss_limit_mb). The first byte
// picks the entry point: a config file, --set overrides, --grid axes (expanded into
// trials when the grid is small), or a stored sweep's JSON.
#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fp8wb/core/config/run_config.h"
#include "fp8wb/core/sweep/sweep.h"

namespace {

std::vector<std::string> lines(std::string_view text) {
  std::vector<std::string> out;
  size_t i = 0;
  while (i <= text.size() && out.size() < 64) {
    const size_t j = text.find('\n', i);
    out.emplace_back(text.substr(i, j == std::string_view::npos ? std::string_view::npos : j - i));
    if (j == std::string_view::npos) break;
    i = j + 1;
  }
  return out;
}

void config(std::string_view text) {
  const fp8wb::RunConfig c = fp8wb::parse_run_config(text);
  // What is accepted is valid, and its JSON reads back to the same JSON.
  const std::string json = fp8wb::run_config_json(c);
  if (fp8wb::run_config_json(fp8wb::parse_run_config(json)) != json) __builtin_trap();
}

void overrides(std::string_view text) {
  fp8wb::RunConfig c;
  for (const std::string& o : lines(text)) fp8wb::apply_override(c, o);
  fp8wb::validate_run_config(c);
}

void grid(std::string_view text) {
  fp8wb::SweepSpec s;
  s.base.steps = 2;
  for (const std::string& g : lines(text)) s.axes.push_back(fp8wb::parse_grid(g));
  uint64_t trials = 1;
  for (const auto& a : s.axes) trials = std::min<uint64_t>(trials * a.values.size(), 1u << 30);
  if (trials > 64 && trials <= fp8wb::kMaxSweepTrials) return;  // valid but slow to expand
  const auto t = fp8wb::expand_sweep(s);
  if (t.size() != trials) __builtin_trap();
  const fp8wb::SweepSpec back = fp8wb::sweep_from_json(fp8wb::sweep_json(s));
  if (back.axes.size() != s.axes.size()) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  try {
    switch (data[0] % 4) {
      case 0: config(text); break;
      case 1: overrides(text); break;
      case 2: grid(text); break;
      default: fp8wb::sweep_from_json(std::string(text)); break;
    }
  } catch (const std::invalid_argument&) {
  }
  return 0;
}
