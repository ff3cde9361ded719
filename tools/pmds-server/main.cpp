// pmds-server — a durable pmds map served over the Redis protocol (RESP2).
//
//   pmds-server --pool FILE --structure NAME [--port 6379] [--bind 127.0.0.1] [--threads N]
//
// Opens and recovers the pool (or creates it), prints one ready line, and serves until SIGTERM
// or SIGINT, then closes the map cleanly. Killed, the next start recovers the pool.
//
// Network: libuv, one event loop per worker thread, each with its own listening socket on the
// same port (SO_REUSEPORT: the kernel spreads connections over the loops, and a connection
// stays on its loop, so no request crosses threads). A connection's requests are parsed and
// run in order as they arrive; the replies to everything one read delivered go out in one
// write (pipelining). WAITAOF on a buffered map runs the map's sync() on libuv's thread pool,
// and that connection alone waits for it.
#include <netinet/in.h>
#include <sys/socket.h>
#include <uv.h>

#include <CLI/CLI.hpp>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "commands.hpp"
#include "pmds/error.hpp"
#include "pmds/pmds.hpp"
#include "pmds/thread_registry.hpp"
#include "resp.hpp"
#include "store.hpp"

namespace pmds::server {
namespace {

struct Worker;

struct Connection {
  uv_tcp_t tcp;  // first: a uv handle pointer is a Connection pointer
  Worker* worker = nullptr;
  Session session;
  std::string in;                  // bytes received and not yet parsed
  std::string out;                 // replies not yet handed to uv_write
  std::size_t pending_output = 0;  // bytes handed to uv_write and not yet written
  bool reading = false;
  bool closing = false;
  bool quitting = false;       // QUIT or a protocol error: replies drain, nothing more is read
  bool syncing = false;        // a WAITAOF's sync() is running: requests wait
  bool handle_closed = false;  // uv_close finished: freed once no sync runs either
  Request request;
  uv_work_t sync_work;
  uv_shutdown_t shutdown;
};

struct WriteRequest {
  uv_write_t req;
  Connection* connection;
  std::string data;
};

struct Worker {
  uv_loop_t loop;
  uv_tcp_t listener;
  uv_async_t stop;
  Commands* commands = nullptr;
  const Config* config = nullptr;
  std::thread thread;
  char scratch[64 * 1024];  // every read lands here first (the loop is single-threaded)
};

void process(Connection* c);
void alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf);
void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf);

void free_connection(uv_handle_t* h) {
  auto* c = reinterpret_cast<Connection*>(h);
  c->handle_closed = true;
  if (!c->syncing) delete c;  // otherwise the sync's completion frees it
}

void close_connection(Connection* c) {
  if (c->closing) return;
  c->closing = true;
  c->worker->commands->client_disconnected();
  uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), free_connection);
}

void on_write(uv_write_t* req, int status) {
  auto* w = reinterpret_cast<WriteRequest*>(req);
  Connection* c = w->connection;
  c->pending_output -= w->data.size();
  delete w;
  if (c->closing) return;
  if (status < 0) {
    close_connection(c);
    return;
  }
  // A client that stopped reading its replies was paused (flush); it drained: read again.
  if (!c->reading && !c->quitting && c->pending_output < c->worker->config->max_pending_output) {
    c->reading = true;
    uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), alloc, on_read);
  }
}

void flush(Connection* c) {
  if (c->out.empty() || c->closing) return;
  // Written at once when nothing is queued before it: a uv_write (a request, and libuv's watch
  // for writability armed and disarmed with an epoll_ctl each time) only for what the socket
  // did not take. With uv_write alone, GET at -P 1 made an epoll_ctl per reply (strace -c).
  if (c->pending_output == 0) {
    uv_buf_t now = uv_buf_init(c->out.data(), static_cast<unsigned>(c->out.size()));
    const int written = uv_try_write(reinterpret_cast<uv_stream_t*>(&c->tcp), &now, 1);
    if (written == static_cast<int>(c->out.size())) {
      c->out.clear();
      return;
    }
    if (written > 0) c->out.erase(0, static_cast<std::size_t>(written));
    // UV_EAGAIN: the socket is full; another error: uv_write below reports it.
  }
  auto* w = new WriteRequest{{}, c, std::move(c->out)};
  c->out.clear();
  c->pending_output += w->data.size();
  uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
  if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1, on_write) < 0) {
    c->pending_output -= w->data.size();
    delete w;
    close_connection(c);
    return;
  }
  // Backpressure: a client that sends without reading its replies is not read from until they
  // drain, so it cannot grow the server's memory without bound.
  if (c->reading && c->pending_output >= c->worker->config->max_pending_output) {
    c->reading = false;
    uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp));
  }
}

