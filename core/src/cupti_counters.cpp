// --counters through CUPTI's Range Profiler: auto ranges (one per kernel launch), read by kernel replay
// (each kernel replayed until every metric is counted, its memory restored between replays) or by run
// replay (the run repeated once per pass). Kernel names come from CUPTI's launch callbacks, in launch
// order; a run that launches a CUDA graph is refused (the profiler does not count a graph's kernels), and
// where the callbacks cannot subscribe (another tool holds CUPTI) ranges are named by their place in a run.
// Each pass attaches CUPTI before its profiler starts and detaches it once everything is torn down
// (cupti_attachment.hpp), so it may follow --profile's and --kernel-time's traces and precede them.
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>

#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <tuple>
#include <utility>

#include "cupti_attachment.hpp"
#include "kernel_counters.hpp"

namespace roofbench {
namespace {

// Ranges one pass holds, the clean's among them: a run of more kernel launches loses the rest (said in the
// error). A GPT step launches under 400 kernels; NVIDIA's samples configure tens of ranges.
constexpr std::size_t kMaxRanges = 1024;
// Runs of the work one pass may take: run replay needs one per pass (a few for the metrics collected).
constexpr int kMaxPasses = 64;

struct CuptiError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
// A failure once the counted run started (no range counted, passes left, decoding refused): another
// replay mode may still count the run, where a failure to set the profiler up would fail it as well.
struct CollectionError : CuptiError {
  using CuptiError::CuptiError;
};

void check(CUptiResult status, const char* call) {
  if (status == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(status, &text);
  std::string why = std::string(call) + ": " + (text ? text : "CUPTI error " + std::to_string(status));
  if (status == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    why += " (GPU performance counters are for administrators only on this machine: NVreg_RestrictProfilingToAdminUsers)";
  throw CuptiError(why);
}
#define ROOFBENCH_CUPTI(call) check((call), #call)

template <typename P>
P params(std::size_t size) {
  P p{};
  p.structSize = size;
  return p;
}
#define ROOFBENCH_PARAMS(type) params<type>(type##_STRUCT_SIZE)

bool is_launch(CUpti_CallbackId id) {
  return id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz ||
         id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx || id == CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz ||
         id == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel ||
         id == CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz;
}

// What the launch callbacks saw during the pass.
struct Launches {
  std::vector<std::string> kernels;  // names, in launch order
  int graphs = 0;                    // CUDA graph launches, which refuse the pass
  bool listening = true;             // false during the caches' clean, whose ranges are dropped
  int unnamed = 0;                   // the clean's kernel launches, over the passes
};

void CUPTIAPI on_launch(void* seen, CUpti_CallbackDomain, CUpti_CallbackId id, const void* data) {
  const auto* info = static_cast<const CUpti_CallbackData*>(data);
  if (info->callbackSite != CUPTI_API_ENTER) return;
  auto* launches = static_cast<Launches*>(seen);
  if (!launches->listening) {
    launches->unnamed += is_launch(id);
    return;
  }
  if (is_launch(id)) launches->kernels.push_back(info->symbolName ? info->symbolName : "");
  if (id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch || id == CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz) ++launches->graphs;
}

// The launch callbacks, subscribed for the pass: kernel names in launch order. Best effort: when another
// tool holds CUPTI's one subscriber, the ranges are named by their order.
class LaunchNames {
 public:
  LaunchNames() {
    if (cuptiSubscribe(&subscriber_, on_launch, &seen_) != CUPTI_SUCCESS) subscriber_ = nullptr;
    if (subscriber_ && cuptiEnableDomain(1, subscriber_, CUPTI_CB_DOMAIN_DRIVER_API) != CUPTI_SUCCESS) stop();
    listened_ = subscriber_ != nullptr;
  }
  ~LaunchNames() {
    if (subscriber_) cuptiUnsubscribe(subscriber_);  // an error is already the pass's answer
  }
  // The name of range `i` of the run's `ranges` (range_name, kernel_counters.hpp).
  std::string name(std::size_t i, std::size_t ranges, int passes) const { return range_name(seen_.kernels, i, ranges, passes); }
  // The ranges the clean took at the start of each pass: the launches counted while the callbacks were deaf,
  // or, where they could not subscribe, `assumed`.
  std::size_t clean_ranges(int passes, std::size_t assumed) const {
    return listened_ && passes > 0 ? static_cast<std::size_t>(seen_.unnamed / passes) : assumed;
  }
  std::size_t kernels_seen() const { return seen_.kernels.size(); }
  // Runs `clean` with the callbacks deaf: its launches are not the run's.
  void unnamed(const std::function<void()>& clean) {
    seen_.listening = false;
    try {
      clean();
    } catch (...) {
      seen_.listening = true;
      throw;
    }
    seen_.listening = true;
  }
  int graphs_seen() const { return seen_.graphs; }
  void stop() {
    if (subscriber_) ROOFBENCH_CUPTI(cuptiUnsubscribe(std::exchange(subscriber_, nullptr)));
  }

 private:
  CUpti_SubscriberHandle subscriber_ = nullptr;
  bool listened_ = false;  // whether the callbacks were subscribed (stop() ends them, not what they saw)
  Launches seen_;
};

CUcontext current_context() {
  using GetCurrent = CUresult (*)(CUcontext*);
  void* entry = nullptr;
  cudaDriverEntryPointQueryResult found{};
  if (cudaFree(nullptr) != cudaSuccess ||
      cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &entry, 12000, cudaEnableDefault, &found) != cudaSuccess || !entry)
    throw CuptiError("no CUDA context to profile");
  CUcontext ctx = nullptr;
  if (reinterpret_cast<GetCurrent>(entry)(&ctx) != CUDA_SUCCESS || !ctx) throw CuptiError("no CUDA context to profile");
  return ctx;
}

std::vector<const char*> metric_names() {
  std::vector<const char*> names;
  for (const CounterMetric& m : counter_metrics()) names.push_back(m.name);
  return names;
}

// The host side: the chip's metric definitions, the configuration image the device is programmed from,
// and the evaluation of counter data into metric values.
class HostSide {
 public:
  // CUPTI keeps the chip name and the availability image by pointer and reads them again when metrics are
  // added (a temporary image freed after initialisation crashed cuptiProfilerHostConfigAddMetrics): the host
  // side owns both for its lifetime.
  HostSide(std::string chip, std::vector<std::uint8_t> availability)
      : chip_(std::move(chip)), availability_(std::move(availability)) {
    auto p = ROOFBENCH_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    p.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    p.pChipName = chip_.c_str();
    p.pCounterAvailabilityImage = availability_.empty() ? nullptr : availability_.data();
    ROOFBENCH_CUPTI(cuptiProfilerHostInitialize(&p));
    host_ = p.pHostObject;
  }
  ~HostSide() {
    auto p = ROOFBENCH_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
    p.pHostObject = host_;
    if (const CUptiResult status = cuptiProfilerHostDeinitialize(&p); status != CUPTI_SUCCESS)
      std::fprintf(stderr, "roofbench: cuptiProfilerHostDeinitialize: CUPTI error %d\n", static_cast<int>(status));
  }
  HostSide(const HostSide&) = delete;
  HostSide& operator=(const HostSide&) = delete;
  CUpti_Profiler_Host_Object* get() const { return host_; }

  std::vector<std::uint8_t> config(std::vector<const char*>& names) const {
    auto add = ROOFBENCH_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host_, add.ppMetricNames = names.data(), add.numMetrics = names.size();
    ROOFBENCH_CUPTI(cuptiProfilerHostConfigAddMetrics(&add));
    auto size = ROOFBENCH_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host_;
    ROOFBENCH_CUPTI(cuptiProfilerHostGetConfigImageSize(&size));
    std::vector<std::uint8_t> image(size.configImageSize);
    auto get = ROOFBENCH_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    get.pHostObject = host_, get.configImageSize = image.size(), get.pConfigImage = image.data();
    ROOFBENCH_CUPTI(cuptiProfilerHostGetConfigImage(&get));
    return image;
  }

  std::vector<double> evaluate(const std::vector<std::uint8_t>& data, std::size_t range, std::vector<const char*>& names) const {
    std::vector<double> values(names.size());
    auto p = ROOFBENCH_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    p.pHostObject = host_, p.pCounterDataImage = data.data(), p.counterDataImageSize = data.size();
    p.rangeIndex = range, p.ppMetricNames = names.data(), p.numMetrics = names.size(), p.pMetricValues = values.data();
    ROOFBENCH_CUPTI(cuptiProfilerHostEvaluateToGpuValues(&p));
    return values;
  }

 private:
  std::string chip_;
  std::vector<std::uint8_t> availability_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
};

std::string chip_name() {
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) throw CuptiError("no CUDA device");
  auto p = ROOFBENCH_PARAMS(CUpti_Device_GetChipName_Params);
  p.deviceIndex = static_cast<std::size_t>(device);
  ROOFBENCH_CUPTI(cuptiDeviceGetChipName(&p));
  return p.pChipName;
}

std::vector<std::uint8_t> counter_availability(CUcontext ctx) {
  auto p = ROOFBENCH_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
  p.ctx = ctx;
  ROOFBENCH_CUPTI(cuptiProfilerGetCounterAvailability(&p));
  std::vector<std::uint8_t> image(p.counterAvailabilityImageSize);
  p.pCounterAvailabilityImage = image.data();
  ROOFBENCH_CUPTI(cuptiProfilerGetCounterAvailability(&p));
  return image;
}

// The Range Profiler on one context, enabled for the pass and disabled (with the profiler itself) after.
class RangeProfiler {
 public:
  RangeProfiler() {
    auto init = ROOFBENCH_PARAMS(CUpti_Profiler_Initialize_Params);
    ROOFBENCH_CUPTI(cuptiProfilerInitialize(&init));
    initialized_ = true;
  }
  // Where the pass failed: torn down all the same, its statuses left out (the failure is its answer).
  ~RangeProfiler() {
    auto p = ROOFBENCH_PARAMS(CUpti_RangeProfiler_Disable_Params);
    p.pRangeProfilerObject = object_;
    if (object_) cuptiRangeProfilerDisable(&p);
    if (initialized_) deinitialize();
  }
  RangeProfiler(const RangeProfiler&) = delete;
  RangeProfiler& operator=(const RangeProfiler&) = delete;

