// Human byte sizes and durations, for config values, logs and tables.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"

namespace dlfs {

// Parses "4096", "64KiB", "8MiB", "1.5GiB", "2G" (binary multiples; "B" optional).
// Errors name the offending text.
Result<uint64_t> parse_size(std::string_view text);

// 1536 -> "1.5 KiB"; exact for small values ("512 B").
std::string format_size(uint64_t bytes);

// Bytes per second as "1.23 GB/s" (decimal, as fio and ucx_perftest print).
std::string format_rate(double bytes_per_second);

// n rounded up to a multiple of `to` (> 0).
constexpr uint64_t round_up(uint64_t n, uint64_t to) { return (n + to - 1) / to * to; }

// The x86-64 and arm64 transparent/explicit huge page: mappings meant for them are sized in it.
inline constexpr uint64_t kHugePageBytes = 2ull << 20;

}  // namespace dlfs
