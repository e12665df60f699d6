#!/bin/bash
# tests/package/check.sh - the Debian package (scripts/package), one JUnit case per check
# (scripts/test counts them):
#   on the host: it builds; lintian reports no error; the files are where they belong and
#   Depends names the libraries the binaries link; forkguard-probe.service runs
#   /usr/bin/forkguard probe --system and the postinst enables and starts it; the man pages
#   (help2man, pandoc) render without groff warnings and carry every option of each
#   command's --help, every FORKGUARD_* variable of docs/forkguard.7.md and the event log's
#   events;
#   the packages hold exactly packaging/manifest's "deb" rows; scripts/install PREFIX gives a
#   working CLI and everything README's "Using it on your own trainer" uses
#   (packaging/check-install);
#   in the Soft-RoCE guest (scripts/guests/rxe-vm; its root is a writable overlay): dpkg -i;
#   /usr/bin/forkguard doctor finds its shim in /usr/lib/x86_64-linux-gnu/forkguard;
#   forkguard run --mode error --fail-on hazard catches a program that forks after RDMA
#   init on rxe0 and exits 3; forkguard run keeps a program's exit status; man finds
#   both pages; dpkg -r removes it all.
#   forkguard-slurm (the SPANK plugin): on the host, lintian, its files, Depends on forkguard
#   and on the Slurm major release of spank.h, the plugin's SPANK symbols, its man page; in
#   the guest, dpkg -i and dpkg -r.
# Usage: tests/package/check.sh [--junit FILE] [--host-only]
#   --host-only  the guest checks are reported as skipped (scripts/test --host-only)
# Writes the package and lintian's output to bazel-testlogs/package/.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 2
# shellcheck source=../support/junit.sh
. tests/support/junit.sh
JUNIT='' HOST_ONLY=0
while [ $# -gt 0 ]; do
	case "$1" in
		--junit) JUNIT=$2; shift ;;
		--host-only) HOST_ONLY=1 ;;
		*) echo "tests/package/check.sh: unknown argument $1" >&2; exit 2 ;;
	esac
	shift
done
OUT=$(bazel info bazel-testlogs 2>/dev/null)/package
rm -rf "$OUT"; mkdir -p "$OUT"
MA=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
LIB=/usr/lib/$MA/forkguard

# --- host ----------------------------------------------------------------------------
DEBFILE=
if DEBFILE=$(scripts/package --skip-setup "$OUT/dist" 2>"$OUT/package.log" | tail -n 1) && [ -f "$DEBFILE" ]; then
	junit_pass "package: scripts/package builds the .deb"
else
	junit_fail "package: scripts/package builds the .deb" "$(cat "$OUT/package.log")"
	junit_write "$JUNIT" package
	exit 1
fi
echo "package: $DEBFILE ($(du -k "$DEBFILE" | cut -f1) KiB)"

lint() {
	lintian --tag-display-limit 0 -I "$DEBFILE" > "$OUT/lintian.txt" 2>&1
	local rc=$?
	grep -v '^running with root privileges' "$OUT/lintian.txt"
	[ $rc = 0 ] || return 1
	! grep -q '^E: ' "$OUT/lintian.txt"
}
junit_check "package: lintian reports no errors" lint
echo "package: lintian:"; grep -v '^running with root' "$OUT/lintian.txt" | sed 's/^/    /'