// Writes what is pending, then closes (QUIT, a protocol error); what the client sent after the
// request that ended it is dropped, unread.
void flush_and_close(Connection* c) {
  c->in.clear();
  flush(c);
  if (c->closing || c->quitting) return;
  c->quitting = true;
  if (c->reading) uv_read_stop(reinterpret_cast<uv_stream_t*>(&c->tcp));
  c->reading = false;
  c->shutdown.data = c;
  if (uv_shutdown(&c->shutdown, reinterpret_cast<uv_stream_t*>(&c->tcp), [](uv_shutdown_t* s, int) {
        close_connection(static_cast<Connection*>(s->data));
      }) < 0)
    close_connection(c);
}

void sync_done(uv_work_t* work, int) {
  auto* c = static_cast<Connection*>(work->data);
  c->syncing = false;
  if (c->closing) {  // the client left while its sync ran
    if (c->handle_closed) delete c;
    return;
  }
  Reply reply(c->out);
  Commands::sync_reply(reply);
  process(c);
}

void process(Connection* c) {
  const Config& config = *c->worker->config;
  std::size_t pos = 0;
  while (!c->closing && !c->syncing) {
    const std::string_view rest = std::string_view(c->in).substr(pos);
    const ParseResult r = parse_request(rest, c->request, config.limits);
    if (r.status == ParseStatus::incomplete) {
      if (rest.size() > config.max_query_buffer) {
        Reply(c->out).error("ERR Protocol error: the query buffer is over its limit");
        flush_and_close(c);
        return;
      }
      break;
    }
    if (r.status == ParseStatus::error) {
      Reply(c->out).error("ERR " + r.error);
      flush_and_close(c);
      return;
    }
    pos += r.consumed;
    if (c->request.args.empty()) continue;
    Reply reply(c->out);
    const After after = c->worker->commands->execute(c->session, c->request.args, reply);
    if (after == After::close) {
      flush_and_close(c);
      return;
    }
    if (after == After::sync) {
      c->syncing = true;
      c->sync_work.data = c;
      uv_queue_work(
          &c->worker->loop, &c->sync_work,
          [](uv_work_t* work) {
            auto* conn = static_cast<Connection*>(work->data);
            conn->worker->commands->sync();  // nbMontage/InCLL: two epoch advances or one
          },
          sync_done);
    }
  }
  c->in.erase(0, pos);
  flush(c);
}

void alloc(uv_handle_t* h, std::size_t, uv_buf_t* buf) {
  Worker* w = reinterpret_cast<Connection*>(h)->worker;
  *buf = uv_buf_init(w->scratch, sizeof w->scratch);
}

void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
  auto* c = reinterpret_cast<Connection*>(s);
  if (n < 0) {  // EOF or an error: the client is gone
    close_connection(c);
    return;
  }
  c->in.append(buf->base, static_cast<std::size_t>(n));
  if (!c->syncing) {
    process(c);
  } else if (c->in.size() > c->worker->config->max_query_buffer) {  // waits on a WAITAOF
    close_connection(c);
  }
}

