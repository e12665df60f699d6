// `forkguard report [options] LOGS...`, and the making of a report that `run` shares.
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/event_log.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/job_timeline.h"
#include "cli/report_baseline.h"
#include "cli/report_ci.h"
#include "cli/report_html.h"
#include "cli/report_json.h"
#include "cli/report_markdown.h"
#include "cli/report_suppressions.h"
#include "cli/report_text.h"
#include "cli/report_trace.h"
#include "cli/symbolizer.h"
#include "cli/unwatched.h"
#include "flags/flags.h"

namespace forkguard::cli {

namespace {

const char kReportHelpHead[] = R"(NAME
    forkguard report - merge forkguard event logs into one report

SYNOPSIS
    forkguard report [--format text|json|markdown|html|trace|sarif|junit|github]
                     [--fail-on hazard|new-hazard|never] [--baseline OLD.json]
                     [--suppressions FILE] [--emit-suppressions]
                     [--job ID] [--owner UID] [--no-symbolize] [--native]
                     [--threads N]
                     LOG_DIR_OR_FILE...

DESCRIPTION
    Reads event logs written by libforkguard.so (FORKGUARD_LOG=DIR; schema
    forkguard.event/1, one *.jsonl file per process) from any number of
    directories (searched recursively) and files, from any number of processes,
    ranks and hosts (- reads standard input), and prints one report:

      - each hazardous fork call site once, with how often it forked (x64 when 64
        ranks forked at the same line), in how many processes, ranks and hosts,
        why it is a hazard, where fork was called and where RDMA was first
        initialized (stacks), the registered memory at the fork, what happened
        to the children, and the fix;
      - the forks fix mode (FORKGUARD_MODE=fix) made safe: "N forks made safe",
        the bytes copied for the children and withheld from them, and their
        memory kinds (overall and per call site; they stay hazardous forks);
      - the clean forks (no live RDMA resources) per call site;
      - every RDMA initialization site;
      - the children killed by SIGSEGV touching RDMA-registered memory;
      - the process tree (parent/child links from ppid); a process that exec'd
        (a shell wrapper that execs python) is one process with two programs,
        its logs joined by the shim's exec event;
      - a note ("file:line: what") for every input problem: truncated last
        lines, garbage, binary data, unknown schema major versions (skipped),
        timestamps, pids and counts out of range (the line skipped: every field
        is treated as hostile), a fork range's "fixed" that is none of copied,
        withheld or failed (read as unchanged), empty directories, unreadable
        files. Everything else is still reported.

    Jobs stay apart. Every event names its job (the shim reads SLURM_JOB_ID,
    TORCHELASTIC_RUN_ID, PBS_JOBID, LSB_JOBID, PMIX_NAMESPACE), so two jobs'
    logs in one directory are never merged: the text and Markdown reports get
    one section per job after a line naming the jobs, and in the JSON report
    summary.jobs has one entry per job and every finding names its job. Ranks
    are named compactly: "ranks 0-1023", "ranks 0-5, 8, 10-12", and past six
    runs "ranks 0-3, 8 and 1000 more".

    Native frames that carry "obj" and "off" are symbolized to function and
    file:line with elfutils libdw when the object exists on this machine (with
    debug info for file:line). Symbolize on the machine that ran the job, or one
    with the same binaries.

OPTIONS
)";
const char kReportHelpTail[] = R"(
EXIT STATUS
    0    report printed
    2    bad command line, suppression file or baseline
    3    --fail-on hazard and a hazardous fork was found; --fail-on
         new-hazard and a hazardous call site the baseline lacks
    125  forkguard itself failed

EXAMPLES
    forkguard report /tmp/fg-logs
    forkguard report --format markdown node*/fg-logs > issue.md
    forkguard report --format json --fail-on hazard logs/ > report.json
    forkguard report --job 4242 /shared/fg
    forkguard report --format html logs/ > report.html
    forkguard report --format trace logs/ > trace.json    # open in Perfetto
    forkguard report --emit-suppressions logs/ > forkguard.supp
    forkguard report --suppressions forkguard.supp --format sarif logs/ > fg.sarif
    forkguard report --format json logs/ > baseline.json        # on main
    forkguard report --baseline baseline.json --fail-on new-hazard \
        --format github logs/                                    # on a pull request
)";

}  // namespace

