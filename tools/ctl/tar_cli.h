// `dlfs-ctl tar show DIR`: the tar shards (WebDataset, format tar) of a
// dataset tree, scanned as dlfsd scans them at load, one line per shard; a
// bad shard is reported by name and byte offset, and the others still are.
// Works on the files directly (no daemon, no control socket).
#pragma once

#include <CLI/CLI.hpp>

namespace dlfs::ctl {

// Registers the `tar` subcommand on `app`. Its callbacks run during parsing
// and store the process exit code in `exit_code` (0 ok, 1 a bad shard, 2 usage).
void add_tar_commands(CLI::App& app, int& exit_code);

}  // namespace dlfs::ctl
