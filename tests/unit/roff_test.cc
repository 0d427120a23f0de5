// common/roff.h: text that would be roff (a leading dot, a backslash, a
// minus, quotes, non-ASCII) comes out as literal text; pages are made of
// the man(7) macros. tests/man/check_man_pages.sh renders the real pages.
#include <string>

#include <gtest/gtest.h>

#include "common/roff.h"

namespace dlfs::roff {
namespace {

TEST(Roff, EscapesWhatRoffWouldRead) {
  EXPECT_EQ(escape("--mountpoint"), "\\-\\-mountpoint");
  EXPECT_EQ(escape("C:\\dir"), "C:\\edir");
  EXPECT_EQ(escape("it's `x`"), "it\\(aqs \\(gax\\(ga");
  EXPECT_EQ(escape("a \"quoted\" word"), "a \"quoted\" word");  // only macro arguments quote
  // A line starting with a control character would be a request.
  EXPECT_EQ(escape(".dlfs/stats"), "\\&.dlfs/stats");
  EXPECT_EQ(escape("x\n.y\n'z"), "x\n\\&.y\n\\(aqz");
  EXPECT_EQ(escape("a.b"), "a.b");
  // Leading blanks force a break: dropped; tabs become spaces.
  EXPECT_EQ(escape("one\n   two\tthree"), "one\ntwo three");
}

TEST(Roff, NonAsciiAsCodePoints) {
  EXPECT_EQ(escape("\xc3\xa9t\xc3\xa9"), "\\[u00E9]t\\[u00E9]");  // été
  EXPECT_EQ(escape("\xe2\x89\xa5 1"), "\\[u2265] 1");             // ≥
  EXPECT_EQ(escape("\xf0\x9f\x98\x80"), "\\[u1F600]");
  EXPECT_EQ(escape("\xff" "a"), "\\[uFFFD]a");                    // not UTF-8
  EXPECT_EQ(escape("\xe2\x89"), "\\[uFFFD]\\[uFFFD]");            // cut short
}

TEST(Roff, FontsKeepWordsWhole) {
  EXPECT_EQ(bold("--log-level"), "\\fB\\%\\-\\-log\\-level\\fR");
  EXPECT_EQ(italic("DIR"), "\\fI\\%DIR\\fR");
}

TEST(Roff, PageIsMacros) {
  Page page("dlfs-ctl", 8, "DLFS 1.0", "DLFS Manual");
  page.name_line("dlfs-ctl", "administer it");
  page.heading("SEE \"ALSO\"");
  page.para("one\nline\n\n.two");
  page.tagged(bold("-x"), "what x does");
  page.example("a\n\n  b");
  EXPECT_EQ(page.str(),
            ".TH \"DLFS\\-CTL\" 8 \"\" \"DLFS 1.0\" \"DLFS Manual\"\n"
            ".nh\n.ad l\n"
            ".SH NAME\ndlfs\\-ctl \\- administer it\n"
            ".SH \"SEE \\(dqALSO\\(dq\"\n"
            ".PP\none\nline\n"
            ".PP\n\\&.two\n"
            ".TP\n\\fB\\%\\-x\\fR\nwhat x does\n"
            ".PP\n.RS 4\n.nf\na\n.sp\n  b\n.fi\n.RE\n");
}

}  // namespace
}  // namespace dlfs::roff
