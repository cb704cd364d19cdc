#!/usr/bin/env bash
# Installs the build into a fresh prefix and builds examples/c against it twice, with
# pkg-config and with find_package(dsv4), then runs both programs. Also checks that the
# prefix holds the public headers, libdsv4.so with its soname links, the CMake package and
# dsv4.pc, and no header but include/dsv4/*.h. Usage: test_install.sh <build dir> <source dir> <work dir>
set -u
build=$1 src=$2 work=$3
example=$src/examples/c
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
fail=0
step() { echo "-- $*"; }
bad() { echo "FAIL: $*"; fail=1; }

step "cmake --install $build --prefix $prefix"
cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; bad "install"; exit 1; }
for f in include/dsv4/dsv4.h include/dsv4/kvcache.h include/dsv4/numerics.h lib/libdsv4.so \
         lib/cmake/dsv4/dsv4Config.cmake lib/cmake/dsv4/dsv4ConfigVersion.cmake lib/cmake/dsv4/dsv4Targets.cmake \
         lib/pkgconfig/dsv4.pc; do
  [ -e "$prefix/$f" ] || bad "$f not installed"
done
ls "$prefix"/lib/libdsv4.so.* >/dev/null 2>&1 || bad "no versioned libdsv4.so.N"
"$prefix/bin/dsv4_plan" --model v4.1-flash --mem 64GiB --stage-tp 2,4 --json >"$work/plan.json" 2>&1 \
  || bad "the installed dsv4_plan does not run: $(cat "$work/plan.json")"
[ "$(readlink "$prefix/lib/libdsv4.so")" != "" ] || bad "lib/libdsv4.so is not the soname link"
installed=$(cd "$prefix/include" && find . -type f | sort)
public=$(cd "$src/include" && find . -type f -name '*.h' | sort)
[ "$installed" = "$public" ] || bad "installed headers differ from include/: $(diff <(echo "$public") <(echo "$installed") | grep '^[<>]' | tr '\n' ' ')"

step "pkg-config build"
if command -v pkg-config >/dev/null 2>&1; then
  flags=$(PKG_CONFIG_PATH=$prefix/lib/pkgconfig pkg-config --cflags --libs dsv4) || bad "pkg-config dsv4"
  echo "   pkg-config --cflags --libs dsv4: $flags"
  # shellcheck disable=SC2086
  if cc -std=c11 -Wall -Wextra -Werror "$example/kv_roundtrip.c" $flags -lm -o "$work/kv_roundtrip_pc"; then
    LD_LIBRARY_PATH=$prefix/lib "$work/kv_roundtrip_pc" || bad "the pkg-config build's program failed"
  else
    bad "the example does not compile with pkg-config's flags"
  fi
else
  echo "   pkg-config not found: skipped"
fi

step "find_package build"
if cmake -S "$example" -B "$work/example" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Release \
     -DCMAKE_C_FLAGS="-Wall -Wextra -Werror" >"$work/example.log" 2>&1 &&
   cmake --build "$work/example" >>"$work/example.log" 2>&1; then
  "$work/example/kv_roundtrip" || bad "the find_package build's program failed"
else
  cat "$work/example.log"; bad "the example does not build with find_package(dsv4)"
fi

[ $fail -eq 0 ] && echo "PASS: installed headers, library, CMake package and dsv4.pc; examples/c built both ways and ran"
exit $fail