  // After the counter availability is read (which an enabled profiler would refuse).
  void enable(CUcontext ctx) {
    auto p = ROOFBENCH_PARAMS(CUpti_RangeProfiler_Enable_Params);
    p.ctx = ctx;
    ROOFBENCH_CUPTI(cuptiRangeProfilerEnable(&p));
    object_ = p.pRangeProfilerObject;
  }
  // Disabled and the profiler deinitialised, checked, before CUPTI is detached (CuptiAttachment): only
  // deinitialised, the profiler still taxed every launch after it.
  void close() {
    auto p = ROOFBENCH_PARAMS(CUpti_RangeProfiler_Disable_Params);
    p.pRangeProfilerObject = std::exchange(object_, nullptr);
    ROOFBENCH_CUPTI(cuptiRangeProfilerDisable(&p));
    initialized_ = false;
    ROOFBENCH_CUPTI(deinitialize());
  }

  // A counter data image for up to kMaxRanges ranges of `names`, set up with `config`. CUPTI keeps both
  // images by pointer and reads the configuration again at every launch: the profiler owns them.
  void configure(std::vector<const char*>& names, std::vector<std::uint8_t> config, CounterReplay replay) {
    config_ = std::move(config);
    auto size = ROOFBENCH_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
    size.pRangeProfilerObject = object_, size.pMetricNames = names.data(), size.numMetrics = names.size();
    size.maxNumOfRanges = kMaxRanges, size.maxNumRangeTreeNodes = kMaxRanges;
    ROOFBENCH_CUPTI(cuptiRangeProfilerGetCounterDataSize(&size));
    data_.assign(size.counterDataSize, 0);
    auto init = ROOFBENCH_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
    init.pRangeProfilerObject = object_, init.counterDataSize = data_.size(), init.pCounterData = data_.data();
    ROOFBENCH_CUPTI(cuptiRangeProfilerCounterDataImageInitialize(&init));
    auto set = ROOFBENCH_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
    set.pRangeProfilerObject = object_, set.configSize = config_.size(), set.pConfig = config_.data();
    set.counterDataImageSize = data_.size(), set.pCounterDataImage = data_.data();
    set.range = CUPTI_AutoRange, set.maxRangesPerPass = kMaxRanges;
    set.replayMode = replay == CounterReplay::run ? CUPTI_UserReplay : CUPTI_KernelReplay;
    set.numNestingLevels = 1, set.minNestingLevel = 1, set.passIndex = 0, set.targetNestingLevel = 1;
    ROOFBENCH_CUPTI(cuptiRangeProfilerSetConfig(&set));
  }

