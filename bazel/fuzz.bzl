"""forkguard_fuzzer: a libFuzzer binary, built with clang (ASan + UBSan + libFuzzer).

libFuzzer needs clang and the project's C++ toolchain is gcc, so this rule compiles and links
its sources with clang++, with the project's flags (copts.bzl) and the fuzzing
ones below. `srcs` are the sources compiled into the fuzzer (the target's own and those of
the code under test), `hdrs` what they include (generated headers too: the output tree is on
the include path), `deps` libraries of this workspace whose sources (srcs and hdrs, theirs
and their dependencies') are compiled in too, so that a library's file list is written once,
`linkopts` the system libraries they need, `objects` a forkguard_fuzz_objects target whose
objects (its libraries' sources, compiled once for all the package's fuzzers, one action per
file) are linked in instead of compiling those sources again. The result is executable:
forkguard_fuzz_test runs it for a while over its corpus (tests/support/run_fuzzer.sh, tag
"fuzz"), forkguard_corpus_test runs it once on each file of its corpus (run_corpus.sh: the
regression test of what fuzzing found), scripts/fuzz runs every fuzzer longer.
forkguard_fuzz_targets makes the three of one fuzzer at once."""

load(":copts.bzl", "FORKGUARD_COPTS")

_FUZZ_FLAGS = [
    "-O1",
    "-fsanitize=fuzzer,address,undefined",
    "-fno-sanitize-recover=undefined",
]

# The source files of a cc_library and of everything it depends on in this workspace
# (external repositories and //third_party's system libraries have none to compile here).
_LibrarySourcesInfo = provider(fields = ["files"])

def _library_sources_impl(target, ctx):
    own = []
    if not ctx.label.workspace_name:
        for attr in ["srcs", "hdrs"]:
            own += getattr(ctx.rule.files, attr, [])
    deps = [d[_LibrarySourcesInfo].files for d in getattr(ctx.rule.attr, "deps", []) if _LibrarySourcesInfo in d]
    return [_LibrarySourcesInfo(files = depset(own, transitive = deps))]

_library_sources = aspect(
    implementation = _library_sources_impl,
    attr_aspects = ["deps"],
)

def _clang_args(ctx):
    args = ctx.actions.args()
    args.add_all(FORKGUARD_COPTS + _FUZZ_FLAGS)
    args.add("-I.")
    args.add("-I" + ctx.bin_dir.path)
    return args

def _is_source(f):
    return f.extension in ["c", "cc"]

def _clang(ctx, inputs, output, args, mnemonic, message):
    """One clang++ action with `args` (from _clang_args) writing `output`."""
    args.add("-o", output)
    ctx.actions.run_shell(
        inputs = inputs,
        outputs = [output],
        command = "exec clang++ \"$@\"",
        arguments = [args],
        mnemonic = mnemonic,
        progress_message = message,
        use_default_shell_env = True,
    )

# The objects of libraries' sources compiled once with clang and the fuzzing flags, shared
# by the fuzzers that link them (each source its own action: the two cores compile two at
# a time, and a change recompiles one file).
_FuzzObjectsInfo = provider(fields = ["objects", "sources"])

def _forkguard_fuzz_objects_impl(ctx):
    libraries = depset(transitive = [d[_LibrarySourcesInfo].files for d in ctx.attr.deps]).to_list()
    sources = [f for f in libraries if _is_source(f)]
    objects = []
    for src in sources:
        obj = ctx.actions.declare_file("_fuzz_objs/%s/%s.o" % (ctx.label.name, src.short_path))
        args = _clang_args(ctx)
        args.add("-c", src)
        _clang(ctx, libraries, obj, args, "ClangFuzzerCompile", "Compiling %s with clang for the fuzzers" % src.short_path)
        objects.append(obj)
    return [
        DefaultInfo(files = depset(objects)),
        _FuzzObjectsInfo(objects = objects, sources = [f.path for f in sources]),
    ]

forkguard_fuzz_objects = rule(
    implementation = _forkguard_fuzz_objects_impl,
    doc = "The sources of `deps` (and of their dependencies in this workspace) compiled with " +
          "clang and the fuzzing flags, for forkguard_fuzzer's `objects`.",
    attrs = {
        "deps": attr.label_list(aspects = [_library_sources]),
    },
)

