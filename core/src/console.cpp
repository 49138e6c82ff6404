#include "console.hpp"

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include "statistics.hpp"

namespace roofbench {

namespace {

std::string printf_string(const char* format, ...) __attribute__((format(printf, 1, 2)));
std::string printf_string(const char* format, ...) {
  char buffer[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  return buffer;
}

// Decimals that leave 3 (or 4) significant digits in a value in [1, 1000).
int decimals_for(double v, int significant) {
  const double a = std::fabs(v);
  if (a >= 100) return significant - 3;
  if (a >= 10) return significant - 2;
  return significant - 1;
}

// `value` scaled by the largest of `steps` (descending) it reaches, rounded to `significant` digits
// without showing 1000 of one step where the next one up applies.
struct Scaled {
  double value;
  std::size_t step;
};
Scaled scale_down(double value, const std::vector<double>& steps, int significant) {
  std::size_t i = steps.size() - 1;
  for (std::size_t k = 0; k < steps.size(); ++k)
    if (std::fabs(value) >= steps[k]) {
      i = k;
      break;
    }
  double v = value / steps[i];
  const double rounding = std::pow(10.0, decimals_for(v, significant));
  // (steps[i - 1] / steps[i] is 1000 give or take a rounding error of its own)
  if (i > 0 && std::round(std::fabs(v) * rounding) / rounding >= steps[i - 1] / steps[i] * (1 - 1e-9)) v = value / steps[--i];
  return {v, i};
}

std::string percent_text(double pct) {
  if (!std::isfinite(pct)) return "-";
  const double a = std::fabs(pct);
  return printf_string(a >= 100 ? "%.0f%%" : a >= 1 || a == 0 ? "%.1f%%" : "%.2f%%", pct);
}

const Summary* find(const std::vector<Summary>& summaries, std::string_view name) {
  for (const auto& s : summaries)
    if (s.name == name) return &s;
  return nullptr;
}

// "plugin/case" of "plugin/case/axis:value/..."
std::string case_of(const std::string& benchmark) {
  const auto first = benchmark.find('/');
  return first == std::string::npos ? benchmark : benchmark.substr(0, benchmark.find('/', first + 1));
}

std::string plural(int count, const char* one, const char* many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.append(width - text.size(), ' ');
  return text;
}

std::string cuda_version_text(int version) { return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10); }

}  // namespace

std::string format_seconds(double seconds) {
  if (!std::isfinite(seconds)) return "-";
  if (seconds == 0) return "0 s";
  static const std::vector<double> steps = {1, 1e-3, 1e-6, 1e-9};
  static const char* units[] = {"s", "ms", "us", "ns"};
  const Scaled s = scale_down(seconds, steps, 4);
  return printf_string("%.*f %s", std::max(0, decimals_for(s.value, 4)), s.value, units[s.step]);
}

std::string format_rate(double value, const std::string& unit) {
  if (!std::isfinite(value)) return "-";
  static const std::vector<double> steps = {1e18, 1e15, 1e12, 1e9, 1e6, 1e3, 1};
  static const char* prefixes[] = {"E", "P", "T", "G", "M", "k", ""};
  // "elements/s" is a word: "6.20 M elements/s"; "B/s" is a symbol: "4.11 TB/s"; "1/s" is a bare rate.
  const bool word = !unit.empty() && std::islower(static_cast<unsigned char>(unit[0]));
  const std::string shown_unit = unit == "1/s" ? "/s" : unit;
  if (std::fabs(value) < 1) return printf_string("%.3g %s", value, shown_unit.c_str());
  const Scaled s = scale_down(value, steps, 3);
  const std::string prefix = prefixes[s.step];
  const std::string number = printf_string("%.*f", std::max(0, decimals_for(s.value, 3)), s.value);
  if (word) return number + " " + (prefix.empty() ? "" : prefix + " ") + shown_unit;
  return number + " " + prefix + shown_unit;
}

std::string format_bytes(double bytes) {
  if (!std::isfinite(bytes)) return "-";
  if (std::fabs(bytes) < 1024) return printf_string("%.0f B", bytes);
  static const std::vector<double> steps = {1125899906842624.0, 1099511627776.0, 1073741824.0, 1048576.0, 1024.0};
  static const char* units[] = {"PiB", "TiB", "GiB", "MiB", "KiB"};
  const Scaled s = scale_down(bytes, steps, 3);
  return printf_string("%.*f %s", std::max(0, decimals_for(s.value, 3)), s.value, units[s.step]);
}

std::string format_joules(double joules) {
  if (!std::isfinite(joules)) return "-";
  static const std::vector<double> steps = {1.0, 1e-3, 1e-6};
  static const char* units[] = {"J", "mJ", "uJ"};
  const Scaled s = scale_down(joules, steps, 3);
  return printf_string("%.*f %s", std::max(0, decimals_for(s.value, 3)), s.value, units[s.step]);
}

std::string format_figure(const Summary& s) {
  const double v = s.value;
  if (!std::isfinite(v)) return "-";
  switch (s.hint) {
    case Hint::duration: return format_seconds(v);
    case Hint::percentage: return percent_text(v);
    case Hint::ratio: return printf_string("%.3g", v);
    case Hint::count: return printf_string("%.0f", v);
    case Hint::bytes: return format_bytes(v);
    case Hint::frequency: return printf_string("%.0f MHz", v);
    case Hint::energy: return format_joules(v);
    case Hint::rate: return format_rate(v, s.unit);
    case Hint::intensity:
    case Hint::power:
    case Hint::plain: break;
  }
  return printf_string("%.4g", v) + (s.unit.empty() ? "" : " " + s.unit);
}

std::string shorten(const std::string& text, std::size_t width) {
  std::string line;
  for (char c : text.substr(0, text.find('\n'))) {
    const bool space = std::isspace(static_cast<unsigned char>(c));
    if (space && (line.empty() || line.back() == ' ')) continue;
    line += space ? ' ' : c;
  }
  while (!line.empty() && line.back() == ' ') line.pop_back();
  const bool more_lines = text.find('\n') != std::string::npos && text.find_first_not_of(" \t\r\n", text.find('\n')) != std::string::npos;
  if (line.size() <= width && !more_lines) return line;
  std::size_t cut = std::min(line.size(), width < 3 ? 0 : width - 3);
  // Never cut a UTF-8 character in two.
  while (cut > 0 && cut < line.size() && (static_cast<unsigned char>(line[cut]) & 0xC0) == 0x80) --cut;
  return line.substr(0, cut) + "...";
}

std::string kernel_label(const std::string& demangled) {
  std::string name = demangled;
  for (const std::string anonymous : {"(anonymous namespace)", "<unnamed>"})
    for (std::size_t at; (at = name.find(anonymous)) != std::string::npos;) name.replace(at, anonymous.size(), "anonymous");
  // Outside the template arguments: where the parameters start, the last "::" and, in a signature (one with
  // parameters), the space after its return type. A name without parameters ("kernel 3") keeps its spaces.
  int depth = 0;
  std::size_t after_scope = 0, after_space = 0, end = name.size();
  for (std::size_t i = 0; i < name.size() && end == name.size(); ++i) {
    const char c = name[i];
    depth += (c == '<') - (c == '>');
    if (depth != 0) continue;
    if (c == '(' && i > 0) end = i;
    else if (c == ' ') after_space = i + 1;
    else if (c == ':' && i + 1 < name.size() && name[i + 1] == ':') after_scope = i + 2;
  }
  const std::size_t start = end < name.size() ? std::max(after_scope, after_space) : after_scope;
  const std::string label = name.substr(start, end - start);
  return label.empty() ? demangled : label;
}

namespace {

// Where a word wider than `room` breaks: after its last '/' or ',' that leaves the piece within `room`,
// else at `room` itself (never inside a UTF-8 character).
std::size_t break_point(const std::string& word, std::size_t room) {
  const std::size_t separator = word.find_last_of("/,", room - 1);
  if (separator != std::string::npos && separator > 0) return separator + 1;
  std::size_t cut = room;
  while (cut > 1 && (static_cast<unsigned char>(word[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

}  // namespace

std::string wrap_text(const std::string& text, std::size_t width, const std::string& first_indent,
                      const std::string& rest_indent) {
  std::string out = first_indent;
  std::size_t line_length = first_indent.size();
  bool empty_line = true;
  auto new_line = [&] {
    out += "\n" + rest_indent;
    line_length = rest_indent.size();
    empty_line = true;
  };
  // Words keep the spaces between them where they stay on one line (two before a column, say).
  const char* const blanks = " \t\r\n";
  for (std::size_t at = 0, start; (start = text.find_first_not_of(blanks, at)) != std::string::npos;) {
    const std::size_t end = std::min(text.find_first_of(blanks, start), text.size());
    std::string gap = text.substr(at, start - at), word = text.substr(start, end - start);
    if (gap.empty() || gap.find_first_not_of(' ') != std::string::npos) gap = " ";
    at = end;
    if (!empty_line && line_length + gap.size() + word.size() > width) new_line();
    while (line_length + word.size() > width && line_length + 1 < width) {  // wider than a whole line
      const std::size_t cut = break_point(word, width - line_length);
      out += word.substr(0, cut);
      word.erase(0, cut);
      new_line();
    }
    if (!empty_line) out += gap, line_length += gap.size();
    out += word;
    line_length += word.size();
    empty_line = false;
  }
  return out;
}

std::string explain_no_gpu(const GpuAbsence& f) {
  if (!f.driver_library_loads) {
    std::string s = "no NVIDIA driver is installed (libcuda.so.1 cannot be loaded";
    if (!f.driver_library_error.empty() && f.driver_library_error.find("cannot open shared object file") == std::string::npos)
      s += ": " + f.driver_library_error;
    return s + (f.device_nodes ? ")" : "; no /dev/nvidia* device)");
  }
  if (!f.device_nodes)
    return "the NVIDIA driver's library is installed but there is no /dev/nvidia* device (its kernel module is not "
           "loaded, or this container was started without GPUs)";
  if (f.runtime_says_driver_too_old) {
    const std::string built = "this roofbench was built with CUDA " + cuda_version_text(f.runtime_cuda_version);
    if (f.driver_cuda_version > 0)
      return "the NVIDIA driver is too old: it supports CUDA " + cuda_version_text(f.driver_cuda_version) + ", " + built +
             " (update the driver)";
    return "the NVIDIA driver does not work with this CUDA runtime: " + built + " (" + f.runtime_error + ")";
  }
  if (f.runtime_says_no_device) {
    if (f.cuda_visible_devices) return "no CUDA device found with CUDA_VISIBLE_DEVICES=\"" + *f.cuda_visible_devices + "\"";
    return "no CUDA device found" +
           (f.driver_cuda_version > 0 ? " (the NVIDIA driver for CUDA " + cuda_version_text(f.driver_cuda_version) + " sees none)"
                                      : std::string());
  }
  return "CUDA cannot be used: " + f.runtime_error;
}

std::string debug_library_note() {
  return "Google Benchmark's library is a debug build (\"Library was built as DEBUG\"): roofbench's timings are "
         "not affected (device events and the host's own clocks, not Google Benchmark's loop)";
}

// ---- the table ----

namespace {

constexpr int kTimeWidth = 10, kRateWidth = 20, kRoofWidth = 7, kBoundWidth = 8, kGateWidth = 5, kNoiseWidth = 7;
// The columns right of the name: "  time rate roof  bound gate noise".
constexpr std::size_t kFiguresWidth =
    2 + kTimeWidth + 1 + kRateWidth + 1 + kRoofWidth + 2 + kBoundWidth + 1 + kGateWidth + 1 + kNoiseWidth;
constexpr std::size_t kNarrowestNameColumn = 9;  // "benchmark"
// What a row's text after the name column is indented by when it goes on a line of its own.
const std::string kContinuation = "    ";

std::string name_column(const std::string& name, const TableSettings& t) { return pad(name, t.name_width); }

// A name wider than its column on line(s) of its own, broken after a '/' where it is wider than a line.
std::string name_lines(const std::string& name) { return wrap_text(name, kConsoleWidth, "", kContinuation); }

// `label` in the name column, then `rest`; a label wider than the column goes on its own line(s) above
// an empty name column, so that the figures stay under their headings.
std::string labelled_row(const std::string& label, const std::string& rest, const TableSettings& t) {
  if (label.size() <= t.name_width) return name_column(label, t) + rest;
  return name_lines(label) + "\n" + name_column("", t) + rest;
}

// `row` with "  notes" on its last line where they fit in a line, else wrapped on lines of their own.
std::string with_notes(std::string row, const std::string& notes) {
  if (notes.empty()) return row;
  const std::size_t last_line = row.rfind('\n') == std::string::npos ? 0 : row.rfind('\n') + 1;
  if (row.size() - last_line + 2 + notes.size() <= kConsoleWidth) return row + "  " + notes;
  return row + "\n" + wrap_text(notes, kConsoleWidth, kContinuation, kContinuation);
}

std::string what_happened(const Session::Outcome& out) {
  if (!out.ran) return "not run";
  switch (out.result.status) {
    case Status::gate_failed: return "FAIL (gate)";
    case Status::crashed: return "FAIL (crashed)";
    case Status::timed_out: return "FAIL (timed out)";
    case Status::implausible: return "FAIL (implausible)";
    case Status::out_of_memory: return out.counts_as_failure ? "FAIL (out of memory)" : "out of memory, ends its sweep";
    default: return "FAIL (error)";
  }
}

std::string notes_of(const Result& r) {
  std::string notes;
  auto add = [&](const std::string& n) { notes += (notes.empty() ? "" : ", ") + n; };
  if (r.graph) add("graph");
  if (r.cold) add(r.cold_copies > 0 ? "cold over " + std::to_string(r.cold_copies) + " copies" : "cold");
  if (r.cache_resident) add("data in cache");
  if (r.memory.leaked > 0) add("leaked " + format_bytes(r.memory.leaked));
  if (r.noisy()) add("NOISY");  // why: in the summary and the results
  if (const double joules = r.figure(fig::energy_per_run); std::isfinite(joules))
    add(format_joules(joules) + "/run at " + printf_string("%.0f W", r.figure(fig::power)));
  else if (!r.energy_note.empty()) add("no energy: " + shorten(r.energy_note, 60));
  return notes;
}

}  // namespace

std::string table_header(const TableSettings& t) {
  return name_column("benchmark", t) + printf_string("  %*s %*s %*s  %-*s %-*s %*s", kTimeWidth, "time", kRateWidth, "rate",
                                                     kRoofWidth, "roof", kBoundWidth, "bound", kGateWidth, "gate",
                                                     kNoiseWidth, "noise");
}

std::size_t name_column_width(std::size_t longest_name) {
  return std::clamp(longest_name, kNarrowestNameColumn, kConsoleWidth - kFiguresWidth);
}

std::string table_row(const std::string& label, const Session::Outcome& out, const TableSettings& t) {
  if (!out.ran || !out.result.passed()) {
    const std::string word = what_happened(out);
    // The word says the status; the message is what follows its words (message_prefix).
    const std::string& why = out.ran ? out.result.message : out.not_run_reason;
    const std::size_t used = t.name_width + 2 + word.size() + 2;
    const std::string shown = shorten(why, used + 30 > kConsoleWidth ? 30 : kConsoleWidth - used);
    return labelled_row(label, "  " + word + (shown.empty() ? "" : ": " + shown), t);
  }
  const Result& r = out.result;
  const std::vector<Summary> summaries = summaries_of(r);
  auto figure = [&](const Summary* s) { return s ? format_figure(*s) : std::string("-"); };
  const Summary* noise = find(summaries, fig::noise);
  const std::string figures =
      printf_string("  %*s %*s %*s  %-*s %-*s %*s", kTimeWidth, figure(find(summaries, fig::time_median)).c_str(), kRateWidth,
                    figure(headline_rate(summaries, r)).c_str(), kRoofWidth, figure(find(summaries, fig::roof_pct)).c_str(),
                    kBoundWidth, to_string(r.bound), kGateWidth, r.gate_word(t.gate_enabled).c_str(), kNoiseWidth,
                    noise ? percent_text(100 * noise->value).c_str() : "-");
  return with_notes(labelled_row(label, figures, t), notes_of(r));
}

std::string repetitions_row(const std::string& label, const std::vector<Result>& passed, int repetitions,
                            const TableSettings& t) {
  std::vector<double> medians;
  for (const auto& r : passed) {
    const std::vector<Summary> summaries = summaries_of(r);
    if (const Summary* m = find(summaries, fig::time_median)) medians.push_back(m->value);
  }
  if (medians.empty()) return labelled_row(label, "  no repetition passed", t);
  const double median = quantile(medians, 0.5);
  const auto [low, high] = std::minmax_element(medians.begin(), medians.end());
  const std::string over = "median of " + std::to_string(medians.size()) +
                           (static_cast<int>(medians.size()) == repetitions ? "" : " passing of " + std::to_string(repetitions)) +
                           " repetitions, " + format_seconds(*low) + " to " + format_seconds(*high) + " (spread " +
                           percent_text(100 * (*high - *low) / median) + ")";
  return with_notes(labelled_row(label, printf_string("  %*s", kTimeWidth, format_seconds(median).c_str()), t), over);
}

// The device's idle time between launches in the traced runs, where they ran as the timed ones did: a run traced
// over 10% longer than the timed median had its launches slowed by the tracing (a host-launched sequence), and
// its gaps are the tracer's, not the case's.
static std::string idle_text(const Result& r) {
  const double span = r.profile.span_seconds_per_run, timed = r.figure(fig::time_median);
  if (!(span > 0)) return "";
  if (span > 1.1 * timed)
    return printf_string("  idle between launches: not shown: the traced run spanned %.1f us against the timed %.1f us "
                         "(tracing slowed its launches)\n", span * 1e6, timed * 1e6);
  return printf_string("  idle between launches: %.1f us of the %.1f us from the first start to the last end\n",
                       r.profile.idle_seconds_per_run * 1e6, span * 1e6);
}

std::string profile_text(const std::string& name, const Result& r) {
  if (!r.profile.error.empty()) return wrap_text("profile of " + name + ": " + r.profile.error, kConsoleWidth, "  ", kContinuation) + "\n";
  std::string s = printf_string("  profile: %.1f us of kernels per run (run median %.1f us)\n",
                                r.profile.kernel_seconds_per_run * 1e6, r.figure(fig::time_median) * 1e6);
  s += idle_text(r);
  std::size_t shown = 0;
  for (const auto& k : r.profile.kernels) {
    if (++shown > 15) break;
    const std::string figures = printf_string("  %6.1f%%  %9.1f us  %6.1f launches  ", 100 * k.seconds_per_run / r.profile.kernel_seconds_per_run,
                                              k.seconds_per_run * 1e6, k.launches_per_run);
    s += figures + shorten(kernel_label(k.name), kConsoleWidth - figures.size()) + "\n";
  }
  return s;
}

std::string kernel_time_text(const std::string& name, const Result& r) {
  if (!r.passed()) return "";
  const KernelTimeFigures& k = r.kernel_time;
  const double event = r.figure(fig::time_median);
  if (!k.error.empty()) return wrap_text("no kernel_time for " + name + ": " + k.error, kConsoleWidth, "  ", kContinuation) + "\n";
  std::string s;
  if (k.measured()) {
    const double gap = event_minus_kernel(event, k);
    s = "kernel_time " + format_seconds(k.seconds) + " (CUPTI, " + std::to_string(k.samples) + " samples); events " +
        format_seconds(event) + ", " + format_seconds(std::fabs(gap)) + " (" +
        percent_text(100 * std::fabs(event_minus_kernel_fraction(event, k))) + (gap < 0 ? ") less" : ") more");
  }
  const bool gpu = r.device.rfind("cuda", 0) == 0;
  if (gpu && launch_cost_noted(event, k))
    s += k.measured() ? ": launch cost included (over " + percent_text(100 * kLaunchCostNoteFraction) + ")"
                      : "note: at " + format_seconds(event) + " a run the event time includes launch cost (under " +
                            format_seconds(kLaunchCostNoteSeconds) + "): --kernel-time times the kernels";
  if (gpu && tracing_cost_noted(event, k))
    s += ": CUPTI's tracing lengthens the kernels it records (the events, which enclose them, read over " +
         percent_text(100 * kLaunchCostNoteFraction) + " less)";
  return s.empty() ? s : wrap_text(s, kConsoleWidth, "  ", kContinuation) + "\n";
}

// The run's counted totals against the model, as one line.
static std::string counter_totals(const Result& r) {
  const KernelCounters& t = r.counters.total;
  const CounterProfile& c = r.counters;
  const std::string runs = c.replay_runs > 1 ? ", " + std::to_string(c.replay_runs) + " runs" : "";
  const std::string how = c.replay.empty() ? "" : " (" + c.replay + " replay" + runs + ")";
  std::string s = "  counters" + how + ": DRAM " + format_bytes(t.dram_bytes()) + " per run (read " + format_bytes(t.dram_read) +
                  ", written " + format_bytes(t.dram_write) + ")";
  if (r.work.bytes > 0) s += printf_string(", %.2fx the model", t.dram_bytes() / r.work.bytes);
  s += ", L2 " + format_bytes(t.l2_bytes) + ", " + format_rate(t.flops(), "FLOP");
  if (r.work.flops > 0) s += printf_string(" (%.2fx the model)", counter_ratio(t.flops(), r.work.flops));
  return wrap_text(s, kConsoleWidth, "", kContinuation) + "\n";
}

std::string counters_text(const std::string& name, const Result& r) {
  if (!r.counters.error.empty())
    return wrap_text("no counters for " + name + ": " + r.counters.error, kConsoleWidth, "  ", kContinuation) + "\n";
  std::string s = counter_totals(r);
  if (!r.counters.run_replay_failure.empty())
    s += wrap_text("run replay failed, so each kernel was replayed: " + r.counters.run_replay_failure, kConsoleWidth, "  ",
                   kContinuation) + "\n";
  std::string verdict = counters_verdict(r.counters.total, r.work.bytes, r.work.flops);
  if (r.bound == Bound::compute)
    if (const std::string ridge = counted_ridge_clause(r.counters.total, r.attainable_flops, r.memory_roof.bytes_per_s);
        !ridge.empty())
      verdict += (verdict.empty() ? "" : "; ") + ridge;
  if (!verdict.empty()) s += wrap_text(name + " " + verdict, kConsoleWidth, "  ", kContinuation) + "\n";
  if (r.counters.kernels.size() < 2) return s;
  std::size_t shown = 0;
  for (const auto& k : r.counters.kernels) {
    if (++shown > 15) break;
    const std::string figures = printf_string("  %10s DRAM %10s L2 %12s  %5.1f launches  ", format_bytes(k.dram_bytes()).c_str(),
                                              format_bytes(k.l2_bytes).c_str(), format_rate(k.flops(), "FLOP").c_str(), k.launches_per_run);
    s += figures + shorten(kernel_label(k.name), kConsoleWidth - std::min(figures.size(), kConsoleWidth - 10)) + "\n";
  }
  return s;
}

// ---- the summary ----

void RunTally::add(const std::string& benchmark, const Session::Outcome& out) {
  if (!out.note.empty()) notes.push_back(out.note);
  if (!out.ran) {
    if (out.counts_as_failure) ++refused;
    Reason& reason = not_run[out.not_run_reason];
    ++reason.benchmarks;
    reason.cases.insert(case_of(benchmark));
    return;
  }
  ++ran;
  const Status status = out.result.status;
  if (status == Status::ok) {
    ++passed;
    if (out.result.noisy()) noisy.emplace_back(benchmark, out.result.quality_reason);
    if (const double spread = rank_spread_percent(out.result); spread > kRanksApartPercent)
      ranks_apart.emplace_back(benchmark, printf_string("rank %.0f is the slowest, %.0f%% above the fastest",
                                                        slowest_rank_of(out.result), spread));
  }
  else if (!out.counts_as_failure) ++ended_sweep_out_of_memory;
  else if (status == Status::gate_failed) ++gate_failed;
  else if (status == Status::crashed) ++crashed;
  else if (status == Status::timed_out) ++timed_out;
  else ++errors;
}

void RunTally::add_cannot_run(const std::vector<NotRun>& cannot) {
  for (const auto& n : cannot) {
    Reason& reason = not_run[n.reason];
    ++reason.benchmarks;
    reason.cases.insert(case_of(n.benchmark));
  }
}

std::string closing_summary(const RunTally& t, const SummarySettings& s) {
  std::string out = "summary: ran ";
  if (s.repetitions > 1) out += plural(t.ran, "benchmark run", "benchmark runs") + " (" + std::to_string(s.repetitions) + " repetitions each)";
  else out += plural(t.ran, "benchmark", "benchmarks");
  out += ": " + std::to_string(t.passed) + " passed, " + std::to_string(t.failed()) + " failed";
  std::vector<std::string> kinds;
  if (t.gate_failed) kinds.push_back(std::to_string(t.gate_failed) + " gate");
  if (t.errors) kinds.push_back(plural(t.errors, "error", "errors"));
  if (t.crashed) kinds.push_back(std::to_string(t.crashed) + " crashed");
  if (t.timed_out) kinds.push_back(std::to_string(t.timed_out) + " timed out");
  for (std::size_t i = 0; i < kinds.size(); ++i) out += (i == 0 ? " (" : ", ") + kinds[i] + (i + 1 == kinds.size() ? ")" : "");
  out += "\n";
  if (!t.noisy.empty()) {
    // A noisy pass must not read as a clean one: say which, and why, for the first few.
    constexpr std::size_t kShown = 8;
    out += "  " + std::to_string(t.noisy.size()) + " of the passed " + (t.noisy.size() == 1 ? "is" : "are") +
           " NOISY: their samples do not make one number; compare them only over several runs\n";
    for (std::size_t i = 0; i < std::min(kShown, t.noisy.size()); ++i)
      out += wrap_text(t.noisy[i].first + ": " + t.noisy[i].second, kConsoleWidth, "    ", "      ") + "\n";
    if (t.noisy.size() > kShown) out += "    (" + std::to_string(t.noisy.size() - kShown) + " more in the results)\n";
  }
  if (!t.ranks_apart.empty()) {
    // The time is the slowest rank's: say where the ranks disagree, as a straggler is what a user looks for.
    out += printf_string("  %zu of the passed had ranks more than %.0f%% apart (the time is the slowest rank's):\n",
                         t.ranks_apart.size(), RunTally::kRanksApartPercent);
    constexpr std::size_t kShown = 8;
    for (std::size_t i = 0; i < std::min(kShown, t.ranks_apart.size()); ++i)
      out += wrap_text(t.ranks_apart[i].first + ": " + t.ranks_apart[i].second, kConsoleWidth, "    ", "      ") + "\n";
    if (t.ranks_apart.size() > kShown) out += "    (" + std::to_string(t.ranks_apart.size() - kShown) + " more in the results)\n";
  }
  if (t.ended_sweep_out_of_memory)
    out += "  " + std::to_string(t.ended_sweep_out_of_memory) + " ran out of memory and ended a sweep (not a failure)\n";
  if (t.refused)
    out += "  " + plural(t.refused, "benchmark was", "benchmarks were") +
           " not run because their plugin has no code for this GPU (listed below): the run fails\n";
  for (const auto& [reason, r] : t.not_run) {
    std::string why = reason;
    if (!s.why_no_gpu.empty())
      if (const auto at = why.find(s.why_no_gpu); at != std::string::npos) why.replace(at, s.why_no_gpu.size(), "no GPU (see above)");
    out += wrap_text("not run: " + plural(r.benchmarks, "benchmark", "benchmarks") + " of " +
                         plural(static_cast<int>(r.cases.size()), "case", "cases") + ": " + why,
                     kConsoleWidth, "  ", kContinuation) +
           "\n";
  }
  for (const auto& note : t.notes) out += wrap_text(note, kConsoleWidth, "  ", kContinuation) + "\n";
  if (s.plugins_not_loaded)
    out += "  " + plural(static_cast<int>(s.plugins_not_loaded), "plugin", "plugins") + " not loaded (reasons above)\n";
  if (s.results_lost) {
    out += "  results: could not be kept (see above)\n";
  } else if (s.results_path) {
    out += "  results: " + *s.results_path + " (every figure and the full messages)\n";
    if (!s.report_command.empty()) out += "  next: " + s.report_command + " " + *s.results_path + " -o report/\n";
  } else {
    out += "  results: not written (--no-results)\n";
  }
  return out;
}

// ---- the reporter ----

class TableReporter final : public benchmark::BenchmarkReporter {
 public:
  explicit TableReporter(Console& console) : console_(console) {}

  bool ReportContext(const Context& context) override {
    const benchmark::CPUInfo& cpu = context.cpu_info;
    std::string host = printf_string("host: %d CPUs at %.0f MHz", cpu.num_cpus, cpu.cycles_per_second / 1e6);
    if (!cpu.load_avg.empty()) {
      host += ", load average";
      for (double l : cpu.load_avg) host += printf_string(" %.2f", l);
    }
    if (cpu.scaling == benchmark::CPUInfo::ENABLED) host += "; CPU frequency scaling is on (CPU cases may be noisier)";
    console_.print_context(GetOutputStream(), host);
    return true;
  }

  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& run : runs) {
      const bool aggregate = run.run_type == Run::RT_Aggregate;
      const std::string& name = run.run_name.function_name;
      if (aggregate && !aggregates_shown_.insert(name).second) continue;
      console_.print_runs_of(GetOutputStream(), name, aggregate);
    }
  }

 private:
  Console& console_;
  std::set<std::string> aggregates_shown_;
};

void Console::record(const std::string& benchmark, const Session::Outcome& outcome) {
  tally_.add(benchmark, outcome);
  if (!displaying_) return;
  unprinted_[benchmark].push_back(outcome);
  if (repetitions_ > 1 && outcome.ran && outcome.result.passed()) passed_by_name_[benchmark].push_back(outcome.result);
}

std::unique_ptr<benchmark::BenchmarkReporter> Console::make_reporter(std::ostream& out) {
  displaying_ = true;
  auto reporter = std::make_unique<TableReporter>(*this);
  reporter->SetOutputStream(&out);
  return reporter;
}

void Console::print_context(std::ostream& out, const std::string& host_line) {
  for (const auto& line : preamble_) out << wrap_text(line, kConsoleWidth, "", kContinuation) << "\n";
  out << host_line << "\n";
  header_pending_ = true;
}

std::string Console::row_label(std::ostream& out, const std::string& benchmark, const std::string& suffix) {
  const std::string label = suffix.empty() ? benchmark : benchmark + " " + suffix;
  if (label.size() <= table_.name_width) {
    named_above_.clear();
    return label;
  }
  if (named_above_ != benchmark) {
    out << name_lines(benchmark) << "\n";
    named_above_ = benchmark;
  }
  return suffix.empty() ? "" : "  " + suffix;
}

void Console::print_runs_of(std::ostream& out, const std::string& benchmark, bool aggregate) {
  if (header_pending_) {
    out << table_header(table_) << "\n";
    header_pending_ = false;
  }
  auto& queue = unprinted_[benchmark];
  if (aggregate) {
    queue.clear();  // --benchmark_display_aggregates_only: the repetitions' own lines are not wanted
    const std::string label = row_label(out, benchmark, "median");
    out << repetitions_row(label, passed_by_name_[benchmark], repetitions_, table_) << "\n";
    return;
  }
  std::string suffix;
  if (repetitions_ > 1)
    suffix = "rep " + std::to_string(++repetitions_printed_[benchmark]) + "/" + std::to_string(repetitions_);
  const std::string label = row_label(out, benchmark, suffix);
  if (queue.empty()) {
    out << name_column(label, table_) << "  (no roofbench result)\n";
    return;
  }
  const Session::Outcome outcome = std::move(queue.front());
  queue.pop_front();
  out << table_row(label, outcome, table_) << "\n";
  const Result& r = outcome.result;
  if (outcome.ran && (!r.profile.kernels.empty() || !r.profile.error.empty())) out << profile_text(benchmark, r);
  if (outcome.ran) out << kernel_time_text(benchmark, r);
  if (outcome.ran && (r.counters.collected() || !r.counters.error.empty())) out << counters_text(benchmark, r);
  if (!outcome.note.empty()) out << wrap_text(outcome.note, kConsoleWidth, "  ", kContinuation) << "\n";
}

}  // namespace roofbench
