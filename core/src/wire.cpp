#include "wire.hpp"

#include <unistd.h>

#include <cerrno>
#include <concepts>
#include <cstring>
#include <type_traits>
#include <utility>

namespace roofbench::wire {

// A field added to one of these types must be added to its field list below; the sizes make the
// build say so (checked where they are known: x86-64 with libstdc++'s C++11 ABI).
#if defined(__x86_64__) && defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
static_assert(sizeof(Result) == 1064, "Result changed: encode the new field in wire.cpp, then update this size");
static_assert(sizeof(Summary) == 120, "Summary changed: encode the new field in wire.cpp, then update this size");
static_assert(sizeof(MemoryFigures) == 40, "MemoryFigures changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(MeasureOptions) == 88, "MeasureOptions changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(CaseSpec) == 232, "CaseSpec changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(Work) == 96, "Work changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(KernelCounters) == 96, "KernelCounters changed: encode it in wire.cpp, then update this size");
#endif

void Writer::u32(std::uint32_t v) {
  for (int i = 0; i < 4; ++i) u8(static_cast<std::uint8_t>(v >> (8 * i)));
}
void Writer::i64(std::int64_t v) {
  const auto u = static_cast<std::uint64_t>(v);
  for (int i = 0; i < 8; ++i) u8(static_cast<std::uint8_t>(u >> (8 * i)));
}
void Writer::f64(double v) {
  std::int64_t bits;
  std::memcpy(&bits, &v, sizeof bits);
  i64(bits);
}
void Writer::str(std::string_view s) {
  u32(static_cast<std::uint32_t>(s.size()));
  out_.append(s);
}

std::string_view Reader::take(std::size_t n) {
  if (in_.size() - pos_ < n) throw WireError("truncated message");
  const std::string_view piece = in_.substr(pos_, n);
  pos_ += n;
  return piece;
}
std::uint8_t Reader::u8() { return static_cast<std::uint8_t>(take(1)[0]); }
std::uint32_t Reader::u32() {
  const std::string_view b = take(4);
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(static_cast<std::uint8_t>(b[i])) << (8 * i);
  return v;
}
std::int64_t Reader::i64() {
  const std::string_view b = take(8);
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(b[i])) << (8 * i);
  return static_cast<std::int64_t>(v);
}
double Reader::f64() {
  const std::int64_t bits = i64();
  double v;
  std::memcpy(&v, &bits, sizeof v);
  return v;
}
std::string Reader::str() { return std::string(take(u32())); }

namespace {

// Each type's fields are listed once, in fields() below, and that one list serves both directions: Out
// writes the fields in its order, In reads them back in the same order into a default-made value. So the
// two ends cannot disagree about a field, and a field added to fields() crosses both ways at once.
// Scalars: strings, doubles and bools as themselves, integers as i64, enums as one byte (range-checked on
// the way in against the enum's last value, enum_last); vectors and pairs element by element.
constexpr DeviceKind enum_last(DeviceKind) { return DeviceKind::cuda; }
constexpr Precision enum_last(Precision) { return Precision::fp8; }
constexpr GraphMode enum_last(GraphMode) { return GraphMode::off; }
constexpr Status enum_last(Status) { return Status::implausible; }
constexpr Bound enum_last(Bound) { return Bound::compute; }
constexpr Hint enum_last(Hint) { return Hint::power; }
constexpr CounterReplay enum_last(CounterReplay) { return CounterReplay::run; }

template <typename T>
struct is_vector : std::false_type {};
template <typename T>
struct is_vector<std::vector<T>> : std::true_type {};
template <typename T>
struct is_pair : std::false_type {};
template <typename A, typename B>
struct is_pair<std::pair<A, B>> : std::true_type {};

class Out {
 public:
  explicit Out(Writer& w) : w_(w) {}
  template <typename... T>
  void operator()(const T&... values) {
    (one(values), ...);
  }

 private:
  template <typename T>
  void one(const T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      w_.str(v);
    } else if constexpr (std::is_same_v<T, bool>) {
      w_.boolean(v);
    } else if constexpr (std::is_enum_v<T>) {
      w_.u8(static_cast<std::uint8_t>(v));
    } else if constexpr (std::is_integral_v<T>) {
      w_.i64(static_cast<std::int64_t>(v));
    } else if constexpr (std::is_floating_point_v<T>) {
      w_.f64(v);
    } else if constexpr (is_vector<T>::value) {
      w_.list(v, [this](Writer&, const auto& item) { one(item); });
    } else if constexpr (is_pair<T>::value) {
      one(v.first);
      one(v.second);
    } else if constexpr (std::is_same_v<T, Params>) {
      one(v.items());
    } else {
      fields(*this, v);
    }
  }
  Writer& w_;
};

