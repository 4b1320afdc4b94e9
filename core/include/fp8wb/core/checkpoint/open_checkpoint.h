// defines: open_any_checkpoint(): a checkpoint by its file: safetensors (one file or a
// sharded *.index.json) or a PyTorch state dict (.pt/.pth/.bin, the zip archives
// torch.save writes, read with LibTorch's pickle loader). Plain interface, no torch.
#pragma once

#include <memory>
#include <string>

#include "fp8wb/core/checkpoint/safetensors.h"

namespace fp8wb {

// Throws CheckpointError naming the file and the problem.
std::unique_ptr<Checkpoint> open_any_checkpoint(const std::string& path);

}  // namespace fp8wb
