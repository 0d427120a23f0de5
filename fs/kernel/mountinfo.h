// The mount table as this process sees it (/proc/self/mountinfo, proc(5)):
// what is mounted where, and which file system it is. dlfsd reads it before
// mounting, to tell a free mountpoint from its own kind of mount (live or
// left behind by a daemon that died) and from someone else's file system.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace dlfs::fs {

// The name dlfsd mounts under: fsname (the mount's source) and subtype, so
// that the mount table lists a DLFS mount as source "dlfs", type "fuse.dlfs".
inline constexpr std::string_view kMountName = "dlfs";

struct MountEntry {
  int id = 0;
  int parent = 0;
  std::string mount_point;  // unescaped ("\040" in the table is a space)
  std::string fstype;       // "fuse.dlfs", "tmpfs", "ext4", ...
  std::string source;       // "dlfs", "/dev/sda1", "tmpfs", ...
  unsigned dev_major = 0;   // st_dev of its files ("0:53"); for FUSE the minor
  unsigned dev_minor = 0;   // is the connection's number in /sys/fs/fuse/connections
};

// Every line of mountinfo text that has its shape (ids, mount point, the "-"
// separator, type and source); other lines are skipped.
std::vector<MountEntry> parse_mountinfo(std::string_view text);

// The mount a lookup of `path` lands in when several are stacked there: the
// one no other mount at `path` was mounted on top of. None: nothing is mounted
// at `path` itself.
std::optional<MountEntry> topmost_mount_at(const std::vector<MountEntry>& table, const std::string& path);

// Whether dlfsd made this mount (source and type from kMountName; "fuse" with
// source "dlfs" where the kernel keeps no subtype).
bool is_dlfs_mount(const MountEntry& m);

// /proc/self/mountinfo, parsed.
Result<std::vector<MountEntry>> read_mountinfo();

}  // namespace dlfs::fs
