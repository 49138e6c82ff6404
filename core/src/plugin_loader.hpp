// Finding and loading plugins. A plugin that cannot be loaded is reported by path and reason; the
// others still load.
#pragma once

#include <boost/dll/shared_library.hpp>
#include <memory>
#include <string>
#include <vector>

#include "cuda_arch.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench {

struct LoadedPlugin {
  // Declared first, so destroyed last: the plugin's objects (its std::function factories) must die
  // before the code they live in could be unmapped.
  std::shared_ptr<boost::dll::shared_library> library;
  std::string path;
  Plugin plugin;
  CudaProbe cuda_probe = nullptr;  // exported by CUDA plugins (roofbench_add_plugin ... CUDA)
};

struct LoadFailure {
  std::string path;
  std::string reason;
};

// A shared library without roofbench's entry point (a library a plugin links, left beside it) is not a
// plugin at all: a warning. Any other load failure of a file named *.so in a plugin folder fails the run,
// since a plugin whose name is not known could hold any benchmark of the selection.
inline constexpr const char* kNoEntryPointReason = "no entry point 'roofbench_plugin' (not a roofbench plugin?)";
bool is_stray_library(const LoadFailure& failure);
// The load failures that fail the run (every one but a stray library's).
std::size_t failures_of_the_run(const std::vector<LoadFailure>& failures);

struct LoadResult {
  std::vector<LoadedPlugin> plugins;
  std::vector<LoadFailure> failures;
};

// Every *.so directly inside each folder, in name order; folders that do not exist are skipped here
// (the command line checks its own --plugin-dir arguments before this is called).
std::vector<std::string> find_plugin_files(const std::vector<std::string>& folders);

// Why a plugin built with `plugin`'s fingerprint cannot run in a host with `host`'s, on one line;
// empty when they match. A CUDA runtime version of 0 (not known) matches any.
std::string fingerprint_mismatch(const AbiFingerprint& plugin, const AbiFingerprint& host);

// This host's own fingerprint.
AbiFingerprint host_fingerprint();

// Appends a loaded plugin, or a failure when its name is taken by one loaded before.
void add_plugin(LoadResult& result, LoadedPlugin plugin);

// Loads one plugin; throws std::runtime_error with the reason on any failure.
LoadedPlugin load_plugin(const std::string& path);

// Loads all of them; two plugins with the same name: the second is a failure.
LoadResult load_plugins(const std::vector<std::string>& files);

// The folders searched by default: the plugin folder beside the executable (build and install
// layouts), then each entry of ROOFBENCH_PLUGIN_PATH (colon-separated).
std::vector<std::string> default_plugin_folders(const std::string& executable_path);
// Each entry of ROOFBENCH_PLUGIN_PATH that is not a readable folder, with why ("'x': no such folder"),
// for a warning that names it; empty entries (a stray ':') are skipped as PATH skips them.
std::vector<std::string> unusable_plugin_path_entries();

}  // namespace roofbench
