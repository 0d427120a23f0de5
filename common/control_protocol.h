// The control protocol between dlfs-ctl and dlfsd.
//
// A Unix stream socket; newline-delimited JSON. The client sends one request
//   {"cmd": "status" | "stats" | "verify" | "unmount", "dataset": "..."}
// and reads zero or more {"progress": {...}} lines, then exactly one final
//   {"ok": true, "result": {...}}  or  {"ok": false, "error": "...", "errno": N}.
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace dlfs {

inline constexpr size_t kMaxControlLine = 1 << 20;  // requests and responses

// Where the daemon for `mountpoint` listens by default:
// /run/dlfs/<mountpoint, '/' -> '-'>.sock as root, else under $XDG_RUNTIME_DIR
// or /tmp/dlfs-<uid>/. "/mnt/dlfs" -> "/run/dlfs/mnt-dlfs.sock".
std::string default_control_socket(const std::string& mountpoint);
// The client socket's default (docs/client-protocol.md): every user must
// reach it, so as root it is not in the control directory (0700) but in
// /run/dlfs-client (0755); otherwise beside the control socket.
std::string default_client_socket(const std::string& mountpoint);
std::string default_control_dir();

// The JSON text of `j` (one line, or indented by `indent`), for the control
// socket and the stats file. Strings that are not UTF-8 (a backend path, a
// peer's message) would make nlohmann's dump() throw and the whole answer
// fail: their bad bytes become U+FFFD instead.
std::string json_text(const nlohmann::json& j, int indent = -1);

// Writes all of `line` plus '\n' (handles EINTR and partial writes; no SIGPIPE).
Status write_line(int fd, const std::string& line);

// Reads one line (without '\n') of at most max_bytes into `line`, keeping
// what follows in `pending` for the next call. EOF before a newline is an error.
Status read_line(int fd, std::string& pending, std::string& line, std::chrono::milliseconds timeout,
                 size_t max_bytes = kMaxControlLine);

// Connects, sends `request`, passes progress objects to on_progress and
// returns the final "result" (or the daemon's error as a Status).
Result<nlohmann::json> control_call(const std::string& socket_path, const nlohmann::json& request,
                                    const std::function<void(const nlohmann::json&)>& on_progress,
                                    std::chrono::milliseconds timeout);

}  // namespace dlfs
