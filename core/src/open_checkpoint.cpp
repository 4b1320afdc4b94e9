// open_any_checkpoint(): which reader a checkpoint file goes to. A new checkpoint format
// is one more branch here and a reader of its own.
#include "fp8wb/core/open_checkpoint.h"

#include "pt_reader.h"

namespace fp8wb {
namespace {

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

}  // namespace

std::unique_ptr<Checkpoint> open_any_checkpoint(const std::string& path) {
  // PyTorch files: torch.save's zip archive (pt_reader.cpp).
  if (has_suffix(path, ".pt") || has_suffix(path, ".pth") || has_suffix(path, ".bin"))
    return read_pt_checkpoint(path);
  // Everything else: one safetensors file or a sharded *.index.json (safetensors.cpp).
  return Checkpoint::open(path);
}

}  // namespace fp8wb