class In {
 public:
  explicit In(Reader& r) : r_(r) {}
  template <typename... T>
  void operator()(T&... values) {
    (one(values), ...);
  }

 private:
  template <typename T>
  void one(T& v) {
    if constexpr (std::is_same_v<T, std::string>) {
      v = r_.str();
    } else if constexpr (std::is_same_v<T, bool>) {
      v = r_.boolean();
    } else if constexpr (std::is_enum_v<T>) {
      const auto raw = r_.u8();
      if (raw > static_cast<std::uint8_t>(enum_last(T{}))) throw WireError("enum value out of range");
      v = static_cast<T>(raw);
    } else if constexpr (std::is_integral_v<T>) {
      v = static_cast<T>(r_.i64());
    } else if constexpr (std::is_floating_point_v<T>) {
      v = r_.f64();
    } else if constexpr (is_vector<T>::value) {
      v = r_.list([this](Reader&) {
        typename T::value_type item{};
        one(item);
        return item;
      });
    } else if constexpr (is_pair<T>::value) {
      one(v.first);
      one(v.second);
    } else if constexpr (std::is_same_v<T, Params>) {
      std::vector<std::pair<std::string, std::string>> items;
      one(items);
      v = Params(std::move(items));
    } else {
      fields(*this, v);
    }
  }
  Reader& r_;
};

// The field lists. X is T for In and const T for Out.
template <typename X, typename T>
concept Is = std::same_as<std::remove_const_t<X>, T>;

template <typename Io, Is<Amount> X>
void fields(Io& io, X& c) {
  io(c.name, c.value);
}
template <typename Io, Is<Fact> X>
void fields(Io& io, X& f) {
  io(f.name, f.value);
}
template <typename Io, Is<Axis> X>
void fields(Io& io, X& a) {
  io(a.name, a.values);
}
template <typename Io, Is<CaseSpec> X>
void fields(Io& io, X& c) {  // everything but make, which stays in the worker
  io(c.name, c.description, c.axes, c.device.kind, c.device.count, c.device.all_selected_gpus, c.precision,
     c.tolerance, c.sweep_axis, c.ladder, c.timing.graphable, c.timing.min_samples, c.timeout_s);
}
template <typename Io, Is<Plugin> X>
void fields(Io& io, X& p) {
  io(p.name, p.description, p.cases);
}
template <typename Io, Is<MeasureOptions> X>
void fields(Io& io, X& o) {
  io(o.gate, o.cold, o.graph, o.noise_bound, o.min_time, o.max_time, o.warmup_max, o.clock_floor, o.runs_per_sample,
     o.seed, o.profile_runs, o.kernel_time_samples, o.energy_seconds, o.counters,
     o.counter_replay);
}
template <typename Io, Is<Work> X>
void fields(Io& io, X& w) {
  io(w.flops, w.bytes, w.bytes_read, w.items, w.item_name, w.rates, w.read_dominated);
}
template <typename Io, Is<KernelTime> X>
void fields(Io& io, X& k) {
  io(k.name, k.seconds_per_run, k.launches_per_run);
}
template <typename Io, Is<KernelCounters> X>
void fields(Io& io, X& k) {
  io(k.name, k.launches_per_run, k.dram_read, k.dram_write, k.l2_bytes, k.flops_fp64, k.flops_fp32, k.flops_fp16, k.flops_tensor);
}
template <typename Io, Is<RankFigures> X>
void fields(Io& io, X& k) {
  io(k.rank, k.host, k.device, k.status, k.time_median, k.sm_clock_mhz, k.energy_per_run);
}
template <typename Io, Is<Summary> X>
void fields(Io& io, X& s) {
  io(s.name, s.value, s.unit, s.description, s.hint, s.from_plugin, s.written, s.timed);
}
// A Result's figures cross as its list of Summary: a figure added to the host's table needs nothing here.
template <typename Io, Is<Result> X>
void fields(Io& io, X& x) {
  io(x.name, x.plugin, x.case_name, x.ladder, x.sweep_axis, x.params, x.precision, x.device, x.status, x.message);
  io(x.summaries, x.samples, x.sample_clocks_mhz);
  io(x.work, x.case_facts, x.profile.kernels, x.profile.kernel_seconds_per_run, x.profile.error);
  io(x.profile.span_seconds_per_run, x.profile.idle_seconds_per_run);
  io(x.kernel_time.seconds, x.kernel_time.samples, x.kernel_time.error);
  io(x.counters.kernels, x.counters.total, x.counters.seconds, x.counters.error, x.counters.replay,
     x.counters.replay_runs, x.counters.run_replay_failure);
  auto& m = x.memory;
  io(m.allocated, m.peak, m.reserved, m.driver_used, m.leaked);
  auto& t = x.phases;
  io(t.setup, t.gate, t.warmup, t.sampling, t.profile, t.total);
  io(x.gate_checked, x.graph, x.cold, x.cold_copies, x.cache_resident, x.hold_abandoned, x.quality_reason, x.energy_note);
  io(x.bound, x.attainable_flops, x.memory_roof.name, x.memory_roof.bytes_per_s, x.rank_figures);
}