void on_connection(uv_stream_t* listener, int status) {
  if (status < 0) return;
  Worker* w = static_cast<Worker*>(listener->data);
  auto* c = new Connection;
  c->worker = w;
  uv_tcp_init(&w->loop, &c->tcp);
  c->tcp.data = nullptr;  // a connection (the listener's data is its worker): see stop
  if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&c->tcp)) < 0) {
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp),
             [](uv_handle_t* h) { delete reinterpret_cast<Connection*>(h); });
    return;
  }
  uv_tcp_nodelay(&c->tcp, 1);
  c->session.id = w->commands->next_client_id();
  c->session.authenticated = w->config->requirepass.empty();
  if (!w->commands->client_connected()) {
    c->closing = true;  // not counted: close without client_disconnected()
    const std::string refusal = "-ERR max number of clients reached\r\n";
    uv_buf_t buf =
        uv_buf_init(const_cast<char*>(refusal.data()), static_cast<unsigned>(refusal.size()));
    uv_try_write(reinterpret_cast<uv_stream_t*>(&c->tcp), &buf, 1);
    uv_close(reinterpret_cast<uv_handle_t*>(&c->tcp), free_connection);
    return;
  }
  c->reading = true;
  uv_read_start(reinterpret_cast<uv_stream_t*>(&c->tcp), alloc, on_read);
}

// A listening socket on bind:port with SO_REUSEPORT, so that every worker can have its own.
int listen_socket(const std::string& bind, int port, std::string& error) {
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (bind.find(':') != std::string::npos) {
    auto* a6 = reinterpret_cast<sockaddr_in6*>(&addr);
    if (uv_ip6_addr(bind.c_str(), port, a6) != 0) {
      error = "'" + bind + "' is not an IPv4 or IPv6 address";
      return -1;
    }
    len = sizeof(sockaddr_in6);
  } else {
    auto* a4 = reinterpret_cast<sockaddr_in*>(&addr);
    if (uv_ip4_addr(bind.c_str(), port, a4) != 0) {
      error = "'" + bind + "' is not an IPv4 or IPv6 address";
      return -1;
    }
    len = sizeof(sockaddr_in);
  }
  const int fd = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  const int one = 1;
  if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0 ||
      ::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 511) != 0) {
    error = "cannot listen on " + bind + ":" + std::to_string(port) + ": " + std::strerror(errno);
    if (fd >= 0) close(fd);
    return -1;
  }
  return fd;
}

