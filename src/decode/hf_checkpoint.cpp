#include "decode/hf_checkpoint.h"

#include <nlohmann/json.hpp>

#include "data/tokenizer.h"
#include "data/vocab.h"
#include "decode/translation_model.h"
#include "hf/model.h"
#include "io/checkpoint.h"

namespace tfm::decode {

namespace {

// The id -> label table of config.json, in id order ("LABEL_i" where it names none).
std::vector<std::string> class_names(const hf::Directory& d, int64_t classes) {
  std::vector<std::string> names;
  const nlohmann::json labels = d.config.value("id2label", nlohmann::json::object());
  for (int64_t i = 0; i < classes; ++i) {
    const auto it = labels.find(std::to_string(i));
    names.push_back(it != labels.end() && it->is_string() ? it->get<std::string>() : "LABEL_" + std::to_string(i));
  }
  return names;
}

}  // namespace

bool is_hf_directory(const std::string& path) { return hf::is_directory(path); }

io::SafeTensors read_model(const std::string& path) { return is_hf_directory(path) ? read_hf_checkpoint(path) : io::read_safetensors(path); }

io::SafeTensors read_hf_checkpoint(const std::string& dir) {
  const hf::Directory d = hf::open(dir);
  io::SafeTensors file = hf::convert(d);
  auto& meta = file.metadata;
  const std::string kind = meta.at(io::kModelKindKey);
  if (kind == "encoder_decoder") {
    const std::string vocab_json = d.file("vocab.json");
    meta["tfm.vocab"] =
        vocab_record(data::Vocab::load_mapped(d.file("source.spm"), vocab_json), data::Vocab::load_mapped(d.file("target.spm"), vocab_json));
  } else if ((kind == "gpt" || kind == "bert") && d.has(kTfmTokenizer)) {  // written by tfm export --hf
    nlohmann::json record = d.json_file(kTfmTokenizer);
    if (record.value("type", "") == "sentencepiece") record["path"] = d.file(kTfmTokenizerModel);
    meta["tfm.tokenizer"] = data::Tokenizer::from_record(record.dump(), d.file(kTfmTokenizer)).record();
  } else if (kind == "gpt" || kind == "bert") {
    meta["tfm.tokenizer"] = data::Tokenizer::hugging_face(kind == "gpt" ? "byte_bpe" : "wordpiece", dir).record();
  } else {
    const int64_t classes = nlohmann::json::parse(meta.at(io::kConfigKey)).at("classes").get<int64_t>();
    meta["tfm.classes"] = nlohmann::json(class_names(d, classes)).dump();
  }
  return file;
}

}  // namespace tfm::decode
