// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): the checksum of WAL records and other
// framed bytes Propeller writes itself.
//
// The SSE4.2 crc32 instruction where the CPU has it, else software, table-driven slice-by-8
// (8 bytes per step instead of 1: measured on the 2-core development VM, ~650 MB/s against
// ~130 MB/s for the byte-wise table loop, 1 MiB buffers, -O2; the 8 KiB of tables are built at
// compile time). It sits on the write-ahead-log hot path and on every record an ACG reads.
//
// All functions are pure and thread-safe.
#ifndef PROPELLER_COMMON_CRC32C_H_
#define PROPELLER_COMMON_CRC32C_H_

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace propeller {

// Returns the CRC-32C of A ‖ data[0, n), where `crc` is the CRC-32C of A (0 for empty A).
// So Crc32cExtend(Crc32c(a), b.data(), b.size()) == Crc32c(a + b). `data` may be null when n == 0.
uint32_t Crc32cExtend(uint32_t crc, const void* data, size_t n);
// The same, always in software (tests compare the two).
uint32_t Crc32cSoftware(uint32_t crc, const void* data, size_t n);

// The CRC-32C of `s`. Crc32c("123456789") == 0xE3069283.
inline uint32_t Crc32c(std::string_view s) { return Crc32cExtend(0, s.data(), s.size()); }

// Returns a masked form of `crc` for storing next to the data it covers. Computing the CRC of a
// string that itself contains embedded (unmasked) CRCs is prone to degenerate results; storing
// the rotated-and-offset value avoids that. Crc32cUnmask(Crc32cMask(x)) == x for every x.
uint32_t Crc32cMask(uint32_t crc);
// The inverse of Crc32cMask.
uint32_t Crc32cUnmask(uint32_t masked);

}  // namespace propeller

#endif  // PROPELLER_COMMON_CRC32C_H_