namespace {

bool ParseFormat(const std::string& v, std::string* out) {
  if (v != "text" && v != "json" && v != "markdown" && v != "md" && v != "html" && v != "trace" &&
      v != "sarif" && v != "junit" && v != "github")
    return false;
  *out = v == "md" ? "markdown" : v;
  return true;
}

// Formats that are one document for the whole input (their findings name their job).
bool OneDocument(const std::string& format) {
  return format == "json" || format == "sarif" || format == "junit" || format == "github";
}

}  // namespace

std::string RenderReportAs(const JobReport& r, const std::string& format, bool show_native) {
  if (format == "json") return RenderJson(r);
  if (format == "sarif") return RenderSarif(r, kVersion);
  if (format == "junit") return RenderJunit(r);
  if (format == "github") return RenderGithub(r);
  if (format == "markdown") return RenderMarkdown(r, show_native);
  return RenderText(r, 100, show_native);
}

namespace {

std::string JobName(const std::string& job) { return job.empty() ? "(no job id)" : job; }

// Text and Markdown for logs of several jobs: a line naming them, then one whole report per
// job (the reader's notes with the first). JSON stays one document: summary.jobs and the
// job of each finding keep them apart. `parts` from SplitByJob: each job's events are
// analysed and dropped in turn.
template <typename Finish>
std::string RenderJobSections(std::vector<LogSet> parts, const std::string& format, Symbolizer* sym,
                              bool show_native, int64_t* hazards, Finish finish) {
  std::string head = "forkguard: " + std::to_string(parts.size()) + " jobs in the logs:";
  std::string body;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string id = parts[i].processes.empty() ? "" : parts[i].processes[0].job;
    JobReport r = BuildJobReport(parts[i], sym);
    parts[i] = LogSet();
    finish(&r, &id);
    *hazards += r.hazard_forks;
    const JobSummary& j = r.jobs.at(0);
    // Job ids come from the logs: escaped for the format, so none can start a line.
    std::string name = format == "markdown" ? MarkdownText(JobName(id)) : EscapeText(JobName(id));
    head += std::string(i == 0 ? " " : "; ") + name + " (" +
            Plural(j.processes, "process", "processes");
    if (!j.ranks.empty()) head += ", " + FormatRanks(j.ranks, 2);
    head += ")";
    std::string title = "job " + name;
    body += format == "markdown" ? "\n---\n\n## " + title + "\n\n" : "\n=== " + title + " ===\n";
    body += RenderReportAs(r, format, show_native);
  }
  head += "; --job ID reports one\n";
  return (format == "markdown" ? head + "\n" : head) + body;
}

}  // namespace

bool SetReportOption(const std::string& name, const std::string& v, ReportOptions* o) {
  using flags::UsageError;
  const ReportMakingFlags& f = TheReportMakingFlags();
  if (name == f.format.name) {
    if (!ParseFormat(v, &o->format))
      throw UsageError("--format takes text, json, markdown, html, trace, sarif, junit or github");
  } else if (name == f.fail_on.name) {
    if (v != "hazard" && v != "new-hazard" && v != "never")
      throw UsageError("--fail-on takes hazard, new-hazard or never");
    o->fail_on_hazard = v == "hazard";
    o->fail_on_new_hazard = v == "new-hazard";
  } else if (name == f.no_symbolize.name) {
    o->symbolize = false;
  } else if (name == f.native.name) {
    o->show_native = true;
  } else if (name == f.threads.name) {
    if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(v) < 1)
      throw UsageError("--threads takes a number from 1 to 999");
    o->threads = std::stoi(v);
  } else {
    return false;
  }
  return true;
}

