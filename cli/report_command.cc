// `forkguard report [options] LOGS...`, and the making of a report that `run` shares.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/event_log.h"
#include "cli/format.h"
#include "cli/job_report.h"
#include "cli/job_timeline.h"
#include "cli/report_html.h"
#include "cli/report_render.h"
#include "cli/report_trace.h"
#include "cli/symbolizer.h"
#include "cli/unwatched.h"
#include "flags/flags.h"

namespace forkguard::cli {

const char kReportHelp[] = R"(NAME
    forkguard report - merge forkguard event logs into one report

SYNOPSIS
    forkguard report [--format text|json|markdown|html|trace] [--fail-on hazard|never]
                     [--job ID] [--no-symbolize] [--native] [--threads N]
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
      - the clean forks (no live RDMA resources) per call site;
      - every RDMA initialization site;
      - the children killed by SIGSEGV touching RDMA-registered memory;
      - the process tree (parent/child links from ppid); a process that exec'd
        (a shell wrapper that execs python) is one process with two programs,
        its logs joined by the shim's exec event;
      - a note ("file:line: what") for every input problem: truncated last
        lines, garbage, binary data, unknown schema major versions (skipped),
        empty directories, unreadable files. Everything else is still reported.

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
    --format text|json|markdown|html|trace
        text (default): a compiler-style diagnostic that fits 100 columns.
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
    --fail-on hazard|never
        hazard: exit 3 when any hazardous fork is in the logs (for CI).
        never (default): exit 0 whatever the logs say.
    --job ID
        Report only job ID ("" for the processes without a job id). A job not
        in the logs is an error (exit 2) that lists the jobs there are.
    --no-symbolize
        Do not open the binaries named in the logs.
    --native
        Python processes: also print the interpreter's native frames. By default
        a Python process's stacks are its Python frames, headed by the innermost
        frame outside the standard library and site-packages (the user's line,
        "train.py:88 in build_loader"), with one "inside:" line naming the
        libraries the call went through (multiprocessing, torch.utils.data,
        pyverbs, mpi4py -> libmpi -> libfabric); the native frames are folded.
    --threads N
        Read N files at a time (default: one per core, at most 8). Each line
        is decoded once (simdjson) and only what the report needs is kept:
        memory grows with processes and distinct call sites and stacks, not with
        the registrations or forks logged: forks are counted per process and call
        site, the first 8 and last 8 of each process kept to be listed (json
        "forks", html and trace marks; every count stays exact and the report
        says when it lists a sample).
    -h, --help
        This text.

EXIT STATUS
    0    report printed
    2    bad command line
    3    --fail-on hazard and a hazardous fork was found
    125  forkguard itself failed

EXAMPLES
    forkguard report /tmp/fg-logs
    forkguard report --format markdown node*/fg-logs > issue.md
    forkguard report --format json --fail-on hazard logs/ > report.json
    forkguard report --job 4242 /shared/fg
    forkguard report --format html logs/ > report.html
    forkguard report --format trace logs/ > trace.json    # open in Perfetto
)";

namespace {

bool ParseFormat(const std::string& v, std::string* out) {
  if (v != "text" && v != "json" && v != "markdown" && v != "md" && v != "html" && v != "trace")
    return false;
  *out = v == "md" ? "markdown" : v;
  return true;
}

}  // namespace

std::string RenderReportAs(const JobReport& r, const std::string& format, bool show_native) {
  if (format == "json") return RenderJson(r);
  if (format == "markdown") return RenderMarkdown(r, show_native);
  return RenderText(r, 100, show_native);
}

namespace {

std::string JobName(const std::string& job) { return job.empty() ? "(no job id)" : job; }

// Text and Markdown for logs of several jobs: a line naming them, then one whole report per
// job (the reader's notes with the first). JSON stays one document: summary.jobs and the
// job of each finding keep them apart. `parts` from SplitByJob: each job's events are
// analysed and dropped in turn.
std::string RenderJobSections(std::vector<LogSet> parts, const std::string& format, Symbolizer* sym,
                              bool show_native, int64_t* hazards) {
  std::string head = "forkguard: " + std::to_string(parts.size()) + " jobs in the logs:";
  std::string body;
  for (size_t i = 0; i < parts.size(); ++i) {
    std::string id = parts[i].processes.empty() ? "" : parts[i].processes[0].job;
    JobReport r = BuildJobReport(parts[i], sym);
    parts[i] = LogSet();
    *hazards += r.hazard_forks;
    const JobSummary& j = r.jobs.at(0);
    head += std::string(i == 0 ? " " : "; ") + JobName(id) + " (" +
            Plural(j.processes, "process", "processes");
    if (!j.ranks.empty()) head += ", " + FormatRanks(j.ranks, 2);
    head += ")";
    std::string title = "job " + JobName(id);
    body += format == "markdown" ? "\n---\n\n## " + title + "\n\n" : "\n=== " + title + " ===\n";
    body += RenderReportAs(r, format, show_native);
  }
  head += "; --job ID reports one\n";
  return (format == "markdown" ? head + "\n" : head) + body;
}

}  // namespace

