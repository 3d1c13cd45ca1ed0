#include "serve/images.h"

#include <dlfcn.h>
#include <malloc.h>

#include <memory>
#include <semaphore>
#include <stdexcept>

#include "serve/request.h"
#include "tfm/images.h"

namespace tfm::serve {

namespace {

constexpr int kDecodesAtOnce = 2;
constexpr int64_t kLargeImage = int64_t{4} << 20;  // pixels: what is given back once decoded

std::counting_semaphore<kDecodesAtOnce>& decodes() {
  static std::counting_semaphore<kDecodesAtOnce> slots(kDecodesAtOnce);
  return slots;
}

// Gives the allocator's freed pages back to the system: the `tfm` program's jemalloc
// keeps them otherwise (it is told to, for training's speed: process_malloc.cpp); glibc's
// malloc trims.
void give_back_freed_memory() {
  using Mallctl = int (*)(const char*, void*, size_t*, void*, size_t);
  static const auto mallctl = reinterpret_cast<Mallctl>(dlsym(RTLD_DEFAULT, "mallctl"));
  if (mallctl) mallctl("arena.4096.purge", nullptr, nullptr, nullptr, 0);  // 4096: MALLCTL_ARENAS_ALL
  else malloc_trim(0);
}

}  // namespace

std::vector<uint8_t> model_pixels(std::string_view bytes, const Classifier& classifier, int64_t& budget) {
  decodes().acquire();
  const std::unique_ptr<void, void (*)(void*)> slot(&decodes(), [](void*) { decodes().release(); });
  int64_t pixels = 0;
  try {
    Image image = decode_image(bytes, "the image", budget);
    pixels = image.height * image.width;
    budget -= pixels;
    std::vector<uint8_t> out = classifier.pixels_of(image);
    image = {};
    if (pixels >= kLargeImage) give_back_freed_memory();
    return out;
  } catch (const std::runtime_error& e) {  // the library's one-line errors: here, the request's image is at fault
    if (pixels >= kLargeImage) give_back_freed_memory();
    throw HttpError(400, std::string(e.what()) + (std::string(e.what()).find("allowed here") != std::string::npos
                                                      ? " (--max-image-pixels: for all of a request's images together)" : ""));
  }
}

std::string decode_base64(std::string_view text) {
  std::string out;
  uint32_t bits = 0;
  int count = 0;
  for (char ch : text) {
    int v;
    if (ch >= 'A' && ch <= 'Z') v = ch - 'A';
    else if (ch >= 'a' && ch <= 'z') v = ch - 'a' + 26;
    else if (ch >= '0' && ch <= '9') v = ch - '0' + 52;
    else if (ch == '+') v = 62;
    else if (ch == '/') v = 63;
    else if (ch == '=' || ch == '\n' || ch == '\r' || ch == ' ') continue;
    else throw HttpError(400, "an image is not valid base64");
    bits = (bits << 6) | static_cast<uint32_t>(v), count += 6;
    if (count >= 8) count -= 8, out.push_back(static_cast<char>((bits >> count) & 0xff));
  }
  return out;
}

}  // namespace tfm::serve
