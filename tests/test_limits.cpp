// Hostile sizes and values from configurations and checkpoints: every size and product of
// sizes bounded before anything is allocated, crafted tokenizers and huge inputs refused,
// non-finite scores reported, and the model configuration's precedence (flags > --config
// > defaults) and family checks.
#include <gtest/gtest.h>

#include <filesystem>
#include <limits>
#include <sstream>
#include <tuple>

#include <nlohmann/json.hpp>

#include "data/image.h"
#include "data/tokenizer.h"
#include "data/vocab.h"
#include "decode/beam_search.h"
#include "decode/sampling.h"
#include "ops/random.h"
#include "io/checkpoint.h"
#include "models/bert.h"
#include "models/config.h"
#include "models/encoder_decoder.h"
#include "models/gpt.h"
#include "models/json_fields.h"
#include "models/stack_config.h"
#include "models/vit.h"
#include "support/datasets.h"
#include "support/process.h"
#include "tensor/error.h"
#include "tfm/training.h"

namespace tfm {
namespace {

using testing::error_of;
using testing::run_tfm;
using testing::TempDir;
using testing::write_file;

constexpr int64_t k2p40 = int64_t{1} << 40;

std::string safetensors_with_header(const std::string& header) {
  const uint64_t n = header.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + header;
}

// --- D6, D7: shapes and strides never overflow --------------------------------

TEST(Limits, ShapesWhoseElementsOrStridesOverflowAreErrors) {
  EXPECT_NE(error_of([] { shape_numel({1000, int64_t{1} << 62}); }).find("more elements than a tensor can index"), std::string::npos);
  // numel 0, but the strides of the other dimensions overflow.
  EXPECT_NE(error_of([] { contiguous_strides({0, k2p40 - 1, k2p40 - 1}); }).find("more elements"), std::string::npos);
  EXPECT_NE(error_of([] { Tensor::empty({0, k2p40 - 1, k2p40 - 1}); }), "");
  EXPECT_EQ(shape_numel({0, k2p40 - 1, k2p40 - 1}), 0);
}

TEST(Limits, SafetensorsRefusesAZeroSizeTensorWithOverflowingStrides) {
  const std::string bytes =
      safetensors_with_header(R"({"t":{"dtype":"F32","shape":[0,1099511627775,1099511627775],"data_offsets":[0,0]}})");
  EXPECT_NE(error_of([&] { io::parse_safetensors(bytes, "st"); }).find("st: tensor 't' is implausibly large"), std::string::npos);
  // A zero-size tensor with small dimensions is fine.
  io::SafeTensors ok = io::parse_safetensors(safetensors_with_header(R"({"t":{"dtype":"F32","shape":[0,3,5],"data_offsets":[0,0]}})"), "st");
  EXPECT_EQ(ok.tensors.at(0).second.shape(), (Shape{0, 3, 5}));
}

// --- U10: safetensors messages -----------------------------------------------------

TEST(Limits, SafetensorsMessagesQuoteTheDtypeAndExplainTheHeaderLength) {
  const std::string spaced = safetensors_with_header(R"({"t":{"dtype":"F32 ","shape":[1],"data_offsets":[0,4]}})") + std::string(4, '\0');
  EXPECT_EQ(error_of([&] { io::parse_safetensors(spaced, "st"); }), "st: tensor 't' has dtype \"F32 \"; tfm reads F32, F16, BF16, I64, I32, I8, U8 and BOOL");
  std::string short_file(8, '\0');
  short_file[0] = 16;
  short_file += "0123456789abcde";  // 23 bytes
  EXPECT_EQ(error_of([&] { io::parse_safetensors(short_file, "st"); }),
            "st: the header length field says 16 bytes, but only 15 bytes follow it (truncated or not safetensors)");
  // (The size once read 18446744073709551608 bytes: the difference of offsets that run backwards.)
  const std::string backwards = safetensors_with_header(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})") + std::string(8, '\0');
  EXPECT_EQ(error_of([&] { io::parse_safetensors(backwards, "st"); }), "st: tensor 't' has data_offsets [8, 0] that run backwards");
}

// --- D6, D11, W7: every size field bounded, every integer range-checked -----------

std::string transformer_error(const std::string& fields) {
  return error_of([&] { models::TransformerConfig::from_json(R"({"src_vocab": 100, "tgt_vocab": 100, )" + fields + "}", "m.json"); });
}

std::string stack_error(const std::string& family, const std::string& fields) {
  return error_of([&] { models::StackConfig::from_json("{" + fields + "}", "m.json", family); });
}

TEST(Limits, TranslationConfigSizesAreBounded) {
  EXPECT_EQ(transformer_error(R"("d_model": 4611686018427387904, "heads": 1)"), "m.json: d_model 4611686018427387904 outside [1, 65536]");
  EXPECT_EQ(transformer_error(R"("encoder_layers": 1099511627776)"), "m.json: encoder_layers 1099511627776 outside [1, 1024]");
  EXPECT_EQ(transformer_error(R"("max_len": 1073741824)"), "m.json: max_len 1073741824 outside [1, 131072]");
  EXPECT_EQ(transformer_error(R"("heads": 1024, "d_model": 512)"), "m.json: heads 1024 outside [1, 512]");
  EXPECT_EQ(error_of([] { models::TransformerConfig::from_json(R"({"src_vocab": 16777217, "tgt_vocab": 5})", "m.json"); }),
            "m.json: src_vocab 16777217 outside [1, 16777216]");
  // 2^32 would have been truncated to 0 in the int field.
  EXPECT_EQ(transformer_error(R"("pad_id": 4294967296)"), "m.json: field 'pad_id' is 4294967296, outside [-2147483648, 2147483647]");
  EXPECT_EQ(transformer_error(R"("pad_id": 100)"), "m.json: pad_id 100 outside [0, 99]");
  // Each field within bounds, but together far too many weights.
  const std::string huge = error_of([] {
    models::TransformerConfig::from_json(R"({"src_vocab": 16777216, "tgt_vocab": 16777216, "d_model": 65536, "heads": 1})", "m.json");
  });
  EXPECT_NE(huge.find("more than tfm's limit of 17179869184"), std::string::npos) << huge;
}

TEST(Limits, StackConfigSizesAreBounded) {
  EXPECT_EQ(stack_error("gpt", R"("vocab": 50, "d_model": 4611686018427387904, "heads": 1)"),
            "m.json: d_model 4611686018427387904 outside [1, 65536]");
  EXPECT_EQ(stack_error("bert", R"("vocab": 50, "layers": 1099511627776)"), "m.json: layers 1099511627776 outside [1, 1024]");
  EXPECT_EQ(stack_error("vit", R"("image_size": 2147483648, "patch": 1)"), "m.json: image_size 2147483648 outside [1, 4096]");
  EXPECT_EQ(stack_error("vit", R"("patch": 1099511627776)"), "m.json: patch 1099511627776 outside [1, 28]");
  EXPECT_EQ(stack_error("vit", R"("channels": 0)"), "m.json: channels 0 outside [1, 16]");
  const std::string huge = stack_error("vit", R"("image_size": 4096, "patch": 16, "d_model": 65536, "heads": 1)");
  EXPECT_NE(huge.find("image_size, patch, d_model, d_ff and layers make a model of about"), std::string::npos) << huge;
  // 16.7M patches (a sequence attention cannot hold) once asked 24 GB before failing.
  EXPECT_EQ(stack_error("vit", R"("image_size": 4096, "patch": 1)"),
            "m.json: image_size 4096 in patches of 1 makes 16777216 patches, more than the 131072 positions a model may have");
}

// The weight count the limit is checked on bounds what the model allocates.
TEST(Limits, WeightCountCoversEveryFamilysParameters) {
  models::TransformerConfig t = models::TransformerConfig::from_json(
      R"({"src_vocab": 30, "tgt_vocab": 40, "d_model": 16, "heads": 2, "d_ff": 24, "encoder_layers": 2, "decoder_layers": 3, "max_len": 50})",
      "t");
  EXPECT_EQ(t.weight_floats(), models::EncoderDecoder(t).num_parameters() + 2 * t.max_len * t.d_model);  // + the sinusoid tables
  t.positions = "learned", t.embed_norm = true;  // mBART's: the tables are parameters, with a LayerNorm each
  EXPECT_EQ(t.weight_floats(), models::EncoderDecoder(t).num_parameters());
  const std::string sizes = R"("vocab": 30, "max_len": 20, "d_model": 16, "heads": 2, "d_ff": 24, "layers": 2)";
  models::StackConfig bert = models::StackConfig::from_json("{" + sizes + "}", "b", "bert");
  EXPECT_EQ(bert.weight_floats(), models::BERT(bert, 0).num_parameters());
  models::StackConfig gpt = models::StackConfig::from_json("{" + sizes + "}", "g", "gpt");
  EXPECT_GE(gpt.weight_floats(), models::GPT(gpt).num_parameters());
  models::StackConfig vit = models::StackConfig::from_json(R"({"image_size": 8, "patch": 2, "channels": 3, "classes": 5, "d_model": 16,
                                                               "heads": 2, "d_ff": 24, "layers": 2})", "v", "vit");
  EXPECT_EQ(vit.weight_floats(), models::ViT(vit).num_parameters());
  // Hugging Face's variants: a base with its pooler (no classifier), a distilled DeiT with two heads.
  for (const char* variant : {R"("classes": 0, "pooler": true)", R"("classes": 5, "distilled": true, "distill_head": true)"}) {
    const models::StackConfig v = models::StackConfig::from_json(
        std::string(R"({"image_size": 8, "patch": 2, "d_model": 16, "heads": 2, "d_ff": 24, "layers": 2, )") + variant + "}", "v", "vit");
    EXPECT_EQ(v.weight_floats(), models::ViT(v).num_parameters()) << variant;
  }
}

