#include "worker.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <stdexcept>
#include <thread>

#include "device.hpp"
#include "summaries.hpp"

extern char** environ;

namespace roofbench {

namespace {

using Clock = std::chrono::steady_clock;
using wire::FrameType;

constexpr int kToParentFd = 3;
constexpr std::size_t kLogTailBytes = 4096;

void put_string(wire::Writer& w, const std::string& s) { w.str(s); }
std::string get_string(wire::Reader& r) { return r.str(); }

void send_to_parent(FrameType type, const std::string& payload = {}) { wire::write_frame(kToParentFd, type, payload); }

int describe_plugins(const std::vector<std::string>& files) {
  for (const auto& file : files) {
    send_to_parent(FrameType::loading, file);
    // Load only once the parent has cleared its copy of our log: the log and the frames travel on two
    // pipes, so without this the parent could read a crash's last words together with `loading` and
    // then clear them.
    const auto go = wire::read_frame(0);
    if (!go || go->type != FrameType::proceed) return 2;
    wire::Writer w;
    w.str(file);
    try {
      const LoadedPlugin p = load_plugin(file);
      wire::put(w, p.plugin);
      send_to_parent(FrameType::described, w.bytes());
    } catch (const std::exception& e) {
      w.str(e.what());
      send_to_parent(FrameType::load_failed, w.bytes());
    }
  }
  send_to_parent(FrameType::done);
  return 0;
}

// What a worker was asked to run (the parent's ProcessRunner::run writes it).
struct WorkerRequest {
  BenchmarkSpec benchmark;
  std::string case_name;
  bool on_cpu = true;
  std::vector<std::int64_t> gpu_indices;
  MeasureOptions options;
  std::optional<CachedCeilings> ceilings;
  std::string ceilings_problem;  // why there are none
  RankWorld world;
};

// Context::exchange in a worker: the parent holds the rendezvous and answers with every process's blob.
std::vector<std::string> exchange_through_parent(const std::string& blob) {
  send_to_parent(FrameType::exchange, blob);
  const auto reply = wire::read_frame(0);
  if (!reply || reply->type != FrameType::exchanged) throw Error("the parent process did not answer an exchange");
  return wire::read_exchange_reply(reply->payload);
}

WorkerRequest read_request(const std::string& payload) {
  wire::Reader in(payload);
  WorkerRequest q;
  q.benchmark.name = in.str();
  q.benchmark.plugin = in.str();
  q.case_name = in.str();
  q.benchmark.params = wire::get_params(in);
  q.on_cpu = in.u8() == 0;
  q.gpu_indices = in.list([](wire::Reader& r) { return r.i64(); });
  q.options = wire::get_measure_options(in);
  q.ceilings = parse_ceilings(in.str(), q.on_cpu ? DeviceKind::cpu : DeviceKind::cuda, &q.ceilings_problem);
  q.world.world_size = static_cast<int>(in.i64());
  q.world.first_rank = static_cast<int>(in.i64());
  if (q.world.world_size > 1) q.world.exchange = exchange_through_parent;
  return q;
}

// The devices and the case a request names, as this worker has them: empty when they can be used, else why not.
std::string resolve_request(WorkerRequest& q, const std::vector<LoadedPlugin>& plugins, Device& cpu,
                            const std::vector<std::unique_ptr<Device>>& gpus, const std::string& why_no_gpu,
                            std::vector<Device*>& ranks) {
  BenchmarkSpec& b = q.benchmark;
  for (const auto& p : plugins)
    if (p.plugin.name == b.plugin)
      for (const auto& c : p.plugin.cases)
        if (c.name == q.case_name) {
          b.spec = &c;
          b.cuda_probe = p.cuda_probe;
        }
  std::string problem;
  if (q.on_cpu) ranks.push_back(&cpu);
  for (auto index : q.gpu_indices) {
    auto it = std::find_if(gpus.begin(), gpus.end(), [&](auto& g) { return g->info().index == index; });
    if (it == gpus.end()) problem = "the worker has no GPU " + std::to_string(index) + " (" + why_no_gpu + ")";
    else ranks.push_back(it->get());
  }
  if (!b.spec) problem = "the worker has no case " + b.plugin + "/" + q.case_name;
  if (ranks.empty()) problem = "the worker was given no device";
  // Empty ceilings would put every result at 0% of roof without a word.
  if (!q.ceilings) problem = "the worker could not read the ceilings it was sent (" + q.ceilings_problem + ")";
  return problem;
}

int run_benchmarks(const std::vector<std::string>& files) {
  std::vector<LoadedPlugin> plugins;
  std::vector<std::pair<std::string, std::string>> not_loaded;  // path, reason
  for (const auto& file : files) {
    try {
      plugins.push_back(load_plugin(file));
    } catch (const std::exception& e) {
      not_loaded.emplace_back(file, e.what());
    }
  }
  auto cpu = make_cpu_device();
  std::string why_no_gpu;
  auto gpus = make_cuda_devices(why_no_gpu);
  send_to_parent(FrameType::ready);

  while (auto frame = wire::read_frame(0)) {
    if (frame->type != FrameType::run) continue;
    WorkerRequest q = read_request(frame->payload);
    std::vector<Device*> ranks;
    const std::string problem = resolve_request(q, plugins, *cpu, gpus, why_no_gpu, ranks);
    Result r;
    if (problem.empty()) {
      r = measure(q.benchmark, ranks, q.ceilings->ceilings, q.options, q.world);
    } else {
      Measurement m;
      m.name = q.benchmark.name;
      m.plugin = q.benchmark.plugin;
      m.case_name = q.case_name;
      m.params = q.benchmark.params;
      m.status = Status::error;
      m.message = problem;
      for (const auto& [path, reason] : not_loaded) m.message += "; " + path + " did not load in the worker: " + reason;
      r = result_of(m);
    }
    wire::Writer w;
    wire::put(w, r);
    send_to_parent(FrameType::result, w.bytes());
  }
  return 0;
}

// The parent's answer to a worker's exchange: the round through the rendezvous, or why it failed.
std::string answer_exchange(const RankWorld& world, const std::string& blob) {
  if (!world.spans_processes()) return wire::exchange_reply({blob});
  try {
    return wire::exchange_reply(world.exchange(blob));
  } catch (const std::exception& e) {
    return wire::exchange_failure(e.what());
  }
}

std::string describe_wait_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return "was killed by signal " + std::to_string(sig) + " (" + ::strsignal(sig) + ")";
  }
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  return "ended with status " + std::to_string(status);
}

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

}  // namespace

