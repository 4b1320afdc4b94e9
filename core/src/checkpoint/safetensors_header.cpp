// The safetensors header read and checked (SafetensorsFile::parse()): its length, UTF-8,
// JSON read in one SAX pass member by member (HeaderReader), each tensor's entry checked,
// keys given twice found; and parse_json_once(), which the index reader shares.
#include <algorithm>
#include <cstring>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "fp8wb/core/checkpoint/safetensors.h"
#include "safetensors_internal.h"

namespace fp8wb {
using namespace safetensors_detail;
namespace {

using nlohmann::json;

bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n = 0;
    if (c < 0x80) {
      n = 0;
    } else if ((c >> 5) == 0x6) {
      n = 1;
    } else if ((c >> 4) == 0xE) {
      n = 2;
    } else if ((c >> 3) == 0x1E) {
      n = 3;
    } else {
      return false;
    }
    if (n > 0 && i + n >= s.size()) return false;
    for (size_t k = 1; k <= n; ++k) {
      if ((static_cast<unsigned char>(s[i + k]) >> 6) != 2) return false;
    }
    i += n + 1;
  }
  return true;
}

// What a JSON value is, for a message: "a number (5)", "an object", ...
std::string json_kind(const json& v) {
  if (v.is_number()) return "a number (" + v.dump() + ")";
  if (v.is_boolean()) return "a boolean (" + v.dump() + ")";
  if (v.is_null()) return "null";
  if (v.is_string()) return "a string";
  return v.is_array() ? "an array" : "an object";
}

// Finds the first key that an object gives twice, without building a document. (A
// parser callback would do it in one pass, but nlohmann's callback parser scans the
// whole enclosing object at the end of every inner one: quadratic in the number of
// tensors, minutes for 100k of them.)
struct DuplicateKeyFinder {
  std::vector<std::set<std::string>> keys;  // one set per open object
  int depth = 0;                            // open objects and arrays
  std::string duplicate;
  int duplicate_depth = 0;
  bool null() { return true; }
  bool boolean(bool) { return true; }
  bool number_integer(json::number_integer_t) { return true; }
  bool number_unsigned(json::number_unsigned_t) { return true; }
  bool number_float(json::number_float_t, const std::string&) { return true; }
  bool string(std::string&) { return true; }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    keys.emplace_back();
    ++depth;
    return true;
  }
  bool end_object() {
    keys.pop_back();
    --depth;
    return true;
  }
  bool start_array(std::size_t) {
    ++depth;
    return true;
  }
  bool end_array() {
    --depth;
    return true;
  }
  bool key(std::string& k) {
    if (!keys.back().insert(k).second) {
      duplicate = k;
      duplicate_depth = depth;
      return false;  // the first one is enough
    }
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception&) {
    return false;
  }
};

// Reads a safetensors header in one SAX pass, building each top-level member's value (a
// tensor's entry, __metadata__) as a small document of its own and handing it to `member`
// with its key, then dropping it: a header of a million tensors never becomes one document
// of a million objects (some 650 bytes each). Records what parse() reports in its order:
// invalid JSON, a header that is no object, the first key given twice (in the text's order;
// top-level keys are compared after the pass, by sorting, not kept in a set).
struct HeaderReader {
  std::function<void(std::string&&, json&&, uint64_t)> member;  // key, value, key's position
  // What went wrong, if anything.
  bool invalid = false;     // not valid JSON (or a number out of range)
  size_t invalid_byte = 0;  // where, when known (1-based, as nlohmann's)
  bool invalid_at_byte = false;
  bool not_object = false;  // the header is no JSON object
  std::string duplicate;    // the first key given twice inside a member (depth >= 2)
  int duplicate_depth = 0;
  uint64_t duplicate_at = 0;  // the key's position (a count of keys before it)
  // The member being built.
  uint64_t keys_seen = 0;
  int depth = 0;  // open objects and arrays, the header's object counting 1
  std::string member_key;
  uint64_t key_at = 0;
  json value;
  std::vector<json*> stack;
  json* element = nullptr;                  // where an object's next value goes
  std::vector<std::set<std::string>> keys;  // one set per open object inside a member

