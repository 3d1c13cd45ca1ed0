#include "api/inference.h"

#include "io/checkpoint.h"
#include "ops/linear_products.h"

namespace tfm::api {

void ready_for_inference(nn::Module& model, const io::SafeTensors& file, const std::string& path, const std::string& precision) {
  const ops::Precision p = ops::parse_precision(precision);  // a bad name fails before the weights load
  io::load_parameters(model.named_parameters(), file, path);
  model.eval();
  model.products().set_precision(p);
  model.products().freeze();
}

}  // namespace tfm::api
