#include "fs/dataset/backend_fs.h"

#include <sys/vfs.h>

#include <cerrno>
#include <cstdio>

namespace dlfs::fs {
namespace {

struct Known {
  unsigned long magic;
  const char* name;
  bool network;
};

// statfs f_type values: linux/magic.h, and Lustre, GPFS, BeeGFS from their
// vendors (not in the kernel's header).
constexpr Known kKnown[] = {
    {0xEF53, "ext4", false},        {0x58465342, "xfs", false},       {0x9123683E, "btrfs", false},
    {0x01021994, "tmpfs", false},   {0x794C7630, "overlayfs", false}, {0x73717368, "squashfs", false},
    {0x2011BAB0, "exfat", false},   {0x5346544E, "ntfs", false},      {0xF2F52010, "f2fs", false},
    {0x6969, "nfs", true},          {0x0BD00BD0, "lustre", true},     {0x47504653, "gpfs", true},
    {0x00C36400, "ceph", true},     {0xFF534D42, "cifs", true},       {0xFE534D42, "smb2", true},
    {0x19830326, "beegfs", true},   {0x01021997, "9p", true},         {0x65735546, "fuse", true},
    {0x013111A8, "ibrix", true},    {0x6B414653, "afs", true},        {0x5346414F, "openafs", true},
};

}  // namespace

BackendFs backend_fs_of_type(long f_type) {
  const unsigned long t = static_cast<unsigned long>(f_type) & 0xFFFFFFFFul;
  for (const Known& k : kKnown)
    if (k.magic == t) return {k.name, k.network};
  char hex[24];
  std::snprintf(hex, sizeof hex, "0x%lx", t);
  return {hex, false};  // unknown: taken for local (passthrough falls back by itself where refused)
}

Result<BackendFs> backend_fs(const std::string& path) {
  struct statfs sf {};
  if (::statfs(path.c_str(), &sf) != 0) return Status::from_errno(errno, "cannot statfs '" + path + "'");
  return backend_fs_of_type(static_cast<long>(sf.f_type));
}

}  // namespace dlfs::fs