// --- D11: only regular files of bounded size are read ---------------------------

// A configuration inside every bound that still describes far more weights than its
// file holds (the review's D11: 1.3e10 weights from a 90 KB file) is refused before
// the model is allocated, for the families' loaders and translation's.
TEST(Limits, AConfigurationLargerThanItsFileIsRefusedBeforeAllocating) {
  TempDir dir;
  const std::string fixtures = std::string(TFM_FIXTURE_DIR) + "/threads/";
  const std::vector<std::tuple<std::string, std::string, nlohmann::json>> cases = {
      {"lm", "generate --max-new-tokens 1 --model ", {{"layers", 100}, {"d_model", 1024}, {"d_ff", 4096}}},  // 1.3e9 weights
      {"mt", "translate -i /dev/null --src-vocab " + fixtures + "vocab.model --tgt-vocab " + fixtures + "vocab.model --model ",
       {{"encoder_layers", 50}, {"decoder_layers", 50}, {"d_model", 1024}, {"d_ff", 4096}}}};
  for (const auto& [name, command, sizes] : cases) {
    io::SafeTensors file = io::read_safetensors(fixtures + name + ".safetensors");
    nlohmann::json config = nlohmann::json::parse(file.metadata.at("tfm.config"));
    config.update(sizes);
    file.metadata["tfm.config"] = config.dump();
    const std::string path = dir.path(name + ".safetensors");
    io::write_safetensors(path, file.tensors, file.metadata);
    const testing::CliResult r = run_tfm(command + path);
    EXPECT_EQ(r.code, 1) << r.output;
    EXPECT_NE(r.output.find(path + ": its configuration describes a model of about"), std::string::npos) << r.output;
  }
}

