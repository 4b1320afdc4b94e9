#include "fp8wb/core/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>

#include "fp8wb/core/file_io.h"
#include "fp8wb/kernels/codec.h"

namespace fp8wb {
namespace {

using nlohmann::json;

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

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    s += (i ? ", " : "") + std::to_string(static_cast<uint64_t>(shape[i]));
  }
  return s + "]";
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

// Parses JSON and reports the first key that an object gives twice (and its depth: 1
// for the keys of the outermost object). Both passes take O(n log n) time.
json parse_json_once(std::string_view text, std::string& duplicate, int& duplicate_depth) {
  json j = json::parse(text);  // throws on invalid JSON, before the second pass
  DuplicateKeyFinder finder;
  json::sax_parse(text, &finder);
  duplicate = finder.duplicate;
  duplicate_depth = finder.duplicate_depth;
  return j;
}

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

// Whether `inner` lies inside the folder `outer` (both canonical), by path components.
bool inside(const std::filesystem::path& outer, const std::filesystem::path& inner) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return i != inner.end();
}

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

template <class T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

}  // namespace

std::string_view st_dtype_name(StDtype d) {
  for (const auto& i : kDtypes) {
    if (i.d == d) return i.name;
  }
  return "?";
}

bool parse_st_dtype(std::string_view name, StDtype& out) {
  for (const auto& i : kDtypes) {
    if (name == i.name) {
      out = i.d;
      return true;
    }
  }
  return false;
}

size_t st_dtype_size(StDtype d) {
  for (const auto& i : kDtypes) {
    if (i.d == d) return i.size;
  }
  return 0;
}

int64_t TensorEntry::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::SafetensorsFile(const std::string& path) : label_(path) {
  try {
    fd_ = open_regular_file(path);  // a FIFO or a device is refused, not waited on
  } catch (const FileError& e) {
    throw CheckpointError(e.what());
  }
  try {
    struct stat st {};
    if (fstat(fd_, &st) != 0)
      throw CheckpointError("cannot open " + path + ": " + std::strerror(errno));
    size_ = static_cast<uint64_t>(st.st_size);
    // The header length and the byte after it, then (where the length is plausible) the
    // whole header; tensor bytes are read when asked for.
    std::vector<uint8_t> head(static_cast<size_t>(std::min<uint64_t>(size_, 9)));
    head.resize(static_cast<size_t>(read_at(fd_, 0, head.data(), head.size(), path)));
    if (head.size() >= 8) {
      const uint64_t n = load<uint64_t>(head.data());
      if (n <= kMaxHeader && n <= size_ - 8) {
        head.resize(static_cast<size_t>(8 + n));
        head.resize(static_cast<size_t>(read_at(fd_, 0, head.data(), head.size(), path)));
      }
    } else {
      size_ = head.size();  // shorter than fstat said a moment ago
    }
    parse(head.data(), head.size(), size_);
  } catch (const FileError& e) {
    ::close(fd_);
    throw CheckpointError(e.what());
  } catch (...) {
    ::close(fd_);
    throw;
  }
}

SafetensorsFile::SafetensorsFile(const uint8_t* bytes, size_t size, std::string label)
    : label_(std::move(label)), image_(bytes), size_(size) {
  parse(bytes, size, size);
}

SafetensorsFile::~SafetensorsFile() {
  if (fd_ >= 0) ::close(fd_);
}

void SafetensorsFile::require_present(const TensorEntry& t) const {
  if (!t.cut_off) return;
  // Offsets in the data section (from the header, up to 2^64 - 1: no sum with its start).
  throw TensorValueError(label_ + ": tensor '" + t.name + "': its bytes [" +
                         std::to_string(t.begin) + ", " + std::to_string(t.end) +
                         ") of the data section, which starts at byte " +
                         std::to_string(data_offset_) + ", run past the end of the file (" +
                         std::to_string(size_) + " bytes): the file is truncated");
}

uint64_t SafetensorsFile::bytes_present(const TensorEntry& t) const {
  if (!t.cut_off) return t.end - t.begin;
  // The data section's bytes in the file (parse(): it starts inside the file), from the
  // tensor's start; offsets up to 2^64 - 1, so no sum with the section's start.
  const uint64_t in_file = size_ - data_offset_;
  return t.begin >= in_file ? 0 : std::min(in_file, t.end) - t.begin;
}

