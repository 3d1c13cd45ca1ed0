#include "models/json_fields.h"

#include <fstream>
#include <sstream>

#include "io/input_file.h"

namespace tfm::models {

JsonFields::JsonFields(const std::string& text, const std::string& origin, std::initializer_list<const char*> known) : origin_(origin) {
  try {
    j_ = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse errors, and numbers too large for any type
    throw Error(origin + ": not valid JSON (" + e.what() + ")");
  }
  TFM_CHECK(j_.is_object(), origin << ": expected a JSON object of model settings");
  for (auto it = j_.begin(); it != j_.end(); ++it) {
    bool ok = false;
    for (const char* k : known) ok = ok || it.key() == k;
    TFM_CHECK(ok, origin << ": unknown setting '" << it.key() << "'");
  }
}

void JsonFields::read_activation(const char* key, nn::Activation& out) const {
  std::string name = nn::to_string(out);
  read(key, name);
  try {
    out = nn::parse_activation(name);
  } catch (const Error& e) {
    throw Error(origin_ + ": " + e.what());
  }
}

void JsonFields::throw_out_of_range(const char* key, const std::string& value, int64_t lo, int64_t hi) const {
  throw Error(origin_ + ": field '" + key + "' is " + value + ", outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

std::string read_config_file(const std::string& path) {
  io::check_input_file(path, int64_t{1} << 20, "configuration file");
  std::ifstream in(path);
  TFM_CHECK(in, path << ": cannot open the configuration file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void check_range(const std::string& origin, const char* field, int64_t value, int64_t lo, int64_t hi) {
  TFM_CHECK(value >= lo && value <= hi, origin << ": " << field << " " << value << " outside [" << lo << ", " << hi << "]");
}

void check_widths(const std::string& origin, int64_t d_model, int64_t heads, int64_t d_ff) {
  check_range(origin, "d_model", d_model, 1, kMaxWidth);
  check_range(origin, "heads", heads, 1, d_model);
  check_range(origin, "d_ff", d_ff, 1, kMaxFeedForward);
  TFM_CHECK(d_model % heads == 0, origin << ": d_model " << d_model << " is not divisible by heads " << heads);
}

void check_weight_floats(const std::string& origin, int64_t floats, const std::string& sizes) {
  TFM_CHECK(floats <= kMaxWeightFloats, origin << ": " << sizes << " make a model of about " << floats << " weights, more than tfm's limit of "
                                               << kMaxWeightFloats << " (64 GiB)");
}

int64_t encoder_layer_floats(int64_t d_model, int64_t d_ff) {
  return 4 * d_model * d_model + 2 * d_model * d_ff + 9 * d_model + d_ff;
}

int64_t decoder_layer_floats(int64_t d_model, int64_t d_ff) {
  return encoder_layer_floats(d_model, d_ff) + 4 * d_model * d_model + 6 * d_model;
}

}  // namespace tfm::models
