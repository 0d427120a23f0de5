// Finding dlfsd's client socket from a dataset directory of the mount
// (docs/client-protocol.md, "Finding the socket").
#pragma once

#include <string>

namespace dlfs::client {

struct Endpoint {
  std::string socket_path;
  std::string dataset;  // the name `open` wants
};

// Reads user.dlfs.client_socket and user.dlfs.dataset of
// <dataset_dir>/epochs/0/1/0.index; DLFS_CLIENT_SOCKET, when set, overrides
// the socket's path. Throws Failure naming the file and what is missing:
// ENODATA when the daemon serves no client socket. A mount that is not there
// (ENOTCONN, ENOENT: dlfsd restarting) is `lost`, so reconnects wait for it.
Endpoint discover(const std::string& dataset_dir);

}  // namespace dlfs::client
