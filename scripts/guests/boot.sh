# shellcheck shell=bash
# scripts/guests/boot.sh - what scripts/guests/rxe-vm and scripts/guests/rxe-cluster share, sourced by both:
# the kernel and its modules, the stage-1 initramfs (static busybox + the modules that reach
# the host's / over virtio-9p + scripts/guests/inside/init), and the kernel image QEMU boots.
# The caller defines PROG and die() (exit 125: an infrastructure failure).

GUEST_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/inside" && pwd -P)

# The guests' kernel command line, before guest.name= and guest.job=. no_timer_check: on a
# loaded host a TCG guest's IO-APIC timer check can fail ("IO-APIC + timer doesn't work!",
# a panic at boot); the timer itself works.
# shellcheck disable=SC2034 # for the scripts that source this
GUEST_KERNEL_ARGS="console=ttyS0 panic=-1 quiet loglevel=4 no_timer_check"

# $1 = kernel version, $2 = its modules directory (default /lib/modules/$1)
kver_has_rxe() {
	[ -n "$(find "${2:-/lib/modules/$1}/kernel/drivers/infiniband/sw/rxe" -name 'rdma_rxe.ko*' 2>/dev/null)" ]
}

# Sets KERNEL, KVER and MODDIR. $1 = a kernel image named vmlinuz-KVER (default: the newest
# /boot/vmlinuz-* whose modules have rdma_rxe), $2 = its modules directory (default
# /lib/modules/KVER, or ../lib/modules/KVER beside the image).
pick_kernel() {
	local k v d
	if [ -n "${1:-}" ]; then
		KERNEL=$1
		KVER=${KERNEL##*/vmlinuz-}
	else
		KERNEL=
		while read -r k; do
			v=${k##*/vmlinuz-}
			if kver_has_rxe "$v"; then KERNEL=$k; KVER=$v; break; fi
		done < <(printf '%s\n' /boot/vmlinuz-* | sort -V -r)
		[ -n "$KERNEL" ] || die "no /boot/vmlinuz-* with rdma_rxe modules (apt-get install linux-image-amd64)"
	fi
	[ -r "$KERNEL" ] || die "kernel $KERNEL not readable"
	MODDIR=${2:-/lib/modules/$KVER}
	if [ -z "${2:-}" ] && [ ! -d "$MODDIR" ]; then
		d=$(cd "$(dirname "$KERNEL")/.." 2>/dev/null && pwd -P)/lib/modules/$KVER
		[ -d "$d" ] && MODDIR=$d
	fi
	[ -d "$MODDIR" ] && MODDIR=$(cd "$MODDIR" && pwd -P)
	[ -r "$MODDIR/modules.dep" ] || die "$MODDIR/modules.dep missing"
	kver_has_rxe "$KVER" "$MODDIR" || die "$MODDIR has no rdma_rxe module"
}

# Sets BUSYBOX and QEMU; every further argument is a command the host must have.
check_host_tools() {
	local t
	BUSYBOX=$(command -v busybox || true)
	[ -n "$BUSYBOX" ] || die "busybox not found (apt-get install busybox-static)"
	if ldd "$BUSYBOX" >/dev/null 2>&1; then
		die "$BUSYBOX is dynamically linked (apt-get install busybox-static)"
	fi
	QEMU=$(command -v qemu-system-x86_64 || true)
	[ -n "$QEMU" ] || die "qemu-system-x86_64 not found"
	for t in "$@"; do command -v "$t" >/dev/null || die "$t not found on host"; done
}

# $1 = module path relative to $MODDIR as in modules.dep: copies it (uncompressed) and its
# dependencies into $INITRD/mods and appends their names to $INITRD/mods/order, each after
# what it needs.
declare -A SEEN_MODS=()
add_mod() {
	local rel=$1 i name deps=()
	[ -n "${SEEN_MODS[$rel]:-}" ] && return
	SEEN_MODS[$rel]=1
	read -r -a deps < <(grep -E "^${rel}:" "$MODDIR/modules.dep" | cut -d: -f2)
	# modules.dep lists dependencies so that the last one must load first
	for ((i = ${#deps[@]} - 1; i >= 0; i--)); do add_mod "${deps[$i]}"; done
	name=$(basename "$rel"); name=${name%%.ko*}
	case "$rel" in
		*.ko) cp "$MODDIR/$rel" "$INITRD/mods/$name.ko" ;;
		*.ko.xz) xz -dc "$MODDIR/$rel" > "$INITRD/mods/$name.ko" ;;
		*.ko.zst) zstd -qdc "$MODDIR/$rel" > "$INITRD/mods/$name.ko" ;;
		*.ko.gz) gzip -dc "$MODDIR/$rel" > "$INITRD/mods/$name.ko" ;;
	esac || die "cannot copy module $rel"
	echo "$name" >> "$INITRD/mods/order"
}

# Writes $1/initramfs.gz: static busybox, the modules that reach 9p and overlayfs, and
# scripts/guests/inside/init, which mounts the host's / read-only under a tmpfs overlay and
# switch_roots into it to run the job named by the kernel's guest.job= parameter.
build_initramfs() {
	local run=$1 m rel
	INITRD=$run/initrd
	mkdir -p "$INITRD/bin" "$INITRD/mods" "$INITRD/"{dev,proc,sys,lower,rw,newroot}
	cp "$BUSYBOX" "$INITRD/bin/busybox"
	: > "$INITRD/mods/order"
	for m in virtio_pci 9pnet_virtio 9p overlay; do
		rel=$(grep -oE "^[^:]*/${m}\.ko(\.[a-z]+)?:" "$MODDIR/modules.dep" | head -1 | tr -d :)
		if [ -n "$rel" ]; then add_mod "$rel"
		elif ! grep -qE "/${m}\.ko" "$MODDIR/modules.builtin" 2>/dev/null; then
			die "module $m neither in modules.dep nor built in"
		fi
	done
	install -m 755 "$GUEST_DIR/init" "$INITRD/init" || die "cannot copy the init"
	(cd "$INITRD" && find . | cpio -o -H newc --quiet | gzip -1 > "$run/initramfs.gz") ||
		die "building initramfs failed"
}

# $1 = bzImage, $2 = output ELF; 0 if an ELF with a PVH note came out
extract_vmlinux() {
	local img=$1 out=$2 pair magic dec pos
	for pair in '\xfd7zXZ\x00|xz -dc' '\x28\xb5\x2f\xfd|zstd -qdc' '\x1f\x8b\x08|gzip -dc' \
		    '\x02\x21\x4c\x18|lz4 -dc' '\x5d\x00\x00|xz --format=lzma -dc'; do
		magic=${pair%%|*}; dec=${pair#*|}
		command -v "${dec%% *}" >/dev/null || continue
		for pos in $(LC_ALL=C grep -obUaP "$magic" "$img" 2>/dev/null | cut -d: -f1 | head -5); do
			# shellcheck disable=SC2086 # $dec is a command and its options: split on purpose
			tail -c +$((pos + 1)) "$img" | $dec > "$out" 2>/dev/null
			if [ "$(od -An -tx1 -N4 "$out" 2>/dev/null | tr -d ' ')" = 7f454c46 ] &&
			   readelf -n "$out" 2>/dev/null | grep -q 'Unknown note type: (0x00000012)'; then
				return 0
			fi
		done
	done
	rm -f "$out"; return 1
}

# Sets BOOT_KERNEL and FW_ARGS: the uncompressed vmlinux (its PVH entry boots ~3.5 s faster
# under TCG, cached in $1) through qboot; $KERNEL through SeaBIOS when none can be
# extracted. $2 = the per-run directory (the vmlinux goes there when $1 is not writable).
# shellcheck disable=SC2034 # BOOT_KERNEL and FW_ARGS are for the scripts that source this
pick_boot_kernel() {
	local cache=$1 run=$2 vmlinux fw
	BOOT_KERNEL=$KERNEL; FW_ARGS=()
	command -v readelf >/dev/null || return 0
	vmlinux=$cache/vmlinux-$KVER-$(stat -L -c %s-%Y "$KERNEL")
	if [ ! -s "$vmlinux" ]; then
		if mkdir -p "$cache" 2>/dev/null && extract_vmlinux "$KERNEL" "$vmlinux.$$"; then
			mv -f "$vmlinux.$$" "$vmlinux"
		elif extract_vmlinux "$KERNEL" "$run/vmlinux"; then
			vmlinux=$run/vmlinux
		else
			return 0
		fi
	fi
	BOOT_KERNEL=$vmlinux
	for fw in /usr/share/qemu/qboot.rom /usr/share/qemu-efi/qboot.rom; do
		[ -r "$fw" ] && { FW_ARGS=(-bios "$fw"); break; }
	done
	return 0
}
