#include "serve/server.h"

#include <httplib.h>

#include <sys/socket.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "serve/connection_pool.h"
#include "serve/endpoints.h"
#include "serve/web_page.h"

namespace tfm::serve {

namespace {

// httplib's task queue: the connection pool (serve/connection_pool.h).
class ConnectionQueue : public httplib::TaskQueue {
 public:
  explicit ConnectionQueue(size_t max_threads) : pool_(max_threads) {}
  void enqueue(std::function<void()> job) override { pool_.enqueue(std::move(job)); }
  void shutdown() override { pool_.shutdown(); }

 private:
  ConnectionPool pool_;
};

// httplib listens with a backlog of 5: a burst of connections beyond it waited a second
// for a SYN to be resent, or was reset (measured: 36 of 250 at once). Listening again on
// the bound socket widens it.
class HttpServer : public httplib::Server {
 public:
  void widen_backlog() { ::listen(svr_sock_, SOMAXCONN); }
};

std::string lowercase(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

bool authorized(const httplib::Request& req, const std::string& key) {
  const std::string bearer = req.get_header_value("Authorization"), given = req.get_header_value("X-API-Key");
  auto same = [&](const std::string& a) {  // in time independent of where they differ
    if (a.size() != key.size()) return false;
    unsigned char diff = 0;
    for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ key[i]);
    return diff == 0;
  };
  return same(given) || (lowercase(bearer.substr(0, 7)) == "bearer " && same(bearer.substr(7)));
}

// Before a body is read: a body whose size is not declared (chunked, whose length httplib
// does not bound) or declared beyond --max-body is refused at once, and the connection
// closed, rather than read. httplib parses a form body itself and refuses one above 8 KB,
// so a form type (curl -d's default) is read as the JSON it is.
httplib::Server::HandlerResponse check_body(const httplib::Request& req, httplib::Response& res, int64_t max_body) {
  if (req.method != "POST") return httplib::Server::HandlerResponse::Unhandled;
  auto refuse = [&](int status, const std::string& message) {
    if (req.get_header_value("Connection") != "close") res.set_header("Connection", "close");  // (httplib adds it where the client said so)
    reply_error(res, status, message);
    return httplib::Server::HandlerResponse::Handled;
  };
  if (req.has_header("Transfer-Encoding")) return refuse(411, "send the body with a Content-Length, not chunked");
  if (!req.has_header("Content-Length")) return refuse(411, "a POST needs a Content-Length");
  const std::string length = req.get_header_value("Content-Length");
  // Lengths that disagree frame the body two ways (request smuggling behind a proxy): RFC 9112 §6.3.
  for (size_t i = 1; i < req.get_header_value_count("Content-Length"); ++i)
    if (req.get_header_value("Content-Length", i) != length) return refuse(400, "the request's Content-Length headers disagree");
  if (length.empty() || length.size() > 18 || length.find_first_not_of("0123456789") != std::string::npos)
    return refuse(400, "Content-Length is not a number of bytes: " + length);
  if (std::stoll(length) > max_body) return refuse(413, "the body is larger than the server's --max-body");
  if (req.get_header_value("Content-Type").rfind("application/x-www-form-urlencoded", 0) == 0)
    for (auto& [name, value] : const_cast<httplib::Request&>(req).headers)  // the request httplib is about to read into
      if (lowercase(name) == "content-type") value = "application/json";
  return httplib::Server::HandlerResponse::Unhandled;
}

class Server {
 public:
  Server(const ServerOptions& o, std::ostream& log)
      : options_(o), models_(o, metrics_, log), life_(o.max_queue), context_{o, models_, metrics_, life_} {
    metrics_.add_gauge({"tfm_queue_depth", "Requests admitted and not yet answered (waiting or computing).", "",
                        [this] { return static_cast<double>(life_.depth()); }});
    metrics_.add_gauge({"tfm_queue_limit", "Requests admitted at once (--max-queue).", "", [this] { return static_cast<double>(options_.max_queue); }});
    routes();
    http_.new_task_queue = [this] { return new ConnectionQueue(static_cast<size_t>(options_.max_connections)); };
    http_.set_payload_max_length(static_cast<size_t>(o.max_body));
    http_.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) { return check_body(req, res, options_.max_body); });
    http_.set_socket_options([](int sock) {  // SO_REUSEADDR only: httplib's SO_REUSEPORT let two servers share a port
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    http_.set_read_timeout(10), http_.set_write_timeout(10), http_.set_keep_alive_timeout(5);
    http_.set_error_handler([this](const httplib::Request& req, httplib::Response& res) {
      if (!res.body.empty()) return;
      if (res.status == 413) return reply_error(res, 413, "the body is larger than the server's --max-body");
      if (req.method.empty() || req.path.empty()) return reply_error(res, res.status, "the request is not valid HTTP/1.1");
      const bool known = methods_.count(req.path) > 0, method_allowed = known && methods_.at(req.path) == req.method;
      if (res.status == 404 || (res.status == 400 && known && !method_allowed)) {
        if (!known) return reply_error(res, 404, "no such endpoint: " + req.method + " " + req.path + " (see docs/SERVING.md)");
        res.set_header("Allow", methods_.at(req.path));
        return reply_error(res, 405, req.path + " takes " + methods_.at(req.path) + ", not " + req.method);
      }
      // httplib reads at most 100 header lines of at most 8 KiB each (its build's limits)
      // and answers 400 for more: a large cookie or token, most likely (the review's W4).
      if (res.status == 400 && method_allowed)
        return reply_error(res, 431, "the request's headers could not be read: at most 100 headers of at most 8192 bytes each");
      reply_error(res, res.status, req.method + " " + req.path + " failed with HTTP status " + std::to_string(res.status));
    });
  }

  void run(std::stop_token stop, std::ostream& log) {
    const int port = options_.port == 0 ? http_.bind_to_any_port(options_.host)
                                        : (http_.bind_to_port(options_.host, options_.port) ? options_.port : -1);
    if (port < 0)
      throw std::runtime_error("cannot listen on " + options_.host + ":" + std::to_string(options_.port) + ": " +
                               (errno ? std::strerror(errno) : "the address is not available") + " (choose another --port or --host)");
    http_.widen_backlog();
    std::atomic<bool> ended{false};
    std::thread listener([&] { http_.listen_after_bind(), ended = true; });
    while (!http_.is_running() && !ended) std::this_thread::sleep_for(std::chrono::milliseconds(1));  // stop() before listening would be lost
    const bool ipv6 = options_.host.find(':') != std::string::npos;
    log << "tfm serve: listening on http://" << (ipv6 ? "[" + options_.host + "]" : options_.host) << ":" << port << " (" << models_.summary()
        << "); Ctrl-C or SIGTERM stops it\n";
    if (options_.api_key.empty() && options_.host != "127.0.0.1" && options_.host != "localhost" && options_.host != "::1")
      log << "tfm serve: warning: listening beyond this machine without --api-key: anyone who can reach it may use it\n";
    log << std::flush;
    {
      std::mutex mutex;
      std::unique_lock<std::mutex> lock(mutex);
      std::condition_variable_any stopped;
      while (!stopped.wait_for(lock, stop, std::chrono::seconds(1), [] { return false; })) {
        if (stop.stop_requested()) break;
        metrics_.tick();
      }
    }
    log << "tfm serve: stopping: finishing " << life_.depth() << " admitted requests within " << options_.drain_timeout << " s\n" << std::flush;
    life_.drain(options_.drain_timeout);
    http_.stop();  // no new connections; those queued or open are answered 503 (routes below)
    // A client still sending its request's headers (one byte at a time, say) holds its
    // connection's thread past any deadline of ours: a second after the drain's, go.
    const Clock::time_point last = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.drain_timeout + 1));
    while (!ended && Clock::now() < last) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    if (!ended) {
      log << "tfm serve: stopped, leaving connections that had not finished sending a request\n" << std::flush;
      std::_Exit(0);  // nothing of the server's is written anywhere: there is nothing to finish
    }
    listener.join();
    log << "tfm serve: stopped\n" << std::flush;
  }

