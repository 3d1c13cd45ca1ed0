#include "serve/http_server.h"

#include <sys/resource.h>

#include <array>
#include <atomic>
#include <boost/asio.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <future>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "serve/lifecycle.h"
#include "serve/worker_pool.h"
#include "tensor/error.h"

namespace tfm::serve {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using ErrorCode = boost::system::error_code;

namespace {

// The open-file limit raised as far as `connections` need (the soft limit is often 1024,
// the hard one far above); returns the connections it allows. Some descriptors are kept
// for the rest of the process (models, logs, the listening socket, connections being
// refused: it uses about 10): 64, or a quarter of a lower limit, but at least 8.
int allowed_connections(int connections) {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0) return connections;
  auto reserved = [](rlim_t files) { return std::clamp<rlim_t>(files / 4, 8, 64); };
  const rlim_t needed = static_cast<rlim_t>(connections) + 64;
  if (limit.rlim_cur < needed) {
    limit.rlim_cur = std::min(needed, limit.rlim_max);
    setrlimit(RLIMIT_NOFILE, &limit);
    getrlimit(RLIMIT_NOFILE, &limit);
  }
  if (limit.rlim_cur >= needed) return connections;
  return static_cast<int>(std::max<rlim_t>(limit.rlim_cur, reserved(limit.rlim_cur) + 1) - reserved(limit.rlim_cur));
}

}  // namespace

class Connection;

struct HttpServer::Impl {
  HttpLimits limits;
  HttpApp app;
  std::atomic<bool> draining{false}, stopped{false};
  std::atomic<int64_t> open{0};
  mutable std::mutex mutex;
  std::map<Connection*, std::weak_ptr<Connection>> connections;  // served ones, for drain()
  // (above: what a connection's destructor uses, destroyed after the io_context and the
  // connections its handlers still hold)
  asio::io_context io;
  asio::executor_work_guard<asio::io_context::executor_type> busy = asio::make_work_guard(io);  // until stop()
  tcp::acceptor acceptor{asio::make_strand(io)};
  asio::steady_timer accept_later{acceptor.get_executor()};
  WorkerPool workers;
  std::vector<std::thread> threads;

  Impl(HttpLimits l, HttpApp a) : limits(l), app(std::move(a)), workers(l.max_workers) {}
  void accept();
  void run_io();
};

// One client's connection. Everything it does runs on its strand (one handler at a time);
// a worker computing its answer hands the bytes back to the strand to write.
class Connection : public std::enable_shared_from_this<Connection> {
 public:
  Connection(tcp::socket socket, HttpServer::Impl& server)
      : stream_(std::move(socket)), server_(server), limits_(server.limits), reader_(server.limits.max_body) {
    ErrorCode ignored;
    stream_.socket().set_option(tcp::no_delay(true), ignored);  // a stream's small pieces go out at once
  }

  void serve() {
    ++server_.open, counted_ = true;
    {
      const std::lock_guard<std::mutex> lock(server_.mutex);
      server_.connections[this] = weak_from_this();
    }
    read();
  }

  // Beyond --max-connections: 503 before the request is read, then close.
  void refuse() {
    Response res;
    reply_error(res, 503, "the server has " + std::to_string(limits_.max_connections) + " connections open (--max-connections); retry", 1);
    write_response(res, /*head_only=*/false, /*keep_alive=*/false);
  }

  // From drain(): a connection not being answered closes now.
  void close_unless_answering() {
    asio::post(stream_.get_executor(), [self = shared_from_this()] {
      if (!self->answering_) self->close();
    });
  }

  ~Connection() {
    if (!counted_) return;
    --server_.open;
    const std::lock_guard<std::mutex> lock(server_.mutex);
    server_.connections.erase(this);
  }

 private:
  enum class Then { read, next_request, close };

