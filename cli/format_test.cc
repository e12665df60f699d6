// The CLI's formatting helpers: the exact bytes the reports print.
#include "cli/format.h"

#include <string>

#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

TEST(Format, NumbersSizesDurations) {
  EXPECT_EQ(Hex(0), "0x0");
  EXPECT_EQ(Hex(0x7f3aU), "0x7f3a");
  EXPECT_EQ(Hex(UINT64_MAX), "0xffffffffffffffff");
  const unsigned char id[] = {0x00, 0x0f, 0xa5, 0xff};
  EXPECT_EQ(HexBytes(id, 4), "000fa5ff");
  EXPECT_EQ(HexBytes(id, 0), "");
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(1024), "1.0 KiB");
  EXPECT_EQ(FormatBytes(1536 * 1024), "1.5 MiB");
  EXPECT_EQ(FormatBytes(int64_t{3} << 30), "3.0 GiB");
  EXPECT_EQ(FormatMs(999), "999 ms");
  EXPECT_EQ(FormatMs(1250), "1.2 s");
  EXPECT_EQ(Plural(1, "process", "processes"), "1 process");
  EXPECT_EQ(Plural(0, "process", "processes"), "0 processes");
}

TEST(Format, Paths) {
  EXPECT_EQ(Basename("/lib/x86_64-linux-gnu/libc.so.6"), "libc.so.6");
  EXPECT_EQ(Basename("train.py"), "train.py");
  EXPECT_EQ(Basename("dir/"), "");
  EXPECT_EQ(Dirname("/usr/bin/forkguard"), "/usr/bin");
  EXPECT_EQ(Dirname("/forkguard"), "/");
  EXPECT_EQ(Dirname("forkguard"), ".");
}

TEST(Format, Columns) {
  EXPECT_EQ(DisplayWidth("x×8 …"), 5u);  // code points, not bytes
  EXPECT_EQ(Fit("abcdef", 6), "abcdef");
  EXPECT_EQ(Fit("abcdefgh", 6), "abcde…");
  EXPECT_EQ(Fit("××××××××", 4), "×××…");                      // never cuts inside a character
  EXPECT_EQ(FitLeft("/a/b/file.jsonl:3", 10), "…e.jsonl:3");  // 10 columns in all
  EXPECT_EQ(FitLeft("short", 10), "short");
  EXPECT_EQ(Wrap("  help: ", "        ", "one two three four", 16),
            "  help: one two\n        three\n        four\n");
  EXPECT_EQ(Wrap("x", "  ", "y", 10), "x y\n");  // `first` not ending in a space
  EXPECT_EQ(Wrap("", "  ", "averyveryverylongword", 8), "averyve…\n");
}

