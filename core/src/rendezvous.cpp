#include "rendezvous.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <sstream>
#include <thread>
#include <utility>

namespace roofbench {
namespace {

using Clock = std::chrono::steady_clock;

// A frame: one byte naming the operation, the payload's length (8 bytes, little-endian), the payload.
constexpr size_t kHeader = 9;
constexpr uint64_t kMaxPayload = uint64_t{1} << 30;
constexpr char kHello = 'H', kWelcome = 'W', kBroadcast = 'B', kGather = 'G', kBarrier = 'R', kAbort = 'A',
               kNotice = 'N';
// The other ranks wait this much longer than rank 0, so that rank 0's verdict reaches them first.
constexpr std::chrono::milliseconds kGrace{1000};

enum class Io { ok, timeout, closed };

const char* op_name(char op) {
  switch (op) {
    case kHello: case kWelcome: return "the meeting";
    case kBroadcast: return "a broadcast";
    case kGather: return "a gather";
    case kBarrier: return "a barrier";
    case kNotice: return "a notice";
  }
  return "an unknown operation";
}

int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return left < 0 ? 0 : static_cast<int>(left);
}

// Waits until `fd` is ready for `events`; false at the deadline.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int n = ::poll(&p, 1, ms_left(deadline));
    if (n > 0) return true;
    if (n == 0) return false;
    if (errno != EINTR) return false;
  }
}

Io send_all(int fd, const std::string& data, Clock::time_point deadline) {
  for (size_t done = 0; done < data.size();) {
    if (!wait_for(fd, POLLOUT, deadline)) return Io::timeout;
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) return Io::closed;
    done += static_cast<size_t>(n);
  }
  return Io::ok;
}

// Reads what `fd` has into `buffer`, up to `want` bytes in all.
Io read_some(int fd, std::string& buffer, size_t want) {
  char chunk[65536];
  size_t room = std::min(sizeof chunk, want - buffer.size());
  ssize_t n = ::recv(fd, chunk, room, MSG_DONTWAIT);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return Io::ok;
  if (n <= 0) return Io::closed;
  buffer.append(chunk, static_cast<size_t>(n));
  return Io::ok;
}

uint64_t payload_length(const std::string& header) {
  uint64_t length = 0;
  for (int i = 8; i >= 1; --i) length = (length << 8) | static_cast<unsigned char>(header[i]);
  return length;
}

std::string frame(char op, const std::string& payload) {
  std::string out(kHeader, '\0');
  out[0] = op;
  uint64_t length = payload.size();
  for (int i = 1; i <= 8; ++i, length >>= 8) out[i] = static_cast<char>(length & 0xff);
  return out + payload;
}

// One frame being read: the header, then as much payload as it names.
struct Incoming {
  std::string bytes;
  size_t want() const { return bytes.size() < kHeader ? kHeader : kHeader + payload_length(bytes); }
  bool complete() const { return bytes.size() >= kHeader && bytes.size() == want(); }
  bool oversized() const { return bytes.size() >= kHeader && payload_length(bytes) > kMaxPayload; }
  std::string payload() const { return bytes.substr(kHeader); }
};

// Reads what `fd` has now of the frame `in`, without waiting; Io::closed where the peer closed (or sent more
// than a frame may hold).
Io read_available(int fd, Incoming& in) {
  for (pollfd p{fd, POLLIN, 0}; !in.complete() && ::poll(&p, 1, 0) > 0;)
    if (in.oversized() || read_some(fd, in.bytes, in.want()) == Io::closed) return Io::closed;
  return Io::ok;
}

// Reads one whole frame from `fd`.
Io read_frame(int fd, Incoming& in, Clock::time_point deadline) {
  while (!in.complete()) {
    if (in.oversized()) return Io::closed;
    if (!wait_for(fd, POLLIN, deadline)) return Io::timeout;
    if (read_some(fd, in.bytes, in.want()) == Io::closed) return Io::closed;
  }
  return Io::ok;
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

std::string rank_list(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size(); ++i) out += (i ? ", " : "") + std::to_string(ranks[i]);
  return out;
}

}  // namespace

