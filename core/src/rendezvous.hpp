// A small TCP store that lines up the processes of one run: rank 0 listens on the rendezvous host and port,
// every other rank connects to it (retrying until the timeout) and keeps one connection. Over these it
// broadcasts a blob from rank 0 (NCCL's unique id travels this way), gathers a blob from every rank at rank 0,
// and holds barriers. It lines up the processes of a run with one process per GPU (rank_mode.hpp).
//
// Every operation has a timeout. When a rank does not arrive in time or its connection closes (it ended or
// crashed), rank 0 throws RendezvousError naming that rank and passes the same message to the others, which
// throw it too; a rank that loses rank 0 names rank 0. Nobody waits past its timeout (the ranks other than 0
// wait one grace second longer, so that rank 0's verdict reaches them). IPv4, POSIX sockets.
// After a RendezvousError the object is spent: destroy it (its sockets close) and end the run.
#pragma once

#include <chrono>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace roofbench {

struct RendezvousError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct RendezvousConfig {
  int rank = 0;
  int world_size = 1;
  std::string host = "127.0.0.1";  // rank 0's host: a name or an IPv4 address
  int port = 0;
  std::chrono::milliseconds timeout{60000};  // for the meeting and for each operation
};

class Rendezvous {
 public:
  // Meets every rank: returns once all world_size ranks are connected. Throws RendezvousError otherwise.
  explicit Rendezvous(RendezvousConfig config);
  ~Rendezvous();
  Rendezvous(const Rendezvous&) = delete;
  Rendezvous& operator=(const Rendezvous&) = delete;

  int rank() const { return config_.rank; }
  int world_size() const { return config_.world_size; }
  std::chrono::milliseconds timeout() const { return config_.timeout; }
  // The timeout of the operations from now on (a benchmark's rounds wait as long as it may run).
  void set_timeout(std::chrono::milliseconds timeout) { config_.timeout = timeout; }

  // Rank 0's `blob` on every rank (the others' argument is ignored).
  std::string broadcast(const std::string& blob);
  // At rank 0, every rank's blob in rank order; at the other ranks, nothing.
  std::vector<std::string> gather(const std::string& blob);
  // Returns once every rank has reached it.
  void barrier();

  // Between operations, while the ranks measure (rank_mode.hpp watches for a rank that failed or ended), without
  // waiting. At rank 0: reads what the other ranks sent ahead of the next gather (kept for it) and returns,
  // for each rank (index = rank), the payload of its gather frame where it arrived whole; throws
  // RendezvousError, and tells every rank, where a rank closed its connection.
  std::vector<std::optional<std::string>> early_gathers();
  // At rank 0: a notice to `rank` (what its notice() returns), unless its next gather frame came whole already.
  void notify(int rank, const std::string& message);
  // At the other ranks: the notice rank 0 sent, if one came; throws RendezvousError where rank 0 closed its
  // connection or gave up (its verdict). A notice that crosses an operation is dropped there: the operation's
  // answer says the same.
  std::optional<std::string> notice();

 private:
  void send_frame(int peer, char op, const std::string& payload);
  std::string receive_from_root(char op);
  std::vector<std::string> receive_from_all(char op);
  void accept_ranks();
  void connect_to_root();
  [[noreturn]] void abort_all(const std::string& message);
  std::chrono::steady_clock::time_point deadline() const;
  std::string seconds() const;

  RendezvousConfig config_;
  int listener_ = -1;
  std::vector<int> peers_;  // at rank 0: the socket of each rank (index = rank, 0 unused); elsewhere: [rank 0's]
  std::vector<std::string> pending_;  // the frame being read from each of peers_, kept between calls
};

}  // namespace roofbench
