// Kernel readahead of a FUSE mount.
//
// The kernel reads a FUSE file through the page cache in requests no larger
// than the mount's readahead window, which starts at the bdi default (128 KiB)
// and which the INIT handshake may lower but never raise. To get 1 MiB
// requests the window must be raised through sysfs (root only) after INIT:
// /sys/class/bdi/<major>:<minor>/read_ahead_kb of the mount's device.
#pragma once

#include <string>

#include "common/status.h"

namespace dlfs::fs {

// Waits until the mount at `mountpoint` answers (stat), then sets its
// readahead window to `kib`. Errors name the sysfs path.
Status set_mount_readahead(const std::string& mountpoint, unsigned kib);

}  // namespace dlfs::fs
