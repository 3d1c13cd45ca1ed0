// The BERT checkpoints people download besides the masked-LM ones (tests/fixtures/hf,
// made by tests/reference/make_hf_bert_fixtures.py with transformers 4.39): a bare
// BertModel laid out as a sentence-transformers directory, sentence classifiers (one
// softmax, and multi-label sigmoids), a token classifier, a BertForMaskedLM without a
// pooler. Each computes what transformers computed (1e-4 of the largest magnitude; the
// sentence vectors 1e-5), through the model, the library, the command line and a round
// trip through `tfm convert` and `tfm export`; what tfm does not compute is refused in
// one line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "decode/entities.h"
#include "hf/directory.h"
#include "hf/model.h"
#include "io/checkpoint.h"
#include "models/bert.h"
#include "ops/convert.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/fixture.h"
#include "support/process.h"
#include "tfm/encoder.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;
constexpr double kTol = 1e-4;

std::string fixture(const std::string& name) { return testing::fixture_path("hf/" + name); }

// A fixture directory: its reference tensors and reference.json.
struct Reference {
  io::SafeTensors tensors;
  nlohmann::json json;
  explicit Reference(const std::string& dir)
      : tensors(io::read_safetensors(dir + "/reference.safetensors")), json(nlohmann::json::parse(std::ifstream(dir + "/reference.json"))) {}
  const Tensor& operator[](const std::string& name) const {
    const Tensor* t = tensors.find(name);
    if (!t) throw Error("reference.safetensors has no '" + name + "'");
    return *t;
  }
  std::vector<std::string> texts() const {
    std::vector<std::string> out;
    for (const nlohmann::json& c : json["cases"]) out.push_back(c["text"]);
    return out;
  }
  models::Tokens tokens(int i) const {
    models::Tokens t;
    t.ids = ops::to((*this)["s" + std::to_string(i) + ".input_ids"], DType::i32);
    return t;
  }
};

// The directory's model, converted and loaded, in evaluation mode.
std::unique_ptr<models::BERT> load(const std::string& dir) {
  const io::SafeTensors file = hf::convert(hf::open(dir));
  auto model = std::make_unique<models::BERT>(models::StackConfig::from_json(io::checkpoint_info(file, dir).config_json, dir, "bert"), 0);
  io::load_parameters(model->named_parameters(), file, dir);
  model->eval();
  return model;
}

// A copy of a fixture whose files `edit` changes, for the refusals.
std::string edited_copy(const testing::TempDir& tmp, const std::string& name, const std::function<void(const std::string&)>& edit) {
  const std::string dir = tmp.path(name);
  fs::copy(fixture(name), dir, fs::copy_options::recursive);
  edit(dir);
  return dir;
}

void edit_json(const std::string& file, const std::function<void(nlohmann::json&)>& edit) {
  nlohmann::json j = nlohmann::json::parse(std::ifstream(file));
  edit(j);
  std::ofstream(file) << j.dump(2);
}

TEST(HfBertHeads, ABareBertModelGivesTransformersHiddenStatesAndPooler) {
  const std::string dir = fixture("bert_sentence_tiny");
  const Reference ref(dir);
  const std::unique_ptr<models::BERT> owned = load(dir);
  models::BERT& model = *owned;
  EXPECT_EQ(model.config().head, "none");
  EXPECT_FALSE(model.mlm_dense);
  for (int i = 0; i < 4; ++i) {
    const std::string s = "s" + std::to_string(i);
    const Tensor hidden = model.encode(ref.tokens(i));
    EXPECT_TENSOR_NEAR(s + ".last_hidden_state", hidden, ref[s + ".last_hidden_state"], kTol);
    EXPECT_TENSOR_NEAR(s + ".pooler_output", model.pooled(hidden), ref[s + ".pooler_output"], kTol);
  }
}

