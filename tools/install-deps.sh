#!/usr/bin/env bash
# Installs what ptq needs to build and test on Debian 12 (bookworm). Idempotent and quiet when
# everything is present: apt-get only runs when a package is missing.
#   tools/install-deps.sh        build + test dependencies
#   tools/install-deps.sh --ci   also clang-14, libFuzzer/sanitizer runtimes, clang-format-14
set -euo pipefail

packages=(cmake g++ make libxtensor-dev xtl-dev libxsimd-dev nlohmann-json3-dev catch2
          libbenchmark-dev libcli11-dev chromium python3 python3-jsonschema
          libonnx-dev libprotobuf-dev python3-onnx python3-numpy libonnx-testdata
          libopenmpi-dev openmpi-bin)
for arg in "$@"; do
  case "$arg" in
    --ci) packages+=(clang-14 libclang-rt-14-dev clang-format-14) ;;
    -h|--help) sed -n '2,5p' "$0"; exit 0 ;;
    *) echo "install-deps.sh: unknown argument: $arg" >&2; exit 2 ;;
  esac
done

missing=()
for pkg in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Abbrev}' "$pkg" 2>/dev/null || true)
  if [[ "$status" != ii* ]]; then
    missing+=("$pkg")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

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