Rendezvous::Rendezvous(RendezvousConfig config) : config_(std::move(config)) {
  if (config_.world_size < 1 || config_.rank < 0 || config_.rank >= config_.world_size)
    throw RendezvousError("rendezvous: rank " + std::to_string(config_.rank) + " is outside a world of " +
                          std::to_string(config_.world_size));
  if (config_.world_size == 1) return;
  if (config_.rank == 0) accept_ranks();
  else connect_to_root();
}

Rendezvous::~Rendezvous() {
  for (int& fd : peers_) close_fd(fd);
  close_fd(listener_);
}

Clock::time_point Rendezvous::deadline() const {
  return Clock::now() + config_.timeout + (config_.rank == 0 ? std::chrono::milliseconds{0} : kGrace);
}

std::string Rendezvous::seconds() const {
  std::ostringstream out;
  out << static_cast<double>(config_.timeout.count()) / 1000.0 << " s";
  return out.str();
}

void Rendezvous::abort_all(const std::string& message) {
  auto soon = Clock::now() + std::chrono::milliseconds{200};
  // The verdict, then the end of what rank 0 sends, so that each rank reads the verdict before the close.
  for (int fd : peers_) {
    if (fd < 0) continue;
    send_all(fd, frame(kAbort, message), soon);
    ::shutdown(fd, SHUT_WR);
  }
  throw RendezvousError(message);
}

void Rendezvous::send_frame(int peer, char op, const std::string& payload) {
  int fd = peers_[static_cast<size_t>(peer)];
  Io io = send_all(fd, frame(op, payload), deadline());
  if (io == Io::ok) return;
  std::string who = "rank " + std::to_string(config_.rank == 0 ? peer : 0);
  std::string what = io == Io::timeout ? who + " took nothing within " + seconds()
                                       : who + " closed its connection (it ended or crashed)";
  if (config_.rank == 0) abort_all("rendezvous: " + what + " during " + op_name(op));
  // Rank 0 closes after telling why: its verdict may be waiting to be read.
  Incoming verdict;
  if (read_frame(fd, verdict, Clock::now() + std::chrono::milliseconds{200}) == Io::ok && verdict.bytes[0] == kAbort)
    throw RendezvousError(verdict.payload());
  throw RendezvousError("rendezvous: " + what + " during " + op_name(op));
}

std::string Rendezvous::receive_from_root(char op) {
  const auto until = deadline();
  const std::string during = std::string(" during ") + op_name(op);
  while (true) {
    Incoming in{std::exchange(pending_[0], std::string())};  // notice() may have read the start of it
    Io io = read_frame(peers_[0], in, until);
    if (io == Io::timeout) throw RendezvousError("rendezvous: rank 0 did not answer within " + seconds() + during);
    if (io == Io::closed)
      throw RendezvousError("rendezvous: rank 0 closed its connection (it ended or crashed)" + during);
    if (in.bytes[0] == kAbort) throw RendezvousError(in.payload());
    if (in.bytes[0] == kNotice) continue;  // sent before rank 0 knew this rank was here: the answer says the same
    if (in.bytes[0] != op)
      throw RendezvousError(std::string("rendezvous: rank 0 is in ") + op_name(in.bytes[0]) + during + ": out of step");
    return in.payload();
  }
}