// sentence-transformers' vector: modules.json's mean pooling over every token, its
// Normalize module, its max_seq_length (12: the last sentence is cut), as `embed` with the
// model's own pooling gives it; an explicit pool overrides the directory's.
TEST(HfBertHeads, SentenceTransformersDirectoriesEmbedAsSentenceTransformersDoes) {
  const std::string dir = fixture("bert_sentence_tiny");
  const Reference ref(dir);
  const Encoder encoder(dir);
  const std::vector<std::string> texts = ref.texts();
  const Embeddings e = encoder.embed(texts);
  EXPECT_EQ(e.truncated, 3);  // (sentences of 12 tokens and more: the reference ids show them cut)
  for (size_t i = 0; i < texts.size(); ++i) {
    const Tensor got = Tensor::from_vector({1, e.dim}, std::vector<float>(e.values.begin() + i * e.dim, e.values.begin() + (i + 1) * e.dim));
    EXPECT_TENSOR_NEAR("s" + std::to_string(i), got, ref["s" + std::to_string(i) + ".sentence_embedding"], 1e-5);
  }
  const Embeddings cls = encoder.embed({texts[0]}, "cls");
  double squares = 0;
  for (float v : cls.values) squares += v * v;
  EXPECT_NEAR(squares, 1.0, 1e-5);  // the Normalize module applies to any pooling
  EXPECT_NE(cls.values, std::vector<float>(e.values.begin(), e.values.begin() + e.dim));
}

TEST(HfBertHeads, SentenceClassifiersGiveTransformersProbabilitiesAndLabels) {
  for (const char* name : {"bert_sequence_tiny", "bert_multilabel_tiny"}) {
    SCOPED_TRACE(name);
    const std::string dir = fixture(name);
    const Reference ref(dir);
    const Encoder encoder(dir);
    EXPECT_EQ(encoder.head(), "sequence");
    EXPECT_EQ(encoder.multi_label(), std::string(name) == "bert_multilabel_tiny");
    const SentenceLabels k = encoder.classify(ref.texts());
    ASSERT_EQ(k.count, 4);
    for (int64_t i = 0; i < k.count; ++i) {
      const std::string s = "s" + std::to_string(i);
      const Tensor p = Tensor::from_vector({1, k.classes}, std::vector<float>(k.probabilities.begin() + i * k.classes,
                                                                              k.probabilities.begin() + (i + 1) * k.classes));
      EXPECT_TENSOR_NEAR(s + ".probabilities", p, ref[s + ".probabilities"], kTol);
      EXPECT_EQ(encoder.labels()[static_cast<size_t>(k.labels[i])], ref.json["cases"][i]["label"]);
    }
  }
}

TEST(HfBertHeads, TokenClassifiersGiveTransformersLogitsAndEachWordsFirstPieceLabel) {
  const std::string dir = fixture("bert_token_tiny");
  const Reference ref(dir);
  const std::unique_ptr<models::BERT> owned = load(dir);
  models::BERT& model = *owned;
  EXPECT_FALSE(model.pooler);
  for (int i = 0; i < 4; ++i)
    EXPECT_TENSOR_NEAR("s" + std::to_string(i) + ".logits", model.classify(model.encode(ref.tokens(i))),
                       ref["s" + std::to_string(i) + ".logits"], kTol);
  const Encoder encoder(dir);
  const std::vector<TaggedSentence> tagged = encoder.tag(ref.texts());
  for (size_t i = 0; i < tagged.size(); ++i) {
    const nlohmann::json& words = ref.json["cases"][i]["words"];
    ASSERT_EQ(tagged[i].words.size(), words.size()) << i;
    for (size_t w = 0; w < words.size(); ++w) {
      EXPECT_EQ(tagged[i].words[w].text, words[w]["word"]) << i << " " << w;
      EXPECT_EQ(encoder.labels()[static_cast<size_t>(tagged[i].words[w].label)], words[w]["label"]) << i << " " << w;
    }
    EXPECT_FALSE(tagged[i].entities.empty());
  }
}

