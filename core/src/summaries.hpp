// The one list of figures a Result reports (nvbench's model: each a named, self-describing summary with
// its unit and meaning). Google Benchmark's counters, the results file and the console all read it, so a
// figure has one name everywhere.
#pragma once

#include <string>
#include <vector>

#include "measure.hpp"

namespace roofbench {

struct Summary {
  std::string name;
  double value = 0;
  std::string unit;         // "s", "FLOP/s", "B/s", "B", "%", "1" (a ratio), "count", "MHz", ...
  std::string description;  // one line
  bool integer = false;     // a count: written without a fraction
  bool from_plugin = false;  // a case's counter or rate (namespaced when its name is taken)
};

// Names the host writes into a benchmark's entry itself (Google Benchmark's fields and roofbench's):
// a plugin's counter may not take one.
bool is_reserved_entry_name(const std::string& name);

// Every figure of `r`, the host's first, then the plugin's (case counters, gate counters, rates): a
// plugin figure whose name is reserved or already used is renamed "case.<name>" (then "case.<name>.2",
// ...), so no reader ever takes a plugin's value for the host's. Timed figures only when r passed.
std::vector<Summary> summaries_of(const Result& r);

}  // namespace roofbench
