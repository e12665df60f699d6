// `forkguard report` on the logs of a real run (cli/testdata/unwatched: the real shim on the
// host, `sh -c` running `env -i /bin/true`, a static program, a set-user-ID copy of true and
// a Python program that opens the stub device and execs with an empty environment): every
// unwatched process is in the text section, the JSON document's "unwatched" array and the
// HTML page's section, with pid, program, parent, why and its RDMA state at the exec.
#include <string>

#include "cli/json.h"
#include "gtest/gtest.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using test_support::ProgramResult;
using test_support::RunProgram;

std::string Logs() {
  std::string any = forkguard::test_support::Runfile(
      "cli/testdata/unwatched/forkguard.vm.17657.1796170449413911150.jsonl");
  return any.substr(0, any.rfind('/'));
}

ProgramResult Report(const std::string& format) {
  return RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "report", "--no-symbolize",
                     "--format", format, Logs()});
}

TEST(UnwatchedReport, TextNamesEachProcess) {
  ProgramResult r = Report("text");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("unwatched: 4 processes of this run ran without the shim"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("pid 17664 true (/bin/true) on vm, parent 17657, exec'd by python3:\n"
                       "      its environment has no LD_PRELOAD with the shim\n"
                       "      RDMA state when it exec'd: held (inherited)"),
            std::string::npos)
      << r.out;
}

TEST(UnwatchedReport, JsonListsEachProcess) {
  ProgramResult r = Report("json");
  ASSERT_EQ(r.status, 0) << r.err;
  Json doc;
  std::string error;
  ASSERT_TRUE(ParseJson(r.out, &doc, &error)) << error;
  const Json* list = FindMember(doc, "unwatched");
  ASSERT_NE(list, nullptr) << r.out;
  ASSERT_EQ(list->size(), 4u) << r.out;
  struct Want {
    int64_t pid;
    std::string program, path, exec_by, why;
    bool held;
  };
  const Want want[] = {
      {17660, "true", "/bin/true", "env", "preload-removed", false},
      {17661, "static_true", "/tmp/s2i23/static_true", "sh", "static", false},
      {17662, "sutrue", "/tmp/s2i23/su/sutrue", "sh", "setuid", false},
      {17664, "true", "/bin/true", "python3", "preload-removed", true},
  };
  for (size_t i = 0; i < 4; ++i) {
    const Json& u = (*list)[i];
    SCOPED_TRACE(want[i].pid);
    EXPECT_EQ(GetString(u, "host"), "vm");
    EXPECT_EQ(GetInt(u, "pid", -1), want[i].pid);
    EXPECT_EQ(GetInt(u, "parent_pid", -1), 17657);
    EXPECT_EQ(GetString(u, "program"), want[i].program);
    EXPECT_EQ(GetString(u, "path"), want[i].path);
    EXPECT_EQ(GetString(u, "exec_by"), want[i].exec_by);
    ASSERT_EQ(FindMember(u, "why")->size(), 1u);
    EXPECT_EQ((*FindMember(u, "why"))[0].get_ref<const std::string&>(), want[i].why);
    EXPECT_EQ(GetBool(u, "held_rdma", !want[i].held), want[i].held);
  }
}

TEST(UnwatchedReport, JsonOfAnAllWatchedRunHasAnEmptyList) {
  // The same report on the one process that was watched (the shell) alone.
  ProgramResult r =
      RunProgram({forkguard::test_support::Runfile("cli/forkguard"), "report", "--no-symbolize",
                  "--format", "json", Logs() + "/forkguard.vm.17657.1796170449413911150.jsonl"});
  ASSERT_EQ(r.status, 0) << r.err;
  Json doc;
  std::string error;
  ASSERT_TRUE(ParseJson(r.out, &doc, &error)) << error;
  ASSERT_NE(FindMember(doc, "unwatched"), nullptr) << r.out;
  EXPECT_EQ(FindMember(doc, "unwatched")->size(), 0u) << r.out;
}

TEST(UnwatchedReport, HtmlHasTheSection) {
  ProgramResult r = Report("html");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("<section id=\"unwatched-sec\"><h2>Unwatched processes: ran without the "
                       "shim</h2>"),
            std::string::npos);
  // The page's data: one row per process (heading, why, RDMA state).
  EXPECT_NE(r.out.find("[\"pid 17661 static_true (/tmp/s2i23/static_true) on vm, parent 17657, "
                       "exec'd by sh\",[\"a static binary (no dynamic loader: nothing is "
                       "preloaded)\"],\"RDMA state when it exec'd: none\"]"),
            std::string::npos)
      << r.out.substr(r.out.find("\"unwatched\""), 2000);
  EXPECT_NE(r.out.find("\"RDMA state when it exec'd: held (inherited)\""), std::string::npos);
}

}  // namespace
}  // namespace forkguard::cli