  template <class V>
  json* add(V&& v) {
    if (stack.empty()) {
      value = json(std::forward<V>(v));
      return &value;
    }
    if (stack.back()->is_array()) {
      stack.back()->push_back(json(std::forward<V>(v)));
      return &stack.back()->back();
    }
    *element = json(std::forward<V>(v));
    return element;
  }
  // A scalar: a member's whole value at depth 1, else part of one.
  template <class V>
  bool scalar(V&& v) {
    if (depth == 0) not_object = true;  // the header is a number, a string, ...
    if (not_object) return true;
    add(std::forward<V>(v));
    if (stack.empty()) done();
    return true;
  }
  void done() {
    member(std::move(member_key), std::move(value), key_at);
    value = json();
  }
  bool null() { return scalar(nullptr); }
  bool boolean(bool b) { return scalar(b); }
  bool number_integer(json::number_integer_t n) { return scalar(n); }
  bool number_unsigned(json::number_unsigned_t n) { return scalar(n); }
  bool number_float(json::number_float_t x, const std::string&) { return scalar(x); }
  bool string(std::string& t) { return scalar(std::move(t)); }
  bool binary(json::binary_t&) { return true; }
  bool start_object(std::size_t) {
    ++depth;
    if (depth == 1 || not_object) return true;  // the header's object
    stack.push_back(add(json::value_t::object));
    keys.emplace_back();
    return true;
  }
  bool end_object() {
    --depth;
    if (depth == 0 || not_object) return true;
    stack.pop_back();
    keys.pop_back();
    if (stack.empty()) done();
    return true;
  }
  bool start_array(std::size_t) {
    if (depth == 0) not_object = true;  // the header is an array
    ++depth;
    if (not_object) return true;
    stack.push_back(add(json::value_t::array));
    return true;
  }
  bool end_array() {
    --depth;
    if (not_object) return true;
    stack.pop_back();
    if (stack.empty()) done();
    return true;
  }
  bool key(std::string& k) {
    const uint64_t at = keys_seen++;
    if (not_object) return true;
    if (depth == 1) {
      member_key = k;
      key_at = at;
      return true;
    }
    if (!keys.back().insert(k).second && duplicate.empty()) {
      duplicate = k;
      duplicate_depth = depth;
      duplicate_at = at;
    }
    element = &(*stack.back())[k];  // the last of two equal keys, as a document keeps it
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) {
    invalid = true;
    if (const auto* p = dynamic_cast<const json::parse_error*>(&e)) {
      invalid_at_byte = true;
      invalid_byte = p->byte;
    }
    return false;
  }
};

// What a file that is not a safetensors file seems to be, from its first bytes: "" or
// " (it starts like a PNG image)".
std::string looks_like(const uint8_t* p, size_t n) {
  auto starts = [&](std::string_view magic) {
    return n >= magic.size() && std::memcmp(p, magic.data(), magic.size()) == 0;
  };
  const char* kind = nullptr;
  if (starts("\x89PNG"))
    kind = "like a PNG image";
  else if (starts("\xFF\xD8\xFF"))
    kind = "like a JPEG image";
  else if (starts("%PDF"))
    kind = "like a PDF document";
  else if (starts("PK\x03\x04"))
    kind = "like a zip archive";
  else if (starts("\x1F\x8B"))
    kind = "like a gzip file";
  else if (n > 0 && p[0] == 0x80)
    kind = "like a pickle (torch.save's legacy format)";
  else if (n > 0 && std::all_of(p, p + n, [](uint8_t c) {
             return c == '\t' || c == '\n' || c == '\r' || (c >= 0x20 && c < 0x7F);
           }))
    kind = "with text";
  return kind ? std::string(" (it starts ") + kind + ")" : std::string();
}

}  // namespace

namespace safetensors_detail {

json parse_json_once(std::string_view text, std::string& duplicate, int& duplicate_depth) {
  json j = json::parse(text);  // throws on invalid JSON, before the second pass
  DuplicateKeyFinder finder;
  json::sax_parse(text, &finder);
  duplicate = finder.duplicate;
  duplicate_depth = finder.duplicate_depth;
  return j;
}

}  // namespace safetensors_detail

