// defines: the restricted unpickler's object model (Value: what an opcode builds, a
// Storage that torch.save's persistent ids name, a TensorView of one) and its machine
// (Unpickler), which torch_pickle's files share (torch_pickle_vm.cpp: the stream, the
// stack and the opcodes; torch_pickle_rebuild.cpp: what a persistent id and the known
// callables become, storages and tensor views checked against their bytes;
// torch_pickle.cpp: read_torch_pickle(), the tensors collected by name). No torch.
// Internal to core.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "fp8wb/core/checkpoint/torch_pickle.h"

namespace fp8wb::pickle {

// Every opcode may build a value (about 150 bytes each): a few KB of compressed pickle
// could otherwise ask for gigabytes. A state dict needs a few dozen values per tensor.
constexpr uint64_t kMaxObjects = uint64_t{2} << 20;

struct Value;
using V = std::shared_ptr<Value>;

enum class Kind {
  None,
  Bool,
  Int,
  Float,
  Str,
  Bytes,
  Tuple,
  List,
  Dict,
  Global,
  Storage,
  Tensor,
  Object
};

struct Storage {
  std::string key;
  std::optional<StDtype> dtype;  // empty: untyped (the dtype comes with the tensor)
  std::string type;              // torch.FloatStorage, torch.storage.UntypedStorage, ...
  int64_t numel = 0;             // elements (typed) or bytes (untyped), as the file says
};

// A tensor as rebuilt: a view of a storage, gathered only when it is collected (a
// tensor that nothing refers to, or one refused, never costs its bytes).
struct TensorView {
  std::string key;  // its storage
  StDtype dtype = StDtype::F32;
  uint64_t offset = 0;  // elements
  std::vector<int64_t> shape, stride;
  uint64_t numel = 0;
  std::string unsupported;  // a dtype the workbench does not read
};

struct Value {
  Kind kind = Kind::None;
  int64_t i = 0;
  double f = 0;
  std::string s;                         // Str, Bytes, Global (module.name), Object (its class)
  std::vector<V> items;                  // Tuple, List; Object: its BUILD state, if any
  std::vector<std::pair<V, V>> entries;  // Dict
  std::unique_ptr<Storage> storage;      // Storage
  std::unique_ptr<TensorView> tensor;    // Tensor
};

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, const StorageFetcher& fetch, std::string label)
      : p_(data), n_(size), fetch_(fetch), label_(std::move(label)) {}
  // Every value lives in all_; their links are cut first, so that neither a cycle (a list
  // holding itself) nor a million nested lists outlives or recurses in destruction.
  ~Unpickler();
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  uint64_t storage_total() const {
    uint64_t t = 0;
    for (const auto& kv : storages_) t += kv.second.size();
    return t;
  }
  const std::vector<uint8_t>& storage(const std::string& key) const { return storages_.at(key); }

  V run();

  [[noreturn]] void fail(const std::string& what) const;

 private:
  // Building values (torch_pickle_vm.cpp).
  V make(Kind k);
  V make_int(int64_t i);
  V make_str(Kind k, std::string s);

  // Reading the stream.
  uint8_t byte();
  const uint8_t* take(uint64_t k);
  uint64_t le(int bytes);
  std::string line();
  std::string str(uint64_t len);

  // The stack.
  V pop();
  V& top();
  std::vector<V> pop_mark();
  void push(V v) { stack_.push_back(std::move(v)); }
  V tuple(std::vector<V> items);
  void memo_put(uint64_t key) { memo_[key] = top(); }
  V memo_get(uint64_t key);
  void set_items(V& dict, const std::vector<V>& kv);
  void append(V& list, const std::vector<V>& items);

  void step(uint8_t op);

  // What persistent ids and REDUCE become (torch_pickle_rebuild.cpp).
  V persistent(const V& pid);
  V reduce(const V& fn, const V& args);
  std::vector<int64_t> ints(const V& t, const char* what);
  const std::vector<uint8_t>& storage_bytes(const std::string& key);
  V rebuild(const V& storage, const V& offset_v, const V& size_v, const V& stride_v,
            const V& dtype_v);

  const uint8_t* p_;
  size_t n_;
  size_t pos_ = 0, op_at_ = 0;
  const StorageFetcher& fetch_;
  std::string label_;
  std::vector<V> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, V> memo_;
  std::map<std::string, std::vector<uint8_t>> storages_;
  std::vector<V> all_;
};

}  // namespace fp8wb::pickle
