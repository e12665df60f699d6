#include "shim/log/log_dir.h"

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

namespace {

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
};

// One component of the log path, under *fd (replaced by the component's descriptor).
struct Step {
  const char* name;  // the component
  const char* path;  // the whole path, for messages
  size_t shown;      // path up to this component
  bool last;         // the path's last component
  uid_t me;
};

// A component expanded by the template (or below such a component): anyone may have made
// it first. By descriptor only: open it without following a symlink; create it when missing
// (another rank may do so at the same moment), then open what is there; ours, and writable
// by us alone.
bool OpenExpanded(int* fd, const Step& c, TextBuffer* why) {
  Why say{why};
  constexpr int kFlags = O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC;
  int next = openat(*fd, c.name, kFlags);
  if (next < 0 && errno == ENOENT) {
    if (mkdirat(*fd, c.name, 0700) != 0 && errno != EEXIST) {
      Errno(why, "cannot create", c.path, c.shown, errno);
      return false;
    }
    next = openat(*fd, c.name, kFlags);
  }
  if (next < 0) {
    int err = errno;
    struct stat lst;
    if (fstatat(*fd, c.name, &lst, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(lst.st_mode)) {
      say.Mem(c.path, c.shown).Str(" is a symlink");
    } else if (err == ENOTDIR) {
      say.Mem(c.path, c.shown).Str(" is not a directory");
    } else {
      Errno(why, "cannot open", c.path, c.shown, err);
    }
    return false;
  }
  close(*fd);
  *fd = next;
  struct stat st;
  if (fstat(*fd, &st) != 0) {
    Errno(why, "cannot stat", c.path, c.shown, errno);
    return false;
  }
  if (st.st_uid != c.me) {
    // Made by someone else before this job: they could read, swap or fill our logs.
    say.Mem(c.path, c.shown).Str(" is owned by uid ").UDec(st.st_uid).Str(", not by this user");
    return false;
  }
  if ((st.st_mode & (S_IWGRP | S_IWOTH)) != 0) {
    say.Mem(c.path, c.shown).Str(" is writable by group or others");
    return false;
  }
  return true;
}

// A component of the path's fixed part (the user's own): created when missing; a symlink
// is followed only when it is ours or root's and not the last component.
bool OpenFixed(int* fd, const Step& c, TextBuffer* why) {
  Why say{why};
  struct stat st;
  if (fstatat(*fd, c.name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
    if (errno != ENOENT) {
      Errno(why, "cannot stat", c.path, c.shown, errno);
      return false;
    }
    // Missing: create it (another rank may do so at the same moment).
    if (mkdirat(*fd, c.name, 0700) != 0 && errno != EEXIST) {
      Errno(why, "cannot create", c.path, c.shown, errno);
      return false;
    }
    if (fstatat(*fd, c.name, &st, AT_SYMLINK_NOFOLLOW) != 0) {
      Errno(why, "cannot stat", c.path, c.shown, errno);
      return false;
    }
  }
  bool link = S_ISLNK(st.st_mode);
  if (link && c.last) {
    say.Str("it is a symlink");
    return false;
  }
  if (link && st.st_uid != c.me && st.st_uid != 0) {
    // Someone else's symlink could point our logs (and our mkdirs) anywhere.
    say.Mem(c.path, c.shown).Str(" is a symlink owned by uid ").UDec(st.st_uid);
    return false;
  }
  if (!link && !S_ISDIR(st.st_mode)) {
    if (c.last) {
      say.Str("not a directory");
    } else {
      say.Mem(c.path, c.shown).Str(" is not a directory");
    }
    return false;
  }
  // O_NOFOLLOW unless it is a trusted symlink: a swap after the fstatat fails here.
  int next = openat(*fd, c.name, O_RDONLY | O_DIRECTORY | O_CLOEXEC | (link ? 0 : O_NOFOLLOW));
  if (next < 0) {
    Errno(why, "cannot open", c.path, c.shown, errno);
    return false;
  }
  close(*fd);
  *fd = next;
  return true;
}

// The directory reached: a directory, ours, and writable by us.
bool UsableLogDir(int fd, uid_t me, TextBuffer* why) {
  Why say{why};
  struct stat st;
  if (fstat(fd, &st) != 0 || !S_ISDIR(st.st_mode)) {
    say.Str("not a directory");
    return false;
  }
  if (st.st_uid != me) {
    say.Str("not owned by this user");
    return false;
  }
  if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
    say.Str("not writable");
    return false;
  }
  return true;
}

}  // namespace

int OpenLogDir(const char* path, size_t fixed_len, TextBuffer* why) {
  Why say{why};
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
    // Expanded by the template (or below such a component): anyone may have made it first.
    bool expanded = static_cast<size_t>(p - path) > fixed_len;
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
    // shown: "/a/b" up to this component.
    Step c{name, path, static_cast<size_t>(end - path), *rest == '\0', me};
    ok = expanded ? OpenExpanded(&fd, c, why) : OpenFixed(&fd, c, why);
  }
  if (ok) ok = UsableLogDir(fd, me, why);
  if (!ok) {
    close(fd);
    return -1;
  }
  return fd;
}

}  // namespace forkguard
