#pragma once
// The HTTP/1.1 server underneath `tfm serve`: event-driven (Boost.Asio), so that a
// connection costs a socket and a small buffer, never a thread. Two I/O threads read
// every connection's requests and write every response; a request that must wait for
// the library is answered on a worker thread (serve/worker_pool.h), which never waits
// for a client. So neither a thousand idle keep-alive connections nor clients that send
// their headers a byte a second hold anything the next request needs (the review's
// "server under attack").
//
// Per connection: a request's headers and body must arrive within `request_seconds` of
// its first byte; an idle connection waits `idle_seconds` for its next request; each
// write must finish within `write_seconds`; pipelined requests are answered in order.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "serve/http.h"

namespace tfm::serve {

struct HttpLimits {
  int64_t max_body = 4 << 20;   // bytes of a request body (413 beyond)
  int max_connections = 4096;   // open at once; the next is answered 503 and closed
  size_t max_workers = 264;     // threads computing answers at once
  double idle_seconds = 5, request_seconds = 10, write_seconds = 10;
};

// What the server asks of the program it serves.
struct HttpApp {
  // True where the answer is made at once without waiting for anything (/health,
  // /metrics): it is made on an I/O thread. Otherwise on a worker thread.
  std::function<bool(const Request&)> quick;
  // Fills in the response; must not throw. A HEAD request is answered as its GET,
  // without the body.
  std::function<void(const Request&, Response&)> answer;
};

class HttpServer {
 public:
  HttpServer(HttpLimits limits, HttpApp app);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Listens on host:port (0: any free port) and starts serving; returns the port. Throws
  // tfm::Error where the address cannot be had.
  int start(const std::string& host, int port);
  // Connections served at once: --max-connections, or less where the open-file limit
  // (ulimit -n) is lower and cannot be raised.
  int max_connections() const;
  int64_t open_connections() const;

  // Stops accepting and closes every connection not being answered; each answer from now
  // on closes its connection after it.
  void drain();
  // Waits until every connection has closed, or `deadline`; false at the deadline.
  bool wait_closed(std::chrono::steady_clock::time_point deadline) const;
  // Stops the I/O and worker threads; what is still open is dropped.
  void stop();

 private:
  friend class Connection;  // (http_server.cpp: one client's connection)
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace tfm::serve
