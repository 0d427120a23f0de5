#include "client/discover.h"

#include <sys/xattr.h>

#include <cstdlib>
#include <cstring>

#include "client/failure.h"

namespace dlfs::client {
namespace {

constexpr const char* kSocketAttr = "user.dlfs.client_socket";
constexpr const char* kDatasetAttr = "user.dlfs.dataset";

[[noreturn]] void attr_failed(const std::string& file, const char* name, int e) {
  std::string what = file + ": cannot read " + name + ": " + std::strerror(e);
  if (e == ENODATA && std::strcmp(name, kSocketAttr) == 0)
    fail(e, file + " has no " + name + ": dlfsd serves no client socket for this mount (client_socket = \"off\"); "
                   "read through the mount");
  if (e == ENODATA || e == ENOTSUP)
    fail(e, what + " (is this a dataset directory of a DLFS mount?)");
  if (e == ENOENT || e == ENOTCONN || e == ECONNABORTED)
    lost(e, what + " (is this a dataset directory of a DLFS mount, and is dlfsd running?)");
  fail(e, what);
}

std::string read_attr(const std::string& file, const char* name) {
  // Asks the size first: the daemon's value may be any length (a socket path
  // is short, a dataset name need not be).
  for (int attempt = 0; attempt < 4; ++attempt) {
    ssize_t size = ::getxattr(file.c_str(), name, nullptr, 0);
    if (size < 0) attr_failed(file, name, errno);
    std::string value(static_cast<size_t>(size), '\0');
    ssize_t got = ::getxattr(file.c_str(), name, value.data(), value.size());
    if (got < 0 && errno == ERANGE) continue;  // it grew in between
    if (got < 0) attr_failed(file, name, errno);
    value.resize(static_cast<size_t>(got));
    while (!value.empty() && value.back() == '\0') value.pop_back();
    if (value.empty()) fail(EPROTO, file + ": " + name + " is empty");
    return value;
  }
  fail(EAGAIN, file + ": " + name + " kept changing size while being read");
}

}  // namespace

Endpoint discover(const std::string& dataset_dir) {
  std::string dir = dataset_dir;
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  const std::string file = dir + "/epochs/0/1/0.index";
  Endpoint e;
  const char* env = std::getenv("DLFS_CLIENT_SOCKET");
  e.socket_path = env != nullptr && *env != '\0' ? std::string(env) : read_attr(file, kSocketAttr);
  e.dataset = read_attr(file, kDatasetAttr);
  return e;
}

}  // namespace dlfs::client
