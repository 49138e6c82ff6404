// The plugin ABI: what the host checks before it calls a plugin, and the entry point that carries it.
// plugin.hpp includes this file at its end; a plugin author only writes ROOFBENCH_PLUGIN(name, describe).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "roofbench/plugin.hpp"  // the types whose sizes the fingerprint records

namespace roofbench {

// Bumped whenever any type in plugin.hpp changes layout or meaning; the host refuses other versions.
// 3: the entry point carries an AbiFingerprint (compiler, standard library, struct sizes).
// 4: one way to report values as they are (Case::figures(), Figure) replaces counters(), facts() and
//    Check::counters; Work::rates holds Amounts.
// 5: Case::rotation() and Rotation: copies of a case's inputs for cold timing without a flush.
// 6: Context::world_size(), first_rank(), exchange(): ranks in several processes; DeviceNeed::cpu_ranks().
// 7: Work::bytes_read: the read part of the minimum bytes, for the mixed read/write memory roof.
// 8: Context::counting_kernels(): a plugin built with it would call past the end of an older host's Context.
inline constexpr std::uint32_t kAbiVersion = 8;

// What must match between a plugin and the host beyond kAbiVersion, filled in by ROOFBENCH_PLUGIN in the
// plugin's own translation unit: the standard library and its dual-ABI setting (a std::string of the
// other ABI crashes whoever reads it), the CUDA runtime's major version (roofbench_add_plugin's CUDA
// keyword defines it, and so do roofbench/cuda.hpp and cuda_runtime_api.h; 0: not known), and the size
// of every type the two sides exchange. The host compares it before calling describe().
struct AbiFingerprint {
  std::uint32_t size_of_fingerprint;
  std::uint32_t standard_library;  // 1 libstdc++, 2 libc++, 0 another
  std::int32_t cxx11_abi;          // _GLIBCXX_USE_CXX11_ABI, -1 when not libstdc++
  std::uint32_t cuda_runtime_major;
  std::uint32_t compiler_major;    // informational: compilers of one standard library interoperate
  std::uint32_t sizes[16];
};

namespace detail {

constexpr std::uint32_t standard_library_id() {
#if defined(_LIBCPP_VERSION)
  return 2;
#elif defined(__GLIBCXX__)
  return 1;
#else
  return 0;
#endif
}

constexpr std::int32_t cxx11_abi() {
#if defined(__GLIBCXX__) && defined(_GLIBCXX_USE_CXX11_ABI)
  return _GLIBCXX_USE_CXX11_ABI;
#else
  return -1;
#endif
}

constexpr std::uint32_t compiler_major() {
#if defined(__clang__)
  return 1000 + __clang_major__;
#elif defined(__GNUC__)
  return __GNUC__;
#else
  return 0;
#endif
}

// The names of AbiFingerprint::sizes, in order (for the host's one-line refusal).
inline constexpr const char* kFingerprintSizeNames[16] = {
    "std::string", "std::vector", "std::function", "std::unique_ptr", "Plugin", "CaseSpec", "Axis", "Params",
    "DeviceNeed", "Timing", "Work", "Check", "Amount", "Figure", "DeviceInfo", "Context"};

constexpr AbiFingerprint fingerprint(std::uint32_t cuda_runtime_major) {
  return {sizeof(AbiFingerprint),
          standard_library_id(),
          cxx11_abi(),
          cuda_runtime_major,
          compiler_major(),
          {sizeof(std::string), sizeof(std::vector<int>), sizeof(std::function<void()>), sizeof(std::unique_ptr<Case>),
           sizeof(Plugin), sizeof(CaseSpec), sizeof(Axis), sizeof(Params), sizeof(DeviceNeed), sizeof(Timing),
           sizeof(Work), sizeof(Check), sizeof(Amount), sizeof(Figure), sizeof(DeviceInfo), sizeof(Context)}};
}

}  // namespace detail

// The layout this kAbiVersion stands for, where it is known (x86-64, libstdc++'s C++11 ABI): a change
// of any of these types fails here until kAbiVersion is bumped and the sizes are updated together.
#if defined(__x86_64__) && defined(__GLIBCXX__) && _GLIBCXX_USE_CXX11_ABI
static_assert(kAbiVersion == 8, "update the layout assertions below together with kAbiVersion");
static_assert(sizeof(Plugin) == 88 && sizeof(CaseSpec) == 232 && sizeof(Axis) == 56 && sizeof(Params) == 24 &&
                  sizeof(DeviceNeed) == 12 && sizeof(Timing) == 16 && sizeof(Work) == 96 && sizeof(Check) == 48 &&
                  sizeof(Amount) == 40 && sizeof(Figure) == 80 && sizeof(DeviceInfo) == 40 && sizeof(Context) == 8,
              "a plugin API type changed layout: bump kAbiVersion and update these sizes");
#endif

}  // namespace roofbench

#ifndef ROOFBENCH_CUDA_RUNTIME_MAJOR
#if defined(CUDART_VERSION)
#define ROOFBENCH_CUDA_RUNTIME_MAJOR (CUDART_VERSION / 1000)
#else
#define ROOFBENCH_CUDA_RUNTIME_MAJOR 0
#endif
#endif

// The C-layout entry point. The host reads abi_version before touching anything else.
extern "C" struct roofbench_plugin_entry {
  std::uint32_t abi_version;
  const char* name;
  void (*describe)(roofbench::Plugin& plugin);
  const roofbench::AbiFingerprint* fingerprint;
};

// Use once per plugin: ROOFBENCH_PLUGIN("cpu", describe) with void describe(roofbench::Plugin&).
#define ROOFBENCH_PLUGIN(NAME, DESCRIBE)                                                                   \
  extern "C" __attribute__((visibility("default"))) const roofbench_plugin_entry* roofbench_plugin() {     \
    static constexpr ::roofbench::AbiFingerprint fingerprint =                                             \
        ::roofbench::detail::fingerprint(ROOFBENCH_CUDA_RUNTIME_MAJOR);                                    \
    static const roofbench_plugin_entry entry{::roofbench::kAbiVersion, NAME, &(DESCRIBE), &fingerprint}; \
    return &entry;                                                                                         \
  }
