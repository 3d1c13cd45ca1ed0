#pragma once
// PyTorch checkpoints as torch.save writes them since PyTorch 1.6 (Hugging Face's
// pytorch_model.bin and its shards): a zip archive of <folder>/data.pkl, the state dict's
// pickle (read by io/torch_pickle's restricted reader, which runs nothing), and
// <folder>/data/<key>, each storage's little-endian bytes. The tensors come out as the
// safetensors reader gives them: contiguous, each its own copy, in its own dtype (f32,
// f16, bf16 and the integer ones; f64 rounded to f32), finite. A file of the legacy
// format (torch.save before PyTorch 1.6) is refused by name.
#include <string>
#include <string_view>

#include "io/safetensors.h"

namespace tfm::io {

// Throws tfm::Error naming the file and the first problem found.
SafeTensors read_torch_checkpoint(const std::string& path);
SafeTensors parse_torch_checkpoint(std::string_view bytes, const std::string& origin);

}  // namespace tfm::io
