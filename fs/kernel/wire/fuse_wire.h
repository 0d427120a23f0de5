// What dlfsd adds on the FUSE wire that libfuse 3.14 cannot say.
//
// libfuse 3.14 (Debian 12) predates FUSE passthrough (3.16), FUSE over
// io_uring (3.18) and never writes FUSE_PARALLEL_DIROPS into its INIT reply.
// It does let the daemon supply the functions that read requests and write
// replies (fuse_session_custom_io), so this module does those replies' extra
// fields on the wire, nothing else:
//   * INIT request: whether the kernel offers FUSE_PASSTHROUGH and
//     FUSE_OVER_IO_URING (flags2), recorded in the session's WireState;
//   * INIT reply: FUSE_PARALLEL_DIROPS; FUSE_PASSTHROUGH with a stack depth
//     of 1 (backing files may not be on another passthrough mount) when
//     op_init asked for it; FUSE_OVER_IO_URING when op_init asked for it,
//     and once the kernel took that reply, the io_uring queues start;
//   * OPEN reply: one sent through reply_open_passthrough() gets
//     FOPEN_PASSTHROUGH and its backing id (fs/kernel/backing_files.h);
//   * a reply to a request taken from an io_uring entry goes to that entry
//     (FuseUring::deliver, fs/kernel/wire/fuse_uring.h), every other one to /dev/fuse.
// Replies are written on the thread that calls fuse_reply_*, so thread-locals
// say which reply to patch. Everything else passes through read(2)/writev(2)
// untouched.
//
// With it go the /dev/fuse ioctls that register backing files
// (kernel_registrar) and the io_uring queues (fs/kernel/wire/fuse_uring.h):
// this folder is what a libfuse with passthrough and io_uring (3.18) makes
// unnecessary, used only by fs/kernel/kernel_session.cc and the callbacks'
// INIT and passthrough OPEN replies (fs/kernel/fuse_ops.cc).
//
// Thread safety: the hooks are reentrant.
#pragma once

#include <sys/uio.h>

#include <atomic>
#include <cstdint>

#include <fuse_lowlevel.h>

#include "fs/kernel/backing_files.h"
#include "fs/kernel/wire/fuse_uring.h"

namespace dlfs::fs {


// What the kernel and the daemon agreed at INIT about passthrough (written by the hooks).
struct PassthroughWire {
  bool wanted = false;                     // config: use passthrough when offered
  std::atomic<bool> offered{false};        // the INIT request offered FUSE_PASSTHROUGH
  std::atomic<bool> negotiated{false};     // the INIT reply asked for it (the kernel then uses it)
};

// What the hooks read and write for one session.
struct WireState {
  PassthroughWire passthrough;
  UringWire uring;
  // The io_uring queues once started (null until then, and after the loop ended).
  std::atomic<FuseUring*> queues{nullptr};
};

// The session's userdata derives from WireUser and is handed to libfuse as a
// WireUser*: the hooks, which get only that pointer, find their state in it.
struct WireUser {
  WireState wire;
};

// The custom I/O for fuse_session_custom_io; the session's userdata must be a
// WireUser* (above). A reply to a request taken from an io_uring entry goes
// to that entry (FuseUring::deliver), every other one to /dev/fuse.
fuse_custom_io wire_io();

// Called in op_init, on the thread that will write the INIT reply: patch it.
void ask_passthrough_in_init_reply();
// The same for FUSE over io_uring (fs/kernel/wire/fuse_uring.h): the reply asks for it,
// and once the kernel took it the context's uring_wire.on_negotiated runs.
void ask_uring_in_init_reply();
// And FUSE_PARALLEL_DIROPS, which libfuse 3.14 takes into `want` by default
// but never puts in its INIT reply: without it the kernel sends one LOOKUP at
// a time per directory (readers of one directory wait in fuse_lock_inode).
void ask_parallel_dirops_in_init_reply();

// fuse_reply_open, with FOPEN_PASSTHROUGH and `backing_id` added on the wire.
int reply_open_passthrough(fuse_req_t req, const fuse_file_info* fi, int32_t backing_id);

// Backing files registered with the connection through the /dev/fuse ioctls
// on `fuse_fd`, the session's descriptor (FUSE_DEV_IOC_BACKING_OPEN/CLOSE:
// root only).
BackingRegistrar kernel_registrar(int fuse_fd);

}  // namespace dlfs::fs