 private:
  // Every route: the API key, the drain, the error replies and the metrics in one place.
  template <class Handler>
  void route(const char* method, const char* path, Handler handler, bool needs_key = true) {
    auto wrapped = [this, path, handler, needs_key](const httplib::Request& req, httplib::Response& res) {
      Call call{req, res, path, Clock::now(), {}, false};
      call.deadline = call.started + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(options_.timeout));
      try {
        if (needs_key && !options_.api_key.empty() && !authorized(req, options_.api_key))
          throw HttpError(401, req.has_header("Authorization") || req.has_header("X-API-Key")
                                   ? "the API key is not this server's"
                                   : "this server needs an API key: send it as 'Authorization: Bearer KEY' or 'X-API-Key: KEY'");
        handler(call);
      } catch (const HttpError& e) {
        reply_error(res, e.status, e.what(), e.retry_after);
      } catch (const std::bad_alloc&) {
        reply_error(res, 503, "out of memory", 1);
      } catch (const std::exception& e) {
        reply_error(res, 500, e.what());
      }
      if (res.status == -1) res.status = 200;  // httplib's until it sends
      if (!call.streaming) metrics_.request(path, res.status, std::chrono::duration<double>(Clock::now() - call.started).count());
    };
    std::string(method) == "GET" ? http_.Get(path, wrapped) : http_.Post(path, wrapped);
    methods_[path] = method;
  }

  void routes() {
    auto compute = [this](void (*endpoint)(Context&, Call&)) {
      return [this, endpoint](Call& call) {
        life_.refuse_if_draining();
        endpoint(context_, call);
      };
    };
    route("POST", "/v1/translate", compute(translate));
    route("POST", "/v1/generate", compute(generate));
    route("POST", "/v1/completions", compute(completions));
    route("POST", "/v1/embed", compute(embed));
    route("POST", "/v1/classify", compute(classify));
    route("POST", "/v1/attention", compute(attention));
    route("GET", "/v1/models", [this](Call& call) { reply(call.res, models_.list()); });
    route(  // without the key: a load balancer's probe learns only that the server is up
        "GET", "/health",
        [this](Call& call) {
          if (life_.draining()) return reply(call.res, {{"status", "draining"}}, 503);
          reply(call.res, {{"status", "ok"}, {"models", models_.list()["data"].size()}, {"queue", life_.depth()}});
        },
        /*needs_key=*/false);
    route("GET", "/favicon.ico", [](Call& call) { call.res.status = 204; }, /*needs_key=*/false);
    route("GET", "/metrics", [this](Call& call) { call.res.set_content(metrics_.text(), "text/plain; version=0.0.4"); });
    route(  // the page asks for the key itself: a browser's first visit cannot send one
        "GET", "/",
        [](Call& call) {
          call.res.set_header("Content-Security-Policy", "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src 'self' blob:");
          call.res.set_content(kWebPage, "text/html; charset=utf-8");
        },
        /*needs_key=*/false);
  }

  const ServerOptions& options_;
  Metrics metrics_;
  ModelSet models_;
  Lifecycle life_;
  Context context_;
  HttpServer http_;
  std::map<std::string, std::string> methods_;  // each route's method, for 405
};

}  // namespace

void serve(const ServerOptions& options, std::stop_token stop, std::ostream& log) { Server(options, log).run(stop, log); }

}  // namespace tfm::serve
