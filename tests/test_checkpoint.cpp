// Checkpoints: round trips, PyTorch state_dicts, and every kind of bad file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "io/average.h"
#include "io/checkpoint.h"
#include "models/encoder_decoder.h"
#include "ops/convert.h"
#include "support/fixture.h"
#include "tensor/error.h"

namespace tfm {
namespace {

namespace fs = std::filesystem;

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tfm_ckpt_" + std::to_string(::getpid()) + "_" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
    config_.src_vocab = config_.tgt_vocab = 9;
    config_.d_model = 8, config_.heads = 2, config_.d_ff = 16, config_.encoder_layers = config_.decoder_layers = 1;
    model_ = std::make_unique<models::EncoderDecoder>(config_);
    Rng rng(3);
    model_->init_parameters(rng);
    path_ = (dir_ / "model.safetensors").string();
    io::save_checkpoint(path_, model_->named_parameters(), {"encoder_decoder", config_.to_json(), {}, ""});
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string read_bytes() const {
    std::ifstream in(path_, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
  }
  void write_bytes(const std::string& bytes) const {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }
  // Loads path_ into a fresh model and returns the error message ("" on success).
  std::string load_error() const {
    try {
      models::EncoderDecoder fresh(config_);
      io::load_parameters(fresh.named_parameters(), io::read_safetensors(path_), path_);
      return "";
    } catch (const Error& e) {
      return e.what();
    }
  }

  fs::path dir_;
  std::string path_;
  models::TransformerConfig config_;
  std::unique_ptr<models::EncoderDecoder> model_;
};

TEST_F(CheckpointTest, RoundTripRestoresEveryParameterExactly) {
  models::EncoderDecoder fresh(config_);
  io::SafeTensors file = io::read_safetensors(path_);
  io::load_parameters(fresh.named_parameters(), file, path_);
  auto a = model_->named_parameters(), b = fresh.named_parameters();
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].second.to_vector(), b[i].second.to_vector()) << a[i].first;
  EXPECT_EQ(models::TransformerConfig::from_json(io::checkpoint_info(file, path_).config_json, path_).to_json(), config_.to_json());
  EXPECT_FALSE(fs::exists(path_ + ".tmp")) << "the temporary file must be renamed away";
}

TEST_F(CheckpointTest, PyTorchStateDictLoadsDirectly) {
  // Saved from tests/reference/model.py's state_dict, with no tfm metadata.
  testing::ModelFixture f = testing::load_model_fixture("model_post_relu.safetensors");
  models::EncoderDecoder model(f.config);
  io::SafeTensors state = io::read_safetensors(testing::fixture_path("pytorch_state_dict.safetensors"));
  io::load_parameters(model.named_parameters(), state, "pytorch_state_dict.safetensors");
  EXPECT_EQ(model.transformer->encoder->layers[1]->feed_forward->linear1->weight.to_vector(),
            f.get("transformer.encoder.layers.1.linear1.weight").to_vector());
}

TEST_F(CheckpointTest, TruncatedFileIsRejected) {
  std::string bytes = read_bytes();
  write_bytes(bytes.substr(0, bytes.size() - 100));
  EXPECT_NE(load_error().find("truncated"), std::string::npos) << load_error();
  write_bytes(bytes.substr(0, 5));
  EXPECT_NE(load_error().find("too short"), std::string::npos) << load_error();
  write_bytes(bytes.substr(0, 40));
  EXPECT_NE(load_error().find("header length"), std::string::npos) << load_error();
}

TEST_F(CheckpointTest, FlippedDataByteFailsTheChecksum) {
  std::string bytes = read_bytes();
  bytes[bytes.size() - 7] ^= 0x5a;
  write_bytes(bytes);
  EXPECT_NE(load_error().find("checksum mismatch"), std::string::npos) << load_error();
}

// Inference reads a trained checkpoint without Adam's moments (two thirds of its bytes):
// each tensor has its own checksum, so the moments are not even read, and a flipped
// byte among them fails only a reader that wants them (resuming).
TEST_F(CheckpointTest, ReadingTheWeightsLeavesTheOptimizerUnreadAndEachTensorChecked) {
  io::NamedTensors moments;
  for (const auto& [name, p] : model_->named_parameters()) moments.emplace_back("exp_avg." + name, Tensor::full(p.shape(), 0.25f));
  io::save_checkpoint(path_, model_->named_parameters(), {"encoder_decoder", config_.to_json(), moments, "{}"});
  const io::SafeTensors weights = io::read_weights(path_);
  EXPECT_EQ(weights.tensors.size(), model_->named_parameters().size());
  for (const auto& [name, t] : weights.tensors) EXPECT_NE(name.rfind(io::kOptimizerPrefix, 0), 0u) << name;
  EXPECT_EQ(io::read_safetensors(path_).tensors.size(), 2 * model_->named_parameters().size());
  models::EncoderDecoder fresh(config_);
  io::load_parameters(fresh.named_parameters(), weights, path_);
  EXPECT_EQ(fresh.named_parameters()[0].second.to_vector(), model_->named_parameters()[0].second.to_vector());

  const std::string bytes = read_bytes();
  std::string flipped = bytes;  // the moments' data comes after the weights'
  flipped[flipped.size() - 7] ^= 0x5a;
  write_bytes(flipped);
  EXPECT_NO_THROW(io::read_weights(path_));
  EXPECT_NE(load_error().find("checksum mismatch in tensor 'optimizer.exp_avg."), std::string::npos) << load_error();
  flipped = bytes;  // the first weight's data follows the header
  flipped[8 + *reinterpret_cast<const uint64_t*>(bytes.data()) + 3] ^= 0x5a;
  write_bytes(flipped);
  try {
    io::read_weights(path_);
    ADD_FAILURE() << "a corrupted weight passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch in tensor"), std::string::npos) << e.what();
  }
}

