#include "schemas/wal_format.h"

#include <cstdio>
#include <cstring>

#include "common/crc32c.h"

namespace propeller {
namespace {

void PutU32(uint32_t v, std::string* out) {
  char b[4];
  for (int i = 0; i < 4; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 4);
}

void PutU64(uint64_t v, std::string* out) {
  char b[8];
  for (int i = 0; i < 8; ++i) b[i] = static_cast<char>(v >> (8 * i));
  out->append(b, 8);
}

uint32_t GetU32(const char* p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

uint64_t GetU64(const char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<uint8_t>(p[i]);
  return v;
}

}  // namespace

void AppendWalHeader(std::string* out) {
  size_t start = out->size();
  out->append(kWalMagic, sizeof(kWalMagic));
  PutU32(kWalFormatVersion, out);
  PutU32(Crc32cMask(Crc32cExtend(0, out->data() + start, 12)), out);
}

Status CheckWalHeader(std::string_view header) {
  if (header.size() < kWalHeaderSize) return Status::Corruption("log segment header is short");
  if (std::memcmp(header.data(), kWalMagic, sizeof(kWalMagic)) != 0) {
    return Status::Corruption("not a Propeller log segment (bad magic)");
  }
  if (Crc32cUnmask(GetU32(header.data() + 12)) != Crc32cExtend(0, header.data(), 12)) {
    return Status::Corruption("log segment header checksum mismatch");
  }
  uint32_t version = GetU32(header.data() + 8);
  if (version > kWalFormatVersion) {
    return Status::Corruption("log segment format version " + std::to_string(version) +
                              " is newer than this program's " +
                              std::to_string(kWalFormatVersion));
  }
  return Status::OK();
}

void AppendWalRecord(uint64_t lsn, std::string_view payload, std::string* out) {
  size_t start = out->size();
  PutU32(static_cast<uint32_t>(payload.size()), out);
  PutU32(0, out);  // CRC, filled below
  PutU64(lsn, out);
  out->append(payload);
  uint32_t crc = Crc32cMask(Crc32cExtend(0, out->data() + start + 8, 8 + payload.size()));
  for (int i = 0; i < 4; ++i) (*out)[start + 4 + i] = static_cast<char>(crc >> (8 * i));
}

WalParse ParseWalRecord(std::string_view data, uint64_t* lsn, std::string_view* payload,
                        size_t* consumed) {
  if (data.size() < kWalRecordHeaderSize) return WalParse::kTruncated;
  uint32_t n = GetU32(data.data());
  if (n > kWalMaxPayload) return WalParse::kBadRecord;
  if (data.size() - kWalRecordHeaderSize < n) return WalParse::kTruncated;
  uint32_t stored = Crc32cUnmask(GetU32(data.data() + 4));
  if (Crc32cExtend(0, data.data() + 8, 8 + size_t{n}) != stored) return WalParse::kBadRecord;
  *lsn = GetU64(data.data() + 8);
  *payload = data.substr(kWalRecordHeaderSize, n);
  *consumed = kWalRecordHeaderSize + n;
  return WalParse::kOk;
}

std::string WalSegmentName(uint64_t first_lsn) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%020llu.wal", static_cast<unsigned long long>(first_lsn));
  return buf;
}

bool ParseWalSegmentName(std::string_view name, uint64_t* first_lsn) {
  if (name.size() != 24 || name.substr(20) != ".wal") return false;
  uint64_t v = 0;
  for (size_t i = 0; i < 20; ++i) {
    char c = name[i];
    if (c < '0' || c > '9') return false;
    uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *first_lsn = v;
  return true;
}

}  // namespace propeller
