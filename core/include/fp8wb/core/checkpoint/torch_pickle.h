// defines: StorageFetcher, read_torch_pickle(): the tensors of a torch.save archive's
// data.pkl, through a restricted unpickler. Like PyTorch's own weights_only loader it
// runs no code: it knows the few callables a state dict is made of (OrderedDict, the
// tensor and parameter rebuilders, torch.Size) and keeps anything else as an inert
// object whose pickled state is still searched for tensors (a whole nn.Module saved with
// torch.save(model) lists its parameters under their module names). No torch: the
// fuzzers build it alone; the zip container is read by LibTorch (pt_reader.cpp).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "fp8wb/core/checkpoint/safetensors.h"

namespace fp8wb {

// The bytes of the archive's record data/<key> (a storage); throws CheckpointError when
// there is no such record.
using StorageFetcher = std::function<std::vector<uint8_t>(const std::string& key)>;

// Every tensor reachable from the pickled object, named by its path (dict keys and list
// indices joined with '.'), contiguous, in the order met. Throws CheckpointError naming
// `label` and the byte offset in data.pkl (bad opcodes, truncation, a view beyond its
// storage or with more elements than it, an unsupported dtype with the tensor's name,
// nesting deeper than 64), or the limit hit: more than 2M objects, tensors adding up to
// more than 4x their storages.
std::vector<TensorToWrite> read_torch_pickle(const uint8_t* data, size_t size,
                                             const StorageFetcher& fetch, const std::string& label);

}  // namespace fp8wb
