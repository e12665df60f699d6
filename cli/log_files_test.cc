// ReadLogs over files and directories (cli/log_files.h): empty, missing and special files,
// files streamed across chunks by any number of threads, symlinks followed once, names the
// shim gives a log, the owner policy of a shared root; ReadInputFile.
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "cli/job_report.h"
#include "cli/log_files.h"
#include "cli/report_text.h"
#include "cli/testdata/log_checks.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

using testdata::Corpus;
using testdata::CountEvents;
using testdata::HasNote;

TEST(LogParser, EmptyFileEmptyDirMissingPathAndFifo) {
  std::string dir = forkguard::test_support::MakeTempDir("empty");
  std::string fifo = dir + "/pipe.jsonl";
  ASSERT_EQ(0, mkfifo(fifo.c_str(), 0600));
  std::string empty_dir = forkguard::test_support::MakeTempDir("nothing");
  LogSet l;
  ReadLogs({Corpus("empty.jsonl"), empty_dir, dir + "/missing.jsonl", fifo}, &l);
  EXPECT_TRUE(HasNote(l, "empty.jsonl", "empty file"));
  EXPECT_TRUE(HasNote(l, empty_dir, "no event logs"));
  EXPECT_TRUE(HasNote(l, "missing.jsonl", "No such file or directory"));
  EXPECT_TRUE(HasNote(l, "pipe.jsonl", "not a regular file"));
  EXPECT_TRUE(l.processes.empty());
  JobReport r = BuildJobReport(l, nullptr);
  std::string text = RenderText(r);
  EXPECT_NE(text.find("no forkguard events found"), std::string::npos) << text;
  EXPECT_NE(text.find("/missing.jsonl: cannot read: No"), std::string::npos) << text;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) EXPECT_LE(line.size(), 102u) << line;
}

// Files stream through a 1 MiB buffer: lines across chunk boundaries, an
// overlong line in the middle of a file and the thread count change nothing.
TEST(LogParser, StreamedFilesAcrossChunksAndThreads) {
  std::string dir = forkguard::test_support::MakeTempDir("stream");
  std::string text;
  for (int i = 0; i < 30000; ++i) {
    if (i == 12000)
      text += "{\"schema\":\"forkguard.event/1\",\"event\":\"note\",\"pid\":5,\"text\":\"" +
              std::string(3 << 20, 'x') + "\"}\n";
    text += "{\"schema\":\"forkguard.event/1\",\"event\":\"" +
            std::string(i % 3 == 0 ? "fork" : "mr_register") +
            "\",\"pid\":5,\"seq\":" + std::to_string(i) + ",\"len\":4096}\n";
  }
  for (int f = 0; f < 3; ++f) {
    FILE* out = fopen((dir + "/p" + std::to_string(f) + ".jsonl").c_str(), "w");
    ASSERT_TRUE(out);
    fwrite(text.data(), 1, text.size(), out);
    fclose(out);
  }
  for (int threads : {1, 3}) {
    LogSet l;
    ReadLogs({dir}, &l, threads);
    ASSERT_EQ(l.processes.size(), 3u);
    EXPECT_EQ(l.lines_used, 3 * 30000);
    EXPECT_EQ(l.lines_skipped, 3);
    EXPECT_TRUE(HasNote(l, "p1.jsonl:12001", "line too long"));
    EXPECT_EQ(CountEvents(l, "fork"), 3 * 10000);
    EXPECT_EQ(CountEvents(l, "mr_register"), 0);  // counted, not kept
    EXPECT_EQ(l.processes[2].summary.registrations, 20000);
    EXPECT_EQ(l.processes[2].summary.counts.at("mr_register"), 20000);
    int64_t seq = -1;
    for (const Event& e : l.processes[0].events) {
      EXPECT_GT(e.seq, seq);
      seq = e.seq;
    }
  }
}

