"""unsanitized_file: one file of a target built without the sanitizer flags of the build.

--config=asan/tsan/ubsan add -fsanitize=... to every compile and link (.bazelrc). Some
outputs must never carry a sanitizer runtime: the LD_AUDIT module runs in its own link
namespace, and a second sanitizer runtime there aborts the process ("Shadow memory range
interleaves ..."). The target named by `src` is built in a configuration whose --copt and
--linkopt lists lack every -fsanitize / -fno-sanitize flag (in a plain build that is the
same configuration), and its one output is copied under this rule's name."""

def _drop_sanitizers(flags):
    return [f for f in flags if not f.startswith("-fsanitize") and not f.startswith("-fno-sanitize")]

def _unsanitized_transition_impl(settings, attr):
    return {
        "//command_line_option:copt": _drop_sanitizers(settings["//command_line_option:copt"]),
        "//command_line_option:linkopt": _drop_sanitizers(settings["//command_line_option:linkopt"]),
    }

_unsanitized_transition = transition(
    implementation = _unsanitized_transition_impl,
    inputs = ["//command_line_option:copt", "//command_line_option:linkopt"],
    outputs = ["//command_line_option:copt", "//command_line_option:linkopt"],
)

def _unsanitized_file_impl(ctx):
    files = ctx.attr.src[0][DefaultInfo].files.to_list()
    if len(files) != 1:
        fail("%s has %d outputs, unsanitized_file wants one" % (ctx.attr.src[0].label, len(files)))
    out = ctx.actions.declare_file(ctx.label.name)
    ctx.actions.run_shell(
        inputs = files,
        outputs = [out],
        command = "cp \"$1\" \"$2\"",
        arguments = [files[0].path, out.path],
        mnemonic = "CopyUnsanitized",
    )
    return [DefaultInfo(files = depset([out]), runfiles = ctx.runfiles(files = [out]))]

unsanitized_file = rule(
    implementation = _unsanitized_file_impl,
    attrs = {
        "src": attr.label(mandatory = True, cfg = _unsanitized_transition),
        "_allowlist_function_transition": attr.label(
            default = "@bazel_tools//tools/allowlists/function_transition_allowlist",
        ),
    },
)
