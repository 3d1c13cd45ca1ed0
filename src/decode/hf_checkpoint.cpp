#include "decode/hf_checkpoint.h"

#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "data/hf_tokenizer.h"
#include "data/image_processor.h"
#include "data/tokenizer.h"
#include "data/tokenizer_json.h"
#include "decode/embedding.h"
#include "decode/family_checkpoint.h"
#include "data/vocab.h"
#include "decode/translation_model.h"
#include "hf/export.h"
#include "hf/generation.h"
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

// The image processor of preprocessor_config.json (DeiT's where the model is a deit and the
// file names none), which the classifier records and prepares images by. One whose images
// are not of the model's size, or whose mean and standard deviation are not one per channel,
// is refused. None: tfm's own (bilinear, pixels / 127.5 - 1), ViTImageProcessor's defaults.
void check_image_processor(const hf::Directory& d, int64_t image_size) {
  if (!d.has("preprocessor_config.json")) return;
  const std::string file = d.file("preprocessor_config.json");
  const data::ImageProcessor p = data::ImageProcessor::read(file, d.model_type);
  const auto [h, w] = p.output_size(image_size, image_size);
  TFM_CHECK(h == image_size && w == image_size, file << ": makes images of " << w << "x" << h << " pixels, but config.json's image_size is "
                                                     << image_size << " (the size, crop_size or do_resize is not this model's)");
  const int64_t channels = hf::setting<int64_t>(d, "num_channels", 3);
  for (const std::vector<float>* v : {&p.image_mean, &p.image_std})
    TFM_CHECK(v->size() == 1 || static_cast<int64_t>(v->size()) == channels,
              file << ": image_mean and image_std need 1 or " << channels << " values (config.json's num_channels), not " << v->size());
}

// A tokenizer of more tokens than the model's vocabulary would hand it ids it has no row
// for; an empty vocabulary file reads every word as unknown. With `exact` (BERT's
// vocab.txt, whose line count is vocab_size in every checkpoint of the family), a shorter
// one is not the model's either: its ids would name other rows.
void check_tokenizer_size(int64_t tokens, int64_t vocab, const std::string& file, bool exact = false) {
  TFM_CHECK(std::filesystem::file_size(file) > 0, file << ": is empty");
  TFM_CHECK(exact ? tokens == vocab : tokens <= vocab, file << ": holds " << tokens << " tokens, but config.json's vocabulary is " << vocab
                                                          << " (the tokenizer is not this model's)");
}

// The file of MarianTokenizer's target ids: the vocab.json both sides share, or, with
// tokenizer_config.json's separate_vocabs, target_vocab.json.
std::string marian_target_ids(const hf::Directory& d) {
  if (!data::TokenizerConfig::read(d.file("tokenizer_config.json")).flag("separate_vocabs", false)) return d.file("vocab.json");
  TFM_CHECK(d.has("target_vocab.json"),
            d.file("tokenizer_config.json") << ": says separate_vocabs, but the directory has no target_vocab.json (the target side's ids)");
  return d.file("target_vocab.json");
}

// A sentence-transformers Pooling module's mode (its config.json): one of CLS, mean and
// max; the other modes, or several at once (their vectors concatenated), are refused.
Pooling pooling_module(const hf::Directory& d, const std::string& config) {
  const nlohmann::json c = d.json_file(config);
  std::vector<std::string> modes;
  for (const auto& [key, on] : c.items())
    if (key.starts_with("pooling_mode_") && on == true) modes.push_back(key);
  const std::map<std::string, Pooling> known = {
      {"pooling_mode_cls_token", Pooling::cls}, {"pooling_mode_mean_tokens", Pooling::mean}, {"pooling_mode_max_tokens", Pooling::max}};
  TFM_CHECK(modes.size() == 1 && known.count(modes[0]), d.file(config) << ": pooling " << (modes.empty() ? "none" : nlohmann::json(modes).dump())
                                                                        << " is not supported (tfm pools by one of pooling_mode_cls_token, "
                                                                           "pooling_mode_mean_tokens and pooling_mode_max_tokens)");
  return known.at(modes[0]);
}