TEST(Limits, DevicesFifosAndHugeFilesAreRefusedBeforeReading) {
  EXPECT_EQ(error_of([] { data::Vocab::load("/dev/zero"); }), "/dev/zero: the SentencePiece model is not a regular file");
  EXPECT_EQ(error_of([] { models::read_config_file("/dev/zero"); }), "/dev/zero: the configuration file is not a regular file");
  TempDir dir;
  std::filesystem::resize_file((write_file(dir.path("big.json"), ""), dir.path("big.json")), 2 << 20);  // sparse: costs nothing
  EXPECT_NE(error_of([&] { models::read_config_file(dir.path("big.json")); }).find("is 2097152 bytes, more than the 1048576 tfm reads"),
            std::string::npos);
}

// --- W10: crafted tokenizers, families and weights ---------------------------------

TEST(Limits, TokenizerRecordsWithoutOrWithRepeatedCharactersAreRefused) {
  auto error = [](const std::string& record) { return error_of([&] { data::Tokenizer::from_record(record, "ckpt"); }); };
  EXPECT_EQ(error(R"({"type":"characters","characters":[]})"), "ckpt: the tokenizer record holds no characters");
  EXPECT_EQ(error(R"({"type":"characters","characters":["a","b","a"]})"), "ckpt: the tokenizer record lists \"a\" twice or out of order");
  EXPECT_EQ(error(R"({"type":"characters","characters":["b","a"]})"), "ckpt: the tokenizer record lists \"a\" twice or out of order");
  EXPECT_EQ(data::Tokenizer::from_record(R"({"type":"characters","characters":["a","b"]})", "ckpt").size(), 7);
}

