// Vision Transformers on folders of images (torchvision's ImageFolder convention): the
// folder's scan, split and errors; a tiny ViT trained on drawn coloured shapes of mixed
// sizes and formats to 90%+ validation accuracy, evaluated by `tfm vit eval` on the folder
// and on single files (class names from the checkpoint); and the 96 x 96 RGB, 16 x 16
// patch, 768-wide configuration (37 tokens) training and evaluating.
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <sstream>

#include "data/image.h"
#include "data/image_folder.h"
#include "data/image_processor.h"
#include "io/safetensors.h"
#include "support/images.h"
#include "support/process.h"
#include "tensor/tensor.h"
#include "tfm/classifier.h"
#include "tfm/training.h"
#include "decode/family_checkpoint.h"
#include "train/vit.h"

namespace tfm {
namespace {

using data::Image;
using testing::error_of;
using testing::TempDir;

const std::vector<std::string> kShapes = {"disc", "hstripes", "square", "vstripes"};

struct Rgb {
  int r, g, b;
};

// A picture of `shape` (one of kShapes) of random size, 28 to 56 pixels a side, in a
// random bright colour on a noisy dark background: the colour says nothing of the class.
Image draw(const std::string& shape, Rng& rng) {
  const int64_t h = rng.randint(28, 57), w = rng.randint(28, 57);
  const Rgb ink{static_cast<int>(rng.randint(90, 256)), static_cast<int>(rng.randint(90, 256)), static_cast<int>(rng.randint(90, 256))};
  const double cy = rng.uniform(0.35, 0.65) * h, cx = rng.uniform(0.35, 0.65) * w, r = rng.uniform(0.3, 0.45) * std::min(h, w);
  const int64_t period = rng.randint(10, 17), base = rng.randint(10, 70);
  Image im{h, w, 3, std::vector<uint8_t>(static_cast<size_t>(h * w * 3))};
  for (int64_t y = 0; y < h; ++y)
    for (int64_t x = 0; x < w; ++x) {
      const bool inked = shape == "disc"       ? std::hypot(y - cy, x - cx) < r
                         : shape == "square"   ? std::abs(y - cy) < r && std::abs(x - cx) < r
                         : shape == "hstripes" ? y % period < period / 2
                                               : x % period < period / 2;
      const int noise = static_cast<int>(rng.randint(-20, 21));
      const int v[3] = {inked ? ink.r : static_cast<int>(base), inked ? ink.g : static_cast<int>(base), inked ? ink.b : static_cast<int>(base)};
      for (int c = 0; c < 3; ++c) im.pixels[static_cast<size_t>((y * w + x) * 3 + c)] = static_cast<uint8_t>(std::clamp(v[c] + noise, 0, 255));
    }
  return im;
}

// DIR/<shape>/<n>.png|.jpg: `per_class` pictures of each shape, every third a JPEG.
void write_shapes(const std::string& dir, int per_class, uint64_t seed) {
  Rng rng(seed);
  for (const std::string& shape : kShapes) {
    std::filesystem::create_directories(dir + "/" + shape);
    for (int i = 0; i < per_class; ++i) {
      const Image im = draw(shape, rng);
      const bool jpeg = i % 3 == 2;
      testing::write_file(dir + "/" + shape + "/" + std::to_string(1000 + i) + (jpeg ? ".jpg" : ".png"),
                          jpeg ? testing::jpeg_bytes(im, 92) : data::encode_png(im));
    }
  }
}

TEST(ImageFolder, ScansClassesAndImagesInSortedOrderAndHoldsOutEvenly) {
  TempDir dir;
  write_shapes(dir.path("shapes"), 10, 1);
  testing::write_file(dir.path("shapes/disc/notes.txt"), "not an image");
  testing::write_file(dir.path("shapes/disc/._1000.png"), "a hidden file");
  std::filesystem::create_directories(dir.path("shapes/square/more"));
  testing::write_file(dir.path("shapes/square/more/A.PNG"), data::encode_png({2, 2, 1, {0, 50, 100, 150}}));  // grey, upper case
  // Named as images, but not files (the review's F5): left out, and named.
  std::filesystem::create_directories(dir.path("shapes/disc/folder.png"));
  std::filesystem::create_symlink(dir.path("nowhere.png"), dir.path("shapes/disc/broken.png"));
  const data::ImageFolder f = data::scan_image_folder(dir.path("shapes"));
  EXPECT_EQ(f.skipped, (std::vector<std::string>{dir.path("shapes/disc/broken.png"), dir.path("shapes/disc/folder.png")}));
  EXPECT_EQ(f.classes, kShapes);
  ASSERT_EQ(f.files.size(), 41u);
  EXPECT_EQ(f.files[0], dir.path("shapes/disc/1000.png"));
  EXPECT_EQ(f.files[2], dir.path("shapes/disc/1002.jpg"));
  EXPECT_EQ(f.files[30], dir.path("shapes/square/more/A.PNG"));
  EXPECT_EQ(f.labels[30], 2);
  const auto [kept, held] = data::hold_out(f, 0.2);  // the 5th and 10th of each class
  EXPECT_EQ(held.files.size(), 8u);
  EXPECT_EQ(held.files[0], dir.path("shapes/disc/1004.png"));
  EXPECT_EQ(held.files[1], dir.path("shapes/disc/1009.png"));
  EXPECT_EQ(kept.files.size() + held.files.size(), f.files.size());
  const data::ImageSet set = data::load_images(f, 3, 8);  // every image resized to 8 x 8 RGB
  EXPECT_EQ(set.pixels.size(), 41u * 3 * 8 * 8);
  const std::vector<uint8_t> grey(set.pixels.begin() + 30 * 192, set.pixels.begin() + 31 * 192);
  EXPECT_EQ(grey, data::vit_pixels({2, 2, 1, {0, 50, 100, 150}}, 3, 8));
  EXPECT_TRUE(std::equal(grey.begin(), grey.begin() + 64, grey.begin() + 64)) << "grey to RGB repeats the channel";
}

TEST(ImageFolder, RefusesWhatCannotTrainWithOneLine) {
  TempDir dir;
  std::filesystem::create_directories(dir.path("empty"));
  EXPECT_EQ(error_of([&] { data::scan_image_folder(dir.path("empty")); }),
            dir.path("empty") + ": no class folders (an image folder holds " + dir.path("empty") + "/<class>/<image>.png|jpg|jpeg)");
  std::filesystem::create_directories(dir.path("one/cat"));
  std::filesystem::create_directories(dir.path("one/dog"));
  testing::write_file(dir.path("one/cat/a.png"), data::encode_png({1, 1, 1, {0}}));
  testing::write_file(dir.path("one/dog/readme.txt"), "");
  EXPECT_EQ(error_of([&] { data::scan_image_folder(dir.path("one")); }), dir.path("one/dog") + ": a class folder without images (.png, .jpg or .jpeg)");
  testing::write_file(dir.path("one/dog/b.jpg"), "not a JPEG at all");
  EXPECT_EQ(error_of([&] { data::load_images(data::scan_image_folder(dir.path("one")), 3, 4); }),
            dir.path("one/dog/b.jpg") + ": neither PNG nor JPEG (by its first bytes)");
  EXPECT_EQ(error_of([&] { data::relabelled(data::scan_image_folder(dir.path("one")), {"cat", "cow"}, "the model"); }),
            dir.path("one/dog") + ": the model has no class 'dog'");

  VitTask task;
  task.data_dir = dir.path("one");
  TrainingOptions o = VitTask::training_defaults();
  o.out_dir = dir.path("run");
  EXPECT_NE(error_of([&] { tfm::train(o, task); }).find("no image held out for validation"), std::string::npos);
  task.model = R"({"classes": 3})";
  EXPECT_EQ(error_of([&] { tfm::train(o, task); }), dir.path("one") + " has 2 class folders, the model settings say 3 classes");
  task.data_dir = dir.path("nowhere");
  EXPECT_NE(error_of([&] { tfm::train(o, task); }).find("nowhere: not found (MNIST-style files"), std::string::npos);
}

// Trains `task` on a fresh run directory, returning the result and how long it took.
std::pair<TrainingResult, double> timed_training(const TrainingOptions& o, const VitTask& task, std::ostringstream& log) {
  const auto start = std::chrono::steady_clock::now();
  TrainingResult r = tfm::train(o, task, {}, &log);
  return {r, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
}

TEST(VitImageFolder, LearnsColouredShapesAndNamesTheirClasses) {
  TempDir dir;
  write_shapes(dir.path("shapes"), 80, 7);  // 320 pictures, 64 held out
  VitTask task;
  task.data_dir = dir.path("shapes");
  task.model = R"({"image_size": 32, "patch": 8, "d_model": 32, "heads": 2, "d_ff": 64, "layers": 2})";
  task.batch = 32, task.valid_fraction = 0.2;
  TrainingOptions o = VitTask::training_defaults();
  o.out_dir = dir.path("run"), o.epochs = 30, o.validate_every = 0, o.schedule.warmup = 10, o.schedule.lr = 3e-3f;
  std::ostringstream log;
  const auto [result, seconds] = timed_training(o, task, log);
  std::cout << "coloured shapes: best validation accuracy " << result.best_score << "% after " << result.steps << " steps in " << seconds
            << " s\n";
  EXPECT_GE(result.best_score, 90.0) << log.str();
  EXPECT_NE(log.str().find("images: 256 for training, 64 for validation from " + dir.path("shapes") +
                           " (32x32 RGB, 16 patches of 8x8, 4 classes)"),
            std::string::npos)
      << log.str();

  const std::string best = dir.path("run/best.safetensors");
  EXPECT_EQ(io::read_safetensors(best).metadata.at(decode::kImageFolderKey), R"({"classes":["disc","hstripes","square","vstripes"]})");
  testing::CliResult eval = testing::run_tfm("vit eval --model " + best + " --data " + dir.path("shapes"));
  EXPECT_EQ(eval.code, 0) << eval.output;
  EXPECT_NE(eval.output.find(" 0 disc "), std::string::npos) << eval.output;
  EXPECT_NE(eval.output.find(" 3 vstripes "), std::string::npos) << eval.output;

  // Single files of any size, named by class: the held-out 5th picture of each shape.
  std::string files;
  for (const std::string& shape : kShapes) files += " " + dir.path("shapes/" + shape + "/1004.png");
  testing::CliResult one = testing::run_tfm("vit eval --model " + best + " -i" + files);
  EXPECT_EQ(one.code, 0) << one.output;
  for (const std::string& shape : kShapes) EXPECT_NE(one.output.find("/" + shape + "/1004.png: " + shape + " ("), std::string::npos) << one.output;

  const Classifier classifier(best);
  EXPECT_EQ(classifier.class_names(), kShapes);
  const tfm::Image picture = tfm::read_image(dir.path("shapes/disc/1004.png"));
  EXPECT_EQ(classifier.pixels_of(picture), data::vit_pixels(data::read_image(dir.path("shapes/disc/1004.png")), 3, 32));
}

TEST(VitImageFolder, TrainAndValFoldersAndTheirClassesOnResume) {
  TempDir dir;
  write_shapes(dir.path("d/train"), 6, 1);
  write_shapes(dir.path("d/val"), 2, 2);
  VitTask task;
  task.data_dir = dir.path("d");
  task.model = R"({"image_size": 16, "patch": 8, "d_model": 16, "heads": 2, "d_ff": 32, "layers": 1, "channels": 1})";
  task.batch = 8;
  TrainingOptions o = VitTask::training_defaults();
  o.out_dir = dir.path("run"), o.max_steps = 2, o.validate_every = 0;
  std::ostringstream log;
  ASSERT_FALSE(tfm::train(o, task, {}, &log).stopped) << log.str();
  EXPECT_NE(log.str().find("images: 24 for training, 8 for validation from " + dir.path("d") + " (16x16 grey"), std::string::npos) << log.str();

  std::filesystem::rename(dir.path("d/val/disc"), dir.path("d/val/circle"));
  TrainingOptions elsewhere = o;
  elsewhere.out_dir = dir.path("run2");
  EXPECT_EQ(error_of([&] { tfm::train(elsewhere, task); }), dir.path("d/val/circle") + ": " + dir.path("d/train") + " has no class 'circle'");
  std::filesystem::remove_all(dir.path("d/val/circle"));
  std::filesystem::rename(dir.path("d/train/disc"), dir.path("d/train/circle"));
  o.resume = dir.path("run/last.safetensors"), o.max_steps = 3;
  EXPECT_EQ(error_of([&] { tfm::train(o, task); }),
            o.resume + ": trained on the classes disc, hstripes, square, vstripes, not the classes circle, hstripes, square, vstripes");
}

// The configuration of a ViT-Base on 96 x 96 RGB images: 16 x 16 patches (36 + [CLS] = 37
// tokens), 768 wide, 12 heads, feed-forward 3072; two layers here (the docs time all 12).
TEST(VitImageFolder, TakesNinetySixPixelImagesInSixteenPixelPatchesSevenHundredSixtyEightWide) {
  TempDir dir;
  write_shapes(dir.path("shapes"), 5, 3);
  VitTask task;
  task.data_dir = dir.path("shapes");
  task.model = R"({"image_size": 96, "patch": 16, "d_model": 768, "heads": 12, "d_ff": 3072, "layers": 2})";
  task.batch = 4, task.valid_fraction = 0.2;
  TrainingOptions o = VitTask::training_defaults();
  o.out_dir = dir.path("run"), o.max_steps = 2, o.validate_every = 0;
  std::ostringstream log;
  const auto [result, seconds] = timed_training(o, task, log);
  std::cout << "96x96, patch 16, 768 wide, 2 layers: 2 steps of 4 images and validation in " << seconds << " s\n";
  EXPECT_EQ(result.steps, 2) << log.str();
  EXPECT_NE(log.str().find("(96x96 RGB, 36 patches of 16x16, 4 classes)"), std::string::npos) << log.str();
  testing::CliResult eval = testing::run_tfm("vit eval --model " + dir.path("run/last.safetensors") + " -i " + dir.path("shapes/square/1000.png"));
  EXPECT_EQ(eval.code, 0) << eval.output;
  EXPECT_NE(eval.output.find("/square/1000.png: "), std::string::npos) << eval.output;
}

}  // namespace
}  // namespace tfm
