// Torch translation unit: PyTorch files (.pt/.pth/.bin) as checkpoints. LibTorch's stream
// reader opens the zip archive torch.save writes; its data.pkl goes through the
// workbench's restricted unpickler (torch_pickle.h: LibTorch's own unpickler reads
// neither the OrderedDict of a state dict nor float8 tensors), and the tensors become a
// safetensors image, which the rest of the workbench reads like any other checkpoint.
//
// Small files must not take large memory: before anything is inflated, the archive's
// central directory is read and what its records declare is held against the file's
// size (torch.save stores records uncompressed; a compressed record may inflate only
// so far), and stored records are read straight from the file.
#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <map>

#include "fp8wb/core/checkpoint/file_io.h"
#include "fp8wb/core/checkpoint/torch_pickle.h"
#include "fp8wb/core/name_text.h"
#include "pt_reader.h"

namespace fp8wb {
namespace {

// A compressed record may inflate to this many times its compressed size (deflate
// reaches about 1000x on zeros; real data and pickles 1-20x) ...
constexpr uint64_t kMaxInflateRatio = 256;
constexpr uint64_t kSmallRecord = uint64_t{1} << 20;  // ... or to this, whichever is more.
// All records together may hold this many times the file's size, or this much.
constexpr uint64_t kMaxTotalRatio = 16;
constexpr uint64_t kTotalFloor = uint64_t{256} << 20;

std::string first_line(const std::string& s) {
  return s.substr(0, s.find('\n'));
}

std::string mb(uint64_t bytes) {
  return std::to_string((bytes + (1u << 19)) >> 20) + " MB";
}

// The archive as LibTorch reads it, through a descriptor opened as a regular file.
class FdAdapter : public caffe2::serialize::ReadAdapterInterface {
 public:
  FdAdapter(int fd, uint64_t size) : fd_(fd), size_(size) {}
  ~FdAdapter() override { ::close(fd_); }
  size_t size() const override { return static_cast<size_t>(size_); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* = "") const override {
    size_t done = 0;
    while (done < n) {
      const ssize_t r =
          ::pread(fd_, static_cast<char*>(buf) + done, n - done, static_cast<off_t>(pos + done));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) break;
      done += static_cast<size_t>(r);
    }
    return done;
  }

