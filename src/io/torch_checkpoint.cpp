#include "io/torch_checkpoint.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <vector>

#include "io/finite.h"
#include "io/random_access_file.h"
#include "io/torch_pickle.h"
#include "io/zip_archive.h"
#include "tensor/error.h"

namespace tfm::io {

namespace {

// A state dict's pickle is ~100 bytes a tensor: this admits a million tensors.
constexpr uint64_t kMaxPickleBytes = 128u << 20;

// torch.save before PyTorch 1.6 wrote pickles one after another, not a zip archive: the
// file starts with a pickle's PROTO opcode.
void check_not_legacy(uint64_t size, const ReadAt& read_at, const std::string& origin) {
  unsigned char head[2] = {0, 0};
  if (size >= 2) read_at(0, 2, reinterpret_cast<char*>(head));
  TFM_CHECK(!(head[0] == 0x80 && head[1] >= 2 && head[1] <= 5),
            origin << ": a PyTorch checkpoint in the legacy format of torch.save before PyTorch 1.6 (pickles, not a zip archive), which tfm "
                      "does not read; save it again with PyTorch 1.6 or later (torch.save(torch.load(path), path)) or as safetensors");
}

// The archive's folder (torch names it after the file: archive/, pytorch_model/, ...):
// where the one data.pkl is, one folder deep.
std::string archive_folder(const ZipArchive& zip, const std::string& origin) {
  std::string folder;
  for (const ZipEntry& e : zip.entries()) {
    const size_t slash = e.name.find('/');
    if (slash == std::string::npos || e.name.compare(slash, std::string::npos, "/data.pkl") != 0) continue;
    TFM_CHECK(folder.empty(), origin << ": the archive holds two pickles (" << folder << "/data.pkl and " << e.name << ")");
    folder = e.name.substr(0, slash);
  }
  TFM_CHECK(!folder.empty(), origin << ": a zip archive without <folder>/data.pkl, so not a PyTorch checkpoint");
  return folder;
}

// PyTorch 2.1 and later record the byte order of the storages; older files are little-endian.
void check_byte_order(const ZipArchive& zip, const std::string& folder, const std::string& origin) {
  const ZipEntry* e = zip.find(folder + "/byteorder");
  if (!e) return;
  const std::string order = zip.read(*e, 16);
  TFM_CHECK(order == "little", origin << ": its tensors are stored in '" << order << "' byte order; tfm reads little-endian ones");
}

// f64 values rounded to f32, each within f32's range.
void narrow(const std::vector<double>& wide, float* out, const std::string& key, const std::string& origin) {
  for (size_t i = 0; i < wide.size(); ++i) {
    TFM_CHECK(std::isfinite(wide[i]) && std::fabs(wide[i]) <= FLT_MAX, origin << ": storage '" << key << "' holds " << wide[i]
                                                                              << ", which is not a finite f32 value");
    out[i] = static_cast<float>(wide[i]);
  }
}

// A storage's elements, as stored (DoubleStorage's rounded to f32), once its entry is
// known to hold exactly them.
Tensor read_storage(const ZipArchive& zip, const std::string& folder, const TorchStorage& s, const std::string& origin) {
  const std::string name = folder + "/data/" + s.key;
  const ZipEntry* e = zip.find(name);
  TFM_CHECK(e, origin << ": storage '" << s.key << "' is missing from the archive (no entry " << name << ")");
  const uint64_t bytes = static_cast<uint64_t>(s.numel) * s.stored_size;
  TFM_CHECK(e->size == bytes, origin << ": storage '" << s.key << "' holds " << e->size << " bytes, not the " << bytes << " of " << s.numel
                                     << " elements of torch." << s.type);
  zip.data_offset(*e);  // within the file, before its size is allocated
  Tensor t = Tensor::empty({s.numel}, s.dtype);
  if (s.stored_size == size_of(s.dtype)) {
    zip.read(*e, static_cast<char*>(t.raw_data()));
    return t;
  }
  std::vector<double> wide(static_cast<size_t>(s.numel));
  zip.read(*e, reinterpret_cast<char*>(wide.data()));
  narrow(wide, t.data(), s.key, origin);
  return t;
}

// A tensor of its own, contiguous: the storage itself where the tensor is its one, whole,
// contiguous view; else a copy (a transposed view, storages shared by tied weights).
Tensor materialise(const TorchTensor& t, const Tensor& storage, bool shared) {
  const Tensor view = make_view(storage, t.shape, t.strides, t.offset);
  const bool whole = !shared && t.offset == 0 && view.numel() == storage.numel() && view.is_contiguous();
  return whole ? make_view(storage, t.shape, contiguous_strides(t.shape), 0) : view.clone();  // (a size-1 dimension's stride made plain)
}

SafeTensors parse(uint64_t size, const ReadAt& read_at, const std::string& origin) {
  check_not_legacy(size, read_at, origin);
  const ZipArchive zip(size, read_at, origin);
  const std::string folder = archive_folder(zip, origin);
  check_byte_order(zip, folder, origin);
  const TorchStateDict dict = unpickle_state_dict(zip.read(*zip.find(folder + "/data.pkl"), kMaxPickleBytes), origin);
  std::vector<Tensor> storages;
  std::vector<int> uses(dict.storages.size(), 0);
  // Stored entries do not overlap, so together they fit in the file: else a small file
  // could have its bytes read (and allocated) once for each of many storages.
  uint64_t total = 0;
  for (const TorchStorage& s : dict.storages) {
    total += static_cast<uint64_t>(s.numel) * s.stored_size;
    TFM_CHECK(total <= size, origin << ": its storages declare more bytes than the file's " << size << " (corrupted, or entries that overlap)");
    storages.push_back(read_storage(zip, folder, s, origin));
  }
  for (const TorchTensor& t : dict.tensors) ++uses[t.storage];
  SafeTensors out;
  for (const TorchTensor& t : dict.tensors) {
    out.tensors.emplace_back(t.name, materialise(t, storages[t.storage], uses[t.storage] > 1));
    TFM_CHECK(all_finite(out.tensors.back().second), origin << ": tensor '" << t.name << "' contains a non-finite value");
  }
  return out;
}

}  // namespace

SafeTensors read_torch_checkpoint(const std::string& path) {
  const RandomAccessFile file(path);
  return parse(file.size(), file.reader(), path);
}

SafeTensors parse_torch_checkpoint(std::string_view bytes, const std::string& origin) { return parse(bytes.size(), memory_reader(bytes), origin); }

}  // namespace tfm::io
