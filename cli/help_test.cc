// Every --help's OPTIONS come from its command's rows (so they name exactly its options); the
// hand-written SYNOPSIS lines, of `forkguard --help` and of each command, name only options
// the command has, and every report format. The man page (help2man) is made from these texts.
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "flags/flags.h"
#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using Mismatches = std::vector<std::string>;

// The SYNOPSIS section of a help text (up to DESCRIPTION), without what follows " -- " on a
// line (CMD's own options).
std::string Synopsis(const std::string& help) {
  size_t from = help.find("SYNOPSIS\n"), to = help.find("\nDESCRIPTION\n");
  std::istringstream in(help.substr(from, to - from));
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.find(" -- ")) + "\n";
  return out;
}

// The options a SYNOPSIS line of the main help gives `command` that its table lacks.
Mismatches Unknown(const std::string& synopsis, const flags::FlagTable& table) {
  Mismatches out;
  static const std::regex kOpt("--([a-z0-9][a-z0-9-]*)");
  for (std::sregex_iterator it(synopsis.begin(), synopsis.end(), kOpt), end; it != end; ++it) {
    bool found = false;
    for (const flags::Flag& f : table) found = found || (*it)[1] == f.name;
    if (!found) out.push_back((*it)[0]);
  }
  return out;
}

TEST(Help, MainSynopsisNamesOnlyRealOptions) {
  test_support::ProgramResult r =
      test_support::RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "--help"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::string line, run, report, doctor, ps, probe;
  while (std::getline(in, line)) {
    if (line.rfind("    forkguard run ", 0) == 0) run = line;
    if (line.rfind("    forkguard report ", 0) == 0) report = line;
    if (line.rfind("    forkguard doctor", 0) == 0) doctor = line;
    if (line.rfind("    forkguard ps", 0) == 0) ps = line;
    if (line.rfind("    forkguard probe", 0) == 0) probe = line;
  }
  ASSERT_FALSE(run.empty() || report.empty() || doctor.empty() || ps.empty() || probe.empty())
      << r.out;
  EXPECT_EQ(Unknown(run, RunFlags()), Mismatches{}) << run;
  EXPECT_EQ(Unknown(report, ReportFlags()), Mismatches{}) << report;
  EXPECT_EQ(Unknown(doctor, DoctorFlags()), Mismatches{}) << doctor;
  EXPECT_EQ(Unknown(ps, PsFlags()), Mismatches{}) << ps;
  EXPECT_EQ(Unknown(probe, ProbeFlags()), Mismatches{}) << probe;
  // Every report format.
  EXPECT_NE(report.find("--format " + TheReportMakingFlags().format.value), std::string::npos)
      << report;
}

// Each command's own SYNOPSIS names only its options, and run's and report's list every
// report format (the values of the --format row).
TEST(Help, EachSynopsisNamesOnlyRealOptionsAndEveryFormat) {
  EXPECT_EQ(Unknown(Synopsis(RunHelp()), RunFlags()), Mismatches{});
  EXPECT_EQ(Unknown(Synopsis(ReportHelp()), ReportFlags()), Mismatches{});
  EXPECT_EQ(Unknown(Synopsis(DoctorHelp()), DoctorFlags()), Mismatches{});
  EXPECT_EQ(Unknown(Synopsis(PsHelp()), PsFlags()), Mismatches{});
  EXPECT_EQ(Unknown(Synopsis(ProbeHelp()), ProbeFlags()), Mismatches{});
  const std::string formats = "--format " + TheReportMakingFlags().format.value;
  EXPECT_NE(Synopsis(RunHelp()).find(formats), std::string::npos) << RunHelp();
  EXPECT_NE(Synopsis(ReportHelp()).find(formats), std::string::npos) << ReportHelp();
}

// `forkguard help CMD` and `forkguard CMD --help` (and -h) print the same text.
TEST(Help, HelpCommandAndOptionAgree) {
  std::string fg = forkguard::test_support::Runfile("cli/forkguard");
  for (const char* cmd : {"run", "report", "doctor", "ps", "probe"}) {
    test_support::ProgramResult a = test_support::RunProgram({fg, "help", cmd});
    test_support::ProgramResult b = test_support::RunProgram({fg, cmd, "--help"});
    test_support::ProgramResult c = test_support::RunProgram({fg, cmd, "-h"});
    EXPECT_EQ(a.status, 0);
    EXPECT_EQ(b.status, 0) << cmd << ": " << b.err;
    EXPECT_EQ(c.status, 0) << cmd << ": " << c.err;
    EXPECT_EQ(a.out, b.out) << cmd;
    EXPECT_EQ(a.out, c.out) << cmd;
  }
}

}  // namespace
}  // namespace forkguard::cli
