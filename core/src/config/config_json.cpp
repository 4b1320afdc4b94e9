#include "config_json.h"

#include <set>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8wb {
namespace {

using nlohmann::json;

// What nlohmann says went wrong, in its own words without its prefixes and without the
// text read so far: "invalid literal", "unexpected '}'; expected string literal".
std::string parse_reason(const json::parse_error& e) {
  std::string m = e.what();
  if (const size_t dash = m.find(" - "); dash != std::string::npos) m = m.substr(dash + 3);
  if (const size_t last = m.find("; last read:"); last != std::string::npos) {
    // "invalid literal; last read: '...'; expected ..." keeps the expectation.
    const size_t next = m.find("'; ", last);
    m = m.substr(0, last) + (next == std::string::npos ? "" : m.substr(next + 1));
  }
  return m;
}

}  // namespace

json parse_config_json(std::string_view text, const json::parser_callback_t& track) {
  // The keys of each object being read, outermost first, and the key each lies under.
  std::vector<std::set<std::string>> keys;
  std::vector<std::string> under;
  std::string last_key;
  std::string duplicate, duplicate_under;
  const json::parser_callback_t cb = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) {
      keys.emplace_back();
      under.push_back(depth > 0 ? last_key : std::string());
    } else if (event == json::parse_event_t::object_end) {
      if (!keys.empty()) keys.pop_back();
      if (!under.empty()) under.pop_back();
    } else if (event == json::parse_event_t::key && parsed.is_string()) {
      last_key = parsed.get<std::string>();
      if (!keys.empty() && duplicate.empty() && !keys.back().insert(last_key).second) {
        duplicate = last_key;
        duplicate_under = under.back();
      }
    }
    return track ? track(depth, event, parsed) : true;
  };
  json j;
  try {
    j = json::parse(text, cb);
  } catch (const json::parse_error& e) {
    // e.byte: how many bytes were read, the last of them the one at fault.
    const size_t at = e.byte == 0 ? 0 : std::min<size_t>(e.byte - 1, text.size());
    size_t line = 1, line_start = 0;
    for (size_t i = 0; i < at; ++i) {
      if (text[i] == '\n') {
        ++line;
        line_start = i + 1;
      }
    }
    throw std::invalid_argument("is not valid JSON at line " + std::to_string(line) + ", column " +
                                std::to_string(at - line_start + 1) + ": " + parse_reason(e));
  }
  if (!duplicate.empty()) {
    throw std::invalid_argument(
        "key '" + duplicate + "' is given twice" +
        (duplicate_under.empty() ? std::string() : " in '" + duplicate_under + "'") +
        " (which one is meant is unclear: give it once)");
  }
  return j;
}

}  // namespace fp8wb
