// libFuzzer target: the server's reading of HTTP requests (serve/http.h's RequestReader,
// Boost.Beast's parser with tfm's checks), fed in pieces as a connection's reads would
// be, pipelined requests included; then each request's fields as the endpoints read them.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "serve/http.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 64;  // the first byte: how the bytes arrive
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  tfm::serve::RequestReader reader(/*max_body=*/1 << 16);
  try {
    for (size_t at = 0; at < bytes.size(); at += piece) {
      auto progress = reader.read(bytes.substr(at, piece));
      while (progress == tfm::serve::RequestReader::Progress::complete) {
        const tfm::serve::Request request = reader.take();
        tfm::serve::Response res;
        tfm::serve::reply(res, {{"path", request.path}, {"model", request.param("model")}, {"type", request.header("content-type")}});
        (void)tfm::serve::response_head(res, request.keep_alive);
        progress = reader.read({});
      }
    }
  } catch (const tfm::serve::HttpError&) {
  }
  return 0;
}
