#include "core/server/http_server.hpp"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/buffer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/util/error.hpp"
#include "core/util/log.hpp"

namespace strata::server {
namespace http = boost::beast::http;
using boost::system::error_code;

namespace {

constexpr std::chrono::milliseconds kPollSlice{100};  // how often a wait looks at the server's stop flag

// Beast's SyncReadStream and SyncWriteStream over a connected socket: each read or write waits at most the idle
// timeout for the socket, and a read between requests (idle) also ends once the server stops.
class SocketStream {
 public:
  SocketStream(int fd, std::chrono::milliseconds timeout, const std::atomic<bool>& stopping)
      : fd_(fd), timeout_(timeout), stopping_(stopping) {}

  bool idle = false;  // waiting for the next request's first bytes

  template <class Buffers>
  size_t read_some(const Buffers& buffers, error_code& error) {
    const auto buffer = *boost::asio::buffer_sequence_begin(buffers);
    if (!wait_for(POLLIN, error)) return 0;
    const ssize_t n = ::recv(fd_, buffer.data(), buffer.size(), 0);
    if (n > 0) return static_cast<size_t>(n);
    error = n == 0 ? error_code(http::error::end_of_stream) : error_code(errno, boost::system::system_category());
    return 0;
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers, error_code& error) {
    const auto buffer = *boost::asio::buffer_sequence_begin(buffers);
    if (!wait_for(POLLOUT, error)) return 0;
    const ssize_t n = ::send(fd_, buffer.data(), buffer.size(), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<size_t>(n);
    error = error_code(errno, boost::system::system_category());
    return 0;
  }
  template <class Buffers>
  size_t read_some(const Buffers& buffers) {
    error_code error;
    const size_t n = read_some(buffers, error);
    if (error) throw boost::system::system_error(error);
    return n;
  }
  template <class Buffers>
  size_t write_some(const Buffers& buffers) {
    error_code error;
    const size_t n = write_some(buffers, error);
    if (error) throw boost::system::system_error(error);
    return n;
  }
  // Whether the peer has closed the connection, without blocking: it hung up, or the socket reads as ended. Bytes
  // waiting (a pipelined next request) mean it is still there.
  bool peer_closed() const {
    pollfd one{fd_, POLLIN | POLLRDHUP, 0};
    if (::poll(&one, 1, 0) <= 0) return false;
    if ((one.revents & (POLLHUP | POLLERR | POLLRDHUP)) != 0) return true;
    char byte = 0;
    return ::recv(fd_, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
  }

 private:
  bool wait_for(short events, error_code& error) {
    const auto deadline = std::chrono::steady_clock::now() + timeout_;
    for (;;) {
      if (idle && stopping_.load()) break;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) break;
      pollfd one{fd_, events, 0};
      const int ready = ::poll(&one, 1, static_cast<int>(std::min(left, kPollSlice).count()));
      if (ready > 0) return true;
      if (ready < 0 && errno != EINTR) {
        error = error_code(errno, boost::system::system_category());
        return false;
      }
    }
    error = error_code(boost::asio::error::timed_out);
    return false;
  }

  int fd_;
  std::chrono::milliseconds timeout_;
  const std::atomic<bool>& stopping_;
};

class ConnectionReply : public HttpReply {
 public:
  ConnectionReply(SocketStream& stream, unsigned version, bool keep_alive)
      : stream_(stream), version_(version), keep_alive_(keep_alive) {}

  void send(int status, std::string_view content_type, std::string body, const HttpHeaders& headers) override {
    http::response<http::string_body> response{static_cast<http::status>(status), version_};
    response.set(http::field::content_type, std::string(content_type));
    for (const auto& [name, value] : headers) response.set(name, value);
    response.keep_alive(keep_alive_);
    response.body() = std::move(body);
    response.prepare_payload();
    error_code error;
    http::write(stream_, response, error);
    ok_ = !error;
    answered_ = true;
  }
  bool start_events() override {
    http::response<http::empty_body> response{http::status::ok, version_};
    response.set(http::field::content_type, "text/event-stream");
    response.set(http::field::cache_control, "no-cache");
    response.keep_alive(keep_alive_);
    response.chunked(true);
    http::response_serializer<http::empty_body> serializer{response};
    error_code error;
    http::write_header(stream_, serializer, error);
    answered_ = true;
    return ok_ = !error;
  }
  bool send_event(std::string_view data) override {
    if (!ok_) return false;
    const std::string event = "data: " + std::string(data) + "\n\n";
    error_code error;
    boost::asio::write(stream_, http::make_chunk(boost::asio::buffer(event)), error);
    return ok_ = !error;
  }
  void end_events() override {
    if (!ok_) return;
    error_code error;
    boost::asio::write(stream_, http::make_chunk_last(), error);
    ok_ = !error;
  }

  bool client_gone() override { return !ok_ || stream_.peer_closed(); }

