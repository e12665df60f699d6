#include "shim/base/stderr_line.h"

#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "formats/text_buffer.h"
#include "shim/base/start_path.h"
#include "shim/base/sys.h"

namespace forkguard {
namespace {

// Zero-filled (sys.h, ZeroFilled): "" reads as "?" until SetStderrIdentity.
FORKGUARD_START_DATA char g_host[64];
FORKGUARD_START_DATA ZeroFilled<long, -1> g_rank;
FORKGUARD_START_DATA void (*g_identity_source)();

// Writes what is left after a short writev (a signal, a full disk): best effort.
void FinishWrite(int fd, const struct iovec* iov, int iovcnt, size_t done) {
  for (int i = 0; i < iovcnt; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    size_t n = iov[i].iov_len;
    if (done >= n) {
      done -= n;
      continue;
    }
    p += done;
    n -= done;
    done = 0;
    if (!WriteAll(fd, p, n)) return;
  }
}

// Cuts at most `room` bytes of `line` without splitting a UTF-8 sequence.
size_t CutLength(const char* line, size_t len, size_t room) {
  if (len <= room) return len;
  size_t n = room;
  while (n > 0 && (static_cast<unsigned char>(line[n]) & 0xC0) == 0x80) --n;
  return n;
}

}  // namespace

void SetStderrIdentity(const char* short_host, long rank) {
  if (short_host == nullptr || short_host[0] == '\0') short_host = "?";
  CopyCString(g_host, sizeof(g_host), short_host);
  g_rank.set(rank);
}

FORKGUARD_START_PATH void SetStderrIdentitySource(void (*ensure)()) { g_identity_source = ensure; }

size_t FormatStderrPrefix(char* buf, size_t cap, pid_t pid) {
  if (void (*ensure)() = g_identity_source; ensure != nullptr) ensure();
  TextBuffer b(buf, cap);
  b.Char('[').Str(g_host[0] != '\0' ? g_host : "?");
  if (long rank = g_rank.get(); rank >= 0) b.Str(" r").Dec(rank);
  b.Char(' ').Dec(pid).Str("] ");
  return b.size();
}

void WriteLinesTo(int fd, const char* text, size_t n) {
  if (text == nullptr || n == 0) return;
  int saved_errno = errno;  // printing never changes what the program sees
  char prefix[96];
  size_t plen = FormatStderrPrefix(prefix, sizeof(prefix), getpid());
  const size_t room = kMaxStderrLine - plen - 1;  // the '\n'
  const size_t cut_room = room - (sizeof(kCutMarker) - 1);
  const char* end = text + n;
  for (const char* line = text; line < end;) {
    const char* nl = static_cast<const char*>(memchr(line, '\n', static_cast<size_t>(end - line)));
    size_t len = static_cast<size_t>((nl != nullptr ? nl : end) - line);
    struct iovec iov[4];
    int cnt = 0;
    iov[cnt++] = {prefix, plen};
    size_t take = len <= room ? len : CutLength(line, len, cut_room);
    iov[cnt++] = {const_cast<char*>(line), take};
    if (take < len) iov[cnt++] = {const_cast<char*>(kCutMarker), sizeof(kCutMarker) - 1};
    iov[cnt++] = {const_cast<char*>("\n"), 1};
    size_t total = 0;
    for (int i = 0; i < cnt; ++i) total += iov[i].iov_len;
    ssize_t w;
    do {
      w = writev(fd, iov, cnt);
    } while (w < 0 && errno == EINTR);
    if (w < 0) break;  // stderr closed or broken: nothing more to say
    if (static_cast<size_t>(w) < total) FinishWrite(fd, iov, cnt, static_cast<size_t>(w));
    line += len + 1;
  }
  errno = saved_errno;
}

void WriteStderrLines(const char* text, size_t n) { WriteLinesTo(STDERR_FILENO, text, n); }

void WriteStderrLines(const char* text) {
  if (text != nullptr) WriteStderrLines(text, strlen(text));
}

}  // namespace forkguard