TEST(Limits, AConfigurationOfAnotherFamilyIsRefused) {
  EXPECT_EQ(stack_error("gpt", R"("family": "bert", "vocab": 50)"), "m.json: is a configuration of family 'bert', not gpt");
  EXPECT_EQ(stack_error("gpt", R"("family": "vit")"), "m.json: is a configuration of family 'vit', not gpt");
  EXPECT_EQ(models::StackConfig::from_json(R"({"vocab": 50})", "m.json", "bert").family, "bert");  // absent: the command's
}

TEST(Limits, NonFiniteScoresAreAnErrorNotEmptyOutput) {
  models::TransformerConfig c = models::TransformerConfig::from_json(
      R"({"src_vocab": 12, "tgt_vocab": 12, "d_model": 8, "heads": 2, "d_ff": 16, "encoder_layers": 1, "decoder_layers": 1, "max_len": 20})",
      "t");
  models::EncoderDecoder model(c);
  Rng rng(1);
  model.init_parameters(rng);
  model.eval();
  decode::SearchOptions o;
  o.beam = 2;
  const models::Tokens src{{5, 6, 7, 3}, 1, 4};
  EXPECT_EQ(error_of([&] { decode::beam_search(model, src, o); }), "");
  // Finite weights whose products overflow: every hidden feature near 1, every generator weight 3e38.
  model.transformer->decoder->norm->bias.fill(1.0f);
  model.generator->weight.fill(3e38f);
  EXPECT_NE(error_of([&] { decode::beam_search(model, src, o); }).find("the model's scores are not finite"), std::string::npos);

  const std::vector<float> logits{0.5f, std::numeric_limits<float>::quiet_NaN(), 1.0f};
  decode::SamplingOptions greedy;
  greedy.temperature = 0.0f;
  Rng sampling_rng(2);
  EXPECT_NE(error_of([&] { ops::sample(Tensor::from_vector({1, 3}, logits), greedy.sampling(), sampling_rng); }).find("not finite"), std::string::npos);
}

// --- W2, U8, W5, W7, F4 through the CLI ----------------------------------------------

// Tiny gpt and bert runs through the CLI (with training state), and a vit checkpoint.
struct FamilyRuns {
  TempDir dir;
  std::string text = dir.path("text.txt"), gpt = dir.path("lm/last.safetensors"), bert = dir.path("bert/last.safetensors"),
              vit = dir.path("vit.safetensors");
  FamilyRuns() {
    std::string t;
    for (int i = 0; i < 60; ++i) t += "the cat sat on the mat and the dog ran.\n";
    write_file(text, t);
    const std::string sizes = " --steps 2 --layers 1 --d-model 16 --heads 2 --d-ff 32 --validate-every 0 --text " + text;
    EXPECT_EQ(run_tfm("lm train" + sizes + " --context 16 --sample-tokens 0 --out " + dir.path("lm")).code, 0);
    EXPECT_EQ(run_tfm("bert train" + sizes + " --max-len 16 --out " + dir.path("bert")).code, 0);
    const models::StackConfig c = models::StackConfig::from_json(
        R"({"image_size": 8, "patch": 4, "classes": 3, "d_model": 16, "heads": 2, "d_ff": 32, "layers": 1})", "vit", "vit");
    io::save_checkpoint(vit, models::ViT(c).named_parameters(), {"vit", c.to_json(), {}, "", {}});
  }
};