  bool answered() const { return answered_; }
  // Whether the connection can carry another request.
  bool reusable() const { return ok_ && keep_alive_; }

 private:
  SocketStream& stream_;
  unsigned version_;
  bool keep_alive_;
  bool ok_ = true;
  bool answered_ = false;
};

std::string json_error(const std::string& message) {
  return nlohmann::json{{"error", {{"message", message}, {"type", "invalid_request_error"}}}}.dump();
}

int listen_on(const std::string& host, uint16_t port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string address = host + ":" + std::to_string(port);
  if (const int status = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); status != 0) {
    throw Error("cannot listen on " + address + ": " + ::gai_strerror(status));
  }
  std::string reason = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int yes = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd, SOMAXCONN) != 0) {
      reason = std::strerror(errno);
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  if (fd < 0) throw Error("cannot listen on " + address + ": " + reason);
  return fd;
}

uint16_t bound_port(int fd) {
  sockaddr_storage address{};
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  if (address.ss_family == AF_INET6) return ntohs(reinterpret_cast<sockaddr_in6*>(&address)->sin6_port);
  return ntohs(reinterpret_cast<sockaddr_in*>(&address)->sin_port);
}

}  // namespace

struct HttpServer::Impl {
  int listen_fd = -1;
  std::mutex mutex;
  std::condition_variable all_closed;
  size_t open = 0;
};

HttpServer::HttpServer(const std::string& host, uint16_t port, HttpHandler handler, HttpLimits limits)
    : impl_(std::make_unique<Impl>()), handler_(std::move(handler)), limits_(limits) {
  impl_->listen_fd = listen_on(host, port);
  port_ = bound_port(impl_->listen_fd);
  acceptor_ = std::thread([this] { accept_loop(); });
}

HttpServer::~HttpServer() {
  stop();
  acceptor_.join();
  std::unique_lock lock(impl_->mutex);
  impl_->all_closed.wait(lock, [this] { return impl_->open == 0; });
  ::close(impl_->listen_fd);
}

void HttpServer::stop() { stopping_.store(true); }

void HttpServer::accept_loop() {
  while (!stopping_.load()) {
    pollfd one{impl_->listen_fd, POLLIN, 0};
    if (::poll(&one, 1, static_cast<int>(kPollSlice.count())) <= 0) continue;
    const int fd = ::accept4(impl_->listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    std::lock_guard lock(impl_->mutex);
    if (impl_->open >= limits_.max_connections) {
      const std::string busy = "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
      ::send(fd, busy.data(), busy.size(), MSG_NOSIGNAL);
      ::close(fd);
      log().warn("http: refused a connection: {} are open", impl_->open);
      continue;
    }
    ++impl_->open;
    // Detached: the destructor waits for the count of open connections instead of joining each thread.
    std::thread([this, fd] { serve_connection(fd); }).detach();
  }
}

void HttpServer::serve_connection(int fd) {
  SocketStream stream(fd, limits_.idle_timeout, stopping_);
  boost::beast::flat_buffer buffer;
  for (;;) {
    http::request_parser<http::string_body> parser;
    parser.body_limit(limits_.max_body_bytes);
    parser.header_limit(64 * 1024);
    error_code error;
    stream.idle = true;
    http::read_header(stream, buffer, parser, error);
    stream.idle = false;
    if (!error) http::read(stream, buffer, parser, error);
    if (error) {
      if (error == http::error::body_limit || error == http::error::header_limit) {
        const bool body = error == http::error::body_limit;
        ConnectionReply reply(stream, 11, false);
        reply.send(
            body ? 413 : 431, "application/json",
            json_error(body ? "the request body is larger than " + std::to_string(limits_.max_body_bytes) + " bytes"
                            : "the request's headers are too large"),
            {});
      } else if (error != http::error::end_of_stream && error != boost::asio::error::timed_out &&
                 error != boost::asio::error::connection_reset) {
        ConnectionReply reply(stream, 11, false);
        reply.send(400, "application/json", json_error("malformed HTTP request: " + error.message()), {});
      }
      break;
    }
    const auto& message = parser.get();
    HttpRequest request;
    request.method = std::string(message.method_string());
    const std::string target(message.target());
    request.target = target.substr(0, target.find('?'));
    request.body = message.body();
    if (const auto it = message.find(http::field::authorization); it != message.end()) {
      request.authorization = std::string(it->value());
    }
    ConnectionReply reply(stream, message.version(), message.keep_alive());
    try {
      handler_(request, reply);
      if (!reply.answered()) reply.send(500, "application/json", json_error("the handler gave no answer"), {});
    } catch (const std::exception& failure) {
      log().error("http: {} {} failed: {}", request.method, request.target, failure.what());
      if (!reply.answered()) reply.send(500, "application/json", json_error("internal error"), {});
    }
    if (!reply.reusable()) break;
  }
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  std::lock_guard lock(impl_->mutex);
  --impl_->open;
  impl_->all_closed.notify_all();
}

}  // namespace strata::server
