// `forkguard run [options] -- CMD ARGS...`: run a program under the shim and
// report on it. The program is started with posix_spawn, and only its
// environment carries LD_PRELOAD/LD_AUDIT: forkguard itself is never watched.
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/event_log.h"
#include "cli/report_suppressions.h"
#include "cli/shim_locator.h"
#include "cli/unwatched.h"
#include "facts/pin_probe.h"
#include "flags/flags.h"
#include "formats/event_schema.h"

extern char** environ;

namespace forkguard::cli {

namespace {

const char kRunHelpHead[] = R"(NAME
    forkguard run - run a program under libforkguard.so and report its forks

SYNOPSIS
    forkguard run [--mode warn|error|abort|fix|off] [--log DIR] [--keep-log]
                  [--audit|--no-audit] [--fail-on hazard|never] [--require-watched]
                  [--suppressions FILE]
                  [--format text|json|markdown|html|trace|sarif|junit|github]
                  [--no-symbolize]
                  [--native] [--threads N] -- CMD [ARGS...]

DESCRIPTION
    Runs CMD with the forkguard shim preloaded into it and all its descendants
    (LD_PRELOAD, prepended to any LD_PRELOAD you already have), with the
    LD_AUDIT module that sees libibverbs calls looked up through dlopen handles
    (NCCL, OneFlow, brpc), and with the event log enabled. When CMD ends, prints
    the report of that run (see forkguard report --help) to standard error and
    exits with CMD's status.

    SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to forkguard are forwarded to CMD
    (a terminal's Ctrl-C already reaches CMD directly and is not sent twice).
    forkguard waits for CMD and still prints the report.

    The shim is found next to this binary: PREFIX/lib when installed as
    PREFIX/bin/forkguard, /usr/lib/x86_64-linux-gnu/forkguard for the Debian
    package's /usr/bin/forkguard, the binary's directory, its Bazel runfiles,
    or bazel-bin/shim; FORKGUARD_SHIM_DIR=DIR overrides the search.

OPTIONS
)";
const char kRunHelpTail[] = R"(
ENVIRONMENT
    FORKGUARD_SHIM_DIR   directory with libforkguard.so and libforkguard_audit.so
    LD_PRELOAD, LD_AUDIT kept and extended for CMD
    FORKGUARD_SUPPRESSIONS  honoured by the shim when --suppressions is not given
                         (the report then shows the shim's suppressed forks)
    FORKGUARD_CACHE_DIR  where this boot's pin probe is cached before CMD starts
                         (default $XDG_CACHE_HOME/forkguard, else ~/.cache/forkguard;
                         see forkguard doctor --help, pinned pages)

EXIT STATUS
    N        CMD exited with status N
    128+S    CMD was killed by signal S
    3        --fail-on hazard and a hazardous fork happened
    4        --require-watched and a process of the run ran without the shim
    125      forkguard itself failed (shim not found, bad log directory, ...)
    126      CMD was found but could not be executed
    127      CMD was not found
    2        bad command line

EXAMPLES
    forkguard run -- python3 train.py --epochs 1
    forkguard run --mode error --fail-on hazard --log ci-logs -- ./trainer
)";

}  // namespace

namespace {

std::atomic<pid_t> g_child{0};
std::atomic<int> g_pending{0};
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Signal handler: async-signal-safe only (kill, atomics).
void Forward(int sig, siginfo_t* info, void*) {
  pid_t child = g_child.load();
  // A terminal's signal (SI_KERNEL) went to the whole foreground process
  // group, CMD included; forwarding it would deliver it twice.
  if (info && info->si_code == SI_KERNEL) return;
  if (info && child > 0 && info->si_pid == child) return;
  if (child > 0)
    kill(child, sig);
  else
    g_pending.store(sig);
}

bool Contains(const std::string& list, const std::string& path) {
  return !path.empty() && list.find(path) != std::string::npos;
}

int RemoveEntry(const char* path, const struct stat*, int, struct FTW*) {
  remove(path);  // best effort: a file we cannot remove must not stop the rest
  return 0;
}

std::set<std::string> ListDir(const std::string& dir) {
  std::set<std::string> names;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) names.insert(e->d_name);
    closedir(d);
  }
  return names;
}

