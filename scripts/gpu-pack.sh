#!/usr/bin/env bash
# A GPU session's one call of the device tool, prepared here (the device machine is bare and
# offline, and a call carries at most 64 MiB): a Release build in build/, then in .gpu-pack/
#   build.tar.xz  its programs, backends and ctest files (ctest names this checkout's paths;
#                 the root is in .gpu-pack/root, and scripts/gpu-run.sh links it there)
#   libs.tar.xz   every shared library they load but glibc's own, libstdc++ and libgcc_s
#                 (which a newer system has in newer versions), from Debian's packages
# Then, with the device tool: command "scripts/gpu-run.sh NVIDIA", carry [".gpu-pack"],
# timeout about 550 s. scripts/gpu-run.sh says what it runs.
#   scripts/gpu-pack.sh
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release > /dev/null
cmake --build build -j"$(nproc)" > /dev/null
rm -rf .gpu-pack
mkdir -p .gpu-pack/lib
pwd > .gpu-pack/root
progs=$(find build/bin build/lib -type f \( -perm -u+x -o -name '*.so*' \))
# what the dynamic loader resolves for them, less what every Linux has in a newer version
for f in $progs; do ldd "$f" 2> /dev/null || true; done |
  awk '/=> \// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libpthread|libdl|librt|libresolv|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' |
  grep -v "^$(pwd)/build/" |
  while read -r lib; do cp -L "$lib" .gpu-pack/lib/; done
tar -cJf .gpu-pack/libs.tar.xz -C .gpu-pack lib
rm -rf .gpu-pack/lib
tar -cJf .gpu-pack/build.tar.xz build/bin build/lib $(find build -name CTestTestfile.cmake)
du -ch .gpu-pack/*.xz | tail -n 1
echo "gpu-pack: ready; on the device: scripts/gpu-run.sh NVIDIA (carry .gpu-pack)"
