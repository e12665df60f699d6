/* The shim's own copies of the small libc functions it calls.

   A preloaded library pays, in every process it is loaded into, one symbol lookup at load
   for every libc function it imports (-z now; for libc's string functions also the call of
   an IFUNC resolver), whether or not the process ever calls it. A site-wide preload (a SPANK
   plugin, a TaskProlog) loads the shim into every sh, cat and srun of a job, and most of
   those never touch RDMA. The functions here are defined in the shim itself, and
   libforkguard.map keeps them local: the shim's calls (and those of the C++ runtime linked
   into it) bind to them when the shim is linked, and the process's own calls still go to
   libc. What stays imported is what is not small or not a plain system call (snprintf,
   sigaction, the dl* functions, clock_gettime in the vDSO, malloc).

   Each is the C standard's or POSIX's function, as glibc documents it (errno set by
   libc's syscall() on failure). They are also async-signal-safe and take no lock, which
   the shim's fork path needs anyway. //shim:libc_local_test compares each with glibc's.

   This file is C so that no C++ header's declaration of these names gets in the way; it
   is compiled without builtins, so that a loop here does not become a call to itself. */

#undef _FORTIFY_SOURCE
#define _GNU_SOURCE 1

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <unistd.h>

#define LOCAL __attribute__((visibility("hidden")))

/* The test (//shim:libc_local_test) compiles this file again with each name prefixed, to
   call these beside glibc's. */
#if defined(FORKGUARD_LIBC_LOCAL_TEST)
#define F(name) fg_local_##name
#else
#define F(name) name
#endif

/* Sanitizer runtimes intercept these very functions (TSan follows file descriptors through
   read and write): a sanitizer build of the shim keeps calling libc's. */
#if !defined(FORKGUARD_ASAN) && !defined(FORKGUARD_TSAN) && !defined(FORKGUARD_UBSAN) || \
    defined(FORKGUARD_LIBC_LOCAL_TEST)

/* ---- memory and strings ---- */

LOCAL void* F(memcpy)(void* restrict dst, const void* restrict src, size_t n) {
  unsigned char* d = dst;
  const unsigned char* s = src;
  while (n--) *d++ = *s++;
  return dst;
}

LOCAL void* F(memset)(void* dst, int c, size_t n) {
  unsigned char* d = dst;
  while (n--) *d++ = (unsigned char)c;
  return dst;
}

LOCAL int F(memcmp)(const void* a, const void* b, size_t n) {
  const unsigned char* x = a;
  const unsigned char* y = b;
  for (; n; --n, ++x, ++y) {
    if (*x != *y) return *x - *y;
  }
  return 0;
}

LOCAL void* F(memchr)(const void* s, int c, size_t n) {
  const unsigned char* p = s;
  for (; n; --n, ++p) {
    if (*p == (unsigned char)c) return (void*)p;
  }
  return NULL;
}

LOCAL size_t F(strlen)(const char* s) {
  const char* p = s;
  while (*p) ++p;
  return (size_t)(p - s);
}

LOCAL size_t F(strnlen)(const char* s, size_t max) {
  size_t n = 0;
  while (n < max && s[n]) ++n;
  return n;
}

LOCAL int F(strcmp)(const char* a, const char* b) {
  for (; *a && *a == *b; ++a, ++b) {
  }
  return (unsigned char)*a - (unsigned char)*b;
}

LOCAL int F(strncmp)(const char* a, const char* b, size_t n) {
  for (; n; --n, ++a, ++b) {
    if (*a != *b || !*a) return (unsigned char)*a - (unsigned char)*b;
  }
  return 0;
}

/* The "C" locale's case folding: what glibc's strcasecmp does for ASCII in every locale the
   shim meets (its arguments are option values and file names). */
static int Lower(int c) { return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c; }

LOCAL int F(strcasecmp)(const char* a, const char* b) {
  for (; *a && Lower((unsigned char)*a) == Lower((unsigned char)*b); ++a, ++b) {
  }
  return Lower((unsigned char)*a) - Lower((unsigned char)*b);
}

LOCAL char* F(strcpy)(char* restrict dst, const char* restrict src) {
  char* d = dst;
  while ((*d++ = *src++)) {
  }
  return dst;
}

LOCAL char* F(strncpy)(char* restrict dst, const char* restrict src, size_t n) {
  size_t i = 0;
  for (; i < n && src[i]; ++i) dst[i] = src[i];
  for (; i < n; ++i) dst[i] = '\0';
  return dst;
}

LOCAL char* F(strcat)(char* restrict dst, const char* restrict src) {
  F(strcpy)(dst + F(strlen)(dst), src);
  return dst;
}

LOCAL char* F(strncat)(char* restrict dst, const char* restrict src, size_t n) {
  char* d = dst + F(strlen)(dst);
  for (; n && *src; --n) *d++ = *src++;
  *d = '\0';
  return dst;
}

