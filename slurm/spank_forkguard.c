/* spank_forkguard.so: a Slurm SPANK plugin that puts forkguard's shim (libforkguard.so)
 * under the tasks of a job, for a site that wants every job watched or for a user who asks
 * with `srun --forkguard`. Written in C: slurm/spank.h's SPANK_PLUGIN() and its option table
 * are C declarations (C++ would give them internal linkage and mangled names).
 *
 *   srun|sbatch|salloc --forkguard[=warn|error|abort|fix|off]
 *       turns it on for this job with the given mode (no value: the site's mode), or off.
 *
 *   plugstack.conf:  optional /usr/lib/x86_64-linux-gnu/slurm-wlm/spank_forkguard.so ARGS
 *       default=on|off    on: every job without --forkguard=off (default: off)
 *       mode=warn|error|abort|fix   the mode of a job that does not name one (default: warn)
 *       log=TEMPLATE      FORKGUARD_LOG for the tasks (the shim expands %j %h %r %p %%),
 *                         unless the task's environment already has one
 *       shim=PATH         the shim (default: the Debian package's path)
 *       report=DIR        when an srun step of a job it was on for ends, write the job's
 *                         report so far, DIR/forkguard-JOB.STEP.html or
 *                         DIR/USER/forkguard-JOB.STEP.html (needs log= with %j)
 *       report_timeout=SECONDS   the report's time bound (default: 120)
 *       forkguard=PATH    the CLI that writes it, and runs the pin probe (default:
 *                         /usr/bin/forkguard)
 *       probe_timeout=SECONDS    the pin probe's time bound (default: 10)
 *
 * When slurmd starts (slurm_spank_init in the slurmd context, as root), `forkguard probe
 * --system --quiet` writes this boot's pin probe to /run/forkguard, where the shim in every
 * task reads it (what a fork does to pinned pages of each memory kind on this node's kernel),
 * killed after probe_timeout seconds. A probe that fails is one line in slurmd's log; slurmd
 * starts as before.
 *
 * In each task, just before it execs (slurm_spank_task_init, remote context), the shim is
 * appended to LD_PRELOAD (what is there stays, and comes first) and FORKGUARD_MODE and
 * FORKGUARD_LOG are set. The shim reads the job id, step and rank from the variables Slurm
 * gives every task (SLURM_JOB_ID, SLURM_STEP_ID, SLURM_PROCID).
 *
 * The report is written by srun itself (slurm_spank_exit, local context) once the step's
 * tasks have ended: `forkguard report --job JOB --owner UID --format html` over the job's own
 * log directory (the template expanded up to its component with %j), killed after
 * report_timeout seconds. Its output goes to a private temporary file (0600, O_EXCL, an
 * unpredictable name) renamed into place, in DIR when DIR is the user's and no one else can
 * write it, else in DIR/USER (made 0700, which must be the user's). A report that cannot be
 * written, or a setting that is unsafe (DIR writable by others without the sticky bit, a
 * template without a directory per job), is one line on srun's standard error; the step's exit
 * status is srun's as before.
 *
 * The plugin must never fail a job: a shim it cannot read is one line in slurmd's log per
 * step and node, and the job runs without it; a bad plugstack argument is one line (its value
 * escaped) and is ignored. Only a bad --forkguard value on the command line is an error, in
 * srun/sbatch. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <signal.h>
#include <slurm/spank.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

SPANK_PLUGIN(forkguard, 1);

#if defined(__x86_64__)
#define FG_MULTIARCH "x86_64-linux-gnu"
#elif defined(__aarch64__)
#define FG_MULTIARCH "aarch64-linux-gnu"
#else
#define FG_MULTIARCH "unknown"
#endif
#define FG_DEFAULT_SHIM "/usr/lib/" FG_MULTIARCH "/forkguard/libforkguard.so"
#define FG_PATH_MAX 4096
/* A value from plugstack.conf, the command line or the environment, in a log line: at most
 * this many bytes of it, each as 4 at most (\xNN). */
#define FG_SHOWN_MAX 128
#define FG_SHOWN_SIZE (FG_SHOWN_MAX * 4 + 4)
#define FG_TIMEOUT_MAX 86400