namespace {

[[noreturn]] void fail_in(const std::string& label, const std::string& why) {
  throw CheckpointError(label, why);
}

// The header's length from the first 8 bytes, checked against the file's `size` and the
// bytes read (`head_size`); a file that does not start as a safetensors file is named as
// such rather than by its odd numbers.
uint64_t header_length(const std::string& label, const uint8_t* head, size_t head_size,
                       uint64_t size) {
  if (head_size < 8)
    fail_in(label, "truncated: " + std::to_string(head_size) +
                       " bytes, not even the 8-byte header length");
  const uint64_t n = load<uint64_t>(head);
  // A safetensors file starts with its JSON header's length, then '{'; a file that
  // does not is some other file, and is named as such rather than by its odd numbers.
  // A file of its 8-byte length alone (cut right after it) is a cut safetensors file.
  const bool cut_after_length = size == 8 && n <= kMaxHeader;
  if (!(head_size > 8 && head[8] == '{') && !cut_after_length && (n > kMaxHeader || n > size - 8)) {
    const std::string why =
        "is not a safetensors file: its first 8 bytes do not give a "
        "header length (expected a little-endian length below 100 MB "
        "followed by '{')" +
        looks_like(head, head_size) +
        ". A checkpoint is a .safetensors file, its .index.json, or a "
        "PyTorch .pt/.pth/.bin file";
    throw CheckpointError(label + " " + why, label, why, -1);
  }
  if (n > kMaxHeader)
    fail_in(label, "header length " + std::to_string(n) + " is over the 100 MB limit");
  if (n > size - 8) {
    fail_in(label, "header length " + std::to_string(n) + " runs past the end of the file (" +
                       std::to_string(size) + " bytes)");
  }
  if (n > head_size - 8) fail_in(label, "the file ended while its header was read");
  return n;
}

// A tensor's entry in the header, checked: its dtype, its shape (every size
// overflow-checked), its data offsets against the shape and the data section's size.
TensorEntry tensor_entry(const std::string& label, const std::string& name, const json& v,
                         uint64_t data_size) {
  auto bad = [&](const std::string& why) { fail_in(label, "tensor '" + name + "': " + why); };
  if (!v.is_object()) bad("its entry is not an object");
  TensorEntry t;
  if (!v.contains("dtype")) bad("no dtype");
  if (!v["dtype"].is_string()) bad("its dtype is not a string but " + json_kind(v["dtype"]));
  const std::string dt = v["dtype"].get<std::string>();
  if (!parse_st_dtype(dt, t.dtype)) {
    std::string known;
    for (const auto& i : kDtypes) known += (known.empty() ? "" : ", ") + std::string(i.name);
    bad("unknown dtype '" + dt + "' (the workbench reads " + known + ")");
  }
  if (!v.contains("shape")) bad("no shape");
  if (!v["shape"].is_array()) bad("its shape is not an array but " + json_kind(v["shape"]));
  // Every size from the header is overflow-checked: a shape whose byte count wraps
  // around 2^64 (F32 [2^62] is 0 bytes modulo 2^64) must not pass as a small tensor.
  uint64_t numel = 1, nonzero = 1;
  bool too_large = false;
  for (const auto& d : v["shape"]) {
    if (!d.is_number_unsigned() && !(d.is_number_integer() && d.get<int64_t>() >= 0))
      bad("shape has a negative or non-integer dimension");
    const uint64_t dim = d.get<uint64_t>();
    too_large |= dim > static_cast<uint64_t>(INT64_MAX);
    too_large |= __builtin_mul_overflow(numel, dim, &numel);
    // Even a tensor with a zero dimension may not name sizes no memory could hold.
    too_large |= dim > 0 && __builtin_mul_overflow(nonzero, dim, &nonzero);
    t.shape.push_back(static_cast<int64_t>(dim));
  }
  uint64_t nbytes = 0;
  too_large |= __builtin_mul_overflow(nonzero, st_dtype_size(t.dtype), &nbytes);
  too_large |= nbytes > (uint64_t{1} << 62);
  if (too_large)
    bad("shape " + shape_text(t.shape) + " of " + dt + " is too large (more than 2^62 bytes)");
  nbytes = numel * st_dtype_size(t.dtype);  // <= the above: no overflow
  if (!v.contains("data_offsets") || !v["data_offsets"].is_array() || v["data_offsets"].size() != 2)
    bad("data_offsets must be [begin, end]");
  for (const auto& o : v["data_offsets"]) {
    if (o.is_number_unsigned()) continue;
    if (o.is_number() && o.get<double>() < 0) bad("data_offsets " + o.dump() + " is negative");
    if (o.is_number_float() && o.get<double>() >= 18446744073709551615.0)
      bad("data_offsets " + o.dump() + " is out of range (at most 2^64 - 1)");
    bad("data_offsets must be two whole numbers, not " + json_kind(o));
  }
  t.begin = v["data_offsets"][0].get<uint64_t>();
  t.end = v["data_offsets"][1].get<uint64_t>();
  if (t.end < t.begin) bad("data_offsets end before they begin");
  // A tensor whose bytes the file does not hold to the end (a download cut short: this
  // tensor and every one after it) is listed, and cannot be read.
  t.cut_off = t.end > data_size;
  if (nbytes != t.end - t.begin) {
    bad("shape " + shape_text(t.shape) + " x " + dt + " is " + std::to_string(nbytes) +
        " bytes, but its data has " + std::to_string(t.end - t.begin));
  }
  return t;
}

// The header's members as HeaderReader hands them over: each checked and kept as a
// TensorEntry (or into the metadata). Of the members that a check refuses, the first by
// name is kept (`refused`), as a document's members (sorted by name) were checked.
struct MemberChecker {
  MemberChecker(const std::string& file_label, uint64_t data_bytes, std::vector<TensorEntry>& out,
                std::map<std::string, std::string>& out_metadata)
      : label(file_label), data_size(data_bytes), tensors(out), metadata(out_metadata) {}

