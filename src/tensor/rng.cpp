#include "tensor/rng.h"

#include <cmath>

namespace tfm {

double Rng::normal() {
  // Box-Muller; 1 - u keeps the logarithm finite.
  double u1 = 1.0 - uniform(), u2 = uniform();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

}  // namespace tfm
