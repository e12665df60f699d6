#!/bin/bash
# packaging:install_test - packaging/stage over the Bazel outputs in this test's runfiles:
# its install route under a temporary PREFIX passes packaging/check-install (every path and
# file README's "Using it on your own trainer" names); both routes lay out exactly the
# manifest's rows; and what the .deb route ships the install route ships too (bar the
# package's own copyright and changelog).
set -uo pipefail
cd "${TEST_SRCDIR:?}/forkguard" || exit 1
T=${TEST_TMPDIR:?}
rc=0
fail() { echo "FAIL: $*"; rc=1; }

packaging/stage install . "$T/prefix" || fail "packaging/stage install failed"
packaging/check-install "$T/prefix" || fail "packaging/check-install: $? check(s) failed"
packaging/stage deb . "$T/deb" || fail "packaging/stage deb failed"

# Each route gives exactly its rows (files and links), nothing else.
diff <(packaging/stage list install | sort) <(cd "$T/prefix" && find . ! -type d | sed 's|^\./||' | sort) ||
	fail "the install under PREFIX is not packaging/stage list install (<: missing, >: extra)"
diff <(packaging/stage list deb | sed 's|:/|/|' | sort) <(cd "$T/deb" && find . ! -type d | sed 's|^\./||' | sort) ||
	fail "the .deb trees are not packaging/stage list deb (<: missing, >: extra)"

# What the packages ship, the install ships (by file name; the .deb's copyright and
# changelog.Debian.gz are Debian's own).
diff <(packaging/stage list deb | sed 's|.*/||' | grep -vxE 'copyright|changelog\.Debian\.gz' | sort -u) \
	<(packaging/stage list install | sed 's|.*/||' | sort -u) | grep '^<' &&
	fail "shipped in the .deb but not installed by scripts/install (above)"

# The plugin's line points at the installed shim and CLI, not the package's.
grep -qx "optional $T/prefix/lib/slurm/spank_forkguard.so default=off mode=warn shim=$T/prefix/lib/libforkguard.so forkguard=$T/prefix/bin/forkguard" \
	"$T/prefix/etc/slurm/plugstack.conf.d/forkguard.conf" ||
	fail "the installed plugstack line: $(tail -n 1 "$T/prefix/etc/slurm/plugstack.conf.d/forkguard.conf" 2>&1)"
# The boot probe's unit runs the installed CLI (the .deb's: /usr/bin/forkguard).
grep -qx "ExecStart=$T/prefix/bin/forkguard probe --system" "$T/prefix/lib/systemd/system/forkguard-probe.service" ||
	fail "the installed unit's ExecStart: $(grep ExecStart "$T/prefix/lib/systemd/system/forkguard-probe.service" 2>&1)"
grep -qx "ExecStart=/usr/bin/forkguard probe --system" "$T/deb/forkguard/lib/systemd/system/forkguard-probe.service" ||
	fail "the .deb's unit's ExecStart: $(grep ExecStart "$T/deb/forkguard/lib/systemd/system/forkguard-probe.service" 2>&1)"
# The .deb enables and starts it (maintainer scripts, as dh_installsystemd writes them).
# shellcheck disable=SC2016 # the script's own text, $UNIT unexpanded
if ! grep -qx 'UNIT=forkguard-probe.service' packaging/debian/forkguard.postinst ||
	! grep -qF 'deb-systemd-helper enable "$UNIT"' packaging/debian/forkguard.postinst; then
	fail "packaging/debian/forkguard.postinst does not enable forkguard-probe.service"
fi
for s in postinst prerm postrm; do
	sh -n "packaging/debian/forkguard.$s" || fail "packaging/debian/forkguard.$s: not a valid shell script"
done
[ "$rc" = 0 ] && echo "PASS: install and .deb trees from packaging/manifest"
exit $rc