FamilyRuns& runs() {
  static FamilyRuns r;
  return r;
}

// `checkpoint` with every float set to 3e38 (the review's st2/*_big_3e38): finite weights
// whose products overflow.
std::string overflowing_copy(const std::string& checkpoint, const std::string& out) {
  io::SafeTensors file = io::read_safetensors(checkpoint);
  for (auto& [name, t] : file.tensors)
    if (t.dtype() == DType::f32) t.fill(3e38f);
  io::write_safetensors(out, file.tensors, file.metadata);
  return out;
}

// The review's W2: every family refuses to print non-finite outputs as results.
TEST(FamilyCli, NonFiniteOutputsOfEveryFamilyAreErrors) {
  TempDir dir;
  const std::string bert = overflowing_copy(runs().bert, dir.path("bert.safetensors"));
  write_file(dir.path("in.txt"), "the cat sat\n");
  testing::CliResult embed = run_tfm("embed --model " + bert + " < " + dir.path("in.txt"));
  EXPECT_EQ(embed.code, 1);
  EXPECT_EQ(embed.output, "tfm: error: the model's embeddings are not finite (NaN or infinity): its weights are corrupted or too large\n");

  std::filesystem::create_directories(dir.path("images"));
  testing::write_quadrant_set(dir.path("images"), "t10k", 8, 3);
  const models::StackConfig c = models::StackConfig::from_json(
      R"({"image_size": 8, "patch": 4, "classes": 4, "channels": 1, "d_model": 16, "heads": 2, "d_ff": 32, "layers": 1})", "vit", "vit");
  io::save_checkpoint(dir.path("vit_ok.safetensors"), models::ViT(c).named_parameters(), {"vit", c.to_json(), {}, "", {}});
  EXPECT_EQ(run_tfm("vit eval --model " + dir.path("vit_ok.safetensors") + " --data " + dir.path("images")).code, 0);
  const std::string vit = overflowing_copy(dir.path("vit_ok.safetensors"), dir.path("vit.safetensors"));
  const std::string tail = " are not finite (NaN or infinity): its weights are corrupted or too large\n";
  testing::CliResult eval = run_tfm("vit eval --model " + vit + " --data " + dir.path("images"));
  EXPECT_EQ(eval.code, 1);
  EXPECT_EQ(eval.output, "tfm: error: the model's class scores" + tail);
  write_file(dir.path("image.png"), data::encode_png({8, 8, 1, std::vector<uint8_t>(64, 64)}));
  testing::CliResult classify = run_tfm("vit eval --model " + vit + " -i " + dir.path("image.png"));
  EXPECT_EQ(classify.output, "tfm: error: the model's class scores" + tail);
  testing::CliResult attention = run_tfm("attention --model " + vit + " --image 0 --data " + dir.path("images") + " -o " + dir.path("a.png"));
  EXPECT_EQ(attention.code, 1);
  EXPECT_NE(attention.output.find("are not finite"), std::string::npos) << attention.output;
  EXPECT_FALSE(std::filesystem::exists(dir.path("a.png")));
}

