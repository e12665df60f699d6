"""forkguard_deps(): the external repositories forkguard's targets need, all local (offline).

In a workspace that uses forkguard (docs/bazel.md):

    local_repository(name = "forkguard", path = "/path/to/forkguard")
    load("@forkguard//bazel:deps.bzl", "forkguard_deps")
    forkguard_deps()

forkguard's own WORKSPACE calls it too, so the two cannot drift apart. A repository the
workspace already defines (declared before the call) is kept as it is."""

def _project_dir_repo_impl(ctx):
    # The project's root, wherever the workspace that uses it put it.
    root = ctx.path(ctx.attr._workspace_file).dirname
    src = root
    for part in ctx.attr.dir.split("/"):
        src = src.get_child(part)
    for child in src.readdir():
        if child.basename != "WORKSPACE":
            ctx.symlink(child, child.basename)
    ctx.file("WORKSPACE", "workspace(name = \"%s\")\n" % ctx.name)

# A directory of this project (a nested WORKSPACE, so not a package of it) as a repository.
_project_dir_repo = repository_rule(
    implementation = _project_dir_repo_impl,
    attrs = {
        "dir": attr.string(mandatory = True),
        "_workspace_file": attr.label(default = Label("//:WORKSPACE"), allow_single_file = True),
    },
    local = True,
)

def forkguard_deps():
    """Declares rules_cc, rules_java, remote_coverage_tools and googletest for Bazel 4.2.3."""

    # Bazel 4.2.3's @bazel_tools loads the C++ rules from @rules_cc; Debian's bazel-rules-cc
    # is too new for it, so a tiny stand-in re-exports the native rules.
    if not native.existing_rule("rules_cc"):
        _project_dir_repo(name = "rules_cc", dir = "third_party/rules_cc")

    # @bazel_tools needs these two even for C++-only builds.
    if not native.existing_rule("rules_java"):
        native.local_repository(
            name = "rules_java",
            path = "/usr/share/bazel/rules/java",  # Debian's bazel-rules-java
        )
    if not native.existing_rule("remote_coverage_tools"):
        _project_dir_repo(name = "remote_coverage_tools", dir = "third_party/coverage_tools")

    # GoogleTest from Debian's libgtest-dev / libgmock-dev (system headers + libs).
    if not native.existing_rule("googletest"):
        native.new_local_repository(
            name = "googletest",
            build_file = str(Label("//third_party:googletest.BUILD")),
            path = "/usr",
        )
