// spank_forkguard.so loaded as Slurm loads it (dlopen), with the spank_* and slurm_* functions
// it calls provided here: a task's environment in a map, the log lines in a list. What srun
// and slurmstepd do around it is tested on the real Slurm of the pair
// (//tests/cluster:slurm_srun_test).
extern "C" {
#include <slurm/spank.h>
}

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "tests/support/runfiles.h"

namespace {

std::map<std::string, std::string> g_env;
std::vector<std::string> g_log;
int g_remote = 1;
spank_context_t g_context = S_CTX_REMOTE;
std::vector<spank_option*> g_registered;
uint32_t g_job_uid = 0;  // S_JOB_UID

void Log(const char* level, const char* fmt, va_list ap) {
  char buf[1024];
  vsnprintf(buf, sizeof(buf), fmt, ap);
  g_log.push_back(std::string(level) + buf);
}

}  // namespace

extern "C" {
int spank_remote(spank_t) { return g_remote; }
spank_context_t spank_context(void) { return g_context; }
spank_err_t spank_option_register(spank_t, struct spank_option* opt) {
  g_registered.push_back(opt);
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}
const char* spank_strerror(spank_err_t) { return "fake error"; }
spank_err_t spank_get_item(spank_t, spank_item_t item, ...) {
  va_list ap;
  va_start(ap, item);
  uint32_t* p = va_arg(ap, uint32_t*);
  va_end(ap);
  if (item == S_JOB_ID) *p = 4242;
  if (item == S_JOB_STEPID) *p = 3;
  if (item == S_JOB_UID) *p = g_job_uid;  // uid_t is 32 bits
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}
spank_err_t spank_getenv(spank_t, const char* var, char* buf, int len) {
  auto it = g_env.find(var);
  if (it == g_env.end()) return static_cast<spank_err_t>(ESPANK_ENV_NOEXIST);
  if (static_cast<int>(it->second.size()) >= len) return static_cast<spank_err_t>(ESPANK_NOSPACE);
  snprintf(buf, len, "%s", it->second.c_str());
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}
spank_err_t spank_setenv(spank_t, const char* var, const char* val, int overwrite) {
  if (!overwrite && g_env.count(var)) return static_cast<spank_err_t>(ESPANK_ENV_EXISTS);
  g_env[var] = val;
  return static_cast<spank_err_t>(ESPANK_SUCCESS);
}
void slurm_error(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Log("error: ", fmt, ap);
  va_end(ap);
}
void slurm_info(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  Log("info: ", fmt, ap);
  va_end(ap);
}
}

namespace {

using Hook = int (*)(spank_t, int, char**);

// One load of the plugin: its settings are per process, as in one srun or slurmstepd.
class Plugin {
 public:
  explicit Plugin(std::vector<std::string> args) {
    std::string path = std::string(getenv("TEST_SRCDIR")) + "/forkguard/slurm/spank_forkguard.so";
    handle_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle_ == nullptr) ADD_FAILURE() << dlerror();
    std::vector<char*> av;
    for (auto& a : args) av.push_back(a.data());
    init_rc_ = Call("slurm_spank_init", av);
  }
  ~Plugin() {
    if (handle_ != nullptr) dlclose(handle_);
  }
  int init_rc() const { return init_rc_; }
  // The option slurm_spank_init registered.
  const spank_option* Option() { return g_registered.empty() ? nullptr : g_registered.back(); }
  int SetOption(const char* value) { return Option()->cb(Option()->val, value, g_remote); }
  // What slurmstepd calls for a step: user_init once, then task_init in each task.
  void RunStep() {
    std::vector<char*> none;
    Call("slurm_spank_user_init", none);
    RunTask();
  }
  void RunTask() {
    std::vector<char*> none;
    Call("slurm_spank_task_init", none);
  }
  // What srun calls around a step it launched: local_user_init, then exit when it ends.
  void RunLocalStep() {
    std::vector<char*> none;
    Call("slurm_spank_local_user_init", none);
    Call("slurm_spank_exit", none);
  }
  const char* Sym(const char* name) { return static_cast<const char*>(dlsym(handle_, name)); }

 private:
  int Call(const char* fn, std::vector<char*>& av) {
    auto f = reinterpret_cast<Hook>(dlsym(handle_, fn));
    if (f == nullptr) {
      ADD_FAILURE() << fn << " not exported";
      return -99;
    }
    return f(nullptr, static_cast<int>(av.size()), av.data());
  }
  void* handle_ = nullptr;
  int init_rc_ = -99;
};

class SpankForkguardTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_env.clear();
    g_log.clear();
    g_registered.clear();
    g_remote = 1;
    g_context = S_CTX_REMOTE;
    g_job_uid = geteuid();
    shim_ = std::string(getenv("TEST_TMPDIR")) + "/libforkguard.so";
    FILE* f = fopen(shim_.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fclose(f);
  }
  std::string env(const char* v) { return g_env.count(v) ? g_env[v] : "<unset>"; }
  std::string shim_;
};

TEST_F(SpankForkguardTest, IsASpankPluginWithTheOption) {
  Plugin p({});
  EXPECT_STREQ(p.Sym("plugin_name"), "forkguard");
  EXPECT_STREQ(p.Sym("plugin_type"), "spank");
  // Registered (sbatch and salloc see no spank_options[] table), in the remote context too.
  ASSERT_EQ(g_registered.size(), 1u);
  const spank_option* o = p.Option();
  EXPECT_STREQ(o->name, "forkguard");
  EXPECT_EQ(o->has_arg, 2);  // --forkguard or --forkguard=MODE
}

TEST_F(SpankForkguardTest, OptionRegisteredForSrunSbatchSallocAndTheTasks) {
  for (spank_context_t c : {S_CTX_LOCAL, S_CTX_ALLOCATOR, S_CTX_REMOTE}) {
    g_registered.clear();
    g_context = c;
    Plugin p({});
    EXPECT_EQ(g_registered.size(), 1u) << c;
  }
  g_registered.clear();
  g_context = S_CTX_JOB_SCRIPT;
  Plugin p({});
  EXPECT_TRUE(g_registered.empty());
}

TEST_F(SpankForkguardTest, OffByDefaultNothingChanges) {
  Plugin p({"shim=" + shim_});
  g_env["LD_PRELOAD"] = "/lib/other.so";
  p.RunStep();
  EXPECT_EQ(env("LD_PRELOAD"), "/lib/other.so");
  EXPECT_EQ(env("FORKGUARD_MODE"), "<unset>");
  EXPECT_TRUE(g_log.empty());
}

TEST_F(SpankForkguardTest, OptionAppendsTheShimKeepingWhatIsThere) {
  Plugin p({"shim=" + shim_});
  ASSERT_EQ(p.SetOption(nullptr), 0);
  g_env["LD_PRELOAD"] = "/lib/other.so";
  p.RunStep();
  EXPECT_EQ(env("LD_PRELOAD"), "/lib/other.so:" + shim_);
  EXPECT_EQ(env("FORKGUARD_MODE"), "warn");
  EXPECT_EQ(env("FORKGUARD_LOG"), "<unset>");
  // Already there (an sbatch script's environment passed to its srun): not added twice.
  p.RunStep();
  EXPECT_EQ(env("LD_PRELOAD"), "/lib/other.so:" + shim_);
  g_env.erase("LD_PRELOAD");
  p.RunStep();
  EXPECT_EQ(env("LD_PRELOAD"), shim_);
  EXPECT_TRUE(g_log.empty());
}

TEST_F(SpankForkguardTest, OptionModeWinsOverTheEnvironment) {
  Plugin p({"shim=" + shim_, "mode=abort"});
  ASSERT_EQ(p.SetOption("error"), 0);
  g_env["FORKGUARD_MODE"] = "warn";
  p.RunStep();
  EXPECT_EQ(env("FORKGUARD_MODE"), "error");
}

// Fix mode: asked by a job, or the site's mode for jobs that name none.
TEST_F(SpankForkguardTest, FixModeFromTheOptionAndFromTheSite) {
  {
    Plugin job({"shim=" + shim_});
    ASSERT_EQ(job.SetOption("fix"), 0);
    job.RunStep();
    EXPECT_EQ(env("LD_PRELOAD"), shim_);
    EXPECT_EQ(env("FORKGUARD_MODE"), "fix");
  }
  g_env.clear();
  g_registered.clear();
  {
    Plugin site({"default=on", "mode=fix", "shim=" + shim_});
    site.RunStep();
    EXPECT_EQ(env("LD_PRELOAD"), shim_);
    EXPECT_EQ(env("FORKGUARD_MODE"), "fix");
  }
  EXPECT_TRUE(g_log.empty());
}