// At rank 0: one frame from every other rank, read side by side so that a rank that ends is named at once.
std::vector<std::string> Rendezvous::receive_from_all(char op) {
  const size_t n = static_cast<size_t>(config_.world_size);
  const std::string during = std::string(" during ") + op_name(op);
  std::vector<Incoming> in(n);
  // A whole frame of another operation: out of step (it may have come before this one, early_gathers()).
  auto check_op = [&](int r) {
    const Incoming& frame_in = in[static_cast<size_t>(r)];
    if (frame_in.complete() && frame_in.bytes[0] != op)
      abort_all("rendezvous: rank " + std::to_string(r) + " is in " + op_name(frame_in.bytes[0]) + during + ": out of step");
    return frame_in.complete();
  };
  std::vector<int> waiting;
  for (int r = 1; r < config_.world_size; ++r) {
    in[static_cast<size_t>(r)].bytes = std::exchange(pending_[static_cast<size_t>(r)], std::string());
    if (!check_op(r)) waiting.push_back(r);
  }
  const auto until = deadline();
  while (!waiting.empty()) {
    std::vector<pollfd> polls;
    for (int r : waiting) polls.push_back({peers_[static_cast<size_t>(r)], POLLIN, 0});
    int ready = ::poll(polls.data(), polls.size(), ms_left(until));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) abort_all("rendezvous: " + rank_list(waiting) + " did not arrive within " + seconds() + during);
    std::vector<int> still;
    for (size_t i = 0; i < polls.size(); ++i) {
      int r = waiting[i];
      Incoming& frame_in = in[static_cast<size_t>(r)];
      bool closed = polls[i].revents && read_some(polls[i].fd, frame_in.bytes, frame_in.want()) == Io::closed;
      if (closed || frame_in.oversized())
        abort_all("rendezvous: rank " + std::to_string(r) + " closed its connection (it ended or crashed)" + during);
      if (!check_op(r)) still.push_back(r);
    }
    waiting = std::move(still);
  }
  std::vector<std::string> out(n);
  for (size_t r = 1; r < n; ++r) out[r] = in[r].payload();
  return out;
}

std::vector<std::optional<std::string>> Rendezvous::early_gathers() {
  std::vector<std::optional<std::string>> out(static_cast<size_t>(config_.world_size));
  for (int r = 1; r < config_.world_size; ++r) {
    Incoming in{std::exchange(pending_[static_cast<size_t>(r)], std::string())};
    if (read_available(peers_[static_cast<size_t>(r)], in) == Io::closed)
      abort_all("rendezvous: rank " + std::to_string(r) + " closed its connection (it ended or crashed) while the ranks measured");
    if (in.complete() && in.bytes[0] == kGather) out[static_cast<size_t>(r)] = in.payload();
    pending_[static_cast<size_t>(r)] = std::move(in.bytes);
  }
  return out;
}

void Rendezvous::notify(int rank, const std::string& message) {
  if (!Incoming{pending_[static_cast<size_t>(rank)]}.complete()) send_frame(rank, kNotice, message);
}

std::optional<std::string> Rendezvous::notice() {
  Incoming in{std::exchange(pending_[0], std::string())};
  if (read_available(peers_[0], in) == Io::closed)
    throw RendezvousError("rendezvous: rank 0 closed its connection (it ended or crashed) while the ranks measured");
  if (!in.complete()) {
    pending_[0] = std::move(in.bytes);
    return std::nullopt;
  }
  if (in.bytes[0] == kAbort) throw RendezvousError(in.payload());
  if (in.bytes[0] == kNotice) return in.payload();
  throw RendezvousError(std::string("rendezvous: rank 0 is in ") + op_name(in.bytes[0]) + " while this rank measures: out of step");
}

std::string Rendezvous::broadcast(const std::string& blob) {
  if (config_.world_size == 1) return blob;
  if (config_.rank != 0) return receive_from_root(kBroadcast);
  for (int r = 1; r < config_.world_size; ++r) send_frame(r, kBroadcast, blob);
  return blob;
}

std::vector<std::string> Rendezvous::gather(const std::string& blob) {
  if (config_.rank != 0) {
    send_frame(0, kGather, blob);
    return {};
  }
  std::vector<std::string> out = config_.world_size == 1 ? std::vector<std::string>(1) : receive_from_all(kGather);
  out[0] = blob;
  return out;
}

