#include "decode/hf_export.h"

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "data/tokenizer.h"
#include "decode/family_checkpoint.h"
#include "decode/hf_checkpoint.h"
#include "decode/translation_model.h"
#include "hf/export.h"
#include "io/checkpoint.h"
#include "io/output_file.h"
#include "models/gpt.h"
#include "models/lora.h"
#include "tensor/error.h"

namespace tfm::decode {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

void copy_file(const std::string& from, const std::string& to) {
  std::ifstream in(from, std::ios::binary);
  TFM_CHECK(in, from << ": cannot read");
  std::stringstream bytes;
  bytes << in.rdbuf();
  io::write_file_atomic(to, bytes.str());
}

// A Marian side's ids as a vocab.json: the one it was read through, or (tfm's own
// vocabularies) its SentencePiece model's.
void write_ids(const data::Vocab& v, const std::string& path) {
  if (!v.mapping_path().empty()) return copy_file(v.mapping_path(), path);
  json vocab = json::object();
  for (int id = 0; id < v.size(); ++id) vocab[v.piece(id)] = id;
  io::write_file_atomic(path, vocab.dump(2));
}

// An M2M100 or NLLB tokenizer's files as they were read: the SentencePiece model,
// M2M100's vocab.json, and the configuration files beside tokenizer_config.json.
void write_fairseq_tokenizer(const data::Vocab& v, const std::string& dir) {
  copy_file(v.path(), dir + "/sentencepiece.bpe.model");
  if (!v.mapping_path().empty()) copy_file(v.mapping_path(), dir + "/vocab.json");
  const fs::path from = fs::path(v.tokenizer_config_path()).parent_path();
  for (const char* f : {"tokenizer_config.json", "special_tokens_map.json", "added_tokens.json"})
    if (fs::exists(from / f)) copy_file((from / f).string(), dir + "/" + f);
}

// Marian's tokenizer files: the two SentencePiece models and the vocab.json they share,
// or, for a model without shared embeddings, each side's (target_vocab.json, which
// tokenizer_config.json's separate_vocabs names).
void write_marian_tokenizer(const io::Checkpoint& info, const std::string& checkpoint, const std::string& dir) {
  const data::Vocab src = recorded_vocab(info, "src", "", checkpoint), tgt = recorded_vocab(info, "tgt", "", checkpoint);
  if (!src.fairseq_kind().empty()) return write_fairseq_tokenizer(src, dir);
  copy_file(src.path(), dir + "/source.spm");
  copy_file(tgt.path(), dir + "/target.spm");
  write_ids(src, dir + "/vocab.json");
  if (models::TransformerConfig::from_json(info.config_json, checkpoint).share_embeddings) return;
  write_ids(tgt, dir + "/target_vocab.json");
  io::write_file_atomic(dir + "/tokenizer_config.json", json{{"separate_vocabs", true}, {"tokenizer_class", "MarianTokenizer"}}.dump(2) + "\n");
}

// A Hugging Face tokenizer's files as they are; tfm's own as tfm_tokenizer.json.
void write_stack_tokenizer(const io::Checkpoint& info, const std::string& checkpoint, const std::string& dir) {
  TFM_CHECK(info.metadata.count("tfm.tokenizer"), checkpoint << ": records no tokenizer");
  json record = json::parse(info.metadata.at("tfm.tokenizer"));
  const std::string type = record.value("type", "");
  if (type == "byte_bpe" || type == "wordpiece" || type == "bpe") {
    const std::string from = record.at("path").get<std::string>();
    for (const char* f : {"tokenizer.json", "vocab.json", "merges.txt", "vocab.txt", "tokenizer_config.json", "special_tokens_map.json"})
      if (fs::exists(from + "/" + f)) copy_file(from + "/" + f, dir + "/" + f);
    return;
  }
  if (type == "sentencepiece") {  // the model travels with the directory, named relative to it
    const data::Tokenizer t = data::Tokenizer::from_record(record.dump(), checkpoint);
    copy_file(t.sentencepiece_path(), dir + "/" + kTfmTokenizerModel);
    record["path"] = kTfmTokenizerModel;
  }
  io::write_file_atomic(dir + "/" + kTfmTokenizer, record.dump(2));
}

// A classifier's labels: a ViT's classes, a BERT classifier's labels.
hf::Labels labels_of(const io::Checkpoint& info, const std::string& checkpoint) {
  if (info.model_kind != "vit" && info.model_kind != "bert") return {};
  const models::StackConfig c = models::StackConfig::from_json(info.config_json, checkpoint, info.model_kind);
  if (info.model_kind == "bert") return {c.classifies_text() ? recorded_text_labels(info.metadata, c.classes, checkpoint) : std::vector<std::string>{}};
  const VitClasses classes = recorded_vit_classes(info.metadata, c.classes, checkpoint);
  return {classes.names, !classes.resizes};
}

// A language model's weights with the adapter `lora` merged: W + (alpha / r) B A.
io::NamedTensors merged(const io::Checkpoint& info, const io::SafeTensors& file, const std::string& checkpoint, const std::string& lora) {
  TFM_CHECK(info.model_kind == "gpt", lora << ": LoRA adapters are for language models; " << checkpoint << " is a " << info.model_kind << " model");
  models::GPT model(models::StackConfig::from_json(info.config_json, checkpoint, "gpt"));
  io::load_parameters(model.named_parameters(), file, checkpoint);
  models::merge_lora_adapter(model, lora);
  return model.named_parameters();
}

}  // namespace