TEST_F(SpankForkguardTest, SiteDefaultOnWithModeAndLogTemplate) {
  Plugin p({"default=on", "mode=abort", "log=/shared/fg/%j/%h", "shim=" + shim_});
  EXPECT_EQ(p.init_rc(), 0);
  p.RunStep();
  EXPECT_EQ(env("LD_PRELOAD"), shim_);
  EXPECT_EQ(env("FORKGUARD_MODE"), "abort");
  EXPECT_EQ(env("FORKGUARD_LOG"), "/shared/fg/%j/%h");
  // The user's own settings stay.
  g_env.clear();
  g_env["FORKGUARD_MODE"] = "warn";
  g_env["FORKGUARD_LOG"] = "/mine";
  p.RunStep();
  EXPECT_EQ(env("FORKGUARD_MODE"), "warn");
  EXPECT_EQ(env("FORKGUARD_LOG"), "/mine");
}

TEST_F(SpankForkguardTest, OffOptionUnderSiteDefaultOn) {
  Plugin p({"default=on", "shim=" + shim_});
  ASSERT_EQ(p.SetOption("off"), 0);
  p.RunStep();
  EXPECT_EQ(env("LD_PRELOAD"), "<unset>");
  EXPECT_EQ(env("FORKGUARD_MODE"), "<unset>");
}

TEST_F(SpankForkguardTest, MissingShimOneLineAndTheTaskRunsWithout) {
  Plugin p({"default=on", "shim=/nonexistent/libforkguard.so"});
  p.RunStep();
  p.RunTask();  // a second task of the step: no second line
  EXPECT_EQ(env("LD_PRELOAD"), "<unset>");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: shim /nonexistent/libforkguard.so not readable (No such file or "
            "directory): job 4242 step 3 runs without forkguard");
}

TEST_F(SpankForkguardTest, BadOptionValueIsAnErrorBadSiteArgumentsAreIgnored) {
  Plugin p({"default=maybe", "mode=loud", "log=relative/dir", "colour=blue", "noequals",
            "shim=" + shim_});
  EXPECT_EQ(p.init_rc(), 0);  // an optional plugin's bad config never fails a job
  ASSERT_EQ(g_log.size(), 5u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: plugstack.conf default=maybe: expected on or off; ignored");
  EXPECT_EQ(g_log[1],
            "error: forkguard: plugstack.conf mode=loud: expected warn, error, abort or fix; "
            "ignored");
  EXPECT_EQ(g_log[4],
            "error: forkguard: plugstack.conf argument 'noequals': expected KEY=VALUE; ignored");
  g_log.clear();
  g_remote = 0;
  EXPECT_EQ(p.SetOption("loud"), -1);
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: --forkguard=loud: expected warn, error, abort, fix or off");
  p.RunStep();  // still off: the defaults stand
  EXPECT_EQ(env("LD_PRELOAD"), "<unset>");
}

TEST_F(SpankForkguardTest, ShimAndCliMustBeAbsolutePaths) {
  // Relative, they would be looked up from whatever directory srun or slurmstepd is in.
  Plugin p({"default=on", "shim=libforkguard.so", "forkguard=bin/forkguard"});
  ASSERT_EQ(g_log.size(), 2u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: plugstack.conf shim=libforkguard.so: not an absolute path; "
            "ignored");
  EXPECT_EQ(g_log[1],
            "error: forkguard: plugstack.conf forkguard=bin/forkguard: not an absolute path; "
            "ignored");
}

TEST_F(SpankForkguardTest, BadValuesAreLoggedEscapedAndCapped) {
  // Terminal escapes, newlines and DEL from plugstack.conf or the command line do not reach
  // slurmd's log or srun's terminal as they are; a long value is cut.
  Plugin p({"mode=\x1b[31mred\n", "noequals\r\x1b]0;x\x07", "log=rel\x7f\\",
            "default=" + std::string(300, 'a'),
            "colour=\xc2\x9b"
            "x"});
  ASSERT_EQ(g_log.size(), 5u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: plugstack.conf mode=\\x1b[31mred\\x0a: expected warn, error, "
            "abort or fix; ignored");
  EXPECT_EQ(g_log[1],
            "error: forkguard: plugstack.conf argument 'noequals\\x0d\\x1b]0;x\\x07': expected "
            "KEY=VALUE; ignored");
  EXPECT_EQ(g_log[2],
            "error: forkguard: plugstack.conf log=rel\\x7f\\x5c: not an absolute path; ignored");
  EXPECT_EQ(g_log[3], "error: forkguard: plugstack.conf default=" + std::string(128, 'a') +
                          "...: expected on or off; ignored");
  EXPECT_EQ(g_log[4].rfind(
                "error: forkguard: plugstack.conf argument 'colour=\\xc2\\x9bx': unknown (", 0),
            0u)
      << g_log[4];
  g_log.clear();
  EXPECT_EQ(p.SetOption("\x1b[2J"), -1);
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: --forkguard=\\x1b[2J: expected warn, error, abort, fix or off");
}

TEST_F(SpankForkguardTest, ShimReadableIsCheckedForTheEffectiveUid) {
  // slurmstepd runs user_init as the job's user (effective uid) with root's real uid: a shim
  // only root can read is not readable for the task.
  if (geteuid() != 0) GTEST_SKIP() << "needs root to change the effective uid";
  ASSERT_EQ(chmod(shim_.c_str(), 0600), 0);
  Plugin p({"default=on", "shim=" + shim_});
  ASSERT_EQ(seteuid(65534), 0);
  p.RunStep();
  ASSERT_EQ(seteuid(0), 0);
  EXPECT_EQ(env("LD_PRELOAD"), "<unset>");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: shim " + shim_ +
                          " not readable (Permission denied): job 4242 step 3 runs without "
                          "forkguard");
}

}  // namespace

namespace {

std::string ReadFile(const std::string& path) {
  std::string out;
  FILE* f = fopen(path.c_str(), "r");
  if (f == nullptr) return "<missing>";
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), f)) > 0) out.append(buf, n);
  fclose(f);
  return out;
}

