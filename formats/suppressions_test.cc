// The suppression file format: entries, canonical text, matching, and one error line per
// bad line naming the line and the valid keys.
#include "formats/suppressions.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "formats/suppressions_testing.h"

namespace forkguard {
namespace {

constexpr unsigned kSegv = 1, kCorrupt = 2, kInherited = 4;

TEST(SuppressionsTest, ParsesEntriesCommentsAndQuotes) {
  ParsedSuppressions p = ParseSuppressionText(
      "# known sites\n"
      "\n"
      "kind=child-segv,inherited-rdma frame=func:build_loader   # the loader\n"
      "kind=* frame=lib:libtorch* program=python3 rank=0-3,8\n"
      "  kind=inherited-rdma frame=\"file:my dir/train.py:88\" frame=\"func:a \\\"b\\\"\"\n");
  ASSERT_EQ(p.bad, 0) << (p.errors.empty() ? "" : p.errors[0].second);
  ASSERT_EQ(p.set->count, 3);
  const Suppression& a = p.set->entries[0];
  EXPECT_EQ(a.source_line, 3);
  EXPECT_EQ(a.kinds, kSegv | kInherited);
  EXPECT_STREQ(a.text, "kind=child-segv,inherited-rdma frame=func:build_loader");
  const Suppression& b = p.set->entries[1];
  EXPECT_EQ(b.kinds, kSuppressAllKinds);
  EXPECT_EQ(b.rank_count, 2);
  EXPECT_STREQ(b.text, "kind=* frame=lib:libtorch* program=python3 rank=0-3,8");
  const Suppression& c = p.set->entries[2];
  EXPECT_EQ(c.frames[0].line, 88);
  EXPECT_STREQ(c.frames[0].pattern, "my dir/train.py");
  EXPECT_STREQ(c.frames[1].pattern, "a \"b\"");
  EXPECT_STREQ(c.text,
               "kind=inherited-rdma frame=\"file:my dir/train.py:88\" frame=\"func:a \\\"b\\\"\"");
  // The canonical text reads back to the same entry.
  ParsedSuppressions again = ParseSuppressionText(std::string(c.text) + "\n");
  ASSERT_EQ(again.set->count, 1);
  EXPECT_STREQ(again.set->entries[0].text, c.text);
}

// Each bad line: one error line with its number and the valid keys; the file's good lines do
// not apply either (fail closed: a planted or mangled line never leaves its neighbours alone
// in force).
TEST(SuppressionsTest, BadLinesGetOneLineErrorsNamingTheLineAndTheKeys) {
  struct Case {
    std::string line;
    std::string what;
  } cases[] = {
      {"kind=child-segv frames=func:x", "unknown key \"frames\""},
      {"kind=child-segv frame=\"func:x", "unbalanced quote"},
      {"kind=child-segv frame=func:x\"y", "unbalanced quote"},
      {"kind=child-segv frame=func:", "empty match"},
      {"kind=child-segv frame=", "empty match"},
      {"kind= frame=func:x", "empty match"},
      {"kind=child-segv frame=func:x program=", "empty match"},
      {"kind=child-segv frame=file::12", "empty match"},
      {"kind=segv frame=func:x", "unknown verdict kind in \"segv\""},
      {"kind=child-segv frame=sym:x", "frame needs func:, lib: or file:"},
      {"frame=func:x", "entry without kind="},
      {"kind=child-segv", "entry without frame="},
      {"kind=child-segv frame=func:x rank=3-1", "bad rank list"},
      {"kind child-segv", "expected key=value"},
      {"kind=child-segv frame=\"func:a\\qb\"", "unknown escape"},
      {"kind=child-segv frame=\"func:a\\x00b\"", "bad escape"},
      {"kind=child-segv frame=\"func:a\\x4\"", "bad escape"},
      {"kind=child-segv frame=func:" + std::string(240, 'a'), "match too long"},
      {"kind=child-segv frame=func:" + std::string(266, 'a'), "too long"},
      {"kind=child-segv frame=func:" + std::string(400, 'a'), "value too long"},
  };
  for (const Case& c : cases) {
    ParsedSuppressions p = ParseSuppressionText("# header\nkind=* frame=func:good\n" + c.line +
                                                "\nkind=* frame=lib:x\n");
    ASSERT_EQ(p.errors.size(), 1u) << c.line;
    EXPECT_EQ(p.bad, 1);
    EXPECT_EQ(p.errors[0].first, 3) << c.line;
    const std::string& e = p.errors[0].second;
    EXPECT_EQ(e.find('\n'), std::string::npos) << e;
    EXPECT_NE(e.find(c.what), std::string::npos) << c.line << " -> " << e;
    EXPECT_NE(e.find("valid keys: kind="), std::string::npos) << e;
    EXPECT_NE(e.find("frame=func:NAME|lib:NAME|file:NAME[:LINE], program=NAME, rank="),
              std::string::npos)
        << e;
    EXPECT_EQ(p.set->count, 0) << c.line;
  }
}

// A pattern of up to 239 bytes is kept whole; one byte more is a bad line, never written past
// the pattern's field (which left the entry matching nothing, silently).
TEST(SuppressionsTest, LongestPatternsAreKeptAndLongerOnesAreBadLines) {
  std::string longest(239, 'f');
  ParsedSuppressions p =
      ParseSuppressionText("kind=* frame=func:" + longest + " frame=\"file:" + longest + ":7\"\n");
  ASSERT_EQ(p.bad, 0) << p.errors[0].second;
  ASSERT_EQ(p.set->count, 1);
  EXPECT_EQ(p.set->entries[0].frames[0].pattern, longest);
  EXPECT_EQ(p.set->entries[0].frames[1].pattern, longest);
  EXPECT_EQ(p.set->entries[0].frames[1].line, 7);
  for (size_t len : {240u, 250u, 266u, 271u}) {
    std::string name(len, 'g');
    ParsedSuppressions q =
        ParseSuppressionText("kind=* frame=lib:x\nkind=* frame=func:" + name + " program=p\n");
    ASSERT_EQ(q.errors.size(), 1u) << len;
    EXPECT_EQ(q.errors[0].first, 2) << len;
    EXPECT_NE(q.errors[0].second.find("too long"), std::string::npos) << q.errors[0].second;
    EXPECT_EQ(q.set->count, 0) << len;
  }
}

// Inside quotes: \" \\ \n \r \t \xNN; the canonical text writes every control character
// escaped, and reads back to the same entry.
TEST(SuppressionsTest, EscapesInQuotesRoundTrip) {
  ParsedSuppressions p = ParseSuppressionText(
      "kind=* frame=\"func:a\\nb\\rc\\td\\x01e\\x7Ff\\\"g\\\\h\" "
      "program=\"p#q r\"\n");
  ASSERT_EQ(p.bad, 0) << p.errors[0].second;
  ASSERT_EQ(p.set->count, 1);
  const Suppression& e = p.set->entries[0];
  EXPECT_EQ(std::string(e.frames[0].pattern),
            "a\nb\rc\td\x01"
            "e\x7f"
            "f\"g\\h");
  EXPECT_STREQ(e.program, "p#q r");
  EXPECT_STREQ(e.text,
               "kind=* frame=\"func:a\\nb\\rc\\td\\x01e\\x7ff\\\"g\\\\h\" program=\"p#q r\"");
  ParsedSuppressions again = ParseSuppressionText(std::string(e.text) + "\n");
  ASSERT_EQ(again.bad, 0);
  EXPECT_STREQ(again.set->entries[0].frames[0].pattern, e.frames[0].pattern);
  // A control character written bare is kept, and quoted in the canonical text.
  ParsedSuppressions bare = ParseSuppressionText("kind=* frame=func:a\x1b[31m\n");
  ASSERT_EQ(bare.bad, 0);
  EXPECT_STREQ(bare.set->entries[0].frames[0].pattern, "a\x1b[31m");
  EXPECT_STREQ(bare.set->entries[0].text, "kind=* frame=\"func:a\\x1b[31m\"");
}

// QuoteSuppressionValue writes what the parser reads back byte for byte, for every byte but
// NUL, and a 4-frame entry of the longest escaped patterns keeps its whole canonical text.
TEST(SuppressionsTest, QuotedValuesReadBackExactly) {
  std::vector<std::string> values = {"plain",
                                     "a b",
                                     "a\tb",
                                     "x\ny",
                                     "\r",
                                     "#",
                                     "\"",
                                     "\\",
                                     "\\n",
                                     "kind=*",
                                     "func:\x01\x02\x7f\xff"};
  std::string every;
  for (int c = 1; c < 256; ++c) every += static_cast<char>(c);
  for (size_t at = 0; at < every.size(); at += 120) values.push_back(every.substr(at, 120));
  for (const std::string& v : values) {
    char out[1024];
    ASSERT_TRUE(QuoteSuppressionValue(v.c_str(), out, sizeof out)) << v;
    EXPECT_EQ(strchr(out, '\n'), nullptr) << out;
    ParsedSuppressions p =
        ParseSuppressionText(std::string("kind=* frame=func:x program=") + out + "\n");
    ASSERT_EQ(p.bad, 0) << v << " -> " << out << ": " << p.errors[0].second;
    EXPECT_EQ(std::string(p.set->entries[0].program), v) << out;
  }
  char small[4];
  EXPECT_FALSE(QuoteSuppressionValue("a b c", small, sizeof small));
  EXPECT_STREQ(small, "");
  std::string ctl(239, '\x01');
  char q[1024];
  ASSERT_TRUE(QuoteSuppressionValue(("func:" + ctl).c_str(), q, sizeof q));
  std::string line = "kind=* ";
  for (int i = 0; i < 4; ++i) line += std::string(" frame=") + q;
  ParsedSuppressions p = ParseSuppressionText(line + " rank=100000000-999999999,1,2,3,4,5,6,7\n");
  ASSERT_EQ(p.bad, 0) << p.errors[0].second;
  EXPECT_EQ(p.set->entries[0].frame_count, 4);
  ParsedSuppressions again = ParseSuppressionText(std::string(p.set->entries[0].text) + "\n");
  ASSERT_EQ(again.bad, 0) << again.errors[0].second;
  EXPECT_STREQ(again.set->entries[0].text, p.set->entries[0].text);
}

TEST(SuppressionsTest, GlobMatches) {
  EXPECT_TRUE(SuppressionGlobMatch("libtorch*", "libtorch_cpu.so"));
  EXPECT_TRUE(SuppressionGlobMatch("*loader*", "build_loader_x"));
  EXPECT_TRUE(SuppressionGlobMatch("a?c", "abc"));
  EXPECT_FALSE(SuppressionGlobMatch("a?c", "ac"));
  EXPECT_FALSE(SuppressionGlobMatch("build", "build_loader"));
  EXPECT_TRUE(SuppressionGlobMatch("*", ""));
  EXPECT_TRUE(SuppressionGlobMatch("a*b*c", "axxbyyc"));
  EXPECT_FALSE(SuppressionGlobMatch("a*b*c", "axxbyy"));
}

TEST(SuppressionsTest, MatchesKindsFramesProgramAndRank) {
  ParsedSuppressions p = ParseSuppressionText(
      "kind=child-segv,inherited-rdma frame=func:build_loader\n"
      "kind=inherited-rdma frame=file:train.py:88 program=python3* rank=0-1\n"
      "kind=* frame=lib:libmpi.so* frame=func:MPI_*\n"
      "kind=parent-corruption frame=\"func:ns::Loader::Start\"\n");
  ASSERT_EQ(p.bad, 0);
  SuppressionFrameFacts frames[] = {
      {.func = "fork", .lib = "/lib/x86_64-linux-gnu/libc.so.6"},
      {.func = "build_loader", .file = "/home/u/train.py", .line = 88},
      {.func = "_ZN2ns6Loader5StartEi", .demangled = "ns::Loader::Start(int)", .lib = "/x/a.out"},
  };
  SuppressionQuery q{.kinds = kSegv | kInherited,
                     .program = "python3",
                     .rank = 5,
                     .frames = frames,
                     .frame_count = 3};
  EXPECT_EQ(MatchSuppression(*p.set, q), 0);
  // A reason the entry does not name: not silenced by it.
  q.kinds = kSegv | kCorrupt;
  EXPECT_EQ(MatchSuppression(*p.set, q), -1);
  q.kinds = kInherited;
  EXPECT_EQ(MatchSuppression(*p.set, q), 0);
  // Entry 2 (line 2): file:line, program glob, rank.
  frames[1].func = "main";
  EXPECT_EQ(MatchSuppression(*p.set, q), -1);  // rank 5 is not 0-1
  q.rank = 1;
  EXPECT_EQ(MatchSuppression(*p.set, q), 1);
  frames[1].line = 89;  // a moved line is another site for a file:line entry
  EXPECT_EQ(MatchSuppression(*p.set, q), -1);
  q.rank = -1;
  frames[1].line = 88;
  EXPECT_EQ(MatchSuppression(*p.set, q), -1);  // unknown rank never matches rank=
  // Both frames of entry 3 must match.
  q.kinds = kCorrupt;
  SuppressionFrameFacts mpi[] = {{.func = "MPI_Init", .lib = "/usr/lib/libmpi.so.40"}};
  SuppressionQuery qm{.kinds = kCorrupt, .frames = mpi, .frame_count = 1};
  EXPECT_EQ(MatchSuppression(*p.set, qm), 2);
  mpi[0].lib = "/usr/lib/libother.so";
  EXPECT_EQ(MatchSuppression(*p.set, qm), -1);
  // A C++ name by its demangled name without parameters.
  EXPECT_EQ(MatchSuppression(*p.set, q), 3);
  // No frames, no match.
  SuppressionQuery empty{.kinds = kCorrupt};
  EXPECT_EQ(MatchSuppression(*p.set, empty), -1);
}

TEST(SuppressionsTest, PathPatterns) {
  ParsedSuppressions p =
      ParseSuppressionText("kind=* frame=file:data/loader.py\nkind=* frame=lib:/opt/x/*.so\n");
  ASSERT_EQ(p.bad, 0);
  SuppressionFrameFacts f{.file = "/usr/lib/python3/dist-packages/torch/utils/data/loader.py"};
  SuppressionQuery q{.kinds = kSegv, .frames = &f, .frame_count = 1};
  EXPECT_EQ(MatchSuppression(*p.set, q), 0);
  f.file = "/usr/lib/python3/otherdata/loader.py";
  EXPECT_EQ(MatchSuppression(*p.set, q), -1);
  SuppressionFrameFacts g{.lib = "/opt/x/libfoo.so"};
  q.frames = &g;
  EXPECT_EQ(MatchSuppression(*p.set, q), 1);
}

}  // namespace
}  // namespace forkguard