void export_hf(const std::string& checkpoint, const std::string& dir, const std::string& lora) {
  TFM_CHECK(!fs::exists(dir) || fs::is_directory(dir), dir << ": is a file; --hf names a directory to create");
  TFM_CHECK(!fs::exists(dir) || fs::is_empty(dir),
            dir << ": exists and is not an empty directory; tfm export --hf writes a new one (nothing is overwritten)");
  const io::SafeTensors file = read_model(checkpoint);
  const io::Checkpoint info = io::checkpoint_info(file, checkpoint);
  models::refuse_lora_checkpoint(info.metadata, checkpoint);
  io::NamedTensors params;
  for (const auto& [name, t] : file.tensors)
    if (name.rfind(io::kOptimizerPrefix, 0) != 0) params.emplace_back(name, t);
  if (!lora.empty()) params = merged(info, file, checkpoint, lora);
  const auto source = info.metadata.find(hf::kSourceKey);  // a Llama-family directory's model_type and token ids
  const json read_from = source == info.metadata.end() ? json::object() : json::parse(source->second);
  hf::Exported e = hf::export_model(info.model_kind, info.config_json, params, labels_of(info, checkpoint), checkpoint, read_from);
  const auto tokenizer = info.metadata.find("tfm.tokenizer");
  if (info.model_kind == "gpt" && tokenizer != info.metadata.end() && read_from.empty()) {  // generation ends at the end of text, where the tokenizer has one
    const int end = data::Tokenizer::from_record(tokenizer->second, checkpoint).end_of_text();
    if (end >= 0) e.json_files["config.json"].update({{"bos_token_id", end}, {"eos_token_id", end}});
  }
  const auto processor = info.metadata.find(kImageProcessorKey);  // a Hugging Face ViT's own, DeiT's or ImageNet's mean included
  if (processor != info.metadata.end()) e.json_files["preprocessor_config.json"] = nlohmann::json::parse(processor->second);
  io::create_directories(dir);
  for (const auto& [name, j] : e.json_files) io::write_file_atomic(dir + "/" + name, j.dump(2) + "\n");
  io::write_safetensors(dir + "/model.safetensors", e.tensors, {{"format", "pt"}});  // transformers wants the format named
  if (info.model_kind == "encoder_decoder") write_marian_tokenizer(info, checkpoint, dir);
  else if (info.model_kind != "vit" && (tokenizer != info.metadata.end() || read_from.empty()))  // (a Llama-family model may run from ids)
    write_stack_tokenizer(info, checkpoint, dir);
}

}  // namespace tfm::decode