TEST(FamilyCli, InfoDescribesEveryFamily) {
  const testing::CliResult gpt = run_tfm("info " + runs().gpt);
  EXPECT_EQ(gpt.code, 0) << gpt.output;
  for (const char* part : {"model: gpt, decoder-only", "\"layers\":1", "\"max_len\":16", "parameters: ", "tokenizer: characters (",
                           "training state: {"})
    EXPECT_NE(gpt.output.find(part), std::string::npos) << part << "\n" << gpt.output;
  const testing::CliResult bert = run_tfm("info " + runs().bert);
  EXPECT_EQ(bert.code, 0) << bert.output;
  EXPECT_NE(bert.output.find("model: bert, masked-language-model encoder"), std::string::npos) << bert.output;
  const testing::CliResult vit = run_tfm("info " + runs().vit);
  EXPECT_EQ(vit.code, 0) << vit.output;
  EXPECT_NE(vit.output.find("\"patch\":4"), std::string::npos) << vit.output;
  EXPECT_NE(vit.output.find("training state: none"), std::string::npos) << vit.output;
}

TEST(FamilyCli, ACheckpointOfAnotherFamilyIsNamedAsSuch) {
  const std::string gpt = runs().gpt;
  auto error = [](const std::string& args) {
    const testing::CliResult r = run_tfm(args);
    EXPECT_EQ(r.code, 1) << r.output;
    return r.output;
  };
  EXPECT_EQ(error("train --steps 3 --resume " + gpt + " --out " + runs().dir.path("x")),
            "tfm: error: " + gpt + ": is a gpt checkpoint, not a translation one\n");
  EXPECT_EQ(error("bert train --text " + runs().text + " --resume " + gpt + " --out " + runs().dir.path("x")),
            "tfm: error: " + gpt + ": is a gpt checkpoint, not a bert one\n");
  EXPECT_EQ(error("vit train --resume " + gpt + " --out " + runs().dir.path("x")), "tfm: error: " + gpt + ": is a gpt checkpoint, not a vit one\n");
  EXPECT_NE(error("attention --model " + gpt + " --src hi").find("is a gpt checkpoint, not a translation or vit one"), std::string::npos);
  EXPECT_NE(error("translate --model " + runs().bert + " -i /dev/null").find("is a bert checkpoint, not a translation one"), std::string::npos);
}

TEST(FamilyCli, ResumeRefusesArchitectureFlagsThatDisagree) {
  TempDir dir;
  std::filesystem::copy(runs().dir.path("lm"), dir.path("lm"));
  const std::string last = dir.path("lm/last.safetensors");
  const std::string resume = "lm train --text " + runs().text + " --steps 3 --validate-every 0 --sample-tokens 0 --resume " + last +
                             " --out " + dir.path("lm");
  const testing::CliResult wrong = run_tfm(resume + " --layers 3");
  EXPECT_EQ(wrong.code, 1);
  EXPECT_EQ(wrong.output, "tfm: error: the model settings disagree with " + last + ": layers 3 (" + last +
                              ": 1) (a run resumed or started from a checkpoint keeps its architecture; dropout may change)\n");
  const testing::CliResult same = run_tfm(resume + " --layers 1 --context 16");
  EXPECT_EQ(same.code, 0) << same.output;
}

