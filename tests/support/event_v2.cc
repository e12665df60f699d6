#include "tests/support/event_v2.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <simdjson.h>
#include <cstdio>
#include <cstring>

#include "shim/event_schema.h"

namespace forkguard::testing_support {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

std::string Hex(unsigned long long v) {
  char b[32];
  snprintf(b, sizeof(b), "0x%llx", v);
  return b;
}

std::string Quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      snprintf(b, sizeof(b), "\\u%04x", c);
      out += b;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// `,"key":` and `{"key":` (keys: shim/event_schema.h).
std::string Member(const char* key) { return "," + Quote(key) + ":"; }
std::string First(const char* key) { return "{" + Quote(key) + ":"; }

bool IntOf(element e, long long* out) {
  int64_t v = 0;
  if (e.get_int64().get(v) != simdjson::SUCCESS) return false;
  *out = v;
  return true;
}

}  // namespace

std::string ElfSymbolAt(const std::string& path, unsigned long long off) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return "";
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
    close(fd);
    return "";
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* map = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (map == MAP_FAILED) return "";
  const char* base = static_cast<const char*>(map);
  std::string best;
  const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(base);
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
      eh->e_shoff + eh->e_shnum * sizeof(Elf64_Shdr) <= size &&
      eh->e_phoff + eh->e_phnum * sizeof(Elf64_Phdr) <= size) {
    // Offsets are from the first loaded byte (page-aligned lowest PT_LOAD vaddr).
    unsigned long long first = ~0ULL;
    const auto* ph = reinterpret_cast<const Elf64_Phdr*>(base + eh->e_phoff);
    for (int i = 0; i < eh->e_phnum; ++i)
      if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr < first) first = ph[i].p_vaddr;
    if (first == ~0ULL) first = 0;
    unsigned long long addr = (first & ~0xfffULL) + off;
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(base + eh->e_shoff);
    for (unsigned want : {SHT_SYMTAB, SHT_DYNSYM}) {
      for (int i = 0; i < eh->e_shnum && best.empty(); ++i) {
        if (sh[i].sh_type != want || sh[i].sh_link >= eh->e_shnum) continue;
        if (sh[i].sh_offset + sh[i].sh_size > size) continue;
        const Elf64_Shdr& strs = sh[sh[i].sh_link];
        if (strs.sh_offset + strs.sh_size > size) continue;
        const auto* syms = reinterpret_cast<const Elf64_Sym*>(base + sh[i].sh_offset);
        size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
        for (size_t k = 0; k < n; ++k) {
          if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_value == 0) continue;
          if (addr < syms[k].st_value || addr >= syms[k].st_value + syms[k].st_size) continue;
          if (syms[k].st_name < strs.sh_size) best = base + strs.sh_offset + syms[k].st_name;
          break;
        }
      }
      if (!best.empty()) break;
    }
  }
  munmap(map, size);
  return best;
}

