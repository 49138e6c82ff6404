#include "plugin_loader.hpp"

#include <cmath>

#include "benchmark_set.hpp"
#include "device.hpp"
#include "text.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <regex>
#include <set>
#include <stdexcept>

namespace roofbench {

namespace fs = std::filesystem;

std::vector<std::string> find_plugin_files(const std::vector<std::string>& folders) {
  std::vector<std::string> files;
  std::set<std::string> seen;
  for (const auto& folder : folders) {
    std::error_code ec;
    if (!fs::is_directory(folder, ec)) continue;
    std::vector<std::string> here;
    for (const auto& entry : fs::directory_iterator(folder, ec))
      if (entry.path().extension() == ".so" && entry.is_regular_file(ec)) here.push_back(entry.path().string());
    std::sort(here.begin(), here.end());
    for (auto& f : here) {
      const auto canonical = fs::weakly_canonical(f, ec).string();
      if (seen.insert(canonical).second) files.push_back(f);
    }
  }
  return files;
}

static void validate(const Plugin& plugin, const std::string& entry_name) {
  static const std::regex valid_name("[A-Za-z0-9_.-]+");
  if (plugin.name != entry_name)
    throw std::runtime_error("describe() named the plugin '" + plugin.name + "' but its entry says '" + entry_name + "'");
  if (!std::regex_match(plugin.name, valid_name)) throw std::runtime_error("invalid plugin name '" + plugin.name + "'");
  std::set<std::string> names;
  for (const auto& c : plugin.cases) {
    if (!std::regex_match(c.name, valid_name)) throw std::runtime_error("invalid case name '" + c.name + "'");
    if (!names.insert(c.name).second) throw std::runtime_error("two cases named '" + c.name + "'");
    if (!c.make) throw std::runtime_error("case '" + c.name + "' has no make function");
    std::set<std::string> axis_names;
    for (const auto& axis : c.axes) {
      if (!std::regex_match(axis.name, valid_name))
        throw std::runtime_error("case '" + c.name + "': invalid axis name '" + axis.name + "'");
      if (!axis_names.insert(axis.name).second)
        throw std::runtime_error("case '" + c.name + "': two axes named '" + axis.name + "'");
      if (axis.values.empty()) throw std::runtime_error("case '" + c.name + "': axis '" + axis.name + "' has no values");
      for (const auto& v : axis.values)
        if (const std::string why = axis_value_problem(v); !why.empty())
          throw std::runtime_error("case '" + c.name + "': axis '" + axis.name + "': " + why);
    }
    if (!c.sweep_axis.empty() &&
        std::none_of(c.axes.begin(), c.axes.end(), [&](const Axis& a) { return a.name == c.sweep_axis; }))
      throw std::runtime_error("case '" + c.name + "': sweep axis '" + c.sweep_axis + "' is not one of its axes");
    if (!(c.timeout_s >= 0) || !std::isfinite(c.timeout_s))
      throw std::runtime_error("case '" + c.name + "': timeout_s must be a finite number of seconds, not negative");
  }
  if (const std::string dup = first_duplicate_name(expand_plugin(plugin)); !dup.empty())
    throw std::runtime_error("two benchmarks named '" + dup + "' (an axis repeats a value)");
}

AbiFingerprint host_fingerprint() { return detail::fingerprint(static_cast<std::uint32_t>(cuda_runtime_major_built())); }

std::string fingerprint_mismatch(const AbiFingerprint& plugin, const AbiFingerprint& host) {
  auto library = [](std::uint32_t id) -> std::string { return id == 1 ? "libstdc++" : id == 2 ? "libc++" : "an unknown C++ library"; };
  if (plugin.size_of_fingerprint != host.size_of_fingerprint)
    return "its ABI fingerprint has another layout (" + std::to_string(plugin.size_of_fingerprint) + " bytes, this host's " +
           std::to_string(host.size_of_fingerprint) + ")";
  if (plugin.standard_library != host.standard_library)
    return "built against " + library(plugin.standard_library) + ", this host against " + library(host.standard_library);
  if (plugin.cxx11_abi != host.cxx11_abi)
    return "built with _GLIBCXX_USE_CXX11_ABI=" + std::to_string(plugin.cxx11_abi) + ", this host with " +
           std::to_string(host.cxx11_abi) + " (std::string and std::list differ between the two)";
  if (plugin.cuda_runtime_major != 0 && host.cuda_runtime_major != 0 && plugin.cuda_runtime_major != host.cuda_runtime_major)
    return "built against CUDA runtime " + std::to_string(plugin.cuda_runtime_major) + ", this host against " +
           std::to_string(host.cuda_runtime_major);
  for (std::size_t i = 0; i < std::size(host.sizes); ++i)
    if (plugin.sizes[i] != host.sizes[i])
      return std::string("sizeof(") + detail::kFingerprintSizeNames[i] + ") is " + std::to_string(plugin.sizes[i]) +
             " in the plugin, " + std::to_string(host.sizes[i]) + " in this host";
  return {};
}

LoadedPlugin load_plugin(const std::string& path) {
  namespace dll = boost::dll;
  auto library = std::make_shared<dll::shared_library>();
  boost::dll::fs::error_code ec;
  // rtld_now: an unresolved symbol must fail here, not in the middle of a benchmark.
  library->load(path, dll::load_mode::rtld_now | dll::load_mode::rtld_local, ec);
  if (ec) {
    const char* detail = ::dlerror();
    throw std::runtime_error("cannot load: " + (detail ? std::string(detail) : ec.message()));
  }
  if (!library->has("roofbench_plugin")) throw std::runtime_error(kNoEntryPointReason);
  const auto entry_fn = library->get<const roofbench_plugin_entry*()>("roofbench_plugin");
  const roofbench_plugin_entry* entry = entry_fn();
  if (!entry) throw std::runtime_error("entry point returned nothing");
  if (entry->abi_version != kAbiVersion)
    throw std::runtime_error("ABI version " + std::to_string(entry->abi_version) + ", this host needs " +
                             std::to_string(kAbiVersion) + " (rebuild the plugin against this roofbench)");
  if (!entry->fingerprint) throw std::runtime_error("entry point without an ABI fingerprint");
  if (const std::string why = fingerprint_mismatch(*entry->fingerprint, host_fingerprint()); !why.empty())
    throw std::runtime_error("ABI mismatch: " + why + " (rebuild the plugin with this host's compiler settings)");
  if (!entry->name || !entry->describe) throw std::runtime_error("entry point without a name or describe function");
  // Plugins are never unloaded: CUDA libraries, NCCL and cuBLAS keep state and threads that outlive
  // the objects a plugin hands out, and unloading them before exit crashed the process on a GPU.
  static auto* never_unloaded = new std::vector<std::shared_ptr<dll::shared_library>>();
  never_unloaded->push_back(library);
  LoadedPlugin loaded{library, path, {}};
  loaded.plugin.name = entry->name;
  if (library->has(kCudaProbeSymbol)) loaded.cuda_probe = &library->get<int(char*, int)>(kCudaProbeSymbol);
  try {
    entry->describe(loaded.plugin);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("describe() threw: ") + e.what());
  } catch (...) {
    throw std::runtime_error("describe() threw a non-standard exception");
  }
  validate(loaded.plugin, entry->name);
  return loaded;
}

