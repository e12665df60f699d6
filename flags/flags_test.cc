// The shared parser: values, defaults from the rows, flags, sizes, every kind of bad command
// line, the one error line, and the OPTIONS text made from the rows.
#include "flags/flags.h"

#include <stdlib.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace {

using forkguard::flags::ColumnHelp;
using forkguard::flags::FlagTable;
using forkguard::flags::ManHelp;
using forkguard::flags::Options;
using forkguard::flags::Positionals;
using forkguard::flags::UsageError;

const FlagTable kOpts = {
    {"workers", "N", "2", "worker processes"},
    {"size", "B", "1K", "bytes per record,\nK/M/G"},
    {"check", "", "", "verify everything"},
    forkguard::flags::HelpFlag("This text."),
    {"level", "L", "0", "how loud: {default} is silent", 'l'},
    {"name", "S", "", ""},
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
  EXPECT_EQ(o.Int("workers"), 4);
  EXPECT_EQ(o.Size("size"), 4096u);
  EXPECT_TRUE(o.Has("check"));
  EXPECT_FALSE(o.Has("help"));
  EXPECT_EQ(o.given().size(), 3u);
  EXPECT_EQ(Parse({"--workers", "1", "--workers", "2"}).Int("workers"), 2);  // last wins
  // A second parse starts afresh (getopt_long's state is reset).
  EXPECT_FALSE(Parse({}).Has("check"));
}

TEST(Flags, AnOptionNotGivenHasItsRowsDefault) {
  Options o = Parse({});
  EXPECT_EQ(o.Int("workers"), 2);
  EXPECT_EQ(o.Size("size"), 1024u);
  EXPECT_EQ(o.Double("level"), 0.0);
  EXPECT_EQ(o.Str("name"), "");
  EXPECT_TRUE(o.Takes("name"));
  EXPECT_FALSE(o.Takes("missing"));
  EXPECT_THROW(o.Str("missing"), std::logic_error);  // a bug, not a bad command line
  EXPECT_THROW(o.Int("name"), UsageError);           // no default and not given: no number
}

TEST(Flags, EveryBadCommandLineIsAUsageError) {
  EXPECT_EQ(ErrorOf({"--bogus"}), "unknown option --bogus");
  EXPECT_EQ(ErrorOf({"--bogus=1"}), "unknown option --bogus");
  EXPECT_EQ(ErrorOf({"--workers"}), "--workers needs a value");
  EXPECT_EQ(ErrorOf({"--check=yes"}), "--check takes no value");
  EXPECT_EQ(ErrorOf({"stray"}), "unexpected argument 'stray'");
  EXPECT_EQ(ErrorOf({"-x"}), "unknown option -x");
  EXPECT_THROW(Parse({"--workers", "two"}).Int("workers"), UsageError);
  EXPECT_THROW(Parse({"--size", "12Q"}).Size("size"), UsageError);
  EXPECT_THROW(forkguard::flags::ParseSize(""), std::invalid_argument);
  EXPECT_EQ(forkguard::flags::ParseSize("1M"), 1u << 20);
}

TEST(Flags, OneLetterFormsAreKnownByTheirLongName) {
  Options o = Parse({"-h", "-l", "3", "-l4"});
  EXPECT_TRUE(o.Has("help"));
  EXPECT_EQ(o.Int("level"), 4);
  EXPECT_EQ(o.given().front().first, "help");
  EXPECT_TRUE(Parse({"--help"}).Has("help"));  // a table entry with a val is still long
  EXPECT_EQ(Parse({"--level=2"}).Int("level"), 2);
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
  EXPECT_EQ(o.Int("workers"), 2);
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
  EXPECT_EQ(o.Int("workers"), 3);
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

TEST(Flags, HelpIsMadeAndPrintedOnlyWhenAsked) {
  int made = 0;
  auto help = [&made] {
    ++made;
    return std::string();
  };
  EXPECT_FALSE(forkguard::flags::PrintHelpIfAsked(Parse({"--workers", "1"}), help));
  EXPECT_EQ(made, 0);
  EXPECT_TRUE(forkguard::flags::PrintHelpIfAsked(Parse({"--check", "-h"}), help));
  EXPECT_EQ(made, 1);
}

TEST(Flags, ColumnHelpListsEveryRowWithItsDefault) {
  EXPECT_EQ(ColumnHelp(kOpts, 2, 16),
            "  --workers N   worker processes (default 2)\n"
            "  --size B      bytes per record,\n"
            "                K/M/G (default 1K)\n"
            "  --check       verify everything\n"
            "  -h, --help    This text.\n"
            "  -l, --level L  how loud: 0 is silent\n");
  EXPECT_EQ(ColumnHelp({{"a-very-long-name", "", "", "x"}}, 0, 8), "--a-very-long-name  x\n");
}

TEST(Flags, ManHelpJoinsRowsWithoutHelpIntoTheNextHeading) {
  FlagTable t = {
      {"audit", "", "", ""},
      {"no-audit", "", "", "Also set LD_AUDIT.\n\n    kind=*"},
      forkguard::flags::Retold({"fail-on", "WHAT", "never", "x"}, "hazard: exit 3", "hazard|never"),
      {"trailing", "", "", ""}};
  EXPECT_EQ(ManHelp(t),
            "    --audit, --no-audit\n"
            "        Also set LD_AUDIT.\n"
            "\n"
            "            kind=*\n"
            "    --fail-on hazard|never\n"
            "        hazard: exit 3 (default never)\n");
}

}  // namespace
