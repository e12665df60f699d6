// One command-line parser for forkguard's binaries: getopt_long over one long_opts[] table
// per command (as Darshan's tools do), and one way to report a bad command line. refloader,
// rdma/transport_tool and the forkguard CLI's subcommands (cli/) use it.
#pragma once

#include <getopt.h>

#include <cstdint>
#include <exception>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace forkguard::flags {

// A bad command line: unknown option, missing value, malformed number, missing required
// option, stray argument. Reported by ReportUsageError (exit status 2).
class UsageError : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

// What Parse does with the arguments that are not options.
enum class Positionals {
  kNone,          // a command of options only: the first one is "unexpected argument"
  kAfterOptions,  // options, then (from the first non-option, or after "--") the rest as they
                  // are, options or not: a command line to run (getopt's "+")
  kAnywhere,      // mixed with the options in any order, kept in order; all after "--"; "-"
                  // is one (standard input)
};

// The options one command was given, by long name.
class Options {
 public:
  // Parses argv[1..argc) against `long_opts`, a getopt_long table that ends in an all-zero
  // entry (argv[0] names the command). `--name VALUE` or `--name=VALUE` for
  // required_argument, `--name` for no_argument; unique abbreviations are getopt_long's. An
  // entry whose `val` is a letter or digit (and `flag` null) may also be given as `-L`
  // (`{"help", no_argument, nullptr, 'h'}`: -h), and is known by its long name. Anything
  // else (unknown option, missing value, a positional argument `positionals` does not take)
  // throws UsageError.
  static Options Parse(int argc, char** argv, const option* long_opts,
                       Positionals positionals = Positionals::kNone);

  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  std::string Str(const std::string& name, const std::string& def) const;
  // A size: an unsigned integer with an optional K/M/G suffix (ParseSize).
  uint64_t Size(const std::string& name, uint64_t def) const;
  // A decimal integer, which may be negative.
  int64_t Int(const std::string& name, int64_t def) const;
  double Double(const std::string& name, double def) const;

  // Every option given, in command-line order ("" for a no_argument one): to pass them on.
  const std::vector<std::pair<std::string, std::string>>& given() const { return given_; }
  // The arguments that were not options, in command-line order (Positionals).
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  const std::string* Find(const std::string& name) const;  // the last one given wins
  std::vector<std::pair<std::string, std::string>> given_;
  std::vector<std::string> positionals_;
};

// "4096", "4K" / "4KiB" / "4k", "1M", "2G" (powers of 1024); throws UsageError otherwise.
uint64_t ParseSize(const std::string& s);

// The one report of a bad command line: "PROGRAM: WHAT (see PROGRAM --help)" on stderr.
// Returns 2, the exit status for a usage error.
int ReportUsageError(const std::string& program, const std::exception& e);

// What keeps a --help text true (for tests): the options of `long_opts` that `help` does not
// mention as "--name", then the "--name"s `help` mentions that `long_opts` lacks. "--help" is
// left out: the program's usage line documents it once for every command.
std::vector<std::string> HelpMismatches(const option* long_opts, const std::string& help);

}  // namespace forkguard::flags
