// defines: StDtype, TensorEntry, CheckpointError, SafetensorsFile, Checkpoint,
// write_safetensors(): reading safetensors checkpoints (the header at open, each
// tensor's bytes when asked for, so multi-GB files open without being loaded; sharded
// sets through their *.index.json) and writing them. Every malformed input gives a CheckpointError
// naming the file, the tensor or the byte offset. Plain C++, no torch.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "fp8wb/core/checkpoint/file_io.h"

namespace fp8wb {

// A checkpoint that cannot be read: the file (`path`) and what is wrong with it (`reason`)
// where the reader knows them apart, as PathError gives them.
struct CheckpointError : PathError {
  using PathError::PathError;
  // A file error met while reading a checkpoint, its parts kept.
  explicit CheckpointError(const PathError& e) : PathError(e) {}
};

// A tensor whose bytes were read but hold no values as the file defines them (a BOOL byte
// other than 0 or 1; an FP8 weight with a `<name>_scale_inv` that fits it no way): that
// tensor alone is unusable, the file's others are not.
struct TensorValueError : CheckpointError {
  using CheckpointError::CheckpointError;
};

// F8_E8M0: an 8-bit power of two, 2^(byte - 127), 0xFF NaN (the scales of MX checkpoints).
enum class StDtype : uint8_t {
  F64,
  F32,
  F16,
  BF16,
  F8_E4M3,
  F8_E5M2,
  F8_E8M0,
  I64,
  I32,
  I16,
  I8,
  U64,
  U32,
  U16,
  U8,
  BOOL
};

std::string_view st_dtype_name(StDtype d);  // "F32", "F8_E4M3", ...
bool parse_st_dtype(std::string_view name, StDtype& out);
size_t st_dtype_size(StDtype d);

struct TensorEntry {
  std::string name;
  StDtype dtype = StDtype::F32;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets in the data section
  // The file ends before `end` (a truncated download): the header names the tensor, its
  // bytes are not all there. Reading it throws a TensorValueError.
  bool cut_off = false;
  int64_t numel() const;
};

// One .safetensors file. The header is read and validated at open; tensor bytes are read
// with pread when asked for (never through a memory map, so a file truncated while it is
// read gives an error instead of SIGBUS). The file stays open while the object lives.
class SafetensorsFile {
 public:
  // Reads and validates the header: header length, JSON, dtypes, shapes against byte
  // counts (overflow-checked), offsets inside the data section (against the file's size
  // at open) and not overlapping, UTF-8 names, each given once. A path that is not a
  // regular file (a FIFO) is refused.
  explicit SafetensorsFile(const std::string& path);
  // Parses an in-memory image (the fuzzers and tests use this); `bytes` must outlive it.
  SafetensorsFile(const uint8_t* bytes, size_t size, std::string label);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return label_; }
  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  const TensorEntry* find(const std::string& name) const;
  // The tensor's raw bytes (little-endian, as stored): t.end - t.begin bytes into `out`.
  // Thread-safe. A file that has shrunk since it was opened, or a read that ends early,
  // throws CheckpointError naming the file and the tensor; a tensor cut off by the file's
  // end (cut_off), a TensorValueError (require_present()).
  void read(const TensorEntry& t, void* out) const;
  std::vector<uint8_t> bytes(const TensorEntry& t) const;
  // Throws the TensorValueError of a tensor the file does not hold to its end. Called
  // before any buffer for its bytes or values is allocated: a header may claim a cut-off
  // tensor of any size up to 2^62 bytes.
  void require_present(const TensorEntry& t) const;
  // How many of a tensor's bytes the file holds (all of them unless it is cut off).
  uint64_t bytes_present(const TensorEntry& t) const;

 private:
  void parse(const uint8_t* head, size_t head_size, uint64_t file_size);
  std::string label_;
  int fd_ = -1;                     // a file: read with pread
  const uint8_t* image_ = nullptr;  // an image in memory
  uint64_t size_ = 0;               // the file's size at open
  uint64_t data_offset_ = 0;        // where the data section starts
  std::vector<TensorEntry> tensors_;
  std::map<std::string, std::string> metadata_;
};

// A checkpoint: one safetensors file, or a sharded set through its *.index.json.
class Checkpoint {
 public:
  static std::unique_ptr<Checkpoint> open(const std::string& path);
  // A checkpoint from a safetensors image in memory (what other readers convert to).
  static std::unique_ptr<Checkpoint> from_image(std::vector<uint8_t> image,
                                                const std::string& label);

  struct Ref {
    const SafetensorsFile* file;
    const TensorEntry* entry;
  };
  const std::vector<Ref>& tensors() const { return refs_; }
  const Ref* find(const std::string& name) const;
  // The tensor as fp32. FP8 tensors with a `<name>_scale_inv` companion (DeepSeek-V3's
  // 128x128 blocks) are dequantized with it; integer tensors are converted. Values it
  // cannot give are a TensorValueError, a file that cannot be read a CheckpointError.
  std::vector<float> to_float(const Ref& r) const;
  const std::string& path() const { return path_; }
  // A sharded set's tensors that its shards hold but its index's weight_map does not name
  // (name, shard as the index names it), in the shards' order: not part of the checkpoint,
  // as loaders read it, so neither listed nor analysed; said by those who show it.
  const std::vector<std::pair<std::string, std::string>>& unindexed() const { return unindexed_; }

 private:
  void index_file(const SafetensorsFile& f);
  std::string path_;
  std::vector<uint8_t> image_;  // from_image(): the bytes the file views
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::vector<Ref> refs_;
  std::map<std::string, size_t> index_;
  std::vector<std::pair<std::string, std::string>> unindexed_;
};

struct TensorToWrite {
  std::string name;
  StDtype dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;  // little-endian, numel * size of dtype
};

// The safetensors image of these tensors (what write_safetensors() writes).
std::vector<uint8_t> safetensors_image(const std::vector<TensorToWrite>& tensors,
                                       const std::map<std::string, std::string>& metadata = {});

// Empty where a safetensors file written at `path` would replace nothing but a safetensors
// file: no file is there, an empty one, or one that begins as safetensors files do (an
// 8-byte header length within the file, then `{`). Else why not, naming the file: a text
// file, a PyTorch checkpoint, any other file would be lost.
std::string safetensors_replace_refusal(const std::string& path);

// Writes a safetensors file (tensors in the given order, 8-byte aligned header), all or
// nothing (write_file_atomically()). Throws CheckpointError (a shape/byte mismatch, a
// file that cannot be written, a path that is a folder or a device, a file there that
// safetensors_replace_refusal() refuses to replace).
void write_safetensors(const std::string& path, const std::vector<TensorToWrite>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace fp8wb
