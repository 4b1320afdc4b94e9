// defines: open_any_checkpoint(), models_in_subfolders(): a checkpoint by its file: safetensors
// (one file or a sharded *.index.json) or a PyTorch state dict (.pt/.pth/.bin, the zip archives
// torch.save writes, read with LibTorch's pickle loader). Plain interface, no torch.
#pragma once

#include <memory>
#include <string>

#include "fp8wb/core/checkpoint/safetensors.h"

namespace fp8wb {

// Throws CheckpointError naming the file and the problem.
std::unique_ptr<Checkpoint> open_any_checkpoint(const std::string& path);

// Where `dir` is a folder of model folders: "DIR holds no checkpoint itself, but these 2
// subfolders do: DIR/a, DIR/b; give one of them" (the subfolders, one level down, that
// hold a checkpoint, as `fp8wb inspect DIR` names them); empty where none does.
std::string models_in_subfolders(const std::string& dir);

}  // namespace fp8wb
