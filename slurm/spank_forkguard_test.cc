// spank_forkguard.so loaded as Slurm loads it (dlopen), with the spank_* and slurm_* functions
// it calls provided here: a task's environment in a map, the log lines in a list. What srun
// and slurmstepd do around it is tested on the real Slurm of the pair
// (//tests/cluster:slurm_srun_test).
extern "C" {
#include <slurm/spank.h>
}

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

namespace {

std::map<std::string, std::string> g_env;
std::vector<std::string> g_log;
int g_remote = 1;
spank_context_t g_context = S_CTX_REMOTE;
std::vector<spank_option*> g_registered;

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
            "error: forkguard: plugstack.conf mode=loud: expected warn, error or abort; ignored");
  EXPECT_EQ(g_log[4],
            "error: forkguard: plugstack.conf argument 'noequals': expected KEY=VALUE; ignored");
  g_log.clear();
  g_remote = 0;
  EXPECT_EQ(p.SetOption("loud"), -1);
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_EQ(g_log[0], "error: forkguard: --forkguard=loud: expected warn, error, abort or off");
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
            "error: forkguard: plugstack.conf mode=\\x1b[31mred\\x0a: expected warn, error or "
            "abort; ignored");
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
  EXPECT_EQ(g_log[0], "error: forkguard: --forkguard=\\x1b[2J: expected warn, error, abort or off");
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

// srun's side of a step (local context), its report directory made empty, and the fake CLI.
std::string LocalStep(const std::string& dir, const char* cli_body) {
  EXPECT_EQ(system(("rm -rf " + dir + " && mkdir -p " + dir).c_str()), 0);
  g_context = S_CTX_LOCAL;
  g_remote = 0;
  return FakeCli(getenv("TEST_TMPDIR"), cli_body);
}

}  // namespace

TEST_F(SpankForkguardTest, StepEndWritesTheJobsReportWhereTheSiteSays) {
  std::string tmp = getenv("TEST_TMPDIR"), dir = tmp + "/reports";
  std::string cli = LocalStep(dir, "echo \"$*\"");
  unsetenv("FORKGUARD_LOG");
  Plugin p({"default=on", "log=/shared/fg/%j/%h", "report=" + dir, "forkguard=" + cli});
  p.RunLocalStep();
  // job 4242 step 3 (the fake spank_get_item), over the template's directory
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"),
            "report --job 4242 --format html --fail-on never -- /shared/fg/\n");
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html.tmp"), "<missing>");
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html.err"), "<missing>");  // empty: removed
  EXPECT_TRUE(g_log.empty()) << g_log[0];
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
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html"), "<missing>");
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html.tmp"), "<missing>");
  EXPECT_EQ(ReadFile(dir + "/forkguard-4242.3.html.err"), "forkguard report: no logs\n");
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find("report for job 4242 step 3 failed (exit 2)"), std::string::npos)
      << g_log[0];
  // A CLI that is not there: one line, nothing written.
  g_log.clear();
  {
    Plugin q({"default=on", "log=/shared/fg/%j", "report=" + dir, "forkguard=" + tmp + "/none"});
    q.RunLocalStep();
  }
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find("cannot run"), std::string::npos) << g_log[0];
  // A report directory that is not there: one line, naming the file it could not write.
  g_log.clear();
  {
    Plugin q({"default=on", "log=/shared/fg/%j", "report=" + dir + "/none", "forkguard=" + cli});
    q.RunLocalStep();
  }
  ASSERT_EQ(g_log.size(), 1u);
  EXPECT_NE(g_log[0].find("into " + dir + "/none/forkguard-4242.3.html (No such file"),
            std::string::npos)
      << g_log[0];
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