  // Runs `clean` then `work` between start and stop until every pass is submitted: once under kernel replay
  // (which replays each kernel itself), once per pass under run replay. Returns how many times `work` ran.
  int collect(const std::function<void()>& work, const std::function<void()>& clean) {
    for (int runs = 1; runs <= kMaxPasses; ++runs) {
      auto start = ROOFBENCH_PARAMS(CUpti_RangeProfiler_Start_Params);
      start.pRangeProfilerObject = object_;
      ROOFBENCH_CUPTI(cuptiRangeProfilerStart(&start));
      if (clean) clean();
      work();
      auto stop = ROOFBENCH_PARAMS(CUpti_RangeProfiler_Stop_Params);
      stop.pRangeProfilerObject = object_;
      ROOFBENCH_CUPTI(cuptiRangeProfilerStop(&stop));
      if (stop.isAllPassSubmitted) return runs;
    }
    throw CuptiError("cuptiRangeProfilerStop: passes were still left after " + std::to_string(kMaxPasses) + " runs");
  }

  // The counter data decoded, and how many ranges it dropped.
  std::pair<std::vector<std::uint8_t>, std::size_t> decode() {
    auto decode = ROOFBENCH_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
    decode.pRangeProfilerObject = object_;
    ROOFBENCH_CUPTI(cuptiRangeProfilerDecodeData(&decode));
    return {data_, decode.numOfRangeDropped};
  }

