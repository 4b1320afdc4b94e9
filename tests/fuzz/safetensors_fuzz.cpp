// libFuzzer target: any bytes given to the safetensors parser either parse into tensors
// whose byte ranges lie inside the input (or, cut off by the input's end, are never
// read), hold exactly shape x dtype bytes (computed here without wrapping) and share no
// byte, or give a CheckpointError; never a crash.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>

#include "fp8wb/core/checkpoint/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const fp8wb::SafetensorsFile f(data, size, "fuzz-input");
    std::set<std::string> names;
    for (const fp8wb::TensorEntry& t : f.tensors()) {
      if (!names.insert(t.name).second) std::abort();  // a name given twice
      unsigned __int128 bytes = fp8wb::st_dtype_size(t.dtype);
      for (int64_t d : t.shape) {
        if (d < 0) std::abort();
        bytes *= static_cast<uint64_t>(d);
        // Capped (no wrap in 128 bits either) above what the reader accepts (2^62 bytes),
        // not at the input's size: a tensor cut off by the input's end claims more.
        if (bytes > (static_cast<unsigned __int128>(1) << 63))
          bytes = (static_cast<unsigned __int128>(1) << 63) + 1;
      }
      if (bytes != t.end - t.begin) std::abort();  // e.g. 4 x 2^62 taken for 0
      if (t.cut_off) {
        // A tensor whose bytes run past the input's end is listed and never read.
        try {
          (void)f.bytes(t);
          std::abort();
        } catch (const fp8wb::TensorValueError&) {
        }
      } else if (t.end > t.begin) {
        // Each tensor's bytes read from the file (sizes checked against it above): all of
        // them there, none past the file's end.
        if (f.bytes(t).size() != t.end - t.begin) std::abort();
      }
      for (const fp8wb::TensorEntry& u : f.tensors()) {
        if (&u != &t && u.end > u.begin && t.end > t.begin && u.begin < t.end && t.begin < u.end)
          std::abort();  // two tensors share bytes
      }
    }
  } catch (const fp8wb::CheckpointError&) {
  }
  return 0;
}
