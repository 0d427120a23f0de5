#include "fs/config/config_man.h"

#include "common/roff.h"
#include "fs/config/config_keys.h"

namespace dlfs::fs {
namespace {

constexpr const char* kDescription =
    "dlfsd(8) reads its datasets and settings from a TOML file given with --config; the service unit "
    "dlfsd@NAME.service reads /etc/dlfs/NAME.toml. The file has a [daemon], a [cache] and a [cluster] table and "
    "one [[dataset]] table per dataset, each with the keys listed below. Every key is optional but mountpoint and, "
    "in each [[dataset]], name and backend. A key the table does not list is an error that names it and lists the "
    "valid ones; so is a value out of its range.\n"
    "\n"
    "Flags given to dlfsd override the file's values. Without a file, --backend and the dataset flags describe "
    "one dataset.\n"
    "\n"
    "Sizes are a number of bytes or text with a binary unit (\"8MiB\", \"1.5GiB\"); a list is a TOML array of "
    "strings, and its flag takes the items comma-separated.";

constexpr const char* kExample =
    "[daemon]\n"
    "mountpoint = \"/mnt/dlfs\"\n"
    "log_level = \"info\"\n"
    "\n"
    "[cache]\n"
    "memory_budget = \"50%\"           # of RAM, or a size: \"64GiB\"\n"
    "\n"
    "[cluster]\n"
    "peers = [\"10.0.0.1\", \"10.0.0.2\"]   # none: from Slurm\n"
    "token_file = \"/etc/dlfs/job.token\" # mode 0600, on every node\n"
    "\n"
    "[[dataset]]\n"
    "name = \"imagenet\"\n"
    "backend = \"/lustre/datasets/imagenet/train\"\n"
    "seed = 1234\n"
    "\n"
    "[[dataset]]\n"
    "name = \"cifar10\"\n"
    "backend = \"/lustre/datasets/cifar-10-batches-bin\"\n"
    "format = \"fixed\"\n"
    "record_size = 3073\n";

constexpr const char* kFiles =
    "/etc/dlfs/NAME.toml is the config of the service instance dlfsd@NAME.service; /etc/dlfs/NAME.env its "
    "optional environment (UCX_TLS, UCX_NET_DEVICES), /etc/dlfs/NAME.token its job token. The examples "
    "example-job.toml and example-cluster.toml are in /usr/share/doc/dlfs/examples when installed from the "
    "Debian package (deploy/ in the source tree).";

const char* heading(Section section) {
  switch (section) {
    case Section::daemon: return "[daemon]";
    case Section::cache: return "[cache]";
    case Section::cluster: return "[cluster]";
    case Section::dataset: return "[[dataset]]";
  }
  return "?";
}

// "Flag: -m, --mountpoint" ("--no-readahead (sets false)" for a flag without a value).
std::string flag_text(const ConfigKey& k) {
  if (k.flag.empty()) return "No flag.";
  std::string names;
  for (size_t b = 0; b < k.flag.size();) {
    size_t e = k.flag.find(',', b);
    if (e == std::string::npos) e = k.flag.size();
    names += (names.empty() ? "" : ", ") + k.flag.substr(b, e - b);
    b = e + 1;
  }
  if (k.kind == Kind::boolean) names += k.flag_sets ? " (sets true)" : " (sets false)";
  return "Flag: " + names + ".";
}

// As the Default column of docs/configuration.md says it.
std::string default_text_of(const ConfigKey& k) {
  if (k.required) return k.default_note.empty() ? "Required." : "Required (flags: " + k.default_note + ").";
  const std::string value = default_text(k);
  return value.empty() ? "Default: empty." : "Default: " + value + ".";
}

void add_keys(roff::Page& page) {
  bool first = true;
  Section section = Section::daemon;
  for (const ConfigKey& k : config_keys()) {
    if (first || k.section != section) page.subheading(heading(k.section));
    first = false;
    section = k.section;
    std::string text = meaning(k);
    if (!text.empty() && text.back() != '.') text += '.';
    page.tagged(roff::bold(k.key) + " (" + roff::escape(type_text(k)) + ")",
                text + " " + default_text_of(k) + " " + flag_text(k));
  }
}

}  // namespace

std::string config_man_page(std::string_view version) {
  roff::Page page("dlfs.toml", 5, "DLFS " + std::string(version), "DLFS Manual");
  page.name_line("dlfs.toml", "configuration file of dlfsd, the DLFS dataset daemon");
  page.heading("SYNOPSIS");
  page.roff_line(roff::italic("/etc/dlfs/NAME.toml"));
  page.roff_line(".br");
  page.roff_line(roff::bold("dlfsd --config") + " " + roff::italic("FILE"));
  page.heading("DESCRIPTION");
  page.para(kDescription);
  page.heading("KEYS");
  page.para("Each key with its type; its default, or Required; its flag; and its meaning. A key some dataset "
            "formats only read says so: the others refuse it.");
  add_keys(page);
  page.heading("EXAMPLE");
  page.example(kExample);
  page.heading("FILES");
  page.para(kFiles);
  page.heading("SEE ALSO");
  page.roff_line(roff::bold("dlfsd") + "(8), " + roff::bold("dlfs-ctl") + "(8); " +
                 roff::escape("docs/configuration.md and docs/deploy.md (in /usr/share/doc/dlfs when installed "
                              "from the Debian package)."));
  return page.str();
}

}  // namespace dlfs::fs