/* The site's settings (plugstack.conf) and this job's choice (--forkguard). */
static int site_on = 0;
static char site_mode[8] = "warn";
static char site_log[FG_PATH_MAX] = "";
static char shim[FG_PATH_MAX] = FG_DEFAULT_SHIM;
static char site_report[FG_PATH_MAX] = "";
static char cli[FG_PATH_MAX] = "/usr/bin/forkguard";
static unsigned report_timeout = 120;
static unsigned probe_timeout = 10;
/* srun's step and its user, learned in slurm_spank_local_user_init (local context), for the
 * report. */
static uint32_t local_job = 0, local_step = 0;
static uid_t local_uid = 0;
static int local_ids = 0;
static int job_choice = -1; /* -1: no --forkguard; 0: off; 1: on */
static char job_mode[8] = "";
static int shim_missing = 0;

/* `v` made safe for a log line (slurmd's log, srun's terminal): a control character, DEL, a
 * byte >= 0x80 and '\\' as \xNN, and "..." after FG_SHOWN_MAX bytes. Returns `out`, which
 * holds FG_SHOWN_SIZE bytes. */
static const char* shown(const char* v, char* out) {
  static const char hex[] = "0123456789abcdef";
  size_t n = 0, i = 0;
  for (; v[i] != '\0' && i < FG_SHOWN_MAX; ++i) {
    unsigned char c = (unsigned char)v[i];
    if (c < 0x20 || c >= 0x7f || c == '\\') {
      out[n++] = '\\';
      out[n++] = 'x';
      out[n++] = hex[c >> 4];
      out[n++] = hex[c & 15];
    } else {
      out[n++] = (char)c;
    }
  }
  if (v[i] != '\0') {
    memcpy(out + n, "...", 3);
    n += 3;
  }
  out[n] = '\0';
  return out;
}

static int valid_mode(const char* m) {
  return strcmp(m, "warn") == 0 || strcmp(m, "error") == 0 || strcmp(m, "abort") == 0 ||
         strcmp(m, "fix") == 0;
}

static int on_option(int val, const char* optarg, int remote) {
  (void)val;
  (void)remote;
  if (optarg == NULL || optarg[0] == '\0') {
    job_choice = 1;
    job_mode[0] = '\0';
    return 0;
  }
  if (strcmp(optarg, "off") == 0) {
    job_choice = 0;
    return 0;
  }
  if (!valid_mode(optarg)) {
    char v[FG_SHOWN_SIZE];
    slurm_error("forkguard: --forkguard=%s: expected warn, error, abort, fix or off",
                shown(optarg, v));
    return -1;
  }
  job_choice = 1;
  snprintf(job_mode, sizeof(job_mode), "%s", optarg);
  return 0;
}

/* Registered by slurm_spank_init with spank_option_register, not exported as the
 * spank_options[] table: sbatch and salloc (the allocator context) only see registered ones. */
static struct spank_option forkguard_option = {
    "forkguard",
    "[warn|error|abort|fix|off]",
    "catch fork() after RDMA initialization in the tasks (forkguard's shim); "
    "the value is its mode, off turns a site default off",
    2,
    0,
    on_option};

static void copy_arg(char* dst, size_t size, const char* key, const char* val) {
  if (strlen(val) >= size) {
    slurm_error("forkguard: plugstack.conf %s=...: longer than %zu bytes; ignored", key, size - 1);
    return;
  }
  memcpy(dst, val, strlen(val) + 1);
}

/* A path argument: absolute (or empty: none), else reported and ignored. */
static void copy_absolute(char* dst, size_t size, const char* key, const char* val) {
  char v[FG_SHOWN_SIZE];
  if (val[0] == '/' || val[0] == '\0')
    copy_arg(dst, size, key, val);
  else
    slurm_error("forkguard: plugstack.conf %s=%s: not an absolute path; ignored", key,
                shown(val, v));
}

/* KEY=SECONDS (report_timeout, probe_timeout): 1 to FG_TIMEOUT_MAX, digits only. */
static void parse_timeout(const char* key, const char* val, unsigned* out) {
  unsigned long n = 0;
  const char* p = val;
  for (; *p >= '0' && *p <= '9' && n <= FG_TIMEOUT_MAX; ++p) n = n * 10 + (unsigned long)(*p - '0');
  if (p == val || *p != '\0' || n < 1 || n > FG_TIMEOUT_MAX) {
    char v[FG_SHOWN_SIZE];
    slurm_error("forkguard: plugstack.conf %s=%s: expected seconds, 1 to %d; ignored", key,
                shown(val, v), FG_TIMEOUT_MAX);
    return;
  }
  *out = (unsigned)n;
}

