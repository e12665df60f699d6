// Python stack capture: when the process is a CPython interpreter and the calling thread
// holds the GIL (os.fork() holds it; so does a Cython extension like pyverbs calling
// ibv_open_device), the Python frames of that thread, innermost first.
//
// No Python headers and no link dependency: the C API is looked up once with
// dlsym(RTLD_DEFAULT) and objects are opaque pointers, so the shim loads into any process.
// In a process without CPython, or on a thread without the GIL, capture returns nothing.
// Calls into the interpreter (may allocate): parent side only, never in a forked child or
// a signal handler.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace forkguard {

struct PyFrame {
  std::string file;  // code object's co_filename, as Python prints it in tracebacks
  int line = 0;
  std::string func;  // co_name
};

// Calls visit(ctx, file, line, func) for up to `max` frames, innermost first (names are
// truncated like PythonStack's).
void VisitPythonFrames(int max, void (*visit)(void*, const char*, int, const char*), void* ctx);

// Innermost frame first; at most `max` frames. Empty when not applicable. Inline so that
// the shim, which uses only the fixed-storage form below, links no std::vector/std::string
// code: that pulls libstdc++'s exception support, whose static initializer mallocs a 70 KiB
// emergency pool in every preloaded process.
inline std::vector<PyFrame> CapturePythonStack(size_t max) {
  std::vector<PyFrame> frames;
  VisitPythonFrames(
      max > 4096 ? 4096 : static_cast<int>(max),
      [](void* ctx, const char* file, int line, const char* func) {
        static_cast<std::vector<PyFrame>*>(ctx)->push_back(PyFrame{file, line, func});
      },
      &frames);
  return frames;
}

// The same with fixed storage (no allocation by forkguard itself), for state kept
// across a fork. Over-long names are truncated.
struct PythonStack {
  static constexpr int kMaxFrames = 32;
  static constexpr size_t kMaxFile = 256;
  static constexpr size_t kMaxFunc = 96;
  struct Frame {
    char file[kMaxFile];
    char func[kMaxFunc];
    int line;
  };
  int depth = 0;  // 0: no Python stack
  Frame frames[kMaxFrames];
};

// Returns out->depth. max_frames is clamped to PythonStack::kMaxFrames.
int CapturePythonStack(PythonStack* out, int max_frames);

// Formats like a Python traceback into buf (always NUL-terminated when cap > 0):
//   Python stack (most recent call last):
//     File "train.py", line 42, in main
// Writes nothing (returns 0) for an empty stack. Returns the length written.
size_t FormatPythonStack(const PythonStack& stack, char* buf, size_t cap);

// Capture + format in one call.
size_t FormatCurrentPythonStack(char* buf, size_t cap, int max_frames);

}  // namespace forkguard
