#include "common/units.h"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace dlfs {

Result<uint64_t> parse_size(std::string_view text) {
  std::string s(text);
  size_t pos = 0;
  double number = 0;
  try {
    number = std::stod(s, &pos);
  } catch (...) {
    return Status(EINVAL, "size '" + s + "' does not start with a number");
  }
  if (number < 0 || !std::isfinite(number))
    return Status(EINVAL, "size '" + s + "' must be a non-negative number");
  std::string suffix = s.substr(pos);
  while (!suffix.empty() && std::isspace(static_cast<unsigned char>(suffix.front()))) suffix.erase(0, 1);
  for (auto& c : suffix) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  double mult = 1;
  if (suffix.empty() || suffix == "B") mult = 1;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB") mult = 1024.0;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB") mult = 1024.0 * 1024;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB") mult = 1024.0 * 1024 * 1024;
  else if (suffix == "T" || suffix == "TB" || suffix == "TIB") mult = 1024.0 * 1024 * 1024 * 1024;
  else
    return Status(EINVAL, "size '" + s + "' has unknown unit '" + s.substr(pos) +
                              "' (use B, KiB, MiB, GiB or TiB)");
  double bytes = std::round(number * mult);
  // 2^64; no llround: it overflows (and returns garbage) above INT64_MAX.
  if (bytes >= 18446744073709551616.0) return Status(ERANGE, "size '" + s + "' is too large");
  return static_cast<uint64_t>(bytes);
}

std::string format_size(uint64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) return std::to_string(bytes) + " B";
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) {
    v /= 1024;
    ++u;
  }
  if (u < 5 && std::round(v) >= 1024) {  // 1023.6 KiB would print as "1024 KiB"
    v /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.*f %s", v < 10 ? 2 : (v < 100 ? 1 : 0), v, units[u]);
  return buf;
}

std::string format_rate(double bps) {
  char buf[32];
  if (bps >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB/s", bps / 1e9);
  else if (bps >= 1e6) std::snprintf(buf, sizeof buf, "%.1f MB/s", bps / 1e6);
  else std::snprintf(buf, sizeof buf, "%.1f kB/s", bps / 1e3);
  return buf;
}

}  // namespace dlfs