/* plugstack.conf arguments. A bad one is reported and ignored: it must not fail jobs. */
static void parse_args(int ac, char** av) {
  char shown_buf[FG_SHOWN_SIZE];
  for (int i = 0; i < ac; ++i) {
    const char* a = av[i];
    const char* eq = strchr(a, '=');
    if (eq == NULL) {
      slurm_error("forkguard: plugstack.conf argument '%s': expected KEY=VALUE; ignored",
                  shown(a, shown_buf));
      continue;
    }
    size_t k = (size_t)(eq - a);
    const char* v = eq + 1;
    if (k == 7 && strncmp(a, "default", k) == 0) {
      if (strcmp(v, "on") == 0)
        site_on = 1;
      else if (strcmp(v, "off") == 0)
        site_on = 0;
      else
        slurm_error("forkguard: plugstack.conf default=%s: expected on or off; ignored",
                    shown(v, shown_buf));
    } else if (k == 4 && strncmp(a, "mode", k) == 0) {
      if (valid_mode(v))
        copy_arg(site_mode, sizeof(site_mode), "mode", v);
      else
        slurm_error(
            "forkguard: plugstack.conf mode=%s: expected warn, error, abort or fix; "
            "ignored",
            shown(v, shown_buf));
    } else if (k == 3 && strncmp(a, "log", k) == 0) {
      copy_absolute(site_log, sizeof(site_log), "log", v);
    } else if (k == 4 && strncmp(a, "shim", k) == 0) {
      copy_absolute(shim, sizeof(shim), "shim", v);
    } else if (k == 6 && strncmp(a, "report", k) == 0) {
      copy_absolute(site_report, sizeof(site_report), "report", v);
    } else if (k == 14 && strncmp(a, "report_timeout", k) == 0) {
      parse_timeout("report_timeout", v, &report_timeout);
    } else if (k == 13 && strncmp(a, "probe_timeout", k) == 0) {
      parse_timeout("probe_timeout", v, &probe_timeout);
    } else if (k == 9 && strncmp(a, "forkguard", k) == 0) {
      copy_absolute(cli, sizeof(cli), "forkguard", v);
    } else {
      slurm_error(
          "forkguard: plugstack.conf argument '%s': unknown (default, mode, log, "
          "shim, report, report_timeout, forkguard, probe_timeout); ignored",
          shown(a, shown_buf));
    }
  }
}

static int enabled(void) { return job_choice == -1 ? site_on : job_choice; }

static int wait_bounded(pid_t pid, unsigned seconds, int* st);

/* slurmd, as it starts (root): `forkguard probe --system --quiet`, this boot's pin probe into
 * /run/forkguard for every process of the node, bounded by probe_timeout. A failure is one
 * line in slurmd's log, with the first line the CLI wrote to its standard error. */
