#pragma once
// A restricted reader of the pickle torch.save writes for a state dict (data.pkl, pickle
// protocol 2): it knows only what a state dict holds (ordered dicts, tensors rebuilt by
// torch._utils._rebuild_tensor_v2 or _rebuild_parameter over typed storages named by
// persistent ids, and the tuples, numbers, strings, None and booleans of their
// arguments and metadata). Any other global (os.system, builtins.eval, ...) or opcode is
// refused by name; nothing is ever called or imported: the globals allowed are names
// the reader interprets itself.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tensor/tensor.h"

namespace tfm::io {

// A storage the pickle names: its element type, its key (the archive entry data/<key>)
// and its number of elements.
struct TorchStorage {
  std::string type;    // "FloatStorage", "HalfStorage", ...
  DType dtype;         // the dtype tfm holds it in
  size_t stored_size;  // bytes per element in the file (DoubleStorage: 8, held as f32)
  std::string key;
  int64_t numel = 0;
};

// A tensor of the state dict: a view of one storage.
struct TorchTensor {
  std::string name;
  size_t storage = 0;  // index into TorchStateDict::storages
  int64_t offset = 0;  // in elements
  Shape shape, strides;
};

struct TorchStateDict {
  std::vector<TorchStorage> storages;  // each key once, in order of first use
  std::vector<TorchTensor> tensors;    // in the dict's order
};

// Throws tfm::Error naming `origin` and the first thing refused.
TorchStateDict unpickle_state_dict(std::string_view pickle, const std::string& origin);

}  // namespace tfm::io
