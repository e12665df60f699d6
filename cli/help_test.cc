// Every --help is true to its command's option table (flags::HelpMismatches, both ways), and
// the SYNOPSIS of `forkguard --help` names only options its commands have. The man page
// (scripts/manpages) is rendered from these texts.
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

// The help without what follows " -- " on a line: CMD's own options in run's examples.
std::string WithoutCommandTails(const std::string& help) {
  std::istringstream in(help);
  std::string line, out;
  while (std::getline(in, line)) out += line.substr(0, line.find(" -- ")) + "\n";
  return out;
}

TEST(Help, EachCommandsHelpNamesExactlyItsOptions) {
  EXPECT_EQ(flags::HelpMismatches(kRunOptions.data(), WithoutCommandTails(kRunHelp)), Mismatches{});
  EXPECT_EQ(flags::HelpMismatches(kReportOptions.data(), kReportHelp), Mismatches{});
  EXPECT_EQ(flags::HelpMismatches(kDoctorOptions.data(), kDoctorHelp), Mismatches{});
  EXPECT_EQ(flags::HelpMismatches(kPsOptions.data(), kPsHelp), Mismatches{});
}

// The options a SYNOPSIS line of the main help gives `command` that its table lacks.
Mismatches Unknown(const std::string& synopsis, const option* table) {
  Mismatches out;
  static const std::regex kOpt("--([a-z0-9][a-z0-9-]*)");
  for (std::sregex_iterator it(synopsis.begin(), synopsis.end(), kOpt), end; it != end; ++it) {
    bool found = false;
    for (const option* p = table; p->name; ++p) found = found || (*it)[1] == p->name;
    if (!found) out.push_back((*it)[0]);
  }
  return out;
}

TEST(Help, MainSynopsisNamesOnlyRealOptions) {
  test_support::ProgramResult r =
      test_support::RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "--help"});
  ASSERT_EQ(r.status, 0) << r.err;
  std::istringstream in(r.out);
  std::string line, run, report, doctor, ps;
  while (std::getline(in, line)) {
    if (line.rfind("    forkguard run ", 0) == 0) run = line;
    if (line.rfind("    forkguard report ", 0) == 0) report = line;
    if (line.rfind("    forkguard doctor", 0) == 0) doctor = line;
    if (line.rfind("    forkguard ps", 0) == 0) ps = line;
  }
  ASSERT_FALSE(run.empty() || report.empty() || doctor.empty() || ps.empty()) << r.out;
  EXPECT_EQ(Unknown(run, kRunOptions.data()), Mismatches{}) << run;
  EXPECT_EQ(Unknown(report, kReportOptions.data()), Mismatches{}) << report;
  EXPECT_EQ(Unknown(doctor, kDoctorOptions.data()), Mismatches{}) << doctor;
  EXPECT_EQ(Unknown(ps, kPsOptions.data()), Mismatches{}) << ps;
}

// `forkguard help CMD` and `forkguard CMD --help` (and -h) print the same text.
TEST(Help, HelpCommandAndOptionAgree) {
  std::string fg = forkguard::test_support::Runfile("cli/forkguard");
  for (const char* cmd : {"run", "report", "doctor", "ps"}) {
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