void SafetensorsFile::read(const TensorEntry& t, void* out) const {
  require_present(t);
  const uint64_t n = t.end - t.begin;  // parse(): end >= begin, end inside the file at open
  if (n == 0) return;
  const uint64_t from = data_offset_ + t.begin;
  if (image_) {
    std::memcpy(out, image_ + from, static_cast<size_t>(n));
    return;
  }
  auto gone = [&](const std::string& why) {
    return CheckpointError(label_ + ": tensor '" + t.name + "': " + why +
                           "; the file was truncated or rewritten while it was read");
  };
  const std::string range = "[" + std::to_string(from) + ", " + std::to_string(from + n) + ")";
  struct stat st {};
  if (fstat(fd_, &st) == 0 && static_cast<uint64_t>(st.st_size) < from + n) {
    throw gone("its bytes " + range + " lie past the end of the file, which is " +
               std::to_string(st.st_size) + " bytes now and was " + std::to_string(size_) +
               " when it was opened");
  }
  uint64_t got = 0;
  try {
    got = read_at(fd_, from, out, n, label_);
  } catch (const FileError& e) {
    throw CheckpointError(std::string(e.what()) + " (tensor '" + t.name + "')");
  }
  if (got < n) {
    throw gone("the file ended at byte " + std::to_string(from + got) + " while its bytes " +
               range + " were read");
  }
}

std::vector<uint8_t> SafetensorsFile::bytes(const TensorEntry& t) const {
  require_present(t);
  std::vector<uint8_t> out(static_cast<size_t>(t.end - t.begin));
  read(t, out.data());
  return out;
}

