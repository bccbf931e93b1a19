#!/usr/bin/env bash
# avx512-emulate.sh — run static x86-64 test binaries on an emulated AVX-512 CPU (Bochs).
#
# Why: the AVX-512 kernel sets (tests/*/..._avx512.cpp) only run when the CPU reports avx512f.
# On a machine without AVX-512 they never run. QEMU's TCG does not implement AVX-512; Bochs
# (Debian 12: bochs 2.7, built with EVEX support) does, with CPU models such as
# corei7_skylake_x / corei3_cnl / corei7_icelake_u / tigerlake.
#
# What it does:
#   1. builds an initramfs (cpio newc): busybox-static + the given static binaries + an /init
#      that prints the CPU flags, runs each binary with its arguments, prints its exit code,
#      then powers the machine off;
#   2. builds a BIOS-bootable ISO with grub-mkrescue (kernel: Debian's /boot/vmlinuz-*,
#      command line console=ttyS0);
#   3. boots it in Bochs (one AVX-512 CPU; display 'term' on a pseudo-terminal from script(1),
#      as Debian's Bochs has no 'nogui'), COM1 written to a file, and prints that serial log
#      (each line prefixed with the host's elapsed seconds) as it arrives; Bochs ends when the
#      guest powers off, or is stopped at the timeout.
#
# Usage:
#   avx512-emulate.sh [-o OUTDIR] [-t TIMEOUT_S] [-m MODEL] [-M MEM_MB] \
#                     BINARY[::ARGS] [BINARY[::ARGS] ...]
#   Each BINARY must be statically linked (the initramfs has no libc). ARGS is put as written
#   after the binary's name on a command line of the guest's /init (busybox sh), so shell
#   quoting applies: quote Catch2 tags and names, e.g. ".../ptq_kernels_tests::'[kernels]'"
#   or "...::-s 'gemm: the kernel sets carry their references'". A binary's working directory in
#   the guest is /, and it sees no host files: tests that read data files or start other
#   programs fail there, so select only self-contained tests.
#   Example (ptq):
#     cmake -S . -B /build-avx512emu -DCMAKE_BUILD_TYPE=Release -DCMAKE_EXE_LINKER_FLAGS=-static
#     cmake --build /build-avx512emu --target ptq_kernels_tests
#     tools/avx512-emulate.sh "/build-avx512emu/tests/kernels/ptq_kernels_tests::'[kernels],[gemm]'"
#
# Exit code: 0 when every binary exited 0 in the guest, 1 when one did not, 2 when the run
# did not finish (timeout, no end marker) or the setup failed.
#
# Needs only Debian 12 packages (installed when missing, as root):
#   bochs bochs-term bochsbios vgabios busybox-static linux-image-amd64 grub-pc-bin
#   grub-common xorriso mtools cpio
# Speed: Bochs interprets every instruction; the Linux boot takes about 2-2.5 minutes and
# compute-heavy code runs roughly 100-200x slower than natively on the host.
set -euo pipefail
shopt -s extglob

outdir=/tmp/avx512emu
timeout_s=3600
model=corei7_skylake_x
mem_mb=1024
while getopts "o:t:m:M:h" opt; do
  case $opt in
    o) outdir=$OPTARG ;;
    t) timeout_s=$OPTARG ;;
    m) model=$OPTARG ;;
    M) mem_mb=$OPTARG ;;
    *) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
  echo "usage: $0 [-o OUTDIR] [-t TIMEOUT_S] [-m MODEL] [-M MEM_MB] BINARY[::ARGS]..." >&2
  exit 2
fi

# --- 0. packages -----------------------------------------------------------------------------
need_pkgs=()
for p in bochs bochs-term bochsbios vgabios busybox-static linux-image-amd64 grub-pc-bin \
         grub-common xorriso mtools cpio; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    need_pkgs+=("$p")
done
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing: ${need_pkgs[*]}" >&2
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_pkgs[@]}" >&2
fi
kernel=$(ls -1 /boot/vmlinuz-* | sort -V | tail -n 1)

