#include "io/torch_pickle.h"

#include <algorithm>
#include <cstring>
#include <deque>
#include <iomanip>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string_view>
#include <unordered_map>

#include "tensor/error.h"

namespace tfm::io {

namespace {

// Bounds on what one pickle may build: a state dict of 100,000 tensors needs about two
// million values; the memo holds at most one entry per value.
constexpr size_t kMaxValues = 1u << 21;
constexpr int64_t kMaxElements = int64_t{1} << 40;  // per storage, per dimension, per stride
constexpr size_t kMaxDims = 64;

// The storage types of torch.save's persistent ids (torch.<name>), and how tfm holds each.
struct StorageType {
  const char* name;
  DType dtype;
  size_t stored_size;
};
constexpr StorageType kStorageTypes[] = {
    {"FloatStorage", DType::f32, 4}, {"HalfStorage", DType::f16, 2}, {"BFloat16Storage", DType::bf16, 2},
    {"DoubleStorage", DType::f32, 8},  // (weights in f64 are rare: rounded to f32, as loading them into a float model does)
    {"LongStorage", DType::i64, 8},  {"IntStorage", DType::i32, 4},  {"CharStorage", DType::i8, 1},
    {"ByteStorage", DType::u8, 1},   {"BoolStorage", DType::boolean, 1}};
constexpr int64_t kStorageCount = sizeof(kStorageTypes) / sizeof(kStorageTypes[0]);

// The globals a state dict's pickle names; any other is refused when it is read.
enum Global : int64_t { OrderedDict = kStorageCount, RebuildTensor, RebuildParameter };  // below: a storage type

std::optional<int64_t> allowed_global(const std::string& module, const std::string& name) {
  if (module == "collections" && name == "OrderedDict") return OrderedDict;
  if (module == "torch._utils" && name == "_rebuild_tensor_v2") return RebuildTensor;
  if (module == "torch._utils" && name == "_rebuild_parameter") return RebuildParameter;
  for (int64_t i = 0; i < kStorageCount; ++i)
    if (module == "torch" && name == kStorageTypes[i].name) return i;
  return std::nullopt;
}

// The names of opcodes a state dict never needs, for the refusal's message.
const char* opcode_name(uint8_t op) {
  static const std::map<uint8_t, const char*> names = {
      {'i', "INST"},        {'o', "OBJ"},           {0x81, "NEWOBJ"},    {0x92, "NEWOBJ_EX"},     {'P', "PERSID"},
      {'0', "POP"},         {'1', "POP_MARK"},      {'2', "DUP"},        {'F', "FLOAT"},          {'I', "INT"},
      {'L', "LONG"},        {0x8b, "LONG4"},        {'S', "STRING"},     {'T', "BINSTRING"},      {'U', "SHORT_BINSTRING"},
      {'V', "UNICODE"},     {'B', "BINBYTES"},      {'C', "SHORT_BINBYTES"}, {0x8e, "BINBYTES8"}, {0x96, "BYTEARRAY8"},
      {'p', "PUT"},         {'g', "GET"},           {0x82, "EXT1"},      {0x83, "EXT2"},          {0x84, "EXT4"},
      {0x8f, "EMPTY_SET"},  {0x90, "ADDITEMS"},     {0x91, "FROZENSET"}, {0x97, "NEXT_BUFFER"},   {0x98, "READONLY_BUFFER"}};
  const auto it = names.find(op);
  return it == names.end() ? nullptr : it->second;
}

enum class Kind { None, Bool, Int, Float, String, Tuple, List, Dict, Global, Storage, Tensor };

const char* kind_name(Kind k) {
  constexpr const char* names[] = {"None",   "a boolean", "an integer", "a float",   "a string", "a tuple",
                                   "a list", "a dict",    "a global",   "a storage", "a tensor"};
  return names[static_cast<int>(k)];
}

// A value the pickle builds. Values live in the reader's arena and refer to each other
// by pointer, so that no value owns another: a pickle may make cycles (a dict put into
// itself) or deep nests, and neither then costs a leak or a recursion.
struct Value {
  Kind kind = Kind::None;
  int64_t i = 0;              // Int, Bool; Global: which; Storage: index into storages; Tensor: index into tensors
  double f = 0;               // Float
  std::string s;              // String; Global: "module.name"
  std::vector<Value*> items;  // Tuple, List; Dict: keys and values alternately
  std::unique_ptr<std::unordered_map<std::string_view, size_t>> keys;  // Dict: key -> its place in items
};

class Unpickler {
 public:
  Unpickler(std::string_view in, const std::string& origin) : in_(in), origin_(origin) {}
  TorchStateDict run();

