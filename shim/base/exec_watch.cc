#include "shim/base/exec_watch.h"

#include <elf.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>
#include <iterator>

#include "names/name_table.h"
#include "shim/base/sys.h"

namespace forkguard {
namespace {

bool ReadFull(int fd, void* buf, size_t n, off_t at) {
  ssize_t got = pread(fd, buf, n, at);
  return got == static_cast<ssize_t>(n);
}

// `file` resolved along PATH into out (execvp's search, without its ENOEXEC fallbacks).
bool SearchPath(const char* file, char* out, size_t cap) {
  const char* path = getenv("PATH");
  if (path == nullptr || *path == '\0') path = "/bin:/usr/bin";
  size_t flen = strlen(file);
  for (const char* p = path;;) {
    const char* colon = strchr(p, ':');
    size_t dlen = colon != nullptr ? static_cast<size_t>(colon - p) : strlen(p);
    if (dlen + 1 + flen + 1 <= cap) {
      size_t n = 0;
      if (dlen == 0) {
        out[n++] = '.';
      } else {
        memcpy(out, p, dlen);
        n = dlen;
      }
      out[n++] = '/';
      memcpy(out + n, file, flen + 1);
      if (access(out, X_OK) == 0) return true;
    }
    if (colon == nullptr) break;
    p = colon + 1;
  }
  out[0] = '\0';
  return false;
}

// The interpreter of a "#!" script into out; false when the file is not one.
bool ScriptInterpreter(int fd, char* out, size_t cap) {
  char head[256];
  ssize_t n = pread(fd, head, sizeof(head) - 1, 0);
  if (n < 3 || head[0] != '#' || head[1] != '!') return false;
  head[n] = '\0';
  const char* p = head + 2;
  while (*p == ' ' || *p == '\t') ++p;
  size_t len = 0;
  while (p[len] != '\0' && p[len] != ' ' && p[len] != '\t' && p[len] != '\n') ++len;
  if (len == 0 || len >= cap) return false;
  memcpy(out, p, len);
  out[len] = '\0';
  return true;
}

}  // namespace

const char* ExecUnwatchedName(ExecUnwatched reason) {
  // By bit: kExecPreloadRemoved is bit 0.
  static constexpr char kNames[][16] = {"preload-removed", "static", "setuid"};
  static_assert(1u << (std::size(kNames) - 1) == kExecSetuid);
  return FlagName(kNames, reason, "?");
}

bool EnvPreloadsShim(char* const envp[]) {
  if (envp == nullptr) return false;
  for (char* const* e = envp; *e != nullptr; ++e) {
    if (strncmp(*e, "LD_PRELOAD=", 11) == 0 && strstr(*e + 11, "libforkguard.so") != nullptr) {
      return true;
    }
  }
  return false;
}

int ElfIsDynamic(int fd) {
  Elf64_Ehdr eh;
  if (!ReadFull(fd, &eh, sizeof(eh), 0) || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr)) {
    return -1;
  }
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    if (!ReadFull(fd, &ph, sizeof(ph), static_cast<off_t>(eh.e_phoff + i * sizeof(ph)))) {
      return -1;
    }
    if (ph.p_type == PT_INTERP) return 1;
  }
  return 0;
}

unsigned ExecUnwatchedReasons(const char* file, char* const envp[], bool search, char* resolved,
                              size_t cap) {
  unsigned why = 0;
  if (!EnvPreloadsShim(envp)) why |= kExecPreloadRemoved;
  if (cap == 0) return why;
  resolved[0] = '\0';
  if (file == nullptr || *file == '\0') return why;
  if (search && strchr(file, '/') == nullptr) {
    if (!SearchPath(file, resolved, cap)) return why;
  } else {
    CopyCString(resolved, cap, file);
  }
  int fd = open(resolved, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return why;  // exec will fail (or we may not read it): nothing to tell
  // AT_SECURE: the exec changes the effective user or group (the set-ID bit of a file
  // owned by someone else than the real user or group), on a mount that honours it.
  struct stat st;
  struct statvfs vfs;
  if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
      (((st.st_mode & S_ISUID) != 0 && st.st_uid != getuid()) ||
       ((st.st_mode & S_ISGID) != 0 && (st.st_mode & S_IXGRP) != 0 && st.st_gid != getgid())) &&
      fstatvfs(fd, &vfs) == 0 && (vfs.f_flag & ST_NOSUID) == 0) {
    why |= kExecSetuid;
  }
  int dynamic = ElfIsDynamic(fd);
  char interp[256];
  if (dynamic < 0 && ScriptInterpreter(fd, interp, sizeof(interp))) {
    int ifd = open(interp, O_RDONLY | O_CLOEXEC);
    if (ifd >= 0) {
      dynamic = ElfIsDynamic(ifd);
      close(ifd);
    }
  }
  close(fd);
  if (dynamic == 0) why |= kExecStatic;
  return why;
}

}  // namespace forkguard