 private:
  static CUptiResult deinitialize() {
    auto p = ROOFBENCH_PARAMS(CUpti_Profiler_DeInitialize_Params);
    return cuptiProfilerDeInitialize(&p);
  }
  CUpti_RangeProfiler_Object* object_ = nullptr;
  bool initialized_ = false;
  std::vector<std::uint8_t> config_;
  std::vector<std::uint8_t> data_;
};

std::size_t range_count(const std::vector<std::uint8_t>& data) {
  auto p = ROOFBENCH_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
  p.pCounterDataImage = data.data(), p.counterDataImageSize = data.size();
  ROOFBENCH_CUPTI(cuptiRangeProfilerGetCounterDataInfo(&p));
  return p.numTotalRanges;
}

// `device` current for the pass (the profiler and the chip are the current context's), the previous one
// current again after it.
class CurrentDevice {
 public:
  explicit CurrentDevice(int device) {
    if (device < 0) return;
    if (cudaGetDevice(&previous_) != cudaSuccess || cudaSetDevice(device) != cudaSuccess)
      throw CuptiError("cannot make cuda:" + std::to_string(device) + " current");
  }
  ~CurrentDevice() {
    if (previous_ >= 0) (void)cudaSetDevice(previous_);  // a destructor must not throw
  }
  CurrentDevice(const CurrentDevice&) = delete;
  CurrentDevice& operator=(const CurrentDevice&) = delete;

