// libFuzzer target: the LMDB key decoders (keys.h) and the write-ahead-log framing
// (wal_format.h), picked by data[0] and run on data[1..] (fuzz_targets.h). These bytes come
// from disk, so a damaged file must give an error, never a crash; and whatever decodes must
// re-encode to the same bytes.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "schemas/fuzz/fuzz_targets.h"
#include "schemas/fuzz/fuzz_util.h"
#include "schemas/keys.h"
#include "schemas/record_format.h"
#include "schemas/wal_format.h"

namespace propeller::fuzz {

int FuzzStorage(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view in(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % kNumStorageDecoders) {
    case 0: {
      FileId id;
      const Status s = DecodeFileIdKey(in, &id);
      CheckStatus("DecodeFileIdKey", s);
      std::string again;
      AppendFileIdKey(id, &again);
      if (s.ok() && again != in) Fail("DecodeFileIdKey", "does not round-trip");
      break;
    }
    case 1: {
      FileId src, dst;
      const Status s = DecodeEdgeKey(in, &src, &dst);
      CheckStatus("DecodeEdgeKey", s);
      std::string again;
      AppendEdgeKey(src, dst, &again);
      if (s.ok() && again != in) Fail("DecodeEdgeKey", "does not round-trip");
      break;
    }
    case 2: {
      std::string_view value_part;
      FileId id;
      const Status s = SplitIndexEntryKey(in, &value_part, &id);
      CheckStatus("SplitIndexEntryKey", s);
      if (s.ok()) {
        std::string again(value_part);
        AppendFileIdKey(id, &again);
        if (value_part.empty() || again != in) Fail("SplitIndexEntryKey", "does not round-trip");
      }
      break;
    }
    case 3:
      CheckStatus("CheckWalHeader", CheckWalHeader(in));
      break;
    case 4: {
      uint64_t lsn = 0;
      std::string_view payload;
      size_t consumed = 0;
      if (ParseWalRecord(in, &lsn, &payload, &consumed) == WalParse::kOk) {
        if (consumed > in.size()) Fail("ParseWalRecord", "consumed beyond the input");
        std::string again;
        AppendWalRecord(lsn, payload, &again);
        if (again != in.substr(0, consumed)) Fail("ParseWalRecord", "does not round-trip");
        std::vector<Update> updates;  // what recovery does with the payload next
        CheckStatus("DecodeUpdateBatch", DecodeUpdateBatch(payload, &updates));
      }
      break;
    }
    case 5: {
      uint64_t lsn = 0;
      if (ParseWalSegmentName(in, &lsn) && WalSegmentName(lsn) != in) {
        Fail("ParseWalSegmentName", "does not round-trip");
      }
      break;
    }
    default: {
      if (in.size() < 8) break;
      const std::string_view eight = in.substr(0, 8);
      std::string u, i;
      AppendOrderedU64(DecodeOrderedU64(eight), &u);
      AppendOrderedI64(DecodeOrderedI64(eight), &i);
      if (u != eight || i != eight) Fail("DecodeOrdered{U,I}64", "does not round-trip");
      const double d = DecodeOrderedDouble(eight);
      std::string dd;
      AppendOrderedDouble(d, &dd);
      if (!std::isnan(d) && DecodeOrderedDouble(dd) != d) {
        Fail("DecodeOrderedDouble", "does not round-trip");
      }
      break;
    }
  }
  return 0;
}

}  // namespace propeller::fuzz

#ifndef PROPELLER_FUZZ_NO_MAIN
extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  return propeller::fuzz::FuzzStorage(data, size);
}
#endif
