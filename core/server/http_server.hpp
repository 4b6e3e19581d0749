// A small HTTP/1.1 server on Boost.Beast: a thread accepts, and each connection gets a thread of its own that
// reads a request, hands it to the handler and writes the answer (keep-alive). A handler answers once, or with a
// stream of server-sent events. Bounded everywhere: request head and body sizes (431/413), connections (503
// beyond), and a socket that sends nothing for the idle timeout is closed.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace strata::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // the path, without the query
  std::string body;
  std::string authorization;  // the Authorization header, or ""
};

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

// How a handler answers: send() once, or start_events(), send_event()s and end_events().
class HttpReply {
 public:
  virtual ~HttpReply() = default;
  virtual void send(int status, std::string_view content_type, std::string body, const HttpHeaders& headers = {}) = 0;
  // A 200 of text/event-stream, chunked; false where the client is gone.
  virtual bool start_events() = 0;
  // One event: "data: <data>\n\n". False where the client is gone (the handler then stops its work).
  virtual bool send_event(std::string_view data) = 0;
  virtual void end_events() = 0;
  // Whether the client has closed the connection (a check that does not block): a handler whose answer is not
  // streamed asks between the pieces of its work, and stops it. A client that only shuts down its sending half
  // counts as gone too: HTTP clients do not.
  virtual bool client_gone() = 0;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpReply&)>;

struct HttpLimits {
  size_t max_body_bytes = 8u << 20;
  size_t max_connections = 256;
  std::chrono::seconds idle_timeout{60};  // a read or a write that makes no progress for this long ends it
};

class HttpServer {
 public:
  // Listens on host:port (port 0: one the system picks; port() says which). Throws strata::Error naming the
  // address where it cannot listen there.
  HttpServer(const std::string& host, uint16_t port, HttpHandler handler, HttpLimits limits = {});
  // stop(), then waits for the connections to finish the requests they are in.
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  uint16_t port() const { return port_; }
  // Stops accepting and closes the idle connections; safe from any thread, more than once.
  void stop();

 private:
  struct Impl;
  void accept_loop();
  void serve_connection(int fd);

  std::unique_ptr<Impl> impl_;
  HttpHandler handler_;
  const HttpLimits limits_;
  uint16_t port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
};

}  // namespace strata::server
