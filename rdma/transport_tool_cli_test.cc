// transport_tool's command line on the host (nothing here opens a device): --help is the rows'
// text, the defaults are TransportOptions', and a bad command line is one line and exit
// status 2.
#include <string>
#include <vector>

#include "flags/flags.h"
#include "gtest/gtest.h"
#include "rdma/transport_tool.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace {

namespace tt = forkguard::rdma::transport_tool;

// Runs transport_tool with `args`; returns {exit status, stdout+stderr}.
std::pair<int, std::string> Tool(std::vector<std::string> args) {
  args.insert(args.begin(), forkguard::test_support::Runfile("rdma/transport_tool"));
  forkguard::test_support::RunOptions opt;
  opt.stderr_to_stdout = true;
  forkguard::test_support::ProgramResult r = forkguard::test_support::RunProgram(args, opt);
  return {r.status, r.out};
}

TEST(TransportToolCli, HelpIsTheRowsText) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--help"}, {"send", "--help"}, {"recv", "--help"}}) {
    auto [rc, out] = Tool(args);
    EXPECT_EQ(rc, 0) << out;
    EXPECT_EQ(out, tt::Help());
  }
  const forkguard::rdma::TransportOptions t;
  std::string help = tt::Help();
  EXPECT_NE(
      help.find("receive slots advertised to the sender (default " + std::to_string(t.slots) + ")"),
      std::string::npos)
      << help;
  EXPECT_NE(help.find("(default " + std::to_string(t.idle_timeout_ms) + ")"), std::string::npos);
}

TEST(TransportToolCli, BadCommandLinesExitTwoWithOneLine) {
  auto [rc, out] = Tool({"send", "--listen", "1.2.3.4:5", "--bogus"});
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "transport_tool: unknown option --bogus (see transport_tool --help)\n");
  // Options of the other role are refused, not silently ignored.
  std::tie(rc, out) = Tool({"send", "--listen", "1.2.3.4:5", "--verify"});
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "transport_tool: unknown option --verify (see transport_tool --help)\n");
  std::tie(rc, out) = Tool({"recv"});
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "transport_tool: recv needs --connect (see transport_tool --help)\n");
  std::tie(rc, out) = Tool({"fetch"});
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "transport_tool: unknown role 'fetch' (see transport_tool --help)\n");
  std::tie(rc, out) = Tool({"recv", "--connect", "1.2.3.4:5", "--slot-bytes", "4Q"});
  EXPECT_EQ(rc, 2);
  EXPECT_NE(out.find("--slot-bytes: bad size suffix"), std::string::npos) << out;
}

}  // namespace