// Collected logs are often links: a job directory of links to per-host directories, or to
// files. Links are followed; a file or directory reached twice (a loop) is read once; a
// dangling link named like a log is noted.
TEST(LogParser, SymlinkedFilesAndDirectoriesAreReadOnce) {
  std::string real = forkguard::test_support::MakeTempDir("real");
  std::string job = forkguard::test_support::MakeTempDir("job");
  for (int pid : {11, 12}) {
    FILE* out = fopen((real + "/p" + std::to_string(pid) + ".jsonl").c_str(), "w");
    ASSERT_TRUE(out);
    fprintf(out, "{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"pid\":%d}\n", pid);
    fclose(out);
  }
  ASSERT_EQ(0, symlink(real.c_str(), (job + "/host-a").c_str()));
  ASSERT_EQ(0, symlink((real + "/p11.jsonl").c_str(), (job + "/again.jsonl").c_str()));
  ASSERT_EQ(0, symlink(job.c_str(), (job + "/loop").c_str()));
  ASSERT_EQ(0, symlink("/nonexistent/p9.jsonl", (job + "/dangling.jsonl").c_str()));
  LogSet l;
  ReadLogs({job}, &l);
  EXPECT_EQ(l.processes.size(), 2u);
  EXPECT_EQ(CountEvents(l, "fork"), 2);
  EXPECT_EQ(l.files_read, 2);
  EXPECT_TRUE(HasNote(l, "dangling.jsonl", "No such file or directory"));
  // The same file named twice on the command line, and through its directory: once.
  LogSet twice;
  ReadLogs({real, real + "/p12.jsonl", job + "/again.jsonl"}, &twice);
  EXPECT_EQ(twice.processes.size(), 2u);
  EXPECT_EQ(twice.files_read, 2);
}

// A name the shim would give a log, but with a pid no kernel gives: not a shim's name,
// and no exception (std::stoll threw on it).
TEST(HostileLog, FileNameWithAHugePidIsReadAsAnyLog) {
  char tmpl[] = "/tmp/fg_hostile_name.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string dir = tmpl;
  std::string path = dir + "/forkguard.x.9999999999999999999.1.jsonl";
  {
    std::ofstream f(path);
    f << R"({"schema":"forkguard.event/1","event":"fork","pid":3,"ts_ns":1,"verdict":"clean"})"
      << "\n";
  }
  LogSet l;
  ReadLogs({dir}, &l);
  EXPECT_EQ(l.files_read, 1);
  EXPECT_EQ(l.processes.size(), 1u);
  unlink(path.c_str());
  rmdir(dir.c_str());
}

// --owner: in a directory every user can write, only the owner's files are read; another
// user's file or directory and every symlink (to a file, a directory, "/") are skipped with
// a note.
TEST(HostileLog, OwnerPolicyReadsOnlyTheOwnersFilesAndFollowsNoLink) {
  ASSERT_EQ(geteuid(), 0u) << "this test gives files to uid 65534 and needs root";
  char tmpl[] = "/tmp/fg_owner.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl, other = dir + "/planted", mine = dir + "/forkguard.h.3.1.jsonl";
  auto write = [](const std::string& path, int pid) {
    std::ofstream f(path);
    f << R"({"schema":"forkguard.event/1","event":"fork","pid":)" << pid
      << R"(,"ts_ns":1,"verdict":"hazard","job":"42"})"
      << "\n";
  };
  write(mine, 3);
  write(dir + "/forkguard.h.4.1.jsonl", 4);
  ASSERT_EQ(chown((dir + "/forkguard.h.4.1.jsonl").c_str(), 65534, 65534), 0);
  ASSERT_EQ(mkdir(other.c_str(), 0755), 0);
  write(other + "/forkguard.h.5.1.jsonl", 5);
  ASSERT_EQ(chown(other.c_str(), 65534, 65534), 0);
  ASSERT_EQ(symlink("/", (dir + "/root").c_str()), 0);
  ASSERT_EQ(symlink(mine.c_str(), (dir + "/again.jsonl").c_str()), 0);

  LogSet l;
  ReadLogs({dir}, &l, 1, ReadPolicy{geteuid()});
  for (const auto& n : l.notes) printf("note: %s: %s\n", n.where.c_str(), n.text.c_str());
  ASSERT_EQ(l.processes.size(), 1u);
  EXPECT_EQ(l.processes[0].pid, 3);
  EXPECT_TRUE(HasNote(l, "forkguard.h.4.1.jsonl", "owned by uid 65534"));
  EXPECT_TRUE(HasNote(l, "/planted", "owned by uid 65534"));
  EXPECT_TRUE(HasNote(l, "/root", "a symbolic link, not followed"));
  EXPECT_TRUE(HasNote(l, "/again.jsonl", "a symbolic link, not followed"));

  LogSet top;  // a symlink named on the command line is not followed either
  ReadLogs({dir + "/root"}, &top, 1, ReadPolicy{geteuid()});
  EXPECT_TRUE(top.processes.empty());
  EXPECT_TRUE(HasNote(top, "/root", "a symbolic link, not followed"));

  LogSet all;  // without a policy: every file, links followed (the loop to / too: 3 levels)
  ReadLogs({dir + "/forkguard.h.4.1.jsonl", other}, &all, 1);
  EXPECT_EQ(all.processes.size(), 2u);
  std::string cmd = "rm -rf " + dir;
  ASSERT_EQ(system(cmd.c_str()), 0);
}

