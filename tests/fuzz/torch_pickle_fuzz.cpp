// libFuzzer target: any bytes given to the restricted unpickler as a torch.save data.pkl
// (with storages "0".."63" of 4096 bytes each in the archive, enough for the seeds taken
// from tests/data/pt) either give
// tensors whose bytes match their dtype and shape, or a CheckpointError; never a crash,
// a leak or an unbounded allocation.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "fp8wb/core/checkpoint/torch_pickle.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto fetch = [](const std::string& key) {
    const bool numeric =
        !key.empty() && key.size() <= 2 && key.find_first_not_of("0123456789") == std::string::npos;
    if (numeric && std::stoi(key) < 64) {
      std::vector<uint8_t> bytes(4096);
      for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 37);
      return bytes;
    }
    throw fp8wb::CheckpointError("no record data/" + key);
  };
  try {
    for (const fp8wb::TensorToWrite& t : fp8wb::read_torch_pickle(data, size, fetch, "fuzz.pt")) {
      size_t numel = 1;
      for (int64_t d : t.shape) numel *= static_cast<size_t>(d);
      if (t.bytes.size() != numel * fp8wb::st_dtype_size(t.dtype)) std::abort();
    }
  } catch (const fp8wb::CheckpointError&) {
  }
  return 0;
}