// How a sentence-transformers directory (modules.json) embeds: its Transformer module at
// the directory's root (the model tfm reads), a Pooling module, a Normalize module where
// it has one. Modules tfm does not compute (Dense, LayerNorm, ...) are refused by name.
SentenceEmbedding sentence_transformers(const hf::Directory& d) {
  SentenceEmbedding e;
  bool pooled = false;
  for (const nlohmann::json& m : d.json_file("modules.json")) {
    const std::string type = m.value("type", ""), path = m.value("path", "");
    if (type == "sentence_transformers.models.Transformer") {
      TFM_CHECK(path.empty(), d.file("modules.json") << ": the Transformer module is in " << path << "/; give tfm that folder");
    } else if (type == "sentence_transformers.models.Pooling") {
      e.pool = pooling_module(d, path + "/config.json"), pooled = true;
    } else if (type == "sentence_transformers.models.Normalize") {
      e.normalize = true;
    } else {
      throw Error(d.file("modules.json") + ": module " + type + " is not supported (tfm computes Transformer, Pooling and Normalize)");
    }
  }
  TFM_CHECK(pooled, d.file("modules.json") << ": has no Pooling module");
  if (d.has("sentence_bert_config.json")) {
    const nlohmann::json c = d.json_file("sentence_bert_config.json");
    TFM_CHECK(c.value("do_lower_case", false) == false,
              d.file("sentence_bert_config.json") << ": do_lower_case true is not supported (lowercase the text first, or use an uncased tokenizer)");
    if (c.contains("max_seq_length") && c["max_seq_length"].is_number_integer()) e.max_tokens = c["max_seq_length"].get<int64_t>();
  }
  return e;
}

// The tokenizer of an mbart directory: MBart50Tokenizer (mBART-25's MBartTokenizer puts the
// language after the text, and is refused by name).
std::string mbart_tokenizer(const std::string& named, const std::string& config) {
  TFM_CHECK(named.empty() || named.starts_with("MBart50"),
            config << ": tokenizer_class " << named << " is not MBart50Tokenizer (tfm reads mBART-50's; mBART-25's MBartTokenizer is not supported)");
  return "mbart50";
}

// An M2M100, NLLB or mBART-50 directory's vocabulary, both sides': M2M100Tokenizer's
// (vocab.json beside the SentencePiece model), NllbTokenizer's or MBart50Tokenizer's, as
// the model type and tokenizer_config.json name it.
data::Vocab fairseq_vocab(const hf::Directory& d) {
  const std::string config = d.file("tokenizer_config.json"), spm = d.file("sentencepiece.bpe.model");
  TFM_CHECK(d.has("sentencepiece.bpe.model"), spm << ": is missing (an M2M100, NLLB or mBART-50 tokenizer's SentencePiece model; tfm does not "
                                                     "read tokenizer.json alone for these)");
  const std::string named = d.has("tokenizer_config.json") ? data::TokenizerConfig::read(config).json().value("tokenizer_class", std::string()) : "";
  if (d.model_type == "mbart") return data::Vocab::load_fairseq(mbart_tokenizer(named, config), spm, "", config);
  const bool nllb = named.starts_with("Nllb") || (named.empty() && !d.has("vocab.json"));
  TFM_CHECK(nllb || named.empty() || named.starts_with("M2M100"), config << ": tokenizer_class " << named << " is not M2M100Tokenizer or NllbTokenizer");
  return data::Vocab::load_fairseq(nllb ? "nllb" : "m2m100", spm, nllb ? "" : d.file("vocab.json"), config);
}

// The Llama family's tokenizer (tokenizer.json's BPE, with tokenizer_config.json's chat
// template), ending texts where generate() would. Without tokenizer.json, such a model
// generates from token ids.
data::Tokenizer llama_tokenizer(const hf::Directory& d, int64_t vocab) {
  data::Tokenizer t = data::Tokenizer::hugging_face("bpe", d.path);
  check_tokenizer_size(t.size(), vocab, d.file("tokenizer.json"));
  std::vector<int> ends = hf::end_tokens(d);
  for (int id : ends)
    TFM_CHECK(id < t.size(), d.file(d.has("generation_config.json") ? "generation_config.json" : "config.json")
                                 << ": the end token " << id << " is beyond the tokenizer's " << t.size() << " tokens");
  t.set_ends(std::move(ends));
  return t;
}

}  // namespace