  void read() {
    if (reader_.started())
      stream_.expires_at(request_deadline_);
    else
      stream_.expires_after(seconds(limits_.idle_seconds));
    stream_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](ErrorCode ec, size_t n) {
      if (ec) return self->close();  // the client left, or was too slow, or the server drains
      self->parse(std::string_view(self->buffer_.data(), n));
    });
  }

  // `bytes` after those read before: on to reading more, or to the request's answer.
  void parse(std::string_view bytes) {
    if (!reader_.started()) request_deadline_ = Clock::now() + seconds(limits_.request_seconds);
    RequestReader::Progress progress;
    try {
      progress = reader_.read(bytes);
    } catch (const HttpError& e) {  // not HTTP, or refused before its body: answered, then closed
      Response res;
      reply_error(res, e.status, e.what(), e.retry_after);
      return write_response(res, /*head_only=*/false, /*keep_alive=*/false);
    }
    if (progress == RequestReader::Progress::more) return read();
    if (progress == RequestReader::Progress::continue_wanted)
      return write(std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n"), Then::read);
    answer(reader_.take());
  }

  void answer(Request request) {
    answering_ = true;
    keep_alive_ = request.keep_alive && !server_.draining;
    const bool head_only = request.method == "HEAD";
    if (head_only) request.method = "GET";
    if (server_.app.quick(request)) {
      Response res;
      server_.app.answer(request, res);
      return write_response(res, head_only, keep_alive_);
    }
    server_.workers.enqueue([self = shared_from_this(), request = std::move(request), head_only] { self->answer_on_worker(request, head_only); });
  }

  void answer_on_worker(const Request& request, bool head_only) {
    auto res = std::make_shared<Response>();
    server_.app.answer(request, *res);
    if (!res->stream || head_only) {
      res->stream.reset();
      return asio::post(stream_.get_executor(), [self = shared_from_this(), res, head_only] { self->write_response(*res, head_only, self->keep_alive_); });
    }
    const bool unframed = request.http10;  // an HTTP/1.0 client takes no chunks: the stream ends with the connection
    if (unframed) keep_alive_ = false;
    bool sent = write_and_wait(response_head(*res, keep_alive_, unframed));
    if (sent)
      res->stream->produce([&](std::string_view piece) {
        return sent = piece.empty() || write_and_wait(unframed ? std::string(piece) : chunk(piece));
      });
    if (sent && !unframed) sent = write_and_wait(chunk(""));
    if (res->stream->finished) res->stream->finished();
    asio::post(stream_.get_executor(), [self = shared_from_this(), sent] {
      if (!sent) return self->close();
      self->keep_alive_ ? self->next_request() : self->linger();  // (an unframed stream's end is the connection's)
    });
  }

  void write_response(const Response& res, bool head_only, bool keep_alive) {
    keep_alive_ = keep_alive && !server_.draining;
    auto bytes = std::make_shared<std::string>(response_head(res, keep_alive_));
    if (!head_only) *bytes += res.body;
    write(bytes, keep_alive_ ? Then::next_request : Then::close);
  }

  void write(std::shared_ptr<std::string> bytes, Then then) {
    stream_.expires_after(seconds(limits_.write_seconds));
    asio::async_write(stream_, asio::buffer(*bytes), [self = shared_from_this(), bytes, then](ErrorCode ec, size_t) {
      if (ec) return self->close();
      if (then == Then::read) return self->read();
      if (then == Then::next_request) return self->next_request();
      self->linger();
    });
  }

  // From a worker: writes `bytes` on the strand and waits for them to go out (false where
  // the client has gone or does not read).
  bool write_and_wait(std::string bytes) {
    auto data = std::make_shared<std::string>(std::move(bytes));
    auto done = std::make_shared<std::promise<bool>>();
    std::future<bool> written = done->get_future();
    asio::post(stream_.get_executor(), [self = shared_from_this(), data, done] {
      self->stream_.expires_after(seconds(self->limits_.write_seconds));
      asio::async_write(self->stream_, asio::buffer(*data), [data, done](ErrorCode ec, size_t) { done->set_value(!ec); });
    });
    // (past the write's timeout, or once the server stops, no handler will answer)
    for (const Clock::time_point end = Clock::now() + seconds(limits_.write_seconds + 1); Clock::now() < end && !server_.stopped;)
      if (written.wait_for(std::chrono::milliseconds(20)) == std::future_status::ready) return written.get();
    return false;
  }

  void next_request() {
    answering_ = false;
    if (server_.draining) return close();
    parse({});  // a pipelined request may be waiting already
  }

  // After an answer that closes the connection: stop sending, and read what the client
  // still sends for a moment before closing, so that closing with its bytes unread does
  // not reset the connection and lose the answer (a 413 sent while its body arrives).
  void linger() {
    ErrorCode ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ignored);
    stream_.expires_after(std::chrono::seconds(2));
    discard();
  }
  void discard() {
    stream_.async_read_some(asio::buffer(buffer_), [self = shared_from_this()](ErrorCode ec, size_t) {
      ec ? self->close() : self->discard();
    });
  }

  void close() {
    ErrorCode ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

  boost::beast::tcp_stream stream_;
  HttpServer::Impl& server_;
  const HttpLimits& limits_;
  RequestReader reader_;
  std::array<char, 8 << 10> buffer_;
  Clock::time_point request_deadline_;
  bool answering_ = false, keep_alive_ = true, counted_ = false;
};

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(io), [this](ErrorCode ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;  // drain() closed it
    if (ec) {  // out of file descriptors, most likely: try again shortly rather than spin
      accept_later.expires_after(std::chrono::milliseconds(50));
      return accept_later.async_wait([this](ErrorCode e) { e ? void() : accept(); });
    }
    try {
      auto connection = std::make_shared<Connection>(std::move(socket), *this);
      open.load() >= limits.max_connections ? connection->refuse() : connection->serve();
    } catch (const std::exception&) {  // out of memory: that connection is lost, not the server
    }
    accept();
  });
}

