// The shared parser: values, flags, sizes, every kind of bad command line, the one error
// line, and the help-text check.
#include "flags/flags.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

using forkguard::flags::HelpMismatches;
using forkguard::flags::Options;
using forkguard::flags::UsageError;

const option kOpts[] = {
    {"workers", required_argument, nullptr, 0},
    {"size", required_argument, nullptr, 0},
    {"check", no_argument, nullptr, 0},
    {"help", no_argument, nullptr, 0},
    {},
};

Options Parse(std::vector<std::string> args) {
  args.insert(args.begin(), "cmd");
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  return Options::Parse(static_cast<int>(args.size()), argv.data(), kOpts);
}

std::string ErrorOf(std::vector<std::string> args) {
  try {
    Parse(std::move(args));
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

TEST(Flags, OneErrorLineExitStatusTwo) {
  testing::internal::CaptureStderr();
  int rc = forkguard::flags::ReportUsageError("tool run", UsageError("unknown option --x"));
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(),
            "tool run: unknown option --x (see tool run --help)\n");
}

TEST(Flags, HelpMismatchesNamesBothDirections) {
  EXPECT_TRUE(HelpMismatches(kOpts, "--workers N --size B --check").empty());  // --help aside
  auto m = HelpMismatches(kOpts, "--workers N --size B --help --verbose");
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m[0], "--check is not in the help text");
  EXPECT_EQ(m[1], "--verbose in the help text is not an option");
}

}  // namespace