contents() {
	local list deps f
	list=$(dpkg-deb -c "$DEBFILE" | awk '{print $1, $6}') || return 1
	for f in "-rwxr-xr-x ./usr/bin/forkguard" "-rw-r--r-- .$LIB/libforkguard.so" \
		"-rw-r--r-- .$LIB/libforkguard_audit.so" "-rw-r--r-- .$LIB/libforkguard_check.so" \
		"-rw-r--r-- ./usr/lib/python3/dist-packages/forkguard/__init__.py" \
		"-rw-r--r-- ./usr/lib/python3/dist-packages/forkguard/torch.py" \
		"-rw-r--r-- ./usr/share/man/man1/forkguard.1.gz" "-rw-r--r-- ./usr/share/man/man1/forkguard-run.1.gz" \
		"-rw-r--r-- ./usr/share/man/man1/forkguard-report.1.gz" "-rw-r--r-- ./usr/share/man/man1/forkguard-doctor.1.gz" \
		"-rw-r--r-- ./usr/share/man/man1/forkguard-ps.1.gz" "-rw-r--r-- ./usr/share/man/man1/forkguard-probe.1.gz" \
		"-rw-r--r-- ./lib/systemd/system/forkguard-probe.service" \
		"-rw-r--r-- ./lib/systemd/system/forkguard-watch.service" \
		"-rw-r--r-- ./usr/share/man/man1/forkguard-watch.1.gz" \
		"-rw-r--r-- ./usr/share/man/man7/forkguard.7.gz" "-rw-r--r-- ./usr/share/doc/forkguard/copyright" \
		"-rw-r--r-- ./usr/share/doc/forkguard/changelog.Debian.gz" "-rw-r--r-- ./usr/share/doc/forkguard/EVENT_LOG.md"; do
		grep -qxF -- "$f" <<<"$list" || { echo "not in the package: $f"; echo "$list"; return 1; }
	done
	# The boot probe's unit runs the package's CLI, and the postinst enables and starts it.
	dpkg-deb --fsys-tarfile "$DEBFILE" | tar -xO ./lib/systemd/system/forkguard-probe.service |
		grep -qx 'ExecStart=/usr/bin/forkguard probe --system' || { echo "the unit's ExecStart is not /usr/bin/forkguard probe --system"; return 1; }
	# shellcheck disable=SC2016 # the script's own text, $UNIT unexpanded
	for f in 'UNIT=forkguard-probe.service' 'deb-systemd-helper enable "$UNIT"' 'deb-systemd-invoke start "$UNIT"'; do
		dpkg-deb -I "$DEBFILE" postinst | grep -qF -- "$f" || { echo "the postinst lacks: $f"; return 1; }
	done
	# The watcher's unit is shipped disabled: the postinst leaves it alone.
	dpkg-deb --fsys-tarfile "$DEBFILE" | tar -xO ./lib/systemd/system/forkguard-watch.service |
		grep -qx 'ExecStart=/usr/bin/forkguard watch --log /var/log/forkguard/watch --enforce off' ||
		{ echo "the watcher unit's ExecStart is not /usr/bin/forkguard watch ..."; return 1; }
	if dpkg-deb -I "$DEBFILE" postinst | grep -q 'forkguard-watch'; then
		echo "the postinst enables or starts forkguard-watch.service (it ships disabled)"; return 1
	fi
	# and nothing but packaging/manifest's rows
	diff <(packaging/stage list deb | sed -n 's|^forkguard:|.|p' | sort) \
		<(dpkg-deb -c "$DEBFILE" | awk '$1 !~ /^d/ {print $6}' | sort) ||
		{ echo "the package is not packaging/manifest's forkguard rows (<: missing, >: extra)"; return 1; }
	deps=$(dpkg-deb -f "$DEBFILE" Depends)
	echo "Depends: $deps"
	for f in libc6 libdw1 libelf1 libstdc++6; do
		[[ ", $deps," == *", $f "* || ", $deps," == *", $f,"* ]] || { echo "Depends lacks $f"; return 1; }
	done
}
junit_check "package: files in place, Depends from the linked libraries" contents