  const std::string& label;
  uint64_t data_size;
  std::vector<TensorEntry>& tensors;
  std::map<std::string, std::string>& metadata;
  std::string refused_key, refused;
  std::vector<uint64_t> key_at;          // each tensor's key position, for duplicates
  uint64_t metadata_again = UINT64_MAX;  // where __metadata__ came a second time
  bool metadata_seen = false;

  void read_metadata(const json& v, uint64_t at) {
    if (metadata_seen && metadata_again == UINT64_MAX) metadata_again = at;
    metadata_seen = true;
    if (!v.is_object()) fail_in(label, "__metadata__ is not an object");
    for (const auto& [k, s] : v.items()) {
      if (!s.is_string()) fail_in(label, "__metadata__ value of '" + k + "' is not a string");
      metadata[k] = s.get<std::string>();
    }
  }
  void operator()(std::string&& name, json&& value, uint64_t at) {
    try {
      if (name == "__metadata__") {
        read_metadata(value, at);
        return;
      }
      TensorEntry t = tensor_entry(label, name, value, data_size);
      t.name = std::move(name);
      tensors.push_back(std::move(t));
      key_at.push_back(at);
    } catch (const CheckpointError& e) {
      if (refused.empty() || name < refused_key) {
        refused_key = name;
        refused = e.what();
      }
      if (name != "__metadata__") {  // still counted, for a name given twice
        TensorEntry t;
        t.name = std::move(name);
        tensors.push_back(std::move(t));
        key_at.push_back(at);
      }
    }
  }
};

// JSON keeps the last of two equal keys: a second tensor of the same name would hide
// the first one silently. The first key given twice in the text's order is named: a
// tensor's (found by sorting their names, `order`) or one inside a member.
void check_duplicates(const std::string& label, const HeaderReader& reader,
                      const MemberChecker& members, const std::vector<uint32_t>& order) {
  const std::vector<TensorEntry>& tensors = members.tensors;
  std::string duplicate = reader.duplicate;
  int duplicate_depth = reader.duplicate_depth;
  uint64_t duplicate_at = duplicate.empty() ? UINT64_MAX : reader.duplicate_at;
  for (size_t i = 1; i < order.size(); ++i) {
    if (tensors[order[i]].name == tensors[order[i - 1]].name &&
        members.key_at[order[i]] < duplicate_at) {
      duplicate = tensors[order[i]].name;
      duplicate_depth = 1;
      duplicate_at = members.key_at[order[i]];
    }
  }
  if (members.metadata_again < duplicate_at) {
    duplicate = "__metadata__";
    duplicate_depth = 1;
    duplicate_at = members.metadata_again;
  }
  if (!duplicate.empty()) {
    fail_in(label, duplicate_depth == 1 && duplicate != "__metadata__"
                       ? "tensor '" + duplicate + "' appears twice in the header"
                       : "the header gives '" + duplicate + "' twice");
  }
}

// No two tensors may share bytes, nor may bytes of the data section belong to none.
void check_layout(const std::string& label, const std::vector<TensorEntry>& tensors,
                  uint64_t data_size) {
  // Each one is checked against the furthest end of all before it (not only its
  // neighbour, which an empty tensor could be); empty tensors hold no bytes and overlap
  // nothing.
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : tensors) {
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  const TensorEntry* furthest = nullptr;
  for (const TensorEntry* t : by_offset) {
    if (furthest && t->begin < furthest->end) {
      fail_in(label, "tensors '" + furthest->name + "' and '" + t->name + "' overlap at byte " +
                         std::to_string(t->begin));
    }
    if (!furthest || t->end > furthest->end) furthest = t;
  }
  // The format's tensors cover the data section without holes (so that no file is also
  // another kind of file), and its loaders refuse a file with a hole or bytes after the
  // last tensor. A file cut short is listed (TensorEntry::cut_off) instead.
  uint64_t covered = 0;
  for (const TensorEntry* t : by_offset) {
    if (t->begin > covered) {
      fail_in(label,
              "bytes [" + std::to_string(covered) + ", " + std::to_string(t->begin) +
                  ") of the data section, before tensor '" + t->name +
                  "', belong to no tensor (a safetensors file's tensors cover its data without "
                  "holes)");
    }
    covered = t->end;  // no overlap: t->end is the furthest yet
  }
  if (covered < data_size) {
    fail_in(label, std::to_string(data_size - covered) + " bytes after " +
                       (by_offset.empty() ? "the header" : "the last tensor's data") +
                       " belong to no tensor (a safetensors file ends with its last tensor)");
  }
}

}  // namespace

