// The shared parser: values, flags, sizes, every kind of bad command line, the one error
// line, and the help-text check.
#include "flags/flags.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

using forkguard::flags::HelpMismatches;
using forkguard::flags::Options;
using forkguard::flags::Positionals;
using forkguard::flags::UsageError;

const option kOpts[] = {
    {"workers", required_argument, nullptr, 0}, {"size", required_argument, nullptr, 0},
    {"check", no_argument, nullptr, 0},         {"help", no_argument, nullptr, 'h'},
    {"level", required_argument, nullptr, 'l'}, {},
};

Options Parse(std::vector<std::string> args, Positionals p = Positionals::kNone) {
  args.insert(args.begin(), "cmd");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return Options::Parse(static_cast<int>(args.size()), argv.data(), kOpts, p);
}

using Args = std::vector<std::string>;

std::string ErrorOf(std::vector<std::string> args, Positionals p = Positionals::kNone) {
  try {
    Parse(std::move(args), p);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(Flags, ValuesFlagsAndSizes) {
  Options o = Parse({"--workers", "4", "--size=4K", "--check"});
  EXPECT_EQ(o.Int("workers", 0), 4);
  EXPECT_EQ(o.Size("size", 0), 4096u);
  EXPECT_TRUE(o.Has("check"));
  EXPECT_FALSE(o.Has("help"));
  EXPECT_EQ(o.Str("missing", "def"), "def");
  EXPECT_EQ(o.given().size(), 3u);
  EXPECT_EQ(Parse({"--workers", "1", "--workers", "2"}).Int("workers", 0), 2);  // last wins
  // A second parse starts afresh (getopt_long's state is reset).
  EXPECT_FALSE(Parse({}).Has("check"));
}

TEST(Flags, EveryBadCommandLineIsAUsageError) {
  EXPECT_EQ(ErrorOf({"--bogus"}), "unknown option --bogus");
  EXPECT_EQ(ErrorOf({"--bogus=1"}), "unknown option --bogus");
  EXPECT_EQ(ErrorOf({"--workers"}), "--workers needs a value");
  EXPECT_EQ(ErrorOf({"--check=yes"}), "--check takes no value");
  EXPECT_EQ(ErrorOf({"stray"}), "unexpected argument 'stray'");
  EXPECT_EQ(ErrorOf({"-x"}), "unknown option -x");
  EXPECT_THROW(Parse({"--workers", "two"}).Int("workers", 0), UsageError);
  EXPECT_THROW(Parse({"--size", "12Q"}).Size("size", 0), UsageError);
  EXPECT_THROW(forkguard::flags::ParseSize(""), std::invalid_argument);
  EXPECT_EQ(forkguard::flags::ParseSize("1M"), 1u << 20);
}

TEST(Flags, OneLetterFormsAreKnownByTheirLongName) {
  Options o = Parse({"-h", "-l", "3", "-l4"});
  EXPECT_TRUE(o.Has("help"));
  EXPECT_EQ(o.Int("level", 0), 4);
  EXPECT_EQ(o.given().front().first, "help");
  EXPECT_TRUE(Parse({"--help"}).Has("help"));  // a table entry with a val is still long
  EXPECT_EQ(Parse({"--level=2"}).Int("level", 0), 2);
  EXPECT_EQ(ErrorOf({"-l"}), "-l needs a value");
  EXPECT_EQ(ErrorOf({"-w", "4"}), "unknown option -w");  // "workers" has no letter
  EXPECT_EQ(ErrorOf({"-xh"}), "unknown option -x");
  EXPECT_EQ(ErrorOf({"--help=yes"}), "--help takes no value");
}

TEST(Flags, PositionalsAfterTheOptionsAreACommandLine) {
  const Positionals p = Positionals::kAfterOptions;
  Options o = Parse({"--check", "--", "prog", "--workers", "1", "--"}, p);
  EXPECT_TRUE(o.Has("check"));
  EXPECT_FALSE(o.Has("workers"));  // the program's, not ours
  EXPECT_EQ(o.positionals(), (Args{"prog", "--workers", "1", "--"}));
  // Without "--" the first non-option starts it.
  o = Parse({"--workers=2", "prog", "-h", "--check"}, p);
  EXPECT_EQ(o.Int("workers", 0), 2);
  EXPECT_FALSE(o.Has("check"));
  EXPECT_EQ(o.positionals(), (Args{"prog", "-h", "--check"}));
  EXPECT_EQ(Parse({"--", "--check"}, p).positionals(), Args{"--check"});
  EXPECT_TRUE(Parse({"--check", "--"}, p).positionals().empty());
  EXPECT_TRUE(Parse({}, p).positionals().empty());
  EXPECT_EQ(ErrorOf({"--bogus", "prog"}, p), "unknown option --bogus");
}

TEST(Flags, PositionalsAnywhereKeepTheirOrder) {
  const Positionals p = Positionals::kAnywhere;
  Options o = Parse({"a", "--check", "b", "-", "--workers", "3", "", "c"}, p);
  EXPECT_TRUE(o.Has("check"));
  EXPECT_EQ(o.Int("workers", 0), 3);
  EXPECT_EQ(o.positionals(), (Args{"a", "b", "-", "", "c"}));
  o = Parse({"a", "--", "--check", "-h", "b"}, p);  // after "--", all positionals
  EXPECT_FALSE(o.Has("check"));
  EXPECT_EQ(o.positionals(), (Args{"a", "--check", "-h", "b"}));
  EXPECT_EQ(ErrorOf({"a", "--bogus"}, p), "unknown option --bogus");
  // POSIXLY_CORRECT (which turns getopt's default order into "+") does not change that.
  setenv("POSIXLY_CORRECT", "1", 1);
  o = Parse({"a", "--check", "b"}, p);
  unsetenv("POSIXLY_CORRECT");
  EXPECT_TRUE(o.Has("check"));
  EXPECT_EQ(o.positionals(), (Args{"a", "b"}));
}

TEST(Flags, OneErrorLineExitStatusTwo) {
  testing::internal::CaptureStderr();
  int rc = forkguard::flags::ReportUsageError("tool run", UsageError("unknown option --x"));
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "tool run: unknown option --x (see tool run --help)\n");
}

TEST(Flags, HelpMismatchesNamesBothDirections) {
  EXPECT_TRUE(HelpMismatches(kOpts, "--workers N --size B --check --level L").empty());
  auto m = HelpMismatches(kOpts, "--workers N --size B --level L --help --verbose");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], "--check is not in the help text");
  EXPECT_EQ(m[1], "--verbose in the help text is not an option");
}

}  // namespace
