#include "wire.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace roofbench::wire {

// A field added to one of these types must be added to its put/get pair below; the sizes make the
// build say so (checked where they are known: x86-64 with libstdc++'s C++11 ABI).
#if defined(__x86_64__) && defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
static_assert(sizeof(Result) == 872, "Result changed: encode the new field in wire.cpp, then update this size");
static_assert(sizeof(RooflinePoint) == 48, "RooflinePoint changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(MemoryFigures) == 40, "MemoryFigures changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(MeasureOptions) == 72, "MeasureOptions changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(CaseSpec) == 232, "CaseSpec changed: encode it in wire.cpp, then update this size");
static_assert(sizeof(Work) == 88, "Work changed: encode it in wire.cpp, then update this size");
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

template <typename Enum>
Enum get_enum(Reader& r, Enum last) {
  const auto v = r.u8();
  if (v > static_cast<std::uint8_t>(last)) throw WireError("enum value out of range");
  return static_cast<Enum>(v);
}
template <typename Enum>
void put_enum(Writer& w, Enum e) {
  w.u8(static_cast<std::uint8_t>(e));
}

void put_counter(Writer& w, const Counter& c) {
  w.str(c.name);
  w.f64(c.value);
}
Counter get_counter(Reader& r) {
  Counter c;
  c.name = r.str();
  c.value = r.f64();
  return c;
}
void put_fact(Writer& w, const Fact& f) {
  w.str(f.name);
  w.str(f.value);
}
Fact get_fact(Reader& r) {
  Fact f;
  f.name = r.str();
  f.value = r.str();
  return f;
}
void put_string(Writer& w, const std::string& s) { w.str(s); }
std::string get_string(Reader& r) { return r.str(); }
void put_double(Writer& w, double d) { w.f64(d); }
double get_double(Reader& r) { return r.f64(); }

void put_axis(Writer& w, const Axis& a) {
  w.str(a.name);
  w.list(a.values, put_string);
}
Axis get_axis(Reader& r) {
  Axis a;
  a.name = r.str();
  a.values = r.list(get_string);
  return a;
}

void put_case(Writer& w, const CaseSpec& c) {
  w.str(c.name);
  w.str(c.description);
  w.list(c.axes, put_axis);
  put_enum(w, c.device.kind);
  w.i64(c.device.count);
  w.boolean(c.device.all_selected_gpus);
  put_enum(w, c.precision);
  w.f64(c.tolerance);
  w.str(c.sweep_axis);
  w.str(c.ladder);
  w.boolean(c.timing.graphable);
  w.f64(c.timing.min_samples);
  w.f64(c.timeout_s);
}
CaseSpec get_case(Reader& r) {
  CaseSpec c;
  c.name = r.str();
  c.description = r.str();
  c.axes = r.list(get_axis);
  c.device.kind = get_enum(r, DeviceKind::cuda);
  c.device.count = static_cast<int>(r.i64());
  c.device.all_selected_gpus = r.boolean();
  c.precision = get_enum(r, Precision::fp8);
  c.tolerance = r.f64();
  c.sweep_axis = r.str();
  c.ladder = r.str();
  c.timing.graphable = r.boolean();
  c.timing.min_samples = r.f64();
  c.timeout_s = r.f64();
  return c;
}

void put_work(Writer& w, const Work& x) {
  w.f64(x.flops);
  w.f64(x.bytes);
  w.f64(x.items);
  w.str(x.item_name);
  w.list(x.rates, put_counter);
  w.boolean(x.read_dominated);
}
Work get_work(Reader& r) {
  Work x;
  x.flops = r.f64();
  x.bytes = r.f64();
  x.items = r.f64();
  x.item_name = r.str();
  x.rates = r.list(get_counter);
  x.read_dominated = r.boolean();
  return x;
}

void put_kernel(Writer& w, const KernelTime& k) {
  w.str(k.name);
  w.f64(k.seconds_per_run);
  w.f64(k.launches_per_run);
}
KernelTime get_kernel(Reader& r) {
  KernelTime k;
  k.name = r.str();
  k.seconds_per_run = r.f64();
  k.launches_per_run = r.f64();
  return k;
}

}  // namespace

void put(Writer& w, const Params& p) {
  w.list(p.items(), [](Writer& w2, const std::pair<std::string, std::string>& item) {
    w2.str(item.first);
    w2.str(item.second);
  });
}
Params get_params(Reader& r) {
  return Params(r.list([](Reader& r2) {
    std::string k = r2.str();
    return std::pair<std::string, std::string>(std::move(k), r2.str());
  }));
}

void put(Writer& w, const Plugin& p) {
  w.str(p.name);
  w.str(p.description);
  w.list(p.cases, put_case);
}
Plugin get_plugin(Reader& r) {
  Plugin p;
  p.name = r.str();
  p.description = r.str();
  p.cases = r.list(get_case);
  return p;
}