std::vector<option> OptionTable(std::vector<option> own, const option* shared) {
  for (const option* p = shared; p && p->name; ++p) own.push_back(*p);
  own.push_back({"help", no_argument, nullptr, 'h'});
  own.push_back({});
  return own;
}

bool SetReportOption(const std::string& name, const std::string& v, ReportOptions* o) {
  using flags::UsageError;
  if (name == "format") {
    if (!ParseFormat(v, &o->format))
      throw UsageError("--format takes text, json, markdown, html or trace");
  } else if (name == "fail-on") {
    if (v != "hazard" && v != "never") throw UsageError("--fail-on takes hazard or never");
    o->fail_on_hazard = v == "hazard";
  } else if (name == "no-symbolize") {
    o->symbolize = false;
  } else if (name == "native") {
    o->show_native = true;
  } else if (name == "threads") {
    if (v.empty() || v.size() > 3 || v.find_first_not_of("0123456789") != std::string::npos ||
        std::stoi(v) < 1)
      throw UsageError("--threads takes a number from 1 to 999");
    o->threads = std::stoi(v);
  } else {
    return false;
  }
  return true;
}

std::string RenderLogs(LogSet&& logs, const ReportOptions& o, int64_t* hazards,
                       const std::function<void(std::string_view)>* stream) {
  // The processes that ran without the shim, after a text or markdown report.
  std::string unwatched;
  if (o.format == "text" || o.format == "markdown")
    unwatched = FormatUnwatched(FindUnwatched(logs));
  std::vector<std::string> ids = JobIds(logs);
  if (o.job) {
    const std::string& job = *o.job;
    if (std::find(ids.begin(), ids.end(), job) == ids.end()) {
      std::string known;
      for (const auto& id : ids) known += (known.empty() ? "" : ", ") + JobName(id);
      throw flags::UsageError("no job " + JobName(job) + " in the logs (jobs there: " +
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
  if (o.format == "html" || o.format == "trace") {
    // One page or trace for the whole input: its findings and processes name their job.
    JobReport r = BuildJobReport(logs, symbolizer);
    *hazards = r.hazard_forks;
    Timeline t = BuildTimeline(logs, r);
    logs = LogSet();  // the report and timeline hold what is drawn
    if (o.format == "trace" && stream) {
      RenderTrace(r, t, *stream);
      return "";
    }
    return o.format == "html" ? RenderHtml(r, t) : RenderTrace(r, t);
  }
  if (ids.size() > 1 && o.format != "json")
    return RenderJobSections(SplitByJob(std::move(logs)), o.format, symbolizer, o.show_native,
                             hazards) +
           unwatched;
  JobReport r = BuildJobReport(logs, symbolizer);
  *hazards = r.hazard_forks;
  return RenderReportAs(r, o.format, o.show_native) + unwatched;
}

const std::vector<option> kReportOptions =
    OptionTable({{"job", required_argument, nullptr, 0}}, kReportMakingOptions);

int ReportMain(int argc, char** argv) {
  // Paths and options in any order; after "--" only paths; "-" is standard input.
  flags::Options opts =
      flags::Options::Parse(argc, argv, kReportOptions.data(), flags::Positionals::kAnywhere);
  if (opts.Has("help")) {
    fputs(kReportHelp, stdout);
    return kExitOk;
  }
  ReportOptions o;
  // Every value given is checked, in command-line order; the last one wins.
  for (const auto& [name, v] : opts.given())
    if (!SetReportOption(name, v, &o) && name == "job") o.job = v;
  const std::vector<std::string>& paths = opts.positionals();
  if (paths.empty()) throw flags::UsageError("no logs given");
  LogSet logs;
  ReadLogs(paths, &logs, o.threads);
  int64_t hazards = 0;
  bool write_failed = false;
  std::function<void(std::string_view)> stream = [&](std::string_view s) {
    if (!write_failed && fwrite(s.data(), 1, s.size(), stdout) != s.size()) write_failed = true;
  };
  std::string out = RenderLogs(std::move(logs), o, &hazards, &stream);
  if (fwrite(out.data(), 1, out.size(), stdout) != out.size() || fflush(stdout) != 0 ||
      write_failed) {
    perror("forkguard report: writing the report");
    return kExitInternal;
  }
  return o.fail_on_hazard && hazards > 0 ? kExitHazard : kExitOk;
}

}  // namespace forkguard::cli