static void probe_system(void) {
  static const char tail[] = "no system pin-probe cache (/run/forkguard) from slurmd";
  /* The pipe's ends above the standard descriptors (close-on-exec, the read end not
   * blocking), so that the child's dup2 onto 2 and its /dev/null on 0 and 1 touch neither. */
  int raw[2], err_pipe[2] = {-1, -1};
  if (pipe(raw) != 0) {
    slurm_error("forkguard: cannot run %s probe --system (pipe: %s); %s", cli, strerror(errno),
                tail);
    return;
  }
  for (int i = 0; i < 2; ++i) err_pipe[i] = fcntl(raw[i], F_DUPFD_CLOEXEC, 3);
  int e = errno;
  close(raw[0]);
  close(raw[1]);
  if (err_pipe[0] < 0 || err_pipe[1] < 0 || fcntl(err_pipe[0], F_SETFL, O_NONBLOCK) != 0) {
    if (err_pipe[0] >= 0) e = errno;
    for (int i = 0; i < 2; ++i)
      if (err_pipe[i] >= 0) close(err_pipe[i]);
    slurm_error("forkguard: cannot run %s probe --system (pipe: %s); %s", cli, strerror(e), tail);
    return;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, err_pipe[1], 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  char* argv[] = {cli, "probe", "--system", "--quiet", NULL};
  extern char** environ;
  pid_t pid;
  int rc = posix_spawn(&pid, cli, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  close(err_pipe[1]);
  int st = 0, ended = rc == 0 ? wait_bounded(pid, probe_timeout, &st) : -1;
  int wait_errno = errno;
  /* Its first line of errors, if any (the pipe does not block: a grandchild that kept it
   * open is not waited for). */
  char said[256] = "", said_shown[FG_SHOWN_SIZE];
  ssize_t n = read(err_pipe[0], said, sizeof(said) - 1);
  close(err_pipe[0]);
  said[n > 0 ? n : 0] = '\0';
  said[strcspn(said, "\n")] = '\0';
  if (rc != 0) {
    slurm_error("forkguard: cannot run %s probe --system (%s); %s", cli, strerror(rc), tail);
  } else if (ended < 0) {
    slurm_error("forkguard: cannot wait for %s probe --system (%s); %s", cli, strerror(wait_errno),
                tail);
  } else if (ended == 0) {
    slurm_error(
        "forkguard: %s probe --system took longer than probe_timeout=%u seconds: "
        "killed; %s",
        cli, probe_timeout, tail);
  } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    slurm_error("forkguard: %s probe --system failed (%s %d%s%s); %s", cli,
                WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
                said[0] != '\0' ? ": " : "", said[0] != '\0' ? shown(said, said_shown) : "", tail);
  }
}

int slurm_spank_init(spank_t sp, int ac, char** av) {
  parse_args(ac, av);
  spank_context_t ctx = spank_context();
  if (ctx == S_CTX_SLURMD) probe_system();
  if (ctx == S_CTX_LOCAL || ctx == S_CTX_ALLOCATOR || ctx == S_CTX_REMOTE) {
    spank_err_t e = spank_option_register(sp, &forkguard_option);
    if (e != ESPANK_SUCCESS)
      slurm_error("forkguard: cannot register --forkguard (%s)", spank_strerror(e));
  }
  return 0;
}

/* Once per step and node, in slurmstepd before the tasks are started: a shim that is not
 * there is said once here, and the tasks run without it. slurmstepd runs this hook as the
 * job's user (effective uid) with root's real uid: the check is the effective uid's, the one
 * the task's loader will have. */
int slurm_spank_user_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!spank_remote(sp) || !enabled()) return 0;
  if (faccessat(AT_FDCWD, shim, R_OK, AT_EACCESS) != 0) {
    int err = errno;
    uint32_t job = 0, step = 0;
    spank_get_item(sp, S_JOB_ID, &job);
    spank_get_item(sp, S_JOB_STEPID, &step);
    slurm_error("forkguard: shim %s not readable (%s): job %u step %u runs without forkguard", shim,
                strerror(err), job, step);
    shim_missing = 1;
  }
  return 0;
}

/* Is `path` one of the entries of the LD_PRELOAD list `list` (':' or ' ' separated)? */
static int listed(const char* list, const char* path) {
  size_t n = strlen(path);
  for (const char* p = list; (p = strstr(p, path)) != NULL; p += n) {
    int starts = p == list || p[-1] == ':' || p[-1] == ' ';
    int ends = p[n] == '\0' || p[n] == ':' || p[n] == ' ';
    if (starts && ends) return 1;
  }
  return 0;
}

/* In each task, in the forked child that is about to exec the task's program. */
int slurm_spank_task_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (!enabled() || shim_missing) return 0;
  static char cur[FG_PATH_MAX * 4], next[FG_PATH_MAX * 4 + FG_PATH_MAX + 2];
  spank_err_t e = spank_getenv(sp, "LD_PRELOAD", cur, sizeof(cur));
  if (e == ESPANK_ENV_NOEXIST) {
    cur[0] = '\0';
  } else if (e != ESPANK_SUCCESS) {
    slurm_error("forkguard: cannot read the task's LD_PRELOAD (%s): task runs without forkguard",
                spank_strerror(e));
    return 0;
  }
  if (!listed(cur, shim)) {
    snprintf(next, sizeof(next), "%s%s%s", cur, cur[0] ? ":" : "", shim);
    if ((e = spank_setenv(sp, "LD_PRELOAD", next, 1)) != ESPANK_SUCCESS) {
      slurm_error("forkguard: cannot set the task's LD_PRELOAD (%s)", spank_strerror(e));
      return 0;
    }
  }
  /* A mode named on the command line wins; the site's mode does not override the user's own
   * FORKGUARD_MODE, nor the site's log template the user's FORKGUARD_LOG. */
  if (job_mode[0] != '\0')
    spank_setenv(sp, "FORKGUARD_MODE", job_mode, 1);
  else
    spank_setenv(sp, "FORKGUARD_MODE", site_mode, 0);
  if (site_log[0] != '\0') spank_setenv(sp, "FORKGUARD_LOG", site_log, 0);
  return 0;
}

