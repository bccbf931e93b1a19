#!/usr/bin/env bash
# Installs what ptq needs on Debian 12 (bookworm). Idempotent and quiet when everything is
# present: apt-get runs only when a package is missing, npm only when the pinned version is not
# installed yet.
#   tools/install-deps.sh            the `ptq` tool: what tools/demo.sh (the main job) builds
#   tools/install-deps.sh --test     also the tests, benchmarks and their real components: Catch2,
#                                    Google Benchmark, clang++-14 (strict consumer builds), chromium, ONNX, Open MPI, python3-torch,
#                                    pybind11 and Python's headers (the Python module), node and npm
#                                    (what tools/test.sh needs)
#   tools/install-deps.sh --ort DIR  also ONNX Runtime for the ort_* tests: the npm package
#                                    onnxruntime-node (CPU binaries inside) into DIR/node_modules
#   tools/install-deps.sh --ci       also clang-14, the libFuzzer/sanitizer runtimes, clang-format
#                                    and clang-tidy
set -euo pipefail

ort_version=1.30.0
packages=(cmake g++ make libxtensor-dev xtl-dev libxsimd-dev nlohmann-json3-dev libcli11-dev)
test_packages=(catch2 libbenchmark-dev clang-14 chromium python3 python3-jsonschema libonnx-dev
               libprotobuf-dev python3-onnx python3-numpy libonnx-testdata libopenmpi-dev
               openmpi-bin python3-torch pybind11-dev python3-dev)
ort_dir=""
while [[ $# -gt 0 ]]; do
  case "$1" in
    --test) packages+=("${test_packages[@]}") ;;
    --ci) packages+=("${test_packages[@]}" clang-14 libclang-rt-14-dev clang-format-14 clang-tidy-14) ;;
    --ort)
      [[ $# -ge 2 ]] || { echo "install-deps.sh: --ort needs a folder" >&2; exit 2; }
      ort_dir=$2
      shift
      ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown argument: $1" >&2; exit 2 ;;
  esac
  shift
done
# node and npm for ONNX Runtime: Debian's nodejs and npm, unless a node is installed already
# (another nodejs package brings its own npm, and Debian's npm would conflict with it).
if [[ -n "$ort_dir" ]] && ! { command -v node >/dev/null && command -v npm >/dev/null; }; then
  packages+=(nodejs npm)
fi

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != ii* ]]; then
    missing+=("$pkg")
  fi
done
if [[ ${#missing[@]} -gt 0 ]]; then
  echo "install-deps.sh: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    if command -v sudo >/dev/null 2>&1; then
      sudo=(sudo)
    else
      echo "install-deps.sh: missing packages and not root: ${missing[*]}" >&2
      exit 1
    fi
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

if [[ -n "$ort_dir" ]]; then
  pkg_json="$ort_dir/node_modules/onnxruntime-node/package.json"
  if [[ -f "$pkg_json" ]] && grep -q "\"version\": \"$ort_version\"" "$pkg_json"; then
    exit 0
  fi
  echo "install-deps.sh: installing onnxruntime-node $ort_version into $ort_dir"
  mkdir -p "$ort_dir"
  # The package's install script would download the CUDA provider (and fail without it): skip
  # it; the CPU provider ships inside the package.
  ONNXRUNTIME_NODE_INSTALL=skip npm install --prefix "$ort_dir" --no-audit --no-fund \
    --loglevel=error "onnxruntime-node@$ort_version" >/dev/null
  ort_abs=$(cd "$ort_dir" && pwd)
  node -e "require('$ort_abs/node_modules/onnxruntime-node')" ||
    { echo "install-deps.sh: onnxruntime-node does not load from $ort_dir" >&2; exit 1; }
fi