TEST(HfBertHeads, AMaskedLmWithoutPoolerGivesTransformersLogits) {
  const std::string dir = fixture("bert_mlm_tiny");
  const Reference ref(dir);
  const std::unique_ptr<models::BERT> owned = load(dir);
  models::BERT& model = *owned;
  EXPECT_FALSE(model.pooler);
  for (int i = 0; i < 2; ++i) {
    const models::Tokens ids = ref.tokens(i);
    const Tensor logits = model.mlm_logits(ops::reshape(model.encode(ids), {ids.cols(), -1}));
    EXPECT_TENSOR_NEAR("s" + std::to_string(i), ops::reshape(logits, {1, ids.cols(), -1}), ref["s" + std::to_string(i) + ".logits"], kTol);
  }
}

// transformers' grouping (IOB2): B- starts, I- of the open type continues, O ends; an
// I- of another type, or an unprefixed label, starts an entity of its own.
TEST(HfBertHeads, EntitiesAreGroupedAsTransformersGroupsThem) {
  using decode::EntitySpan;
  using decode::group_entities;
  EXPECT_EQ(group_entities({"B-PER", "I-PER", "O", "B-LOC"}), (std::vector<EntitySpan>{{"PER", 0, 2}, {"LOC", 3, 4}}));
  EXPECT_EQ(group_entities({"B-PER", "B-PER", "I-PER"}), (std::vector<EntitySpan>{{"PER", 0, 1}, {"PER", 1, 3}}));
  EXPECT_EQ(group_entities({"I-LOC", "I-LOC", "I-PER", "O", "I-PER"}),
            (std::vector<EntitySpan>{{"LOC", 0, 2}, {"PER", 2, 3}, {"PER", 4, 5}}));
  EXPECT_EQ(group_entities({"PER", "PER", "O"}), (std::vector<EntitySpan>{{"PER", 0, 2}}));
  EXPECT_EQ(group_entities({"O", "O"}), (std::vector<EntitySpan>{}));
}

// `tfm convert` keeps the head, the labels and the sentence-transformers modules, and
// `tfm export --hf` writes the architecture, id2label and the tensors under the names
// transformers reads.
TEST(HfBertHeads, ConvertAndExportKeepHeadsLabelsAndPooling) {
  const testing::TempDir tmp;
  for (const char* name : {"bert_sequence_tiny", "bert_token_tiny", "bert_sentence_tiny", "bert_multilabel_tiny"}) {
    SCOPED_TRACE(name);
    const std::string file = tmp.path(std::string(name) + ".safetensors"), back = tmp.path(std::string(name) + "_hf");
    ASSERT_EQ(testing::run_tfm("convert --model " + fixture(name) + " -o " + file).code, 0);
    ASSERT_EQ(testing::run_tfm("export --model " + file + " --hf " + back).code, 0);
    const Reference ref(fixture(name));
    const std::vector<std::string> texts = ref.texts();
    const Encoder original(fixture(name)), converted(file), exported(back);
    if (original.head() == "none") {
      EXPECT_EQ(converted.embed(texts).values, original.embed(texts).values);
    } else if (original.head() == "sequence") {
      EXPECT_EQ(converted.classify(texts).probabilities, original.classify(texts).probabilities);
      EXPECT_EQ(exported.classify(texts).probabilities, original.classify(texts).probabilities);
    } else {
      EXPECT_EQ(converted.tag(texts)[3].words.size(), original.tag(texts)[3].words.size());
    }
    EXPECT_EQ(exported.labels(), original.labels());
    const nlohmann::json a = nlohmann::json::parse(std::ifstream(fixture(name) + "/config.json")),
                         b = nlohmann::json::parse(std::ifstream(back + "/config.json"));
    EXPECT_EQ(b["architectures"], a["architectures"]);
    if (a.contains("id2label")) EXPECT_EQ(b["id2label"], a["id2label"]);
    std::vector<std::string> names_a, names_b;
    for (const auto& [n, t] : io::read_safetensors(fixture(name) + "/model.safetensors").tensors) names_a.push_back(n);
    for (const auto& [n, t] : io::read_safetensors(back + "/model.safetensors").tensors) names_b.push_back(n);
    std::sort(names_a.begin(), names_a.end()), std::sort(names_b.begin(), names_b.end());
    names_a.erase(std::remove(names_a.begin(), names_a.end(), "embeddings.position_ids"), names_a.end());
    EXPECT_EQ(names_b, names_a);
  }
}