/* srun (local context), after the options: the job and step ids exist from here on. */
int slurm_spank_local_user_init(spank_t sp, int ac, char** av) {
  (void)ac;
  (void)av;
  if (spank_get_item(sp, S_JOB_ID, &local_job) == ESPANK_SUCCESS &&
      spank_get_item(sp, S_JOB_STEPID, &local_step) == ESPANK_SUCCESS &&
      spank_get_item(sp, S_JOB_UID, &local_uid) == ESPANK_SUCCESS)
    local_ids = 1;
  return 0;
}

/* One line on srun's standard error: why this step gets no report. */
static void no_report(const char* fmt, ...) {
  char why[FG_PATH_MAX + 2 * FG_SHOWN_SIZE];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(why, sizeof(why), fmt, ap);
  va_end(ap);
  slurm_error("forkguard: %s; no report for job %u step %u", why, local_job, local_step);
}

/* The job's own log directory: the log template expanded up to and including its first path
 * component that has %j (%j the job id, %% a '%'). The task's own FORKGUARD_LOG (srun passes
 * its environment on) wins over the site's, as in slurm_spank_task_init. Another expansion
 * (%h %r %p, or one the shim does not know) before that %j or beside it gives no directory of
 * the job's own, and neither does a template without %j: the report would read other jobs'
 * logs. The result ends with the job id's component, so it is never "/". */
static int job_log_dir(char* out, size_t size) {
  char shown_buf[FG_SHOWN_SIZE], id[16];
  const char* t = getenv("FORKGUARD_LOG");
  if (t == NULL || t[0] == '\0') t = site_log;
  if (t[0] != '/') {
    no_report("report=%s: no absolute log directory (log=, FORKGUARD_LOG)", site_report);
    return 0;
  }
  snprintf(id, sizeof(id), "%u", local_job);
  size_t n = 0, idn = strlen(id);
  int job_seen = 0, ok = 1;
  for (const char* p = t; *p != '\0' && ok; ++p) {
    if (*p == '/' && job_seen) break;
    if (*p != '%') {
      if (n + 1 >= size) ok = 0;
      if (ok) out[n++] = *p;
    } else if (p[1] == '%') {
      if (n + 1 >= size) ok = 0;
      if (ok) out[n++] = '%';
      ++p;
    } else if (p[1] == 'j') {
      if (n + idn >= size) ok = 0;
      if (ok) memcpy(out + n, id, idn);
      n += idn;
      job_seen = 1;
      ++p;
    } else {
      job_seen = 0;
      break;
    }
  }
  if (!ok) {
    no_report("the log template %s: too long", shown(t, shown_buf));
    return 0;
  }
  if (!job_seen) {
    no_report(
        "the log template %s has no directory of the job's own (the report needs %%j in a "
        "path component before any other %%-expansion and without one beside it, e.g. "
        "log=/shared/fg/%%j/%%h)",
        shown(t, shown_buf));
    return 0;
  }
  out[n] = '\0';
  return 1;
}

/* The job's log directory, when it is there, must be a directory (not a symlink) of the job's
 * user: another user who made it first (the shared root is writable by all) decides what is
 * in it. Missing is for the CLI to say. */
static int job_log_dir_owned(const char* dir) {
  int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return 1;
    no_report(
        "log directory %s: %s", dir,
        errno == ELOOP || errno == ENOTDIR ? "a symlink or not a directory" : strerror(errno));
    return 0;
  }
  struct stat st;
  int ok = fstat(fd, &st) == 0;
  if (!ok)
    no_report("log directory %s: cannot stat it (%s)", dir, strerror(errno));
  else if (!(ok = st.st_uid == local_uid))
    no_report("log directory %s is owned by uid %u, not by the job's user (uid %u)", dir,
              (unsigned)st.st_uid, (unsigned)local_uid);
  close(fd);
  return ok;
}