def _forkguard_fuzzer_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name)
    libraries = depset(transitive = [d[_LibrarySourcesInfo].files for d in ctx.attr.deps]).to_list()
    prebuilt = ctx.attr.objects[_FuzzObjectsInfo] if ctx.attr.objects else None
    covered = {p: True for p in prebuilt.sources} if prebuilt else {}
    objects = prebuilt.objects if prebuilt else []
    inputs = ctx.files.srcs + ctx.files.hdrs + libraries + objects
    sources = [f for f in ctx.files.srcs + libraries if _is_source(f) and f.path not in covered]
    args = _clang_args(ctx)
    args.add_all(sources)
    args.add_all(objects)
    args.add_all(ctx.attr.linkopts)
    _clang(ctx, inputs, out, args, "ClangFuzzer", "Building libFuzzer binary %s with clang" % ctx.label)
    return [DefaultInfo(executable = out, files = depset([out]))]

forkguard_fuzzer = rule(
    implementation = _forkguard_fuzzer_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".c", ".cc"], mandatory = True),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(aspects = [_library_sources]),
        "objects": attr.label(providers = [_FuzzObjectsInfo]),
        "linkopts": attr.string_list(),
    },
    executable = True,
)

def forkguard_fuzz_test(name, fuzzer, seed, seconds, corpus, dict = None, flags = []):
    """Runs `fuzzer` for `seconds` over `corpus` (files, `seed` one of them): medium, tag "fuzz".

    `dict`: a libFuzzer dictionary file (-dict=); `flags`: more libFuzzer flags."""
    native.sh_test(
        name = name,
        size = "medium",
        srcs = ["//tests/support:run_fuzzer.sh"],
        args = [
            "$(location %s)" % fuzzer,
            "$(location %s)" % seed,
            str(seconds),
        ] + (["-dict=$(location %s)" % dict] if dict else []) + flags,
        data = [fuzzer] + corpus + ([dict] if dict else []),
        tags = ["fuzz"],
    )

def forkguard_corpus_test(name, fuzzer, corpus):
    """Runs `fuzzer` once on each file of `corpus` (no fuzzing): a cheap regression test."""
    native.sh_test(
        name = name,
        size = "small",
        srcs = ["//tests/support:run_corpus.sh"],
        args = ["$(location %s)" % fuzzer] + ["$(location %s)" % f for f in corpus],
        data = [fuzzer] + corpus,
    )

# Program inputs (fuzz_log_program.h) are long from the start: libFuzzer grows them slowly
# otherwise.
_PROGRAM_FLAGS = [
    "-len_control=0",
    "-max_len=4096",
]

def forkguard_fuzz_targets(name, seconds, deps = [], objects = None, linkopts = [], corpus = None, seed = None, dict = None, programs = False):
    """NAME_fuzzer (from NAME_fuzzer.cc and `deps`), NAME_fuzz_test (it fuzzes for `seconds`)
    and NAME_corpus_test (each file of `corpus` once).

    `corpus` defaults to testdata/fuzz/NAME/*, `seed` to testdata/fuzz/NAME/seed-empty.
    `objects`: a forkguard_fuzz_objects target with `deps`' sources compiled once for every
    fuzzer of the package. `programs`: the input is a program of log lines
    (":fuzz_log_program", testonly), long from the start."""
    if corpus == None:
        corpus = native.glob(["testdata/fuzz/%s/*" % name])
    if seed == None:
        seed = "testdata/fuzz/%s/seed-empty" % name
    fuzzer = name + "_fuzzer"
    forkguard_fuzzer(
        name = fuzzer,
        testonly = programs,
        srcs = [fuzzer + ".cc"],
        deps = deps + ([":fuzz_log_program"] if programs else []),
        objects = objects,
        linkopts = linkopts,
    )
    forkguard_fuzz_test(
        name = name + "_fuzz_test",
        corpus = corpus,
        dict = dict,
        flags = _PROGRAM_FLAGS if programs else [],
        fuzzer = ":" + fuzzer,
        seconds = seconds,
        seed = seed,
    )
    forkguard_corpus_test(
        name = name + "_corpus_test",
        corpus = corpus,
        fuzzer = ":" + fuzzer,
    )
