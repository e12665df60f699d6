#include "cli/symbolizer.h"

#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <gelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cxxabi.h>

#include <cstdlib>
#include <cstring>

#include "cli/format.h"

namespace forkguard::cli {

struct Symbolizer::Module {
  Dwfl* dwfl = nullptr;
  Dwfl_Module* mod = nullptr;
  // Address of the object's first byte when reported at base 0; `off` in the
  // log is relative to the load base (dladdr's dli_fbase), i.e. to this.
  GElf_Addr base = 0;
  ~Module() {
    if (dwfl) dwfl_end(dwfl);
  }
};

namespace {

const Dwfl_Callbacks kOfflineCallbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

}  // namespace

std::string Demangle(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') return name;
  int status = 0;
  char* d = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  std::string out = status == 0 && d ? d : name;
  free(d);
  return out;
}

Symbolizer::Symbolizer() = default;
Symbolizer::~Symbolizer() = default;

Symbolizer::Module* Symbolizer::Load(const std::string& obj) {
  auto it = modules_.find(obj);
  if (it != modules_.end()) return it->second.get();
  auto m = std::make_unique<Module>();
  // Only absolute paths of regular files: a log names what it saw on its
  // host, which may not exist (or be something else) here.
  // A FIFO or device named by a hostile log must not block or be read.
  struct stat st;
  if (!obj.empty() && obj[0] == '/' && stat(obj.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
      access(obj.c_str(), R_OK) == 0) {
    m->dwfl = dwfl_begin(&kOfflineCallbacks);
    if (m->dwfl) {
      dwfl_report_begin(m->dwfl);
      m->mod = dwfl_report_elf(m->dwfl, obj.c_str(), obj.c_str(), -1, 0, false);
      dwfl_report_end(m->dwfl, nullptr, nullptr);
      if (m->mod) {
        GElf_Addr bias = 0;
        Elf* elf = dwfl_module_getelf(m->mod, &bias);
        // The load base maps the page-aligned vaddr of the first PT_LOAD.
        size_t nph = 0;
        GElf_Addr lowest = ~GElf_Addr{0};
        if (elf && elf_getphdrnum(elf, &nph) == 0) {
          for (size_t i = 0; i < nph; ++i) {
            GElf_Phdr ph;
            if (gelf_getphdr(elf, static_cast<int>(i), &ph) && ph.p_type == PT_LOAD &&
                ph.p_vaddr < lowest) {
              lowest = ph.p_vaddr & ~(GElf_Addr{ph.p_align > 0 ? ph.p_align : 4096} - 1);
            }
          }
        }
        if (lowest == ~GElf_Addr{0}) lowest = 0;
        m->base = lowest + bias;
      }
    }
  }
  Module* raw = m.get();
  modules_.emplace(obj, std::move(m));
  return raw;
}

std::vector<Note> Symbolizer::TakeNotes() { return std::move(notes_); }

void Symbolizer::NoteOnce(const std::string& obj, const std::string& text) {
  if (noted_.emplace(obj, true).second) notes_.push_back({obj, text});
}

void Symbolizer::Symbolize(Frame* f) {
  if (!f->sym.empty()) f->sym = Demangle(f->sym);
  if (f->python || f->obj.empty() || !f->off) return;
  Module* m = Load(f->obj);
  if (!m || !m->mod) {
    if (!f->build_id.empty())
      NoteOnce(f->obj,
               "object not found here (build-id " + f->build_id + "): its frames are raw offsets");
    return;
  }
  if (!f->build_id.empty()) {
    const unsigned char* bits = nullptr;
    GElf_Addr vaddr = 0;
    int n = dwfl_module_build_id(m->mod, &bits, &vaddr);
    std::string here = n > 0 ? HexBytes(bits, static_cast<size_t>(n)) : "";
    if (here != f->build_id) {
      NoteOnce(f->obj, "the file here has another build-id (" + (here.empty() ? "none" : here) +
                           ") than the log's process had (" + f->build_id +
                           "): its frames are raw offsets");
      return;
    }
  }
  GElf_Addr addr = m->base + *f->off;
  // Return addresses point after the call: look up the call instruction.
  GElf_Addr lookup = addr > 0 ? addr - 1 : addr;
  GElf_Off sym_off = 0;
  GElf_Sym sym;
  const char* name =
      dwfl_module_addrinfo(m->mod, lookup, &sym_off, &sym, nullptr, nullptr, nullptr);
  if (name && *name) f->func = Demangle(name);
  if (Dwfl_Line* line = dwfl_module_getsrc(m->mod, lookup)) {
    int lineno = 0;
    const char* src = dwfl_lineinfo(line, nullptr, &lineno, nullptr, nullptr, nullptr);
    if (src && *src) {
      f->src_file = src;
      f->src_line = lineno;
    }
  }
}

}  // namespace forkguard::cli
