#include "tfm/checkpoint.h"

#include "decode/hf_checkpoint.h"
#include "io/checkpoint.h"
#include "io/safetensors.h"
#include "ops/convert.h"
#include "tensor/error.h"

namespace tfm {

Checkpoint read_checkpoint(const std::string& path) {
  io::SafeTensors file = decode::is_hf_directory(path) ? decode::read_hf_checkpoint(path) : io::read_safetensors(path);  // (every tensor)
  Checkpoint c;
  c.metadata = std::move(file.metadata);
  c.metadata.erase("tfm.crc32");  // checked on reading, made anew on writing
  for (const auto& [name, tensor] : file.tensors) {
    const bool floats = tensor.dtype() == DType::f32 || tensor.dtype() == DType::bf16 || tensor.dtype() == DType::f16;
    TFM_CHECK(floats, path << ": tensor '" << name << "' holds " << to_string(tensor.dtype())
                           << " values; read_checkpoint reads floating-point tensors (a model's weights) as float32");
    c.tensors[name] = {tensor.shape(), ops::to(tensor, DType::f32).to_vector()};  // (16-bit floats widen exactly)
  }
  return c;
}

void write_checkpoint(const std::string& path, const Checkpoint& checkpoint) {
  io::NamedTensors tensors;
  for (const auto& [name, array] : checkpoint.tensors) {
    for (int64_t d : array.shape) TFM_CHECK(d >= 0, path << ": tensor '" << name << "' has a negative dimension");
    TFM_CHECK(shape_numel(array.shape) == static_cast<int64_t>(array.values.size()),
              path << ": tensor '" << name << "' has " << array.values.size() << " values for shape " << shape_str(array.shape));
    tensors.emplace_back(name, Tensor::from_vector(array.shape, array.values));
  }
  io::write_safetensors(path, tensors, checkpoint.metadata);
}

std::string checkpoint_family(const std::string& path) {
  const io::Checkpoint info = io::checkpoint_info(decode::read_model(path), path);
  io::check_model_kind(info.model_kind, {"encoder_decoder", "gpt", "bert", "vit"}, path, "a translation, gpt, bert or vit one");
  return io::kind_name(info.model_kind);
}

}  // namespace tfm
