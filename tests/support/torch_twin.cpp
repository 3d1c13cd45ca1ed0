#include "support/torch_twin.h"

#include <filesystem>

#include "support/fixture.h"

namespace tfm::testing {

namespace fs = std::filesystem;

std::string torch_twin(const TempDir& tmp, const std::string& name) {
  const fs::path dir = tmp.path(name);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(fixture_path("hf/" + name)))
    if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), dir / e.path().filename());
  for (const auto& e : fs::directory_iterator(fixture_path("torch/" + name))) fs::copy_file(e.path(), dir / e.path().filename());
  return dir.string();
}

}  // namespace tfm::testing