// An I/O thread: an exception out of a handler (out of memory) loses that handler's
// connection, not the thread.
void HttpServer::Impl::run_io() {
  for (;;) {
    try {
      io.run();
      return;
    } catch (const std::exception&) {
    }
  }
}

HttpServer::HttpServer(HttpLimits limits, HttpApp app) : impl_(std::make_unique<Impl>(limits, std::move(app))) {
  impl_->limits.max_connections = allowed_connections(limits.max_connections);
}

HttpServer::~HttpServer() { stop(); }

int HttpServer::start(const std::string& host, int port) {
  Impl& s = *impl_;
  ErrorCode ec;
  tcp::resolver resolver(s.io);
  const tcp::resolver::results_type found = resolver.resolve(host, std::to_string(port), tcp::resolver::passive, ec);
  TFM_CHECK(!ec && !found.empty(), "cannot listen on " + host + ": " + (ec ? ec.message() : "no address") + " (give --host as 127.0.0.1, 0.0.0.0 or ::1, say)");
  const tcp::endpoint endpoint = found.begin()->endpoint();
  s.acceptor.open(endpoint.protocol(), ec);
  if (!ec) s.acceptor.set_option(tcp::acceptor::reuse_address(true), ec);  // not SO_REUSEPORT: two servers must not share a port
  if (!ec) s.acceptor.bind(endpoint, ec);
  if (!ec) s.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  TFM_CHECK(!ec, "cannot listen on " + host + ":" + std::to_string(port) + ": " + ec.message() + " (choose another --port or --host)");
  s.accept();
  for (int i = 0; i < 2; ++i) {
    try {
      s.threads.emplace_back([&s] { s.run_io(); });
    } catch (const std::system_error&) {
      TFM_CHECK(i > 0, "cannot start the server's I/O thread (a task or memory limit?)");
    }
  }
  return s.acceptor.local_endpoint().port();
}

int HttpServer::max_connections() const { return impl_->limits.max_connections; }
int64_t HttpServer::open_connections() const { return impl_->open.load(); }

void HttpServer::drain() {
  Impl& s = *impl_;
  s.draining = true;
  asio::post(s.acceptor.get_executor(), [&s] {
    ErrorCode ignored;
    s.acceptor.close(ignored);
    s.accept_later.cancel();
  });
  std::vector<std::shared_ptr<Connection>> open;
  {
    const std::lock_guard<std::mutex> lock(s.mutex);  // (not held while they go: a connection's destructor takes it)
    for (auto& [raw, weak] : s.connections)
      if (std::shared_ptr<Connection> connection = weak.lock()) open.push_back(std::move(connection));
  }
  for (const std::shared_ptr<Connection>& connection : open) connection->close_unless_answering();
}

bool HttpServer::wait_closed(Clock::time_point deadline) const {
  while (impl_->open.load() > 0) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

void HttpServer::stop() {
  Impl& s = *impl_;
  if (s.io.stopped() && s.threads.empty()) return;
  s.stopped = true;  // a worker waiting for a write gives up
  s.busy.reset();
  s.io.stop();
  for (std::thread& t : s.threads) t.join();
  s.threads.clear();
  s.workers.shutdown();
}

}  // namespace tfm::serve
