#include "flags/flags.h"

#include <ctype.h>
#include <getopt.h>
#include <stdio.h>
#include <string.h>

namespace forkguard::flags {

Flag HelpFlag(std::string help) { return {"help", "", "", std::move(help), 'h'}; }

Flag Retold(Flag row, std::string help, std::string value) {
  row.help = std::move(help);
  if (!value.empty()) row.value = std::move(value);
  return row;
}

namespace {

// "--name VALUE", "-L, --name".
std::string Heading(const Flag& f) {
  std::string h = f.letter ? std::string("-") + f.letter + ", --" + f.name : "--" + f.name;
  return f.value.empty() ? h : h + " " + f.value;
}

// The row's help, its default in it: at "{default}", else after the last line.
std::vector<std::string> HelpLines(const Flag& f) {
  std::string text = f.help;
  size_t at = text.find("{default}");
  if (at != std::string::npos)
    text.replace(at, 9, f.def);
  else if (!f.def.empty())
    text += " (default " + f.def + ")";
  std::vector<std::string> lines;
  for (size_t start = 0;;) {
    size_t nl = text.find('\n', start);
    lines.push_back(text.substr(start, nl - start));
    if (nl == std::string::npos) return lines;
    start = nl + 1;
  }
}

}  // namespace

std::string ColumnHelp(const FlagTable& table, size_t indent, size_t column) {
  std::string out;
  for (const Flag& f : table) {
    if (f.help.empty()) continue;
    std::string line = std::string(indent, ' ') + Heading(f);
    line += std::string(line.size() + 2 <= column ? column - line.size() : 2, ' ');
    for (const std::string& h : HelpLines(f)) {
      out += line + h + "\n";
      line = std::string(column, ' ');
    }
  }
  return out;
}

std::string ManHelp(const FlagTable& table) {
  std::string out, heading;
  for (const Flag& f : table) {
    heading += (heading.empty() ? "" : ", ") + Heading(f);
    if (f.help.empty()) continue;
    out += "    " + heading + "\n";
    for (const std::string& h : HelpLines(f)) out += h.empty() ? "\n" : "        " + h + "\n";
    heading.clear();
  }
  return out;
}

Options Options::Parse(int argc, char** argv, const FlagTable& table, Positionals positionals) {
  Options o;
  o.table_ = table;
  std::vector<option> opts;
  for (const Flag& f : table)
    opts.push_back(
        {f.name.c_str(), f.value.empty() ? no_argument : required_argument, nullptr, f.letter});
  opts.push_back({});
  const option* long_opts = opts.data();
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

const Flag& Options::Row(const std::string& name) const {
  for (const Flag& f : table_)
    if (f.name == name) return f;
  throw std::logic_error("no option --" + name + " in this command's table");
}

bool Options::Takes(const std::string& name) const {
  for (const Flag& f : table_)
    if (f.name == name) return true;
  return false;
}

std::string Options::Str(const std::string& name) const {
  const std::string* v = Find(name);
  return v ? *v : Row(name).def;
}

uint64_t Options::Size(const std::string& name) const {
  std::string v = Str(name);
  try {
    return ParseSize(v);
  } catch (const UsageError& e) {
    throw UsageError("--" + name + ": " + e.what());
  }
}

namespace {

// `v` as a whole number (std::stoll) or double (std::stod); UsageError naming --name otherwise.
template <typename T, typename Conv>
T Number(const std::string& name, const std::string& v, Conv conv) {
  size_t pos = 0;
  T n = 0;
  try {
    n = conv(v, &pos);
  } catch (const std::exception&) {
    pos = 0;
  }
  if (v.empty() || pos != v.size()) throw UsageError("--" + name + ": bad number '" + v + "'");
  return n;
}

}  // namespace

int64_t Options::Int(const std::string& name) const {
  return Number<int64_t>(name, Str(name),
                         [](const std::string& v, size_t* pos) { return std::stoll(v, pos); });
}

double Options::Double(const std::string& name) const {
  return Number<double>(name, Str(name),
                        [](const std::string& v, size_t* pos) { return std::stod(v, pos); });
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

bool PrintHelpIfAsked(const Options& o, const std::function<std::string()>& help) {
  if (!o.Has("help")) return false;
  fputs(help().c_str(), stdout);
  return true;
}

int ReportUsageError(const std::string& program, const std::exception& e) {
  fprintf(stderr, "%s: %s (see %s --help)\n", program.c_str(), e.what(), program.c_str());
  return 2;
}

}  // namespace forkguard::flags
