#include "fp8wb/core/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "fp8wb/core/checkpoint/file_io.h"
#include "safetensors_internal.h"

namespace fp8wb {
using namespace safetensors_detail;
namespace {

using nlohmann::json;

// Whether `inner` lies inside the folder `outer` (both canonical), by path components.
bool inside(const std::filesystem::path& outer, const std::filesystem::path& inner) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (o->empty()) continue;  // a trailing separator
    if (i == inner.end() || *i != *o) return false;
  }
  return i != inner.end();
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
    throw CheckpointError(e);
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
    throw CheckpointError(e);
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
    return CheckpointError(label_, "tensor '" + t.name + "': " + why +
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
      throw CheckpointError(e);
    }
    json j;
    std::string duplicate;
    int duplicate_depth = 0;
    try {
      j = parse_json_once(text, duplicate, duplicate_depth);
    } catch (const json::parse_error& e) {
      throw CheckpointError(path, "the index is not valid JSON (at byte " +
                                      std::to_string(std::min<size_t>(e.byte, text.size())) +
                                      " of its " + std::to_string(text.size()) + ")");
    } catch (const json::exception&) {
      throw CheckpointError(path, "the index is not valid JSON");
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw CheckpointError(path, "no weight_map object");
    if (!duplicate.empty()) throw CheckpointError(path, "'" + duplicate + "' appears twice");
    namespace fs = std::filesystem;
    const fs::path parent = fs::path(path).parent_path();
    std::error_code ec;
    const fs::path dir = fs::weakly_canonical(parent.empty() ? fs::path(".") : parent, ec);
    if (ec) throw CheckpointError("cannot resolve the folder of " + path + ": " + ec.message());
    std::map<std::string, size_t> shard_index;
    for (const auto& [name, shard] : j["weight_map"].items()) {
      if (!shard.is_string())
        throw CheckpointError(path, "shard of '" + name + "' is not a string");
      const std::string file = shard.get<std::string>();
      if (!shard_index.count(file)) {
        // The shard as it resolves (symbolic links followed) must lie in the index's
        // folder, compared by path components: "a..b.safetensors" is a fine name, while
        // "../x" or a link to /etc is not.
        const fs::path resolved = fs::weakly_canonical(dir / file, ec);
        if (file.empty() || fs::path(file).is_absolute() || ec || !inside(dir, resolved))
          throw CheckpointError(path, "shard '" + file + "' lies outside the checkpoint's folder");
        shard_index[file] = c->files_.size();
        // A shard that cannot be opened (missing from a download, say) is named with the
        // index and a tensor it should hold.
        try {
          c->files_.push_back(std::make_unique<SafetensorsFile>((dir / file).string()));
        } catch (const CheckpointError& e) {
          throw CheckpointError(path,
                                "shard '" + file + "' (of '" + name +
                                    "' and any other tensor the index puts there): " + e.what());
        }
      }
      const SafetensorsFile& f = *c->files_[shard_index[file]];
      const TensorEntry* e = f.find(name);
      if (!e) throw CheckpointError(path, "'" + name + "' is not in its shard " + file);
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
    throw CheckpointError(e);
  }
}

}  // namespace fp8wb