 private:
  void step(uint8_t op);
  // Reading the opcodes' arguments, each refusing to run past the end.
  std::string_view take(uint64_t n);
  uint64_t le(int bytes);
  std::string line();
  // The stack.
  Value* make(Kind kind);
  Value* make_int(int64_t v);
  void push(Value* v);
  Value* pop();
  Value* top();
  std::vector<Value*> pop_mark();
  Value* of_kind(Value* v, Kind kind, const char* what);
  // What the opcodes mean.
  Value* sequence(Kind kind, std::vector<Value*> items);
  void set_item(Value* dict, Value* key, Value* value);
  void global(const std::string& module, const std::string& name);
  Value* reduce(Value* callable, Value* args);
  Value* rebuild_tensor(const std::vector<Value*>& args);
  Shape ints(Value* tuple, const char* what);
  Value* persistent(Value* pid);
  void memo_put(uint64_t index);
  TorchStateDict state_dict(Value* result);

  std::string_view in_;
  const std::string& origin_;
  size_t at_ = 0, op_at_ = 0;
  std::deque<Value> values_;
  std::vector<Value*> stack_;
  std::vector<size_t> marks_;
  std::unordered_map<uint64_t, Value*> memo_;
  std::vector<TorchStorage> storages_;
  std::map<std::string, size_t> storage_keys_;
  std::deque<TorchTensor> tensors_;
};

std::string_view Unpickler::take(uint64_t n) {
  TFM_CHECK(n <= in_.size() - at_, origin_ << ": the pickle is truncated (an argument of the opcode at byte " << op_at_ << " runs past its end)");
  const std::string_view out = in_.substr(at_, static_cast<size_t>(n));
  at_ += static_cast<size_t>(n);
  return out;
}

uint64_t Unpickler::le(int bytes) {
  const std::string_view b = take(static_cast<uint64_t>(bytes));
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(b[static_cast<size_t>(i)]);
  return v;
}

// GLOBAL's module or name: printable text up to a newline (a short one: dotted names).
std::string Unpickler::line() {
  const size_t end = in_.substr(at_, 257).find('\n');  // (not a search of the whole rest, for each of many)
  TFM_CHECK(end != std::string_view::npos, origin_ << ": malformed GLOBAL at byte " << op_at_ << " of the pickle");
  const std::string out(take(end));
  take(1);
  for (char c : out) TFM_CHECK(c >= 0x20 && c < 0x7f, origin_ << ": malformed GLOBAL at byte " << op_at_ << " of the pickle");
  return out;
}

Value* Unpickler::make(Kind kind) {
  TFM_CHECK(values_.size() < kMaxValues, origin_ << ": the pickle builds more than " << kMaxValues << " values, over tfm's limit for a state dict");
  Value& v = values_.emplace_back();
  v.kind = kind;
  return &v;
}

Value* Unpickler::make_int(int64_t v) {
  Value* out = make(Kind::Int);
  out->i = v;
  return out;
}

void Unpickler::push(Value* v) {
  TFM_CHECK(stack_.size() < kMaxValues, origin_ << ": the pickle's stack grows past " << kMaxValues << " values");
  stack_.push_back(v);
}

Value* Unpickler::pop() {
  TFM_CHECK(!stack_.empty() && (marks_.empty() || stack_.size() > marks_.back()),
            origin_ << ": malformed pickle (the opcode at byte " << op_at_ << " takes a value from an empty stack)");
  Value* v = stack_.back();
  stack_.pop_back();
  return v;
}

Value* Unpickler::top() {
  Value* v = pop();
  push(v);
  return v;
}

std::vector<Value*> Unpickler::pop_mark() {
  TFM_CHECK(!marks_.empty(), origin_ << ": malformed pickle (the opcode at byte " << op_at_ << " needs a MARK)");
  std::vector<Value*> items(stack_.begin() + static_cast<std::ptrdiff_t>(marks_.back()), stack_.end());
  stack_.resize(marks_.back());
  marks_.pop_back();
  return items;
}

Value* Unpickler::of_kind(Value* v, Kind kind, const char* what) {
  TFM_CHECK(v->kind == kind, origin_ << ": " << what << " is " << kind_name(v->kind) << ", not " << kind_name(kind)
                                     << " (the opcode at byte " << op_at_ << " of the pickle)");
  return v;
}

Value* Unpickler::sequence(Kind kind, std::vector<Value*> items) {
  Value* v = make(kind);
  v->items = std::move(items);
  return v;
}

// d[key] = value, as Python does: a key already present keeps its place. Keys are
// strings: the names of a state dict and of its metadata.
void Unpickler::set_item(Value* dict, Value* key, Value* value) {
  of_kind(dict, Kind::Dict, "the target of SETITEM");
  of_kind(key, Kind::String, "a dict key");
  if (!dict->keys) dict->keys = std::make_unique<std::unordered_map<std::string_view, size_t>>();
  const auto [it, added] = dict->keys->emplace(key->s, dict->items.size());
  if (!added) {
    dict->items[it->second + 1] = value;
    return;
  }
  dict->items.push_back(key);
  dict->items.push_back(value);
}

void Unpickler::global(const std::string& module, const std::string& name) {
  const std::optional<int64_t> which = allowed_global(module, name);
  TFM_CHECK(which, origin_ << ": the pickle calls for '" << module << "." << name << "', which a state dict does not hold; tfm reads "
                           << "tensors, their storages and dicts only, and never runs code from a file");
  Value* v = make(Kind::Global);
  v->i = *which;
  v->s = module + "." + name;
  push(v);
}

Value* Unpickler::reduce(Value* callable, Value* args) {
  of_kind(callable, Kind::Global, "what REDUCE calls");
  of_kind(args, Kind::Tuple, "REDUCE's arguments");
  if (callable->i == OrderedDict) {
    TFM_CHECK(args->items.empty(), origin_ << ": collections.OrderedDict is given arguments (at byte " << op_at_ << " of the pickle)");
    return make(Kind::Dict);
  }
  if (callable->i == RebuildTensor) return rebuild_tensor(args->items);
  TFM_CHECK(callable->i == RebuildParameter, origin_ << ": the pickle calls " << callable->s << " (at byte " << op_at_ << "), which a state dict does not");
  TFM_CHECK(!args->items.empty(), origin_ << ": torch._utils._rebuild_parameter without arguments (at byte " << op_at_ << " of the pickle)");
  return of_kind(args->items[0], Kind::Tensor, "a parameter's data");  // (requires_grad and hooks mean nothing here)
}

Shape Unpickler::ints(Value* tuple, const char* what) {
  of_kind(tuple, Kind::Tuple, what);
  TFM_CHECK(tuple->items.size() <= kMaxDims, origin_ << ": a tensor of " << tuple->items.size() << " dimensions (at byte " << op_at_ << ")");
  Shape out;
  for (Value* v : tuple->items) {
    const int64_t x = of_kind(v, Kind::Int, what)->i;
    TFM_CHECK(x >= 0 && x < kMaxElements, origin_ << ": a tensor's " << what << " holds " << x << " (at byte " << op_at_ << " of the pickle)");
    out.push_back(x);
  }
  return out;
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, requires_grad, backward_hooks
// [, metadata]): the view must lie inside its storage, and hold no more elements than
// it (a view expanded beyond its storage is not a weight).
Value* Unpickler::rebuild_tensor(const std::vector<Value*>& args) {
  TFM_CHECK(args.size() == 6 || args.size() == 7,
            origin_ << ": torch._utils._rebuild_tensor_v2 with " << args.size() << " arguments (at byte " << op_at_ << " of the pickle)");
  TorchTensor t;
  t.storage = static_cast<size_t>(of_kind(args[0], Kind::Storage, "a tensor's storage")->i);
  t.offset = of_kind(args[1], Kind::Int, "a tensor's storage offset")->i;
  t.shape = ints(args[2], "shape");
  t.strides = ints(args[3], "strides");
  TFM_CHECK(t.shape.size() == t.strides.size(), origin_ << ": a tensor of " << t.shape.size() << " dimensions with " << t.strides.size()
                                                        << " strides (at byte " << op_at_ << " of the pickle)");
  TFM_CHECK(t.offset >= 0 && t.offset < kMaxElements, origin_ << ": a tensor at storage offset " << t.offset << " (at byte " << op_at_ << " of the pickle)");
  // In 128 bits: 64 dimensions of strides and sizes below 2^40 reach at most 2^86, and the
  // element count is held below 2^64 before each product.
  const int64_t storage_numel = storages_[t.storage].numel;
  unsigned __int128 last = static_cast<unsigned __int128>(t.offset), numel = 1;
  for (size_t d = 0; d < t.shape.size(); ++d) {
    numel = std::min<unsigned __int128>(numel, UINT64_MAX) * static_cast<unsigned __int128>(t.shape[d]);
    if (t.shape[d] > 0) last += static_cast<unsigned __int128>(t.shape[d] - 1) * static_cast<unsigned __int128>(t.strides[d]);
  }
  TFM_CHECK(numel == 0 || last < static_cast<unsigned __int128>(storage_numel),
            origin_ << ": a tensor of shape " << shape_str(t.shape) << " at offset " << t.offset << " reaches beyond its storage of "
                    << storage_numel << " elements (at byte " << op_at_ << " of the pickle)");
  TFM_CHECK(numel <= static_cast<unsigned __int128>(storage_numel),
            origin_ << ": a tensor of shape " << shape_str(t.shape) << " holds more elements than its storage (" << storage_numel
                    << "): an expanded view, which tfm does not read (at byte " << op_at_ << " of the pickle)");
  Value* v = make(Kind::Tensor);
  v->i = static_cast<int64_t>(tensors_.size());
  tensors_.push_back(std::move(t));
  return v;
}

// torch.save's persistent id of a storage: ('storage', torch.<Type>Storage, key,
// location, numel). A key named twice names one storage (tied weights), of one type.
Value* Unpickler::persistent(Value* pid) {
  const std::vector<Value*>& p = of_kind(pid, Kind::Tuple, "a persistent id")->items;
  TFM_CHECK(p.size() == 5 && p[0]->kind == Kind::String && p[0]->s == "storage" && p[1]->kind == Kind::Global && p[1]->i < kStorageCount &&
                p[2]->kind == Kind::String && p[3]->kind == Kind::String && p[4]->kind == Kind::Int,
            origin_ << ": a persistent id other than torch.save's ('storage', type, key, location, size) at byte " << op_at_ << " of the pickle");
  const StorageType& type = kStorageTypes[p[1]->i];
  const int64_t numel = p[4]->i;
  TFM_CHECK(numel >= 0 && numel < kMaxElements, origin_ << ": storage '" << p[2]->s << "' declares " << numel << " elements");
  const auto [it, added] = storage_keys_.emplace(p[2]->s, storages_.size());
  if (added) storages_.push_back({type.name, type.dtype, type.stored_size, p[2]->s, numel});
  const TorchStorage& s = storages_[it->second];
  TFM_CHECK(s.type == type.name && s.numel == numel, origin_ << ": storage '" << s.key << "' is named as " << s.type << " of " << s.numel
                                                             << " elements and as " << type.name << " of " << numel);
  Value* v = make(Kind::Storage);
  v->i = static_cast<int64_t>(it->second);
  return v;
}

void Unpickler::memo_put(uint64_t index) {
  TFM_CHECK(memo_.size() < kMaxValues, origin_ << ": the pickle's memo grows past " << kMaxValues << " entries");
  memo_[index] = top();
}

// One opcode of those a state dict's pickle uses (protocol 2, and what protocols 3 to 5
// write for the same values).
void Unpickler::step(uint8_t op) {
  switch (op) {
    case 0x80: {  // PROTO
      const uint64_t protocol = le(1);
      TFM_CHECK(protocol >= 2 && protocol <= 5, origin_ << ": pickle protocol " << protocol << "; torch.save writes 2");
      return;
    }
    case 0x95: le(8); return;  // FRAME: a length, for buffering
    case '}': return push(make(Kind::Dict));   // EMPTY_DICT
    case ']': return push(make(Kind::List));   // EMPTY_LIST
    case ')': return push(make(Kind::Tuple));  // EMPTY_TUPLE
    case 'N': return push(make(Kind::None));
    case 0x88: case 0x89: {  // NEWTRUE, NEWFALSE
      Value* v = make(Kind::Bool);
      v->i = op == 0x88;
      return push(v);
    }
    case '(':  // MARK
      TFM_CHECK(marks_.size() < kMaxValues, origin_ << ": the pickle nests more than " << kMaxValues << " MARKs");
      marks_.push_back(stack_.size());
      return;
    case 'X': case 0x8c: case 0x8d: {  // BINUNICODE, SHORT_BINUNICODE, BINUNICODE8
      const std::string_view text = take(le(op == 0x8c ? 1 : op == 'X' ? 4 : 8));
      Value* v = make(Kind::String);
      v->s = std::string(text);
      return push(v);
    }
    case 'K': return push(make_int(static_cast<int64_t>(le(1))));               // BININT1
    case 'M': return push(make_int(static_cast<int64_t>(le(2))));               // BININT2
    case 'J': return push(make_int(static_cast<int32_t>(static_cast<uint32_t>(le(4)))));  // BININT
    case 0x8a: {  // LONG1: n bytes, little-endian two's complement
      const uint64_t n = le(1);
      TFM_CHECK(n <= 8, origin_ << ": an integer of " << n << " bytes at byte " << op_at_ << " of the pickle; tfm reads up to 8");
      const uint64_t bits = n == 0 ? 0 : le(static_cast<int>(n));
      const int shift = static_cast<int>(64 - 8 * n);
      return push(make_int(n == 0 ? 0 : static_cast<int64_t>(bits << shift) >> shift));
    }
    case 'G': {  // BINFLOAT: big-endian
      const std::string_view b = take(8);
      uint64_t bits = 0;
      for (char c : b) bits = (bits << 8) | static_cast<unsigned char>(c);
      Value* v = make(Kind::Float);
      std::memcpy(&v->f, &bits, 8);
      return push(v);
    }
    case 0x85: case 0x86: case 0x87: {  // TUPLE1, TUPLE2, TUPLE3
      std::vector<Value*> items(static_cast<size_t>(op - 0x84));
      for (auto it = items.rbegin(); it != items.rend(); ++it) *it = pop();
      return push(sequence(Kind::Tuple, std::move(items)));
    }
    case 't': return push(sequence(Kind::Tuple, pop_mark()));  // TUPLE
    case 'l': return push(sequence(Kind::List, pop_mark()));   // LIST
    case 'd': {  // DICT
      const std::vector<Value*> items = pop_mark();
      TFM_CHECK(items.size() % 2 == 0, origin_ << ": malformed pickle (DICT of an odd number of values at byte " << op_at_ << ")");
      Value* dict = make(Kind::Dict);
      for (size_t i = 0; i < items.size(); i += 2) set_item(dict, items[i], items[i + 1]);
      return push(dict);
    }
    case 'a': {  // APPEND
      Value* v = pop();
      return of_kind(top(), Kind::List, "the target of APPEND")->items.push_back(v);
    }
    case 'e': {  // APPENDS
      const std::vector<Value*> items = pop_mark();
      std::vector<Value*>& list = of_kind(top(), Kind::List, "the target of APPENDS")->items;
      list.insert(list.end(), items.begin(), items.end());
      return;
    }
    case 's': {  // SETITEM
      Value* value = pop();
      Value* key = pop();
      return set_item(top(), key, value);
    }
    case 'u': {  // SETITEMS
      const std::vector<Value*> items = pop_mark();
      TFM_CHECK(items.size() % 2 == 0, origin_ << ": malformed pickle (SETITEMS of an odd number of values at byte " << op_at_ << ")");
      Value* dict = top();
      for (size_t i = 0; i < items.size(); i += 2) set_item(dict, items[i], items[i + 1]);
      return;
    }
    case 'c': {  // GLOBAL
      const std::string module = line();
      return global(module, line());
    }
    case 0x93: {  // STACK_GLOBAL
      const std::string name = of_kind(pop(), Kind::String, "STACK_GLOBAL's name")->s;
      return global(of_kind(pop(), Kind::String, "STACK_GLOBAL's module")->s, name);
    }
    case 'R': {  // REDUCE
      Value* args = pop();
      return push(reduce(pop(), args));
    }
    case 'b': {  // BUILD: an OrderedDict's attributes (a state dict's _metadata: module versions), unused
      pop();
      of_kind(top(), Kind::Dict, "the target of BUILD");
      return;
    }
    case 'Q': return push(persistent(pop()));  // BINPERSID
    case 'q': return memo_put(le(1));           // BINPUT
    case 'r': return memo_put(le(4));           // LONG_BINPUT
    case 0x94: return memo_put(memo_.size());   // MEMOIZE
    case 'h': case 'j': {                       // BINGET, LONG_BINGET
      const uint64_t index = le(op == 'h' ? 1 : 4);
      const auto it = memo_.find(index);
      TFM_CHECK(it != memo_.end(), origin_ << ": malformed pickle (memo entry " << index << " fetched at byte " << op_at_ << " was never stored)");
      return push(it->second);
    }
    default: {
      std::ostringstream hex;
      hex << "0x" << std::hex << std::setw(2) << std::setfill('0') << static_cast<int>(op);
      const char* name = opcode_name(op);
      throw Error(origin_ + ": the pickle's opcode " + (name ? std::string(name) + " (" + hex.str() + ")" : hex.str()) + " at byte " +
                  std::to_string(op_at_) + " is not one a state dict needs; tfm reads tensors, their storages and dicts only");
    }
  }
}

TorchStateDict Unpickler::run() {
  while (at_ < in_.size()) {
    op_at_ = at_;
    const uint8_t op = static_cast<uint8_t>(in_[at_++]);
    if (op == '.') return state_dict(pop());  // STOP
    step(op);
  }
  throw Error(origin_ + ": the pickle is truncated (it ends without STOP)");
}

// The pickle's value must be a dict of name -> tensor.
TorchStateDict Unpickler::state_dict(Value* result) {
  TFM_CHECK(result->kind == Kind::Dict, origin_ << ": holds " << kind_name(result->kind) << ", not a state dict (a dict of name -> tensor)");
  TorchStateDict out;
  out.storages = storages_;
  for (size_t i = 0; i < result->items.size(); i += 2) {
    const std::string& name = result->items[i]->s;
    const Value* v = result->items[i + 1];
    TFM_CHECK(v->kind == Kind::Tensor, origin_ << ": entry '" << name << "' is " << kind_name(v->kind)
                                               << ", not a tensor; tfm reads state dicts (a dict of name -> tensor)");
    out.tensors.push_back(tensors_[static_cast<size_t>(v->i)]);
    out.tensors.back().name = name;
  }
  return out;
}

}  // namespace

TorchStateDict unpickle_state_dict(std::string_view pickle, const std::string& origin) { return Unpickler(pickle, origin).run(); }

}  // namespace tfm::io