void SafetensorsFile::parse(const uint8_t* head, size_t head_size, uint64_t size) {
  auto fail = [&](const std::string& why) { throw CheckpointError(label_ + ": " + why); };
  if (head_size < 8)
    fail("truncated: " + std::to_string(head_size) + " bytes, not even the 8-byte header length");
  const uint64_t n = load<uint64_t>(head);
  // A safetensors file starts with its JSON header's length, then '{'; a file that
  // does not is some other file, and is named as such rather than by its odd numbers.
  // A file of its 8-byte length alone (cut right after it) is a cut safetensors file.
  const bool cut_after_length = size == 8 && n <= kMaxHeader;
  if (!(head_size > 8 && head[8] == '{') && !cut_after_length && (n > kMaxHeader || n > size - 8)) {
    throw CheckpointError(label_ + " is not a safetensors file: its first 8 bytes do not " +
                          "give a header length (expected a little-endian length below 100 " +
                          "MB followed by '{')" + looks_like(head, head_size) +
                          ". A checkpoint is a .safetensors file, its .index.json, or a " +
                          "PyTorch .pt/.pth/.bin file");
  }
  if (n > kMaxHeader) fail("header length " + std::to_string(n) + " is over the 100 MB limit");
  if (n > size - 8) {
    fail("header length " + std::to_string(n) + " runs past the end of the file (" +
         std::to_string(size) + " bytes)");
  }
  if (n > head_size - 8) fail("the file ended while its header was read");
  const std::string_view header(reinterpret_cast<const char*>(head + 8), static_cast<size_t>(n));
  if (!valid_utf8(header)) fail("the header is not valid UTF-8");
  data_offset_ = 8 + n;
  const uint64_t data_size = size - 8 - n;
  // Each member as it is read (HeaderReader): checked and kept as a TensorEntry. Of the
  // members that a check refuses, the first by name is reported, as a document's members
  // (sorted by name) were checked.
  std::string refused_key, refused;
  std::vector<uint64_t> key_at;          // each tensor's key position, for duplicates
  uint64_t metadata_again = UINT64_MAX;  // where __metadata__ came a second time
  bool metadata_seen = false;
  auto member = [&](std::string&& name, json&& value, uint64_t at) {
    const json& v = value;
    try {
      if (name == "__metadata__") {
        if (metadata_seen && metadata_again == UINT64_MAX) metadata_again = at;
        metadata_seen = true;
        if (!v.is_object()) fail("__metadata__ is not an object");
        for (const auto& [k, s] : v.items()) {
          if (!s.is_string()) fail("__metadata__ value of '" + k + "' is not a string");
          metadata_[k] = s.get<std::string>();
        }
        return;
      }
      auto bad = [&](const std::string& why) { fail("tensor '" + name + "': " + why); };
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
      if (!v.contains("data_offsets") || !v["data_offsets"].is_array() ||
          v["data_offsets"].size() != 2)
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
      t.name = std::move(name);
      tensors_.push_back(std::move(t));
      key_at.push_back(at);
    } catch (const CheckpointError& e) {
      if (refused.empty() || name < refused_key) {
        refused_key = name;
        refused = e.what();
      }
      if (name != "__metadata__") {  // still counted, for a name given twice
        TensorEntry t;
        t.name = std::move(name);
        tensors_.push_back(std::move(t));
        key_at.push_back(at);
      }
    }
  };
  HeaderReader reader;
  reader.member = member;
  json::sax_parse(header, &reader);
  if (reader.invalid) {
    // Where the text goes wrong, in the header's bytes (nlohmann's byte is 1-based).
    fail(reader.invalid_at_byte
             ? "the safetensors header is not valid JSON (at byte " +
                   std::to_string(std::min<size_t>(reader.invalid_byte, static_cast<size_t>(n))) +
                   " of its " + std::to_string(n) + ")"
             : std::string("the safetensors header is not valid JSON"));
  }
  if (reader.not_object) fail("the header is not a JSON object");
  // JSON keeps the last of two equal keys: a second tensor of the same name would hide
  // the first one silently. The first key given twice in the text's order is named: a
  // tensor's (found by sorting their names) or one inside a member.
  std::vector<uint32_t> order(tensors_.size());
  std::iota(order.begin(), order.end(), 0u);
  std::sort(order.begin(), order.end(), [&](uint32_t a, uint32_t b) {
    return tensors_[a].name != tensors_[b].name ? tensors_[a].name < tensors_[b].name : a < b;
  });
  std::string duplicate = reader.duplicate;
  int duplicate_depth = reader.duplicate_depth;
  uint64_t duplicate_at = duplicate.empty() ? UINT64_MAX : reader.duplicate_at;
  for (size_t i = 1; i < order.size(); ++i) {
    if (tensors_[order[i]].name == tensors_[order[i - 1]].name && key_at[order[i]] < duplicate_at) {
      duplicate = tensors_[order[i]].name;
      duplicate_depth = 1;
      duplicate_at = key_at[order[i]];
    }
  }
  if (metadata_again < duplicate_at) {
    duplicate = "__metadata__";
    duplicate_depth = 1;
    duplicate_at = metadata_again;
  }
  if (!duplicate.empty()) {
    fail(duplicate_depth == 1 && duplicate != "__metadata__"
             ? "tensor '" + duplicate + "' appears twice in the header"
             : "the header gives '" + duplicate + "' twice");
  }
  if (!refused.empty()) throw CheckpointError(refused);
  // In the order of names, as find() looks them up.
  std::vector<TensorEntry> sorted;
  sorted.reserve(tensors_.size());
  for (uint32_t i : order) sorted.push_back(std::move(tensors_[i]));
  tensors_ = std::move(sorted);
  // No two tensors may share bytes. Each one is checked against the furthest end of all
  // before it (not only its neighbour, which an empty tensor could be); empty tensors
  // hold no bytes and overlap nothing.
  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : tensors_) {
    if (t.end > t.begin) by_offset.push_back(&t);
  }
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  const TensorEntry* furthest = nullptr;
  for (const TensorEntry* t : by_offset) {
    if (furthest && t->begin < furthest->end) {
      fail("tensors '" + furthest->name + "' and '" + t->name + "' overlap at byte " +
           std::to_string(t->begin));
    }
    if (!furthest || t->end > furthest->end) furthest = t;
  }
  // Nor may bytes belong to no tensor: the format's tensors cover the data section without
  // holes (so that no file is also another kind of file), and its loaders refuse a file
  // with a hole or bytes after the last tensor. A file cut short is listed (above) instead.
  uint64_t covered = 0;
  for (const TensorEntry* t : by_offset) {
    if (t->begin > covered) {
      fail("bytes [" + std::to_string(covered) + ", " + std::to_string(t->begin) +
           ") of the data section, before tensor '" + t->name +
           "', belong to no tensor (a safetensors file's tensors cover its data without holes)");
    }
    covered = t->end;  // no overlap: t->end is the furthest yet
  }
  if (covered < data_size) {
    fail(std::to_string(data_size - covered) + " bytes after " +
         (by_offset.empty() ? "the header" : "the last tensor's data") +
         " belong to no tensor (a safetensors file ends with its last tensor)");
  }
}