TEST(HfBertHeads, ClassifyPrintsLabelsAndEntitiesAndRefusesAnEncoderWithoutClassifier) {
  const testing::TempDir tmp;
  std::ofstream(tmp.path("s.txt")) << "A man sleeps on the bench.\nJohn Smith lives in London.\n";
  const testing::CliResult sentences = testing::run_tfm("classify " + fixture("bert_sequence_tiny") + " -i " + tmp.path("s.txt") + " --all");
  ASSERT_EQ(sentences.code, 0) << sentences.output;
  EXPECT_EQ(std::count(sentences.output.begin(), sentences.output.end(), '\n'), 2);
  EXPECT_EQ(sentences.output.rfind("NEUTRAL\t0.45", 0), 0u) << sentences.output;
  EXPECT_NE(sentences.output.find("NEGATIVE="), std::string::npos);
  const testing::CliResult json = testing::run_tfm("classify " + fixture("bert_token_tiny") + " --format json -i " + tmp.path("s.txt") + " 2>/dev/null");
  ASSERT_EQ(json.code, 0) << json.output;
  const nlohmann::json first = nlohmann::json::parse(json.output.substr(0, json.output.find('\n')));
  EXPECT_EQ(first["words"].size(), 7u);
  EXPECT_FALSE(first["entities"].empty());
  const testing::CliResult refused = testing::run_tfm("classify " + fixture("bert_sentence_tiny") + " -i " + tmp.path("s.txt"));
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.output.find("is not a classifier (its head is none)"), std::string::npos) << refused.output;
}

// What tfm does not compute, refused in one line naming it.
TEST(HfBertHeads, UnsupportedHeadsAndModulesAreRefusedByName) {
  const testing::TempDir tmp;
  const auto refusal = [&](const std::string& name, const std::string& file, const std::function<void(nlohmann::json&)>& edit) {
    const std::string dir = edited_copy(tmp, name, [&](const std::string& d) { edit_json(d + "/" + file, edit); });
    const std::string message = testing::error_of([&] { Encoder e(dir); });
    fs::remove_all(dir);
    return message;
  };
  EXPECT_NE(refusal("bert_sequence_tiny", "config.json", [](nlohmann::json& j) { j["architectures"] = {"BertForQuestionAnswering"}; })
                .find("architecture BertForQuestionAnswering is not supported"),
            std::string::npos);
  EXPECT_NE(refusal("bert_sequence_tiny", "config.json", [](nlohmann::json& j) { j["problem_type"] = "regression"; })
                .find("problem_type regression is not supported"),
            std::string::npos);
  EXPECT_NE(refusal("bert_sentence_tiny", "modules.json",
                    [](nlohmann::json& j) { j.push_back({{"path", "3_Dense"}, {"type", "sentence_transformers.models.Dense"}}); })
                .find("module sentence_transformers.models.Dense is not supported"),
            std::string::npos);
  EXPECT_NE(refusal("bert_sentence_tiny", "1_Pooling/config.json", [](nlohmann::json& j) { j["pooling_mode_mean_sqrt_len_tokens"] = true; })
                .find("is not supported (tfm pools by one of"),
            std::string::npos);
  const Encoder sentence(fixture("bert_sentence_tiny"));
  EXPECT_NE(testing::error_of([&] { sentence.classify({"x"}); }).find("needs a sentence classifier"), std::string::npos);
}

}  // namespace
}  // namespace tfm
