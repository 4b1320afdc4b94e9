// read_torch_pickle() (torch_pickle.h): data.pkl run through the restricted unpickler
// (torch_pickle_vm.h), then every tensor reachable from its root collected under its path,
// each view gathered from its storage into contiguous bytes, within bounds on nesting,
// visits and the bytes the tensors add up to.
#include "fp8wb/core/checkpoint/torch_pickle.h"

#include <cstring>
#include <set>
#include <utility>

#include "torch_pickle_vm.h"

namespace fp8wb {
namespace {

using pickle::Kind;
using pickle::TensorView;
using pickle::Unpickler;
using pickle::V;
using pickle::Value;

constexpr int kMaxDepth = 64;
// The tensors may add up to at most 4x their storages (tied weights list a storage
// twice), plus this much.
constexpr uint64_t kSlackBytes = uint64_t{16} << 20;

std::string key_name(const Value& k, size_t index) {
  switch (k.kind) {
    case Kind::Str: return k.s;
    case Kind::Int: return std::to_string(k.i);
    case Kind::Bool: return k.i ? "True" : "False";
    default: return "?" + std::to_string(index);
  }
}

class Collector {
 public:
  // Shared objects are walked once per path to them: the visits and the bytes copied are
  // bounded, against files that nest one list in itself many times over.
  Collector(const Unpickler& u, const std::string& label, uint64_t max_bytes)
      : u_(u), label_(label), max_bytes_(max_bytes) {}

  void walk(const V& v, const std::string& prefix, int depth) {
    if (++visits_ > (1u << 22))
      throw CheckpointError(
          label_ +
          ": more than 4M objects to visit: a file of shared objects nested in themselves");
    if (depth > kMaxDepth)
      throw CheckpointError(label_, "objects nested deeper than " + std::to_string(kMaxDepth) +
                                        " levels (at '" + prefix + "')");
    auto join = [&](const std::string& k) { return prefix.empty() ? k : prefix + "." + k; };
    switch (v->kind) {
      case Kind::Tensor: emit(*v, prefix); break;
      case Kind::Dict:
        for (size_t i = 0; i < v->entries.size(); ++i)
          walk(v->entries[i].second, join(key_name(*v->entries[i].first, i)), depth + 1);
        break;
      case Kind::List:
      case Kind::Tuple:
        for (size_t i = 0; i < v->items.size(); ++i)
          walk(v->items[i], join(std::to_string(i)), depth + 1);
        break;
      case Kind::Object:
        // An nn.Module's state: its _parameters, _buffers and _modules add no name.
        for (const V& state : v->items) {
          if (state->kind != Kind::Dict) {
            walk(state, prefix, depth + 1);
            continue;
          }
          for (size_t i = 0; i < state->entries.size(); ++i) {
            const std::string k = key_name(*state->entries[i].first, i);
            const bool silent = k == "_parameters" || k == "_buffers" || k == "_modules";
            walk(state->entries[i].second, silent ? prefix : join(k), depth + 1);
          }
        }
        break;
      default: break;  // numbers, strings, None: not tensors
    }
  }

  std::vector<TensorToWrite> out;

 private:
  void emit(const Value& v, const std::string& name) {
    const TensorView& t = *v.tensor;
    if (!t.unsupported.empty())
      throw CheckpointError(label_, "tensor '" + name + "' has dtype " + t.unsupported +
                                        ", which the workbench does not read");
    const uint64_t esize = st_dtype_size(t.dtype);
    bytes_ += t.numel * esize;  // numel <= 2^48: no overflow
    if (bytes_ > max_bytes_)
      throw CheckpointError(label_, "its tensors add up to more than " +
                                        std::to_string(max_bytes_) +
                                        " bytes, several times what its storages hold");
    std::string unique = name.empty() ? "tensor" : name;
    for (int k = 2; !names_.insert(unique).second; ++k) unique = name + "~" + std::to_string(k);
    TensorToWrite& out_t = out.emplace_back();
    out_t.name = unique;
    out_t.dtype = t.dtype;
    out_t.shape = t.shape;
    out_t.bytes.resize(static_cast<size_t>(t.numel * esize));
    if (t.numel == 0) return;
    // Gather the view in row-major order (a plain copy when it is contiguous); rebuild()
    // checked that it lies inside its storage.
    const std::vector<int64_t>& shape = t.shape;
    const std::vector<int64_t>& stride = t.stride;
    std::vector<int64_t> contiguous(shape.size(), 1);
    for (size_t d = shape.size(); d-- > 1;) contiguous[d - 1] = contiguous[d] * shape[d];
    bool is_contiguous = true;
    for (size_t d = 0; d < shape.size(); ++d)
      is_contiguous &= shape[d] == 1 || stride[d] == contiguous[d];
    const uint8_t* src = u_.storage(t.key).data();
    uint8_t* dst = out_t.bytes.data();
    if (is_contiguous) {
      std::memcpy(dst, src + t.offset * esize, static_cast<size_t>(t.numel * esize));
      return;
    }
    std::vector<int64_t> idx(shape.size(), 0);
    for (uint64_t k = 0; k < t.numel; ++k) {
      uint64_t at = t.offset;
      for (size_t d = 0; d < shape.size(); ++d) at += static_cast<uint64_t>(idx[d] * stride[d]);
      std::memcpy(dst + k * esize, src + at * esize, static_cast<size_t>(esize));
      for (size_t d = shape.size(); d-- > 0;) {
        if (++idx[d] < shape[d]) break;
        idx[d] = 0;
      }
    }
  }

  const Unpickler& u_;
  const std::string& label_;
  uint64_t max_bytes_;
  uint64_t visits_ = 0, bytes_ = 0;
  std::set<std::string> names_;
};

}  // namespace

std::vector<TensorToWrite> read_torch_pickle(const uint8_t* data, size_t size,
                                             const StorageFetcher& fetch,
                                             const std::string& label) {
  Unpickler u(data, size, fetch, label);
  const V root = u.run();
  // Tied weights list the same storage twice; more than 4x is not a state dict.
  Collector c(u, label, 4 * u.storage_total() + kSlackBytes);
  c.walk(root, "", 0);
  return std::move(c.out);
}

}  // namespace fp8wb