# The Bochs CPU model must be one with AVX-512 and Bochs must have been built with EVEX.
case $model in
  corei7_skylake_x | corei3_cnl | corei7_icelake_u | tigerlake) ;;
  *)
    echo "CPU model '$model' has no AVX-512; use corei7_skylake_x, corei3_cnl," \
         "corei7_icelake_u or tigerlake" >&2
    exit 2
    ;;
esac
models=$(bochs-bin -help cpu 2>&1 || true)
if ! grep -qx "$model[[:space:]]*" <<<"$models"; then
  echo "Bochs has no CPU model '$model' (see: bochs-bin -help cpu)" >&2
  exit 2
fi
if ! grep -q decoder_evex64 /usr/bin/bochs-bin; then
  echo "this Bochs was built without EVEX (AVX-512) support" >&2
  exit 2
fi

rm -rf "$outdir"
mkdir -p "$outdir/initramfs"/{bin,sbin,proc,sys,dev,tmp,tests} "$outdir/iso/boot/grub"
root=$outdir/initramfs

# --- 1. initramfs ----------------------------------------------------------------------------
cp /bin/busybox "$root/bin/busybox"
for applet in sh mount cat cut grep tr sed date dmesg poweroff sleep echo sync; do
  ln -s busybox "$root/bin/$applet"
done

