// Hugging Face ViT and DeiT directories as people download them (tests/fixtures/hf, made by
// tests/reference/make_hf_vit_fixtures.py with transformers 4.39 and Pillow 9.4): a ViTModel
// base with its pooler, a ViT classifier with DeiT's processor (bicubic resize, centre crop,
// ImageNet mean and std), and a distilled DeiT with two heads. The processor's pixel_values
// exactly, the model's outputs within 1e-4, the commands, and each refusal in one line.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "autograd/autograd.h"
#include "data/image.h"
#include "data/image_processor.h"
#include "decode/hf_checkpoint.h"
#include "hf/directory.h"
#include "hf/model.h"
#include "io/checkpoint.h"
#include "models/vit.h"
#include "ops/elementwise.h"
#include "ops/shape.h"
#include "support/compare.h"
#include "support/fixture.h"
#include "support/process.h"
#include "tensor/rng.h"
#include "tfm/classifier.h"

namespace tfm {
namespace {

constexpr double kTol = 1e-4;
const char* const kFixtures[] = {"vit_base_tiny", "vit_deit_processor_tiny", "deit_distilled_tiny", "deit_base_tiny"};

std::string dir_of(const std::string& fixture) { return testing::fixture_path("hf/" + fixture); }

Tensor reference(const std::string& fixture, const std::string& name) {
  const io::SafeTensors file = io::read_safetensors(dir_of(fixture) + "/reference.safetensors");
  const Tensor* t = file.find(name);
  if (!t) throw Error(fixture + ": reference.safetensors has no '" + name + "'");
  return *t;
}

std::string image(const std::string& fixture, int i) { return dir_of(fixture) + "/image" + std::to_string(i) + ".png"; }

// The fixture's model as tfm reads the directory.
std::unique_ptr<models::ViT> load(const std::string& fixture) {
  const io::SafeTensors file = decode::read_hf_checkpoint(dir_of(fixture));
  auto model = std::make_unique<models::ViT>(models::StackConfig::from_json(io::checkpoint_info(file, fixture).config_json, fixture, "vit"));
  io::load_parameters(model->named_parameters(), file, fixture);
  model->eval();
  return model;
}

// ---- The image processor ----

// Resize (Pillow's bilinear or bicubic, enlarging image0 and shrinking image1), centre crop,
// rescale and normalisation give transformers' pixel_values bit for bit: the resize is
// Pillow's own integer arithmetic, the rest NumPy's float32 steps in the same order.
TEST(HfVit, ProcessorGivesTransformersPixelValuesExactly) {
  for (const std::string fixture : kFixtures) {
    const std::string type = hf::open(dir_of(fixture)).model_type;
    const data::ImageProcessor p = data::ImageProcessor::read(dir_of(fixture) + "/preprocessor_config.json", type);
    const std::vector<float> want = reference(fixture, "pixel_values").to_vector();  // [2, 3, 32, 32]
    const size_t each = want.size() / 2;
    for (int i = 0; i < 2; ++i) {
      const std::vector<float> got = p.preprocess(data::read_image(image(fixture, i)));
      ASSERT_EQ(got.size(), each) << fixture;
      double worst = 0;
      for (size_t k = 0; k < each; ++k) worst = std::max(worst, static_cast<double>(std::abs(got[k] - want[i * each + k])));
      EXPECT_EQ(worst, 0.0) << fixture << " image" << i;
    }
  }
}

TEST(HfVit, ProcessorReadsDeitFilesAsTheHubHasThem) {
  // facebook/deit-base-patch16-224's file: a DeiTFeatureExtractor, size 256 for 256 x 256.
  const data::ImageProcessor hub = data::ImageProcessor::from_json(
      R"({"crop_size": 224, "do_center_crop": true, "feature_extractor_type": "DeiTFeatureExtractor", "image_mean": [0.485, 0.456, 0.406],
          "image_std": [0.229, 0.224, 0.225], "resample": 3, "size": 256})", "p");
  EXPECT_TRUE(hub.deit && hub.do_center_crop);
  EXPECT_EQ(hub.height, 256);
  EXPECT_EQ(hub.crop_width, 224);
  EXPECT_EQ(hub.resample, data::Resample::Bicubic);
  EXPECT_EQ(hub.output_size(480, 640), (std::pair<int64_t, int64_t>{224, 224}));
  // No type named: the model's (DeiT's defaults for a deit); ViTImageProcessor has no crop step.
  const data::ImageProcessor deit = data::ImageProcessor::from_json("{}", "p", "deit");
  EXPECT_TRUE(deit.do_center_crop);
  EXPECT_EQ(deit.height, 256);
  EXPECT_FALSE(data::ImageProcessor::from_json(R"({"do_center_crop": true, "crop_size": 8})", "p").do_center_crop);
  // {"shortest_edge": N}: the short side to N, the aspect kept (N * long / short rounded down).
  const data::ImageProcessor shortest = data::ImageProcessor::from_json(R"({"size": {"shortest_edge": 10}, "do_normalize": false})", "p");
  EXPECT_EQ(shortest.output_size(30, 45), (std::pair<int64_t, int64_t>{10, 15}));
  EXPECT_EQ(shortest.output_size(45, 31), (std::pair<int64_t, int64_t>{14, 10}));
  // The centre crop's offsets round down, as transformers' center_crop: rows 1..2 of 4, columns 0..1 of 3.
  data::ImageProcessor crop;
  crop.deit = true, crop.do_resize = false, crop.do_center_crop = true, crop.crop_height = 2, crop.crop_width = 2;
  const data::Image grey{4, 3, 1, {0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32}};
  EXPECT_EQ(crop.pixels(grey, 1), (std::vector<uint8_t>{10, 11, 20, 21}));
  // Round trip of the record a converted checkpoint keeps.
  EXPECT_EQ(data::ImageProcessor::from_json(hub.to_json(), "record").to_json(), hub.to_json());
}

TEST(HfVit, ProcessorRefusalsAreOneLineNamingTheSetting) {
  const std::pair<const char*, const char*> refused[] = {
      {R"({"image_processor_type": "CLIPImageProcessor"})",
       "p: image_processor_type \"CLIPImageProcessor\" is not supported: tfm reproduces ViTImageProcessor and DeiTImageProcessor"},
      {R"({"resample": 1})", "p: 'resample' 1 (Lanczos) is not supported"},
      {R"({"image_processor_type": "DeiTImageProcessor", "crop_size": {"shortest_edge": 3}})", "p: 'crop_size' must be {\"height\": H, \"width\": W}"},
      {R"({"size": {"longest_edge": 3}})", "p: 'size' must be {\"height\": H, \"width\": W}, {\"shortest_edge\": N} or a number"},
  };
  for (const auto& [json, message] : refused) {
    const std::string text = json, error = testing::error_of([&] { data::ImageProcessor::from_json(text, "p"); });
    EXPECT_NE(error.find(message), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
  }
  data::ImageProcessor crop;
  crop.deit = true, crop.do_resize = false, crop.do_center_crop = true, crop.crop_height = 8, crop.crop_width = 8;
  EXPECT_NE(testing::error_of([&] { crop.pixels(data::Image{4, 4, 1, std::vector<uint8_t>(16)}, 1); })
                .find("an image of 4x4 pixels is smaller than the image processor's crop_size 8x8"),
            std::string::npos);
}

// ---- The models ----

// ViTModel and DeiTModel (its distillation token, no "deit." prefix either).
TEST(HfVit, BasesGiveLastHiddenStateAndPoolerOutput) {
  for (const std::string fixture : {"vit_base_tiny", "deit_base_tiny"}) {
    const auto model = load(fixture);
    EXPECT_FALSE(model->has_classifier());
    autograd::NoGradGuard no_grad;
    const Tensor hidden = model->hidden_states(reference(fixture, "pixel_values"));
    EXPECT_TENSOR_NEAR(fixture + " last_hidden_state", hidden, reference(fixture, "last_hidden_state"), kTol);
    EXPECT_TENSOR_NEAR(fixture + " pooler_output", model->pooled(hidden), reference(fixture, "pooler_output"), kTol);
  }
}

TEST(HfVit, DeitProcessorViTAndDistilledDeitGiveTransformersLogits) {
  for (const std::string fixture : {"vit_deit_processor_tiny", "deit_distilled_tiny"}) {
    const auto model = load(fixture);
    autograd::NoGradGuard no_grad;
    const Tensor pixels = reference(fixture, "pixel_values");
    EXPECT_TENSOR_NEAR(fixture + " last_hidden_state", model->hidden_states(pixels), reference(fixture, "last_hidden_state"), kTol);
    EXPECT_TENSOR_NEAR(fixture + " logits", model->forward(pixels), reference(fixture, "logits"), kTol);
  }
  const auto deit = load("deit_distilled_tiny");
  EXPECT_TRUE(deit->config().distilled && deit->config().distill_head);
  autograd::NoGradGuard no_grad;
  const Tensor hidden = deit->hidden_states(reference("deit_distilled_tiny", "pixel_values"));  // [2, 18, 32]: [CLS], [DIST], 16 patches
  const Tensor dist = ops::reshape(ops::slice(hidden, 1, 1, 2), {2, 32});
  EXPECT_TENSOR_NEAR("distillation_logits", deit->dist_head->forward(dist), reference("deit_distilled_tiny", "distillation_logits"), kTol);
}

// The library from image files: the processor's pixels, then the model, as a pipeline does.
TEST(HfVit, ClassifierOfImageFilesGivesTransformersProbabilitiesAndFeatures) {
  for (const std::string fixture : {"vit_deit_processor_tiny", "deit_distilled_tiny"}) {
    const Classifier classifier(dir_of(fixture));
    const std::vector<float> logits = reference(fixture, "logits").to_vector();
    const int64_t K = classifier.classes();
    for (int i = 0; i < 2; ++i) {
      const Classification c = classifier.classify(classifier.pixels_of(read_image(image(fixture, i))), 1);
      double sum = 0;
      for (int64_t k = 0; k < K; ++k) sum += std::exp(static_cast<double>(logits[i * K + k]));
      for (int64_t k = 0; k < K; ++k) EXPECT_NEAR(c.probabilities[k], std::exp(static_cast<double>(logits[i * K + k])) / sum, 1e-5) << fixture;
    }
  }
  const Classifier base(dir_of("vit_base_tiny"));
  EXPECT_TRUE(base.has_pooler());
  const std::vector<float> pooled = reference("vit_base_tiny", "pooler_output").to_vector();      // [2, 32]
  const std::vector<float> hidden = reference("vit_base_tiny", "last_hidden_state").to_vector();  // [2, 17, 32]
  for (int i = 0; i < 2; ++i) {
    const std::vector<uint8_t> pixels = base.pixels_of(read_image(image("vit_base_tiny", i)));
    const Embeddings p = base.embed(pixels, 1), cls = base.embed(pixels, 1, "cls");
    ASSERT_EQ(p.dim, 32);
    for (int k = 0; k < 32; ++k) {
      EXPECT_NEAR(p.values[k], pooled[i * 32 + k], kTol);
      EXPECT_NEAR(cls.values[k], hidden[(i * 17) * 32 + k], kTol);
    }
  }
}

// ---- The commands ----

std::vector<std::vector<double>> vectors_of(const std::string& text) {
  std::vector<std::vector<double>> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream numbers(line);
    out.emplace_back();
    for (double x; numbers >> x;) out.back().push_back(x);
  }
  return out;
}

TEST(HfVit, EmbedGivesPoolerOutputOrTheFinalClsState) {
  const std::string dir = dir_of("vit_base_tiny"), images = " --image " + image("vit_base_tiny", 0) + " " + image("vit_base_tiny", 1);
  const std::vector<float> pooled = reference("vit_base_tiny", "pooler_output").to_vector();
  const std::vector<float> hidden = reference("vit_base_tiny", "last_hidden_state").to_vector();
  for (const std::string pool : {"", "pooler", "cls"}) {
    const testing::CliResult r = testing::run_tfm("embed --model " + dir + images + (pool.empty() ? "" : " --pool " + pool) + " 2>&1");
    ASSERT_EQ(r.code, 0) << r.output;
    const auto v = vectors_of(r.output);
    ASSERT_EQ(v.size(), 2u) << r.output;
    for (int i = 0; i < 2; ++i) {
      ASSERT_EQ(v[i].size(), 32u);
      for (int k = 0; k < 32; ++k) EXPECT_NEAR(v[i][k], pool == "cls" ? hidden[(i * 17) * 32 + k] : pooled[i * 32 + k], kTol) << pool;
    }
  }
}

TEST(HfVit, ClassifyingWithDeitNamesTransformersLabels) {
  const std::string dir = dir_of("deit_distilled_tiny");
  const testing::CliResult r = testing::run_tfm("vit eval --model " + dir + " -i " + image("deit_distilled_tiny", 0) + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<float> logits = reference("deit_distilled_tiny", "logits").to_vector();
  const int64_t best = std::max_element(logits.begin(), logits.begin() + 4) - logits.begin();
  const nlohmann::json config = nlohmann::json::parse(testing::read_file(dir + "/config.json"));
  EXPECT_NE(r.output.find(": " + config["id2label"][std::to_string(best)].get<std::string>() + " ("), std::string::npos) << r.output;
}

TEST(HfVit, BaseRefusesClassificationInOneLine) {
  const std::string dir = dir_of("vit_base_tiny");
  for (const std::string args : {"vit eval --model " + dir + " -i " + image("vit_base_tiny", 0), "vit eval --model " + dir + " --data " + dir}) {
    const testing::CliResult r = testing::run_tfm(args + " 2>&1");
    EXPECT_NE(r.code, 0);
    EXPECT_NE(r.output.find("is a ViT base without a classifier (ViTModel); fine-tune one first (tfm vit train --init-from"), std::string::npos)
        << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  }
  const testing::CliResult mean = testing::run_tfm("embed --model " + dir + " --pool mean --image " + image("vit_base_tiny", 0) + " 2>&1");
  EXPECT_NE(mean.output.find("--pool mean is for text"), std::string::npos) << mean.output;
  const testing::CliResult no_pooler =
      testing::run_tfm("embed --model " + dir_of("deit_distilled_tiny") + " --pool pooler --image " + image("deit_distilled_tiny", 0) + " 2>&1");
  EXPECT_NE(no_pooler.output.find("this model has no pooler"), std::string::npos) << no_pooler.output;
}

// `vit eval --data` on a folder prepares its images by the model's processor too (DeiT's
// bicubic resize and crop, ImageNet's mean): its loss is transformers' cross-entropy.
TEST(HfVit, EvaluatingAFolderUsesTheModelsProcessor) {
  testing::TempDir tmp;
  const std::string fixture = "vit_deit_processor_tiny";
  for (const auto& [label, i] : {std::pair<std::string, int>{"cat", 0}, {"dog", 1}}) {
    std::filesystem::create_directories(tmp.path("images/" + label));
    std::filesystem::copy(image(fixture, i), tmp.path("images/" + label + "/x.png"));
  }
  const testing::CliResult r = testing::run_tfm("vit eval --model " + dir_of(fixture) + " --data " + tmp.path("images") + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  const std::vector<float> logits = reference(fixture, "logits").to_vector();  // [2, 5]; labels cat 0, dog 1
  double loss = 0;
  for (int i = 0; i < 2; ++i) {
    double sum = 0;
    for (int k = 0; k < 5; ++k) sum += std::exp(static_cast<double>(logits[i * 5 + k]));
    loss += (std::log(sum) - logits[i * 5 + i]) / 2;
  }
  const size_t at = r.output.find("loss ");
  ASSERT_NE(at, std::string::npos) << r.output;
  EXPECT_NEAR(std::stod(r.output.substr(at + 5)), loss, 1e-4) << r.output;
}

// A directory whose processor makes images of another size than config.json's is refused.
TEST(HfVit, ProcessorOfAnotherSizeIsRefusedWhenTheModelLoads) {
  testing::TempDir tmp;
  const std::string copy = tmp.path("vit");
  std::filesystem::copy(dir_of("vit_deit_processor_tiny"), copy);
  testing::write_file(copy + "/preprocessor_config.json", R"({"feature_extractor_type": "DeiTFeatureExtractor", "size": 36, "crop_size": 30})");
  EXPECT_NE(testing::error_of([&] { decode::read_hf_checkpoint(copy); })
                .find("preprocessor_config.json: makes images of 30x30 pixels, but config.json's image_size is 32"),
            std::string::npos);
}

// Fine-tuning from the base: a new classifier of the folder's classes (the pooler left), the
// rest loaded; the loss falls and the fine-tuned model classifies image files.
TEST(HfVit, FineTuningFromABaseTrainsANewClassifier) {
  testing::TempDir tmp;
  Rng rng(3);
  for (const std::string name : {"red", "blue"})
    for (int i = 0; i < 12; ++i) {
      data::Image img{20, 24, 3, std::vector<uint8_t>(20 * 24 * 3)};
      for (size_t p = 0; p < img.pixels.size(); ++p)
        img.pixels[p] = static_cast<uint8_t>((p % 3 == (name == "red" ? 0u : 2u) ? 160 : 40) + 60 * rng.uniform());
      std::filesystem::create_directories(tmp.path("images/" + name));
      testing::write_file(tmp.path("images/" + name + "/" + std::to_string(i) + ".png"), data::encode_png(img));
    }
  const testing::CliResult r = testing::run_tfm("vit train --init-from " + dir_of("vit_base_tiny") + " --data " + tmp.path("images") +
                                                " --valid-fraction 0.25 --batch 8 --lr 0.003 --steps 12 --warmup 2 --log-every 1 --out " +
                                                tmp.path("run") + " 2>&1");
  ASSERT_EQ(r.code, 0) << r.output;
  EXPECT_NE(r.output.find("initialised from " + dir_of("vit_base_tiny") + ": a base, under a new classifier of 2 classes"), std::string::npos)
      << r.output;
  const testing::CliResult eval = testing::run_tfm("vit eval --model " + tmp.path("run/last.safetensors") + " -i " +
                                                   tmp.path("images/red/0.png") + " 2>&1");
  ASSERT_EQ(eval.code, 0) << eval.output;
  // The checkpoint keeps the base's processor, which prepares the images it is given.
  EXPECT_EQ(io::read_safetensors(tmp.path("run/last.safetensors")).metadata.count("tfm.image_processor"), 1u);
  EXPECT_TRUE(eval.output.find(": red (") != std::string::npos || eval.output.find(": blue (") != std::string::npos) << eval.output;
}

}  // namespace
}  // namespace tfm
