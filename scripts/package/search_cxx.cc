// scripts/package.sh: a C++ program built against the installed libpropeller-dev with CMake's
// find_package(Propeller). Prints the paths matching QUERY, as search_c.c does, through the
// C++ API. usage: search_cxx QUERY
#include <propeller/propeller.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: search_cxx QUERY\n");
    return 2;
  }
  auto client = propeller::Client::Connect(propeller::ClientOptions{});
  if (!client.ok()) {
    std::fprintf(stderr, "search_cxx: %s\n", client.status().ToString().c_str());
    return 1;
  }
  auto hits = (*client)->SearchAll(argv[1], propeller::ClientSearchOptions{});
  if (!hits.ok()) {
    std::fprintf(stderr, "search_cxx: %s\n", hits.status().ToString().c_str());
    return 1;
  }
  for (const propeller::ClientHit& hit : *hits) std::printf("%s\n", hit.path.c_str());
  return 0;
}