int worker_main(int argc, char** argv) {
  // The worker must not outlive a parent that was killed (a hang would otherwise hold the GPU).
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (argc < 3) return 2;
  const std::string mode = argv[2];
  try {
    const auto config = wire::read_frame(0);
    if (!config || config->type != FrameType::config) return 2;
    wire::Reader in(config->payload);
    const auto files = in.list(get_string);
    if (mode == "describe") return describe_plugins(files);
    if (mode == "run") return run_benchmarks(files);
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "roofbench worker: " << e.what() << "\n";
    return 1;
  }
}

Result InProcessRunner::run(const RunRequest& q) {
  return measure(q.benchmark, q.ranks, q.ceilings.ceilings, q.options, q.world);
}

WorkerProcess::WorkerProcess(const std::string& executable, const std::string& mode) {
  int to[2], from[2], log[2];
  if (::pipe2(to, O_CLOEXEC) != 0 || ::pipe2(from, O_CLOEXEC) != 0 || ::pipe2(log, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot make pipes for a worker process: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  // The log first: its descriptor may be 3, which the message pipe takes next.
  posix_spawn_file_actions_adddup2(&actions, log[1], 1);
  posix_spawn_file_actions_adddup2(&actions, log[1], 2);
  posix_spawn_file_actions_adddup2(&actions, to[0], 0);
  posix_spawn_file_actions_adddup2(&actions, from[1], kToParentFd);
  std::string flag = kWorkerFlag, mode_arg = mode, exe = executable;
  char* argv[] = {exe.data(), flag.data(), mode_arg.data(), nullptr};
  const int error = ::posix_spawn(&pid_, executable.c_str(), &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(to[0]);
  ::close(from[1]);
  ::close(log[1]);
  to_worker_ = to[1];
  from_worker_ = from[0];
  log_ = log[0];
  if (error != 0) {
    pid_ = -1;
    close_fd(to_worker_);
    close_fd(from_worker_);
    close_fd(log_);
    throw std::runtime_error("cannot start a worker process (" + executable + "): " + std::strerror(error));
  }
  ::fcntl(from_worker_, F_SETFL, O_NONBLOCK);
  ::fcntl(log_, F_SETFL, O_NONBLOCK);
}

WorkerProcess::~WorkerProcess() {
  close_fd(to_worker_);  // the worker's command pipe ends: it finishes and exits
  if (pid_ > 0) {
    const auto until = Clock::now() + std::chrono::seconds(2);
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
      if (Clock::now() > until) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        break;
      }
      pump(20);
    }
  }
  close_fd(from_worker_);
  close_fd(log_);
}

void WorkerProcess::pump(int timeout_ms) {
  pollfd fds[2];
  nfds_t n = 0;
  if (!messages_closed_ && from_worker_ >= 0) fds[n++] = {from_worker_, POLLIN, 0};
  if (log_ >= 0) fds[n++] = {log_, POLLIN, 0};
  if (n == 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(timeout_ms));
    return;
  }
  if (::poll(fds, n, timeout_ms) <= 0) return;
  char buffer[65536];
  for (nfds_t i = 0; i < n; ++i) {
    if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
    const ssize_t got = ::read(fds[i].fd, buffer, sizeof buffer);
    if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (fds[i].fd == from_worker_) {
      if (got <= 0) messages_closed_ = true;
      else frames_.append(buffer, static_cast<std::size_t>(got));
    } else {
      if (got <= 0) {
        close_fd(log_);
        continue;
      }
      // The worker's log goes on to ours as it comes.
      for (ssize_t done = 0; done < got;) {
        const ssize_t w = ::write(2, buffer + done, static_cast<std::size_t>(got - done));
        if (w <= 0) break;
        done += w;
      }
      tail_.append(buffer, static_cast<std::size_t>(got));
      if (tail_.size() > kLogTailBytes) tail_.erase(0, tail_.size() - kLogTailBytes);
    }
  }
}

