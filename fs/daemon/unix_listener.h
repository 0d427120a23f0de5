// A listening Unix socket at a path, for the control and client sockets:
// its directory made (or checked: nobody else may swap the socket), a stale
// socket of a dead daemon replaced, one a live daemon answers on refused,
// the socket file created with `mode` and never open to others before.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <functional>
#include <string>

#include "common/status.h"
#include "common/unique_fd.h"

namespace dlfs::fs {

struct UnixListenerOptions {
  int type = 0;                // SOCK_STREAM or SOCK_SEQPACKET
  mode_t mode = 0600;          // of the socket file
  mode_t dir_mode = 0700;      // of its directory, when created
  int backlog = 16;
  std::string what;            // "control socket", for errors
};

Result<UniqueFd> listen_unix(const std::string& path, const UnixListenerOptions& options);

// Accepts on `listen_fd` until `wake_fd` is readable or `stopping` is set:
// each connection is served by serve(fd) on a detached thread of its own,
// which closes the descriptor after; with `max` threads already serving,
// refuse(fd) answers it and it is closed at once. `active` counts the
// threads (the owner waits for it to reach 0 before going away).
void accept_connections(int listen_fd, int wake_fd, const std::atomic<bool>& stopping, std::atomic<int>& active,
                        int max, const std::function<void(int)>& refuse, const std::function<void(int)>& serve);

}  // namespace dlfs::fs