// Averaging: each weight's mean over the checkpoints, the last one's metadata without
// its training state or moments; another model, or a save too few, refused by name.
TEST_F(CheckpointTest, AveragingTakesEachWeightsMeanAndRefusesAnotherModel) {
  const auto params = model_->named_parameters();
  io::NamedTensors moments = {{"exp_avg.x", Tensor::full({2}, 1.0f)}};
  for (int i = 0; i < 3; ++i) {
    for (auto [name, p] : params) p.copy_from(Tensor::full(p.shape(), static_cast<float>(i * i)));  // 0, 1, 4: mean 5/3
    io::save_checkpoint((dir_ / ("step-" + std::to_string(10 * (i + 1)) + ".safetensors")).string(), params,
                        {"encoder_decoder", config_.to_json(), moments, "{\"step\":" + std::to_string(i) + "}"});
  }
  const std::vector<std::string> last = io::last_step_checkpoints(dir_.string(), 2);
  ASSERT_EQ(last.size(), 2u);
  EXPECT_EQ(fs::path(last[0]).filename(), "step-20.safetensors");  // by step, not by name: step-100 would sort before step-20
  const io::SafeTensors mean = io::average_checkpoints(io::last_step_checkpoints(dir_.string(), 3));
  ASSERT_EQ(mean.tensors.size(), params.size());
  for (const auto& [name, t] : mean.tensors)
    for (float v : t.to_vector()) EXPECT_EQ(v, 5.0f / 3.0f) << name;
  EXPECT_EQ(mean.metadata.count(io::kTrainStateKey), 0u);
  EXPECT_EQ(mean.metadata.at("tfm.averaged"), "step-10.safetensors, step-20.safetensors, step-30.safetensors");
  EXPECT_EQ(io::checkpoint_info(mean, "mean").config_json, config_.to_json());

  try {
    io::last_step_checkpoints(dir_.string(), 4);
    ADD_FAILURE() << "four saves found among three";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 3 step-N checkpoints, fewer than the 4 asked for"), std::string::npos) << e.what();
  }
  models::TransformerConfig other = config_;
  other.d_ff = 32;
  models::EncoderDecoder wider(other);
  io::save_checkpoint(path_, wider.named_parameters(), {"encoder_decoder", other.to_json(), {}, ""});
  try {
    io::average_checkpoints({last[0], path_});
    ADD_FAILURE() << "a wider model was averaged in";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(path_ + ": is another model than " + last[0]), std::string::npos) << e.what();
  }
}

// Files written before the per-tensor checksums carry one over all the data, which
// every read checks, reading skipped tensors too.
TEST_F(CheckpointTest, AFileWithOneChecksumIsCheckedWholeEvenWhenTensorsAreSkipped) {
  std::ifstream in(testing::fixture_path("threads/lm.safetensors"), std::ios::binary);
  std::string bytes(std::istreambuf_iterator<char>(in), {});
  ASSERT_EQ(bytes.find("tfm.crc32.tensors"), std::string::npos) << "the fixture predates the per-tensor checksums";
  bytes[bytes.size() - 7] ^= 0x5a;
  write_bytes(bytes);
  try {
    io::read_safetensors(path_, [](const std::string&) { return true; });  // keep nothing: still read for the checksum
    ADD_FAILURE() << "a corrupted file passed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("checksum mismatch, the file is corrupted"), std::string::npos) << e.what();
  }
}

TEST_F(CheckpointTest, CorruptedHeaderIsRejected) {
  std::string bytes = read_bytes();
  bytes[8] = '#';
  write_bytes(bytes);
  EXPECT_NE(load_error().find("not valid JSON"), std::string::npos) << load_error();
}

TEST_F(CheckpointTest, MissingUnknownAndMisshapenParametersAreNamed) {
  io::NamedTensors params = model_->named_parameters();
  auto save_with = [&](io::NamedTensors t) { io::write_safetensors(path_, t, {}); };

  io::NamedTensors missing(params.begin() + 1, params.end());
  save_with(missing);
  EXPECT_EQ(load_error(), path_ + ": missing parameter '" + params[0].first + "'");

  io::NamedTensors extra = params;
  extra.emplace_back("decoder.bogus.weight", Tensor::zeros({2}));
  save_with(extra);
  EXPECT_EQ(load_error(), path_ + ": unexpected parameter 'decoder.bogus.weight'");

  io::NamedTensors wrong = params;
  wrong[2].second = Tensor::zeros({3, 3});
  save_with(wrong);
  EXPECT_NE(load_error().find("parameter '" + params[2].first + "' has shape [3, 3] in the file"), std::string::npos) << load_error();
}

