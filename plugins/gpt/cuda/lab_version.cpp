// The one parser behind R1's kernel-lab switches (layers.hpp): ROOFBENCH_GPT_ATTENTION, _ELEMENTWISE, _WGRAD.
#include <cstdlib>
#include <string>

#include "layers.hpp"
#include "roofbench/plugin.hpp"

namespace roofbench::gpt::cuda {

int lab_version_from_env(const char* variable, int count, int default_version) {
  const char* value = std::getenv(variable);
  if (value == nullptr || *value == '\0') return default_version;
  std::string expected;
  for (int version = 1; version <= count; ++version) {
    const std::string name = "v" + std::to_string(version);
    if (name == value) return version;
    expected += (version == 1 ? "" : version == count ? " or " : ", ") + name;
  }
  throw Error("gpt: " + std::string(variable) + " must be " + expected + " (got '" + value + "')");
}

}  // namespace roofbench::gpt::cuda
