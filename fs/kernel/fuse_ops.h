// The libfuse3 low-level callbacks: a thin translation from FUSE requests to
// Namespace calls and the kernel side's parts (fs/kernel/session_state.h),
// and from results to replies. No exception leaves a callback (they are C
// callbacks).
#pragma once

#include <fuse_lowlevel.h>

namespace dlfs::fs {

// The operation table; the session's userdata must be a SessionState handed
// over as a WireUser* (fs/kernel/wire/fuse_wire.h).
const fuse_lowlevel_ops& fuse_operations();

}  // namespace dlfs::fs
