#include "shim/log_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>

namespace forkguard {
namespace {

// A value must not add or climb a path component.
bool SafeComponentValue(const char* v) {
  return strchr(v, '/') == nullptr && strcmp(v, ".") != 0 && strcmp(v, "..") != 0;
}

void Errno(TextBuffer* why, const char* what, const char* path, size_t len, int err) {
  if (why != nullptr) why->Str(what).Char(' ').Mem(path, len).Str(": ").Str(strerror(err));
}

}  // namespace

bool ExpandLogPath(const char* tmpl, const LogPathFields& f, TextBuffer& out, TextBuffer& why) {
  out.Clear();
  for (const char* p = tmpl; *p != '\0'; ++p) {
    if (*p != '%') {
      out.Char(*p);
      continue;
    }
    char c = *++p;
    const char* value = nullptr;
    switch (c) {
      case '%':
        out.Char('%');
        continue;
      case 'p':
        out.Dec(f.pid);
        continue;
      case 'r':
        if (f.rank >= 0) {
          out.Dec(f.rank);
        } else {
          out.Str("norank");
        }
        continue;
      case 'h':
        value = f.host != nullptr && f.host[0] != '\0' ? f.host : "nohost";
        break;
      case 'j':
        value = f.job != nullptr && f.job[0] != '\0' ? f.job : "nojob";
        break;
      case '\0':
        why.Str("a '%' at the end (write %% for a '%')");
        return false;
      default:
        why.Str("unknown template %").Char(c).Str(" (known: %h %p %r %j %%)");
        return false;
    }
    if (!SafeComponentValue(value)) {
      why.Str("%").Char(c).Str(" would be '").Str(value).Str("', not a file name");
      return false;
    }
    out.Str(value);
  }
  if (out.truncated()) {
    why.Str("path too long");
    return false;
  }
  return true;
}

size_t LogDirFixedPrefix(const char* tmpl) {
  size_t component = 0;  // where the current component starts (its '/')
  for (size_t i = 0; tmpl[i] != '\0'; ++i) {
    if (tmpl[i] == '/') component = i;
    if (tmpl[i] == '%') return component;
  }
  return strlen(tmpl);
}

int OpenLogDir(const char* path, size_t fixed_len, TextBuffer* why) {
  // Appends to `why` when there is one (nothing is formatted otherwise).
  struct Why {
    TextBuffer* b;
    Why& Str(const char* s) {
      if (b != nullptr) b->Str(s);
      return *this;
    }
    Why& Mem(const char* s, size_t n) {
      if (b != nullptr) b->Mem(s, n);
      return *this;
    }
    Why& UDec(uint64_t v) {
      if (b != nullptr) b->UDec(v);
      return *this;
    }
  } say{why};
  if (path[0] != '/') {
    say.Str("not an absolute path");
    return -1;
  }
  int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) {
    Errno(why, "cannot open", "/", 1, errno);
    return -1;
  }
  uid_t me = geteuid();
  const char* p = path;
  bool ok = true;
  while (ok) {
    while (*p == '/') ++p;
    if (*p == '\0') break;
    const char* end = strchrnul(p, '/');
    size_t len = static_cast<size_t>(end - p);
    const char* rest = end;
    while (*rest == '/') ++rest;
    bool last = *rest == '\0';
    // Expanded by the template (or below such a component): anyone may have made it first.
    bool expanded = static_cast<size_t>(p - path) > fixed_len;
    size_t shown = static_cast<size_t>(end - path);  // "/a/b" up to this component
    char name[256];
    if (len >= sizeof(name)) {
      say.Str("a path component longer than 255 bytes");
      ok = false;
      break;
    }
    memcpy(name, p, len);
    name[len] = '\0';
    if (strcmp(name, "..") == 0) {
      say.Str("'..' in the path");
      ok = false;
      break;
    }
    p = end;
    if (strcmp(name, ".") == 0) continue;

    if (expanded) {
      // By descriptor only: open it without following a symlink; create it when missing
      // (another rank may do so at the same moment), then open what is there.
      constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
      int next = openat(fd, name, kFlags);
      if (next < 0 && errno == ENOENT) {
        if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) {
          Errno(why, "cannot create", path, shown, errno);
          ok = false;
          break;
        }
        next = openat(fd, name, kFlags);
      }
      if (next < 0) {
        int err = errno;
        struct stat lst;
        if (fstatat(fd, name, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
          say.Mem(path, shown).Str(" is a symlink");
        } else if (err == ENOTDIR) {
          say.Mem(path, shown).Str(" is not a directory");
        } else {
          Errno(why, "cannot open", path, shown, err);
        }
        ok = false;
        break;
      }
      close(fd);
      fd = next;
      struct stat st;
      if (fstat(fd, &st) != 0) {
        Errno(why, "cannot stat", path, shown, errno);
        ok = false;
      } else if (st.st_uid != me) {
        // Made by someone else before this job: they could read, swap or fill our logs.
        say.Mem(path, shown).Str(" is owned by uid ").UDec(st.st_uid).Str(", not by this user");
        ok = false;
      } else if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
        say.Mem(path, shown).Str(" is writable by group or others");
        ok = false;
      }
      continue;
    }

    struct stat st;
    if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      if (errno != ENOENT) {
        Errno(why, "cannot stat", path, shown, errno);
        ok = false;
        break;
      }
      // Missing: create it (another rank may do so at the same moment).
      if (mkdirat(fd, name, 0700) != 0 && errno != EEXIST) {
        Errno(why, "cannot create", path, shown, errno);
        ok = false;
        break;
      }
      if (fstatat(fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
        Errno(why, "cannot stat", path, shown, errno);
        ok = false;
        break;
      }
    }
    bool link = S_ISLNK(st.st_mode);
    if (link && last) {
      say.Str("it is a symlink");
      ok = false;
      break;
    }
    if (link && st.st_uid != me && st.st_uid != 0) {
      // Someone else's symlink could point our logs (and our mkdirs) anywhere.
      say.Mem(path, shown).Str(" is a symlink owned by uid ").UDec(st.st_uid);
      ok = false;
      break;
    }
    if (!link && !S_ISDIR(st.st_mode)) {
      if (last) {
        say.Str("not a directory");
      } else {
        say.Mem(path, shown).Str(" is not a directory");
      }
      ok = false;
      break;
    }
    // O_NOFOLLOW unless it is a trusted symlink: a swap after the fstatat fails here.
    int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (link ? 0 : O_NOFOLLOW));
    if (next < 0) {
      Errno(why, "cannot open", path, shown, errno);
      ok = false;
      break;
    }
    close(fd);
    fd = next;
  }
  if (ok) {
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
      say.Str("not a directory");
      ok = false;
    } else if (st.st_uid != me) {
      say.Str("not owned by this user");
      ok = false;
    } else if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
      say.Str("not writable");
      ok = false;
    }
  }
  if (!ok) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace forkguard
