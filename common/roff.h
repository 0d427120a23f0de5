// Manual pages in roff with the man(7) macros. DLFS's pages (dlfsd(8),
// dlfs-ctl(8), dlfs.toml(5)) are written by the programs themselves from the
// tables that drive their --help and docs/configuration.md (the CLI11 apps,
// the config key table), so that the pages cannot drift from the flags;
// `meson compile` runs them (docs/man/meson.build).
//
// Everything given as text is escaped here; only what the helpers below
// return (bold(), italic(), or Page::tagged's tag) is taken as roff.
#pragma once

#include <string>
#include <string_view>

namespace dlfs::roff {

// `text` as roff input: backslashes as \e, every '-' as \- (an ASCII minus:
// flags and paths copied from a page must work), quotes and backquotes as
// \(aq and \(ga (else groff prints typographic quotes), a line that would
// start with '.' or '\'' prefixed with \&, leading blanks of a line dropped
// (they would force a break), tabs as spaces, and every non-ASCII character
// as \[uXXXX] so that the page is ASCII whatever the locale it is built in.
std::string escape(std::string_view text);

// `text` escaped and set in bold or italic; `\%` first: never hyphenated, so
// a flag or key is found whole in the rendered page.
std::string bold(std::string_view text);
std::string italic(std::string_view text);

// A page, section by section. Prose (para, tagged's text) is escaped and
// filled: single newlines are spaces, an empty line starts a new paragraph.
class Page {
 public:
  // .TH NAME SECTION "" SOURCE MANUAL; name in lower case ("dlfsd").
  Page(std::string_view name, int section, std::string_view source, std::string_view manual);

  Page& heading(std::string_view title);     // .SH, upper case by convention ("OPTIONS")
  Page& subheading(std::string_view title);  // .SS
  Page& para(std::string_view text);         // .PP, then the text
  // The NAME line: "name \- what" (whatis and apropos read it).
  Page& name_line(std::string_view name, std::string_view what);
  // .TP: `tag_roff` (made with bold()/italic()/escape()) on its own line,
  // then `text` indented under it.
  Page& tagged(std::string_view tag_roff, std::string_view text);
  // Lines kept as they are (no filling), indented: commands, a config file.
  Page& example(std::string_view lines);
  // One line already in roff (made with the helpers above).
  Page& roff_line(std::string_view roff);

  const std::string& str() const { return out_; }

 private:
  void filled(std::string_view text);
  std::string out_;
};

}  // namespace dlfs::roff