 private:
  int fd_;
  uint64_t size_;
};

struct ZipRecord {
  uint16_t method = 0;  // 0: stored
  uint64_t compressed = 0, size = 0;
};

uint64_t le(const uint8_t* p, int n) {
  uint64_t v = 0;
  for (int i = n - 1; i >= 0; --i) v = v << 8 | p[i];
  return v;
}

// The records of a zip archive as its central directory declares them, by name without
// the archive's top folder (as PyTorchStreamReader names them). Throws CheckpointError.
std::map<std::string, ZipRecord> zip_directory(const FdAdapter& in, const std::string& path) {
  auto bad = [&](const std::string& why) -> CheckpointError {
    return CheckpointError(path, "not an archive torch.save wrote (" + why + ")");
  };
  const uint64_t size = in.size();
  if (size < 22) throw bad("too short for a zip archive");
  const uint64_t tail_len = std::min<uint64_t>(size, 22 + 65535);
  std::vector<uint8_t> tail(static_cast<size_t>(tail_len));
  if (in.read(size - tail_len, tail.data(), tail.size()) != tail.size())
    throw bad("cannot read its end");
  size_t eocd = tail.size();
  for (size_t i = tail.size() - 22 + 1; i-- > 0;) {
    if (le(&tail[i], 4) == 0x06054b50) {
      eocd = i;
      break;
    }
  }
  if (eocd == tail.size()) throw bad("no zip end of central directory");
  uint64_t entries = le(&tail[eocd + 10], 2), cd_size = le(&tail[eocd + 12], 4),
           cd_offset = le(&tail[eocd + 16], 4);
  if (entries == 0xFFFF || cd_size == 0xFFFFFFFF || cd_offset == 0xFFFFFFFF) {  // zip64
    const uint64_t eocd_at = size - tail_len + eocd;
    uint8_t loc[20];
    if (eocd_at < 20 || in.read(eocd_at - 20, loc, 20) != 20 || le(loc, 4) != 0x07064b50)
      throw bad("no zip64 locator");
    const uint64_t z = le(loc + 8, 8);
    uint8_t rec[56];
    if (z > size - 56 || in.read(z, rec, 56) != 56 || le(rec, 4) != 0x06064b50)
      throw bad("no zip64 directory");
    entries = le(rec + 32, 8);
    cd_size = le(rec + 40, 8);
    cd_offset = le(rec + 48, 8);
  }
  if (cd_offset > size || cd_size > size - cd_offset || entries > cd_size / 46)
    throw bad("its central directory lies outside the file");
  std::vector<uint8_t> cd(static_cast<size_t>(cd_size));
  if (in.read(cd_offset, cd.data(), cd.size()) != cd.size())
    throw bad("cannot read its central directory");
  std::map<std::string, ZipRecord> out;
  size_t at = 0;
  for (uint64_t e = 0; e < entries; ++e) {
    if (cd.size() - at < 46 || le(&cd[at], 4) != 0x02014b50)
      throw bad("a broken central directory");
    ZipRecord r;
    r.method = static_cast<uint16_t>(le(&cd[at + 10], 2));
    r.compressed = le(&cd[at + 20], 4);
    r.size = le(&cd[at + 24], 4);
    const size_t name_len = le(&cd[at + 28], 2), extra_len = le(&cd[at + 30], 2),
                 comment_len = le(&cd[at + 32], 2);
    if (cd.size() - at - 46 < name_len + extra_len + comment_len)
      throw bad("a broken central directory");
    std::string name(reinterpret_cast<const char*>(&cd[at + 46]), name_len);
    // Zip64: the 64-bit sizes are in the extra field 0x0001, in this order.
    const uint8_t* x = &cd[at + 46 + name_len];
    for (size_t k = 0; k + 4 <= extra_len;) {
      const uint64_t id = le(x + k, 2), len = le(x + k + 2, 2);
      if (k + 4 + len > extra_len) break;
      if (id == 1) {
        size_t f = k + 4;
        if (r.size == 0xFFFFFFFF && f + 8 <= k + 4 + len) r.size = le(x + f, 8), f += 8;
        if (r.compressed == 0xFFFFFFFF && f + 8 <= k + 4 + len) r.compressed = le(x + f, 8);
      }
      k += 4 + len;
    }
    if (r.method == 0 && r.compressed != r.size)
      throw bad("stored record '" + name + "' with two sizes");
    const size_t slash = name.find('/');
    if (slash == std::string::npos) {
      // PyTorchStreamReader's own words for this are an internal check's; said here.
      const std::string which = name_problem(name).empty()
                                    ? "record '" + name + "'"
                                    : std::string("a record (its name cannot be shown)");
      throw CheckpointError(path + " is not a PyTorch checkpoint: in this zip archive, " + which +
                            " is not in a top folder, where torch.save puts every record "
                            "(archive/data.pkl, archive/version, ...)");
    }
    out[name.substr(slash + 1)] = r;
    at += 46 + name_len + extra_len + comment_len;
  }
  return out;
}

// Holds what the records declare against the file's size, before anything is inflated.
void check_declared_sizes(const std::map<std::string, ZipRecord>& records, uint64_t file_size,
                          const std::string& path) {
  uint64_t total = 0;
  for (const auto& [name, r] : records) {
    if (r.method != 0 && r.size > kSmallRecord && r.size / kMaxInflateRatio > r.compressed) {
      throw CheckpointError(path, "record '" + name + "' inflates " + std::to_string(r.compressed) +
                                      " bytes to " + std::to_string(r.size) + ", more than " +
                                      std::to_string(kMaxInflateRatio) +
                                      "x (a limit against zip bombs)");
    }
    if (__builtin_add_overflow(total, r.size, &total)) total = UINT64_MAX;
  }
  const uint64_t limit = std::max(kTotalFloor, kMaxTotalRatio * file_size);
  if (total > limit) {
    throw CheckpointError(path, "its records inflate to " + mb(total) + ", more than " + mb(limit) +
                                    " (" + std::to_string(kMaxTotalRatio) + "x the " +
                                    mb(file_size) + " file; a limit against zip bombs)");
  }
}

std::vector<uint8_t> record(caffe2::serialize::PyTorchStreamReader& zip, const FdAdapter& in,
                            const std::map<std::string, ZipRecord>& records,
                            const std::string& name, const std::string& path) {
  const auto it = records.find(name);
  if (it == records.end() || !zip.hasRecord(name))
    throw CheckpointError(path, "the archive has no record '" + name + "'");
  if (it->second.method == 0) {  // stored: read once, straight from the file
    const uint64_t offset = zip.getRecordOffset(name);
    std::vector<uint8_t> out(static_cast<size_t>(it->second.size));
    if (offset > in.size() || out.size() > in.size() - offset ||
        in.read(offset, out.data(), out.size()) != out.size())
      throw CheckpointError(path, "record '" + name + "' runs past the end of the file");
    return out;
  }
  auto [data, size] = zip.getRecord(name);
  const auto* p = static_cast<const uint8_t*>(data.get());
  return std::vector<uint8_t>(p, p + size);
}

}  // namespace

