// defines: read_pt_checkpoint(): a PyTorch file (.pt/.pth/.bin, the zip archive
// torch.save writes) as a checkpoint. Plain interface; the reader is a torch translation
// unit (pt_reader.cpp). open_any_checkpoint() (open_checkpoint.cpp) picks it by the name.
#pragma once

#include <memory>
#include <string>

#include "fp8wb/core/checkpoint/safetensors.h"

namespace fp8wb {

// Throws CheckpointError naming the file and the problem: not a regular file, torch.save's
// legacy format, a big-endian file, zip bombs, a broken archive or pickle, no tensors.
std::unique_ptr<Checkpoint> read_pt_checkpoint(const std::string& path);

}  // namespace fp8wb
