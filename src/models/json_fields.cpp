#include "models/json_fields.h"

#include <fstream>
#include <sstream>

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

std::string read_config_file(const std::string& path) {
  std::ifstream in(path);
  TFM_CHECK(in, path << ": cannot open the configuration file");
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace tfm::models
