#!/usr/bin/env bash
# Packs what bench/gpu_report.sh runs (kfrun, kfbench, kftrain, gpu_reduce_bench, gpu_test, and
# the Python package's runtime with fmt's headers, from which section 6 builds the extension
# module for the GPU machine's Python) with the non-CUDA shared libraries they need (fmt,
# protobuf, OpenSSL, cpp-httplib, ...) into one folder that can be carried to a GPU machine
# lacking this project's build dependencies (its own CUDA runtime, cuBLAS and NCCL are used
# there: they are too big to carry). On the GPU machine:
#   source BUNDLE/env.sh && bench/gpu_report.sh BUNDLE out/gpu_report
# Usage: bench/gpu_bundle.sh [BUILD_DIR] [BUNDLE_DIR]   (defaults: build/release, build/gpu_bundle)
set -euo pipefail
BUILD=${1:-build/release}
BUNDLE=${2:-build/gpu_bundle}
rm -rf "$BUNDLE"
mkdir -p "$BUNDLE/apps" "$BUNDLE/bench" "$BUNDLE/tests" "$BUNDLE/lib"
bins=(apps/kfrun apps/kfbench apps/kftrain bench/gpu_reduce_bench tests/gpu_test)
for b in "${bins[@]}"; do
  [[ -x "$BUILD/$b" ]] || { echo "gpu_bundle: $BUILD/$b missing (build it with KF_WITH_CUDA=ON)" >&2; exit 2; }
  cp "$BUILD/$b" "$BUNDLE/$b"
done
# The Python package without its extension modules (built for this machine's Python).
runtime="$BUILD/python/kungfu/libkungfu_runtime.so"
if [[ -f "$runtime" ]]; then
  (cd "$BUILD/python" && find kungfu -name '*.py' -o -name libkungfu_runtime.so) | while read -r f; do
    mkdir -p "$BUNDLE/python/$(dirname "$f")"
    cp "$BUILD/python/$f" "$BUNDLE/python/$f"
  done
  mkdir -p "$BUNDLE/include"
  cp -r /usr/include/fmt "$BUNDLE/include/"
  bins+=(python/kungfu/libkungfu_runtime.so)
fi
# Libraries outside glibc, libstdc++/libgcc and CUDA (the GPU machine has its own of those).
skip='^(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|ld-linux.*|linux-vdso|libcuda|libcudart|libcublas|libcublasLt|libnccl)\.so'
for b in "${bins[@]}"; do
  ldd "$BUILD/$b" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ ! "$name" =~ $skip ]]; then cp -L "$path" "$BUNDLE/lib/$name"; fi
done
cat >"$BUNDLE/env.sh" <<'EOF'
# Source this on the GPU machine: the bundle's libraries first, then the machine's CUDA runtime,
# cuBLAS and NCCL (CUDA 13): /usr/local/cuda, or the pip wheels of its Python (nvidia-*).
_kf_bundle=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
_kf_dirs="$_kf_bundle/lib"
for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
  [[ -d "$d" ]] && _kf_dirs="$_kf_dirs:$d"
done
_kf_py=$(python3 - 2>/dev/null <<'PY'
import os, site, glob
roots = site.getsitepackages() + [site.getusersitepackages()]
want = ("libcudart.so.13", "libcublas.so.13", "libcublasLt.so.13", "libnccl.so.2")
dirs = []
for r in roots:
    for w in want:
        for f in glob.glob(os.path.join(r, "nvidia", "**", w), recursive=True):
            d = os.path.dirname(f)
            if d not in dirs:
                dirs.append(d)
print(":".join(dirs))
PY
)
[[ -n "$_kf_py" ]] && _kf_dirs="$_kf_dirs:$_kf_py"
export LD_LIBRARY_PATH="$_kf_dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
unset _kf_bundle _kf_dirs _kf_py d
EOF
echo "gpu_bundle: $(du -sh "$BUNDLE" | cut -f1) in $BUNDLE"