TEST(Format, EscapeTextKeepsTextAndEscapesControls) {
  EXPECT_EQ(EscapeText("trainer"), "trainer");
  EXPECT_EQ(EscapeText("x×8 … → é 日本"), "x×8 … → é 日本");  // valid UTF-8 stays
  EXPECT_EQ(EscapeText("a\\x1b"), "a\\x1b");                  // a backslash stays
  EXPECT_EQ(EscapeText("a\nb"), "a\\x0ab");
  EXPECT_EQ(EscapeText("a\r\t\x01\x7f"), "a\\x0d\\x09\\x01\\x7f");
  EXPECT_EQ(EscapeText("\x1b]0;title\x07\x1b[2J"), "\\x1b]0;title\\x07\\x1b[2J");
  EXPECT_EQ(EscapeText(std::string("a\0b", 3)), "a\\x00b");
  EXPECT_EQ(EscapeText("\xc2\x9b"
                       "31m"),
            "\\xc2\\x9b"
            "31m");                               // U+009B: a C1 CSI
  EXPECT_EQ(EscapeText("\xc2\xa0"), "\xc2\xa0");  // U+00A0 is text
  EXPECT_EQ(EscapeText("a\xe2\x80\xae"
                       "b"),
            "a\\xe2\\x80\\xae"
            "b");                                            // U+202E RLO
  EXPECT_EQ(EscapeText("\xe2\x80\xa8"), "\\xe2\\x80\\xa8");  // U+2028 LS
  EXPECT_EQ(EscapeText("\xe2\x81\xa6"), "\\xe2\\x81\\xa6");  // U+2066 LRI
  EXPECT_EQ(EscapeText("\xef\xbf\xbf"), "\\xef\\xbf\\xbf");  // U+FFFF
  // Not UTF-8: a stray byte, an overlong NUL, a surrogate, a cut sequence, beyond U+10FFFF.
  EXPECT_EQ(EscapeText("a\xff"
                       "b"),
            "a\\xff"
            "b");
  EXPECT_EQ(EscapeText("\xc0\x80"), "\\xc0\\x80");
  EXPECT_EQ(EscapeText("\xed\xa0\x80"), "\\xed\\xa0\\x80");
  EXPECT_EQ(EscapeText("\xe2\x80"), "\\xe2\\x80");
  EXPECT_EQ(EscapeText("\xf4\x90\x80\x80"), "\\xf4\\x90\\x80\\x80");
  EXPECT_EQ(EscapeText("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");  // U+1F600
  for (const char* s : {"a\nb\x1b", "\xff\xc2\x9b", "x\\x0a"})
    EXPECT_EQ(EscapeText(EscapeText(s)), EscapeText(s)) << s;  // once is enough
}

TEST(Format, LineMakersNeverStartANewLine) {
  EXPECT_EQ(Fit("prog\n::error::forged", 100), "prog\\x0a::error::forged");
  EXPECT_EQ(Fit("\x1b[2Jx", 6), "\\x1b[…");
  EXPECT_EQ(FitLeft("/a\r/b", 10), "/a\\x0d/b");
  EXPECT_EQ(Wrap("  note:", "    ", "one\ntwo \x1b[31m", 80), "  note: one\\x0atwo \\x1b[31m\n");
}

TEST(Format, MarkdownTextCannotForgeMarkup) {
  EXPECT_EQ(MarkdownText("3 processes (2 ranks) on 1 host, 4.0 KiB; copy-on-fork: no"),
            "3 processes (2 ranks) on 1 host, 4.0 KiB; copy-on-fork: no");
  EXPECT_EQ(MarkdownText("[click](https://evil.example)"), "\\[click\\](https://evil.example)");
  EXPECT_EQ(MarkdownText("![x](https://evil.example/i.png)"),
            "\\!\\[x\\](https://evil.example/i.png)");
  EXPECT_EQ(MarkdownText("a\rb\nc"), "a\\\\x0db\\\\x0ac");  // "\x0d": the backslash escaped
  EXPECT_EQ(MarkdownText("\\[x]"), "\\\\\\[x\\]");  // an escaped backslash, then an escaped '['
  EXPECT_EQ(MarkdownText("<img src=x> a|b `c` *d* _e_ ~f~ #g &amp; $h$"),
            "\\<img src=x\\> a\\|b \\`c\\` \\*d\\* \\_e\\_ \\~f\\~ \\#g \\&amp; \\$h\\$");
}

TEST(Format, MarkdownCodeSpans) {
  EXPECT_EQ(MarkdownCode("loader.cc:42"), "`loader.cc:42`");
  EXPECT_EQ(MarkdownCode("a`b"), "`` a`b ``");
  EXPECT_EQ(MarkdownCode("a``b"), "``` a``b ```");  // a longer fence than any run inside
  EXPECT_EQ(MarkdownCode("x|y"), "`x y`");
  EXPECT_EQ(MarkdownCode("a\r\nb"), "`a\\x0d\\x0ab`");
}

TEST(Format, XmlAndWorkflowCommandEscaping) {
  EXPECT_EQ(XmlText("a<b>&\"'"), "a&lt;b&gt;&amp;&quot;&apos;");
  // XML 1.0 forbids these characters, and invalid UTF-8 makes the document unreadable.
  EXPECT_EQ(XmlText("a\x01\x1b\xff\xef\xbf\xbe"), "a\\x01\\x1b\\xff\\xef\\xbf\\xbe");
  EXPECT_EQ(GithubCommandData("50% done"), "50%25 done");
  EXPECT_EQ(GithubCommandData("x\n::error::forged\r"), "x\\x0a::error::forged\\x0d");
  EXPECT_EQ(GithubCommandProperty("dir/a:b,c.py"), "dir/a%3Ab%2Cc.py");
  EXPECT_EQ(GithubCommandProperty("t%\n"), "t%25\\x0a");
}

}  // namespace
}  // namespace forkguard::cli