// A stand-in for the forkguard CLI: prints its arguments (the "report"), or fails.
std::string FakeCli(const std::string& dir, const char* body) {
  std::string path = dir + "/fake-forkguard";
  FILE* f = fopen(path.c_str(), "w");
  fprintf(f, "#!/bin/sh\n%s\n", body);
  fclose(f);
  chmod(path.c_str(), 0755);
  return path;
}

// srun's side of a step (local context), its report directory made empty (0755, this
// user's), and the fake CLI.
std::string LocalStep(const std::string& dir, const char* cli_body) {
  EXPECT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  EXPECT_EQ(chmod(dir.c_str(), 0755), 0);
  g_context = S_CTX_LOCAL;
  g_remote = 0;
  unsetenv("FORKGUARD_LOG");
  return FakeCli(getenv("TEST_TMPDIR"), cli_body);
}

// The names in a directory, dot files too, sorted, space separated.
std::string Ls(const std::string& dir) {
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) return "<missing>";
  std::string out;
  for (const std::string& n : forkguard::test_support::DirNames(dir))
    out += (out.empty() ? "" : " ") + n;
  return out;
}

unsigned Mode(const std::string& path) {
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) return 0;
  return st.st_mode & 07777;
}

std::string UserName() {
  passwd* pw = getpwuid(geteuid());
  return pw != nullptr ? pw->pw_name : std::to_string(geteuid());
}

}  // namespace

TEST_F(SpankForkguardTest, StepEndWritesTheJobsReportWhereTheSiteSays) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports";
  std::string cli = LocalStep(dir, "echo \"$*\"");
  g_job_uid = 4321;  // the job's user, from S_JOB_UID
  Plugin p({"default=on", "log=/shared/fg/%j/%h", "report=" + dir, "forkguard=" + cli});
  p.RunLocalStep();
  // job 4242 step 3 (the fake spank_get_item), over the job's own log directory only, whose
  // files the CLI reads only when the job's user owns them
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"),
            "report --job 4242 --owner 4321 --format html --fail-on never -- /shared/fg/4242\n");
  EXPECT_EQ(Ls(dir), "forkguard-4242.3.html");  // no temporary file, no empty .err
  EXPECT_TRUE(g_log.empty()) << g_log[0];
}

TEST_F(SpankForkguardTest, StepEndReportIsPrivate) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-private";
  std::string cli = LocalStep(dir, "echo report; echo note >&2");
  mode_t old = umask(0);  // whatever srun's umask is
  {
    Plugin p({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});
    p.RunLocalStep();
  }
  umask(old);
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"), "report\n");
  EXPECT_EQ(Mode(dir + "/forkguard-4242.3.html"), 0600u);
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html.err"), "note\n");
  EXPECT_EQ(Mode(dir + "/forkguard-4242.3.html.err"), 0600u);
}