// Loading for inference (io::take_parameters): a whole f32 tensor of the file becomes
// its parameter's storage (no copy), a bf16 one is widened, a view of a larger buffer and
// a tensor the file holds under two names are copied (the two parameters stay apart),
// and the file is left empty.
TEST(TakeParameters, TakesWholeF32BuffersAndCopiesTheRest) {
  const std::vector<float> six = {1, 2, 3, 4, 5, 6};
  const Tensor whole = Tensor::from_vector({2, 3}, six), larger = Tensor::from_vector({6}, six), shared = Tensor::from_vector({2}, {7, 8});
  io::SafeTensors file;
  file.tensors = {{"a", whole},
                  {"b", ops::to(Tensor::from_vector({2}, {1.5f, 1.0f / 3}), DType::bf16)},
                  {"c", make_view(larger, {2}, {1}, 4)},
                  {"d", shared},
                  {"e", shared}};
  const io::NamedTensors params = {{"a", Tensor::zeros({2, 3})}, {"b", Tensor::zeros({2})}, {"c", Tensor::zeros({2})},
                                   {"d", Tensor::zeros({2})}, {"e", Tensor::zeros({2})}};
  const void* file_a = whole.address();
  io::take_parameters(params, file, "test");
  EXPECT_TRUE(file.tensors.empty());
  EXPECT_EQ(params[0].second.address(), file_a) << "taken, not copied";
  EXPECT_EQ(params[0].second.to_vector(), six);
  EXPECT_EQ(params[1].second.to_vector(), (std::vector<float>{1.5f, 0.333984375f}));  // 1/3 in bf16
  EXPECT_EQ(params[2].second.to_vector(), (std::vector<float>{5, 6}));
  EXPECT_NE(params[2].second.address(), larger.address());
  EXPECT_EQ(params[3].second.to_vector(), (std::vector<float>{7, 8}));
  EXPECT_EQ(params[4].second.to_vector(), (std::vector<float>{7, 8}));
  EXPECT_NE(params[3].second.address(), params[4].second.address()) << "two parameters, not one buffer";
}

TEST_F(CheckpointTest, WrongDtypeAndNonFiniteValuesAreRejected) {
  const std::string header = R"({"w":{"dtype":"F64","shape":[2],"data_offsets":[0,16]}})";
  uint64_t n = header.size();
  write_bytes(std::string(reinterpret_cast<char*>(&n), 8) + header + std::string(16, '\0'));
  EXPECT_NE(load_error().find("dtype \"F64\""), std::string::npos) << load_error();

  // A NaN written by another tool (tfm refuses to write one).
  const std::string nan_header = R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  const float nan = std::numeric_limits<float>::quiet_NaN();
  uint64_t hn = nan_header.size();
  write_bytes(std::string(reinterpret_cast<char*>(&hn), 8) + nan_header + std::string(reinterpret_cast<const char*>(&nan), 4));
  EXPECT_NE(load_error().find("contains a non-finite value"), std::string::npos) << load_error();
}

TEST_F(CheckpointTest, OverlappingOrGappedDataIsRejected) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})";
  uint64_t n = header.size();
  write_bytes(std::string(reinterpret_cast<char*>(&n), 8) + header + std::string(8, '\0'));
  EXPECT_NE(load_error().find("overlaps"), std::string::npos) << load_error();
}

TEST(ConfigTest, BadConfigurationsGiveOneClearError) {
  auto error_of = [](const std::string& text) {
    try {
      models::TransformerConfig::from_json(text, "model.json");
      return std::string();
    } catch (const Error& e) {
      return std::string(e.what());
    }
  };
  EXPECT_NE(error_of("{ d_model: 3").find("not valid JSON"), std::string::npos);
  EXPECT_EQ(error_of(R"({"src_vocab": 5, "tgt_vocab": 5, "d_moddel": 8})"), "model.json: unknown setting 'd_moddel'");
  EXPECT_NE(error_of(R"({"src_vocab": 5, "tgt_vocab": 5, "d_model": "big"})").find("field 'd_model' has the wrong type"), std::string::npos);
  EXPECT_NE(error_of(R"({"src_vocab": 5, "tgt_vocab": 5, "d_model": 10, "heads": 4})").find("not divisible"), std::string::npos);
  EXPECT_NE(error_of(R"({"src_vocab": 5, "tgt_vocab": 5, "activation": "tanh"})").find("unknown activation 'tanh'"), std::string::npos);
  EXPECT_NE(error_of("[1, 2]").find("expected a JSON object"), std::string::npos);
  EXPECT_THROW(models::TransformerConfig::from_file("/nonexistent/model.json", {}), Error);
}

}  // namespace
}  // namespace tfm
