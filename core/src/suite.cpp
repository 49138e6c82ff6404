#include "suite.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "energy.hpp"
#include "options.hpp"
#include "selection.hpp"
#include "text.hpp"

namespace roofbench {

namespace fs = std::filesystem;

static std::string trim(const std::string& s) {
  const auto begin = s.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r") - begin + 1);
}

static std::vector<std::string> split_list(const std::string& value) {
  std::vector<std::string> out;
  std::stringstream in(value);
  for (std::string item; std::getline(in, item, ',');)
    if (auto t = trim(item); !t.empty()) out.push_back(t);
  return out;
}

static std::string plugin_of_axis_key(const std::string& key) { return key.substr(0, key.find('/')); }

// The parts of an axis key "<plugin>/<case>.<axis>" (each of plugin and case may be "*").
struct AxisKey {
  std::string plugin, case_name, axis;
  explicit AxisKey(const std::string& key)
      : plugin(key.substr(0, key.find('/'))),
        case_name(key.substr(key.find('/') + 1, key.rfind('.') - key.find('/') - 1)),
        axis(key.substr(key.rfind('.') + 1)) {}
  bool covers(const BenchmarkSpec& b) const {
    return (plugin == "*" || plugin == b.plugin) && (case_name == "*" || case_name == b.spec->name);
  }
};

// An optional sign and 1 to 18 digits: what Params::integer reads without overflow.
static bool is_whole_number(const std::string& value) {
  const std::size_t digits = value.starts_with('-') || value.starts_with('+') ? 1 : 0;
  return value.size() > digits && value.size() - digits <= 18 &&
         value.find_first_not_of("0123456789", digits) == std::string::npos;
}

static bool all_whole_numbers(const std::vector<std::string>& values) {
  return !values.empty() && std::all_of(values.begin(), values.end(), is_whole_number);
}

void Suite::check_axes(const std::vector<BenchmarkSpec>& all) const {
  for (const auto& [key, line] : axis_lines) {
    const std::string where = path + ":" + std::to_string(line) + ": axis " + excerpt(key) + ": ";
    const AxisKey target(key);
    bool case_found = false, axis_found = false;
    for (const auto& b : all) {
      if (!target.covers(b)) continue;
      case_found = true;
      for (const Axis& axis : b.spec->axes) {
        if (axis.name != target.axis) continue;
        axis_found = true;
        if (!all_whole_numbers(axis.values)) continue;
        for (const auto& value : axes.at(key))
          if (!is_whole_number(value))
            throw SuiteError(where + "'" + excerpt(value) + "' is not a whole number, which " + b.plugin + "/" +
                             b.spec->name + "." + axis.name + " takes");
      }
    }
    if (!case_found && target.plugin != "*" && target.case_name != "*")
      throw SuiteError(where + "plugin " + target.plugin + " has no case '" + excerpt(target.case_name) + "'");
    if (!axis_found)
      throw SuiteError(where + "no axis '" + excerpt(target.axis) + "' in " +
                       (target.case_name == "*" ? "any case of " + (target.plugin == "*" ? std::string("any plugin") : target.plugin)
                                                : target.plugin + "/" + target.case_name));
  }
}

std::string Suite::combined_filter() const {
  if (filters.empty()) return ".";
  if (filters.size() == 1) return filters.front().first;
  std::string joined;
  for (const auto& filter : filters) joined += (joined.empty() ? "(" : "|(") + filter.first + ")";
  return joined;
}

// Whether `regex` has a '|' outside brackets and parentheses: several alternatives, each its own start.
static bool has_top_level_alternative(const std::string& regex) {
  int depth = 0;
  bool in_brackets = false;
  for (std::size_t i = 0; i < regex.size(); ++i) {
    const char c = regex[i];
    if (c == '\\') ++i;
    else if (in_brackets) in_brackets = c != ']';
    else if (c == '[') in_brackets = true;
    else if (c == '(') ++depth;
    else if (c == ')') --depth;
    else if (c == '|' && depth == 0) return true;
  }
  return false;
}

// The plugins a filter starts with, named literally: `^nccl/...` names nccl, `^(cpu|micro)/...` cpu and micro.
// None for any other start (a negated filter, a pattern, alternatives of which only the first is anchored).
static std::vector<std::string> leading_plugins(const std::string& regex) {
  static const std::regex one("^\\^([A-Za-z0-9_-]+)/"), several("^\\^\\(([A-Za-z0-9_-]+(\\|[A-Za-z0-9_-]+)*)\\)/");
  std::smatch m;
  if (has_top_level_alternative(regex) || !(std::regex_search(regex, m, one) || std::regex_search(regex, m, several)))
    return {};
  std::vector<std::string> plugins;
  std::stringstream in(m.str(1));
  for (std::string plugin; std::getline(in, plugin, '|');) plugins.push_back(plugin);
  return plugins;
}

void Suite::check_filters(const std::vector<BenchmarkSpec>& all) const {
  std::set<std::string> present;
  for (const BenchmarkSpec& b : all) present.insert(b.name.substr(0, b.name.find('/')));
  for (const auto& [regex, line] : filters) {
    // A suite without a plugins line may name plugins this build lacks: only lines that start with
    // plugins the build has, every one of them, are held to matching.
    const std::vector<std::string> named = leading_plugins(regex);
    const auto absent = [&](const std::string& plugin) { return !present.count(plugin); };
    if (plugins.empty() && (named.empty() || std::any_of(named.begin(), named.end(), absent))) continue;
    const NameFilter filter(regex);
    if (std::none_of(all.begin(), all.end(), [&](const BenchmarkSpec& b) { return filter.matches(b.name); }))
      throw SuiteError(path + ":" + std::to_string(line) + ": filter '" + regex +
                       "' matches no benchmark of the suite's plugins (on any device)");
  }
}

void Suite::check_plugins(const std::set<std::string>& loaded) const {
  auto require = [&](const std::string& plugin, int line) {
    if (plugin != "*" && !loaded.count(plugin))
      throw SuiteError(path + ":" + std::to_string(line) + ": unknown plugin '" + plugin + "'");
  };
  for (const auto& [plugin, line] : plugins) require(plugin, line);
  for (const auto& [key, line] : axis_lines) require(plugin_of_axis_key(key), line);
}

// The filter just added, compiled as --benchmark_filter is (same length limit, same engine). Several
// filters are ORed into one regex, where a leading '-' would be a literal: only a lone filter may negate.
static void check_filter_line(const Suite& suite, const std::string& where) {
  const std::string& filter = suite.filters.back().first;
  try {
    NameFilter compiled(filter, "filter regex");
    check_filter_length(suite.combined_filter(), "the union of the suite's filters");
  } catch (const UsageError& e) {
    throw SuiteError(where + e.what());
  }
  const auto negated = std::find_if(suite.filters.begin(), suite.filters.end(),
                                    [](const auto& f) { return f.first.starts_with('-'); });
  if (suite.filters.size() > 1 && negated != suite.filters.end())
    throw SuiteError(suite.path + ":" + std::to_string(negated->second) +
                     ": a filter starting with '-' (negated) must be the suite's only filter line; several are ORed");
}

Suite parse_suite(const std::string& path, const std::string& text) {
  Suite suite;
  suite.path = path;
  suite.name = fs::path(path).stem().string();
  std::stringstream in(text);
  int line_number = 0;
  for (std::string raw; std::getline(in, raw);) {
    ++line_number;
    const std::string where = path + ":" + std::to_string(line_number) + ": ";
    const std::string line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) throw SuiteError(where + "expected 'key = value', got '" + excerpt(line) + "'");
    const std::string key = trim(line.substr(0, eq)), value = trim(line.substr(eq + 1));
    if (key == "description") {
      suite.description = value;
    } else if (key == "plugins") {
      for (auto& p : split_list(value)) suite.plugins.emplace_back(p, line_number);
    } else if (key == "filter") {
      suite.filters.emplace_back(value, line_number);
      check_filter_line(suite, where);
    } else if (key.rfind("axis ", 0) == 0) {
      const std::string target = trim(key.substr(5));
      const auto slash = target.find('/'), dot = target.rfind('.');
      if (slash == std::string::npos || dot == std::string::npos || dot < slash)
        throw SuiteError(where + "axis key must be 'axis <plugin>/<case>.<axis>', got '" + excerpt(key) + "'");
      auto values = split_list(value);
      if (values.empty()) throw SuiteError(where + "axis '" + excerpt(target) + "' has no values");
      suite.axes[target] = std::move(values);
      suite.axis_lines.emplace_back(target, line_number);
    } else if (key == "max_time" || key == "energy") {
      std::size_t used = 0;
      double seconds = -1;
      try {
        seconds = std::stod(value, &used);
      } catch (const std::exception&) {
      }
      if (used != value.size() || !(seconds >= 0) || !std::isfinite(seconds))
        throw SuiteError(where + key + " must be a finite number of seconds, got '" + excerpt(value) + "'");
      if (key == "max_time") {
        suite.max_time = seconds;
      } else {
        if (seconds < kEnergyLeastSeconds || !std::isfinite(seconds))
          throw SuiteError(where + "energy needs at least " + std::to_string(static_cast<int>(kEnergyLeastSeconds)) +
                           " s of samples, got '" + excerpt(value) + "'");
        suite.energy_seconds = seconds;
      }
    } else {
      throw SuiteError(where + "unknown key '" + excerpt(key) + "' (known: description, plugins, filter, axis, max_time, energy)");
    }
  }
  return suite;
}

Suite load_suite_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw SuiteError(path + ": cannot read the suite file");
  std::stringstream text;
  text << in.rdbuf();
  return parse_suite(path, text.str());
}

std::vector<std::string> list_suites(const std::vector<std::string>& folders) {
  std::vector<std::string> names;
  for (const auto& folder : folders) {
    std::error_code ec;
    for (const auto& entry : fs::directory_iterator(folder, ec))
      if (entry.path().extension() == ".suite") names.push_back(entry.path().stem().string());
  }
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  return names;
}

Suite find_suite(const std::string& name, const std::vector<std::string>& folders) {
  if (name.find('/') != std::string::npos || name.ends_with(".suite")) return load_suite_file(name);
  for (const auto& folder : folders) {
    const fs::path candidate = fs::path(folder) / (name + ".suite");
    std::error_code ec;
    if (fs::exists(candidate, ec)) return load_suite_file(candidate.string());
  }
  std::string known;
  for (const auto& s : list_suites(folders)) known += (known.empty() ? "" : ", ") + s;
  throw SuiteError("unknown suite '" + name + "' (known: " + (known.empty() ? "none found" : known) + ")");
}

}  // namespace roofbench
