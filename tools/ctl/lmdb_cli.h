// `dlfs-ctl lmdb ingest|sidecar|verify|show`: LMDB dataset tooling that
// works on the files directly (no daemon, no control socket).
#pragma once

#include <CLI/CLI.hpp>

namespace dlfs::ctl {

// Registers the `lmdb` subcommand on `app`. Its callbacks run during parsing
// and store the process exit code in `exit_code` (0 ok, 1 failed, 2 usage).
void add_lmdb_commands(CLI::App& app, int& exit_code);

}  // namespace dlfs::ctl