 private:
  int previous_ = -1;
};

// What a pass is asked for: the work (one run of the case), how to replay it, and the clean before it.
struct PassRequest {
  const std::function<void()>& work;
  CounterReplay replay;                // kernel or run
  const std::function<void()>& clean;  // one kernel launch, or empty
};

// Ranges counted and how many times the work ran for them.
struct Counted {
  std::vector<CounterRange> ranges;
  int passes = 0;
};

// The ranges of the counted run: its launches, named, with their metric values, evaluated (as NVIDIA's
// sample does) before the profiler is disabled. The first `clean_ranges` ranges (the clean's) are not the run's.
std::vector<CounterRange> evaluated_ranges(const HostSide& host, const std::vector<std::uint8_t>& data,
                                           const LaunchNames& launches, std::size_t clean_ranges, int passes,
                                           std::vector<const char*>& names) {
  const std::size_t count = range_count(data);
  std::vector<CounterRange> ranges;
  for (std::size_t i = clean_ranges; i < count; ++i)
    ranges.push_back({launches.name(i - clean_ranges, count - clean_ranges, passes), host.evaluate(data, i, names)});
  return ranges;
}

// Why a run that launched CUDA graphs is not counted: the range profiler counts some of a graph's kernels at
// most (kernel replay counted one of a two-kernel graph's on an H200; run replay fails in its Stop).
std::string graph_refusal(int graph_launches) {
  return "the counted run launched CUDA graphs (" + std::to_string(graph_launches) + " launches over the passes), "
         "whose kernels CUPTI's range profiler does not count: the host enqueues a case's run for the pass, and a "
         "case that replays a graph of its own enqueues its kernels when Context::counting_kernels() says so";
}

// CUPTI attached for one pass and detached after it (cupti_attachment.hpp): detach() once the pass has torn
// down all it set up, checked; where the pass failed, detached all the same, its status left out (the
// failure is the pass's answer).
class CuptiAttachment {
 public:
  explicit CuptiAttachment(CUcontext ctx) { ROOFBENCH_CUPTI(attach_cupti(ctx)); }
  ~CuptiAttachment() {
    if (attached_) (void)detach_cupti();
  }
  CuptiAttachment(const CuptiAttachment&) = delete;
  CuptiAttachment& operator=(const CuptiAttachment&) = delete;
  void detach() {
    attached_ = false;
    ROOFBENCH_CUPTI(detach_cupti());
  }

