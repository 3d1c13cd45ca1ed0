#include "serve/http.h"

#include <boost/beast/http.hpp>

#include <cctype>
#include <cstdio>

namespace tfm::serve {

namespace http = boost::beast::http;

namespace {

bool same_name(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

// A query's name or value: %XX and '+' decoded; a '%' not followed by two hex digits kept.
std::string url_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const int hi = s[i] == '%' && i + 2 < s.size() ? hex_digit(s[i + 1]) : -1;
    const int lo = hi >= 0 ? hex_digit(s[i + 2]) : -1;
    if (lo >= 0) {
      out += static_cast<char>(hi * 16 + lo), i += 2;
    } else {
      out += s[i] == '+' ? ' ' : s[i];
    }
  }
  return out;
}

const char* error_type(int status) {
  if (status == 401) return "authentication_error";
  if (status == 404) return "not_found_error";
  if (status < 500) return "invalid_request_error";
  return status == 503 ? "overloaded_error" : "server_error";
}

HttpError parse_error(const boost::system::error_code& ec) {
  if (ec == http::error::header_limit)
    return HttpError(431, "the request's headers are larger than " + std::to_string(RequestReader::kMaxHeaderBytes) + " bytes together");
  if (ec == http::error::body_limit) return HttpError(413, "the body is larger than the server's --max-body");
  // Lengths that disagree frame the body two ways (request smuggling behind a proxy): RFC 9112 §6.3.
  if (ec == http::error::bad_content_length)
    return HttpError(400, "the request's Content-Length is not one number of bytes (not a number, or Content-Length headers disagree)");
  return HttpError(400, "the request is not valid HTTP/1.1 (" + ec.message() + ")");
}

}  // namespace

std::string Request::header(std::string_view name) const {
  for (const auto& [n, value] : headers)
    if (same_name(n, name)) return value;
  return "";
}

bool Request::has_header(std::string_view name) const {
  for (const auto& h : headers)
    if (same_name(h.first, name)) return true;
  return false;
}

std::string Request::param(std::string_view name) const {
  std::string_view rest = query;
  while (!rest.empty()) {
    const size_t amp = rest.find('&');
    const std::string_view pair = rest.substr(0, amp);
    rest = amp == std::string_view::npos ? std::string_view() : rest.substr(amp + 1);
    const size_t eq = pair.find('=');
    if (url_decoded(pair.substr(0, eq)) == name) return eq == std::string_view::npos ? "" : url_decoded(pair.substr(eq + 1));
  }
  return "";
}

std::string response_head(const Response& res, bool keep_alive, bool unframed) {
  std::string head = "HTTP/1.1 " + std::to_string(res.status) + " " + std::string(http::obsolete_reason(http::int_to_status(res.status))) + "\r\n";
  for (const auto& [name, value] : res.headers) head += name + ": " + value + "\r\n";
  if (!res.content_type.empty()) head += "Content-Type: " + res.content_type + "\r\n";
  if (res.stream && !unframed)
    head += "Transfer-Encoding: chunked\r\n";
  else if (res.status != 204)  // (a 204 has no body, and no length: RFC 9110 §8.6)
    head += "Content-Length: " + std::to_string(res.body.size()) + "\r\n";
  else if (res.stream)
    keep_alive = false;  // (an unframed body ends where the connection does)
  return head + (keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n");
}

std::string chunk(std::string_view piece) {
  char size[24];
  std::snprintf(size, sizeof size, "%zx\r\n", piece.size());
  return size + std::string(piece) + "\r\n";
}

std::string json_text(const nlohmann::json& value) { return value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace); }

void reply(Response& res, const nlohmann::json& value, int status) {
  res.status = status;
  res.set_content(json_text(value), "application/json");
}

nlohmann::json error_json(int status, const std::string& message) {
  return {{"error", {{"message", message}, {"type", error_type(status)}, {"code", status}}}};
}

void reply_error(Response& res, int status, const std::string& message, int retry_after) {
  if (retry_after > 0) res.set_header("Retry-After", std::to_string(retry_after));
  if (status == 401) res.set_header("WWW-Authenticate", "Bearer");
  reply(res, error_json(status, message), status);
}

// --- RequestReader ---

struct RequestReader::Parser {
  http::request_parser<http::string_body> beast;
  bool header_checked = false;
};

RequestReader::RequestReader(int64_t max_body) : max_body_(max_body) {}
RequestReader::~RequestReader() = default;

RequestReader::Progress RequestReader::read(std::string_view bytes) {
  pending_.append(bytes);
  return parse();
}

bool RequestReader::started() const { return !pending_.empty() || (parser_ && parser_->beast.got_some()); }

RequestReader::Progress RequestReader::parse() {
  if (!parser_) {
    parser_ = std::make_unique<Parser>();
    parser_->beast.header_limit(kMaxHeaderBytes);
    parser_->beast.body_limit(static_cast<uint64_t>(max_body_));
    parser_->beast.eager(false);  // stop after the header, so that it is checked before the body is read
  }
  http::request_parser<http::string_body>& beast = parser_->beast;
  while (!beast.is_done()) {
    if (pending_.empty()) return Progress::more;
    boost::system::error_code ec;
    const bool header_done = beast.is_header_done();
    const size_t used = beast.put(boost::asio::buffer(pending_), ec);
    // (Beast's own header limit is not exact: a header parsed whole in one call passes)
    if (!header_done && (ec == http::error::need_more ? pending_.size() : used) > kMaxHeaderBytes) ec = http::error::header_limit;
    pending_.erase(0, used);
    if (ec == http::error::need_more) return Progress::more;  // (a header is parsed only once it is whole)
    if (ec) throw parse_error(ec);
    if (beast.is_header_done() && !parser_->header_checked) {
      check_header();
      parser_->header_checked = true;
      const bool waits = same_name(std::string(beast.get()[http::field::expect]), "100-continue");
      if (waits && !beast.is_done() && pending_.empty() && !continue_sent_) return continue_sent_ = true, Progress::continue_wanted;
    }
    if (used == 0 && !beast.is_done()) return Progress::more;
  }
  return Progress::complete;
}

void RequestReader::check_header() {
  http::request_parser<http::string_body>& beast = parser_->beast;
  const bool post = beast.get().method() == http::verb::post;
  // A Transfer-Encoding beside a Content-Length frames the body two ways (request
  // smuggling behind a proxy: RFC 9112 §6.1), and no endpoint takes one without.
  if (beast.get().find(http::field::transfer_encoding) != beast.get().end())
    throw post ? HttpError(411, "send the body with a Content-Length, not a Transfer-Encoding (chunked or other)")
               : HttpError(400, "a Transfer-Encoding is not accepted");
  if (!post) return;
  if (!beast.content_length()) throw HttpError(411, "a POST needs a Content-Length");
  if (*beast.content_length() > static_cast<uint64_t>(max_body_)) throw HttpError(413, "the body is larger than the server's --max-body");
}

Request RequestReader::take() {
  http::request<http::string_body> message = parser_->beast.release();
  parser_.reset(), continue_sent_ = false;
  Request r;
  r.method = std::string(message.method_string());
  const std::string_view target(message.target().data(), message.target().size());
  const size_t question = target.find('?');
  r.path = std::string(target.substr(0, question));
  if (question != std::string_view::npos) r.query = std::string(target.substr(question + 1));
  for (const auto& field : message) r.headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  r.keep_alive = message.keep_alive();
  r.http10 = message.version() < 11;
  r.body = std::move(message.body());
  return r;
}

}  // namespace tfm::serve