void add_plugin(LoadResult& result, LoadedPlugin plugin) {
  for (const auto& p : result.plugins)
    if (p.plugin.name == plugin.plugin.name) {
      result.failures.push_back({plugin.path, "a plugin named '" + plugin.plugin.name + "' is already loaded"});
      return;
    }
  result.plugins.push_back(std::move(plugin));
}

LoadResult load_plugins(const std::vector<std::string>& files) {
  LoadResult result;
  for (const auto& path : files) {
    try {
      add_plugin(result, load_plugin(path));
    } catch (const std::exception& e) {
      result.failures.push_back({path, e.what()});
    }
  }
  return result;
}

bool is_stray_library(const LoadFailure& failure) { return failure.reason == kNoEntryPointReason; }

std::size_t failures_of_the_run(const std::vector<LoadFailure>& failures) {
  return std::count_if(failures.begin(), failures.end(), [](const LoadFailure& f) { return !is_stray_library(f); });
}

// The non-empty entries of ROOFBENCH_PLUGIN_PATH (colon-separated), in order.
static std::vector<std::string> plugin_path_entries() {
  std::vector<std::string> entries;
  const char* env = std::getenv("ROOFBENCH_PLUGIN_PATH");
  if (!env) return entries;
  std::string paths = env;
  std::size_t start = 0;
  while (start <= paths.size()) {
    const auto end = paths.find(':', start);
    const auto item = paths.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!item.empty()) entries.push_back(item);
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return entries;
}

std::vector<std::string> default_plugin_folders(const std::string& executable_path) {
  std::vector<std::string> folders;
  std::error_code ec;
  const fs::path exe_dir = fs::weakly_canonical(executable_path, ec).parent_path();
  folders.push_back((exe_dir.parent_path() / "lib" / "roofbench" / "plugins").string());
  for (auto& entry : plugin_path_entries()) folders.push_back(std::move(entry));
  return folders;
}

std::vector<std::string> unusable_plugin_path_entries() {
  std::vector<std::string> unusable;
  for (const auto& entry : plugin_path_entries()) {
    std::error_code ec;
    const auto status = fs::status(entry, ec);
    if (!fs::exists(status)) unusable.push_back("'" + excerpt(entry) + "': no such folder");
    else if (!fs::is_directory(status)) unusable.push_back("'" + excerpt(entry) + "': not a folder");
    else if (fs::directory_iterator(entry, ec); ec) unusable.push_back("'" + excerpt(entry) + "': " + ec.message());
  }
  return unusable;
}

}  // namespace roofbench