 private:
  bool attached_ = true;
};

// The counted run on `ctx`, CUPTI attached; the profiler, its host side and the launch callbacks torn down
// before this returns, whatever happens. A failure once the run started is a CollectionError.
Counted count_attached(const PassRequest& request, CUcontext ctx) {
  std::vector<const char*> names = metric_names();
  RangeProfiler profiler;
  const HostSide host(chip_name(), counter_availability(ctx));
  profiler.enable(ctx);
  profiler.configure(names, host.config(names), request.replay);
  LaunchNames launches;
  Counted counted;
  std::size_t dropped = 0;
  try {
    // The clean runs inside each pass, after the profiler's start: what runs between a clean and the run
    // (the start among it) may leave dirty lines that the run's kernels would be counted writing back.
    const std::function<void()> clean = [&] {
      if (request.clean) launches.unnamed(request.clean);
    };
    counted.passes = profiler.collect(request.work, clean);
    const std::size_t clean_ranges = request.clean ? launches.clean_ranges(counted.passes, 1) : 0;
    launches.stop();
    std::vector<std::uint8_t> data;
    std::tie(data, dropped) = profiler.decode();
    counted.ranges = evaluated_ranges(host, data, launches, clean_ranges, counted.passes, names);
    profiler.close();
  } catch (const CuptiError& e) {
    if (launches.graphs_seen() > 0) throw CuptiError(graph_refusal(launches.graphs_seen()) + " (" + e.what() + ")");
    throw CollectionError(e.what());
  }
  if (launches.graphs_seen() > 0) throw CuptiError(graph_refusal(launches.graphs_seen()));
  if (dropped > 0)
    throw CuptiError("the counted run launched more kernels than the " + std::to_string(kMaxRanges) + " ranges of a pass, "
                     "the clean's included");
  if (counted.ranges.empty())
    throw CollectionError("no kernel ran in the counted run: CUPTI's callbacks saw " + std::to_string(launches.kernels_seen()) +
                          " kernel and " + std::to_string(launches.graphs_seen()) + " graph launches in " +
                          std::to_string(counted.passes) + " pass(es), and " + to_string(request.replay) +
                          " replay counted none (copies by the copy engines, cudaMemcpy, are not counted)");
  return counted;
}

// The counted run on the current context, with CUPTI attached for it and detached after it.
Counted count_run(const PassRequest& request) {
  const CUcontext ctx = current_context();
  CuptiAttachment cupti(ctx);
  Counted counted = count_attached(request, ctx);
  cupti.detach();
  return counted;
}

// One call of the work counted, per kernel.
CounterProfile collect_or_throw(const PassRequest& request, int device) {
  const CurrentDevice current(device);
  const Counted counted = count_run(request);
  CounterProfile profile = sum_ranges(counted.ranges);
  profile.replay = to_string(request.replay);
  profile.replay_runs = counted.passes;
  return profile;
}

// The profile of a pass that threw `e`: the profiler's own failure, or the run's.
CounterProfile failed(const std::exception& e) {
  CounterProfile p;
  p.error = dynamic_cast<const CuptiError*>(&e) ? e.what() : std::string("the counted run failed: ") + e.what();
  return p;
}

// The request's pass, every failure an error of the profile.
CounterProfile collect_with(const PassRequest& request, int device) {
  try {
    return collect_or_throw(request, device);
  } catch (const std::exception& e) {
    return failed(e);
  }
}

}  // namespace

CounterProfile collect_counters(const std::function<void()>& run_and_wait, int device, CounterReplay replay,
                                const std::function<void()>& clean) {
  if (replay != CounterReplay::automatic) return collect_with({run_and_wait, replay, clean}, device);
  std::string run_failure;
  try {
    return collect_or_throw({run_and_wait, CounterReplay::run, clean}, device);
  } catch (const CollectionError& e) {
    run_failure = e.what();
  } catch (const std::exception& e) {
    return failed(e);
  }
  CounterProfile p = collect_with({run_and_wait, CounterReplay::kernel, clean}, device);
  if (!p.error.empty()) p.error = "run replay: " + run_failure + "; kernel replay: " + p.error;
  else p.run_replay_failure = run_failure;
  return p;
}

std::vector<std::string> unknown_counter_metrics(const std::string& chip) {
  std::vector<std::string> unknown;
  try {
    const HostSide host(chip, {});
    for (const CounterMetric& m : counter_metrics()) {
      auto p = ROOFBENCH_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
      p.pHostObject = host.get(), p.pMetricName = m.name;
      if (const CUptiResult status = cuptiProfilerHostGetMetricProperties(&p); status != CUPTI_SUCCESS) {
        const char* text = nullptr;
        cuptiGetResultString(status, &text);
        unknown.push_back(std::string(m.name) + ": " + (text ? text : "unknown"));
      }
    }
  } catch (const CuptiError& e) {
    unknown.push_back(e.what());
  }
  return unknown;
}

}  // namespace roofbench
