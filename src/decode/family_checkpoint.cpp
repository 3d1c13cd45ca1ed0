#include "decode/family_checkpoint.h"

#include "decode/hf_checkpoint.h"
#include "tensor/error.h"

namespace tfm::decode {

FamilyCheckpoint open_family_checkpoint(const std::string& path, const std::string& kind, const std::string& made_by,
                                        const std::string& spm) {
  FamilyCheckpoint c{path, read_model(path), {}, std::nullopt};
  io::Checkpoint info = io::checkpoint_info(c.file, path);
  io::check_model_kind(info.model_kind, {kind}, path, made_by);
  c.config = models::StackConfig::from_json(info.config_json, path, kind);
  io::check_holds_model(c.file, c.config.weight_floats(), path);
  if (kind != "vit") {
    auto tok = info.metadata.find("tfm.tokenizer");
    TFM_CHECK(tok != info.metadata.end(), path << ": records no tokenizer");
    c.tokenizer = data::Tokenizer::from_record(tok->second, path, spm);
  }
  return c;
}

}  // namespace tfm::decode
