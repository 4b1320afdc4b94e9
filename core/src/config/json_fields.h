// defines: json_fields::parse(), field(), text(), whole(), items(), kind_of(): a JSON
// document fp8wb wrote (a stored sweep's grid, a Slurm sweep's sweep.json) read back with
// errors in plain words that name the field ("trials[2].uuid") and what is wrong with it,
// never nlohmann's "[json.exception...]" texts (private to core).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <string_view>

#include "config_json.h"

namespace fp8wb::json_fields {

using nlohmann::json;

// "a number", "text", "an array", ...: what a value is, for "is X, not Y".
inline std::string kind_of(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    case json::value_t::string: return "text";
    case json::value_t::boolean: return "true or false";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    default: return "not a JSON value";
  }
}

// The document, which must be a JSON object; std::invalid_argument in words to follow "X
// is unreadable: " for text that is not JSON (its line and column) or not an object.
inline json parse(std::string_view text) {
  json j;
  try {
    j = parse_config_json(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("it ") + e.what());
  } catch (const json::out_of_range&) {
    throw std::invalid_argument("it holds a number too large to read");
  } catch (const json::exception&) {
    throw std::invalid_argument("it is not valid JSON");
  }
  if (!j.is_object()) throw std::invalid_argument("it is " + kind_of(j) + ", not a JSON object");
  return j;
}

// `path` (the field's name from the document's top: "trials[2]") joined with a key.
inline std::string join(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}

// obj[key], where obj is the object at `path`.
inline const json& field(const json& obj, std::string_view key, const std::string& path = "") {
  const std::string name = join(path, key);
  if (!obj.is_object()) {
    throw std::invalid_argument("field '" + path + "' is " + kind_of(obj) +
                                ", not an object of fields");
  }
  const auto it = obj.find(key);
  if (it == obj.end()) throw std::invalid_argument("field '" + name + "' is missing");
  return *it;
}

inline std::string text(const json& obj, std::string_view key, const std::string& path = "") {
  const json& v = field(obj, key, path);
  if (!v.is_string()) {
    throw std::invalid_argument("field '" + join(path, key) + "' is " + kind_of(v) + ", not text");
  }
  return v.get<std::string>();
}

inline int64_t whole(const json& obj, std::string_view key, const std::string& path = "") {
  const json& v = field(obj, key, path);
  if (v.is_number_integer() && (!v.is_number_unsigned() || v.get<uint64_t>() <= INT64_MAX))
    return v.get<int64_t>();
  throw std::invalid_argument(
      "field '" + join(path, key) + "' is " +
      (v.is_number() ? "a number that is not a whole one within range" : kind_of(v)) +
      ", not a whole number");
}

// obj[key], which must be an array.
inline const json& items(const json& obj, std::string_view key, const std::string& path = "") {
  const json& v = field(obj, key, path);
  if (!v.is_array()) {
    throw std::invalid_argument("field '" + join(path, key) + "' is " + kind_of(v) +
                                ", not an array");
  }
  return v;
}

}  // namespace fp8wb::json_fields
