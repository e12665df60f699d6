// The `forkguard` subcommands. Each parses its arguments with flags/ against its own table of
// option rows (which also make the OPTIONS of its --help), returns the process exit status,
// and throws flags::UsageError for a bad command line (main reports it: exit 2).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "flags/flags.h"

namespace forkguard::api {
struct Census;
}  // namespace forkguard::api

namespace forkguard::cli {

inline constexpr char kVersion[] = "0.1.0";

// Exit statuses shared by the subcommands (documented in each --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;          // doctor: a check failed; probe: not written
inline constexpr int kExitUsage = 2;         // bad command line
inline constexpr int kExitHazard = 3;        // --fail-on hazard and a hazardous fork was seen
inline constexpr int kExitUnwatched = 4;     // run --require-watched: a process ran unwatched
inline constexpr int kExitInternal = 125;    // forkguard itself failed
inline constexpr int kExitCannotExec = 126;  // run: the command is not executable
inline constexpr int kExitNotFound = 127;    // run: the command was not found

struct JobReport;
struct LogSet;
// The report in "text", "json", "markdown", "sarif", "junit" or "github" (show_native: Python
// processes' native frames too).
std::string RenderReportAs(const JobReport& r, const std::string& format, bool show_native = false);

// argv[0] is the command's name ("run"); argv0 is the forkguard binary's (to find the shim).
int RunMain(int argc, char** argv, const char* argv0);
int ReportMain(int argc, char** argv);
int DoctorMain(int argc, char** argv, const char* argv0);
int PsMain(int argc, char** argv);
int ProbeMain(int argc, char** argv);
int WatchMain(int argc, char** argv);
// `forkguard ps`'s table (--format text) of a census.
std::string PsText(const api::Census& c);

// How a report is made: what `report` and `run` share.
struct ReportOptions {
  std::string format = "text";  // text, json, markdown, html, trace, sarif, junit, github
  bool fail_on_hazard = false;
  bool fail_on_new_hazard = false;  // --fail-on new-hazard: sites the baseline lacks
  std::string suppressions;         // report --suppressions FILE
  std::string baseline;             // report --baseline OLD.json
  bool emit_suppressions = false;   // report --emit-suppressions
  bool symbolize = true;
  bool show_native = false;
  int threads = 0;                 // files read at a time; 0: one per core, at most 8
  std::optional<std::string> job;  // report --job
};
// Their options, one row each (with report's help; run tells them its own way): one spelling,
// one check of each value (SetReportOption), the default from ReportOptions.
struct ReportMakingFlags {
  flags::Flag format, fail_on, no_symbolize, native, threads;
};
const ReportMakingFlags& TheReportMakingFlags();
// Sets the ReportMakingFlags option `name` to `value` after checking it (throws
// flags::UsageError) and returns true; false for any other name.
bool SetReportOption(const std::string& name, const std::string& value, ReportOptions* o);
// The report of `logs` as `forkguard report` prints it; *hazards: its hazardous forks (not
// counting suppressed ones); *new_sites: hazardous sites the baseline lacks (all of them
// without one). Throws flags::UsageError for a --job not in the logs or a bad baseline, and
// BadSuppressionFile (cli/report_suppressions.h) for a bad suppression file.
// With `stream`, --format trace is written to it as it is made (and "" returned).
std::string RenderLogs(LogSet&& logs, const ReportOptions& o, int64_t* hazards,
                       int64_t* new_sites = nullptr,
                       const std::function<void(std::string_view)>* stream = nullptr);

// Each command's option rows, and its --help (the OPTIONS part made from them).
const flags::FlagTable& RunFlags();
const flags::FlagTable& ReportFlags();
const flags::FlagTable& DoctorFlags();
const flags::FlagTable& PsFlags();
const flags::FlagTable& ProbeFlags();
const flags::FlagTable& WatchFlags();
std::string RunHelp();
std::string ReportHelp();
std::string DoctorHelp();
std::string PsHelp();
std::string ProbeHelp();
std::string WatchHelp();
extern const char kMainHelp[];

}  // namespace forkguard::cli