TEST_F(SpankForkguardTest, StepEndReportFollowsNoSymlinkPlantedInItsDirectory) {
  // Symlinks at the names the report used to be written through, and at its final name: the
  // files they point at stay as they are, and the report replaces the link itself.
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-links";
  std::string cli = LocalStep(dir, "echo report; echo note >&2");
  std::string victim = tmp + "/victim", victim_err = tmp + "/victim-err",
              victim_final = tmp + "/victim-final";
  for (const std::string& v : {victim, victim_err, victim_final}) {
    FILE* f = fopen(v.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs("victim\n", f);
    fclose(f);
  }
  ASSERT_EQ(symlink(victim.c_str(), (dir + "/forkguard-4242.3.html.tmp").c_str()), 0);
  ASSERT_EQ(symlink(victim_err.c_str(), (dir + "/forkguard-4242.3.html.err").c_str()), 0);
  ASSERT_EQ(symlink(victim_final.c_str(), (dir + "/forkguard-4242.3.html").c_str()), 0);
  {
    Plugin p({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});
    p.RunLocalStep();
  }
  EXPECT_EQ(ReadFile(victim), "victim\n");
  EXPECT_EQ(ReadFile(victim_err), "victim\n");
  EXPECT_EQ(ReadFile(victim_final), "victim\n");
  struct stat st;
  ASSERT_EQ(lstat((dir + "/forkguard-4242.3.html").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"), "report\n");
  ASSERT_EQ(lstat((dir + "/forkguard-4242.3.html.err").c_str(), &st), 0);
  EXPECT_TRUE(S_ISREG(st.st_mode));
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html.err"), "note\n");
  EXPECT_TRUE(g_log.empty()) << g_log[0];
}

TEST_F(SpankForkguardTest, StepEndReportIsNotBlockedByWhatIsThereFirst) {
  // Something at the temporary name of old and a file at the final name: the report is
  // written all the same.
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-blocked";
  std::string cli = LocalStep(dir, "echo report");
  ASSERT_EQ(mkdir((dir + "/forkguard-4242.3.html.tmp").c_str(), 0700), 0);
  FILE* f = fopen((dir + "/forkguard-4242.3.html").c_str(), "w");
  ASSERT_NE(f, nullptr);
  fputs("old\n", f);
  fclose(f);
  {
    Plugin p({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});
    p.RunLocalStep();
  }
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"), "report\n");
  EXPECT_TRUE(g_log.empty()) << g_log[0];
}

TEST_F(SpankForkguardTest, StepEndReportRefusesADirectoryOthersCanWriteWithoutTheStickyBit) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-open";
  std::string cli = LocalStep(dir, "echo report");
  for (mode_t m : {0777, 0775, 0757}) {
    g_log.clear();
    ASSERT_EQ(chmod(dir.c_str(), m), 0);
    {
      Plugin p({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});
      p.RunLocalStep();
    }
    EXPECT_EQ(Ls(dir), "") << std::oct << m;
    ASSERT_EQ(g_log.size(), 1u) << std::oct << m;
    char mode[8];
    snprintf(mode, sizeof(mode), "%04o", m);
    EXPECT_EQ(g_log[0], "error: forkguard: report=" + dir +
                            ": writable by group or others without the sticky bit (mode " + mode +
                            "), so anyone could replace the report (chmod 1777 for a directory "
                            "per user, or 0755); no report for job 4242 step 3");
  }
  // A symlink to a directory that is fine: not followed.
  g_log.clear();
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(symlink(dir.c_str(), (tmp + "/reports-link").c_str()), 0);
  {
    Plugin p(
        {"default=on", "log=/shared/fg/%j", "report=" + tmp + "/reports-link", "forkguard=" + cli});
    p.RunLocalStep();
  }
  EXPECT_EQ(Ls(dir), "");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find("reports-link: cannot open it (a symlink or not a directory)"),
            std::string::npos)
      << g_log[0];
}

TEST_F(SpankForkguardTest, StepEndReportInASharedStickyDirectoryGoesToTheUsersOwn) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-shared";
  std::string cli = LocalStep(dir, "echo report");
  std::string mine = dir + "/" + UserName();
  ASSERT_EQ(chmod(dir.c_str(), 01777), 0);
  auto step = [&] {
    g_log.clear();
    Plugin p({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});
    p.RunLocalStep();
  };
  step();
  EXPECT_EQ(Ls(dir), UserName());
  EXPECT_EQ(Mode(mine), 0700u);
  EXPECT_EQ(ReadFile(mine + "/forkguard-4242.3.html"), "report\n");
  EXPECT_EQ(Mode(mine + "/forkguard-4242.3.html"), 0600u);
  EXPECT_TRUE(g_log.empty()) << g_log[0];
  // The user's directory open to others: refused, nothing written.
  ASSERT_EQ(system(("rm -rf " + mine).c_str()), 0);
  ASSERT_EQ(mkdir(mine.c_str(), 0700), 0);
  ASSERT_EQ(chmod(mine.c_str(), 0777), 0);
  step();
  EXPECT_EQ(Ls(mine), "");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find(mine + " is not this user's own directory"), std::string::npos)
      << g_log[0];
  // A symlink another user planted there: not followed.
  std::string elsewhere = tmp + "/elsewhere";
  ASSERT_EQ(system(("rm -rf " + mine + " " + elsewhere + " && mkdir " + elsewhere).c_str()), 0);
  ASSERT_EQ(symlink(elsewhere.c_str(), mine.c_str()), 0);
  step();
  EXPECT_EQ(Ls(elsewhere), "");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: cannot open " + mine +
                          " (a symlink or not a directory); no report for job 4242 step 3");
  if (geteuid() != 0) return;
  // Made by another user first: refused.
  ASSERT_EQ(unlink(mine.c_str()), 0);
  ASSERT_EQ(mkdir(mine.c_str(), 0700), 0);
  ASSERT_EQ(chown(mine.c_str(), 65534, 65534), 0);
  step();
  EXPECT_EQ(Ls(mine), "");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find("(owner uid 65534, mode 0700; expected uid 0"), std::string::npos)
      << g_log[0];
  // DIR writable by no one else but another user's: the user's own directory in it too.
  ASSERT_EQ(system(("rm -rf " + mine).c_str()), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0755), 0);
  ASSERT_EQ(chown(dir.c_str(), 65534, 65534), 0);
  step();
  EXPECT_EQ(ReadFile(mine + "/forkguard-4242.3.html"), "report\n");
  EXPECT_TRUE(g_log.empty()) << g_log[0];
}

