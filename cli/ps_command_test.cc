// `forkguard ps`'s table: a process's name and job come from its /proc files, which another
// user controls (comm, environ); the table prints them as text on the process's own line.
#include <string>

#include "api/census.h"
#include "cli/commands.h"
#include "gtest/gtest.h"

namespace forkguard::cli {
namespace {

TEST(PsText, NamesFromProcAreEscaped) {
  api::Census c;
  api::ProcessFacts p;
  p.pid = 4242;
  p.comm = "a\x1b]0;x\x07\n::e";  // 15 bytes, as the kernel allows
  p.job = std::string("j\r\n::error::x");
  p.objects.contexts = 1;
  c.processes.push_back(p);
  c.netlink_error = "netlink: \x1b[2J";
  std::string out = PsText(c);
  // A header, the process, the unreadable files' note, the error: four lines, no control
  // character but their ends.
  size_t lines = 0;
  for (char ch : out) {
    lines += ch == '\n';
    if (ch != '\n') {
      EXPECT_FALSE(static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) << out;
    }
  }
  EXPECT_EQ(lines, 4u) << out;
  EXPECT_NE(out.find("\n4242    a\\x1b]0;x\\x07\\…"), std::string::npos) << out;
  EXPECT_NE(out.find(" j\\x0d\\x0a… "), std::string::npos) << out;
  EXPECT_NE(out.find("netlink: \\x1b[2J\n"), std::string::npos) << out;
}

}  // namespace
}  // namespace forkguard::cli
