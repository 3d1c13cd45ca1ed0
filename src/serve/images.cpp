#include "serve/images.h"

#include <stdexcept>

#include "serve/request.h"
#include "tfm/images.h"

namespace tfm::serve {

std::vector<uint8_t> model_pixels(std::string_view bytes, const Classifier& classifier) {
  try {
    return classifier.pixels_of(decode_image(bytes));
  } catch (const std::runtime_error& e) {  // the library's one-line errors: here, the request's image is at fault
    throw HttpError(400, e.what());
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
