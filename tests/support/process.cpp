#include "process.hpp"

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "scratch_dir.hpp"

namespace roofbench::test_support {

namespace {

std::string shell_quote(const std::string& word) {
  std::string quoted = "'";
  for (char c : word) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return quoted + "'";
}

std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::ostream& operator<<(std::ostream& os, const ProcessResult& r) {
  return os << "\n$ " << r.command << "\nexit code " << r.exit_code << "\n--- stdout ---\n"
            << r.out << "--- stderr ---\n" << r.err << "--------------";
}

ProcessResult run_process(const std::vector<std::string>& argv, const Environment& environment,
                          const std::vector<std::string>& unset) {
  // stderr goes to a file so that it stays apart from stdout without a second pipe to drain.
  const ScratchDir stderr_dir;
  const auto stderr_file = stderr_dir / "stderr";
  std::string command = "env";
  for (const auto& name : unset) command += " -u " + shell_quote(name);
  for (const auto& [name, value] : environment) command += " " + shell_quote(name + "=" + value);
  for (const auto& word : argv) command += " " + shell_quote(word);

  ProcessResult result;
  result.command = command;
  FILE* pipe = ::popen((command + " 2>" + shell_quote(stderr_file.string())).c_str(), "r");
  if (!pipe) throw std::runtime_error("popen failed for: " + command);
  std::array<char, 4096> buffer;
  for (std::size_t n; (n = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0;) result.out.append(buffer.data(), n);
  const int status = ::pclose(pipe);
  if (status == -1) throw std::runtime_error("pclose failed for: " + command);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.err = read_file(stderr_file);
  return result;
}

}  // namespace roofbench::test_support
