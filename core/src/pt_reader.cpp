// Torch translation unit: PyTorch files (.pt/.pth/.bin) as checkpoints. LibTorch's stream
// reader opens the zip archive torch.save writes; its data.pkl goes through the
// workbench's restricted unpickler (torch_pickle.h: LibTorch's own unpickler reads
// neither the OrderedDict of a state dict nor float8 tensors), and the tensors become a
// safetensors image, which the rest of the workbench reads like any other checkpoint.
#include <caffe2/serialize/inline_container.h>

#include <cstring>
#include <fstream>

#include "fp8wb/core/open_checkpoint.h"
#include "fp8wb/core/torch_pickle.h"

namespace fp8wb {
namespace {

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

std::vector<uint8_t> record(caffe2::serialize::PyTorchStreamReader& zip, const std::string& name,
                            const std::string& path) {
  if (!zip.hasRecord(name)) throw CheckpointError(path + ": the archive has no record '" + name + "'");
  auto [data, size] = zip.getRecord(name);
  const auto* p = static_cast<const uint8_t*>(data.get());
  return std::vector<uint8_t>(p, p + size);
}

}  // namespace

std::unique_ptr<Checkpoint> open_any_checkpoint(const std::string& path) {
  if (!(has_suffix(path, ".pt") || has_suffix(path, ".pth") || has_suffix(path, ".bin")))
    return Checkpoint::open(path);
  char head[2] = {0, 0};
  {
    std::ifstream in(path, std::ios::binary);
    if (!in) throw CheckpointError("cannot open " + path + ": " + std::strerror(errno));
    in.read(head, 2);
  }
  // torch.save's legacy format (before PyTorch 1.6, or _use_new_zipfile_serialization=
  // False) is a bare pickle stream, not a zip archive.
  if (static_cast<unsigned char>(head[0]) == 0x80) {  // pickle's PROTO opcode
    throw CheckpointError(path + ": written in torch.save's legacy format (a bare pickle, not a "
                                 "zip archive); save it again with torch.save(obj, path) from "
                                 "PyTorch 1.6 or later");
  }
  std::vector<TensorToWrite> tensors;
  try {
    caffe2::serialize::PyTorchStreamReader zip(path);
    if (zip.hasRecord("byteorder")) {
      const std::vector<uint8_t> order = record(zip, "byteorder", path);
      if (std::string(order.begin(), order.end()) != "little")
        throw CheckpointError(path + ": written on a big-endian machine; the workbench reads little-endian files");
    }
    const std::vector<uint8_t> pkl = record(zip, "data.pkl", path);
    tensors = read_torch_pickle(
        pkl.data(), pkl.size(), [&](const std::string& key) { return record(zip, "data/" + key, path); },
        path);
  } catch (const CheckpointError&) {
    throw;
  } catch (const std::exception& e) {  // LibTorch's zip reader: c10::Error
    throw CheckpointError(path + ": not an archive torch.save wrote (" + first_line(e.what()) + ")");
  }
  if (tensors.empty()) throw CheckpointError(path + ": holds no tensors");
  return Checkpoint::from_image(safetensors_image(tensors), path);
}

}  // namespace fp8wb
