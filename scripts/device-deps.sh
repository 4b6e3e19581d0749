#!/usr/bin/env bash
# Run here, before a device call that needs PCRE2 (byte-level BPE tokenizers: `strata profile`, `generate` on text):
# the device machine has PCRE2's shared library but not its headers, and no network. Copies this machine's
# (Debian's libpcre2-dev) header and static library into .deps/pcre2 (ignored by git; about 1 MiB) with a pkg-config
# file that points at them; carry ".deps" in the call, and scripts/device-common.sh builds with it where the
# device's pkg-config finds no PCRE2.
set -euo pipefail
cd "$(dirname "$0")/.."
lib=$(pkg-config --variable=libdir libpcre2-8)
include=$(pkg-config --variable=includedir libpcre2-8)
[ -f "$lib/libpcre2-8.a" ] || { echo "no $lib/libpcre2-8.a: install libpcre2-dev" >&2; exit 1; }
rm -rf .deps/pcre2
mkdir -p .deps/pcre2/include .deps/pcre2/lib/pkgconfig
cp "$include/pcre2.h" .deps/pcre2/include/
cp "$lib/libpcre2-8.a" .deps/pcre2/lib/
cat >.deps/pcre2/lib/pkgconfig/libpcre2-8.pc <<PC
prefix=\${pcfiledir}/../..
libdir=\${prefix}/lib
includedir=\${prefix}/include

Name: libpcre2-8
Description: PCRE2 8-bit, copied from this machine by scripts/device-deps.sh
Version: $(pkg-config --modversion libpcre2-8)
Libs: -L\${libdir} -lpcre2-8
Cflags: -I\${includedir}
PC
echo "PCRE2 $(pkg-config --modversion libpcre2-8) in .deps/pcre2: carry \".deps\""