/* The user's name for DIR/USER: its passwd name when it is a plain file name, else its uid. */
static void user_dir_name(uid_t uid, char* out, size_t size) {
  struct passwd pw, *found = NULL;
  char buf[4096];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != NULL) {
    const char* name = found->pw_name;
    size_t n = strlen(name);
    int plain = n > 0 && n < size && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
    for (size_t i = 0; i < n && plain; ++i)
      plain = name[i] != '/' && (unsigned char)name[i] > 0x20 && (unsigned char)name[i] < 0x7f;
    if (plain) {
      memcpy(out, name, n + 1);
      return;
    }
  }
  snprintf(out, size, "%u", (unsigned)uid);
}

/* The directory the report is written in, opened: DIR itself when it is the user's (srun's
 * effective uid) and no one else can write it; else DIR/USER, made 0700 when missing, which
 * must be the user's and writable by no one else. DIR writable by others is refused unless it
 * has the sticky bit: only then can no one else rename or remove DIR/USER and its files. No
 * component named here is followed as a symlink. `where` receives the directory's path for the
 * messages. -1: said why. */
static int open_report_dir(char* where, size_t size) {
  uid_t me = geteuid();
  int dfd = open(site_report, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (dfd < 0) {
    no_report(
        "report=%s: cannot open it (%s)", site_report,
        errno == ELOOP || errno == ENOTDIR ? "a symlink or not a directory" : strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(dfd, &st) != 0) {
    no_report("report=%s: cannot stat it (%s)", site_report, strerror(errno));
    close(dfd);
    return -1;
  }
  int shared = (st.st_mode & (S_IWGRP | S_IWOTH)) != 0;
  if (shared && !(st.st_mode & S_ISVTX)) {
    no_report(
        "report=%s: writable by group or others without the sticky bit (mode %04o), so "
        "anyone could replace the report (chmod 1777 for a directory per user, or 0755)",
        site_report, (unsigned)(st.st_mode & 07777));
    close(dfd);
    return -1;
  }
  if (!shared && st.st_uid == me) {
    snprintf(where, size, "%s", site_report);
    return dfd;
  }
  char name[256];
  user_dir_name(me, name, sizeof(name));
  snprintf(where, size, "%s/%s", site_report, name);
  if (mkdirat(dfd, name, 0700) != 0 && errno != EEXIST) {
    no_report("cannot create %s (%s)", where, strerror(errno));
    close(dfd);
    return -1;
  }
  int ufd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  int err = errno;
  close(dfd);
  if (ufd < 0) {
    no_report("cannot open %s (%s)", where,
              err == ELOOP || err == ENOTDIR ? "a symlink or not a directory" : strerror(err));
    return -1;
  }
  if (fstat(ufd, &st) != 0) {
    no_report("cannot stat %s (%s)", where, strerror(errno));
    close(ufd);
    return -1;
  }
  if (st.st_uid != me || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    no_report(
        "%s is not this user's own directory (owner uid %u, mode %04o; expected uid %u, "
        "not writable by group or others)",
        where, (unsigned)st.st_uid, (unsigned)(st.st_mode & 07777), (unsigned)me);
    close(ufd);
    return -1;
  }
  return ufd;
}

/* A new file in `dfd` that only its owner can read or write, under a name no one can guess
 * (".FINAL.XXXXXXXXXXXXXXXX"), never through a symlink nor onto an existing file. `name`
 * receives the name. -1 with errno. */
static int create_private(int dfd, const char* final, char* name, size_t size) {
  for (int i = 0; i < 16; ++i) {
    uint64_t r;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      r = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^ ((uint64_t)getpid() << 40) ^
          (uint64_t)i;
    }
    if (snprintf(name, size, ".%s.%016llx", final, (unsigned long long)r) >= (int)size) {
      errno = ENAMETOOLONG;
      return -1;
    }
    int fd = openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) {
      fchmod(fd, 0600); /* exactly 0600 whatever the umask */
      if (fd > 2) return fd;
      /* Not one of the standard descriptors the CLI's are dup2()ed onto. */
      int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
      close(fd);
      if (moved < 0) unlinkat(dfd, name, 0);
      return moved;
    }
    if (errno != EEXIST) return -1;
  }
  return -1;
}

/* Waits for `pid` at most `seconds`, then kills it (SIGKILL). 1: it exited, `*st` says how;
 * 0: killed; -1: waitpid failed (errno). */