std::string RenderLogs(LogSet&& logs, const ReportOptions& o, int64_t* hazards, int64_t* new_sites,
                       const std::function<void(std::string_view)>* stream) {
  if (o.fail_on_new_hazard && o.baseline.empty())
    throw flags::UsageError("--fail-on new-hazard needs --baseline OLD.json");
  std::optional<SuppressionFile> supp;
  if (!o.suppressions.empty()) supp = LoadSuppressionFile(o.suppressions, "forkguard report");
  std::optional<Baseline> baseline;
  if (!o.baseline.empty()) baseline = LoadBaseline(o.baseline);
  int64_t fresh = 0;
  if (new_sites == nullptr) new_sites = &fresh;
  *new_sites = 0;
  // The processes that ran without the shim: a section after a text or markdown report,
  // a member of the JSON and HTML documents.
  std::vector<UnwatchedProcess> unwatched_list = FindUnwatched(logs);
  std::string unwatched;
  if (o.format == "text" || o.format == "markdown")
    unwatched = FormatUnwatched(unwatched_list, o.format == "markdown");
  std::vector<std::string> ids = JobIds(logs);
  if (o.job) {
    const std::string& job = *o.job;
    if (std::find(ids.begin(), ids.end(), job) == ids.end()) {
      std::string known;
      for (const auto& id : ids) known += (known.empty() ? "" : ", ") + EscapeText(JobName(id));
      throw flags::UsageError("no job " + EscapeText(JobName(job)) + " in the logs (jobs there: " +
                              (known.empty() ? "none" : known) + ")");
    }
    std::vector<LogSet> parts = SplitByJob(std::move(logs));
    size_t at = static_cast<size_t>(std::find(ids.begin(), ids.end(), job) - ids.begin());
    LogSet selected = std::move(parts[at]);
    if (at != 0) {  // the reader's notes are about the input, whichever job is shown
      selected.notes = std::move(parts[0].notes);
      selected.files_read = parts[0].files_read;
      selected.lines_skipped = parts[0].lines_skipped;
    }
    logs = std::move(selected);
    ids = {job};
  }
  Symbolizer sym;
  Symbolizer* symbolizer = o.symbolize ? &sym : nullptr;
  *hazards = 0;
  // Suppressed forks (by the file here, or by the shim at run time) leave the findings.
  SuppressionTally tally;
  ApplySuppressions(&logs, supp ? &*supp : nullptr, symbolizer, &tally);
  // What the report command adds to a job's report: suppression use and the baseline.
  auto finish = [&](JobReport* r, const std::string* job) {
    FillSuppressionUse(tally, supp ? &*supp : nullptr, job, r);
    if (baseline) {
      *new_sites += MarkNewSites(*baseline, r);
    } else {
      *new_sites += static_cast<int64_t>(r->hazard_groups.size());
    }
  };
  if (o.format == "html" || o.format == "trace" || o.emit_suppressions) {
    // One page, trace or file for the whole input: its findings and processes name their job.
    JobReport r = BuildJobReport(logs, symbolizer);
    finish(&r, nullptr);
    r.unwatched = std::move(unwatched_list);
    *hazards = r.hazard_forks;
    if (o.emit_suppressions) return EmitSuppressions(r);
    Timeline t = BuildTimeline(logs, r);
    logs = LogSet();  // the report and timeline hold what is drawn
    if (o.format == "trace" && stream) {
      RenderTrace(r, t, *stream);
      return "";
    }
    return o.format == "html" ? RenderHtml(r, t) : RenderTrace(r, t);
  }
  if (ids.size() > 1 && !OneDocument(o.format))
    return RenderJobSections(SplitByJob(std::move(logs)), o.format, symbolizer, o.show_native,
                             hazards, finish) +
           unwatched;
  JobReport r = BuildJobReport(logs, symbolizer);
  finish(&r, ids.size() == 1 ? &ids[0] : nullptr);
  r.unwatched = std::move(unwatched_list);
  *hazards = r.hazard_forks;
  return RenderReportAs(r, o.format, o.show_native) + unwatched;
}

