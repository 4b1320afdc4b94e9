// What the restricted unpickler makes of torch.save's persistent ids and of the
// callables it knows (REDUCE): storages, OrderedDict and dict, tuples, lists and sets,
// torch.Size, the tensor and parameter rebuilders, LibTorch's type tags; anything else
// stays an inert object. A tensor is a view of its storage, checked against the storage's
// bytes here and gathered only when it is collected (torch_pickle.cpp).
#include <map>

#include "torch_pickle_vm.h"

namespace fp8wb::pickle {
namespace {

std::optional<StDtype> storage_dtype(const std::string& type) {
  static const std::map<std::string, StDtype> m = {
      {"torch.DoubleStorage", StDtype::F64}, {"torch.FloatStorage", StDtype::F32},
      {"torch.HalfStorage", StDtype::F16},   {"torch.BFloat16Storage", StDtype::BF16},
      {"torch.LongStorage", StDtype::I64},   {"torch.IntStorage", StDtype::I32},
      {"torch.ShortStorage", StDtype::I16},  {"torch.CharStorage", StDtype::I8},
      {"torch.ByteStorage", StDtype::U8},    {"torch.BoolStorage", StDtype::BOOL}};
  const auto it = m.find(type);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

std::optional<StDtype> torch_dtype(const std::string& name) {
  static const std::map<std::string, StDtype> m = {{"torch.float64", StDtype::F64},
                                                   {"torch.double", StDtype::F64},
                                                   {"torch.float32", StDtype::F32},
                                                   {"torch.float", StDtype::F32},
                                                   {"torch.float16", StDtype::F16},
                                                   {"torch.half", StDtype::F16},
                                                   {"torch.bfloat16", StDtype::BF16},
                                                   {"torch.int64", StDtype::I64},
                                                   {"torch.long", StDtype::I64},
                                                   {"torch.int32", StDtype::I32},
                                                   {"torch.int", StDtype::I32},
                                                   {"torch.int16", StDtype::I16},
                                                   {"torch.short", StDtype::I16},
                                                   {"torch.int8", StDtype::I8},
                                                   {"torch.uint8", StDtype::U8},
                                                   {"torch.bool", StDtype::BOOL},
                                                   {"torch.float8_e4m3fn", StDtype::F8_E4M3},
                                                   {"torch.float8_e5m2", StDtype::F8_E5M2}};
  const auto it = m.find(name);
  if (it == m.end()) return std::nullopt;
  return it->second;
}

}  // namespace

// ('storage', torch.FloatStorage, key, location, numel)
V Unpickler::persistent(const V& pid) {
  if (pid->kind != Kind::Tuple || pid->items.size() < 5 || pid->items[0]->kind != Kind::Str ||
      pid->items[0]->s != "storage" || pid->items[1]->kind != Kind::Global ||
      pid->items[2]->kind != Kind::Str || pid->items[4]->kind != Kind::Int)
    fail("a persistent id that is not torch.save's ('storage', type, key, location, numel)");
  V v = make(Kind::Storage);
  v->storage = std::make_unique<Storage>();
  Storage& st = *v->storage;
  st.type = pid->items[1]->s;
  st.key = pid->items[2]->s;
  st.numel = pid->items[4]->i;
  st.dtype = storage_dtype(st.type);
  if (st.numel < 0) fail("storage '" + st.key + "' has a negative size");
  return v;
}

V Unpickler::reduce(const V& fn, const V& args) {
  if (fn->kind != Kind::Global) fail("REDUCE of something that is not a global");
  if (args->kind != Kind::Tuple) fail("REDUCE of " + fn->s + " without an argument tuple");
  const std::vector<V>& a = args->items;
  const std::string& f = fn->s;
  if (f == "collections.OrderedDict" || f == "builtins.dict") {
    V d = make(Kind::Dict);
    if (!a.empty() && a[0]->kind == Kind::List) {  // OrderedDict([(k, v), ...])
      for (const V& kv : a[0]->items) {
        if (kv->kind != Kind::Tuple || kv->items.size() != 2)
          fail(f + " of something that is not (key, value) pairs");
        d->entries.emplace_back(kv->items[0], kv->items[1]);
      }
    }
    return d;
  }
  if (f == "torch._utils._rebuild_tensor_v2" || f == "torch._utils._rebuild_tensor") {
    if (a.size() < 4) fail(f + " with " + std::to_string(a.size()) + " arguments");
    return rebuild(a[0], a[1], a[2], a[3], nullptr);
  }
  if (f == "torch._utils._rebuild_tensor_v3") {
    if (a.size() < 7) fail(f + " with " + std::to_string(a.size()) + " arguments");
    return rebuild(a[0], a[1], a[2], a[3], a[6]);
  }
  // What LibTorch's torch::pickle_save writes around typed containers.
  if (f == "torch.jit._pickle.restore_type_tag" && !a.empty()) return a[0];
  if (f.rfind("torch.jit._pickle.build_", 0) == 0 && !a.empty() && a[0]->kind == Kind::List)
    return a[0];
  if (f == "torch._utils._rebuild_parameter" || f == "torch._utils._rebuild_parameter_with_state") {
    if (a.empty()) fail(f + " without its data");
    return a[0];
  }
  if (f == "torch.Size" || f == "builtins.tuple")
    return tuple(a.empty() || a[0]->kind != Kind::Tuple ? std::vector<V>{} : a[0]->items);
  if (f == "builtins.set" || f == "builtins.frozenset" || f == "builtins.list") {
    V l = make(Kind::List);
    if (!a.empty() && (a[0]->kind == Kind::List || a[0]->kind == Kind::Tuple))
      l->items = a[0]->items;
    return l;
  }
  // Anything else is never called: an inert object (its state may hold tensors).
  return make_str(Kind::Object, f);
}

std::vector<int64_t> Unpickler::ints(const V& t, const char* what) {
  if (t->kind != Kind::Tuple && t->kind != Kind::List)
    fail(std::string("a tensor whose ") + what + " is not a tuple");
  std::vector<int64_t> out;
  for (const V& x : t->items) {
    if (x->kind != Kind::Int || x->i < 0)
      fail(std::string("a tensor whose ") + what + " holds something other than sizes >= 0");
    out.push_back(x->i);
  }
  return out;
}

const std::vector<uint8_t>& Unpickler::storage_bytes(const std::string& key) {
  auto it = storages_.find(key);
  if (it == storages_.end()) it = storages_.emplace(key, fetch_(key)).first;
  return it->second;
}

V Unpickler::rebuild(const V& storage, const V& offset_v, const V& size_v, const V& stride_v,
                     const V& dtype_v) {
  if (storage->kind != Kind::Storage) fail("a tensor rebuilt from something that is not a storage");
  if (offset_v->kind != Kind::Int || offset_v->i < 0) fail("a tensor with a bad storage offset");
  const Storage& st = *storage->storage;
  V t = make(Kind::Tensor);
  t->tensor = std::make_unique<TensorView>();
  TensorView& view = *t->tensor;
  std::optional<StDtype> dtype = st.dtype;
  std::string dtype_name = st.type;
  if (dtype_v) {
    if (dtype_v->kind != Kind::Global)
      fail("_rebuild_tensor_v3 with a dtype that is not a torch dtype");
    dtype = torch_dtype(dtype_v->s);
    dtype_name = dtype_v->s;
  }
  if (!dtype) {
    view.unsupported = dtype_name;
    return t;
  }
  const std::vector<int64_t> shape = ints(size_v, "size");
  const std::vector<int64_t> stride = ints(stride_v, "stride");
  if (shape.size() != stride.size())
    fail("a tensor with " + std::to_string(shape.size()) + " sizes and " +
         std::to_string(stride.size()) + " strides");
  const uint64_t esize = st_dtype_size(*dtype);
  // The storage's bytes: typed storages count elements, untyped ones bytes. Every size
  // below is overflow-checked.
  if (static_cast<uint64_t>(st.numel) > (uint64_t{1} << 48))
    fail("storage '" + st.key + "' claims " + std::to_string(st.numel) + " elements");
  const uint64_t want =
      st.dtype ? static_cast<uint64_t>(st.numel) * esize : static_cast<uint64_t>(st.numel);
  const std::vector<uint8_t>& bytes = storage_bytes(st.key);
  if (bytes.size() < want)
    fail("storage '" + st.key + "' holds " + std::to_string(bytes.size()) +
         " bytes, the file says " + std::to_string(want));
  const uint64_t elems = want / esize;
  uint64_t numel = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (__builtin_mul_overflow(numel, static_cast<uint64_t>(shape[d]), &numel) ||
        numel > (uint64_t{1} << 48))
      fail("a tensor with more than 2^48 elements");
  }
  const auto offset = static_cast<uint64_t>(offset_v->i);
  if (numel > 0) {
    // A view may not hold more elements than its storage: zero strides (expand(),
    // broadcasting) would turn a few bytes into gigabytes.
    if (numel > elems) {
      fail("a tensor view of " + std::to_string(numel) + " elements expands storage '" + st.key +
           "' of " + std::to_string(elems) +
           " (the reader takes views no larger than their storage)");
    }
    uint64_t last = offset;
    for (size_t d = 0; d < shape.size(); ++d) {
      uint64_t reach = 0;
      if (__builtin_mul_overflow(static_cast<uint64_t>(shape[d] - 1),
                                 static_cast<uint64_t>(stride[d]), &reach) ||
          __builtin_add_overflow(last, reach, &last))
        fail("a tensor view far beyond its storage");
    }
    if (last >= elems)
      fail("a tensor view of storage '" + st.key + "' ends at element " + std::to_string(last) +
           ", beyond its " + std::to_string(elems));
  }
  view.key = st.key;
  view.dtype = *dtype;
  view.offset = offset;
  view.shape = shape;
  view.stride = stride;
  view.numel = numel;
  return t;
}

}  // namespace fp8wb::pickle