manpages() {
	local x=$OUT/extract f page bad=0 o v c text seven
	rm -rf "$x" && dpkg-deb -x "$DEBFILE" "$x" || return 1
	for f in "$x"/usr/share/man/man1/forkguard*.1.gz "$x/usr/share/man/man7/forkguard.7.gz"; do
		w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$f" 2>&1 >/dev/null)
		[ -z "$w" ] || { echo "groff warnings in ${f##*/}:"; echo "$w"; bad=1; }
	done
	seven=$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$x/usr/share/man/man7/forkguard.7.gz" 2>/dev/null | col -b)
	for c in run report doctor ps probe; do
		page=$x/usr/share/man/man1/forkguard-$c.1.gz
		text=$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$page" 2>/dev/null | col -b)
		grep -q "^NAME" <<<"$text" || { echo "forkguard-$c(1) has no NAME"; bad=1; }
		for o in $("$x/usr/bin/forkguard" help "$c" | grep -oE -- '--[a-z][a-z-]+' | sort -u); do
			grep -qF -- "$o" <<<"$text" || { echo "forkguard-$c(1) lacks $o"; bad=1; }
		done
	done
	for v in $(sed -n '/^# ENVIRONMENT/,/^# /p' docs/forkguard.7.md | grep -oE 'FORKGUARD_[A-Z_]+' | sort -u); do
		grep -qF "$v" <<<"$seven" || { echo "forkguard(7) lacks $v"; bad=1; }
	done
	for e in process_start rdma_init mr_register fork fork_child child_segv; do
		grep -qE "^ +$e( |$)" <<<"$seven" || { echo "forkguard(7) lacks event $e"; bad=1; }
	done
	return $bad
}
junit_check "package: man pages render cleanly and carry --help and the docs" manpages

