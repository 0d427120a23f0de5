// Audience: who may read what DLFS makes of a dataset (everything under
// <dataset>/epochs/: views, index files, directory views, opportunistic
// streams; and the dataset's part of /.dlfs/stats).
//
// Why: a view holds the bytes and names of backend files. A root dlfsd with
// allow_other serves every local user, so a view readable by all would hand
// out a 0600 file's bytes and the names inside a 0700 directory. A view is
// not one backend file, so it gets the owner, group and read bits of the
// dataset as a whole, and the kernel checks them at every open, listing and
// xattr (the mount has default_permissions).
//
// By default: the owner and group of the backend directory, and a class
// (that owner, members of that group, every other user) may read only if it
// can read every file of the dataset on the backend: search on each
// directory above the file (up to /, above the backend directory too) and
// read on the file. Unknown group memberships count against a class (a
// member of the group could also be in the file's group, or own it), so the
// views are never more open than the backend. Config keys view_owner,
// view_group and view_mode override it; one more open than the backend
// says so in the log and in `why`.
//
// raw/ keeps each backend file's own owner, group and mode
// (fs/namespace/namespace.cc); its top directory also loses the classes the
// backend directory's parents keep out (`raw_root_classes`).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "fs/config/config.h"
#include "provenance/manifest.h"

namespace dlfs::fs {

// Who asks: a FUSE request's caller (uid, gid and supplementary groups).
struct Reader {
  uint32_t uid = 0, gid = 0;
  std::vector<uint32_t> groups;
};

// Classes, as one bit each (the order of mode's digits).
inline constexpr unsigned kOwnerClass = 4, kGroupClass = 2, kOtherClass = 1, kAllClasses = 7;

struct Audience {
  uint32_t uid = 0, gid = 0;
  uint32_t mode = 0444;  // read bits of view files
  bool configured = false;  // view_mode was set (else derived)
  // The classes the backend lets read every file (kOwnerClass | ...).
  unsigned backend_classes = kAllClasses;
  // Who, in words: "everyone", "user alice (1000), group staff (50)", "root only".
  std::string readers;
  // Why: "derived from the backend: group staff (50) cannot read raw/a/x.jpg
  // (-rw------- 1000:50)", or "configured: view_mode 0440".
  std::string why;
  // The classes that may search the backend directory's parents (raw/'s top
  // directory keeps only these).
  unsigned raw_root_classes = kAllClasses;

  uint32_t file_mode() const { return mode & 0444; }
  uint32_t dir_mode() const { return file_mode() | (file_mode() >> 2); }  // r-x where r--
  // The kernel's rule (generic_permission) for a view file: root always;
  // the owner by the owner's bit, a group member by the group's, else other.
  bool may_read(const Reader& r) const;
  // Configured to let in a class the backend keeps out of some file.
  bool more_open_than_backend() const;
};

// The dataset's audience from its config and its scanned backend.
Result<Audience> audience_of(const DatasetConfig& config, const provenance::Manifest& manifest);

}  // namespace dlfs::fs
