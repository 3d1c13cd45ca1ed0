#include "ops/linear_products.h"

#include "tensor/error.h"

namespace tfm::ops {

Precision parse_precision(const std::string& name) {
  if (name == "f32") return Precision::f32;
  if (name == "bf16") return Precision::bf16;
  TFM_CHECK(name == "int8", "unknown precision '" << name << "' (expected f32, bf16 or int8)");
  return Precision::int8;
}

std::string to_string(Precision p) {
  switch (p) {
    case Precision::f32: return "f32";
    case Precision::bf16: return "bf16";
    case Precision::int8: return "int8";
  }
  return "?";
}

}  // namespace tfm::ops