int bound_port(int fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  return ntohs(addr.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
}

int serve(int argc, char** argv) {
  CLI::App app{"pmds-server: a durable pmds map served over the Redis protocol (RESP2)"};
  Config config;
  std::string pool_path, structure;
  std::uint64_t pool_size = std::uint64_t{64} << 20;
  std::uint64_t max_pool_size = default_max_pool_size;
  config.threads = std::max(1u, std::thread::hardware_concurrency());
  std::string structures;
  for (std::string_view s : servable_structures()) structures += "\n  " + std::string(s);
  app.add_option("--pool", pool_path, "the pool file: opened and recovered, or created")
      ->required();
  app.add_option("--structure", structure, "the map to serve:" + structures)->required();
  app.add_option("--port", config.port, "TCP port (0: any free one, printed in the ready line)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--bind", config.bind, "the address to listen on")->capture_default_str();
  app.add_option("--threads", config.threads, "worker threads, each with its own event loop")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  app.add_option("--pool-size", pool_size, "a new pool's initial size (it grows on demand)")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--max-pool-size", max_pool_size, "how far the pool may grow")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  app.add_option("--requirepass", config.requirepass,
                 "a password clients must give with AUTH before any other command");
  app.add_flag("--enable-flushall", config.enable_flushall, "allow FLUSHALL and FLUSHDB");
  app.add_option("--maxclients", config.max_clients, "connections served at once")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  app.footer(
      "Prints 'pmds-server ready address=HOST:PORT structure=NAME criterion=C recovered=N "
      "recovery_ms=T threads=K' once it serves. SIGTERM or SIGINT: a clean close. A crash or kill "
      "-9 loses what the structure's criterion allows (INFO persistence says what); the next start "
      "recovers the pool.");
  CLI11_PARSE(app, argc, argv);

  std::signal(SIGPIPE, SIG_IGN);  // a vanished client is an error on its write, not a signal

  // SIGTERM and SIGINT are caught from here on: one that comes while the pool is recovered or the
  // workers start is handled once the server is up (a clean close), rather than killing it.
  uv_loop_t main_loop;
  uv_loop_init(&main_loop);
  uv_signal_t sigterm, sigint;
  uv_signal_init(&main_loop, &sigterm);
  uv_signal_init(&main_loop, &sigint);
  auto on_signal = [](uv_signal_t* s, int) {
    uv_close(reinterpret_cast<uv_handle_t*>(s), nullptr);
    uv_signal_t* other = static_cast<uv_signal_t*>(s->data);
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(other)))
      uv_close(reinterpret_cast<uv_handle_t*>(other), nullptr);
  };
  sigterm.data = &sigint;
  sigint.data = &sigterm;
  uv_signal_start(&sigterm, on_signal, SIGTERM);
  uv_signal_start(&sigint, on_signal, SIGINT);

  std::unique_ptr<Store> store;
  double recovery_ms = 0;
  std::size_t keys = 0;
  try {
    const auto t0 = std::chrono::steady_clock::now();
    store = open_store(structure, pool_path, pool_size, max_pool_size);
    recovery_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    store->for_each_quiescent([&keys](std::string_view, std::string_view) { ++keys; });
  } catch (const std::exception& e) {
    std::cerr << "pmds-server: " << e.what() << "\n";
    return 1;
  }
  Commands commands(*store, config, keys, recovery_ms);

  std::vector<std::unique_ptr<Worker>> workers;
  for (std::size_t i = 0; i < config.threads; ++i) {
    std::string error;
    const int fd = listen_socket(config.bind, config.port, error);
    if (fd < 0) {
      std::cerr << "pmds-server: " << error << "\n";
      return 1;
    }
    if (config.port == 0) config.port = bound_port(fd);  // the others join this port
    auto w = std::make_unique<Worker>();
    w->commands = &commands;
    w->config = &config;
    uv_loop_init(&w->loop);
    uv_tcp_init(&w->loop, &w->listener);
    uv_tcp_open(&w->listener, fd);
    w->listener.data = w.get();
    if (const int rc = uv_listen(reinterpret_cast<uv_stream_t*>(&w->listener), 511, on_connection);
        rc < 0) {
      std::cerr << "pmds-server: cannot listen: " << uv_strerror(rc) << "\n";
      return 1;
    }
    w->stop.data = w.get();
    uv_async_init(&w->loop, &w->stop, [](uv_async_t* a) {
      // Close every handle of this loop (listener, connections, this one); the loop then ends.
      uv_walk(
          a->loop,
          [](uv_handle_t* h, void*) {
            if (uv_is_closing(h)) return;
            if (h->type == UV_TCP && h->data == nullptr)
              close_connection(reinterpret_cast<Connection*>(h));
            else
              uv_close(h, nullptr);
          },
          nullptr);
    });
    workers.push_back(std::move(w));
  }
  for (auto& w : workers)
    w->thread = std::thread([w = w.get()] { uv_run(&w->loop, UV_RUN_DEFAULT); });

  std::printf(
      "pmds-server ready address=%s:%d structure=%s criterion=%s recovered=%zu recovery_ms=%.1f "
      "threads=%zu\n",
      config.bind.c_str(), config.port, std::string(store->structure()).c_str(),
      to_string(store->criterion()), keys, recovery_ms, config.threads);
  std::fflush(stdout);

  // The main thread waits for SIGTERM or SIGINT (caught since startup), then stops the workers.
  uv_run(&main_loop, UV_RUN_DEFAULT);
  uv_loop_close(&main_loop);

  for (auto& w : workers) uv_async_send(&w->stop);
  for (auto& w : workers) {
    w->thread.join();
    uv_loop_close(&w->loop);
  }
  try {
    store.reset();  // the map's clean close: everything durable, the pool marked clean
  } catch (const std::exception& e) {
    std::cerr << "pmds-server: closing the pool: " << e.what() << "\n";
    return 1;
  }
  std::fprintf(stderr, "pmds-server: closed cleanly\n");
  return 0;
}

}  // namespace
}  // namespace pmds::server

int main(int argc, char** argv) {
  return pmds::server::serve(argc, argv);
}
