#include "flags/flags.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include <regex>
#include <set>

namespace forkguard::flags {

Options Options::Parse(int argc, char** argv, const option* long_opts, Positionals positionals) {
  Options o;
  // "+": stop at the first non-option (reported below, or the start of the positionals);
  // "-": return each non-option in order as if it were the value of option 1 (POSIXLY_CORRECT
  // cannot turn that into "+"); ":": a missing value is ':' rather than '?'. Then the
  // options that have a one-letter form.
  std::string optstring = positionals == Positionals::kAnywhere ? "-:" : "+:";
  for (const option* p = long_opts; p->name; ++p)
    if (!p->flag && p->val > 0 && p->val < 128 && isalnum(p->val)) {
      optstring += static_cast<char>(p->val);
      if (p->has_arg == required_argument) optstring += ':';
      if (p->has_arg == optional_argument) optstring += "::";
    }
  opterr = 0;  // the errors are ours, reported once
  optind = 0;  // glibc: a full reset, so that each command parses afresh
  for (;;) {
    int index = -1;
    int c = getopt_long(argc, argv, optstring.c_str(), long_opts, &index);
    if (c == -1) break;
    if (c == 1) {
      o.positionals_.emplace_back(optarg);
      continue;
    }
    if (c != '?' && c != ':' && index < 0)  // a one-letter form: find its entry
      for (const option* p = long_opts; p->name; ++p)
        if (!p->flag && p->val == c) index = static_cast<int>(p - long_opts);
    if (c != '?' && c != ':' && index >= 0) {
      o.given_.emplace_back(long_opts[index].name, optarg ? optarg : "");
      continue;
    }
    std::string arg = optind > 0 && optind <= argc ? argv[optind - 1] : "";
    std::string name = arg.substr(0, arg.find('='));
    // An unknown letter: getopt names it (in "-xh" optind has not moved past the word yet).
    if (c == '?' && optopt > 0 && optopt < 128 && isalnum(optopt) &&
        !strchr(optstring.c_str(), optopt))
      name = std::string("-") + static_cast<char>(optopt);
    if (c == ':') throw UsageError(name + " needs a value");
    if (name.size() < arg.size())  // --name=VALUE for a no_argument option?
      for (const option* p = long_opts; p->name; ++p)
        if (name == std::string("--") + p->name) throw UsageError(name + " takes no value");
    throw UsageError("unknown option " + name);
  }
  if (optind < argc && positionals == Positionals::kNone)
    throw UsageError(std::string("unexpected argument '") + argv[optind] + "'");
  for (int i = optind; i < argc; ++i) o.positionals_.emplace_back(argv[i]);
  return o;
}

const std::string* Options::Find(const std::string& name) const {
  for (auto it = given_.rbegin(); it != given_.rend(); ++it)
    if (it->first == name) return &it->second;
  return nullptr;
}

std::string Options::Str(const std::string& name, const std::string& def) const {
  const std::string* v = Find(name);
  return v ? *v : def;
}

uint64_t Options::Size(const std::string& name, uint64_t def) const {
  const std::string* v = Find(name);
  if (!v) return def;
  try {
    return ParseSize(*v);
  } catch (const UsageError& e) {
    throw UsageError("--" + name + ": " + e.what());
  }
}

int64_t Options::Int(const std::string& name, int64_t def) const {
  const std::string* v = Find(name);
  if (!v) return def;
  size_t pos = 0;
  long long n = 0;
  try {
    n = std::stoll(*v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (v->empty() || pos != v->size()) throw UsageError("--" + name + ": bad number '" + *v + "'");
  return n;
}

double Options::Double(const std::string& name, double def) const {
  const std::string* v = Find(name);
  if (!v) return def;
  size_t pos = 0;
  double d = 0;
  try {
    d = std::stod(*v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (v->empty() || pos != v->size()) throw UsageError("--" + name + ": bad number '" + *v + "'");
  return d;
}

uint64_t ParseSize(const std::string& s) {
  if (s.empty()) throw UsageError("empty size");
  size_t pos = 0;
  unsigned long long v;
  try {
    v = std::stoull(s, &pos);
  } catch (const std::exception&) {
    throw UsageError("bad size '" + s + "'");
  }
  std::string suf = s.substr(pos);
  uint64_t mul = 1;
  if (suf == "" || suf == "B") {
  } else if (suf == "K" || suf == "k" || suf == "KiB") {
    mul = 1024;
  } else if (suf == "M" || suf == "m" || suf == "MiB") {
    mul = 1024 * 1024;
  } else if (suf == "G" || suf == "g" || suf == "GiB") {
    mul = 1024ull * 1024 * 1024;
  } else {
    throw UsageError("bad size suffix in '" + s + "' (use K, M or G)");
  }
  return v * mul;
}

int ReportUsageError(const std::string& program, const std::exception& e) {
  fprintf(stderr, "%s: %s (see %s --help)\n", program.c_str(), e.what(), program.c_str());
  return 2;
}

std::vector<std::string> HelpMismatches(const option* long_opts, const std::string& help) {
  std::set<std::string> in_table, in_help;
  for (const option* p = long_opts; p->name; ++p) in_table.insert(p->name);
  static const std::regex kOpt("--([a-z0-9][a-z0-9-]*)");
  for (std::sregex_iterator it(help.begin(), help.end(), kOpt), end; it != end; ++it)
    in_help.insert((*it)[1]);
  in_table.erase("help");  // documented once, by the program's usage line
  in_help.erase("help");
  std::vector<std::string> out;
  for (const auto& n : in_table)
    if (!in_help.count(n)) out.push_back("--" + n + " is not in the help text");
  for (const auto& n : in_help)
    if (!in_table.count(n)) out.push_back("--" + n + " in the help text is not an option");
  return out;
}

}  // namespace forkguard::flags
