#include "schemas/pending_format.h"

#include <cstring>

#include "common/crc32c.h"
#include "schemas/msgpack_util.h"
#include "schemas/record_format.h"

namespace propeller {
namespace {

constexpr char kWhat[] = "pending batch";
// batch, extras, extra, producers, file id (the updates are a bin, decoded apart).
constexpr size_t kMaxDepth = 8;

void PutU32(uint32_t v, char out[4]) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

}  // namespace

void AppendPendingRecord(std::span<const Update> updates, std::span<const PendingExtra> extras,
                         std::span<const std::string> touched, std::string* out) {
  std::string payload;
  {
    msgpack_util::StringSink sink(&payload);
    msgpack_util::Packer pk(sink);
    pk.pack_array(4);
    pk.pack_uint32(kPendingFormatVersion);
    std::string batch;
    EncodeUpdateBatch(updates, &batch);
    msgpack_util::PackBin(pk, batch);
    pk.pack_array(static_cast<uint32_t>(extras.size()));
    for (const PendingExtra& e : extras) {
      pk.pack_array(4);
      msgpack_util::PackString(pk, e.app);
      pk.pack_array(static_cast<uint32_t>(e.producers.size()));
      for (const FileId& id : e.producers) {
        pk.pack_array(2);
        pk.pack_uint32(id.volume);
        pk.pack_uint64(id.ino);
      }
      if (e.created) {
        pk.pack_true();
      } else {
        pk.pack_false();
      }
      pk.pack_uint64(e.generation);
    }
    pk.pack_array(static_cast<uint32_t>(touched.size()));
    for (const std::string& t : touched) msgpack_util::PackString(pk, t);
  }
  char header[kPendingRecordHeader];
  PutU32(static_cast<uint32_t>(payload.size()), header);
  PutU32(Crc32cMask(Crc32c(payload)), header + 4);
  out->append(header, sizeof header);
  out->append(payload);
}

PendingParse ParsePendingRecord(std::string_view data, std::string_view* payload,
                                size_t* consumed) {
  if (data.size() < kPendingRecordHeader) return PendingParse::kTruncated;
  const uint32_t n = GetU32(data.data());
  if (n == 0 || n > kPendingMaxRecord) return PendingParse::kBadRecord;
  if (data.size() - kPendingRecordHeader < n) return PendingParse::kTruncated;
  const std::string_view body = data.substr(kPendingRecordHeader, n);
  if (Crc32cMask(Crc32c(body)) != GetU32(data.data() + 4)) {
    return PendingParse::kBadRecord;
  }
  *payload = body;
  *consumed = kPendingRecordHeader + n;
  return PendingParse::kOk;
}

Status DecodePendingBatch(std::string_view payload, std::vector<Update>* updates,
                          std::vector<PendingExtra>* extras, std::vector<std::string>* touched) {
  std::string_view batch;
  extras->clear();
  touched->clear();
  PROPELLER_RETURN_IF_ERROR(msgpack_util::ParseAndDecode(
      kWhat, payload, payload.size(), kMaxDepth,
      [&](const msgpack::object& o) -> Status {
        using msgpack_util::Bad;
        const msgpack::object* f = nullptr;
        size_t n = 0;
        if (!msgpack_util::GetArray(o, 4, &f, &n)) return Bad(kWhat, "array", "has < 4 fields");
        uint64_t version = 0;
        if (!msgpack_util::GetU64(f[0], &version) || version == 0 ||
            version > kPendingFormatVersion) {
          return Bad(kWhat, "version", "is not a supported version");
        }
        if (f[1].type != msgpack::type::BIN) return Bad(kWhat, "updates", "is not a bin");
        batch = std::string_view(f[1].via.bin.ptr, f[1].via.bin.size);
        const msgpack::object* e = nullptr;
        size_t count = 0;
        if (!msgpack_util::GetArray(f[2], 0, &e, &count)) {
          return Bad(kWhat, "extras", "is not an array");
        }
        for (size_t i = 0; i < count; ++i) {
          const msgpack::object* x = nullptr;
          size_t xn = 0;
          PendingExtra extra;
          if (!msgpack_util::GetArray(e[i], 4, &x, &xn) ||
              !msgpack_util::GetString(x[0], &extra.app) ||
              x[2].type != msgpack::type::BOOLEAN || !msgpack_util::GetU64(x[3], &extra.generation)) {
            return Bad(kWhat, "extras", "holds a malformed entry");
          }
          extra.created = x[2].via.boolean;
          const msgpack::object* p = nullptr;
          size_t pn = 0;
          if (!msgpack_util::GetArray(x[1], 0, &p, &pn)) return Bad(kWhat, "producers", "malformed");
          for (size_t k = 0; k < pn; ++k) {
            const msgpack::object* id = nullptr;
            size_t idn = 0;
            FileId fid;
            if (!msgpack_util::GetArray(p[k], 2, &id, &idn) ||
                !msgpack_util::GetU32(id[0], &fid.volume) || !msgpack_util::GetU64(id[1], &fid.ino)) {
              return Bad(kWhat, "producers", "holds a malformed file id");
            }
            extra.producers.push_back(fid);
          }
          extras->push_back(std::move(extra));
        }
        const msgpack::object* t = nullptr;
        size_t tn = 0;
        if (!msgpack_util::GetArray(f[3], 0, &t, &tn)) return Bad(kWhat, "touched", "is not an array");
        touched->resize(tn);
        for (size_t i = 0; i < tn; ++i) {
          if (!msgpack_util::GetString(t[i], &(*touched)[i])) {
            return Bad(kWhat, "touched", "holds a non-string");
          }
        }
        return Status::OK();
      }));
  // `batch` points into `payload`, which outlives this call.
  PROPELLER_RETURN_IF_ERROR(DecodeUpdateBatch(batch, updates));
  if (updates->size() != extras->size()) {
    return Status::Corruption(std::string(kWhat) + ": " + std::to_string(updates->size()) +
                              " updates but " + std::to_string(extras->size()) + " extras");
  }
  return Status::OK();
}

}  // namespace propeller