SLURMDEB=$(ls "$OUT/dist"/forkguard-slurm_*.deb 2>/dev/null | head -1)
slurm_package() {
	local list deps f x=$OUT/extract-slurm major next w text
	[ -f "$SLURMDEB" ] || { echo "no forkguard-slurm .deb in $OUT/dist"; return 1; }
	lintian --tag-display-limit 0 -I "$SLURMDEB" > "$OUT/lintian-slurm.txt" 2>&1
	grep -v '^running with root' "$OUT/lintian-slurm.txt"
	! grep -q '^E: ' "$OUT/lintian-slurm.txt" || return 1
	list=$(dpkg-deb -c "$SLURMDEB" | awk '{print $1, $6}') || return 1
	for f in "-rw-r--r-- ./usr/lib/$MA/slurm-wlm/spank_forkguard.so" \
		"-rw-r--r-- ./etc/slurm/plugstack.conf.d/forkguard.conf" \
		"-rw-r--r-- ./usr/share/man/man8/spank_forkguard.8.gz" \
		"-rw-r--r-- ./usr/share/doc/forkguard-slurm/copyright"; do
		grep -qxF -- "$f" <<<"$list" || { echo "not in forkguard-slurm: $f"; echo "$list"; return 1; }
	done
	diff <(packaging/stage list deb | sed -n 's|^forkguard-slurm:|.|p' | sort) \
		<(dpkg-deb -c "$SLURMDEB" | awk '$1 !~ /^d/ {print $6}' | sort) ||
		{ echo "forkguard-slurm is not packaging/manifest's rows (<: missing, >: extra)"; return 1; }
	deps=$(dpkg-deb -f "$SLURMDEB" Depends)
	major=$(dpkg-query -W -f='${Version}' libslurm-dev | cut -d. -f1-2)
	next=${major%%.*}.$(printf '%02d' $((10#${major#*.} + 1)))
	echo "forkguard-slurm Depends: $deps"
	[[ "$deps" == *"forkguard (= $(dpkg-deb -f "$DEBFILE" Version))"* ]] || { echo "Depends lacks forkguard (= VERSION)"; return 1; }
	[[ "$deps" == *"slurm-wlm-basic-plugins (>= $major), slurm-wlm-basic-plugins (<< $next)"* ]] ||
		{ echo "Depends lacks the Slurm major release $major"; return 1; }
	rm -rf "$x" && dpkg-deb -x "$SLURMDEB" "$x" || return 1
	# No spank_options[] table: --forkguard is registered from slurm_spank_init with
	# spank_option_register (sbatch ignores a plugin's table).
	for f in plugin_name plugin_type spank_plugin_version slurm_spank_init slurm_spank_task_init; do
		nm -D --defined-only "$x/usr/lib/$MA/slurm-wlm/spank_forkguard.so" | grep -qw "$f" || { echo "the plugin lacks $f"; return 1; }
	done
	grep -qx "optional /usr/lib/$MA/slurm-wlm/spank_forkguard.so default=off mode=warn" \
		"$x/etc/slurm/plugstack.conf.d/forkguard.conf" || { cat "$x/etc/slurm/plugstack.conf.d/forkguard.conf"; return 1; }
	[ "$(dpkg-deb -I "$SLURMDEB" conffiles)" = /etc/slurm/plugstack.conf.d/forkguard.conf ] || { echo "conffiles wrong"; return 1; }
	w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings -E UTF-8 -l -Tutf8 -Z "$x/usr/share/man/man8/spank_forkguard.8.gz" 2>&1 >/dev/null)
	[ -z "$w" ] || { echo "groff warnings in spank_forkguard.8:"; echo "$w"; return 1; }
	# The page's text first: grep -q stops reading early, and under pipefail the writer's SIGPIPE
	# would fail the check.
	text=$(LC_ALL=C.UTF-8 MANWIDTH=200 man -l "$x/usr/share/man/man8/spank_forkguard.8.gz" 2>/dev/null | col -b)
	grep -q -- "--forkguard\[=MODE\]" <<<"$text" || { echo "spank_forkguard(8) lacks --forkguard[=MODE]"; return 1; }
}
junit_check "package: forkguard-slurm: lintian, files, Depends on the Slurm major release, SPANK symbols, man page" slurm_package

install_prefix() {
	local p=$OUT/prefix
	scripts/install --skip-setup "$p" >/dev/null || return 1
	"$p/bin/forkguard" doctor | grep -E "^ok +shim +$p/lib/libforkguard.so" ||
		{ "$p/bin/forkguard" doctor; return 1; }
	packaging/check-install "$p"
}
junit_check "package: scripts/install PREFIX installs a working CLI and all README's own-trainer section uses" install_prefix

# --- in the Soft-RoCE guest ------------------------------------------------------------
GUEST=("dpkg -i installs it" "doctor finds its shim in $LIB"
	"run --mode error --fail-on hazard catches a fork after RDMA init on rxe0 (exit 3)"
	"run keeps the program's exit status" "man finds forkguard(1) and forkguard(7)"
	"dpkg -r removes it" "forkguard-slurm: dpkg -i installs the plugin, dpkg -r removes it")
if [ "$HOST_ONLY" = 1 ]; then
	echo "tests/package/check.sh: *** guest checks SKIPPED (--host-only): dpkg -i NOT tested ***" >&2
	for g in "${GUEST[@]}"; do junit_skip "package (guest): $g" "--host-only"; done
	junit_write "$JUNIT" package
	exit $?
fi

bazel build --noshow_progress //cli:testdata/hazard_prog >/dev/null 2>&1 ||
	{ junit_fail "package (guest): build hazard_prog" "$(bazel build //cli:testdata/hazard_prog 2>&1)"; }
HAZARD=$(bazel info bazel-bin 2>/dev/null)/cli/testdata/hazard_prog
JOB=$(mktemp /tmp/forkguard-package-job.XXXXXX.sh)
trap 'rm -f "$JOB"' EXIT
cat > "$JOB" <<EOF
#!/bin/bash
# In the guest: results into \$RXE_VM_OUT, one NAME.log and NAME.rc per step.
R=\$RXE_VM_OUT
step() { local n=\$1; shift; "\$@" > "\$R/\$n.log" 2>&1; echo \$? > "\$R/\$n.rc"; }
export DEBIAN_FRONTEND=noninteractive
# man-db's trigger would rebuild the index of every man page over 9p (minutes under TCG);
# man finds the new pages without it. (Debian's "man-db/auto-update = false".)
rm -f /var/lib/man-db/auto-update
step dpkg_i dpkg -i "$DEBFILE"
step which sh -c 'command -v forkguard'
step doctor /usr/bin/forkguard doctor
step run_hazard /usr/bin/forkguard run --mode error --fail-on hazard -- "$HAZARD"
step run_status /usr/bin/forkguard run -- /bin/sh -c 'echo program-output; exit 5'
step man sh -c 'man -w forkguard && man -w 7 forkguard && MANWIDTH=80 man 7 forkguard | grep -c FORKGUARD_MODE'
step slurm_i_r sh -c 'dpkg -i "$SLURMDEB" && test -f /usr/lib/$MA/slurm-wlm/spank_forkguard.so && dpkg -r forkguard-slurm && ! test -e /usr/lib/$MA/slurm-wlm/spank_forkguard.so'
step dpkg_r sh -c 'dpkg -r forkguard && ! test -e /usr/bin/forkguard && ! test -e $LIB'
echo done > "\$R/done"
EOF
chmod +x "$JOB"
GOUT=$OUT/guest
mkdir -p "$GOUT"
RXE_VM_TIMEOUT=${RXE_VM_TIMEOUT:-900} RXE_VM_OUT_HOST=$GOUT scripts/guests/rxe-vm -- "$JOB" > "$OUT/guest.log" 2>&1
vm_rc=$?

rc_is() { [ "$(cat "$GOUT/$1.rc" 2>/dev/null)" = "$2" ]; }
log() { cat "$GOUT/$1.log" 2>/dev/null; }
guest_case() { # NAME CONDITION-FUNCTION
	if [ ! -f "$GOUT/done" ]; then
		junit_fail "package (guest): $1" "the guest job did not finish (rxe-vm exit $vm_rc): $(tail -n 30 "$OUT/guest.log")"
	elif "$2"; then junit_pass "package (guest): $1"
	else junit_fail "package (guest): $1" "$("$2" 2>&1; true)"; fi
}
g_install() { rc_is dpkg_i 0 && [ "$(log which)" = /usr/bin/forkguard ] || { log dpkg_i; log which; false; }; }
g_doctor() {
	log doctor | grep -qE "^ok +shim +$LIB/libforkguard.so loads" &&
		log doctor | grep -qF "$LIB/libforkguard_audit.so" && log doctor | grep -qE '^ok +RDMA devices' ||
		{ log doctor; false; }
}
g_hazard() {
	rc_is run_hazard 3 && log run_hazard | grep -qF "forkguard: fork after RDMA init in pid" &&
		log run_hazard | grep -qF "mode: error - the fork fails with EPERM" &&
		log run_hazard | grep -qF "hazard: fork() after RDMA initialization" ||
		{ echo "exit $(cat "$GOUT/run_hazard.rc" 2>/dev/null), expected 3"; log run_hazard; false; }
}
g_status() { rc_is run_status 5 && log run_status | grep -qx program-output || { log run_status; false; }; }
g_man() {
	rc_is man 0 && log man | grep -qx /usr/share/man/man1/forkguard.1.gz &&
		log man | grep -qx /usr/share/man/man7/forkguard.7.gz || { log man; false; }
}
g_remove() { rc_is dpkg_r 0 || { log dpkg_r; false; }; }
g_slurm() { rc_is slurm_i_r 0 || { log slurm_i_r; false; }; }
guest_case "${GUEST[0]}" g_install
guest_case "${GUEST[1]}" g_doctor
guest_case "${GUEST[2]}" g_hazard
guest_case "${GUEST[3]}" g_status
guest_case "${GUEST[4]}" g_man
guest_case "${GUEST[5]}" g_remove
guest_case "${GUEST[6]}" g_slurm
junit_write "$JUNIT" package
