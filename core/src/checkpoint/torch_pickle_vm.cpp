// The restricted unpickler's machine: data.pkl read byte by byte, the stack, marks and
// memo, and the opcodes torch.save and LibTorch's pickler write (any other is refused,
// naming it). What persistent ids and REDUCE become is in torch_pickle_rebuild.cpp.
#include <cstdio>
#include <cstring>

#include "torch_pickle_vm.h"

namespace fp8wb::pickle {

Unpickler::~Unpickler() {
  for (const V& v : all_) {
    v->items.clear();
    v->entries.clear();
  }
}

V Unpickler::run() {
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

void Unpickler::fail(const std::string& what) const {
  throw CheckpointError(label_ + ": data.pkl byte " + std::to_string(op_at_) + ": " + what);
}

V Unpickler::make(Kind k) {
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

V Unpickler::make_int(int64_t i) {
  V v = make(Kind::Int);
  v->i = i;
  return v;
}

V Unpickler::make_str(Kind k, std::string s) {
  V v = make(k);
  v->s = std::move(s);
  return v;
}

// Reading the stream.
uint8_t Unpickler::byte() {
  if (pos_ >= n_) fail("truncated (no STOP opcode)");
  return p_[pos_++];
}

const uint8_t* Unpickler::take(uint64_t k) {
  if (k > n_ - pos_)
    fail("truncated: " + std::to_string(k) + " bytes wanted, " + std::to_string(n_ - pos_) +
         " left");
  const uint8_t* q = p_ + pos_;
  pos_ += static_cast<size_t>(k);
  return q;
}

uint64_t Unpickler::le(int bytes) {
  const uint8_t* q = take(static_cast<uint64_t>(bytes));
  uint64_t v = 0;
  for (int b = bytes - 1; b >= 0; --b) v = v << 8 | q[b];
  return v;
}

std::string Unpickler::line() {
  const size_t start = pos_;
  while (pos_ < n_ && p_[pos_] != '\n') ++pos_;
  if (pos_ >= n_) fail("truncated inside a text argument");
  return std::string(reinterpret_cast<const char*>(p_ + start), pos_++ - start);
}

std::string Unpickler::str(uint64_t len) {
  const uint8_t* q = take(len);
  return std::string(reinterpret_cast<const char*>(q), static_cast<size_t>(len));
}

// The stack.
V Unpickler::pop() {
  if (stack_.empty() || (!marks_.empty() && stack_.size() <= marks_.back()))
    fail("stack underflow");
  V v = std::move(stack_.back());
  stack_.pop_back();
  return v;
}

V& Unpickler::top() {
  if (stack_.empty()) fail("stack underflow");
  return stack_.back();
}

std::vector<V> Unpickler::pop_mark() {
  if (marks_.empty()) fail("no MARK to pop to");
  const size_t m = marks_.back();
  marks_.pop_back();
  std::vector<V> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
  stack_.resize(m);
  return items;
}

V Unpickler::tuple(std::vector<V> items) {
  V t = make(Kind::Tuple);
  t->items = std::move(items);
  return t;
}

V Unpickler::memo_get(uint64_t key) {
  const auto it = memo_.find(key);
  if (it == memo_.end()) fail("memo slot " + std::to_string(key) + " is empty");
  return it->second;
}

void Unpickler::set_items(V& dict, const std::vector<V>& kv) {
  if (dict->kind != Kind::Dict) fail("SETITEM(S) on something that is not a dict");
  if (kv.size() % 2) fail("SETITEMS with an odd number of values");
  for (size_t i = 0; i < kv.size(); i += 2) dict->entries.emplace_back(kv[i], kv[i + 1]);
}

void Unpickler::append(V& list, const std::vector<V>& items) {
  if (list->kind != Kind::List) fail("APPEND(S) on something that is not a list");
  list->items.insert(list->items.end(), items.begin(), items.end());
}

void Unpickler::step(uint8_t op) {
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

}  // namespace fp8wb::pickle
