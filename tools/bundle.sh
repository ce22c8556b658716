#!/usr/bin/env bash
# Copies what the GPU steps need into one folder, for a GPU machine that has
# the CUDA driver but neither protobuf nor Abseil:
#   bash tools/bundle.sh [BUILD_DIR] [DEST]     (defaults: build, .device_bin)
# DEST gets the stripped executables that need a GPU (static protobuf, Abseil
# and cudart; the CPU-only tests and cake_speed stay behind),
# libcake.so and libcake_spans.so, and DEST/deps the shared libraries
# libcake.so needs beyond libc/libstdc++ (protobuf, Abseil); DEST.tgz is the
# same folder gzipped (a third of its size, for copying). There, run with
#   tar xzf DEST.tgz   (if only the tarball was copied)
#   LD_LIBRARY_PATH=DEST/deps CAKE_BIN=DEST CAKE_LIB=DEST bash tools/gpu_check.sh OUT
set -euo pipefail
build=${1:-build}
dest=${2:-.device_bin}
rm -rf "$dest"
mkdir -p "$dest/deps"
for exe in "$build"/bin/*; do
  case $(basename "$exe") in
    planner_tests | ops_tests | bench_tests | cake_speed) continue ;;
  esac
  strip -o "$dest/$(basename "$exe")" "$exe"
done
for lib in "$build"/lib/*.so; do
  strip --strip-unneeded -o "$dest/$(basename "$lib")" "$lib"
done
# Shared dependencies outside the C and C++ runtimes.
ldd "$build/lib/libcake.so" | awk '$3 ~ /^\// {print $3}' |
  grep -vE '/(libc|libm|libz|libstdc\+\+|libgcc_s|ld-linux[^/]*|libpthread|libdl|librt)\.so' |
  while read -r dep; do
    cp -L "$dep" "$dest/deps/$(basename "$dep")"
  done
tar czf "$dest.tgz" "$dest"
du -sh "$dest" "$dest.tgz" | awk '{print "bundle: " $1 " in " $2}'
