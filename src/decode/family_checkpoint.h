#pragma once
// Opening a checkpoint of one of the single-stack families (gpt, bert, vit) for a
// program: refuses other kinds with one line, and rebuilds the configuration and,
// for the text families, the tokenizer the model was trained with.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "data/image_processor.h"
#include "data/tokenizer.h"
#include "io/checkpoint.h"
#include "models/stack_config.h"

namespace tfm::decode {

struct FamilyCheckpoint {
  std::string path;
  io::SafeTensors file;
  models::StackConfig config;
  std::optional<data::Tokenizer> tokenizer;  // bert; gpt where it records one (tfm::Generator takes ids without)
};

// What a checkpoint of a ViT trained on an image folder records: the class names in label
// order, as {"classes": [...]} under this key. A model that records them resizes the
// images it is given, as its training did (a Hugging Face ViT records its labels so).
inline constexpr const char* kImageFolderKey = "tfm.image_folder";
// What a ViT trained on MNIST-style files may record in the same form: its classes'
// names (Fashion-MNIST's), kept through `tfm export` and back. Such a model takes
// images of its own size, unresized.
inline constexpr const char* kIdxClassesKey = "tfm.idx_classes";
std::string classes_record(const std::vector<std::string>& classes);
// A Hugging Face ViT's image processor (data::ImageProcessor::to_json), where its directory
// has one: how the model takes an image. A checkpoint without it takes tfm's own pixels
// (data::vit_pixels, ops::from_pixels).
inline constexpr const char* kImageProcessorKey = "tfm.image_processor";
std::optional<data::ImageProcessor> recorded_image_processor(const std::map<std::string, std::string>& metadata, const std::string& origin);
// The class names recorded under `key` (empty where none), checked to be `classes` names.
std::vector<std::string> recorded_classes(const std::map<std::string, std::string>& metadata, int64_t classes, const std::string& origin,
                                          const char* key = kImageFolderKey);

// A BERT classifier's labels, in id order, as {"classes": [...]} under this key.
inline constexpr const char* kTextLabelsKey = "tfm.labels";
// The labels recorded (LABEL_i for each where none are: a checkpoint trained without names).
std::vector<std::string> recorded_text_labels(const std::map<std::string, std::string>& metadata, int64_t classes, const std::string& origin);

// A ViT checkpoint's classes: their names (empty: none recorded, numbered classes), and
// whether the model resizes the images it is given (an image folder's or a Hugging Face
// ViT's names recorded).
struct VitClasses {
  std::vector<std::string> names;
  bool resizes = false;
};
VitClasses recorded_vit_classes(const std::map<std::string, std::string>& metadata, int64_t classes, const std::string& origin);

// `made_by` completes "is a <kind> checkpoint, not <made_by>"; `spm` overrides a
// recorded SentencePiece path.
FamilyCheckpoint open_family_checkpoint(const std::string& path, const std::string& kind, const std::string& made_by,
                                        const std::string& spm = "");

}  // namespace tfm::decode
