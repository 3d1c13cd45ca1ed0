#include "decode/translation_model.h"

#include "decode/hf_checkpoint.h"
#include <nlohmann/json.hpp>

#include "io/checkpoint.h"
#include "tensor/error.h"

namespace tfm::decode {

namespace {

data::Vocab checked_vocab(const nlohmann::json& record, const char* side, const std::string& given, const std::string& model) {
  TFM_CHECK(record.contains(side), model << ": records no " << side << " vocabulary; is it a translation checkpoint?");
  const uint32_t crc32 = record[side]["crc32"].get<uint32_t>();
  if (record[side].contains("fairseq")) {  // an M2M100, NLLB or mBART-50 model's: its files, where the directory has them
    const nlohmann::json& r = record[side];
    data::Vocab v = data::Vocab::load_fairseq(r["fairseq"].get<std::string>(), given.empty() ? r["path"].get<std::string>() : given,
                                              r.value("vocab_json", std::string()), r["tokenizer_config"].get<std::string>());
    TFM_CHECK(v.checksum() == crc32, v.path() << ": is not the " << side << " vocabulary " << model << " was converted with (checksum differs)");
    return v;
  }
  if (record[side].contains("vocab_json")) {  // a Hugging Face Marian model's: its files, where the directory has them
    data::Vocab v = data::Vocab::load_mapped(given.empty() ? record[side]["path"].get<std::string>() : given,
                                             record[side]["vocab_json"].get<std::string>());
    TFM_CHECK(v.checksum() == crc32, v.path() << ": is not the " << side << " vocabulary " << model << " was converted with (checksum differs)");
    return v;
  }
  const std::string option = side == std::string("src") ? "src_vocab" : "tgt_vocab";
  if (given.empty())
    return data::load_recorded_vocab(record[side]["path"].get<std::string>(), crc32, model,
                                     "the file with --" + std::string(side) + "-vocab (TranslatorOptions::" + option + " in the library)");
  data::Vocab v = data::Vocab::load(given);
  TFM_CHECK(v.checksum() == crc32, given << ": is not the " << side << " vocabulary " << model << " was trained with (checksum differs)");
  return v;
}

}  // namespace

namespace {

nlohmann::json side_record(const data::Vocab& v) {
  nlohmann::json j = {{"path", v.path()}, {"crc32", v.checksum()}};
  if (!v.mapping_path().empty()) j["vocab_json"] = v.mapping_path();  // a Hugging Face Marian or M2M100 model's
  if (!v.fairseq_kind().empty()) j["fairseq"] = v.fairseq_kind(), j["tokenizer_config"] = v.tokenizer_config_path();
  return j;
}

}  // namespace

std::string vocab_record(const data::Vocab& src, const data::Vocab& tgt) {
  return nlohmann::json{{"src", side_record(src)}, {"tgt", side_record(tgt)}}.dump();
}

data::Vocab recorded_vocab(const io::Checkpoint& info, const char* side, const std::string& given, const std::string& origin) {
  TFM_CHECK(info.metadata.count("tfm.vocab"),
            origin << ": records no vocabularies; translation needs a checkpoint from `tfm train --train-src ...`");
  try {
    return checked_vocab(nlohmann::json::parse(info.metadata.at("tfm.vocab")), side, given, origin);
  } catch (const nlohmann::json::exception&) {  // malformed, or fields of the wrong type
    throw Error(origin + ": the vocabulary record in the metadata is malformed");
  }
}

TranslationModel TranslationModel::load(const std::string& checkpoint, const std::string& src_vocab, const std::string& tgt_vocab) {
  io::SafeTensors file = read_model(checkpoint);
  io::Checkpoint info = io::checkpoint_info(file, checkpoint);
  io::check_model_kind(info.model_kind, {"encoder_decoder"}, checkpoint, "a translation one");
  TranslationModel m;
  m.src_vocab = recorded_vocab(info, "src", src_vocab, checkpoint);
  m.tgt_vocab = recorded_vocab(info, "tgt", tgt_vocab, checkpoint);
  const models::TransformerConfig config = models::TransformerConfig::from_json(info.config_json, checkpoint);
  io::check_holds_model(file, config.weight_floats(), checkpoint);
  m.model = std::make_unique<models::EncoderDecoder>(config);
  io::load_parameters(m.model->named_parameters(), file, checkpoint);
  m.model->eval();
  return m;
}

}  // namespace tfm::decode
