// The one list of figures a Result reports (nvbench's model: each a named, self-describing summary with
// its unit, meaning and a hint saying how to show it: summary.hpp). Google Benchmark's counters, the
// results file, the console and the CTest measurements all read it, so a figure has one name everywhere.
// The host's figures are declared in one table (kFigures in summaries.cpp): one line each, and
// docs/results-format.md's and docs/user-guide.md's figure tables are generated from it (figures_markdown,
// checked by docs.* tests).
#pragma once

#include <string>
#include <vector>

#include "measure.hpp"

namespace roofbench {

// When the host reports a figure of its table.
enum class When {
  always,
  passed,        // the result was timed (status ok)
  clocked,       // passed, on a device whose clock is read (GPU)
  clock_fitted,  // clocked, and the time-against-clock fit was made
  energy,        // passed, with an energy figure (--energy, a device with a counter)
  kernel_timed,  // passed, with a kernel_time (--kernel-time, CUPTI traced the kernels)
  gate_checked,  // the gate ran
  leaked,        // memory was left behind
  counted,         // --counters read the case's counters
  counted_bytes,   // counted, and the case models bytes
  counted_flops,   // counted, and the case models FLOPs
  counters_asked,  // --counters' pass ran (it may have found no counters)
  ranked,          // passed on every rank of a run with one process per GPU (rank_mode.hpp)
};

// One figure the host reports: its declaration is this one line.
struct HostFigure {
  const char* name;
  const char* unit;
  Hint hint;
  When when;
  unsigned written;  // the written:: bits
  const char* description;
  double (*value)(const Measurement&);
};
const std::vector<HostFigure>& host_figures();

// Names the host writes into a benchmark's entry itself (Google Benchmark's fields and roofbench's):
// a plugin's counter may not take one.
bool is_reserved_entry_name(const std::string& name);

// The Result of a Measurement: its parts, and every figure it made as a Summary, the host's first (the
// table's order), then the case's (items per second, rates, counters). The one place figures are made.
Result result_of(const Measurement& m);
// The figures of ranks in several processes (When::ranked: slowest_rank, rank_spread_pct), from
// r.rank_figures, added to a combined result (rank_mode.hpp).
void add_rank_summaries(Result& r);
// The slowest rank of r.rank_figures, and how much slower (%) it is than the fastest; NaN without ranks.
double slowest_rank_of(const ResultParts& r);
double rank_spread_percent(const ResultParts& r);

// The figures of `r` a reader shows: the timed ones only when r passed; a plugin figure whose name is
// reserved or already used is renamed "case.<name>" (then "case.<name>.2", ...), so no reader ever takes
// a plugin's value for the host's.
std::vector<Summary> summaries_of(const Result& r);

// The rate a result is compared by (the console's rate column, a sweep's throughput): the case's items
// per second when it counts items, else FLOP/s when it has FLOPs, else B/s. Null when `r` did not pass
// (its summaries have no timed figures).
const Summary* headline_rate(const std::vector<Summary>& summaries, const Result& r);

// The host's figures as a Markdown table (name, unit, when, where, meaning): the docs' figure tables.
std::string figures_markdown();

}  // namespace roofbench
