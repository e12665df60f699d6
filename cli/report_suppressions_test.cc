// --emit-suppressions over names a log can carry (any process writes its own function, file
// and library names): every entry reads back through the shim's parser to exactly the pattern
// it was written with, and no name can add a line or widen an entry to a catch-all.
#include "cli/report_suppressions.h"

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "formats/suppressions_testing.h"

namespace forkguard::cli {
namespace {

// A hazardous site of one fork whose stack is the one frame `top`.
ForkGroup OneFrameGroup(const std::string& site, const std::string& reason, const Frame& top) {
  ForkGroup g;
  g.site = site;
  g.verdict = "hazard";
  g.reasons[reason] = 1;
  g.count = 1;
  g.stack.push_back(top);
  return g;
}

ForkGroup PythonGroup(const std::string& func, const std::string& file) {
  Frame f;
  f.python = true;
  f.py_func = func;
  f.py_file = "/home/u/" + file;
  f.py_line = 3;
  return OneFrameGroup("1", "child-segv", f);
}

ForkGroup NativeGroup(const std::string& sym, const std::string& obj) {
  Frame f;
  f.obj = "/opt/" + obj;
  f.sym = sym;
  return OneFrameGroup("2", "inherited-rdma", f);
}

const std::string kHostile[] = {
    "f\nkind=* frame=lib:*\n#",
    "g\rkind=*",
    "say \"hi\"",
    "back\\slash\\",
    "hash#tag",
    "tab\there",
    std::string("ctl\x01\x02\x1b[31m\x7f") + "end",
    "\\x41 not an escape",
    std::string(300, 'n'),
    std::string(150, '\n') + std::string(150, '"'),
    "trailing space ",
};

// What the emitter must write for `name`: itself with its glob characters (and in a file
// name ':') as '?', cut to 239 bytes ending in '*' when longer.
std::string ExpectedPattern(std::string name, bool file = false) {
  for (char& c : name)
    if (c == '*' || c == '?' || (file && c == ':')) c = '?';
  constexpr size_t kMax = SuppressionFrameMatch::kMaxPattern - 1;
  if (name.size() <= kMax) return name;
  return name.substr(0, kMax - 1) + "*";
}

TEST(EmitSuppressions, HostileNamesRoundTripThroughTheParser) {
  JobReport r;
  for (const std::string& name : kHostile) {
    r.hazard_groups.push_back(PythonGroup(name, "train.py"));
    r.hazard_groups.push_back(NativeGroup(name, "libx.so"));
    r.hazard_groups.push_back(PythonGroup("loader", name));
    r.hazard_groups.push_back(NativeGroup("start", name));
  }
  std::string text = EmitSuppressions(r);
  ParsedSuppressions p = ParseSuppressionText(text);
  ASSERT_EQ(p.bad, 0) << p.errors[0].first << ": " << p.errors[0].second << "\n" << text;
  ASSERT_EQ(p.set->count, static_cast<int>(r.hazard_groups.size())) << text;
  int i = 0;
  for (const std::string& name : kHostile) {
    const Suppression* e = &p.set->entries[i];
    // Python, hostile function.
    ASSERT_EQ(e[0].frame_count, 2) << e[0].text;
    EXPECT_EQ(e[0].frames[0].kind, SuppressionFrameMatch::kFunc);
    EXPECT_EQ(e[0].frames[0].pattern, ExpectedPattern(name)) << e[0].text;
    EXPECT_STREQ(e[0].frames[1].pattern, "train.py");
    // Native, hostile symbol.
    ASSERT_EQ(e[1].frame_count, 2) << e[1].text;
    EXPECT_EQ(e[1].frames[0].pattern, ExpectedPattern(name)) << e[1].text;
    EXPECT_STREQ(e[1].frames[1].pattern, "libx.so");
    // Python, hostile file; native, hostile library.
    EXPECT_EQ(e[2].frames[1].kind, SuppressionFrameMatch::kFile);
    EXPECT_EQ(e[2].frames[1].pattern, ExpectedPattern(name, true)) << e[2].text;
    EXPECT_EQ(e[2].frames[1].line, 0) << e[2].text;
    EXPECT_EQ(e[3].frames[1].kind, SuppressionFrameMatch::kLib);
    EXPECT_EQ(e[3].frames[1].pattern, ExpectedPattern(name)) << e[3].text;
    // Each entry matches its own site and not another function's.
    std::string lib = "/opt/" + name, file = "/home/u/" + name;
    const SuppressionFrameFacts mine[4] = {
        {.func = name.c_str(), .file = "/home/u/train.py"},
        {.func = name.c_str(), .lib = "/opt/libx.so"},
        {.func = "loader", .file = file.c_str()},
        {.func = "start", .lib = lib.c_str()},
    };
    for (int k = 0; k < 4; ++k) {
      auto one = std::make_unique<SuppressionSet>();
      one->count = 1;
      one->entries[0] = e[k];
      SuppressionQuery q{.kinds = k % 2 == 1 ? 4u : 1u, .frames = &mine[k], .frame_count = 1};
      EXPECT_EQ(MatchSuppression(*one, q), 0) << e[k].text;
      SuppressionFrameFacts other{.func = "other", .lib = "/opt/liby.so", .file = "/x/y.py"};
      q.frames = &other;
      EXPECT_EQ(MatchSuppression(*one, q), -1) << e[k].text;
    }
    i += 4;
  }
  // Nothing but comments and entries: every line an entry starts with "kind=".
  size_t start = 0;
  while (start < text.size()) {
    size_t nl = text.find('\n', start);
    std::string line = text.substr(start, nl - start);
    EXPECT_TRUE(line.empty() || line[0] == '#' || line.rfind("kind=", 0) == 0) << line;
    start = nl == std::string::npos ? text.size() : nl + 1;
  }
}

// A name's own glob characters match only themselves or one other byte, never every site;
// a ':' in a file name does not become a line number.
TEST(EmitSuppressions, GlobCharactersInANameCannotMakeACatchAll) {
  JobReport r;
  r.hazard_groups.push_back(PythonGroup("*", "*"));
  r.hazard_groups.push_back(NativeGroup("a*", "?"));
  r.hazard_groups.push_back(PythonGroup("f", "x.py:12"));
  r.hazard_groups[1].reasons["child-segv"] = 1;
  r.hazard_groups[1].reasons["no-such-kind\nkind=*"] = 1;
  std::string text = EmitSuppressions(r);
  ParsedSuppressions p = ParseSuppressionText(text);
  ASSERT_EQ(p.bad, 0) << p.errors[0].first << ": " << p.errors[0].second << "\n" << text;
  ASSERT_EQ(p.set->count, 3) << text;
  EXPECT_STREQ(p.set->entries[0].frames[0].pattern, "?");
  EXPECT_STREQ(p.set->entries[0].frames[1].pattern, "?");
  EXPECT_STREQ(p.set->entries[1].frames[0].pattern, "a?");
  EXPECT_STREQ(p.set->entries[1].frames[1].pattern, "?");
  EXPECT_EQ(p.set->entries[1].kinds, 5u) << p.set->entries[1].text;
  EXPECT_STREQ(p.set->entries[2].frames[1].pattern, "x.py?12");
  EXPECT_EQ(p.set->entries[2].frames[1].line, 0);
  SuppressionFrameFacts f{.func = "main", .lib = "/usr/bin/python3", .file = "/x/train.py"};
  SuppressionQuery q{.kinds = 1, .frames = &f, .frame_count = 1};
  EXPECT_EQ(MatchSuppression(*p.set, q), -1);
}

}  // namespace
}  // namespace forkguard::cli
