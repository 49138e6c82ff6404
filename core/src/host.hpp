// The roofbench host: command line, plugins, devices, ceilings, and the Google Benchmark run.
#pragma once

namespace roofbench {

// Runs roofbench with this command line and returns its exit code (0 ok, 1 failures, 2 usage).
int run_host(int argc, char** argv);

}  // namespace roofbench