const TensorEntry* SafetensorsFile::find(const std::string& name) const {
  // tensors_ is in the order of the parsed JSON object: sorted by name.
  const auto it =
      std::lower_bound(tensors_.begin(), tensors_.end(), name,
                       [](const TensorEntry& t, const std::string& n) { return t.name < n; });
  return it != tensors_.end() && it->name == name ? &*it : nullptr;
}

std::unique_ptr<Checkpoint> Checkpoint::open(const std::string& path) {
  auto c = std::unique_ptr<Checkpoint>(new Checkpoint());
  c->path_ = path;
  const std::string suffix = ".index.json";
  if (path.size() > suffix.size() &&
      path.compare(path.size() - suffix.size(), suffix.size(), suffix) == 0) {
    std::string text;
    try {
      text = read_regular_file(path, kMaxHeader);
    } catch (const FileError& e) {
      throw CheckpointError(e.what());
    }
    json j;
    std::string duplicate;
    int duplicate_depth = 0;
    try {
      j = parse_json_once(text, duplicate, duplicate_depth);
    } catch (const json::parse_error& e) {
      throw CheckpointError(path + ": the index is not valid JSON (at byte " +
                            std::to_string(std::min<size_t>(e.byte, text.size())) + " of its " +
                            std::to_string(text.size()) + ")");
    } catch (const json::exception&) {
      throw CheckpointError(path + ": the index is not valid JSON");
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw CheckpointError(path + ": no weight_map object");
    if (!duplicate.empty()) throw CheckpointError(path + ": '" + duplicate + "' appears twice");
    namespace fs = std::filesystem;
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(parent.empty() ? fs::path(".") : parent, ec);
    if (ec) throw CheckpointError("cannot resolve the folder of " + path + ": " + ec.message());
    std::map<std::string, size_t> shard_index;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!shard.is_string())
        throw CheckpointError(path + ": shard of '" + name + "' is not a string");
      const std::string file = shard.get<std::string>();
      if (!shard_index.count(file)) {
        // The shard as it resolves (symbolic links followed) must lie in the index's
        // folder, compared by path components: "a..b.safetensors" is a fine name, while
        // "../x" or a link to /etc is not.
        const fs::path resolved = fs::weakly_canonical(dir / file, ec);
        if (file.empty() || fs::path(file).is_absolute() || ec || !inside(dir, resolved))
          throw CheckpointError(path + ": shard '" + file +
                                "' lies outside the checkpoint's folder");
        shard_index[file] = c->files_.size();
        // A shard that cannot be opened (missing from a download, say) is named with the
        // index and a tensor it should hold.
        try {
          c->files_.push_back(std::make_unique<SafetensorsFile>((dir / file).string()));
        } catch (const CheckpointError& e) {
          throw CheckpointError(path + ": shard '" + file + "' (of '" + name +
                                "' and any other tensor the index puts there): " + e.what());
        }
      }
      const SafetensorsFile& f = *c->files_[shard_index[file]];
      const TensorEntry* e = f.find(name);
      if (!e) throw CheckpointError(path + ": '" + name + "' is not in its shard " + file);
      c->index_[name] = c->refs_.size();
      c->refs_.push_back({&f, e});
    }
    std::vector<const std::string*> shard_names(c->files_.size());
    for (const auto& [file, i] : shard_index) shard_names[i] = &file;
    for (size_t i = 0; i < c->files_.size(); ++i) {
      for (const TensorEntry& e : c->files_[i]->tensors()) {
        if (!c->index_.count(e.name)) c->unindexed_.emplace_back(e.name, *shard_names[i]);
      }
    }
  } else {
    c->files_.push_back(std::make_unique<SafetensorsFile>(path));
    c->index_file(*c->files_.back());
  }
  return c;
}