static int wait_bounded(pid_t pid, unsigned seconds, int* st) {
  struct timespec start, now;
  clock_gettime(CLOCK_MONOTONIC, &start);
  long nap_ns = 1000000; /* 1 ms, doubling up to 100 ms */
  for (;;) {
    pid_t w = waitpid(pid, st, WNOHANG);
    if (w == pid) return 1;
    if (w < 0 && errno != EINTR) return -1;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t waited_ns =
        (int64_t)(now.tv_sec - start.tv_sec) * 1000000000 + (now.tv_nsec - start.tv_nsec);
    if (waited_ns >= (int64_t)seconds * 1000000000) {
      kill(pid, SIGKILL);
      while ((w = waitpid(pid, st, 0)) < 0 && errno == EINTR) {
      }
      return w == pid ? 0 : -1;
    }
    struct timespec nap = {0, nap_ns};
    nanosleep(&nap, NULL);
    if (nap_ns < 100000000) nap_ns *= 2;
  }
}

/* The step's end in srun: the job's report, forkguard-JOB.STEP.html in the report directory.
 * Runs the CLI and waits for it (srun has nothing left to do) at most report_timeout seconds;
 * any failure is one line, never srun's exit status. */
int slurm_spank_exit(spank_t sp, int ac, char** av) {
  (void)sp;
  (void)ac;
  (void)av;
  if (spank_context() != S_CTX_LOCAL || site_report[0] == '\0' || !enabled() || !local_ids)
    return 0;
  char logs[FG_PATH_MAX], where[FG_PATH_MAX + 256], final[48], final_err[64];
  char tmp[128], tmp_err[128], job[16], owner[16];
  if (!job_log_dir(logs, sizeof(logs)) || !job_log_dir_owned(logs)) return 0;
  snprintf(job, sizeof(job), "%u", local_job);
  snprintf(owner, sizeof(owner), "%u", (unsigned)local_uid);
  snprintf(final, sizeof(final), "forkguard-%u.%u.html", local_job, local_step);
  snprintf(final_err, sizeof(final_err), "%s.err", final);
  int dfd = open_report_dir(where, sizeof(where));
  if (dfd < 0) return 0;
  int out = create_private(dfd, final, tmp, sizeof(tmp));
  int err = out < 0 ? -1 : create_private(dfd, final_err, tmp_err, sizeof(tmp_err));
  if (out < 0 || err < 0) {
    no_report("cannot create a file in %s (%s)", where, strerror(errno));
    if (out >= 0) {
      close(out);
      unlinkat(dfd, tmp, 0);
    }
    close(dfd);
    return 0;
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, out, 1);
  posix_spawn_file_actions_adddup2(&fa, err, 2);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  char* argv[] = {cli,    "report",    "--job", job,  "--owner", owner, "--format",
                  "html", "--fail-on", "never", "--", logs,      NULL};
  extern char** environ;
  pid_t pid;
  int rc = posix_spawn(&pid, cli, &fa, NULL, argv, environ);
  posix_spawn_file_actions_destroy(&fa);
  int st = 0, ended = rc == 0 ? wait_bounded(pid, report_timeout, &st) : -1;
  int wait_errno = errno;
  /* The report's notes about input lines are in the page; its standard error is kept beside
   * it only when it says something (and an older one goes). */
  struct stat est;
  int said =
      fstat(err, &est) == 0 && est.st_size > 0 && renameat(dfd, tmp_err, dfd, final_err) == 0;
  if (!said) {
    unlinkat(dfd, tmp_err, 0);
    unlinkat(dfd, final_err, 0);
  }
  if (rc != 0) {
    no_report("cannot run %s (%s)", cli, strerror(rc));
  } else if (ended < 0) {
    no_report("cannot wait for %s (%s)", cli, strerror(wait_errno));
  } else if (ended == 0) {
    no_report("%s report took longer than report_timeout=%u seconds: killed", cli, report_timeout);
  } else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    char errors[sizeof(where) + sizeof(final_err) + 16] = "";
    if (said) snprintf(errors, sizeof(errors), "; its errors: %s/%s", where, final_err);
    no_report("%s report failed (%s %d)%s", cli, WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st), errors);
  } else if (renameat(dfd, tmp, dfd, final) != 0) {
    no_report("cannot write %s/%s (%s)", where, final, strerror(errno));
  } else {
    tmp[0] = '\0'; /* in place */
  }
  if (tmp[0] != '\0') unlinkat(dfd, tmp, 0);
  close(out);
  close(err);
  close(dfd);
  return 0;
}
