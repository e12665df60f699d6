// Symbolizing stacks (cli/symbolizer.h): by path, checking the build-id; FIFOs and missing
// objects never block or fail.
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "cli/event_log.h"
#include "cli/job_report.h"
#include "cli/symbolizer.h"
#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace forkguard::cli {
namespace {

TEST(LogParser, SymbolizerIgnoresFifosAndMissingObjects) {
  std::string dir = forkguard::test_support::MakeTempDir("sym");
  std::string fifo = dir + "/libfifo.so";
  ASSERT_EQ(0, mkfifo(fifo.c_str(), 0600));
  std::string text =
      "{\"schema\":\"forkguard.event/1\",\"event\":\"fork\",\"pid\":5,\"verdict\":"
      "\"hazard\",\"stack\":[{\"obj\":\"" +
      fifo + "\",\"off\":\"0x10\",\"sym\":\"f\"},{\"obj\":\"/nonexistent.so\",\"off\":\"0x1\"}]}\n";
  LogSet l;
  ParseLogText("sym.jsonl", text, &l);
  Symbolizer sym;  // would block forever opening the FIFO
  JobReport r = BuildJobReport(l, &sym);
  ASSERT_EQ(r.hazard_groups.size(), 1u);
  EXPECT_EQ(r.hazard_groups[0].stack[0].sym, "f");
  EXPECT_TRUE(r.hazard_groups[0].stack[0].src_file.empty());
}

// The main program's build-id and first mapped byte, as the shim reads them.
struct SelfImage {
  std::string build_id;
  uintptr_t base = 0;
};
SelfImage Self() {
  SelfImage self;
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<SelfImage*>(data);
        uintptr_t lo = ~uintptr_t{0};
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type == PT_LOAD && info->dlpi_addr + ph.p_vaddr < lo)
            lo = info->dlpi_addr + ph.p_vaddr;
          if (ph.p_type != PT_NOTE) continue;
          const char* n = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
          const char* end = n + ph.p_memsz;
          while (n + sizeof(ElfW(Nhdr)) <= end) {
            const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(n);
            const char* desc = n + sizeof(ElfW(Nhdr)) + ((nh->n_namesz + 3) & ~3u);
            if (nh->n_type == NT_GNU_BUILD_ID) {
              static const char kHex[] = "0123456789abcdef";
              for (unsigned k = 0; k < nh->n_descsz; ++k) {
                unsigned char c = static_cast<unsigned char>(desc[k]);
                s->build_id += kHex[c >> 4];
                s->build_id += kHex[c & 15];
              }
            }
            n = desc + ((nh->n_descsz + 3) & ~3u);
          }
        }
        s->base = lo & ~uintptr_t{4095};
        return 1;  // the first object is the main program
      },
      &self);
  return self;
}

__attribute__((noinline)) void V2SymbolizedFunction() { asm volatile(""); }

// The report symbolizes /2 offsets with libdw when the file's build-id matches; a file that
// is missing or has another build-id leaves raw offsets and one note per object.
TEST(LogParserV2, SymbolizesByPathCheckingTheBuildId) {
  SelfImage self = Self();
  ASSERT_FALSE(self.build_id.empty()) << "the test binary has no build-id";
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  ASSERT_GT(n, 0);
  exe[n] = '\0';
  uint64_t off = reinterpret_cast<uintptr_t>(&V2SymbolizedFunction) - self.base + 1;
  Symbolizer sym;
  Frame good;
  good.obj = exe;
  good.off = off;
  good.build_id = self.build_id;
  sym.Symbolize(&good);
  EXPECT_NE(good.func.find("V2SymbolizedFunction"), std::string::npos) << good.func;
  Frame other = good;
  other.func.clear();
  // Another build-id: its first byte changed (whatever it was).
  other.build_id = (self.build_id.compare(0, 2, "00") == 0 ? "11" : "00") + self.build_id.substr(2);
  Frame other2 = other;
  sym.Symbolize(&other);
  sym.Symbolize(&other2);
  EXPECT_TRUE(other.func.empty()) << other.func;
  Frame missing;
  missing.obj = "/nonexistent/libgone.so";
  missing.off = 16;
  missing.build_id = "abcd";
  sym.Symbolize(&missing);
  sym.Symbolize(&missing);
  std::vector<Note> notes = sym.TakeNotes();
  ASSERT_EQ(notes.size(), 2u);  // once per object
  EXPECT_EQ(notes[0].where, exe);
  EXPECT_NE(notes[0].text.find("another build-id"), std::string::npos) << notes[0].text;
  EXPECT_EQ(notes[1].where, "/nonexistent/libgone.so");
  EXPECT_NE(notes[1].text.find("not found"), std::string::npos) << notes[1].text;
}

}  // namespace
}  // namespace forkguard::cli
