// libFuzzer target: any bytes given to the safetensors parser either parse into tensors
// whose byte ranges lie inside the input, or give a CheckpointError; never a crash.
#include <cstddef>
#include <cstdint>

#include "fp8wb/core/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    const fp8wb::SafetensorsFile f(data, size, "fuzz-input");
    for (const fp8wb::TensorEntry& t : f.tensors()) {
      if (t.end > t.begin) {
        // First and last byte of each tensor: AddressSanitizer checks they are in range.
        volatile uint8_t first = f.data(t)[0];
        volatile uint8_t last = f.data(t)[t.end - t.begin - 1];
        (void)first;
        (void)last;
      }
    }
  } catch (const fp8wb::CheckpointError&) {
  }
  return 0;
}