const ReportMakingFlags& TheReportMakingFlags() {
  static const ReportMakingFlags kFlags = {
      .format = {"format", "text|json|markdown|html|trace|sarif|junit|github",
                 ReportOptions().format,
                 R"({default} (default): a compiler-style diagnostic that fits 100 columns.
json: machine-readable, schema "forkguard.report/1", described by
docs/report-schema.json (JSON Schema).
markdown: paste into a GitHub issue.
html: one self-contained page (no network: inline CSS, JavaScript and
SVG) to open in a browser: the job summary, each finding with its
stacks, a timeline per host and process (RDMA init, registrations,
forks coloured by verdict, the children and how they ended) and the
process tree. Hosts and large families of children are folded until
opened ("Expand all" opens everything); 4096 processes: under 1 MB.
trace: Chrome Trace Event JSON for https://ui.perfetto.dev or
chrome://tracing: a track per process (named "prog [rank N] pid P @
host", sorted by host), instant events for RDMA init, registrations,
forks (verdict, reasons, action, child pid, site in args), spawns,
exec and SIGSEGV deaths, and a flow arrow from each fork to its child.
Times are microseconds from the job's first event
(otherData.t0_ns).
sarif: SARIF 2.1.0 (GitHub code scanning, GitLab, IDEs): one rule per
verdict kind (child-segv, parent-corruption, inherited-rdma), one
result per hazardous call site at the file:line of its innermost user
frame, the RDMA init site as a related location; suppressed sites carry
a suppression, sites in the --baseline baselineState "unchanged".
junit: JUnit XML, one test case per call site: hazardous sites fail,
suppressed sites and sites in the baseline are skipped, clean sites pass.
github: GitHub Actions workflow commands, one line per hazardous site:
"::error file=F,line=N,title=T::message" (child-segv,
parent-corruption), ::warning (inherited-rdma), ::notice (in the
baseline). Print it in a workflow step to annotate the code. With
GITHUB_WORKSPACE set (inside a workflow), file paths under it are
written relative to it, here and in sarif.
sarif, junit and github are one document for all the jobs in the logs.)"},
      .fail_on = {"fail-on", "hazard|new-hazard|never", "",
                  R"(hazard: exit 3 when any hazardous fork is in the logs (for CI).
Suppressed forks do not count.
new-hazard: exit 3 only for hazardous call sites the --baseline lacks.
never (default): exit 0 whatever the logs say.)"},
      .no_symbolize = {"no-symbolize", "", "", "Do not open the binaries named in the logs."},
      .native = {"native", "", "",
                 R"(Python processes: also print the interpreter's native frames. By default
a Python process's stacks are its Python frames, headed by the innermost
frame outside the standard library and site-packages (the user's line,
"train.py:88 in build_loader"), with one "inside:" line naming the
libraries the call went through (multiprocessing, torch.utils.data,
pyverbs, mpi4py -> libmpi -> libfabric); the native frames are folded.)"},
      .threads = {"threads", "N", "",
                  R"(Read N files at a time (default: one per core, at most 8). Each line
is decoded once (simdjson) and only what the report needs is kept:
memory grows with processes and distinct call sites and stacks, not with
the registrations or forks logged: forks are counted per process and call
site, the first 8 and last 8 of each process kept to be listed (json
"forks", html and trace marks; every count stays exact and the report
says when it lists a sample).)"},
  };
  return kFlags;
}

namespace {

struct ReportOwnFlags {
  flags::Flag baseline, suppressions, emit_suppressions, job, owner;
};

const ReportOwnFlags kReportOwn = {
    .baseline = {"baseline", "OLD.json", "",
                 R"(A report of an earlier run (--format json). Each hazardous site is
marked new or known; sites are matched by verdict kinds and the
functions of their stack (for Python, function and file of each Python
frame; native, function and library), never by line, so a moved line
is not a new site. Compare reports made the same way (symbolized, or
both --no-symbolize).)"},
    .suppressions = {"suppressions", "FILE", "",
                     R"(Hazardous forks that match an entry of FILE are reported apart as
suppressed, with each entry's count of forks and sites, and entries
that matched nothing are listed as never used. The format is the
shim's (FORKGUARD_SUPPRESSIONS), one entry a line, # comments:
    kind=child-segv,inherited-rdma frame=func:build_loader
    kind=* frame=lib:libtorch* program=python3 rank=0-3
    kind=inherited-rdma frame=file:train.py:88 frame="func:a b"
kind (required): child-segv, parent-corruption, inherited-rdma or *,
comma separated; the entry matches a fork when it names every reason
of the fork's verdict. frame (required, up to 4; each must match some
frame of the fork's stack): func:NAME (symbol, C++ name, or Python
function), lib:NAME (object; base name unless NAME has a /),
file:NAME[:LINE] (Python file, or native source file once
symbolized). program=NAME, rank=N[-M][,...]. NAMEs are globs (* ?);
values with spaces or # are double-quoted. A bad line is an error
naming the file, the line and the valid keys (exit 2). Forks the shim
suppressed at run time are counted the same way.)"},
    .emit_suppressions = {"emit-suppressions", "", "",
                          R"(Print a suppression file with one entry per hazardous call site of
the logs (keyed by function and file or library, not line) instead of
the report.)"},
    .job = {"job", "ID", "",
            R"(Report only job ID ("" for the processes without a job id). A job not
in the logs is an error (exit 2) that lists the jobs there are.)"},
    .owner = {"owner", "UID", "",
              R"(Read only what user UID owns, for logs in a directory other users can
write (a site's shared log root; the Slurm plugin's step report passes
the job's user): a file or directory owned by another user is skipped
with a note, and no symbolic link is followed, not even one named on
the command line.)"},
};

}  // namespace