struct RunOptions {
  std::string mode;
  std::string log_dir;
  bool keep_log = false;
  bool require_watched = false;
  std::string suppressions;  // absolute: the program may change directory
  int audit = -1;            // -1 auto, 0 off, 1 required
  ReportOptions report;      // of the run's logs: --format, --fail-on, ... as for `report`
  std::vector<std::string> cmd;
};

struct RunOwnFlags {
  flags::Flag mode, log, keep_log, audit, no_audit, suppressions, require_watched;
};

const RunOwnFlags kRunOwn = {
    .mode = {"mode", "warn|error|abort|fix|off", "",
             R"(What the shim does at a hazardous fork (FORKGUARD_MODE): warn (default)
prints a message and lets fork proceed; error makes fork() fail (-1,
errno EPERM; daemon() EPERM, _Fork() and forkpty() ENOMEM) so the
program sees an error at the line that forked; abort prints the
message and aborts for a core dump; fix makes the fork safe, per
registered range, from the same rule and measured facts as the
verdict: a MADV_DONTFORK range of memory the kernel copies at fork is
made MADV_DOFORK for the fork (the child gets a copy and lives), a
range the kernel does not copy (or where nothing can tell) is made
MADV_DONTFORK for the fork (the parent's data stays intact, the
child has no mapping there), each restored in the parent right after;
one line on stderr ("fork made safe"), and a withhold that fails
fails the fork as in error mode; the child must still not use the
inherited RDMA context, PDs and QPs. off decides nothing (no
messages, no atfork handlers; the log gets only its process_start
line). Never failed or aborted, only warned about: a fork whose child
execs at once (subprocess with preexec_fn) and one where only
librdmacm's own cached device context is live.)"},
    .log = {"log", "DIR", "",
            R"(Write the event logs to DIR (created if missing) and keep them. Without
it a private temporary directory is used and removed after the report.
A plain directory: FORKGUARD_LOG's templates (%h %p %r %j) are refused
here, as the report is read back from DIR.)"},
    .keep_log = {"keep-log", "", "", "Keep the temporary log directory and print its path."},
    .audit = {"audit", "", "", ""},  // told with --no-audit
    .no_audit = {"no-audit", "", "",
                 R"(Also set LD_AUDIT to libforkguard_audit.so (default: on when the
module is found; --audit makes a missing module an error).)"},
    .suppressions = {"suppressions", "FILE", "",
                     R"(Suppress the hazardous forks FILE describes (in the format that
forkguard report --help describes, and that command writes for a
run's findings): the shim neither warns about nor fails them
(FORKGUARD_SUPPRESSIONS, replacing one already set), and the report
counts them as suppressed, per entry. A bad FILE is refused before CMD
starts: one error line per bad line, exit 2.)"},
    .require_watched = {"require-watched", "", "",
                        R"(Exit 4 when any process of the run ran without the shim: a program
exec'd with an environment that dropped LD_PRELOAD (env -i,
subprocess.run(env={})), a static binary, a set-user/group-ID program.
The report lists them either way ("unwatched:"), each with its pid,
program, parent and whether it held RDMA state when it was exec'd.)"},
};

// Every value given is checked, in command-line order; the last one wins. Throws
// flags::UsageError.
RunOptions ParseRunArgs(const flags::Options& opts) {
  using flags::UsageError;
  RunOptions o;
  const RunOwnFlags& f = kRunOwn;
  for (const auto& [name, v] : opts.given()) {
    if (name == f.mode.name) {
      if (!schema::IsModeName(v.c_str()))
        throw UsageError("--mode takes warn, error, abort, fix or off");
      o.mode = v;
    } else if (name == f.log.name) {
      if (v.empty()) throw UsageError("--log needs a directory");
      // run reads back the directory it created; FORKGUARD_LOG templates would log elsewhere.
      if (v.find('%') != std::string::npos)
        throw UsageError(
            "--log takes a plain directory, not a FORKGUARD_LOG template (%h %p %r %j); use "
            "e.g. --log /shared/fg/$SLURM_JOB_ID");
      o.log_dir = v;
    } else if (name == f.keep_log.name) {
      o.keep_log = true;
    } else if (name == f.require_watched.name) {
      o.require_watched = true;
    } else if (name == f.suppressions.name) {
      if (v.empty()) throw UsageError("--suppressions needs a file");
      char* abs = realpath(v.c_str(), nullptr);
      o.suppressions = abs != nullptr ? abs : v;  // a missing file is named by the check below
      free(abs);
    } else if (name == f.audit.name) {
      o.audit = 1;
    } else if (name == f.no_audit.name) {
      o.audit = 0;
    } else {
      SetReportOption(name, v, &o.report);
    }
  }
  if (o.report.fail_on_new_hazard)
    throw UsageError("--fail-on new-hazard needs a baseline: forkguard report --baseline");
  o.cmd = opts.positionals();
  if (o.cmd.empty()) throw UsageError("no command given");
  // Checked before CMD starts (a bad line is an error, exit 2); the report applies it too.
  if (!o.suppressions.empty()) {
    LoadSuppressionFile(o.suppressions, "forkguard run");
    o.report.suppressions = o.suppressions;
  }
  return o;
}

}  // namespace

