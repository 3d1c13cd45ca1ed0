// Fine-tuning BERT classifiers (`tfm bert classifier` and `tfm bert tagger`,
// train/bert_classifiers): labelled sentences read from TSV, CSV and label folders, and
// words from CoNLL columns; runs from a Hugging Face BertForMaskedLM
// (tests/fixtures/hf/bert_mlm_tiny) on tasks derived from Multi30k (tests/fixtures/classifier
// and tests/fixtures/tagger, described in tests/reference/make_fine_tuning_fixtures.py) beat the
// majority baseline clearly, and their checkpoints classify through `tfm classify` and
// export as Hugging Face classifiers that classify the same.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "data/labelled_text.h"
#include "support/fixture.h"
#include "support/process.h"
#include "tfm/encoder.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

std::vector<std::pair<std::string, std::string>> pairs(const std::vector<data::LabelledText>& rows) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const data::LabelledText& r : rows) out.emplace_back(r.text, r.label);
  return out;
}

using Pairs = std::vector<std::pair<std::string, std::string>>;

TEST(SentenceClassifier, ReadsTsvCsvAndLabelFolders) {
  const testing::TempDir tmp;
  std::ofstream(tmp.path("a.tsv")) << "sentence\tlabel\nA dog runs.\tanimal\nA man, a car\tvehicle\n";
  EXPECT_EQ(pairs(data::read_labelled_text(tmp.path("a.tsv"))), (Pairs{{"A dog runs.", "animal"}, {"A man, a car", "vehicle"}}));
  std::ofstream(tmp.path("b.csv")) << "label,text\nanimal,\"A dog, running\"\nother,\"He said \"\"hi\"\"\"\n";
  EXPECT_EQ(pairs(data::read_labelled_text(tmp.path("b.csv"))), (Pairs{{"A dog, running", "animal"}, {"He said \"hi\"", "other"}}));
  std::ofstream(tmp.path("c.csv")) << "A cat,animal\n";  // no header: text, then label
  EXPECT_EQ(pairs(data::read_labelled_text(tmp.path("c.csv"))), (Pairs{{"A cat", "animal"}}));
  fs::create_directories(tmp.path("d/pos")), fs::create_directories(tmp.path("d/neg"));
  std::ofstream(tmp.path("d/pos/1.txt")) << "Great\nfilm.\n";
  std::ofstream(tmp.path("d/neg/1.txt")) << "Dull.\n";
  EXPECT_EQ(pairs(data::read_labelled_text(tmp.path("d"))), (Pairs{{"Dull.", "neg"}, {"Great film.", "pos"}}));
  std::ofstream(tmp.path("e.tsv")) << "A dog.\tanimal\nno label here\n";
  EXPECT_EQ(testing::error_of([&] { data::read_labelled_text(tmp.path("e.tsv")); }),
            tmp.path("e.tsv") + ":2: expected a text and a label separated by a tab");
  std::ofstream(tmp.path("f.csv")) << "\"open,animal\n";
  EXPECT_NE(testing::error_of([&] { data::read_labelled_text(tmp.path("f.csv")); }).find("f.csv:1: a quoted field does not end"),
            std::string::npos);
}

// The number after `before` in a run's log (the majority baseline it names, the best score it reports).
double number_after(const std::string& log, const std::string& before) {
  std::smatch m;
  EXPECT_TRUE(std::regex_search(log, m, std::regex(before + " ([0-9.]+)"))) << log;
  return m.empty() ? 0 : std::stod(m[1]);
}

TEST(SentenceClassifier, FineTunedFromAHuggingFaceBertBeatsTheMajorityBaselineAndExports) {
  const testing::TempDir tmp;
  const std::string data = testing::fixture_path("classifier"), base = testing::fixture_path("hf/bert_mlm_tiny");
  const testing::CliResult run =
      testing::run_tfm("bert classifier --init-from " + base + " --train " + data + "/train.tsv.gz --valid " + data + "/valid.tsv --out " +
                       tmp.path("run") + " --lr 3e-3 --epochs 2 --validate-every 50 --threads 2 2>&1");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_NE(run.output.find("a new pooler, a new classifier of 4 labels"), std::string::npos) << run.output;
  const double majority = number_after(run.output, R"(the majority baseline \(always animal\) scores)");
  const double best = number_after(run.output, "best validation accuracy");
  EXPECT_NEAR(majority, 26.5, 0.1);
  EXPECT_GE(best, majority + 10) << run.output;  // 44.7 when written (2 epochs, 3 s)

  const std::string checkpoint = tmp.path("run/best.safetensors");
  std::ofstream(tmp.path("s.txt")) << "A brown dog runs through the grass.\nTwo men ride a red motorcycle.\n";
  const testing::CliResult labels = testing::run_tfm("classify " + checkpoint + " -i " + tmp.path("s.txt") + " 2>&1");
  ASSERT_EQ(labels.code, 0) << labels.output;
  EXPECT_EQ(std::count(labels.output.begin(), labels.output.end(), '\n'), 2);
  ASSERT_EQ(testing::run_tfm("export --model " + checkpoint + " --hf " + tmp.path("hf")).code, 0);
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(tmp.path("hf/config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json({"BertForSequenceClassification"}));
  EXPECT_EQ(config["id2label"], nlohmann::json({{"0", "animal"}, {"1", "other"}, {"2", "sport"}, {"3", "vehicle"}}));
  const std::vector<std::string> sentences = {"A brown dog runs through the grass.", "Two men ride a red motorcycle."};
  EXPECT_EQ(Encoder(tmp.path("hf")).classify(sentences).probabilities, Encoder(checkpoint).classify(sentences).probabilities);
}

TEST(TokenClassifier, ReadsCoNLLColumns) {
  const testing::TempDir tmp;
  std::ofstream(tmp.path("a.conll")) << "-DOCSTART- -X- O O\n\nJohn NNP B-PER\nSmith NNP I-PER\nruns VBZ O\n\n\nA DT O\ndog NN B-ANIMAL\n";
  const std::vector<data::LabelledWords> s = data::read_conll(tmp.path("a.conll"));
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].words, (std::vector<std::string>{"John", "Smith", "runs"}));
  EXPECT_EQ(s[0].labels, (std::vector<std::string>{"B-PER", "I-PER", "O"}));
  EXPECT_EQ(s[1].labels, (std::vector<std::string>{"O", "B-ANIMAL"}));
  std::ofstream(tmp.path("b.conll")) << "John B-PER\nalone\n";
  EXPECT_EQ(testing::error_of([&] { data::read_conll(tmp.path("b.conll")); }),
            tmp.path("b.conll") + ":2: expected a word and its label (CoNLL columns)");
}

