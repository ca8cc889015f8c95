// Writes an upgrade test's fixture (layout_fixture.h) with the program it is built with:
//   make_layout_fixture DATA_DIR DUMP_FILE
// runs the workload into a new data directory and writes what the engine answers to
// DUMP_FILE. Each archive was made by building this against the last program of its layout,
// then
//   make_layout_fixture /tmp/fx/data /tmp/fx/expected.txt
//   tar -C /tmp/fx -czf layoutN.tar.gz data expected.txt
// indexnode/testdata/layout3.tar.gz: commit fad444f (the last before the shared store; the
// file was then called make_layout3_fixture.cc); layout4.tar.gz: commit 6d8c6b5 (the last
// before the keyword index's posting chunks).
#include <cstdio>
#include <fstream>

#include "indexnode/engine.h"
#include "indexnode/testdata/layout_fixture.h"

int main(int argc, char** argv) {
  using namespace propeller;
  if (argc != 3) {
    std::fprintf(stderr, "usage: make_layout_fixture DATA_DIR DUMP_FILE\n");
    return 2;
  }
  EngineOptions o;
  o.data_dir = argv[1];
  o.background_commit = false;
  auto engine = Engine::Open(o);
  if (!engine.ok()) {
    std::fprintf(stderr, "%s\n", engine.status().ToString().c_str());
    return 1;
  }
  Status s = layout_fixture::Run(engine->get());
  Result<std::string> dump = s.ok() ? layout_fixture::Dump(engine->get()) : Result<std::string>(s);
  if (dump.ok()) s = (*engine)->Close();
  if (!dump.ok() || !s.ok()) {
    std::fprintf(stderr, "%s\n", (dump.ok() ? s : dump.status()).ToString().c_str());
    return 1;
  }
  std::ofstream(argv[2]) << *dump;
  return 0;
}