// A suppression file or baseline named on the command line is read only as a regular file:
// a FIFO there is refused at once, not waited on.
TEST(HostileLog, InputFilesAreRegularFilesOnly) {
  char tmpl[] = "/tmp/fg_input.XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  std::string fifo = std::string(tmpl) + "/supp", file = std::string(tmpl) + "/ok";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::ofstream(file) << "hello\n";
  std::string text, error;
  EXPECT_FALSE(ReadInputFile(fifo, kMaxInputBytes, &text, &error));
  EXPECT_EQ(error, "not a regular file");
  EXPECT_FALSE(ReadInputFile(file, 3, &text, &error));
  EXPECT_TRUE(ReadInputFile(file, kMaxInputBytes, &text, &error)) << error;
  EXPECT_EQ(text, "hello\n");
  unlink(fifo.c_str());
  unlink(file.c_str());
  rmdir(tmpl);
}

// forkguard watch's logs beside the shim's: a process both logged is reported once, from the
// shim's record (it has the stacks), with one note; a process only the watcher saw (a static
// program) is reported from the watcher's, its fork refused in the kernel counted as no child.
// Writes `text` to DIR/NAME.
void WriteIn(const std::string& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir + "/" + name) << text;
}

TEST(LogParser, WatcherLogsBesideTheShimsPreferTheShim) {
  std::string dir = forkguard::test_support::MakeTempDir("watcher");
  const std::string fork =
      R"("verdict":"hazard","reasons":["child-segv","inherited-rdma"],"site":null,"ranges":[)"
      R"({"addr":4096,"len":4096,"call":"ib_umem_get","dontfork":true,"kind":"anonymous",)"
      R"("effect":"child-segv","basis":"dontfork"}],"via":"kernel"})";
  WriteIn(
      dir, "forkguard.h.10.100.jsonl",
      R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":10,"ppid":1,"prog":"train_with_a_long_name","rank":null,"local_rank":null,"job":null,"start_ns":100})"
      "\n"
      R"({"event":"fork","ts":5,"seq":0,"verdict":"hazard","reasons":["child-segv"],"action":"proceeded","site":"0xa"})"
      "\n");
  WriteIn(
      dir, "forkguard-watch.h.10.90.jsonl",
      R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":10,"ppid":1,"prog":"train_with_a_lo","rank":null,"local_rank":null,"job":null,"start_ns":90,"source":"watcher"})"
      "\n"
      R"({"event":"fork","ts":15,"seq":0,"action":"proceeded",)" +
          fork + "\n");
  WriteIn(
      dir, "forkguard-watch.h.20.90.jsonl",
      R"({"schema":"forkguard.event/2","event":"header","host":"h","pid":20,"ppid":1,"prog":"static_prog","rank":null,"local_rank":null,"job":null,"start_ns":90,"source":"watcher"})"
      "\n"
      R"({"event":"fork","ts":15,"seq":0,"action":"refused","errno":1,)" +
          fork + "\n" + R"({"event":"fork","ts":25,"seq":1,"action":"proceeded",)" + fork + "\n" +
          R"({"event":"fork_child","ts":26,"seq":2,"child_pid":21})" + "\n");
  LogSet l;
  ReadLogs({dir}, &l);
  ASSERT_EQ(l.processes.size(), 2u);
  for (const ProcessLog& p : l.processes) {
    EXPECT_EQ(p.watcher, p.pid == 20) << p.pid;
    EXPECT_EQ(p.forks, p.pid == 20 ? 2 : 1) << p.pid;
  }
  EXPECT_TRUE(HasNote(l, "forkguard watch",
                      "1 process logged by both the shim and forkguard watch: the shim's record "
                      "is reported (it has the stacks)"));
  std::string text = RenderText(BuildJobReport(l, nullptr));
  EXPECT_NE(text.find("action: 1 proceeded, 1 refused by the kernel (errno 1); 1 child forked"),
            std::string::npos)
      << text;
}

