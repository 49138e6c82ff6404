// roofbench_figures markdown|headline: the host's figure table (summaries.cpp) as the docs' Markdown
// table, or the names of its headline figures one a line (what the CTest measurements report).
#include <cstring>
#include <iostream>

#include "summaries.hpp"

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "markdown") == 0) {
    std::cout << roofbench::figures_markdown();
    return 0;
  }
  if (argc == 2 && std::strcmp(argv[1], "headline") == 0) {
    for (const auto& f : roofbench::host_figures())
      if (f.written & roofbench::written::ctest) std::cout << f.name << "\n";
    return 0;
  }
  std::cerr << "usage: roofbench_figures markdown|headline\n";
  return 2;
}
