#include "fp8wb/core/torch_pickle.h"

#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <utility>

namespace fp8wb {
namespace {

constexpr int kMaxDepth = 64;
// Every opcode may build a value (about 150 bytes each): a few KB of compressed pickle
// could otherwise ask for gigabytes. A state dict needs a few dozen values per tensor.
constexpr uint64_t kMaxObjects = uint64_t{2} << 20;
// The tensors may add up to at most 4x their storages (tied weights list a storage
// twice), plus this much.
constexpr uint64_t kSlackBytes = uint64_t{16} << 20;

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

class Unpickler {
 public:
  Unpickler(const uint8_t* data, size_t size, const StorageFetcher& fetch, std::string label)
      : p_(data), n_(size), fetch_(fetch), label_(std::move(label)) {}
  // Every value lives in all_; their links are cut first, so that neither a cycle (a list
  // holding itself) nor a million nested lists outlives or recurses in destruction.
  ~Unpickler() {
    for (const V& v : all_) {
      v->items.clear();
      v->entries.clear();
    }
  }
  Unpickler(const Unpickler&) = delete;
  Unpickler& operator=(const Unpickler&) = delete;

  uint64_t storage_total() const {
    uint64_t t = 0;
    for (const auto& kv : storages_) t += kv.second.size();
    return t;
  }
  const std::vector<uint8_t>& storage(const std::string& key) const { return storages_.at(key); }

  V run() {
    while (true) {
      op_at_ = pos_;
      const uint8_t op = byte();
      if (op == '.') break;  // STOP
      step(op);
    }
    if (stack_.size() != 1)
      fail("the pickle ends with " + std::to_string(stack_.size()) + " values on its stack, not 1");
    return stack_.back();
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw CheckpointError(label_ + ": data.pkl byte " + std::to_string(op_at_) + ": " + what);
  }

 private:
  V make(Kind k) {
    if (all_.size() >= kMaxObjects) {
      fail("more than " + std::to_string(kMaxObjects) +
           " objects in data.pkl (a limit of the reader: a state dict needs a few dozen per "
           "tensor)");
    }
    auto v = std::make_shared<Value>();
    v->kind = k;
    all_.push_back(v);
    return v;
  }
  V make_int(int64_t i) {
    V v = make(Kind::Int);
    v->i = i;
    return v;
  }
  V make_str(Kind k, std::string s) {
    V v = make(k);
    v->s = std::move(s);
    return v;
  }

  // Reading the stream.
  uint8_t byte() {
    if (pos_ >= n_) fail("truncated (no STOP opcode)");
    return p_[pos_++];
  }
  const uint8_t* take(uint64_t k) {
    if (k > n_ - pos_)
      fail("truncated: " + std::to_string(k) + " bytes wanted, " + std::to_string(n_ - pos_) +
           " left");
    const uint8_t* q = p_ + pos_;
    pos_ += static_cast<size_t>(k);
    return q;
  }
  uint64_t le(int bytes) {
    const uint8_t* q = take(static_cast<uint64_t>(bytes));
    uint64_t v = 0;
    for (int b = bytes - 1; b >= 0; --b) v = v << 8 | q[b];
    return v;
  }
  std::string line() {
    const size_t start = pos_;
    while (pos_ < n_ && p_[pos_] != '\n') ++pos_;
    if (pos_ >= n_) fail("truncated inside a text argument");
    return std::string(reinterpret_cast<const char*>(p_ + start), pos_++ - start);
  }
  std::string str(uint64_t len) {
    const uint8_t* q = take(len);
    return std::string(reinterpret_cast<const char*>(q), static_cast<size_t>(len));
  }