LOCAL char* F(strchrnul)(const char* s, int c) {
  for (; *s && *s != (char)c; ++s) {
  }
  return (char*)s;
}

LOCAL char* F(strchr)(const char* s, int c) {
  char* p = F(strchrnul)(s, c);
  return *p == (char)c ? p : NULL;
}

LOCAL char* F(strrchr)(const char* s, int c) {
  const char* last = NULL;
  for (;; ++s) {
    if (*s == (char)c) last = s;
    if (!*s) return (char*)last;
  }
}

LOCAL char* F(strstr)(const char* hay, const char* needle) {
  size_t n = F(strlen)(needle);
  if (n == 0) return (char*)hay;
  for (; *hay; ++hay) {
    if (*hay == *needle && F(strncmp)(hay, needle, n) == 0) return (char*)hay;
  }
  return NULL;
}

/* What _FORTIFY_SOURCE makes of strcpy/strcat/strncat where the destination's size is known
   (an optimized build): the same, and abort on overflow as glibc's __chk_fail does. */
LOCAL char* F(__strcpy_chk)(char* restrict dst, const char* restrict src, size_t dstlen) {
  if (F(strlen)(src) >= dstlen) abort();
  return F(strcpy)(dst, src);
}

LOCAL char* F(__strcat_chk)(char* restrict dst, const char* restrict src, size_t dstlen) {
  if (F(strlen)(dst) + F(strlen)(src) >= dstlen) abort();
  return F(strcat)(dst, src);
}

LOCAL char* F(__strncat_chk)(char* restrict dst, const char* restrict src, size_t n,
                             size_t dstlen) {
  if (F(strlen)(dst) + F(strnlen)(src, n) >= dstlen) abort();
  return F(strncat)(dst, src, n);
}

/* ---- numbers ---- */

static int IsSpace(int c) { return c == ' ' || (c >= '\t' && c <= '\r'); }

static int DigitValue(int c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'z') return c - 'a' + 10;
  if (c >= 'A' && c <= 'Z') return c - 'A' + 10;
  return 99;
}

LOCAL long F(strtol)(const char* restrict s, char** restrict end, int base) {
  const char* p = s;
  if (base < 0 || base == 1 || base > 36) {
    if (end) *end = (char*)s;
    errno = EINVAL;
    return 0;
  }
  while (IsSpace((unsigned char)*p)) ++p;
  int negative = 0;
  if (*p == '+' || *p == '-') negative = *p++ == '-';
  if ((base == 0 || base == 16) && p[0] == '0' && (p[1] == 'x' || p[1] == 'X') &&
      DigitValue((unsigned char)p[2]) < 16) {
    p += 2;
    base = 16;
  } else if (base == 0) {
    base = p[0] == '0' ? 8 : 10;
  }
  /* Accumulate the magnitude as unsigned; the limit is LONG_MAX, or its negation's. */
  const unsigned long limit = negative ? (unsigned long)LONG_MAX + 1 : (unsigned long)LONG_MAX;
  unsigned long v = 0;
  int any = 0, overflow = 0;
  for (int d; (d = DigitValue((unsigned char)*p)) < base; ++p) {
    any = 1;
    if (overflow) continue;
    if (v > (limit - (unsigned long)d) / (unsigned long)base) {
      overflow = 1;
    } else {
      v = v * (unsigned long)base + (unsigned long)d;
    }
  }
  if (end) *end = (char*)(any ? p : s);
  if (overflow) {
    errno = ERANGE;
    return negative ? LONG_MIN : LONG_MAX;
  }
  return negative ? (long)(0 - v) : (long)v;
}

LOCAL long F(atol)(const char* s) { return F(strtol)(s, NULL, 10); }

LOCAL int F(atoi)(const char* s) { return (int)F(strtol)(s, NULL, 10); }

/* ---- the environment ---- */

LOCAL char* F(getenv)(const char* name) {
  if (environ == NULL) return NULL;
  size_t n = F(strlen)(name);
  for (char** e = environ; *e != NULL; ++e) {
    if (strncmp(*e, name, n) == 0 && (*e)[n] == '=') return *e + n + 1;
  }
  return NULL;
}

/* ---- signal sets ---- */

LOCAL int F(sigemptyset)(sigset_t* set) {
  F(memset)(set, 0, sizeof(*set));
  return 0;
}

/* glibc refuses its own two internal signals (SIGCANCEL and SIGSETXID, 32 and 33). */
LOCAL int F(sigaddset)(sigset_t* set, int sig) {
  if (sig <= 0 || sig >= NSIG || sig == 32 || sig == 33) {
    errno = EINVAL;
    return -1;
  }
  unsigned long* words = (unsigned long*)set;
  const unsigned bits = 8 * sizeof(unsigned long);
  words[(unsigned)(sig - 1) / bits] |= 1UL << ((unsigned)(sig - 1) % bits);
  return 0;
}