const flags::FlagTable& RunFlags() {
  const RunOwnFlags& o = kRunOwn;
  const ReportMakingFlags& r = TheReportMakingFlags();
  static const flags::FlagTable kTable = {
      o.mode,
      o.log,
      o.keep_log,
      o.audit,
      o.no_audit,
      flags::Retold(r.fail_on,
                    R"(hazard: exit 3 when the run had a hazardous fork, whatever CMD's status
(for CI gates). never (default): exit with CMD's status. (new-hazard
is forkguard report's, with a baseline.))",
                    "hazard|never"),
      o.suppressions,
      o.require_watched,
      flags::Retold(r.format,
                    R"(Format of the report printed at the end (default {default}), as forkguard
report --help describes them. It goes to standard error, after CMD's
own output there: to keep a page or trace apart, --log DIR and then
forkguard report --format html DIR > report.html.)"),
      flags::Retold(r.no_symbolize, ""),  // told with --threads
      flags::Retold(r.native, ""),
      flags::Retold(r.threads,
                    R"(As for forkguard report: do not open the binaries named in the logs;
print Python processes' native frames too; read N files at a time.)"),
      flags::HelpFlag("This text."),
  };
  return kTable;
}

std::string RunHelp() { return kRunHelpHead + flags::ManHelp(RunFlags()) + kRunHelpTail; }

namespace {

// The shim and the audit module as `o` asks for them; false (said on stderr) when one that
// is needed is missing.
bool CheckShim(const RunOptions& o, const ShimLocation& shim) {
  if (shim.preload.empty()) {
    fprintf(stderr, "forkguard run: %s not found; searched:\n", kPreloadName);
    for (const auto& d : shim.searched) fprintf(stderr, "    %s\n", d.c_str());
    fprintf(stderr, "set FORKGUARD_SHIM_DIR to the directory that has it\n");
    return false;
  }
  if (o.audit == 1 && shim.audit.empty()) {
    fprintf(stderr, "forkguard run: --audit: %s not found next to %s\n", kAuditName,
            shim.preload.c_str());
    return false;
  }
  if (o.audit == -1 && shim.audit.empty())
    fprintf(stderr,
            "forkguard run: note: %s not found, running without LD_AUDIT (calls made "
            "through dlopen handles are seen only by the descriptor backstop)\n",
            kAuditName);
  return true;
}

// The log directory: the user's (kept), or a private temporary one; made absolute. False
// (said on stderr) when it cannot be made.
bool MakeLogDir(bool temp_log, std::string* log_dir) {
  if (temp_log) {
    const char* tmp = getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/forkguard-run.XXXXXX";
    if (!mkdtemp(tmpl.data())) {
      fprintf(stderr, "forkguard run: cannot create a log directory in %s: %s\n",
              tmp && *tmp ? tmp : "/tmp", strerror(errno));
      return false;
    }
    *log_dir = tmpl;
  } else {
    if (mkdir(log_dir->c_str(), 0700) != 0 && errno != EEXIST) {
      fprintf(stderr, "forkguard run: cannot create %s: %s\n", log_dir->c_str(), strerror(errno));
      return false;
    }
    struct stat st;
    if (stat(log_dir->c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
      fprintf(stderr, "forkguard run: --log %s is not a directory\n", log_dir->c_str());
      return false;
    }
  }
  if (char* abs = realpath(log_dir->c_str(), nullptr)) {
    *log_dir = abs;
    free(abs);
  }
  return true;
}

// The program's environment: ours plus the shim settings.
std::vector<std::string> ProgramEnvironment(const RunOptions& o, const ShimLocation& shim,
                                            bool use_audit) {
  std::vector<std::string> env;
  std::string preload = shim.preload, audit = shim.audit;
  for (char** e = environ; *e; ++e) {
    std::string kv = *e;
    if (kv.rfind("LD_PRELOAD=", 0) == 0) {
      std::string old = kv.substr(11);
      if (!old.empty() && !Contains(old, shim.preload)) preload += ":" + old;
      if (Contains(old, shim.preload)) preload = old;
    } else if (kv.rfind("LD_AUDIT=", 0) == 0) {
      std::string old = kv.substr(9);
      if (!old.empty() && !Contains(old, shim.audit)) audit += ":" + old;
      if (Contains(old, shim.audit)) audit = old;
      if (!use_audit) env.push_back(kv);
    } else if (kv.rfind("FORKGUARD_MODE=", 0) == 0 && !o.mode.empty()) {
    } else if (kv.rfind("FORKGUARD_LOG=", 0) == 0) {
    } else if (kv.rfind("FORKGUARD_SUPPRESSIONS=", 0) == 0 && !o.suppressions.empty()) {
    } else {
      env.push_back(kv);
    }
  }
  env.push_back("LD_PRELOAD=" + preload);
  if (use_audit) env.push_back("LD_AUDIT=" + audit);
  if (!o.mode.empty()) env.push_back("FORKGUARD_MODE=" + o.mode);
  env.push_back("FORKGUARD_LOG=" + o.log_dir);
  if (!o.suppressions.empty()) env.push_back("FORKGUARD_SUPPRESSIONS=" + o.suppressions);
  return env;
}

// How CMD ended: err is posix_spawnp's (0: it ran, and status is waitpid's).
struct Ended {
  int err = 0;
  pid_t pid = 0;  // CMD's process
  int status = 0;
  int exit_code = kExitInternal;
};

// Runs CMD with `env`, forwarding SIGINT, SIGTERM, SIGHUP and SIGQUIT to it, and waits.
Ended SpawnAndWait(std::vector<std::string> cmd, std::vector<std::string> env) {
  std::vector<char*> envp, argvp;
  for (auto& s : env) envp.push_back(s.data());
  envp.push_back(nullptr);
  for (auto& s : cmd) argvp.push_back(s.data());
  argvp.push_back(nullptr);

  // No SA_RESTART: the waitpid loop below retries on EINTR itself. A restarted wait would
  // also hide the signal from a runtime that defers handlers to the next intercepted call
  // (TSan: the forwarding never ran and `run` hung in wait4).
  struct sigaction sa {};
  sa.sa_sigaction = Forward;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  struct sigaction old_actions[4];
  for (int i = 0; i < 4; ++i) sigaction(kForwarded[i], &sa, &old_actions[i]);

  // The child starts with default dispositions for the forwarded signals.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  for (int s : kForwarded) sigaddset(&defaults, s);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = 0;
  Ended ended;
  ended.err = posix_spawnp(&pid, argvp[0], nullptr, &attr, argvp.data(), envp.data());
  ended.pid = pid;
  posix_spawnattr_destroy(&attr);
  int& status = ended.status;
  if (ended.err != 0) {
    fprintf(stderr, "forkguard run: %s: %s\n", cmd[0].c_str(),
            ended.err == ENOENT ? "command not found" : strerror(ended.err));
    ended.exit_code = ended.err == ENOENT ? kExitNotFound : kExitCannotExec;
  } else {
    g_child.store(pid);
    if (int sig = g_pending.exchange(0)) kill(pid, sig);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    g_child.store(0);
    if (WIFEXITED(status))
      ended.exit_code = WEXITSTATUS(status);
    else if (WIFSIGNALED(status))
      ended.exit_code = 128 + WTERMSIG(status);
    else
      ended.exit_code = kExitInternal;
  }
  for (int i = 0; i < 4; ++i) sigaction(kForwarded[i], &old_actions[i], nullptr);
  return ended;
}

// Reports on the files this run created (those in the log directory not in `before`),
// removes a temporary log directory, and returns run's exit status.
int ReportRun(const RunOptions& o, bool temp_log, const std::set<std::string>& before,
              const Ended& ended) {
  const int status = ended.status;
  std::vector<std::string> files;
  for (const auto& n : ListDir(o.log_dir))
    if (n != "." && n != ".." && !before.count(n)) files.push_back(o.log_dir + "/" + n);
  LogSet logs;
  ReadLogs(files, &logs, o.report.threads);
  bool no_events = logs.processes.empty();
  size_t unwatched = FindUnwatched(logs).size();
  // The program itself is watched when its pid logged: a static or setuid program, or one
  // that cleared LD_PRELOAD before the loader ran, leaves no log of its own.
  bool top_unwatched =
      ended.err == 0 && std::none_of(logs.processes.begin(), logs.processes.end(),
                                     [&](const ProcessLog& p) { return p.pid == ended.pid; });
  int64_t hazards = 0;
  std::string report = RenderLogs(std::move(logs), o.report, &hazards);
  std::string out;
  if (ended.err == 0) {
    if (WIFSIGNALED(status))
      out += "forkguard run: " + o.cmd[0] + " was killed by signal " +
             std::to_string(WTERMSIG(status)) + " (" + strsignal(WTERMSIG(status)) + ")\n";
    if (no_events)
      out +=
          "forkguard run: no events were logged: the program may be static or setuid, clear "
          "LD_PRELOAD, or the shim could not write to " +
          o.log_dir + "\n";
  }
  out += report;
  if (temp_log && o.keep_log) out += "forkguard run: event logs kept in " + o.log_dir + "\n";
  if (!temp_log) out += "forkguard run: event logs in " + o.log_dir + "\n";
  fputs(out.c_str(), stderr);
  fflush(stderr);
  if (temp_log && !o.keep_log) nftw(o.log_dir.c_str(), RemoveEntry, 16, FTW_DEPTH | FTW_PHYS);

  if (ended.err == 0 && o.report.fail_on_hazard && hazards > 0) return kExitHazard;
  if (ended.err == 0 && o.require_watched && top_unwatched) {
    fprintf(stderr,
            "forkguard run: --require-watched: %s (pid %d) ran without the shim: it logged "
            "nothing%s\n",
            o.cmd[0].c_str(), static_cast<int>(ended.pid),
            unwatched > 0 ? (", and " + std::to_string(unwatched) + " more process" +
                             (unwatched == 1 ? "" : "es") + " ran without it")
                                .c_str()
                          : "");
    return kExitUnwatched;
  }
  if (ended.err == 0 && o.require_watched && unwatched > 0) {
    fprintf(stderr, "forkguard run: --require-watched: %zu process%s ran without the shim\n",
            unwatched, unwatched == 1 ? "" : "es");
    return kExitUnwatched;
  }
  return ended.exit_code;
}

int Run(int argc, char** argv, const char* argv0) {
  // Options up to the first non-option or "--"; the rest is CMD and its arguments.
  flags::Options opts =
      flags::Options::Parse(argc, argv, RunFlags(), flags::Positionals::kAfterOptions);
  if (flags::PrintHelpIfAsked(opts, RunHelp)) return kExitOk;
  RunOptions o = ParseRunArgs(opts);

  ShimLocation shim = LocateShim(argv0);
  if (!CheckShim(o, shim)) return kExitInternal;
  bool use_audit = o.audit != 0 && !shim.audit.empty();

  bool temp_log = o.log_dir.empty();
  if (!MakeLogDir(temp_log, &o.log_dir)) return kExitInternal;
  // The report covers this run only, also when --log DIR has older logs.
  std::set<std::string> before = ListDir(o.log_dir);

  std::vector<std::string> env = ProgramEnvironment(o, shim, use_audit);
  // This boot's pin probe (facts/pin_probe.h), so that the shim finds it cached: the shim
  // never probes (the probe forks). Runs once per boot; later runs read the cache.
  facts::PinProbeForThisBoot(nullptr);
  Ended ended = SpawnAndWait(o.cmd, std::move(env));
  return ReportRun(o, temp_log, before, ended);
}

}  // namespace

int RunMain(int argc, char** argv, const char* argv0) {
  try {
    return Run(argc, argv, argv0);
  } catch (const BadSuppressionFile&) {
    return kExitUsage;  // each bad line was printed as it was found
  }
}

}  // namespace forkguard::cli