// The majority baseline labels every word O: an entity F1 of 0.
TEST(TokenClassifier, FineTunedFromAHuggingFaceBertFindsEntitiesAndExports) {
  const testing::TempDir tmp;
  const std::string data = testing::fixture_path("tagger");
  const testing::CliResult run = testing::run_tfm("bert tagger --init-from " + testing::fixture_path("hf/bert_mlm_tiny") + " --train " + data +
                                                  "/train.conll.gz --valid " + data + "/valid.conll --out " + tmp.path("run") +
                                                  " --lr 1e-2 --epochs 10 --validate-every 100 --threads 2 2>&1");
  ASSERT_EQ(run.code, 0) << run.output;
  EXPECT_GE(number_after(run.output, "best validation entity_f1"), 50) << run.output;  // 76.1 when written (10 epochs, 4 s)
  const std::string checkpoint = tmp.path("run/best.safetensors");
  ASSERT_EQ(testing::run_tfm("export --model " + checkpoint + " --hf " + tmp.path("hf")).code, 0);
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(tmp.path("hf/config.json")));
  EXPECT_EQ(config["architectures"], nlohmann::json({"BertForTokenClassification"}));
  const std::vector<std::string> sentences = {"A man in a red shirt walks his brown dog."};
  const TaggedSentence a = Encoder(tmp.path("hf")).tag(sentences)[0], b = Encoder(checkpoint).tag(sentences)[0];
  ASSERT_EQ(a.words.size(), b.words.size());
  for (size_t w = 0; w < a.words.size(); ++w) EXPECT_EQ(a.words[w].label, b.words[w].label);
}

// A run resumes where it stopped, on the same labels only.
TEST(SentenceClassifier, ResumesOnTheSameLabelsAndRefusesOthers) {
  const testing::TempDir tmp;
  const std::string data = testing::fixture_path("classifier");
  const std::string start = "bert classifier --train " + data + "/valid.tsv --lr 3e-3 --validate-every 0 --threads 2 ";
  ASSERT_EQ(testing::run_tfm(start + "--init-from " + testing::fixture_path("hf/bert_mlm_tiny") + " --steps 4 --out " + tmp.path("run")).code, 0);
  const testing::CliResult resumed = testing::run_tfm(start + "--resume " + tmp.path("run/last.safetensors") + " --steps 8 2>&1");
  ASSERT_EQ(resumed.code, 0) << resumed.output;
  EXPECT_NE(resumed.output.find("at step 4"), std::string::npos) << resumed.output;
  std::ofstream(tmp.path("other.tsv")) << "A dog.\tdog\nA cat.\tcat\n";
  const testing::CliResult refused =
      testing::run_tfm("bert classifier --train " + tmp.path("other.tsv") + " --valid " + tmp.path("other.tsv") + " --resume " +
                       tmp.path("run/last.safetensors") + " --steps 12 2>&1");
  EXPECT_EQ(refused.code, 1);
  EXPECT_NE(refused.output.find("was trained on other labels than this data's (cat, dog)"), std::string::npos) << refused.output;
}

TEST(SentenceClassifier, RefusesAStartWithoutWeightsAndValidationLabelsTheTrainingLacks) {
  const testing::TempDir tmp;
  const std::string data = testing::fixture_path("classifier");
  const testing::CliResult scratch = testing::run_tfm("bert classifier --train " + data + "/valid.tsv --out " + tmp.path("a") + " 2>&1");
  EXPECT_EQ(scratch.code, 1);
  EXPECT_NE(scratch.output.find("tfm bert classifier fine-tunes a pretrained BERT: give --init-from"), std::string::npos) << scratch.output;
  std::ofstream(tmp.path("v.tsv")) << "A ship at sea.\tship\n";
  const testing::CliResult unknown = testing::run_tfm("bert classifier --init-from " + testing::fixture_path("hf/bert_mlm_tiny") + " --train " +
                                                      data + "/valid.tsv --valid " + tmp.path("v.tsv") + " --out " + tmp.path("b") + " 2>&1");
  EXPECT_EQ(unknown.code, 1);
  EXPECT_NE(unknown.output.find("sentence 1 has the label 'ship', which the training data does not have"), std::string::npos) << unknown.output;
}

}  // namespace
}  // namespace tfm
