#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
#
# check_install.sh BUILD_DIR SOURCE_DIR: what `cmake --install` puts in
# place works from wherever it ends up. Installs into a temporary prefix,
# moves the whole tree elsewhere, and then:
#  - pkg-config, pointed at the moved tide.pc, names the moved include and
#    lib directories (tide.pc is relocatable through ${pcfiledir});
#  - the installed tided.service's Documentation= and ExecStart= name files
#    that exist in the tree it was installed into;
#  - the example in tide/client.h, exactly as the header prints it (only the
#    socket replaced), compiles against the moved headers with the flags
#    pkg-config gives, and trains its 100 steps against a real tided started
#    from the moved tree;
#  - tidectl's --help examples that plan or train under a budget are
#    accepted by that tided.
set -euo pipefail
build=$(cd "$1" && pwd)
source=$(cd "$2" && pwd)
tmp=$(mktemp -d)
pid=
cleanup() {
    [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
    rm -rf "$tmp"
}
trap cleanup EXIT
fail() { echo "check_install: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$tmp/first" >"$tmp/install.log" 2>&1 ||
    { cat "$tmp/install.log" >&2; fail "cmake --install failed"; }
mv "$tmp/first" "$tmp/moved"
root="$tmp/moved"

# pkg-config from the moved tree.
pc=$(find "$root" -name tide.pc -path '*/pkgconfig/*' | head -1)
[ -n "$pc" ] || fail "no tide.pc under $root"
export PKG_CONFIG_PATH=$(dirname "$pc")
cflags=$(pkg-config --cflags tide)
libs=$(pkg-config --libs tide)
libdir=$(pkg-config --variable=libdir tide)
incdir=$(pkg-config --variable=includedir tide)
[ "$(realpath "$incdir")" = "$(realpath "$root/include")" ] ||
    fail "tide.pc's includedir is $incdir, not $root/include"
case "$(realpath "$libdir")/" in "$(realpath "$root")/"*) ;; *) fail "tide.pc's libdir $libdir is not under $root" ;; esac
case "$cflags" in *"-I$incdir"*) ;; *) fail "pkg-config --cflags tide gives '$cflags', without -I$incdir" ;; esac
case "$libs" in *"-L$libdir"*) ;; *) fail "pkg-config --libs tide gives '$libs', without -L$libdir" ;; esac
[ -e "$libdir/libtide.so" ] || fail "tide.pc's libdir $libdir has no libtide.so"

# The unit names files of this install.
unit=$(find "$root" -name tided.service | head -1)
[ -n "$unit" ] || fail "no tided.service under $root"
doc=$(sed -n 's|^Documentation=file://||p' "$unit")
exe=$(sed -n 's|^ExecStart=\([^ ]*\).*|\1|p' "$unit")
# The unit was written for the first prefix; the moved tree has the same layout.
[ -e "${doc/#$tmp\/first/$root}" ] || fail "Documentation=file://$doc: no such file in the install"
[ -x "${exe/#$tmp\/first/$root}" ] || fail "ExecStart=$exe: no such program in the install"
[ -e "$(dirname "${doc/#$tmp\/first/$root}")/docs/architecture.md" ] ||
    fail "the README's docs/ folder is not installed beside it"

# A tided from the moved tree, on a socket of its own.
sock="$tmp/tided.sock"
"$root/sbin/tided" --socket "$sock" --state-dir "$tmp/state" --backend cpu --device-memory 64M \
    --log-level warn >"$tmp/tided.log" 2>&1 &
pid=$!
for _ in $(seq 200); do [ -S "$sock" ] && break; sleep 0.05; done
[ -S "$sock" ] || { cat "$tmp/tided.log" >&2; fail "tided did not open $sock"; }

# The header's example, verbatim: its prose lines are " *     CODE".
header="$root/include/tide/client.h"
sed -n '/^ \* Example usage:/,/^ \*\//p' "$header" | sed -n 's/^ \*     \{0,1\}//p' |
    sed "s|unix:/run/tide/tided.sock|unix:$sock|" >"$tmp/example.txt"
grep -q 'tide_client_train' "$tmp/example.txt" || fail "no example found in $header"
split=$(grep -n '^tide_client \*c;' "$tmp/example.txt" | cut -d: -f1)
[ -n "$split" ] || fail "the example has no 'tide_client *c;' line to start main() at"
{
    cat <<'EOF'
/* What the example leaves to its reader: its data, and die(). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
struct my_data { int step; float images[64 * 28 * 28]; int32_t labels[64]; };
#define die(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), exit(1))
EOF
    head -n $((split - 1)) "$tmp/example.txt"
    echo 'int main(void) { static struct my_data data;'
    tail -n +"$split" "$tmp/example.txt"
    echo 'return 0; }'
} >"$tmp/example.c"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Werror -Wno-unused-function -o "$tmp/example" "$tmp/example.c" $cflags $libs \
    -Wl,-rpath,"$libdir" 2>"$tmp/cc.log" || { cat "$tmp/example.c" "$tmp/cc.log" >&2; fail "the client.h example does not compile"; }
"$tmp/example" >"$tmp/example.out" 2>&1 || { cat "$tmp/example.out" >&2; fail "the client.h example failed"; }
steps=$(grep -c '^step [0-9]* loss ' "$tmp/example.out" || true)
[ "$steps" = 100 ] || { cat "$tmp/example.out" >&2; fail "the client.h example ran $steps steps, not 100"; }

# tidectl --help's examples with a budget: planned with those options (training a whole epoch
# is not what a test should spend its time on; the plan is what decides whether they fit).
"$root/bin/tidectl" --help | sed -n 's/^  tidectl train \(.*--budget.*\)$/\1/p' >"$tmp/help-examples"
[ -s "$tmp/help-examples" ] || fail "tidectl --help has no train example with --budget"
while read -r args; do
    # shellcheck disable=SC2086
    plan_args=$(echo $args | sed 's/--epochs [0-9]*//; s/--dataset [^ ]*//')
    # shellcheck disable=SC2086
    "$root/bin/tidectl" --socket "$sock" plan $plan_args >"$tmp/plan.out" 2>&1 ||
        { cat "$tmp/plan.out" >&2; fail "tidectl --help's example 'tidectl train $args' does not fit"; }
done <"$tmp/help-examples"
echo "check_install: ok (moved install, pkg-config, unit, client.h example: $steps steps, help examples)"
