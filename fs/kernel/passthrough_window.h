// PassthroughWindow: FUSE passthrough while datasets load, as a state
// machine. The window is open while INIT agreed on passthrough and a dataset
// loads with it (RawFiles::loading_with_passthrough); then an OPEN of a raw
// file not in memory yet names its backend file (a backing file,
// fs/kernel/backing_files.h) and the kernel reads it without dlfsd. The
// window closes for good, once: when every dataset is loaded (the first
// open after that finds it so), or when the kernel refuses a backing file
// (not root, say). Files kept open for OPENs that will not come are closed
// then. Outside the window opens are answered as without passthrough.
//
// Thread safety: every method may run concurrently.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "fs/kernel/backing_files.h"
#include "fs/kernel/kernel_inodes.h"
#include "fs/kernel/raw_files.h"
#include "fs/kernel/wire/fuse_wire.h"

namespace dlfs::fs {

class PassthroughWindow {
 public:
  // What a prefetch reads of a file passed through: the first MiB, what one
  // read request asks for at most.
  static constexpr off_t kPrefetchBytes = 1 << 20;

  PassthroughWindow(const RawFiles& raw, KernelInodes& inodes, const PassthroughWire& wire)
      : raw_(raw), wire_(wire), backing_(inodes), prefetched_(inodes) {}
  // Once mounted: how backing files are registered (fs/kernel/wire/fuse_wire.h).
  void set_registrar(BackingRegistrar r) { backing_.set_registrar(std::move(r)); }

  // Whether opens still get real replies for passthrough; the first call
  // after the last load ended closes the window.
  bool open();
  bool over() const { return over_.load(std::memory_order_acquire); }
  // Whether the kernel will pass `ino` through if it is opened now.
  bool would_pass_through(uint64_t ino) const;
  // A name just looked up that an open will pass through: its backend read
  // starts now, and the file is kept for that OPEN (a network file system's
  // open is a round trip).
  void prefetch_at_lookup(uint64_t ino);
  // An open of raw file `ino` in the window: from its backend file if it is
  // not wholly in memory yet, else ordinary; the inode's other open files
  // decide first. `read_ahead`: its LOOKUP already started the backend read.
  BackingFiles::Open open_raw(uint64_t ino, bool* read_ahead);
  void release(uint64_t ino, OpenMode mode) { backing_.release(ino, mode); }

  nlohmann::json stats() const;

 private:
  void close_window(bool warn, const std::string& why);

  const RawFiles& raw_;
  const PassthroughWire& wire_;
  BackingFiles backing_;
  PrefetchedFiles prefetched_;
  std::atomic<bool> over_{false};
};

}  // namespace dlfs::fs
