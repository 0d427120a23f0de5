// The libfuse3 low-level callbacks: a thin translation from FUSE requests to
// Namespace calls and from results to replies. No logic lives here, and no
// exception leaves a callback (they are C callbacks).
#pragma once

#include <fuse_lowlevel.h>

#include "fs/kernel/fuse_context.h"

namespace dlfs::fs {

// The operation table; userdata must be a FuseContext*.
const fuse_lowlevel_ops& fuse_operations();

}  // namespace dlfs::fs
