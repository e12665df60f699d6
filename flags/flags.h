// One command-line parser for forkguard's binaries. Each command has one table of rows, one
// row per option carrying its name, what it takes, its default and its help (as glibc argp's
// argp_option rows do); the getopt_long table, the values of the options not given and the
// OPTIONS part of --help all come from the rows. One way to report a bad command line.
// refloader, rdma/transport_tool and the forkguard CLI's subcommands (cli/) use it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
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

// One option: everything said about it, once.
struct Flag {
  std::string name;   // the long name: --name
  std::string value;  // what it takes, as --help names it ("N", "DIR"); "" for a switch
  std::string def;    // its value when not given ("": none), what --help shows as the default
  // What it does, lines separated by '\n'. "{default}" in it stands for `def`; without one,
  // --help appends " (default DEF)" to the last line when there is a default. A row with no
  // help is not listed on its own: ManHelp names it in the heading of the next row.
  std::string help;
  char letter = 0;  // a one-letter form (-h), or 0
};
using FlagTable = std::vector<Flag>;

// `--help`'s row ("-h, --help").
Flag HelpFlag(std::string help = "");
// `row` with a command's own help (and value, if not ""): a shared row told its way.
Flag Retold(Flag row, std::string help, std::string value = "");

// The OPTIONS part of a --help from the rows, one row a line: `indent` spaces, "--name VALUE"
// ("-L, --name" with a letter), the help from column `column` (two spaces after a longer
// name), its further lines at that column.
std::string ColumnHelp(const FlagTable& table, size_t indent, size_t column);
// The same as a man page lays it out: "    --name VALUE" (rows with no help joined into the
// next one's heading, ", " between), then each line of help indented 8.
std::string ManHelp(const FlagTable& table);

// The options one command was given, by long name.
class Options {
 public:
  // Parses argv[1..argc) against `table` (argv[0] names the command). `--name VALUE` or
  // `--name=VALUE` for a row with a value, `--name` for a switch; unique abbreviations are
  // getopt_long's. A row's letter L may also be given as `-L`, and is known by its long name.
  // Anything else (unknown option, missing value, a positional argument `positionals` does
  // not take) throws UsageError.
  static Options Parse(int argc, char** argv, const FlagTable& table,
                       Positionals positionals = Positionals::kNone);

  bool Has(const std::string& name) const { return Find(name) != nullptr; }
  // Whether the command's table has a row `name`.
  bool Takes(const std::string& name) const;
  // The value given last, else the row's default. A name the table lacks is a
  // std::logic_error (a bug, not a bad command line).
  std::string Str(const std::string& name) const;
  // A size: an unsigned integer with an optional K/M/G suffix (ParseSize).
  uint64_t Size(const std::string& name) const;
  // A decimal integer, which may be negative.
  int64_t Int(const std::string& name) const;
  double Double(const std::string& name) const;

  // Every option given, in command-line order ("" for a no_argument one): to pass them on.
  const std::vector<std::pair<std::string, std::string>>& given() const { return given_; }
  // The arguments that were not options, in command-line order (Positionals).
  const std::vector<std::string>& positionals() const { return positionals_; }

 private:
  const std::string* Find(const std::string& name) const;  // the last one given wins
  const Flag& Row(const std::string& name) const;
  FlagTable table_;
  std::vector<std::pair<std::string, std::string>> given_;
  std::vector<std::string> positionals_;
};

// A command's --help: when `o` has it, prints help() on standard output and returns true (the
// command then exits 0); false otherwise, without calling help().
bool PrintHelpIfAsked(const Options& o, const std::function<std::string()>& help);

// "4096", "4K" / "4KiB" / "4k", "1M", "2G" (powers of 1024); throws UsageError otherwise.
uint64_t ParseSize(const std::string& s);

// The one report of a bad command line: "PROGRAM: WHAT (see PROGRAM --help)" on stderr.
// Returns 2, the exit status for a usage error.
int ReportUsageError(const std::string& program, const std::exception& e);

}  // namespace forkguard::flags