template <typename T>
T read(Reader& r) {
  T value{};
  In{r}(value);
  return value;
}

}  // namespace

void put(Writer& w, const Params& p) { Out{w}(p); }
Params get_params(Reader& r) { return read<Params>(r); }
void put(Writer& w, const Plugin& p) { Out{w}(p); }
Plugin get_plugin(Reader& r) { return read<Plugin>(r); }
void put(Writer& w, const MeasureOptions& o) { Out{w}(o); }
MeasureOptions get_measure_options(Reader& r) { return read<MeasureOptions>(r); }
void put(Writer& w, const Result& x) { Out{w}(x); }
Result get_result(Reader& r) { return read<Result>(r); }

std::string result_bytes(const Result& r) {
  Writer w;
  put(w, r);
  return w.bytes();
}

Result result_from_bytes(std::string_view bytes) {
  Reader in(bytes);
  return get_result(in);
}

std::string exchange_reply(const std::vector<std::string>& blobs) {
  Writer w;
  w.boolean(true);
  w.list(blobs, [](Writer& out, const std::string& blob) { out.str(blob); });
  return w.bytes();
}

std::string exchange_failure(const std::string& why) {
  Writer w;
  w.boolean(false);
  w.str(why);
  return w.bytes();
}

std::vector<std::string> read_exchange_reply(const std::string& payload) {
  Reader in(payload);
  if (!in.boolean()) throw Error(in.str());
  return in.list([](Reader& r) { return r.str(); });
}

void write_frame(int fd, FrameType type, std::string_view payload) {
  Writer header;
  header.u32(static_cast<std::uint32_t>(payload.size()));
  header.u8(static_cast<std::uint8_t>(type));
  std::string bytes = header.bytes();
  bytes.append(payload);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw WireError(std::string("cannot write to the other process: ") + std::strerror(errno));
    done += static_cast<std::size_t>(n);
  }
}

namespace {
constexpr std::size_t kHeaderBytes = 5;

Frame split_frame(std::string_view whole) {
  Reader header(whole.substr(0, kHeaderBytes));
  header.u32();
  const auto type = header.u8();
  if (type < static_cast<std::uint8_t>(FrameType::config) || type > static_cast<std::uint8_t>(FrameType::exchanged))
    throw WireError("unknown frame type " + std::to_string(type));
  return {static_cast<FrameType>(type), std::string(whole.substr(kHeaderBytes))};
}

std::size_t frame_length(std::string_view header) {
  Reader r(header);
  return kHeaderBytes + r.u32();
}
}  // namespace

std::optional<Frame> read_frame(int fd) {
  std::string bytes;
  std::size_t want = kHeaderBytes;
  bool have_length = false;
  while (bytes.size() < want) {
    char buffer[65536];
    const ssize_t n = ::read(fd, buffer, std::min(sizeof buffer, want - bytes.size()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw WireError(std::string("cannot read from the other process: ") + std::strerror(errno));
    if (n == 0) {
      if (bytes.empty()) return std::nullopt;
      throw WireError("the other process closed the pipe in the middle of a message");
    }
    bytes.append(buffer, static_cast<std::size_t>(n));
    if (!have_length && bytes.size() >= kHeaderBytes) {
      want = frame_length(std::string_view(bytes).substr(0, kHeaderBytes));
      have_length = true;
    }
  }
  return split_frame(bytes);
}

std::optional<Frame> FrameBuffer::next() {
  if (buffer_.size() < kHeaderBytes) return std::nullopt;
  const std::size_t length = frame_length(std::string_view(buffer_).substr(0, kHeaderBytes));
  if (buffer_.size() < length) return std::nullopt;
  Frame f = split_frame(std::string_view(buffer_).substr(0, length));
  buffer_.erase(0, length);
  return f;
}

}  // namespace roofbench::wire