/* ---- plain system calls (x86-64: glibc's structs there are the kernel's) ---- */

#if defined(__x86_64__)

LOCAL ssize_t F(read)(int fd, void* buf, size_t n) { return syscall(SYS_read, fd, buf, n); }
LOCAL ssize_t F(write)(int fd, const void* buf, size_t n) { return syscall(SYS_write, fd, buf, n); }
LOCAL ssize_t F(writev)(int fd, const struct iovec* iov, int n) {
  return syscall(SYS_writev, fd, iov, n);
}
LOCAL ssize_t F(pread)(int fd, void* buf, size_t n, off_t off) {
  return syscall(SYS_pread64, fd, buf, n, off);
}
LOCAL int F(close)(int fd) { return (int)syscall(SYS_close, fd); }
LOCAL int F(unlink)(const char* path) { return (int)syscall(SYS_unlinkat, AT_FDCWD, path, 0); }
LOCAL int F(mkdir)(const char* path, mode_t mode) {
  return (int)syscall(SYS_mkdirat, AT_FDCWD, path, mode);
}
LOCAL int F(mkdirat)(int dir, const char* path, mode_t mode) {
  return (int)syscall(SYS_mkdirat, dir, path, mode);
}
LOCAL ssize_t F(readlink)(const char* restrict path, char* restrict buf, size_t n) {
  return syscall(SYS_readlinkat, AT_FDCWD, path, buf, n);
}
LOCAL ssize_t F(readlinkat)(int dir, const char* restrict path, char* restrict buf, size_t n) {
  return syscall(SYS_readlinkat, dir, path, buf, n);
}
LOCAL int F(access)(const char* path, int mode) {
  return (int)syscall(SYS_faccessat, AT_FDCWD, path, mode);
}
LOCAL int F(rename)(const char* from, const char* to) {
  return (int)syscall(SYS_renameat, AT_FDCWD, from, AT_FDCWD, to);
}
LOCAL pid_t F(getpid)(void) { return (pid_t)syscall(SYS_getpid); }
LOCAL pid_t F(getppid)(void) { return (pid_t)syscall(SYS_getppid); }
LOCAL uid_t F(getuid)(void) { return (uid_t)syscall(SYS_getuid); }
LOCAL uid_t F(geteuid)(void) { return (uid_t)syscall(SYS_geteuid); }
LOCAL gid_t F(getgid)(void) { return (gid_t)syscall(SYS_getgid); }
LOCAL int F(sched_yield)(void) { return (int)syscall(SYS_sched_yield); }
LOCAL void* F(mmap)(void* addr, size_t n, int prot, int flags, int fd, off_t off) {
  return (void*)syscall(SYS_mmap, addr, n, prot, flags, fd, off);
}
LOCAL int F(munmap)(void* addr, size_t n) { return (int)syscall(SYS_munmap, addr, n); }
LOCAL int F(pipe2)(int fds[2], int flags) { return (int)syscall(SYS_pipe2, fds, flags); }
LOCAL int F(fstatat)(int dir, const char* restrict path, struct stat* restrict st, int flags) {
  return (int)syscall(SYS_newfstatat, dir, path, st, flags);
}
LOCAL int F(fstat)(int fd, struct stat* st) {
  return (int)syscall(SYS_newfstatat, fd, "", st, AT_EMPTY_PATH);
}
LOCAL int F(uname)(struct utsname* u) { return (int)syscall(SYS_uname, u); }
LOCAL int F(gethostname)(char* name, size_t n) {
  struct utsname u;
  if (F(uname)(&u) != 0) return -1;
  size_t len = F(strlen)(u.nodename);
  if (len >= n) {
    errno = ENAMETOOLONG;
    return -1;
  }
  F(memcpy)(name, u.nodename, len + 1);
  return 0;
}
LOCAL int F(socket)(int domain, int type, int protocol) {
  return (int)syscall(SYS_socket, domain, type, protocol);
}
LOCAL ssize_t F(sendto)(int fd, const void* buf, size_t n, int flags, const struct sockaddr* to,
                        socklen_t tolen) {
  return syscall(SYS_sendto, fd, buf, n, flags, to, tolen);
}
LOCAL ssize_t F(recv)(int fd, void* buf, size_t n, int flags) {
  return syscall(SYS_recvfrom, fd, buf, n, flags, NULL, NULL);
}
LOCAL int F(setsockopt)(int fd, int level, int name, const void* value, socklen_t len) {
  return (int)syscall(SYS_setsockopt, fd, level, name, value, len);
}

#endif

#endif /* not a sanitizer build */
