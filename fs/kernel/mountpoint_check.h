// Checks on a mountpoint before anything is mounted, so that a bad one gets
// one clear line instead of a half-mounted daemon; and the recovery of a
// mountpoint that a dlfsd which died (SIGKILL, OOM, a crash) left behind.
//
// A daemon that dies leaves its FUSE mount in place, answering "Transport
// endpoint is not connected" (ENOTCONN) to every request. What is mounted at
// the path decides what happens:
//   nothing                        -> the usual checks (a directory, empty)
//   another file system (tmpfs...) -> refused, named, left alone
//   a DLFS mount that answers      -> refused: another dlfsd serves it
//   a DLFS mount, no answer in time-> refused: maybe a stopped daemon, not ours to judge
//   a DLFS mount, ENOTCONN         -> dead: lazily unmounted (logged), then the usual checks
#pragma once

#include <chrono>
#include <functional>
#include <optional>
#include <string>

#include "common/status.h"
#include "fs/kernel/mountinfo.h"

namespace dlfs::fs {

// How long a DLFS mount has to answer the liveness probe (a statfs). A live
// daemon answers at once; one that does not may be stopped, not dead.
inline constexpr std::chrono::seconds kMountProbeTimeout{5};

// What a statfs of a mount gave within the probe's deadline.
struct MountProbe {
  enum class Answer { answers, not_connected, no_answer, error };
  Answer answer = Answer::answers;
  int err = 0;  // the errno, for Answer::error
};

// What to do with the mount found at a mountpoint.
struct MountVerdict {
  enum class Action { mount, unmount_dead, refuse };
  Action action = Action::mount;
  std::string why;  // the refusal (Action::refuse) or what is unmounted (Action::unmount_dead)
};

// The decision, without side effects: `top` is what is mounted at `path`
// (none: nothing); `probe` asks that mount whether it answers and is called
// only for a DLFS mount (another file system is never touched).
MountVerdict judge_mountpoint(const std::string& path, const std::optional<MountEntry>& top,
                              const std::function<MountProbe()>& probe);

// Asks the mount at `path` for its statistics, waiting at most `timeout` (the
// asking thread is left behind if the mount never answers).
MountProbe probe_mount(const std::string& path, std::chrono::milliseconds timeout);

// Returns the absolute path of a mountpoint that exists, is a directory, is
// empty and is not already a mountpoint, after unmounting (lazily, logged) a
// dead DLFS mount found there; otherwise an error naming it and what is wrong.
Result<std::string> check_mountpoint(const std::string& path);

}  // namespace dlfs::fs