void put(Writer& w, const MeasureOptions& o) {
  w.boolean(o.gate);
  w.boolean(o.cold);
  put_enum(w, o.graph);
  w.f64(o.noise_bound);
  w.f64(o.min_time);
  w.f64(o.max_time);
  w.f64(o.warmup_max);
  w.f64(o.clock_floor);
  w.i64(o.runs_per_sample);
  w.i64(static_cast<std::int64_t>(o.seed));
  w.i64(o.profile_runs);
}
MeasureOptions get_measure_options(Reader& r) {
  MeasureOptions o;
  o.gate = r.boolean();
  o.cold = r.boolean();
  o.graph = get_enum(r, GraphMode::off);
  o.noise_bound = r.f64();
  o.min_time = r.f64();
  o.max_time = r.f64();
  o.warmup_max = r.f64();
  o.clock_floor = r.f64();
  o.runs_per_sample = static_cast<int>(r.i64());
  o.seed = static_cast<std::uint64_t>(r.i64());
  o.profile_runs = static_cast<int>(r.i64());
  return o;
}

void put(Writer& w, const Result& x) {
  w.str(x.name);
  w.str(x.plugin);
  w.str(x.case_name);
  w.str(x.ladder);
  w.str(x.sweep_axis);
  put(w, x.params);
  put_enum(w, x.precision);
  w.str(x.device);
  put_enum(w, x.status);
  w.str(x.message);
  put_work(w, x.work);
  w.list(x.case_counters, put_counter);
  w.list(x.case_facts, put_fact);
  w.boolean(x.gate_checked);
  w.f64(x.gate_error);
  w.f64(x.tolerance);
  w.list(x.gate_counters, put_counter);
  w.list(x.samples, put_double);
  w.list(x.sample_clocks_mhz, put_double);
  w.f64(x.noise_at_fixed_clock);
  const SampleSummary& s = x.stats;
  w.i64(static_cast<std::int64_t>(s.count));
  for (double v : {s.mean, s.stdev, s.median, s.q1, s.q3, s.min, s.max, s.noise}) w.f64(v);
  w.i64(x.warmup_iterations);
  w.i64(x.runs_per_sample);
  w.boolean(x.graph);
  w.boolean(x.cold);
  w.boolean(x.cache_resident);
  w.i64(x.throttled_samples);
  w.i64(x.samples_with_mean_clock);
  w.i64(x.hold_timeouts);
  w.boolean(x.hold_abandoned);
  w.str(x.quality_reason);
  w.f64(x.mean_clock_mhz);
  const RooflinePoint& p = x.point;
  for (double v : {p.flops_per_s, p.bytes_per_s, p.intensity, p.attainable, p.roof_fraction}) w.f64(v);
  put_enum(w, p.bound);
  const MemoryFigures& m = x.memory;
  for (double v : {m.allocated, m.peak, m.reserved, m.driver_used, m.leaked}) w.f64(v);
  w.list(x.rates, put_counter);
  w.list(x.profile.kernels, put_kernel);
  w.f64(x.profile.kernel_seconds_per_run);
  w.str(x.profile.error);
  const PhaseSeconds& t = x.phases;
  for (double v : {t.setup, t.gate, t.warmup, t.sampling, t.profile, t.total}) w.f64(v);
}

Result get_result(Reader& r) {
  Result x;
  x.name = r.str();
  x.plugin = r.str();
  x.case_name = r.str();
  x.ladder = r.str();
  x.sweep_axis = r.str();
  x.params = get_params(r);
  x.precision = get_enum(r, Precision::fp8);
  x.device = r.str();
  x.status = get_enum(r, Status::refused);
  x.message = r.str();
  x.work = get_work(r);
  x.case_counters = r.list(get_counter);
  x.case_facts = r.list(get_fact);
  x.gate_checked = r.boolean();
  x.gate_error = r.f64();
  x.tolerance = r.f64();
  x.gate_counters = r.list(get_counter);
  x.samples = r.list(get_double);
  x.sample_clocks_mhz = r.list(get_double);
  x.noise_at_fixed_clock = r.f64();
  SampleSummary& s = x.stats;
  s.count = static_cast<std::size_t>(r.i64());
  for (double* v : {&s.mean, &s.stdev, &s.median, &s.q1, &s.q3, &s.min, &s.max, &s.noise}) *v = r.f64();
  x.warmup_iterations = static_cast<int>(r.i64());
  x.runs_per_sample = static_cast<int>(r.i64());
  x.graph = r.boolean();
  x.cold = r.boolean();
  x.cache_resident = r.boolean();
  x.throttled_samples = static_cast<int>(r.i64());
  x.samples_with_mean_clock = static_cast<int>(r.i64());
  x.hold_timeouts = static_cast<int>(r.i64());
  x.hold_abandoned = r.boolean();
  x.quality_reason = r.str();
  x.mean_clock_mhz = r.f64();
  RooflinePoint& p = x.point;
  for (double* v : {&p.flops_per_s, &p.bytes_per_s, &p.intensity, &p.attainable, &p.roof_fraction}) *v = r.f64();
  p.bound = get_enum(r, Bound::compute);
  MemoryFigures& m = x.memory;
  for (double* v : {&m.allocated, &m.peak, &m.reserved, &m.driver_used, &m.leaked}) *v = r.f64();
  x.rates = r.list(get_counter);
  x.profile.kernels = r.list(get_kernel);
  x.profile.kernel_seconds_per_run = r.f64();
  x.profile.error = r.str();
  PhaseSeconds& t = x.phases;
  for (double* v : {&t.setup, &t.gate, &t.warmup, &t.sampling, &t.profile, &t.total}) *v = r.f64();
  return x;
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
  if (type < static_cast<std::uint8_t>(FrameType::config) || type > static_cast<std::uint8_t>(FrameType::proceed))
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