bool is_hf_directory(const std::string& path) { return hf::is_directory(path); }

io::SafeTensors read_model(const std::string& path) { return is_hf_directory(path) ? read_hf_checkpoint(path) : io::read_weights(path); }

io::SafeTensors read_hf_checkpoint(const std::string& dir) {
  const hf::Directory d = hf::open(dir);
  io::SafeTensors file = hf::convert(d);
  auto& meta = file.metadata;
  const std::string kind = meta.at(io::kModelKindKey);
  const nlohmann::json config = nlohmann::json::parse(meta.at(io::kConfigKey));
  if (kind == "encoder_decoder" && (d.model_type == "m2m_100" || d.model_type == "mbart")) {
    const data::Vocab v = fairseq_vocab(d);
    check_tokenizer_size(v.size(), config.at("src_vocab").get<int64_t>(), v.path());
    meta["tfm.vocab"] = vocab_record(v, v);
  } else if (kind == "encoder_decoder") {
    const std::string src_json = d.file("vocab.json"), tgt_json = marian_target_ids(d);
    const data::Vocab src = data::Vocab::load_mapped(d.file("source.spm"), src_json), tgt = data::Vocab::load_mapped(d.file("target.spm"), tgt_json);
    check_tokenizer_size(src.size(), config.at("src_vocab").get<int64_t>(), src_json);
    check_tokenizer_size(tgt.size(), config.at("tgt_vocab").get<int64_t>(), tgt_json);
    meta["tfm.vocab"] = vocab_record(src, tgt);
  } else if ((kind == "gpt" || kind == "bert") && d.has(kTfmTokenizer)) {  // written by tfm export --hf
    nlohmann::json record = d.json_file(kTfmTokenizer);
    if (record.value("type", "") == "sentencepiece") record["path"] = d.file(kTfmTokenizerModel);
    meta["tfm.tokenizer"] = data::Tokenizer::from_record(record.dump(), d.file(kTfmTokenizer)).record();
  } else if (kind == "gpt" && d.model_type != "gpt2") {
    if (d.has("tokenizer.json")) meta["tfm.tokenizer"] = llama_tokenizer(d, config.at("vocab").get<int64_t>()).record();
  } else if (kind == "gpt" || kind == "bert") {
    const data::Tokenizer t = data::Tokenizer::hugging_face(kind == "gpt" ? "byte_bpe" : "wordpiece", dir);
    check_tokenizer_size(t.size(), config.at("vocab").get<int64_t>(), data::tokenizer_file(dir, kind == "gpt" ? "vocab.json" : "vocab.txt"),
                         kind == "bert");
    meta["tfm.tokenizer"] = t.record();
  }
  if (kind == "gpt" && d.model_type != "gpt2") meta[hf::kSourceKey] = hf::source_record(d).dump();  // what export writes back
  if (kind == "bert" && config.contains("classes")) meta[kTextLabelsKey] = classes_record(class_names(d, config.at("classes").get<int64_t>()));
  if (kind == "bert" && d.has("modules.json")) meta[kSentenceEmbeddingKey] = sentence_embedding_record(sentence_transformers(d));
  if (kind == "vit") {
    check_image_processor(d, config.at("image_size").get<int64_t>());
    // Its labels; images resized, unless tfm exported it from MNIST-style files' training.
    const bool mnist_style = d.config.value("tfm_mnist_style", nlohmann::json(false)) == true;
    const int64_t classes = config.at("classes").get<int64_t>();  // 0: a base, which has none
    if (classes > 0) meta[mnist_style ? kIdxClassesKey : kImageFolderKey] = classes_record(class_names(d, classes));
    if (d.has("preprocessor_config.json"))  // (checked above)
      meta[kImageProcessorKey] = data::ImageProcessor::read(d.file("preprocessor_config.json"), d.model_type).to_json();
  }
  return file;
}

}  // namespace tfm::decode
