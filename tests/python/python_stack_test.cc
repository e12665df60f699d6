// shim/python_stack in a real CPython (/usr/bin/python3, Debian's): the frames a
// C library sees when Python calls it with the GIL held, none without the GIL, and the
// frames at os.fork(). Line numbers come from markers in pystack_probe.py.
#include "shim/stack/python_stack.h"

#include <cstdio>
#include <cstring>
#include <string>

#include "gtest/gtest.h"
#include "tests/audit/log_lines.h"
#include "tests/support/run_program.h"
#include "tests/support/runfiles.h"

namespace forkguard::test_support {
namespace {

constexpr char kPython[] = "/usr/bin/python3";

std::string Between(const std::string& text, const std::string& begin, const std::string& end) {
  size_t b = text.find(begin);
  size_t e = text.find(end, b == std::string::npos ? 0 : b);
  if (b == std::string::npos || e == std::string::npos) return "<missing " + begin + ">";
  return text.substr(b + begin.size(), e - b - begin.size());
}

std::string Frame(const std::string& file, int line, const std::string& func) {
  return "  File \"" + file + "\", line " + std::to_string(line) + ", in " + func + "\n";
}

TEST(PythonStack, EmptyOutsidePython) {
  EXPECT_TRUE(CapturePythonStack(16).empty());
  PythonStack stack;
  EXPECT_EQ(CapturePythonStack(&stack, 16), 0);
  char buf[64] = "x";
  EXPECT_EQ(FormatPythonStack(stack, buf, sizeof buf), 0u);
  EXPECT_STREQ(buf, "");
}

TEST(PythonStack, FormatTruncatesSafely) {
  PythonStack stack;
  stack.depth = 2;
  snprintf(stack.frames[0].file, PythonStack::kMaxFile, "%s", "inner.py");
  snprintf(stack.frames[0].func, PythonStack::kMaxFunc, "%s", "f");
  stack.frames[0].line = 7;
  snprintf(stack.frames[1].file, PythonStack::kMaxFile, "%s", "outer.py");
  snprintf(stack.frames[1].func, PythonStack::kMaxFunc, "%s", "<module>");
  stack.frames[1].line = 3;
  char full[256];
  size_t n = FormatPythonStack(stack, full, sizeof full);
  EXPECT_STREQ(full,
               "Python stack (most recent call last):\n"
               "  File \"outer.py\", line 3, in <module>\n"
               "  File \"inner.py\", line 7, in f\n");
  EXPECT_EQ(n, strlen(full));
  char small[50];
  n = FormatPythonStack(stack, small, sizeof small);
  EXPECT_EQ(n, strlen(small));
  EXPECT_EQ(n, sizeof small - 1);
  EXPECT_EQ(std::string(full).substr(0, n), small);
}

TEST(PythonStack, FramesFromCPython) {
  const std::string script = Runfile("tests/python/pystack_probe.py");
  const std::string probe = Runfile("tests/python/libpystack_probe.so");
  ProgramResult r =
      RunProgram({kPython, script, probe}, {"LD_PRELOAD=" + probe, "PYSTACK_PROBE_FORK=1"});
  ASSERT_EQ(r.status, 0) << r.out << r.err;

  // GIL held: the whole stack, outermost first, like a traceback.
  std::string with_gil = Between(r.out, "WITH-GIL-BEGIN\n", "WITH-GIL-END");
  std::string expected = "Python stack (most recent call last):\n" +
                         Frame(script, LineOf(script, "MARK:module"), "<module>") +
                         Frame(script, LineOf(script, "MARK:main-with-gil"), "main") +
                         Frame(script, LineOf(script, "MARK:with-gil"), "with_gil") +
                         Frame(script, LineOf(script, "MARK:probe-call"), "show");
  EXPECT_EQ(with_gil, expected + "\n");

  // GIL released (ctypes.CDLL): touching the frames would race; nothing is captured.
  EXPECT_EQ(Between(r.out, "WITHOUT-GIL-BEGIN\n", "WITHOUT-GIL-END"), "\n") << r.out;

  // os.fork() holds the GIL: the innermost frame is the os.fork() line.
  std::string at_fork =
      r.err.substr(r.err.find("probe-fork:\n") == std::string::npos ? r.err.size()
                                                                    : r.err.find("probe-fork:\n"));
  EXPECT_NE(at_fork.find(Frame(script, LineOf(script, "MARK:main-fork"), "main") +
                         Frame(script, LineOf(script, "MARK:fork"), "fork_child")),
            std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace forkguard::test_support