void Checkpoint::index_file(const SafetensorsFile& f) {
  for (const auto& e : f.tensors()) {
    index_[e.name] = refs_.size();
    refs_.push_back({&f, &e});
  }
}

std::unique_ptr<Checkpoint> Checkpoint::from_image(std::vector<uint8_t> image,
                                                   const std::string& label) {
  auto c = std::unique_ptr<Checkpoint>(new Checkpoint());
  c->path_ = label;
  c->image_ = std::move(image);
  c->files_.push_back(std::make_unique<SafetensorsFile>(c->image_.data(), c->image_.size(), label));
  c->index_file(*c->files_.back());
  return c;
}

const Checkpoint::Ref* Checkpoint::find(const std::string& name) const {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &refs_[it->second];
}

namespace {

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

std::vector<uint8_t> safetensors_image(const std::vector<TensorToWrite>& tensors,
                                       const std::map<std::string, std::string>& metadata) {
  json h = json::object();
  if (!metadata.empty()) h["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& t : tensors) {
    uint64_t numel = 1, nbytes = 0;
    bool overflow = false;
    for (int64_t d : t.shape) {
      if (d < 0) throw CheckpointError("tensor '" + t.name + "': negative dimension");
      overflow |= __builtin_mul_overflow(numel, static_cast<uint64_t>(d), &numel);
    }
    overflow |= __builtin_mul_overflow(numel, st_dtype_size(t.dtype), &nbytes);
    if (overflow)
      throw CheckpointError("tensor '" + t.name + "': shape " + shape_text(t.shape) +
                            " is too large");
    if (nbytes != t.bytes.size()) {
      throw CheckpointError("tensor '" + t.name + "': shape needs " + std::to_string(nbytes) +
                            " bytes, got " + std::to_string(t.bytes.size()));
    }
    if (h.contains(t.name)) throw CheckpointError("tensor '" + t.name + "' given twice");
    h[t.name] = {{"dtype", std::string(st_dtype_name(t.dtype))},
                 {"shape", t.shape},
                 {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string header = h.dump();
  header.append((8 - header.size() % 8) % 8, ' ');  // the data section 8-byte aligned
  std::vector<uint8_t> out(8 + header.size());
  const uint64_t n = header.size();
  std::memcpy(out.data(), &n, 8);
  std::memcpy(out.data() + 8, header.data(), header.size());
  out.reserve(out.size() + offset);
  for (const auto& t : tensors) out.insert(out.end(), t.bytes.begin(), t.bytes.end());
  return out;
}

std::string safetensors_replace_refusal(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return {};  // none, or refused on writing
  const auto size = std::filesystem::file_size(path, ec);
  if (ec || size == 0) return {};
  std::ifstream f(path, std::ios::binary);
  unsigned char head[9] = {};
  f.read(reinterpret_cast<char*>(head), sizeof head);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | head[i];  // little-endian
  if (f.gcount() == sizeof head && head[8] == '{' && n <= size - 8) return {};
  return path +
         " exists and is not a safetensors file: writing there would replace it; give "
         "another path, or remove the file first";
}

void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  if (const std::string no = safetensors_replace_refusal(path); !no.empty())
    throw CheckpointError(no);
  const std::vector<uint8_t> image = safetensors_image(tensors, metadata);
  // Nothing half-written under the real name, nothing left beside it on a failure, and
  // never a device or a folder replaced by a file.
  try {
    write_file_atomically(path, [&](std::ostream& out) {
      out.write(reinterpret_cast<const char*>(image.data()),
                static_cast<std::streamsize>(image.size()));
    });
  } catch (const FileError& e) {
    throw CheckpointError(e.what());
  }
}

}  // namespace fp8wb
