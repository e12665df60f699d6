"""forkguard_fuzzer: a libFuzzer binary, built with clang (ASan + UBSan + libFuzzer).

libFuzzer needs clang and the project's C++ toolchain is gcc, so this rule compiles and links
its sources with clang++ in one action, with the project's flags (copts.bzl) and the fuzzing
ones below. `srcs` are the sources compiled into the fuzzer (the target's own and those of
the code under test), `hdrs` what they include (generated headers too: the output tree is on
the include path), `deps` libraries of this workspace whose sources (srcs and hdrs, theirs
and their dependencies') are compiled in too, so that a library's file list is written once,
`linkopts` the system libraries they need. The result is executable:
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

def _forkguard_fuzzer_impl(ctx):
    out = ctx.actions.declare_file(ctx.label.name)
    libraries = depset(transitive = [d[_LibrarySourcesInfo].files for d in ctx.attr.deps]).to_list()
    inputs = ctx.files.srcs + ctx.files.hdrs + libraries
    sources = [f for f in ctx.files.srcs + libraries if f.extension in ["c", "cc"]]
    args = ctx.actions.args()
    args.add_all(FORKGUARD_COPTS + _FUZZ_FLAGS)
    args.add("-I.")
    args.add("-I" + ctx.bin_dir.path)
    args.add_all(sources)
    args.add_all(ctx.attr.linkopts)
    args.add("-o", out)
    ctx.actions.run_shell(
        inputs = inputs,
        outputs = [out],
        command = "exec clang++ \"$@\"",
        arguments = [args],
        mnemonic = "ClangFuzzer",
        progress_message = "Building libFuzzer binary %s with clang" % ctx.label,
        use_default_shell_env = True,
    )
    return [DefaultInfo(executable = out, files = depset([out]))]

forkguard_fuzzer = rule(
    implementation = _forkguard_fuzzer_impl,
    attrs = {
        "srcs": attr.label_list(allow_files = [".c", ".cc"], mandatory = True),
        "hdrs": attr.label_list(allow_files = True),
        "deps": attr.label_list(aspects = [_library_sources]),
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

def forkguard_fuzz_targets(name, seconds, deps = [], linkopts = [], corpus = None, seed = None, dict = None, programs = False):
    """NAME_fuzzer (from NAME_fuzzer.cc and `deps`), NAME_fuzz_test (it fuzzes for `seconds`)
    and NAME_corpus_test (each file of `corpus` once).

    `corpus` defaults to testdata/fuzz/NAME/*, `seed` to testdata/fuzz/NAME/seed-empty.
    `programs`: the input is a program of log lines (":fuzz_log_program", testonly), long from
    the start."""
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
