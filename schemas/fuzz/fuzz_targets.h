// The fuzz entry points of schemas/ and their seed inputs.
//
// Each Fuzz* function is the body of one libFuzzer target (schemas/fuzz/<name>_fuzz.cc defines
// LLVMFuzzerTestOneInput calling it unless PROPELLER_FUZZ_NO_MAIN is defined, so the same code
// also runs under gcc in the CTest driver fuzz_smoke_test.cc). Each takes any bytes, returns 0,
// and calls std::abort() (a crash, for libFuzzer) when a decoder breaks its contract: a status
// other than the documented ones, or a decoded value that does not survive
// encode -> decode -> encode byte for byte.
#ifndef PROPELLER_SCHEMAS_FUZZ_FUZZ_TARGETS_H_
#define PROPELLER_SCHEMAS_FUZZ_FUZZ_TARGETS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace propeller::fuzz {

// DecodeRequest, then the body decoder of the envelope's type; and, independently, the request
// body decoder picked by data[0] on data[1..].
int FuzzRequest(const uint8_t* data, size_t size);
// DecodeReply, then every reply body decoder on the envelope's body; and the reply body decoder
// picked by data[0] on data[1..].
int FuzzReply(const uint8_t* data, size_t size);
// DecodeRecord and DecodeUpdateBatch on the whole input.
int FuzzRecord(const uint8_t* data, size_t size);
// The keys.h and wal_format.h decoders, picked by data[0], on data[1..].
int FuzzStorage(const uint8_t* data, size_t size);

enum class Target { kRequest, kReply, kRecord, kStorage };
inline constexpr Target kAllTargets[] = {Target::kRequest, Target::kReply, Target::kRecord,
                                         Target::kStorage};
// "request", "reply", "record", "storage" (the <name> of <name>_fuzz).
const char* TargetName(Target target);
// Valid inputs for the target, built with the encoders (golden-like values): the seed corpus
// of scripts/fuzz.sh and the starting points of the smoke test's mutations.
std::vector<std::string> Seeds(Target target);

}  // namespace propeller::fuzz

#endif  // PROPELLER_SCHEMAS_FUZZ_FUZZ_TARGETS_H_
