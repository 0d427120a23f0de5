#include "common/cli_man.h"

#include <vector>

#include <CLI/CLI.hpp>

namespace dlfs::roff {
namespace {

// CLI11's name of the group options go to unless given another.
constexpr const char* kDefaultGroup = "Options";

// Descriptions are broken into lines for --help's columns; a page fills its
// own lines, so the breaks (and the indent after them) become one space.
std::string one_line(const std::string& text) {
  std::string out;
  bool blank = false;
  for (char c : text) {
    if (c == '\n' || c == ' ' || c == '\t') {
      blank = !out.empty();
      continue;
    }
    if (blank) out += ' ';
    blank = false;
    out += c;
  }
  return out;
}

bool is_help(const CLI::App& app, const CLI::Option* opt) {
  return opt == app.get_help_ptr() || opt == app.get_help_all_ptr();
}

// "-m, --mountpoint TEXT" in bold and italic; a positional: its name.
std::string option_tag(const CLI::Option& opt) {
  if (opt.get_positional()) return italic(opt.get_name(true, false));
  std::string tag;
  for (const auto& s : opt.get_snames()) tag += (tag.empty() ? "" : ", ") + bold("-" + s);
  for (const auto& l : opt.get_lnames()) tag += (tag.empty() ? "" : ", ") + bold("--" + l);
  if (opt.get_type_size() != 0 && !opt.get_type_name().empty()) tag += " " + italic(opt.get_type_name());
  return tag;
}

std::string option_text(const CLI::Option& opt) {
  std::string text = one_line(opt.get_description());
  if (!opt.get_default_str().empty()) text += " (default: " + opt.get_default_str() + ")";
  if (opt.get_required()) text += " (required)";
  return text;
}

// The options and positionals of `app` that a page lists, in --help's order.
std::vector<const CLI::Option*> listed(const CLI::App& app, bool positional, const std::string& group, bool with_help) {
  return app.get_options([&](const CLI::Option* opt) {
    return !opt->get_group().empty() && opt->get_positional() == positional &&
           (positional || opt->get_group() == group) && (with_help || !is_help(app, opt));
  });
}

void add_subcommands_of(Page& page, const CLI::App& app, const std::string& path) {
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->get_name().empty() || sub->get_disabled()) continue;
    const std::string name = path.empty() ? sub->get_name() : path + " " + sub->get_name();
    const std::string args = usage(*sub);
    page.subheading(args.empty() ? name : name + " " + args);
    page.para(one_line(sub->get_description()));
    for (const CLI::Option* opt : listed(*sub, true, "", false)) page.tagged(option_tag(*opt), option_text(*opt));
    for (const std::string& group : sub->get_groups())
      for (const CLI::Option* opt : listed(*sub, false, group, false)) page.tagged(option_tag(*opt), option_text(*opt));
    add_subcommands_of(page, *sub, name);
  }
}

}  // namespace

void add_options(Page& page, const CLI::App& app, bool with_help) {
  for (const CLI::Option* opt : listed(app, true, "", with_help)) page.tagged(option_tag(*opt), option_text(*opt));
  for (const std::string& group : app.get_groups()) {
    const auto options = listed(app, false, group, with_help);
    if (options.empty()) continue;
    if (group != kDefaultGroup) page.subheading(group);
    for (const CLI::Option* opt : options) page.tagged(option_tag(*opt), option_text(*opt));
  }
}

void add_subcommands(Page& page, const CLI::App& app) { add_subcommands_of(page, app, ""); }

std::string usage(const CLI::App& app) {
  const bool has_options = !app.get_options([&](const CLI::Option* o) {
                                 return !o->get_positional() && !o->get_group().empty() && !is_help(app, o);
                               }).empty();
  std::string out = has_options ? "[OPTIONS]" : "";
  for (const CLI::Option* opt : listed(app, true, "", false)) {
    const std::string name = opt->get_name(true, false);
    out += (out.empty() ? "" : " ") + (opt->get_required() ? name : "[" + name + "]");
  }
  const auto subs = app.get_subcommands([](const CLI::App* s) { return !s->get_name().empty() && !s->get_disabled(); });
  if (!subs.empty())
    out += std::string(out.empty() ? "" : " ") + (app.get_require_subcommand_min() > 0 ? "COMMAND" : "[COMMAND]");
  return out;
}

}  // namespace dlfs::roff
