// CPython C API reached through dlsym(RTLD_DEFAULT): see python_stack.h for why.
#include "shim/stack/python_stack.h"

#include <dlfcn.h>

#include <cstdio>
#include <cstring>

namespace forkguard {
namespace {

// Opaque CPython objects: only ever passed back to the interpreter.
using PyObjectPtr = void*;

struct CPythonApi {
  int (*is_initialized)() = nullptr;                            // Py_IsInitialized
  int (*gil_check)() = nullptr;                                 // PyGILState_Check
  PyObjectPtr (*thread_state)() = nullptr;                      // _PyThreadState_UncheckedGet
  PyObjectPtr (*get_frame)() = nullptr;                         // PyEval_GetFrame (borrowed)
  PyObjectPtr (*frame_back)(PyObjectPtr) = nullptr;             // PyFrame_GetBack (new)
  PyObjectPtr (*frame_code)(PyObjectPtr) = nullptr;             // PyFrame_GetCode (new)
  int (*frame_line)(PyObjectPtr) = nullptr;                     // PyFrame_GetLineNumber
  PyObjectPtr (*get_attr)(PyObjectPtr, const char*) = nullptr;  // PyObject_GetAttrString
  const char* (*as_utf8)(PyObjectPtr) = nullptr;                // PyUnicode_AsUTF8
  void (*inc_ref)(PyObjectPtr) = nullptr;                       // Py_IncRef
  void (*dec_ref)(PyObjectPtr) = nullptr;                       // Py_DecRef
  void (*err_fetch)(PyObjectPtr*, PyObjectPtr*, PyObjectPtr*) = nullptr;  // PyErr_Fetch
  void (*err_restore)(PyObjectPtr, PyObjectPtr, PyObjectPtr) = nullptr;   // PyErr_Restore
  bool complete = false;
};

template <typename T>
void Lookup(T* fn, const char* name) {
  *fn = reinterpret_cast<T>(dlsym(RTLD_DEFAULT, name));
}

// Resolved once (thread-safe static initialization). The interpreter is either linked
// into the executable or loaded before any Python code runs, so a later lookup would not
// find more; an embedding program that loads libpython RTLD_LOCAL is not seen.
const CPythonApi& Api() {
  static const CPythonApi api = [] {
    CPythonApi a;
    Lookup(&a.is_initialized, "Py_IsInitialized");
    if (a.is_initialized == nullptr) return a;  // not a Python process: stop early
    Lookup(&a.gil_check, "PyGILState_Check");
    Lookup(&a.thread_state, "_PyThreadState_UncheckedGet");  // 3.9 - 3.12
    if (a.thread_state == nullptr) Lookup(&a.thread_state, "PyThreadState_GetUnchecked");  // 3.13
    Lookup(&a.get_frame, "PyEval_GetFrame");
    Lookup(&a.frame_back, "PyFrame_GetBack");
    Lookup(&a.frame_code, "PyFrame_GetCode");
    Lookup(&a.frame_line, "PyFrame_GetLineNumber");
    Lookup(&a.get_attr, "PyObject_GetAttrString");
    Lookup(&a.as_utf8, "PyUnicode_AsUTF8");
    Lookup(&a.inc_ref, "Py_IncRef");
    Lookup(&a.dec_ref, "Py_DecRef");
    Lookup(&a.err_fetch, "PyErr_Fetch");
    Lookup(&a.err_restore, "PyErr_Restore");
    // PyFrame_GetBack/GetCode exist since 3.9; older interpreters are not supported.
    // The unchecked thread-state getter is optional (its name changed in 3.13).
    a.complete = a.gil_check && a.get_frame && a.frame_back && a.frame_code && a.frame_line &&
                 a.get_attr && a.as_utf8 && a.inc_ref && a.dec_ref && a.err_fetch && a.err_restore;
    return a;
  }();
  return api;
}

// Copies the UTF-8 text of attribute `name` of `obj` into dst ("?" when unavailable).
void CopyStrAttr(const CPythonApi& api, PyObjectPtr obj, const char* name, char* dst, size_t cap) {
  const char* text = nullptr;
  PyObjectPtr attr = api.get_attr(obj, name);
  if (attr != nullptr) text = api.as_utf8(attr);
  if (text == nullptr) text = "?";
  snprintf(dst, cap, "%s", text);
  if (attr != nullptr) api.dec_ref(attr);
}

// Calls on_frame(file, line, func) for up to max frames, innermost first.
template <typename OnFrame>
void WalkPythonFrames(int max, OnFrame on_frame) {
  const CPythonApi& api = Api();
  if (!api.complete || max <= 0 || api.is_initialized() == 0) return;
  // Without the GIL the interpreter may be running another thread's frames right now:
  // touching them is a data race. PyGILState_Check answers for the calling thread.
  if (api.gil_check() == 0) return;
  // PyGILState_Check returns 1 when its check is disabled (sub-interpreters); a null
  // thread state then still means "no GIL here", and PyEval_GetFrame would crash.
  if (api.thread_state != nullptr && api.thread_state() == nullptr) return;
  PyObjectPtr frame = api.get_frame();
  if (frame == nullptr) return;
  // Our attribute lookups may raise (e.g. a non-UTF-8 filename); leave the caller's
  // exception state exactly as it was.
  PyObjectPtr type = nullptr, value = nullptr, traceback = nullptr;
  api.err_fetch(&type, &value, &traceback);
  api.inc_ref(frame);  // borrowed from PyEval_GetFrame; owned in the loop below
  char file[PythonStack::kMaxFile];
  char func[PythonStack::kMaxFunc];
  for (int n = 0; frame != nullptr && n < max; ++n) {
    int line = api.frame_line(frame);
    PyObjectPtr code = api.frame_code(frame);
    if (code != nullptr) {
      CopyStrAttr(api, code, "co_filename", file, sizeof file);
      CopyStrAttr(api, code, "co_name", func, sizeof func);
      api.dec_ref(code);
    } else {
      snprintf(file, sizeof file, "?");
      snprintf(func, sizeof func, "?");
    }
    on_frame(file, line, func);
    PyObjectPtr back = api.frame_back(frame);
    api.dec_ref(frame);
    frame = back;
  }
  if (frame != nullptr) api.dec_ref(frame);
  api.err_restore(type, value, traceback);  // steals the references; clears our errors
}

}  // namespace

void VisitPythonFrames(int max, void (*visit)(void*, const char*, int, const char*), void* ctx) {
  WalkPythonFrames(
      max, [&](const char* file, int line, const char* func) { visit(ctx, file, line, func); });
}

int CapturePythonStack(PythonStack* out, int max_frames) {
  out->depth = 0;
  if (max_frames > PythonStack::kMaxFrames) max_frames = PythonStack::kMaxFrames;
  WalkPythonFrames(max_frames, [&](const char* file, int line, const char* func) {
    PythonStack::Frame& f = out->frames[out->depth++];
    snprintf(f.file, sizeof f.file, "%s", file);
    snprintf(f.func, sizeof f.func, "%s", func);
    f.line = line;
  });
  return out->depth;
}

size_t FormatPythonStack(const PythonStack& stack, char* buf, size_t cap) {
  if (cap == 0) return 0;
  buf[0] = '\0';
  if (stack.depth <= 0) return 0;
  size_t len = 0;
  auto append = [&](int n) {
    // snprintf returns the untruncated length; clamp to what fits.
    if (n > 0) len += static_cast<size_t>(n);
    if (len >= cap) len = cap - 1;
  };
  append(snprintf(buf, cap, "Python stack (most recent call last):\n"));
  for (int i = stack.depth - 1; i >= 0; --i) {
    const PythonStack::Frame& f = stack.frames[i];
    append(
        snprintf(buf + len, cap - len, "  File \"%s\", line %d, in %s\n", f.file, f.line, f.func));
  }
  return len;
}

size_t FormatCurrentPythonStack(char* buf, size_t cap, int max_frames) {
  PythonStack stack;  // ~11 KiB of stack; Python threads have at least 256 KiB
  CapturePythonStack(&stack, max_frames);
  return FormatPythonStack(stack, buf, cap);
}

}  // namespace forkguard
