// The `forkguard` subcommands. Each parses its arguments with flags/ against its own
// getopt_long table, returns the process exit status, and throws flags::UsageError for a bad
// command line (main reports it: exit 2).
#pragma once

#include <getopt.h>

#include <string>
#include <vector>

namespace forkguard::cli {

inline constexpr char kVersion[] = "0.1.0";

// Exit statuses shared by the subcommands (documented in each --help).
inline constexpr int kExitOk = 0;
inline constexpr int kExitFail = 1;          // doctor: a check failed
inline constexpr int kExitUsage = 2;         // bad command line
inline constexpr int kExitHazard = 3;        // --fail-on hazard and a hazardous fork was seen
inline constexpr int kExitInternal = 125;    // forkguard itself failed
inline constexpr int kExitCannotExec = 126;  // run: the command is not executable
inline constexpr int kExitNotFound = 127;    // run: the command was not found

struct JobReport;
// The report in "text", "json" or "markdown" (show_native: Python processes'
// native frames too).
std::string RenderReportAs(const JobReport& r, const std::string& format, bool show_native = false);

// argv[0] is the command's name ("run"); argv0 is the forkguard binary's (to find the shim).
int RunMain(int argc, char** argv, const char* argv0);
int ReportMain(int argc, char** argv);
int DoctorMain(int argc, char** argv, const char* argv0);

// Each command's options; its --help names exactly these (help_test).
extern const option kRunOptions[];
extern const option kReportOptions[];
extern const option kDoctorOptions[];

extern const char kRunHelp[];
extern const char kReportHelp[];
extern const char kDoctorHelp[];
extern const char kMainHelp[];

}  // namespace forkguard::cli
