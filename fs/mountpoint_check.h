// Checks on a mountpoint before anything is mounted, so that a bad one gets
// one clear line instead of a half-mounted daemon.
#pragma once

#include <string>

#include "common/status.h"

namespace dlfs::fs {

// Returns the absolute path of a mountpoint that exists, is a directory, is
// empty and is not already a mountpoint; otherwise an error naming it.
Result<std::string> check_mountpoint(const std::string& path);

}  // namespace dlfs::fs