// A container with pid and UTS namespaces of its own: the shim inside logs pid 1 and the
// container's host name, the watcher the node's pid and host with ns_pid and ns_host. One
// process; the shim's record is kept. Another container's pid 1 is not it: another host
// name, or the same one later (a container started after the first one ended).
TEST(LogParser, WatcherRecordOfAContainerProcessPairsByItsNamespacePidAndHost) {
  std::string dir = forkguard::test_support::MakeTempDir("watcher-ns");
  WriteIn(
      dir, "forkguard.c0ffee.1.100.jsonl",
      R"({"schema":"forkguard.event/2","event":"header","host":"c0ffee","pid":1,"ppid":0,"prog":"hazard_prog","rank":null,"local_rank":null,"job":null,"start_ns":100})"
      "\n"
      R"({"event":"fork","ts":5,"seq":0,"verdict":"hazard","reasons":["child-segv"],"action":"proceeded","site":"0xa"})"
      "\n");
  struct Watched {
    int pid;
    const char* ns_host;
    const char* start_ns;
  };
  for (auto [pid, ns_host, start_ns] :
       {Watched{4321, "c0ffee", "90"}, Watched{4400, "beef00", "90"},
        Watched{4500, "c0ffee", "5000000000"}}) {
    WriteIn(dir, "forkguard-watch.node." + std::to_string(pid) + "." + start_ns + ".jsonl",
            R"({"schema":"forkguard.event/2","event":"header","host":"node","pid":)" +
                std::to_string(pid) +
                R"(,"ppid":1,"prog":"hazard_prog","rank":null,"local_rank":null,"job":null,)"
                R"("start_ns":)" +
                start_ns + R"(,"source":"watcher","ns_pid":1,"ns_host":")" + ns_host + "\"}\n" +
                R"({"event":"fork","ts":15,"seq":0,"action":"proceeded","verdict":"hazard",)"
                R"("reasons":["child-segv"],"site":null,"ranges":[],"via":"kernel"})"
                "\n");
  }
  LogSet l;
  ReadLogs({dir}, &l);
  ASSERT_EQ(l.processes.size(), 3u);
  for (const ProcessLog& p : l.processes) {
    if (p.watcher) {
      EXPECT_TRUE(p.pid == 4400 || p.pid == 4500) << p.pid;
      EXPECT_EQ(p.ns_pid, 1);
      EXPECT_EQ(p.ns_host, p.pid == 4400 ? "beef00" : "c0ffee");
    } else {
      EXPECT_EQ(p.host, "c0ffee");
    }
  }
  EXPECT_TRUE(HasNote(l, "forkguard watch",
                      "1 process logged by both the shim and forkguard watch: the shim's record "
                      "is reported (it has the stacks)"));
}

}  // namespace
}  // namespace forkguard::cli
