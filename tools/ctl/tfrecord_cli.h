// `dlfs-ctl tfrecord show|verify|index`: TFRecord dataset tooling that works
// on the files directly (no daemon, no control socket).
#pragma once

#include <CLI/CLI.hpp>

namespace dlfs::ctl {

// Registers the `tfrecord` subcommand on `app`. Its callbacks run during
// parsing and store the process exit code in `exit_code` (0 ok, 1 failed).
void add_tfrecord_commands(CLI::App& app, int& exit_code);

}  // namespace dlfs::ctl
