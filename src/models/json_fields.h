#pragma once
// Reading model configurations from JSON: one object of known settings, absent
// fields keep their defaults, and every mistake (bad JSON, unknown setting, wrong
// type) is one error naming the file.
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <type_traits>

#include "nn/transformer.h"
#include "tensor/error.h"

namespace tfm::models {

class JsonFields {
 public:
  JsonFields(const std::string& text, const std::string& origin, std::initializer_list<const char*> known);

  template <class T>
  void read(const char* key, T& out) const {
    if (!j_.contains(key)) return;
    const nlohmann::json& v = j_.at(key);
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // nlohmann converts 1e300 to an integer with undefined behaviour and truncates 2^32
      // into an int: only exact integers the field can hold pass.
      static_assert(std::is_signed_v<T>);
      if (!v.is_number_integer()) throw Error(origin_ + ": field '" + key + "' has the wrong type (" + v.dump() + "; expected an integer)");
      using Limits = std::numeric_limits<T>;
      const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(Limits::max())
                                               : v.get<int64_t>() >= Limits::min() && v.get<int64_t>() <= Limits::max();
      if (!fits) throw_out_of_range(key, v.dump(), Limits::min(), Limits::max());
    }
    try {
      out = v.get<T>();
    } catch (const nlohmann::json::exception&) {
      throw Error(origin_ + ": field '" + key + "' has the wrong type (" + v.dump() + ")");
    }
  }
  void read_activation(const char* key, nn::Activation& out) const;

 private:
  [[noreturn]] void throw_out_of_range(const char* key, const std::string& value, int64_t lo, int64_t hi) const;
  nlohmann::json j_;
  std::string origin_;
};

// The whole text of a configuration file (a regular file of at most 1 MiB).
std::string read_config_file(const std::string& path);

// Bounds on every size a configuration gives. They keep each product of sizes (tensor
// shapes, strides, the weight count below) far inside int64, and a crafted checkpoint
// or --config from asking for more memory than any machine has.
inline constexpr int64_t kMaxVocab = int64_t{1} << 24, kMaxWidth = int64_t{1} << 16, kMaxFeedForward = int64_t{1} << 18,
                         kMaxLayers = 1024, kMaxPositions = int64_t{1} << 17, kMaxImageSize = 4096, kMaxChannels = 16,
                         kMaxWeightFloats = int64_t{1} << 34;

// Refuses `value` outside [lo, hi] with one line naming the field, its value and the range.
void check_range(const std::string& origin, const char* field, int64_t value, int64_t lo, int64_t hi);
// d_model, heads and d_ff: each bounded, and heads dividing d_model.
void check_widths(const std::string& origin, int64_t d_model, int64_t heads, int64_t d_ff);
// Refuses a model whose weights would take more than kMaxWeightFloats floats; `sizes`
// names the fields that make it so large.
void check_weight_floats(const std::string& origin, int64_t floats, const std::string& sizes);
// Weights of one encoder layer (self-attention, feed-forward, two LayerNorms) and of
// one decoder layer (a second attention and a third LayerNorm).
int64_t encoder_layer_floats(int64_t d_model, int64_t d_ff);
int64_t decoder_layer_floats(int64_t d_model, int64_t d_ff);

}  // namespace tfm::models
