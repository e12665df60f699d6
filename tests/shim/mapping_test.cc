// What libforkguard.so adds to the address space of every process it is preloaded into:
// two mappings, its code and its RELRO data (its .bss merges with the loader's anonymous
// memory next to it). Every mapping is copied by every fork() of the host and unmapped by
// every exit, so a third one is a cost on every clean fork (shim/libforkguard.ld
// and ZeroFilled in shim/base/sys.h say how the layout is kept). These tests fail, naming the
// culprit, when a change brings one back: an initialized global (.data), or a gap page
// between the code and the data segment.
#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/support/runfiles.h"

namespace {

constexpr uint64_t kPage = 4096;

uint64_t AlignUp(uint64_t v) { return (v + kPage - 1) & ~(kPage - 1); }
uint64_t AlignDown(uint64_t v) { return v & ~(kPage - 1); }

std::string ShimPath() { return forkguard::test_support::Runfile("shim/libforkguard.so"); }

#if defined(FORKGUARD_ASAN) || defined(FORKGUARD_TSAN) || defined(FORKGUARD_UBSAN)
#define SKIP_IF_SANITIZED()                                                                  \
  GTEST_SKIP() << "NOT RUN: a sanitizer build of the shim carries the sanitizer's own data " \
                  "and runtime mappings; the layout checked is the plain build's"
#else
#define SKIP_IF_SANITIZED()
#endif

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Elf {
  std::string bytes;
  const Elf64_Ehdr* ehdr() const { return reinterpret_cast<const Elf64_Ehdr*>(bytes.data()); }
  std::vector<Elf64_Phdr> Segments(uint32_t type) const {
    std::vector<Elf64_Phdr> out;
    for (int i = 0; i < ehdr()->e_phnum; ++i) {
      Elf64_Phdr p;
      memcpy(&p, bytes.data() + ehdr()->e_phoff + i * sizeof(Elf64_Phdr), sizeof(p));
      if (p.p_type == type) out.push_back(p);
    }
    return out;
  }
  // "NAME (N bytes at 0xADDR)" of each section with file bytes in [from, to).
  std::string SectionsWithBytesIn(uint64_t from, uint64_t to) const {
    std::string out;
    const auto* sh = reinterpret_cast<const Elf64_Shdr*>(bytes.data() + ehdr()->e_shoff);
    const char* names = bytes.data() + sh[ehdr()->e_shstrndx].sh_offset;
    for (int i = 0; i < ehdr()->e_shnum; ++i) {
      if (sh[i].sh_type == SHT_NOBITS || sh[i].sh_size == 0 || (sh[i].sh_flags & SHF_ALLOC) == 0)
        continue;
      if (sh[i].sh_addr + sh[i].sh_size <= from || sh[i].sh_addr >= to) continue;
      std::ostringstream s;
      s << names + sh[i].sh_name << " (" << sh[i].sh_size << " bytes at 0x" << std::hex
        << sh[i].sh_addr << ") ";
      out += s.str();
    }
    return out;
  }
};

TEST(ShimMappings, TwoLoadSegmentsTheWritableFileBytesAllRelro) {
  SKIP_IF_SANITIZED();
  Elf elf{ReadFile(ShimPath())};
  ASSERT_GE(elf.bytes.size(), sizeof(Elf64_Ehdr));
  ASSERT_EQ(0, memcmp(elf.bytes.data(), ELFMAG, SELFMAG));
  std::vector<Elf64_Phdr> loads = elf.Segments(PT_LOAD);
  ASSERT_EQ(2u, loads.size()) << "one code segment (R E) and one data segment (RW) expected";
  const Elf64_Phdr& code = loads[0];
  const Elf64_Phdr& data = loads[1];
  EXPECT_EQ(uint32_t{PF_R | PF_X}, code.p_flags);
  EXPECT_EQ(uint32_t{PF_R | PF_W}, data.p_flags);
  // No page between them: ld.so would map it PROT_NONE, a mapping of its own.
  EXPECT_EQ(AlignUp(code.p_vaddr + code.p_memsz), AlignDown(data.p_vaddr))
      << "a gap page between the code and the data segment (shim/libforkguard.ld)";
  std::vector<Elf64_Phdr> relro = elf.Segments(PT_GNU_RELRO);
  ASSERT_EQ(1u, relro.size()) << "the shim is linked with -z relro";
  // The loader protects [relro, relro end rounded down to a page): every file byte of the
  // data segment must be in there, or a writable file-backed page is a third mapping.
  uint64_t protected_end = AlignDown(relro[0].p_vaddr + relro[0].p_memsz);
  uint64_t file_end = data.p_vaddr + data.p_filesz;
  EXPECT_LE(relro[0].p_vaddr, data.p_vaddr);
  EXPECT_LE(AlignUp(file_end), protected_end)
      << "initialized writable data outside RELRO (make it zero-filled: ZeroFilled in "
         "shim/base/sys.h): "
      << elf.SectionsWithBytesIn(protected_end, AlignUp(file_end));
}

// The lines of /proc/PID/maps of `cat` run with `env` added.
std::vector<std::string> MapsOfCat(const std::vector<std::string>& env) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 1);
    close(fds[0]);
    close(fds[1]);
    for (const std::string& e : env) putenv(const_cast<char*>(e.c_str()));
    execl("/bin/cat", "cat", "/proc/self/maps", static_cast<char*>(nullptr));
    _exit(127);
  }
  close(fds[1]);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof(buf))) > 0;) out.append(buf, n);
  close(fds[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "cat /proc/self/maps";
  std::vector<std::string> lines;
  std::istringstream in(out);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(ShimMappings, APreloadedShimAddsTwoMappings) {
  SKIP_IF_SANITIZED();
  std::string shim = ShimPath();
  struct stat st;
  ASSERT_EQ(0, stat(shim.c_str(), &st));
  // The shim's own mappings are named by its file; compare by inode (the runfile may be a link).
  char inode[32];
  snprintf(inode, sizeof(inode), " %lu ", static_cast<unsigned long>(st.st_ino));
  std::vector<std::string> bare = MapsOfCat({});
  std::vector<std::string> with =
      MapsOfCat({"LD_PRELOAD=" + shim, "FORKGUARD_MODE=warn", "FORKGUARD_LOG="});
  std::string named;
  int ours = 0;
  for (const std::string& l : with) {
    if (l.find(inode) != std::string::npos) {
      ++ours;
      named += l + "\n";
    }
  }
  EXPECT_EQ(2, ours) << named;
  // Without a log and on a machine without RDMA devices the shim maps nothing at start, and
  // its .bss merges with the loader's anonymous memory above it (the first object ld.so maps).
  if (access("/sys/class/infiniband_verbs", F_OK) != 0 && access("/dev/infiniband", F_OK) != 0) {
    EXPECT_EQ(bare.size() + 2, with.size()) << "with the shim:\n"
                                            << [&] {
                                                 std::string s;
                                                 for (const std::string& l : with) s += l + "\n";
                                                 return s;
                                               }();
  }
}

}  // namespace
