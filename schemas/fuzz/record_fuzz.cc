// libFuzzer target: DecodeRecord and DecodeUpdateBatch (fuzz_targets.h), the byte formats an
// index node reads back from LMDB and its write-ahead log.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schemas/fuzz/fuzz_targets.h"
#include "schemas/fuzz/fuzz_util.h"
#include "schemas/record_format.h"

namespace propeller::fuzz {

int FuzzRecord(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  FileRecord record;
  Status s = DecodeRecord(input, &record);
  CheckStatus("DecodeRecord", s);
  if (s.ok()) {
    std::string first;
    EncodeRecord(record, &first);
    FileRecord again;
    s = DecodeRecord(first, &again);
    if (!s.ok()) Fail("DecodeRecord", "re-encoding does not decode: " + s.ToString());
    std::string second;
    EncodeRecord(again, &second);
    if (first != second) Fail("DecodeRecord", "encode(decode(encode(x))) != encode(x)");
  }
  std::vector<Update> updates;
  s = DecodeUpdateBatch(input, &updates);
  CheckStatus("DecodeUpdateBatch", s);
  if (s.ok()) {
    std::string first;
    EncodeUpdateBatch(updates, &first);
    std::vector<Update> again;
    s = DecodeUpdateBatch(first, &again);
    if (!s.ok()) Fail("DecodeUpdateBatch", "re-encoding does not decode: " + s.ToString());
    std::string second;
    EncodeUpdateBatch(again, &second);
    if (first != second) Fail("DecodeUpdateBatch", "encode(decode(encode(x))) != encode(x)");
  }
  return 0;
}

}  // namespace propeller::fuzz

#ifndef PROPELLER_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return propeller::fuzz::FuzzRecord(data, size);
}
#endif