std::unique_ptr<Checkpoint> read_pt_checkpoint(const std::string& path) {
  int fd = -1;
  try {
    fd = open_regular_file(path);  // a FIFO or a device is refused, not waited on
  } catch (const FileError& e) {
    throw CheckpointError(e);
  }
  const off_t end = ::lseek(fd, 0, SEEK_END);
  auto in = std::make_shared<FdAdapter>(fd, end > 0 ? static_cast<uint64_t>(end) : 0);
  uint8_t head[2] = {0, 0};
  in->read(0, head, 2);
  // torch.save's legacy format (before PyTorch 1.6, or _use_new_zipfile_serialization=
  // False) is a bare pickle stream, not a zip archive.
  if (head[0] == 0x80) {  // pickle's PROTO opcode
    throw CheckpointError(path +
                          ": written in torch.save's legacy format (a bare pickle, not a "
                          "zip archive); save it again with torch.save(obj, path) from "
                          "PyTorch 1.6 or later");
  }
  std::vector<TensorToWrite> tensors;
  try {
    const std::map<std::string, ZipRecord> records = zip_directory(*in, path);
    // What every archive torch.save writes holds, looked for before LibTorch's reader,
    // whose messages are its internal checks'.
    for (const char* needed : {"data.pkl", "version"}) {
      if (records.count(needed) == 0) {
        throw CheckpointError(path + " is not a PyTorch checkpoint: a zip archive without the " +
                              needed + " record every torch.save archive has (archive/" + needed +
                              ")");
      }
    }
    check_declared_sizes(records, in->size(), path);
    caffe2::serialize::PyTorchStreamReader zip(in);
    if (zip.hasRecord("byteorder")) {
      const std::vector<uint8_t> order = record(zip, *in, records, "byteorder", path);
      if (std::string(order.begin(), order.end()) != "little")
        throw CheckpointError(
            path + ": written on a big-endian machine; the workbench reads little-endian files");
    }
    const std::vector<uint8_t> pkl = record(zip, *in, records, "data.pkl", path);
    tensors = read_torch_pickle(
        pkl.data(), pkl.size(),
        [&](const std::string& key) { return record(zip, *in, records, "data/" + key, path); },
        path);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {  // LibTorch's zip reader: c10::Error
    // Without the place of LibTorch's internal check ("[enforce fail at
    // inline_container.cc:129] . ") and its plea for a better message.
    std::string why = first_line(e.what());
    if (why.rfind("[enforce fail at ", 0) == 0 && why.find("] ") != std::string::npos)
      why = why.substr(why.find("] ") + 2);
    if (why.rfind(". ", 0) == 0) why = why.substr(2);
    if (const size_t plea = why.find("  (Could this error message be improved?");
        plea != std::string::npos)
      why = why.substr(0, plea);
    throw CheckpointError(
        path + " is not a PyTorch checkpoint: LibTorch's zip reader refused it (" + why + ")");
  }
  if (tensors.empty()) throw CheckpointError(path, "holds no tensors");
  return Checkpoint::from_image(safetensors_image(tensors), path);
}

}  // namespace fp8wb