{
  cat <<'EOF'
#!/bin/sh
# /init of the avx512-emulate initramfs: runs each test binary, prints to the serial console.
export PATH=/bin HOME=/ TMPDIR=/tmp
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
exec >/dev/ttyS0 2>&1 </dev/null
echo "=== AVX512EMU BOOTED: $(cat /proc/uptime) (guest uptime s)"
echo "=== cpu: $(grep -m1 'model name' /proc/cpuinfo)"
echo "=== avx512 flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep avx512 | tr '\n' ' ')"
dmesg | grep -i -E 'x86/fpu|xsave|avx' | sed 's/^/=== dmesg: /'
failed=0
run() { # run NAME ARGS...
  echo "=== AVX512EMU RUN $*"
  "/tests/$@"
  rc=$?
  echo "=== AVX512EMU EXIT $1 rc=$rc guest-uptime=$(cut -d' ' -f1 /proc/uptime)"
  [ "$rc" -eq 0 ] || failed=1
}
EOF
  for spec in "$@"; do
    bin=${spec%%::*}
    args=""
    [ "$spec" != "$bin" ] && args=${spec#*::}
    if [ ! -x "$bin" ] || readelf -l "$bin" | grep -q "Requesting program interpreter"; then
      echo "$bin is missing or not statically linked" >&2
      exit 2
    fi
    name=$(basename "$bin")
    # Same binary twice (different filters) is copied once.
    [ -e "$root/tests/$name" ] || cp "$bin" "$root/tests/$name"
    echo "run $name $args"
  done
  cat <<'EOF'
echo "=== AVX512EMU DONE failed=$failed"
sync
sleep 3   # let the serial port drain (poweroff -f does not wait for it)
poweroff -f
sleep 60
EOF
} > "$root/init"
chmod +x "$root/init"

(cd "$root" && find . | cpio -o -H newc --quiet) > "$outdir/iso/boot/initramfs.cpio"

# --- 2. bootable ISO -------------------------------------------------------------------------
cp "$kernel" "$outdir/iso/boot/vmlinuz"
# quiet + loglevel keep the serial log short; lpj skips the delay-loop calibration; tsc=unstable
# avoids clocksource trouble with Bochs' virtual TSC; mitigations off saves emulated cycles.
# clearcpuid=xsaves,xsavec is REQUIRED: Bochs 2.7 reports the standard-format XSAVE size (2688)
# in CPUID.(0DH,1).EBX, where the compacted-format size (2432) belongs; Linux (which uses the
# compacted format when XSAVES or, since 6.0, XSAVEC is there) then logs
# "XSAVE consistency problem: size 2432 != kernel_size 2688" and disables XSAVE, and with it
# AVX, AVX2 and AVX-512 (EVEX instructions then raise #UD: "Illegal instruction").
# Without XSAVES and XSAVEC the kernel uses the standard format, whose size Bochs reports right.
# (Linux 6.1 no longer has the old "noxsaves" parameter.)
cat > "$outdir/iso/boot/grub/grub.cfg" <<'EOF'
serial --unit=0 --speed=115200
terminal_input serial
terminal_output serial
set timeout=0
menuentry "avx512emu" {
  linux /boot/vmlinuz console=ttyS0,115200 quiet loglevel=4 lpj=1000000 mitigations=off nokaslr tsc=unstable clearcpuid=xsaves,xsavec rdinit=/init panic=-1
  initrd /boot/initramfs.cpio
}
EOF
grub-mkrescue -o "$outdir/boot.iso" "$outdir/iso" >"$outdir/grub-mkrescue.log" 2>&1

# --- 3. Bochs --------------------------------------------------------------------------------
cat > "$outdir/bochsrc" <<EOF
# One AVX-512 CPU; no display; serial console to a file; time follows instructions, not the
# host clock (clock: sync=none), which is the fastest mode.
cpu: model=$model, count=1, ips=100000000, reset_on_triple_fault=0
memory: guest=$mem_mb, host=$mem_mb
romimage: file=/usr/share/bochs/BIOS-bochs-latest
vgaromimage: file=/usr/share/vgabios/vgabios.bin
# Debian's Bochs has no 'nogui' display library; 'term' (package bochs-term) draws the VGA
# text screen with curses on a terminal, which script(1) provides below.
display_library: term
pci: enabled=1, chipset=i440fx
ata0: enabled=1, ioaddr1=0x1f0, ioaddr2=0x3f0, irq=14
ata0-master: type=cdrom, path=$outdir/boot.iso, status=inserted
boot: cdrom
clock: sync=none, time0=utc
speaker: enabled=0
com1: enabled=1, mode=file, dev=$outdir/serial.log
log: $outdir/bochs.log
panic: action=fatal
error: action=report
info: action=ignore
debug: action=ignore
EOF

: > "$outdir/serial.log"
start=$(date +%s)
# Debian builds Bochs with its internal debugger, which stops at the first instruction and
# waits for a command: -rc gives it 'continue'.
echo continue > "$outdir/debugger.rc"
# script(1) gives Bochs' term display a pseudo-terminal; what it draws goes to bochs.out.
TERM=vt100 script -qfec "bochs-bin -q -f '$outdir/bochsrc' -rc '$outdir/debugger.rc'" /dev/null \
  </dev/null >"$outdir/bochs.out" 2>&1 &
bochs_pid=$!

# Print the serial log as it grows, each line with the host's elapsed seconds; stop Bochs
# when /init has printed its end marker (poweroff normally ends Bochs itself) or on timeout.
status=2
lines_done=0
while :; do
  mapfile -t lines < <(tail -n +$((lines_done + 1)) "$outdir/serial.log")
  # Only whole lines (the last may still be written).
  n=${#lines[@]}
  if [ "$n" -gt 0 ] && [ -n "$(tail -c1 "$outdir/serial.log")" ]; then n=$((n - 1)); fi
  for ((k = 0; k < n; k++)); do
    line=${lines[$k]//$'\r'/}
    line=${line//$'\e'\[*([0-9;?])[A-Za-z]/}   # GRUB's terminal escape sequences
    printf '[%5ds] %s\n' $(($(date +%s) - start)) "$line"
    case $line in
      "=== AVX512EMU DONE failed=0"*) status=0 ;;
      "=== AVX512EMU DONE failed="*) status=1 ;;
    esac
  done
  lines_done=$((lines_done + n))
  if [ "$status" -ne 2 ]; then sleep 5; break; fi
  if ! kill -0 "$bochs_pid" 2>/dev/null; then break; fi
  if [ $(($(date +%s) - start)) -ge "$timeout_s" ]; then
    echo "avx512-emulate: timeout after ${timeout_s}s" >&2
    break
  fi
  sleep 2
done
# $bochs_pid is script(1); stop Bochs (its child) first, then script.
pkill -TERM -P "$bochs_pid" 2>/dev/null || true
kill "$bochs_pid" 2>/dev/null || true
wait "$bochs_pid" 2>/dev/null || true
echo "avx512-emulate: host elapsed $(($(date +%s) - start))s; serial log: $outdir/serial.log;" \
     "Bochs log: $outdir/bochs.log" >&2
[ "$status" -eq 2 ] && tail -n 20 "$outdir/bochs.log" >&2
exit "$status"