TEST_F(SpankForkguardTest, StepEndReportReadsOnlyTheJobsOwnLogDirectory) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-logs";
  std::string cli = LocalStep(dir, "echo \"$*\"");
  auto report = [&](const std::string& tmpl) {
    g_log.clear();
    unlink((dir + "/forkguard-4242.3.html").c_str());
    Plugin p({"default=on", "log=" + tmpl, "report=" + dir, "forkguard=" + cli});
    p.RunLocalStep();
    return ReadFile(dir + "/forkguard-4242.3.html");
  };
  std::string uid = std::to_string(geteuid());
  auto argv = [&](const std::string& logs) {
    return "report --job 4242 --owner " + uid + " --format html --fail-on never -- " + logs + "\n";
  };
  // The template up to and including its first component with %j, %j the job id, %% a '%'.
  EXPECT_EQ(report("/shared/fg/%j/%h"), argv("/shared/fg/4242"));
  EXPECT_EQ(report("/shared/fg/%j"), argv("/shared/fg/4242"));
  EXPECT_EQ(report("/%j/%h/%r"), argv("/4242"));  // not "/"
  EXPECT_EQ(report("/shared/fg/job-%j%%x/%r"), argv("/shared/fg/job-4242%x"));
  EXPECT_EQ(report("/shared/100%%/%j/%h"), argv("/shared/100%/4242"));
  EXPECT_TRUE(g_log.empty()) << g_log[0];
  // The task's FORKGUARD_LOG (srun's environment) wins, as in the tasks.
  setenv("FORKGUARD_LOG", "/mine/%j/%p", 1);
  EXPECT_EQ(report("/shared/fg/%j/%h"), argv("/mine/4242"));
  unsetenv("FORKGUARD_LOG");
  // No directory of the job's own: every job's logs, or "/" (%h first): refused.
  for (const char* t : {"/shared/fg", "/%h/%j", "/shared/%j-%h/x", "/shared/%h-%j/x",
                        "/shared/fg/%p/%j", "/shared/fg/%x/%j"}) {
    EXPECT_EQ(report(t), "<missing>") << t;
    ASSERT_EQ(g_log.size(), 1u) << t;
    EXPECT_EQ(g_log[0], std::string("error: forkguard: the log template ") + t +
                            " has no directory of the job's own (the report needs %j in a path "
                            "component before any other %-expansion and without one beside "
                            "it, e.g. log=/shared/fg/%j/%h); no report for job 4242 step 3");
  }
  // The job's directory made by another user, or a symlink: refused.
  std::string logs = tmp + "/fglogs";
  ASSERT_EQ(system(("rm -rf " + logs + " && mkdir -p " + logs + "/4242").c_str()), 0);
  g_job_uid = geteuid() + 1;
  EXPECT_EQ(report(logs + "/%j/%h"), "<missing>");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: log directory " + logs + "/4242 is owned by uid " + uid +
                          ", not by the job's user (uid " + std::to_string(geteuid() + 1) +
                          "); no report for job 4242 step 3");
  g_job_uid = geteuid();
  EXPECT_EQ(report(logs + "/%j/%h"), argv(logs + "/4242"));
  ASSERT_EQ(system(("rm -rf " + logs + "/4242 && mkdir " + logs + "/other").c_str()), 0);
  ASSERT_EQ(symlink((logs + "/other").c_str(), (logs + "/4242").c_str()), 0);
  EXPECT_EQ(report(logs + "/%j/%h"), "<missing>");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: log directory " + logs +
                          "/4242: a symlink or not a directory; no report for job 4242 step 3");
}

