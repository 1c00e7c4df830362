#!/usr/bin/env bash
# Installs every Debian package strata needs to build and test. Idempotent; works as root or through sudo.
set -euo pipefail

packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates
  nlohmann-json3-dev libboost1.81-dev libssl-dev libcurl4-openssl-dev libpcre2-dev libutf8proc-dev
  libspdlog-dev libfmt-dev libcli11-dev libtomlplusplus-dev libxxhash-dev libzstd-dev
  libopenblas-dev libgtest-dev libgmock-dev libbenchmark-dev
  clang libclang-rt-14-dev curl
)
# Node (for the OpenAI SDK client tests) usually comes with the image; Debian's nodejs only if absent.
command -v node >/dev/null || packages+=(nodejs npm)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "setup: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo_cmd=(sudo)
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