void Rendezvous::barrier() {
  if (config_.world_size == 1) return;
  if (config_.rank != 0) {
    send_frame(0, kBarrier, "");
    receive_from_root(kBarrier);
    return;
  }
  receive_from_all(kBarrier);
  for (int r = 1; r < config_.world_size; ++r) send_frame(r, kBarrier, "");
}

namespace {

int listen_on(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_ANY);
  address.sin_port = htons(static_cast<uint16_t>(port));
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 || ::listen(fd, 128) != 0) {
    std::string cause = std::strerror(errno);
    if (fd >= 0) ::close(fd);
    throw RendezvousError("rendezvous: rank 0 cannot listen on port " + std::to_string(port) + ": " + cause);
  }
  return fd;
}

// One connection attempt to host:port; -1 when it fails. SO_SNDTIMEO bounds connect() on Linux.
int try_connect(const std::string& host, int port, Clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0 || !found) return -1;
  int fd = ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol);
  const int ms = std::max(1, ms_left(deadline));  // a zero SO_SNDTIMEO would mean no limit
  timeval limit{ms / 1000, (ms % 1000) * 1000};
  if (fd >= 0) ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) != 0) close_fd(fd);
  ::freeaddrinfo(found);
  return fd;
}

void no_delay(int fd) {
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

// "rank world" as the hello's payload.
bool parse_hello(const std::string& text, int& rank, int& world) {
  std::istringstream in(text);
  return static_cast<bool>(in >> rank >> world);
}

}  // namespace

void Rendezvous::accept_ranks() {
  listener_ = listen_on(config_.port);
  peers_.assign(static_cast<size_t>(config_.world_size), -1);
  pending_.assign(static_cast<size_t>(config_.world_size), std::string());
  const auto until = deadline();
  for (int arrived = 1; arrived < config_.world_size;) {
    if (!wait_for(listener_, POLLIN, until)) {
      std::vector<int> missing;
      for (int r = 1; r < config_.world_size; ++r)
        if (peers_[static_cast<size_t>(r)] < 0) missing.push_back(r);
      abort_all("rendezvous: " + rank_list(missing) + " did not arrive within " + seconds() + " at port " +
                std::to_string(config_.port));
    }
    int fd = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
    Incoming hello;
    int rank = -1, world = -1;
    // A connection that says no valid hello (not one of ours, or a rank that died) is dropped; its rank is
    // then missing at the deadline.
    if (fd < 0 || read_frame(fd, hello, until) != Io::ok || hello.bytes[0] != kHello ||
        !parse_hello(hello.payload(), rank, world) || rank < 1 || rank >= config_.world_size ||
        peers_[static_cast<size_t>(rank)] >= 0) {
      close_fd(fd);
      continue;
    }
    peers_[static_cast<size_t>(rank)] = fd;
    no_delay(fd);
    ++arrived;
    if (world != config_.world_size)
      abort_all("rendezvous: rank " + std::to_string(rank) + " says the world has " + std::to_string(world) +
                " ranks, rank 0 says " + std::to_string(config_.world_size));
  }
  for (int r = 1; r < config_.world_size; ++r) send_frame(r, kWelcome, "");
}

void Rendezvous::connect_to_root() {
  const auto until = deadline();
  int fd = -1;
  while ((fd = try_connect(config_.host, config_.port, until)) < 0) {
    if (Clock::now() >= until)
      throw RendezvousError("rendezvous: rank 0 did not open " + config_.host + ":" + std::to_string(config_.port) +
                            " within " + seconds());
    std::this_thread::sleep_for(std::chrono::milliseconds{50});
  }
  no_delay(fd);
  peers_.assign(1, fd);
  pending_.assign(1, std::string());
  send_frame(0, kHello, std::to_string(config_.rank) + " " + std::to_string(config_.world_size));
  receive_from_root(kWelcome);
}

}  // namespace roofbench