TEST_F(SpankForkguardTest, StepEndReportIsKilledAfterItsTimeout) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-slow";
  std::string cli = LocalStep(dir, "echo partial; exec sleep 20");
  timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  {
    Plugin p({"default=on", "log=/shared/fg/%j", "report=" + dir, "report_timeout=1",
              "forkguard=" + cli});
    p.RunLocalStep();
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double s = static_cast<double>(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
  EXPECT_GE(s, 1.0);
  EXPECT_LT(s, 5.0);
  EXPECT_EQ(Ls(dir), "");  // no report, no temporary file
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: " + cli +
                          " report took longer than report_timeout=1 seconds: killed; no report "
                          "for job 4242 step 3");
  // Bad bounds: said, and the default stays.
  g_log.clear();
  Plugin q({"report_timeout=0", "report_timeout=86401", "report_timeout=-1",
            "report_timeout=", "report_timeout=12s"});
  ASSERT_EQ(g_log.size(), 5u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: plugstack.conf report_timeout=0: expected seconds, 1 to 86400; "
            "ignored");
}

TEST_F(SpankForkguardTest, StepEndReportOnlyForAJobForkguardWasOnFor) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-off";
  std::string cli = LocalStep(dir, "echo \"$*\"");
  {
    Plugin p({"log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});  // default off
    p.RunLocalStep();
  }
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"), "<missing>");
  // In the tasks' slurmstepd (remote context) exit writes nothing either.
  g_context = S_CTX_REMOTE;
  g_remote = 1;
  Plugin q({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});
  q.RunLocalStep();
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"), "<missing>");
}

TEST_F(SpankForkguardTest, StepEndReportFailureIsOneLineAndKeepsItsErrors) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports-fail";
  std::string cli = LocalStep(dir, "echo 'forkguard report: no logs' >&2; exit 2");
  {
    Plugin p({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + cli});
    p.RunLocalStep();
  }
  EXPECT_EQ(Ls(dir), "forkguard-4242.3.html.err");
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html.err"), "forkguard report: no logs\n");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: " + cli + " report failed (exit 2); its errors: " + dir +
                          "/forkguard-4242.3.html.err; no report for job 4242 step 3");
  // A CLI that is not there: one line, nothing written.
  g_log.clear();
  ASSERT_EQ(system(("rm -rf " + dir + "/*").c_str()), 0);
  {
    Plugin q({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + tmp + "/none"});
    q.RunLocalStep();
  }
  EXPECT_EQ(Ls(dir), "");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: cannot run " + tmp +
                          "/none (No such file or directory); no report for job 4242 step 3");
  // A report directory that is not there: one line, naming it.
  g_log.clear();
  {
    Plugin q({"default=on", "log=/shared/fg/%j", "report=" + dir + "/none", "forkguard=" + cli});
    q.RunLocalStep();
  }
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: report=" + dir +
                          "/none: cannot open it (No such file or directory); no report for job "
                          "4242 step 3");
  // No log directory to report on: one line.
  g_log.clear();
  {
    Plugin r({"default=on", "report=" + dir, "forkguard=" + cli});
    r.RunLocalStep();
  }
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find("no absolute log directory"), std::string::npos) << g_log[0];
  // A relative report directory is a bad plugstack argument: said and ignored.
  g_log.clear();
  Plugin t({"report=relative/dir"});
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find("report=relative/dir: not an absolute path"), std::string::npos);
}