std::string WorkerProcess::reap(bool kill_first) {
  if (death_) return *death_;
  if (pid_ <= 0) return "was not running";
  if (kill_first) ::kill(pid_, SIGKILL);
  // A worker that closed its messages is exiting: give it a moment (exit handlers, CUDA teardown).
  const auto until = Clock::now() + std::chrono::seconds(10);
  int status = 0;
  pid_t done;
  while ((done = ::waitpid(pid_, &status, WNOHANG)) == 0) {
    if (Clock::now() > until) {
      ::kill(pid_, SIGKILL);
      done = ::waitpid(pid_, &status, 0);
      break;
    }
    pump(20);
  }
  // What it wrote last, up to a moment after its end (a grandchild may still hold the pipe).
  const auto drain_until = Clock::now() + std::chrono::milliseconds(200);
  while (log_ >= 0 && Clock::now() < drain_until) pump(20);
  pid_ = -1;
  death_ = kill_first ? std::string("was killed") : done > 0 ? describe_wait_status(status) : "vanished";
  return *death_;
}

WorkerProcess::Event WorkerProcess::next(Deadline deadline, const std::function<std::optional<std::string>()>& stop) {
  while (true) {
    if (auto f = frames_.next()) return {Event::frame, std::move(*f), {}};
    if (messages_closed_ || pid_ <= 0) return {Event::died, {}, reap(false)};
    if (auto why = stop ? stop() : std::nullopt) {
      reap(true);
      return {Event::stopped, {}, std::move(*why)};
    }
    int wait_ms = stop ? kStopPollMs : 1000;
    if (deadline) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now()).count();
      if (left <= 0) return {Event::timed_out, {}, reap(true)};
      wait_ms = static_cast<int>(std::min<long long>(left, wait_ms));
    }
    pump(wait_ms);
  }
}

bool WorkerProcess::send(FrameType type, const std::string& payload) {
  if (to_worker_ < 0) return false;
  try {
    wire::write_frame(to_worker_, type, payload);
    return true;
  } catch (const wire::WireError&) {
    return false;
  }
}

void WorkerProcess::kill_now() { reap(true); }

std::string WorkerProcess::log_tail() const {
  // The last lines, on one line: a results file's error message is one line.
  std::string tail = tail_;
  while (!tail.empty() && (tail.back() == '\n' || tail.back() == '\r')) tail.pop_back();
  std::size_t start = tail.size(), lines = 0;
  while (start > 0 && lines < 6) {
    start = tail.rfind('\n', start - 1);
    if (start == std::string::npos) {
      start = 0;
      break;
    }
    ++lines;
  }
  std::string out = tail.substr(start);
  std::replace(out.begin(), out.end(), '\n', '|');
  out.erase(0, out.find_first_not_of("| "));
  if (out.size() > 1000) out = "..." + out.substr(out.size() - 1000);
  return out;
}

LoadResult describe_plugins_in_workers(const std::vector<std::string>& files, const std::string& executable,
                                       double timeout_s) {
  LoadResult result;
  std::size_t next = 0;
  auto deadline = [&]() -> WorkerProcess::Deadline {
    if (timeout_s <= 0) return std::nullopt;
    return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  };
  while (next < files.size()) {
    WorkerProcess worker(executable, "describe");
    wire::Writer config;
    config.list(std::vector<std::string>(files.begin() + static_cast<std::ptrdiff_t>(next), files.end()), put_string);
    worker.send(FrameType::config, config.bytes());
    bool loading = false, finished = false;
    while (!finished) {
      auto e = worker.next(deadline());
      if (e.kind == WorkerProcess::Event::frame) {
        wire::Reader in(e.message.payload);
        switch (e.message.type) {
          case FrameType::loading:
            loading = true;
            worker.clear_log_tail();
            worker.send(FrameType::proceed, {});
            break;
          case FrameType::described: {
            const std::string path = in.str();
            add_plugin(result, LoadedPlugin{nullptr, path, wire::get_plugin(in)});
            loading = false;
            ++next;
            break;
          }
          case FrameType::load_failed: {
            const std::string path = in.str();
            result.failures.push_back({path, in.str()});
            loading = false;
            ++next;
            break;
          }
          case FrameType::done: finished = true; break;
          default: break;
        }
        continue;
      }
      const std::string tail = worker.log_tail();
      const std::string how = e.kind == WorkerProcess::Event::timed_out
                                  ? "did not finish loading within " + std::to_string(static_cast<int>(timeout_s)) + " s"
                                  : "crashed its worker process while loading: the worker " + e.death;
      if (loading) {
        result.failures.push_back({files[next], how + (tail.empty() ? "" : "; its log ended: " + tail)});
        ++next;
      } else {
        for (; next < files.size(); ++next)
          result.failures.push_back({files[next], "not loaded: the worker process " + e.death + " before loading it"});
      }
      break;
    }
    if (finished) break;
  }
  return result;
}