TEST(FamilyCli, ConfigFilesAreCompletedByTheCommandAndOverriddenByFlags) {
  TempDir dir;
  const std::string train = " --text " + runs().text + " --steps 1 --validate-every 0 --force --out " + dir.path("run");
  write_file(dir.path("gpt.json"), R"({"family": "gpt", "d_model": 16, "heads": 2, "layers": 1, "max_len": 16})");
  testing::CliResult r = run_tfm("lm train --sample-tokens 0 --config " + dir.path("gpt.json") + train);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"d_ff\":64"), std::string::npos) << r.output;  // 4 x d_model, as without --config
  r = run_tfm("lm train --sample-tokens 0 --config " + dir.path("gpt.json") + " --layers 2 --d-ff 48" + train);
  EXPECT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("\"d_ff\":48"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"layers\":2"), std::string::npos) << r.output;

  write_file(dir.path("bert.json"), R"({"d_model": 16, "heads": 2, "d_ff": 32, "layers": 1, "max_len": 16})");
  r = run_tfm("bert train --config " + dir.path("bert.json") + train);
  EXPECT_EQ(r.code, 0) << r.output;

  write_file(dir.path("vocab.json"), R"({"vocab": 3})");
  r = run_tfm("lm train --config " + dir.path("vocab.json") + train);
  EXPECT_NE(r.output.find(dir.path("vocab.json") + ": vocab 3 disagrees with the tokenizer's"), std::string::npos) << r.output;

  write_file(dir.path("vit.json"), R"({"family": "vit"})");
  r = run_tfm("lm train --config " + dir.path("vit.json") + train);
  EXPECT_EQ(r.output, "tfm: error: " + dir.path("vit.json") + ": is a configuration of family 'vit', not gpt\n");

  // The copy task needs no vocabulary sizes, and a file's model is pre-norm unless it says otherwise.
  write_file(dir.path("copy.json"), R"({"d_model": 16, "heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1})");
  r = run_tfm("train --steps 1 --samples 1 --config " + dir.path("copy.json") + " --out " + dir.path("copy"));
  EXPECT_NE(r.code, 1) << r.output;
  EXPECT_NE(r.output.find("\"norm_first\":true"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("\"src_vocab\":11"), std::string::npos) << r.output;
}

// Translation: flags > --config > --preset; what the vocabularies decide cannot be contradicted.
TEST(FamilyCli, TranslationFlagsOverrideTheConfigFile) {
  TempDir dir;
  std::string text;
  for (int i = 0; i < 40; ++i) text += "a b c d e " + std::to_string(i % 7) + "\n";
  write_file(dir.path("c.txt"), text);
  std::vector<std::string> lines(40, "a b c d e 1 2 3 4 5 6 0");
  data::VocabOptions vo;
  vo.size = 20;
  data::Vocab::train(lines, vo, dir.path("v.model"));
  TranslationTask task;
  task.train_src = task.train_tgt = task.valid_src = task.valid_tgt = dir.path("c.txt");
  task.src_vocab = task.tgt_vocab = dir.path("v.model");
  task.config = dir.path("m.json");
  task.valid_sentences = 1;
  TrainingOptions o = TranslationTask::training_defaults();
  o.out_dir = dir.path("run");
  o.max_steps = 1, o.schedule.warmup = 1;
  write_file(task.config, R"({"d_model": 16, "heads": 2, "d_ff": 32, "encoder_layers": 1, "decoder_layers": 1, "dropout": 0.3,
                              "share_embeddings": false})");
  task.model = R"({"dropout": 0.0, "norm_first": false})";
  std::ostringstream log;
  ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  for (const char* part : {"\"dropout\":0.0", "\"norm_first\":false", "\"share_embeddings\":false", "\"d_model\":16"})
    EXPECT_NE(log.str().find(part), std::string::npos) << part << "\n" << log.str();

  o.resume = dir.path("run/last.safetensors"), o.max_steps = 2, task.model = R"({"d_ff": 64})";
  EXPECT_EQ(error_of([&] { tfm::train(o, task, {}, &log); }),
            "the model settings disagree with " + o.resume + ": d_ff 64 (" + o.resume +
                ": 32) (a run resumed or started from a checkpoint keeps its architecture; dropout may change)");
  task.model = R"({"dropout": 0.5})";  // a setting of training: taken
  log.str("");
  ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  EXPECT_NE(log.str().find("\"dropout\":0.5,"), std::string::npos) << log.str();
  task.preset = "base", task.config.clear();  // a preset's sizes are settings given too
  EXPECT_NE(error_of([&] { tfm::train(o, task, {}, &log); }).find(": d_ff 2048 (" + o.resume + ": 32), d_model 512 ("), std::string::npos);
  task.preset.reset(), task.config = dir.path("m.json");
  o.resume.clear();
  o.force = true;
  write_file(task.config, R"({"d_model": 16, "heads": 2, "src_vocab": 999})");
  EXPECT_NE(error_of([&] { tfm::train(o, task, {}, &log); }).find("src_vocab, tgt_vocab and pad_id come from the vocabularies"),
            std::string::npos);
}

}  // namespace
}  // namespace tfm
