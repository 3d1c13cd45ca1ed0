#pragma once
// Reading model configurations from JSON: one object of known settings, absent
// fields keep their defaults, and every mistake (bad JSON, unknown setting, wrong
// type) is one error naming the file.
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <cstdlib>
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
    if constexpr (std::is_integral_v<T> && !std::is_same_v<T, bool>) {
      // nlohmann converts 1e300 to an integer with undefined behaviour: only exact integers in range pass.
      const nlohmann::json& v = j_.at(key);
      const bool fits = v.is_number_integer() && (v.is_number_unsigned() ? v.get<uint64_t>() <= uint64_t{1} << 62
                                                                          : std::llabs(v.get<int64_t>()) <= int64_t{1} << 62);
      if (!fits) throw Error(origin_ + ": field '" + key + "' has the wrong type (" + v.dump() + "; expected an integer)");
    }
    try {
      out = j_.at(key).get<T>();
    } catch (const nlohmann::json::exception&) {
      throw Error(origin_ + ": field '" + key + "' has the wrong type (" + j_.at(key).dump() + ")");
    }
  }
  void read_activation(const char* key, nn::Activation& out) const;

 private:
  nlohmann::json j_;
  std::string origin_;
};

// The whole text of a configuration file.
std::string read_config_file(const std::string& path);

}  // namespace tfm::models
