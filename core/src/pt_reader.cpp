// Torch translation unit: PyTorch state dicts (.pt/.pth/.bin) as checkpoints. LibTorch's
// pickle loader reads the zip archive torch.save writes; the tensors (nested dicts
// flattened to dotted names) become a safetensors image, which the rest of the workbench
// reads like any other checkpoint.
#include <torch/serialize.h>

#include <fstream>
#include <iterator>

#include "fp8wb/core/open_checkpoint.h"

namespace fp8wb {
namespace {

bool has_suffix(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool st_dtype_of(const at::Tensor& t, StDtype& d) {
  switch (t.scalar_type()) {
    case at::kDouble: d = StDtype::F64; return true;
    case at::kFloat: d = StDtype::F32; return true;
    case at::kHalf: d = StDtype::F16; return true;
    case at::kBFloat16: d = StDtype::BF16; return true;
    case at::kLong: d = StDtype::I64; return true;
    case at::kInt: d = StDtype::I32; return true;
    case at::kShort: d = StDtype::I16; return true;
    case at::kChar: d = StDtype::I8; return true;
    case at::kByte: d = StDtype::U8; return true;
    case at::kBool: d = StDtype::BOOL; return true;
    default: break;
  }
  // float8 dtypes exist from LibTorch 2.1 on; matched by name so that 1.13 builds too.
  const std::string n = c10::toString(t.scalar_type());
  if (n == "Float8_e4m3fn") {
    d = StDtype::F8_E4M3;
    return true;
  }
  if (n == "Float8_e5m2") {
    d = StDtype::F8_E5M2;
    return true;
  }
  return false;
}

void collect(const c10::IValue& v, const std::string& prefix, std::vector<TensorToWrite>& out,
             const std::string& path) {
  if (v.isTensor()) {
    const at::Tensor t = v.toTensor().detach().to(at::kCPU).contiguous();
    TensorToWrite w;
    w.name = prefix;
    if (!st_dtype_of(t, w.dtype)) {
      throw CheckpointError(path + ": tensor '" + prefix + "' has dtype " +
                            c10::toString(t.scalar_type()) + ", which the workbench does not read");
    }
    w.shape = t.sizes().vec();
    const auto* p = static_cast<const uint8_t*>(t.data_ptr());
    w.bytes.assign(p, p + t.numel() * static_cast<int64_t>(t.element_size()));
    out.push_back(std::move(w));
  } else if (v.isGenericDict()) {
    for (const auto& kv : v.toGenericDict()) {
      // String keys (state dicts) and integer keys (an optimizer's per-parameter state).
      const std::string key = kv.key().isString() ? kv.key().toStringRef()
                              : kv.key().isInt()  ? std::to_string(kv.key().toInt())
                                                  : kv.key().tagKind() + std::string("?");
      collect(kv.value(), prefix.empty() ? key : prefix + "." + key, out, path);
    }
  } else if (v.isList() || v.isTuple()) {
    const auto items = v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
    for (size_t i = 0; i < items.size(); ++i)
      collect(items[i], prefix + (prefix.empty() ? "" : ".") + std::to_string(i), out, path);
  }
  // Other values (numbers, strings: optimizer settings, epochs) are not tensors: skipped.
}

}  // namespace

std::unique_ptr<Checkpoint> open_any_checkpoint(const std::string& path) {
  if (!(has_suffix(path, ".pt") || has_suffix(path, ".pth") || has_suffix(path, ".bin")))
    return Checkpoint::open(path);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw CheckpointError("cannot open " + path);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // torch.save's legacy format (before PyTorch 1.6, or _use_new_zipfile_serialization=
  // False) is a bare pickle stream, not a zip archive: LibTorch does not read it.
  if (!bytes.empty() && static_cast<unsigned char>(bytes[0]) == 0x80) {  // pickle's PROTO opcode
    throw CheckpointError(path + ": written in torch.save's legacy format (a bare pickle, not a "
                                 "zip archive); save it again with torch.save(obj, path) from "
                                 "PyTorch 1.6 or later");
  }
  c10::IValue v;
  try {
    v = torch::pickle_load(bytes);
  } catch (const std::exception& e) {
    std::string what = e.what();
    what = what.substr(0, what.find('\n'));
    throw CheckpointError(path + ": not a state dict torch.save wrote (" + what + ")");
  }
  std::vector<TensorToWrite> tensors;
  collect(v, "", tensors, path);
  if (tensors.empty()) throw CheckpointError(path + ": holds no tensors");
  return Checkpoint::from_image(safetensors_image(tensors), path);
}

}  // namespace fp8wb
