// dlfs-ctl's exit codes, for every command: 0 done, 1 the check or the
// operation failed (a bad record, a daemon that said no), 2 a usage error.
#pragma once

namespace dlfs::ctl {

inline constexpr int kOk = 0;
inline constexpr int kFailed = 1;
inline constexpr int kUsage = 2;

}  // namespace dlfs::ctl
