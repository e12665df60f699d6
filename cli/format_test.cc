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

}  // namespace
}  // namespace forkguard::cli