void SafetensorsFile::parse(const uint8_t* head, size_t head_size, uint64_t size) {
  const uint64_t n = header_length(label_, head, head_size, size);
  const std::string_view header(reinterpret_cast<const char*>(head + 8), static_cast<size_t>(n));
  if (!valid_utf8(header)) fail_in(label_, "the header is not valid UTF-8");
  data_offset_ = 8 + n;
  const uint64_t data_size = size - 8 - n;
  // Each member as it is read (HeaderReader): checked and kept as a TensorEntry.
  MemberChecker members(label_, data_size, tensors_, metadata_);
  HeaderReader reader;
  reader.member = [&members](std::string&& name, json&& value, uint64_t at) {
    members(std::move(name), std::move(value), at);
  };
  json::sax_parse(header, &reader);
  if (reader.invalid) {
    // Where the text goes wrong, in the header's bytes (nlohmann's byte is 1-based).
    fail_in(label_, reader.invalid_at_byte
                        ? "the safetensors header is not valid JSON (at byte " +
                              std::to_string(
                                  std::min<size_t>(reader.invalid_byte, static_cast<size_t>(n))) +
                              " of its " + std::to_string(n) + ")"
                        : std::string("the safetensors header is not valid JSON"));
  }
  if (reader.not_object) fail_in(label_, "the header is not a JSON object");
  std::vector<uint32_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return tensors_[a].name != tensors_[b].name ? tensors_[a].name < tensors_[b].name : a < b;
  });
  check_duplicates(label_, reader, members, order);
  if (!members.refused.empty()) throw CheckpointError(members.refused);
  // In the order of names, as find() looks them up.
  std::vector<TensorEntry> sorted;
  sorted.reserve(tensors_.size());
  for (uint32_t i : order) sorted.push_back(std::move(tensors_[i]));
  tensors_ = std::move(sorted);
  check_layout(label_, tensors_, data_size);
}

}  // namespace fp8wb
