// describe_change (provenance/manifest.h): the one comparison of a file as
// scanned with the file as it is now, for every reader that checks a pin.
#include <sys/stat.h>

#include <cinttypes>
#include <cstdio>

#include "provenance/manifest.h"

namespace dlfs::provenance {
namespace {

std::string ns_time(int64_t ns) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%" PRId64 ".%09" PRId64, ns / 1000000000, ns % 1000000000);
  return buf;
}

void add(std::string& out, const std::string& part) { out += (out.empty() ? "" : ", ") + part; }

}  // namespace

std::string describe_change(const FileIdentity& pin, const struct stat& now) {
  std::string out;
  const auto size = static_cast<uint64_t>(now.st_size);
  const int64_t mtime = static_cast<int64_t>(now.st_mtim.tv_sec) * 1000000000 + now.st_mtim.tv_nsec;
  if (size != pin.size) add(out, "size " + std::to_string(pin.size) + " -> " + std::to_string(size));
  if (mtime != pin.mtime_ns) add(out, "mtime " + ns_time(pin.mtime_ns) + " -> " + ns_time(mtime));
  if (static_cast<uint64_t>(now.st_ino) != pin.inode)
    add(out, "inode " + std::to_string(pin.inode) + " -> " + std::to_string(now.st_ino) + " (replaced)");
  if (static_cast<uint64_t>(now.st_dev) != pin.device)
    add(out, "device " + std::to_string(pin.device) + " -> " + std::to_string(now.st_dev));
  return out;
}

}  // namespace dlfs::provenance