std::optional<std::string> EventV2Expander::Expand(const std::string& line, std::string* problem) {
  simdjson::dom::parser parser;
  element root;
  if (parser.parse(line).get(root) != simdjson::SUCCESS) {
    *problem = "not JSON";
    return std::nullopt;
  }
  object o;
  if (root.get_object().get(o) != simdjson::SUCCESS) {
    *problem = "not a JSON object";
    return std::nullopt;
  }
  std::string_view schema, event;
  bool has_schema = o[schema::kKeySchema].get_string().get(schema) == simdjson::SUCCESS;
  if (o[schema::kKeyEvent].get_string().get(event) != simdjson::SUCCESS) {
    *problem = "no event";
    return std::nullopt;
  }
  if (has_schema && schema != schema::kEventV2) return line;  // /1: as it is
  if (has_schema && event == schema::kHeader) {
    have_header_ = true;
    header_members_.clear();
    for (auto [key, value] : o) {
      if (key == schema::kKeySchema || key == schema::kKeyEvent || key == schema::kKeyStartNs)
        continue;
      header_members_ += "," + Quote(key) + ":" + simdjson::to_string(value);
    }
    IntOf(o[schema::kKeyStartNs], &start_ns_);
    IntOf(o[schema::kKeyPid], &pid_);
    modules_.clear();
    stacks_.clear();
    return std::nullopt;
  }
  if (!have_header_) return line;  // no schema at all: not ours to expand
  long long id = -1;
  if (event == schema::kModule) {
    IntOf(o[schema::kKeyId], &id);
    Module m;
    std::string_view path, base;
    if (o[schema::kKeyPath].get_string().get(path) == simdjson::SUCCESS) m.path = path;
    if (o[schema::kKeyBase].get_string().get(base) == simdjson::SUCCESS)
      m.base = strtoull(std::string(base).c_str(), nullptr, 16);
    if (modules_.count(id)) *problem = "duplicate module id " + std::to_string(id);
    modules_[id] = m;
    return std::nullopt;
  }
  if (event == schema::kStackRecord) {
    IntOf(o[schema::kKeyId], &id);
    if (stacks_.count(id)) *problem = "duplicate stack id " + std::to_string(id);
    std::string frames = "[";
    simdjson::dom::array a;
    int i = 0;
    if (o[schema::kKeyFrames].get_array().get(a) == simdjson::SUCCESS) {
      for (element f : a) {
        if (i++ > 0) frames += ",";
        simdjson::dom::array pair;
        if (f.get_array().get(pair) == simdjson::SUCCESS) {
          long long m = -1, off = 0;
          IntOf(pair.at(0), &m);
          IntOf(pair.at(1), &off);
          auto it = modules_.find(m);
          if (it == modules_.end()) {
            if (m != -1) *problem = "module " + std::to_string(m) + " used before its record";
            frames += First(schema::kKeyIp) + Quote(Hex(off)) + "}";
            continue;
          }
          frames += First(schema::kKeyIp) + Quote(Hex(it->second.base + off)) +
                    Member(schema::kKeyObj) + Quote(it->second.path) + Member(schema::kKeyOff) +
                    Quote(Hex(off));
          std::string sym = ElfSymbolAt(it->second.path, i > 1 && off > 0 ? off - 1 : off);
          if (!sym.empty()) frames += Member(schema::kKeySym) + Quote(sym);
          frames += "}";
        } else {
          frames += simdjson::to_string(f);
        }
      }
    }
    stacks_[id] = frames + "]";
    return std::nullopt;
  }
  // An event: the header's fields, absolute time, and stacks by value.
  auto stack_text = [&](element v) -> std::string {
    long long sid = 0;
    if (IntOf(v, &sid)) {
      auto it = stacks_.find(sid);
      if (it != stacks_.end()) return it->second;
      *problem = "stack id " + std::to_string(sid) + " used before its record";
      return "[]";
    }
    return simdjson::to_string(v);
  };
  std::string out = First(schema::kKeySchema) + Quote(schema::kEventV2) +
                    Member(schema::kKeyEvent) + Quote(event);
  out += header_members_;
  long long ts = 0;
  IntOf(o[schema::kKeyTs], &ts);
  out += Member(schema::kKeyTsNs) + std::to_string(start_ns_ + ts);
  bool has_tid = false;
  bool has_call = false;
  bool has_dontfork = false;
  for (auto [key, value] : o) {
    if (key == schema::kKeyEvent || key == schema::kKeyTs) continue;
    if (key == schema::kKeyTid) has_tid = true;
    if (key == schema::kKeyCall) has_call = true;
    if (key == schema::kKeyDontfork) has_dontfork = true;
    if (key == schema::kKeyStack || key == schema::kKeyRegStack) {
      out += "," + Quote(key) + ":" + stack_text(value);
    } else if (key == schema::kKeySites && event == schema::kMrCounts &&
               value.type() == element_type::ARRAY) {
      // mr_counts: each site's stack by value too.
      out += "," + Quote(key) + ":[";
      int n = 0;
      simdjson::dom::array sites = value.get_array().value_unsafe();
      for (element site : sites) {
        if (n++ > 0) out += ",";
        if (site.type() != element_type::OBJECT) {
          out += simdjson::to_string(site);
          continue;
        }
        out += "{";
        int m = 0;
        simdjson::dom::object so = site.get_object().value_unsafe();
        for (auto [k2, v2] : so) {
          if (m++ > 0) out += ",";
          out += Quote(k2) + ":" +
                 (k2 == schema::kKeyStack ? stack_text(v2) : simdjson::to_string(v2));
        }
        out += "}";
      }
      out += "]";
    } else if (key == schema::kKeyInit && value.type() == element_type::OBJECT) {
      out += Member(schema::kKeyInit) + "{";
      int n = 0;
      // The object itself, not a reference into get_object()'s temporary result (a range-for
      // over value_unsafe() of a temporary dangles: ASan's stack-use-after-scope).
      simdjson::dom::object obj = value.get_object().value_unsafe();
      for (auto [k2, v2] : obj) {
        if (n++ > 0) out += ",";
        out +=
            Quote(k2) + ":" + (k2 == schema::kKeyStack ? stack_text(v2) : simdjson::to_string(v2));
      }
      out += "}";
    } else if (key == schema::kKeyMr && value.type() == element_type::ARRAY) {
      long long f[4] = {0, 0, 0, 0};
      int n = 0;
      simdjson::dom::array arr = value.get_array().value_unsafe();
      for (element x : arr) {
        uint64_t u = 0;
        if (n < 4 && x.get_uint64().get(u) == simdjson::SUCCESS) f[n] = static_cast<long long>(u);
        ++n;
      }
      out += Member(schema::kKeyAddr) + std::to_string(static_cast<unsigned long long>(f[0])) +
             Member(schema::kKeyLen) + std::to_string(f[1]) + Member(schema::kKeyAccess) +
             std::to_string(f[2]) + Member(schema::kKeyHandle) +
             Quote(Hex(static_cast<unsigned long long>(f[3])));
    } else {
      out += "," + Quote(key) + ":" + simdjson::to_string(value);
    }
  }
  if (!has_tid) out += Member(schema::kKeyTid) + std::to_string(pid_);
  if (event == schema::kMrRegister) {
    if (!has_call) out += Member(schema::kKeyCall) + Quote(schema::kDefaultRegCall);
    if (!has_dontfork) out += Member(schema::kKeyDontfork) + "null";
  }
  return out + "}";
}

}  // namespace forkguard::testing_support
