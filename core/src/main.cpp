#include "host.hpp"

int main(int argc, char** argv) { return roofbench::run_host(argc, argv); }
