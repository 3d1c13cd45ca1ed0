#pragma once
// HTTP/1.1 messages as the endpoints see them, and the reading of a request from the
// bytes of a connection (Boost.Beast's parser underneath, with tfm's checks on top).
// The server (serve/http_server.h) and the fuzz target (fuzz/fuzz_http.cpp) read
// requests through the same RequestReader, so what is fuzzed is what is served.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace tfm::serve {

// A failure that is the client's (4xx) or the server's state (503, 504), not a bug.
struct HttpError : std::runtime_error {
  int status;
  int retry_after = 0;  // seconds, for a 503 with Retry-After
  HttpError(int status, const std::string& message, int retry_after = 0)
      : std::runtime_error(message), status(status), retry_after(retry_after) {}
};

struct Request {
  std::string method, path, query;  // target = path ? query
  std::vector<std::pair<std::string, std::string>> headers;  // as sent, in order
  std::string body;
  bool keep_alive = true;  // what the client asked for (HTTP/1.0 without Keep-Alive: no)
  bool http10 = false;     // an HTTP/1.0 client: no chunked body (a stream ends with the connection)

  // The first header of that name (any case), or "".
  std::string header(std::string_view name) const;
  bool has_header(std::string_view name) const;
  // The query parameter `name` (percent- and '+'-decoded), or "".
  std::string param(std::string_view name) const;
};

// A body sent as it is made (chunked): `produce` calls `send` with each piece, which
// returns false once the client has gone; `finished` runs after, whether it stayed or not.
struct Stream {
  using Send = std::function<bool(std::string_view)>;
  std::function<void(const Send&)> produce;
  std::function<void()> finished;
};

struct Response {
  int status = 200;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string content_type, body;
  std::shared_ptr<Stream> stream;  // set: the body is the stream's, not `body`

  void set_header(std::string name, std::string value) { headers.emplace_back(std::move(name), std::move(value)); }
  void set_content(std::string text, std::string type) { body = std::move(text), content_type = std::move(type); }
};

// The status line and headers of `res` (Content-Length, or chunked for a stream unless
// `unframed`: an HTTP/1.0 client's, which the connection's end ends), ending in the
// blank line; `keep_alive` false adds "Connection: close".
std::string response_head(const Response& res, bool keep_alive, bool unframed = false);
// One piece of a chunked body; the empty piece is the body's end.
std::string chunk(std::string_view piece);

// `value` as the response's JSON body (strings not valid UTF-8 are repaired, not refused).
std::string json_text(const nlohmann::json& value);
void reply(Response& res, const nlohmann::json& value, int status = 200);
// An error as OpenAI's clients expect it: {"error": {"message", "type", "code"}}.
nlohmann::json error_json(int status, const std::string& message);
void reply_error(Response& res, int status, const std::string& message, int retry_after = 0);

// Reads requests from a connection's bytes, one after another (pipelined requests too).
// Refuses, as HttpError (the connection then closes): what is not HTTP/1.1 (400); headers
// beyond kMaxHeaderBytes together (431); any Transfer-Encoding (a POST: 411, since
// a body must come with a Content-Length; others: 400), a POST without a Content-Length
// (411), Content-Length headers that disagree (400) or a body beyond `max_body` (413),
// each before the body is read.
class RequestReader {
 public:
  static constexpr uint32_t kMaxHeaderBytes = 64 << 10;
  enum class Progress {
    more,                  // give it more bytes
    continue_wanted,       // the client waits for "100 Continue" before it sends the body
    complete,              // take() the request
  };
  explicit RequestReader(int64_t max_body);
  ~RequestReader();
  RequestReader(const RequestReader&) = delete;
  RequestReader& operator=(const RequestReader&) = delete;

  // Reads `bytes` after those already given (the rest of a request, or the next one).
  Progress read(std::string_view bytes);
  Request take();  // the complete request; reading goes on with the next
  bool started() const;  // some of a request has arrived (false between requests)

 private:
  struct Parser;
  Progress parse();
  void check_header();

  const int64_t max_body_;
  std::string pending_;  // bytes given and not yet parsed (a header is parsed whole)
  std::unique_ptr<Parser> parser_;
  bool continue_sent_ = false;
};

}  // namespace tfm::serve