// slurmd, as it starts: `forkguard probe --system --quiet` once, its stdin and stdout
// /dev/null; nothing logged when it succeeds. Not run in the other contexts.
TEST_F(SpankForkguardTest, SlurmdStartRunsTheSystemProbe) {
  std::string tmp = getenv("TEST_TMPDIR"), ran = tmp + "/probe-ran";
  unlink(ran.c_str());
  std::string body = "echo \"$*\" >> " + ran + "; echo out; cat; exit 0";
  std::string cli = FakeCli(tmp, body.c_str());
  g_context = S_CTX_SLURMD;
  g_remote = 0;
  {
    Plugin p({"forkguard=" + cli});  // default=off: the probe runs all the same
    EXPECT_EQ(p.init_rc(), 0);
  }
  EXPECT_EQ(ReadFile(ran), "probe --system --quiet\n");
  EXPECT_TRUE(g_log.empty()) << g_log[0];
  EXPECT_TRUE(g_registered.empty()) << "no --forkguard option in slurmd";
  for (spank_context_t c : {S_CTX_LOCAL, S_CTX_REMOTE, S_CTX_ALLOCATOR, S_CTX_JOB_SCRIPT}) {
    unlink(ran.c_str());
    g_context = c;
    Plugin q({"forkguard=" + cli});
    EXPECT_EQ(ReadFile(ran), "<missing>") << "context " << c;
  }
}

// A probe that fails, hangs or is not there: one line in slurmd's log (with the CLI's first
// line of errors, escaped), and slurm_spank_init still returns 0.
TEST_F(SpankForkguardTest, SlurmdStartProbeFailureIsOneLine) {
  std::string tmp = getenv("TEST_TMPDIR");
  const std::string tail = "; no system pin-probe cache (/run/forkguard) from slurmd";
  g_context = S_CTX_SLURMD;
  g_remote = 0;
  std::string cli = FakeCli(
      tmp,
      "printf 'forkguard probe: cannot write the system cache: \\033[31mno\\nsecond\\n' >&2; "
      "exit 1");
  {
    Plugin p({"forkguard=" + cli});
    EXPECT_EQ(p.init_rc(), 0);
  }
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: " + cli +
                          " probe --system failed (exit 1: forkguard probe: cannot write the "
                          "system cache: \\x1b[31mno)" +
                          tail);

  g_log.clear();
  cli = FakeCli(tmp, "exec sleep 20");
  timespec start, end;
  clock_gettime(CLOCK_MONOTONIC, &start);
  {
    Plugin p({"forkguard=" + cli, "probe_timeout=1"});
    EXPECT_EQ(p.init_rc(), 0);
  }
  clock_gettime(CLOCK_MONOTONIC, &end);
  double s = static_cast<double>(end.tv_sec - start.tv_sec) + (end.tv_nsec - start.tv_nsec) / 1e9;
  EXPECT_GE(s, 1.0);
  EXPECT_LT(s, 5.0);
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: " + cli +
                          " probe --system took longer than probe_timeout=1 seconds: killed" +
                          tail);

  g_log.clear();
  {
    Plugin p({"forkguard=" + tmp + "/none"});
    EXPECT_EQ(p.init_rc(), 0);
  }
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: cannot run " + tmp +
                          "/none probe --system (No such file or directory)" + tail);

  // A bad bound: said, and the default (10 s) stays.
  g_log.clear();
  g_context = S_CTX_REMOTE;
  Plugin q({"probe_timeout=0", "probe_timeout=1x"});
  ASSERT_EQ(g_log.size(), 2u);
  EXPECT_EQ(g_log[0],
            "error: forkguard: plugstack.conf probe_timeout=0: expected seconds, 1 to 86400; "
            "ignored");
}
