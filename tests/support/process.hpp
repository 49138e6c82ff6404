// Runs a program the way a user would, from a shell, and keeps what it printed and how it exited.
#pragma once

#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace roofbench::test_support {

struct ProcessResult {
  std::string command;
  int exit_code = -1;  // the program's exit status; 128 + N when signal N killed it
  std::string out, err;
  std::string output() const { return out + err; }
};

// Shows the command and everything it printed, for the message of a failed expectation.
std::ostream& operator<<(std::ostream& os, const ProcessResult& r);

using Environment = std::vector<std::pair<std::string, std::string>>;

// argv[0] is the program; no argument is interpreted by the shell. `environment` is added to this
// process's environment, and every variable named in `unset` is removed.
ProcessResult run_process(const std::vector<std::string>& argv, const Environment& environment = {},
                          const std::vector<std::string>& unset = {});

}  // namespace roofbench::test_support
