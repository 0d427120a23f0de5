// The options and subcommands of a CLI11 app as man page sections
// (common/roff.h): dlfsd(8) and dlfs-ctl(8) list exactly what their --help
// lists, with the same descriptions. Linked only into those programs (the
// libraries need no CLI11).
#pragma once

#include <string>

#include "common/roff.h"

namespace CLI {
class App;
}  // namespace CLI

namespace dlfs::roff {

// The options of `app` (not its subcommands'), group by group in --help's
// order: a .TP each with its names, its value's type, its default when CLI11
// has one and its description. A group other than CLI11's default
// ("Options") gets a .SS heading with its name. Hidden options (no group) are
// left out, and so is the help flag unless `with_help`.
void add_options(Page& page, const CLI::App& app, bool with_help);

// Every subcommand of `app`, depth first: a .SS with its path and usage
// ("lmdb ingest [OPTIONS] SRC DEST"), its description, its arguments and
// its options (the help flag aside).
void add_subcommands(Page& page, const CLI::App& app);

// What follows the program's name on a usage line: "[OPTIONS] SRC DEST COMMAND".
std::string usage(const CLI::App& app);

}  // namespace dlfs::roff