ProcessRunner::ProcessRunner(std::string executable, std::vector<std::string> plugin_files)
    : executable_(std::move(executable)), plugin_files_(std::move(plugin_files)) {}

Result ProcessRunner::lost(const RunRequest& q, Status status, const std::string& why) {
  Result r = unmeasured_result(q.benchmark, q.ranks);
  r.status = status;
  r.message = why;
  if (worker_) {
    const std::string tail = worker_->log_tail();
    if (!tail.empty()) r.message += "; its log ended: " + tail;
  }
  worker_.reset();
  return r;
}

Result ProcessRunner::run(const RunRequest& q) {
  WorkerProcess::Deadline deadline;
  if (q.timeout_s > 0)
    deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(q.timeout_s));
  auto timeout_text = [&] {
    char buf[120];
    std::snprintf(buf, sizeof buf, "ran past its %g s timeout (--timeout, or the case's timeout_s); the worker was killed",
                  q.timeout_s);
    return std::string(buf);
  };
  using Event = WorkerProcess::Event;
  if (!worker_) {
    worker_ = std::make_unique<WorkerProcess>(executable_, "run");
    ++workers_started_;
    wire::Writer config;
    config.list(plugin_files_, put_string);
    worker_->send(FrameType::config, config.bytes());
    const Event e = worker_->next(deadline);
    if (e.kind == Event::timed_out) return lost(q, Status::timed_out, timeout_text() + " (while starting)");
    if (e.kind == Event::died || e.message.type != FrameType::ready)
      return lost(q, Status::crashed, "a fresh worker process " + e.death + " while loading the plugins");
  }
  worker_->clear_log_tail();
  wire::Writer w;
  const BenchmarkSpec& b = q.benchmark;
  w.str(b.name);
  w.str(b.plugin);
  w.str(b.spec->name);
  wire::put(w, b.params);
  const bool on_cpu = q.ranks.front()->info().kind == DeviceKind::cpu;
  w.u8(on_cpu ? 0 : 1);
  std::vector<std::int64_t> indices;
  if (!on_cpu)
    for (auto* d : q.ranks) indices.push_back(d->info().index);
  w.list(indices, [](wire::Writer& out, std::int64_t i) { out.i64(i); });
  wire::put(w, q.options);
  w.str(serialize_ceilings(q.ceilings));
  w.i64(q.world.world_size);
  w.i64(q.world.first_rank);
  worker_->send(FrameType::run, w.bytes());  // a dead worker shows in next()
  // Ranks that work together: another rank's failure or loss ends this measurement at once (RankWorld::watch).
  Event e = worker_->next(deadline, q.world.watch);
  while (e.kind == Event::frame && e.message.type == FrameType::exchange) {
    worker_->send(FrameType::exchanged, answer_exchange(q.world, e.message.payload));
    e = worker_->next(deadline, q.world.watch);
  }
  if (e.kind == Event::stopped) return lost(q, Status::error, e.death + "; this rank's worker was stopped");
  if (e.kind == Event::timed_out) return lost(q, Status::timed_out, timeout_text());
  if (e.kind == Event::died) return lost(q, Status::crashed, "the worker process " + e.death + " during this benchmark");
  if (e.message.type != FrameType::result) return lost(q, Status::crashed, "the worker sent no result");
  wire::Reader in(e.message.payload);
  Result r = wire::get_result(in);
  // A worker whose case failed may hold a broken device or leaked memory (a wrong kernel that failed its
  // gate may have written past its buffers without faulting): the next benchmark gets a fresh process
  // (and CUDA context). Passing benchmarks keep the worker, so a clean run pays one start.
  if (r.status == Status::error || r.status == Status::gate_failed || r.status == Status::out_of_memory ||
      r.memory.leaked > 0)
    worker_.reset();
  return r;
}

}  // namespace roofbench
