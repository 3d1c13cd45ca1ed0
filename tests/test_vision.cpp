// The Vision Transformer family: the IDX reader (validation of every field),
// patches, and a short training run on a synthetic image set through the shared
// Trainer, `tfm vit eval` and `tfm attention`.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>

#include "data/idx.h"
#include "ops/shape.h"
#include "support/datasets.h"
#include "support/devices.h"
#include "support/process.h"
#include "train/vit.h"

namespace tfm {
namespace {

using testing::error_of;
using testing::idx_bytes;
using testing::TempDir;
using testing::write_quadrant_set;

TEST(Idx, ParsesAndValidatesEveryField) {
  data::IdxArray a = data::parse_idx(idx_bytes({2, 3}, {1, 2, 3, 4, 5, 6}), "ok");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.values[5], 6);
  EXPECT_EQ(error_of([] { data::parse_idx(idx_bytes({2, 3}, {1, 2, 3}), "f"); }), "f: IDX header promises 6 values but the file holds 3 (truncated)");
  EXPECT_EQ(error_of([] { data::parse_idx(idx_bytes({2}, {1, 2, 3}), "f"); }), "f: IDX header promises 2 values but the file holds 3");
  EXPECT_EQ(error_of([] { data::parse_idx("PK\x03\x04zip", "f"); }), "f: not an IDX file (bad magic number)");
  EXPECT_NE(error_of([] { data::parse_idx(idx_bytes({2}, {1, 2}, 0x0d), "f"); }).find("not supported"), std::string::npos);
  EXPECT_EQ(error_of([] { data::parse_idx(idx_bytes({0}, {}), "f"); }), "f: IDX dimension 0 is zero");
  EXPECT_EQ(error_of([] { data::parse_idx(std::string("\0\0\x08\x02\0\0", 6), "f"); }), "f: truncated IDX header");
  EXPECT_NE(error_of([] { data::parse_idx(idx_bytes({65535, 65535, 65535}, {}), "f"); }).find("implausibly large"), std::string::npos);
}

TEST(Idx, ImageSetsCheckThatImagesAndLabelsAgree) {
  TempDir dir;
  write_quadrant_set(dir.path(""), "train", 10, 1);
  data::ImageSet s = data::read_image_split(dir.path(""), true, 4);
  EXPECT_EQ(s.count, 10);
  EXPECT_EQ(s.rows, 8);
  EXPECT_NE(error_of([&] { data::read_image_split(dir.path(""), true, 2); }).find("is not below 2"), std::string::npos);
  testing::write_file(dir.path("train-labels-idx1-ubyte"), idx_bytes({9}, std::vector<uint8_t>(9, 0)));
  EXPECT_NE(error_of([&] { data::read_image_split(dir.path(""), true, 4); }).find("holds 10 images but"), std::string::npos);
  EXPECT_NE(error_of([&] { data::read_image_split(dir.path(""), false, 4); }).find("dataset-fashion-mnist"), std::string::npos);
}

TEST(Idx, FashionMnistFromTheDebianPackage) {
  if (!std::filesystem::exists(training::kFashionMnistDir))
    GTEST_SKIP() << "Fashion-MNIST is not installed: " << training::kFashionMnistDir << " is missing (apt install dataset-fashion-mnist)";
  data::ImageSet test = data::read_image_split(training::kFashionMnistDir, false, 10);
  EXPECT_EQ(test.count, 10000);
  EXPECT_EQ(test.rows, 28);
  EXPECT_EQ(test.cols, 28);
}

TEST(Patchify, CutsRowMajorPatchesFlattenedLikeAConvWeight) {
  std::vector<float> v(2 * 16);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
  Tensor p = ops::patchify(Tensor::from_vector({1, 2, 4, 4}, v), 2);  // 4 patches of (2 channels x 2 x 2)
  ASSERT_EQ(p.shape(), (Shape{1, 4, 8}));
  std::vector<float> got = p.to_vector();
  EXPECT_EQ(std::vector<float>(got.begin(), got.begin() + 8), (std::vector<float>{0, 1, 4, 5, 16, 17, 20, 21}));  // top-left
  EXPECT_EQ(std::vector<float>(got.begin() + 8, got.begin() + 16), (std::vector<float>{2, 3, 6, 7, 18, 19, 22, 23}));  // top-right
}

TEST(VitTraining, LearnsQuadrantsAndEvaluates) {
  TempDir dir;
  write_quadrant_set(dir.path(""), "train", 600, 2);
  write_quadrant_set(dir.path(""), "t10k", 100, 3);
  VitTask task;
  task.data_dir = dir.path("");
  task.model = R"({"image_size": 8, "patch": 4, "classes": 4, "d_model": 16, "d_ff": 32, "layers": 1, "heads": 2})";
  task.batch = 32, task.valid_images = 100, task.flip = false;
  TrainingOptions o = VitTask::training_defaults();
  o.out_dir = dir.path("run"), o.epochs = 8, o.validate_every = 0, o.schedule.warmup = 10, o.schedule.lr = 3e-3f;
  std::ostringstream log;
  ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  EXPECT_NE(log.str().find("best validation accuracy 100%"), std::string::npos) << log.str();

  testing::CliResult e = testing::run_tfm("vit eval --model " + dir.path("run/best.safetensors") + " --data " + dir.path(""));
  EXPECT_EQ(e.code, 0) << e.output;
  EXPECT_NE(e.output.find("test accuracy 100.00%"), std::string::npos) << e.output;
  testing::CliResult a = testing::run_tfm("attention --model " + dir.path("run/best.safetensors") + " --data " + dir.path("") +
                                          " --image 3 --out " + dir.path("cls.png"));
  EXPECT_EQ(a.code, 0) << a.output;
  EXPECT_TRUE(std::filesystem::exists(dir.path("cls.png"))) << a.output;
  testing::CliResult mt = testing::run_tfm("attention --model " + dir.path("run/best.safetensors") + " --data " + dir.path("") +
                                           " --image 3 --kind decoder --head 1 -o " + dir.path("cls.png"));
  EXPECT_EQ(mt.code, 1);
  EXPECT_NE(mt.output.find("--src, --tgt, --kind and --head are for translation models"), std::string::npos) << mt.output;
}

// The review's W8: a ViT trained on Fashion-MNIST-style files keeps its class names and
// its test files through `tfm export --hf` and back (10 classes in a directory named
// *fashion*, the quadrant images standing in for Fashion-MNIST's).
TEST(VitTraining, AnExportedMnistStyleModelKeepsItsClassNamesAndTestFiles) {
  TempDir dir;
  const std::string data = dir.path("fashion-like");
  std::filesystem::create_directories(data);
  write_quadrant_set(data, "train", 200, 2);
  write_quadrant_set(data, "t10k", 20, 3);
  VitTask task;
  task.data_dir = data;
  task.model = R"({"image_size": 8, "patch": 4, "classes": 10, "d_model": 16, "d_ff": 32, "layers": 1, "heads": 2})";
  task.batch = 32, task.valid_images = 20;
  TrainingOptions o = VitTask::training_defaults();
  o.out_dir = dir.path("run"), o.epochs = 1, o.validate_every = 0;
  std::ostringstream log;
  ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  const std::string checkpoint = dir.path("run/last.safetensors"), hf = dir.path("hf");
  testing::CliResult x = testing::run_tfm("export --model " + checkpoint + " --hf " + hf);
  ASSERT_EQ(x.code, 0) << x.output;
  const std::string config = testing::read_file(hf + "/config.json");
  EXPECT_NE(config.find("\"4\": \"Coat\""), std::string::npos) << config;
  EXPECT_NE(config.find("\"tfm_mnist_style\": true"), std::string::npos) << config;
  for (const std::string& model : {checkpoint, hf}) {
    testing::CliResult e = testing::run_tfm("vit eval --model " + model + " --data " + data);
    EXPECT_EQ(e.code, 0) << model << ": " << e.output;
    EXPECT_NE(e.output.find(" 0 T-shirt/top"), std::string::npos) << model << ": " << e.output;
  }
}

// On the simulated device (tensor/device.h), with validation: the CPU's weights bit for bit.
TEST(VitTraining, TrainsOnTheSimulatedDeviceAsOnTheCpu) {
  TempDir dir;
  write_quadrant_set(dir.path(""), "train", 64, 2);
  write_quadrant_set(dir.path(""), "t10k", 16, 3);
  VitTask task;
  task.data_dir = dir.path("");
  task.model = R"({"image_size": 8, "patch": 4, "classes": 4, "d_model": 16, "d_ff": 32, "layers": 1, "heads": 2})";
  task.batch = 16, task.valid_images = 16;
  TrainingOptions o = VitTask::training_defaults();
  o.max_steps = 4, o.validate_every = 2, o.schedule.warmup = 2;
  testing::expect_the_simulated_device_trains_as_the_cpu(dir.path(""), o, task);
}

}  // namespace
}  // namespace tfm