  // The stack.
  V pop() {
    if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
      fail("stack underflow");
    V v = std::move(stack_.back());
    stack_.pop_back();
    return v;
  }
  V& top() {
    if (stack_.empty()) fail("stack underflow");
    return stack_.back();
  }
  std::vector<V> pop_mark() {
    if (marks_.empty()) fail("no MARK to pop to");
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<V> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void push(V v) { stack_.push_back(std::move(v)); }
  V tuple(std::vector<V> items) {
    V t = make(Kind::Tuple);
    t->items = std::move(items);
    return t;
  }
  void memo_put(uint64_t key) { memo_[key] = top(); }
  V memo_get(uint64_t key) {
    const auto it = memo_.find(key);
    if (it == memo_.end()) fail("memo slot " + std::to_string(key) + " is empty");
    return it->second;
  }
  void set_items(V& dict, const std::vector<V>& kv) {
    if (dict->kind != Kind::Dict) fail("SETITEM(S) on something that is not a dict");
    if (kv.size() % 2) fail("SETITEMS with an odd number of values");
    for (size_t i = 0; i < kv.size(); i += 2) dict->entries.emplace_back(kv[i], kv[i + 1]);
  }
  void append(V& list, const std::vector<V>& items) {
    if (list->kind != Kind::List) fail("APPEND(S) on something that is not a list");
    list->items.insert(list->items.end(), items.begin(), items.end());
  }

  void step(uint8_t op) {
    switch (op) {
      case 0x80: byte(); break;                          // PROTO
      case 0x95: le(8); break;                           // FRAME: a length hint only
      case '(': marks_.push_back(stack_.size()); break;  // MARK
      case ')': push(tuple({})); break;
      case 't': push(tuple(pop_mark())); break;
      case 0x85: {
        V a = pop();
        push(tuple({a}));
        break;
      }
      case 0x86: {
        V b = pop(), a = pop();
        push(tuple({a, b}));
        break;
      }
      case 0x87: {
        V c = pop(), b = pop(), a = pop();
        push(tuple({a, b, c}));
        break;
      }
      case ']': push(make(Kind::List)); break;
      case 'l': {
        V l = make(Kind::List);
        l->items = pop_mark();
        push(l);
        break;
      }
      case 'a': {
        V x = pop();
        append(top(), {x});
        break;
      }
      case 'e': {
        std::vector<V> xs = pop_mark();
        append(top(), xs);
        break;
      }
      case '}': push(make(Kind::Dict)); break;
      case 'd': {
        V d = make(Kind::Dict);
        set_items(d, pop_mark());
        push(d);
        break;
      }
      case 's': {
        V v = pop(), k = pop();
        set_items(top(), {k, v});
        break;
      }
      case 'u': {
        std::vector<V> kv = pop_mark();
        set_items(top(), kv);
        break;
      }
      case 0x8f: push(make(Kind::List)); break;  // EMPTY_SET: a list will do
      case 0x90: {
        std::vector<V> xs = pop_mark();
        V& s = top();
        if (s->kind != Kind::List) fail("ADDITEMS on something that is not a set");
        s->items.insert(s->items.end(), xs.begin(), xs.end());
        break;
      }
      case 0x91: {
        V l = make(Kind::List);
        l->items = pop_mark();
        push(l);
        break;
      }  // FROZENSET
      case 'N': push(make(Kind::None)); break;
      case 0x88:
      case 0x89: {
        V b = make(Kind::Bool);
        b->i = op == 0x88;
        push(b);
        break;
      }
      case 'J': push(make_int(static_cast<int32_t>(le(4)))); break;
      case 'K': push(make_int(static_cast<int64_t>(le(1)))); break;
      case 'M': push(make_int(static_cast<int64_t>(le(2)))); break;
      case 0x8a: {  // LONG1: little-endian two's complement
        const int len = byte();
        if (len > 8) fail("an integer of " + std::to_string(len) + " bytes");
        uint64_t v = len ? le(len) : 0;
        if (len > 0 && len < 8 && (v >> (8 * len - 1)) & 1) v |= ~uint64_t{0} << (8 * len);
        push(make_int(static_cast<int64_t>(v)));
        break;
      }
      case 'I': {  // INT (text), also True/False in protocol 0
        const std::string t = line();
        if (t == "01" || t == "00") {
          V b = make(Kind::Bool);
          b->i = t == "01";
          push(b);
          break;
        }
        try {
          push(make_int(std::stoll(t)));
        } catch (const std::exception&) {
          fail("bad INT '" + t.substr(0, 20) + "'");
        }
        break;
      }
      case 'G': {  // BINFLOAT: big-endian double
        const uint8_t* q = take(8);
        uint64_t bits = 0;
        for (int b = 0; b < 8; ++b) bits = bits << 8 | q[b];
        V f = make(Kind::Float);
        std::memcpy(&f->f, &bits, 8);
        push(f);
        break;
      }
      case 'X': push(make_str(Kind::Str, str(le(4)))); break;
      case 0x8c: push(make_str(Kind::Str, str(le(1)))); break;
      case 0x8d: push(make_str(Kind::Str, str(le(8)))); break;
      case 'T': push(make_str(Kind::Str, str(le(4)))); break;  // BINSTRING
      case 'U': push(make_str(Kind::Str, str(le(1)))); break;  // SHORT_BINSTRING
      case 'B': push(make_str(Kind::Bytes, str(le(4)))); break;
      case 'C': push(make_str(Kind::Bytes, str(le(1)))); break;
      case 0x8e: push(make_str(Kind::Bytes, str(le(8)))); break;
      case 'q': memo_put(le(1)); break;
      case 'r': memo_put(le(4)); break;
      case 0x94: memo_put(memo_.size()); break;  // MEMOIZE
      case 'h': push(memo_get(le(1))); break;
      case 'j': push(memo_get(le(4))); break;
      case '0': pop(); break;
      case '1': pop_mark(); break;
      case '2': push(top()); break;
      case 'c': {  // GLOBAL module\nname\n
        std::string module = line();
        push(make_str(Kind::Global, module + "." + line()));
        break;
      }
      case 0x93: {  // STACK_GLOBAL
        V name = pop(), module = pop();
        if (name->kind != Kind::Str || module->kind != Kind::Str)
          fail("STACK_GLOBAL without two strings");
        push(make_str(Kind::Global, module->s + "." + name->s));
        break;
      }
      case 'Q': {
        V pid = pop();
        push(persistent(pid));
        break;
      }  // BINPERSID
      case 'R': {
        V args = pop(), fn = pop();
        push(reduce(fn, args));
        break;
      }
      case 0x81: {  // NEWOBJ: cls.__new__(cls, *args): never run, an inert object
        V args = pop(), cls = pop();
        push(make_str(Kind::Object, cls->kind == Kind::Global ? cls->s : "?"));
        break;
      }
      case 'b': {  // BUILD: obj.__setstate__(state)
        V state = pop();
        V& obj = top();
        if (obj->kind == Kind::Object) obj->items = {state};
        // OrderedDict's _metadata, a tensor's Python attributes: nothing to keep.
        break;
      }
      default: {
        char hex[8];
        std::snprintf(hex, sizeof hex, "0x%02x", op);
        fail(std::string("unsupported pickle opcode ") + hex);
      }
    }
  }

  // ('storage', torch.FloatStorage, key, location, numel)
  V persistent(const V& pid) {
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

  V reduce(const V& fn, const V& args) {
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
    if (f == "torch._utils._rebuild_parameter" ||
        f == "torch._utils._rebuild_parameter_with_state") {
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

  std::vector<int64_t> ints(const V& t, const char* what) {
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

  const std::vector<uint8_t>& storage_bytes(const std::string& key) {
    auto it = storages_.find(key);
    if (it == storages_.end()) it = storages_.emplace(key, fetch_(key)).first;
    return it->second;
  }

  V rebuild(const V& storage, const V& offset_v, const V& size_v, const V& stride_v,
            const V& dtype_v) {
    if (storage->kind != Kind::Storage)
      fail("a tensor rebuilt from something that is not a storage");
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
      throw CheckpointError(label_ + ": objects nested deeper than " + std::to_string(kMaxDepth) +
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
      throw CheckpointError(label_ + ": tensor '" + name + "' has dtype " + t.unsupported +
                            ", which the workbench does not read");
    const uint64_t esize = st_dtype_size(t.dtype);
    bytes_ += t.numel * esize;  // numel <= 2^48: no overflow
    if (bytes_ > max_bytes_)
      throw CheckpointError(label_ + ": its tensors add up to more than " +
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