const flags::FlagTable& ReportFlags() {
  const ReportMakingFlags& r = TheReportMakingFlags();
  const ReportOwnFlags& o = kReportOwn;
  static const flags::FlagTable kTable = {
      r.format, r.fail_on,      o.baseline, o.suppressions, o.emit_suppressions,          o.job,
      o.owner,  r.no_symbolize, r.native,   r.threads,      flags::HelpFlag("This text.")};
  return kTable;
}

std::string ReportHelp() {
  return kReportHelpHead + flags::ManHelp(ReportFlags()) + kReportHelpTail;
}

namespace {

int Report(int argc, char** argv) {
  // Paths and options in any order; after "--" only paths; "-" is standard input.
  flags::Options opts =
      flags::Options::Parse(argc, argv, ReportFlags(), flags::Positionals::kAnywhere);
  if (opts.Has("help")) {
    fputs(ReportHelp().c_str(), stdout);
    return kExitOk;
  }
  ReportOptions o;
  ReadPolicy policy;
  // Every value given is checked, in command-line order; the last one wins.
  for (const auto& [name, v] : opts.given()) {
    if (SetReportOption(name, v, &o)) continue;
    const ReportOwnFlags& f = kReportOwn;
    if (name == f.job.name) o.job = v;
    if (name == f.suppressions.name) o.suppressions = v;
    if (name == f.emit_suppressions.name) o.emit_suppressions = true;
    if (name == f.baseline.name) o.baseline = v;
    if (name == f.owner.name) {
      uid_t uid = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), uid);
      if (v.empty() || ec != std::errc() || end != v.data() + v.size())
        throw flags::UsageError("--owner takes a numeric user id");
      policy.owner = uid;
    }
  }
  const std::vector<std::string>& paths = opts.positionals();
  if (paths.empty()) throw flags::UsageError("no logs given");
  // A bad suppression file or baseline is reported before the logs are read.
  if (!o.suppressions.empty()) LoadSuppressionFile(o.suppressions, "forkguard report");
  if (!o.baseline.empty()) LoadBaseline(o.baseline);
  LogSet logs;
  ReadLogs(paths, &logs, o.threads, policy);
  int64_t hazards = 0, new_sites = 0;
  bool write_failed = false;
  std::function<void(std::string_view)> stream = [&](std::string_view s) {
    if (!write_failed && fwrite(s.data(), 1, s.size(), stdout) != s.size()) write_failed = true;
  };
  std::string out = RenderLogs(std::move(logs), o, &hazards, &new_sites, &stream);
  if (fwrite(out.data(), 1, out.size(), stdout) != out.size() || fflush(stdout) != 0 ||
      write_failed) {
    perror("forkguard report: writing the report");
    return kExitInternal;
  }
  if (o.fail_on_new_hazard) return new_sites > 0 ? kExitHazard : kExitOk;
  return o.fail_on_hazard && hazards > 0 ? kExitHazard : kExitOk;
}

}  // namespace

int ReportMain(int argc, char** argv) {
  try {
    return Report(argc, argv);
  } catch (const BadSuppressionFile&) {
    return kExitUsage;  // each bad line was printed as it was found
  }
}

}  // namespace forkguard::cli
