#!/usr/bin/env bash
# Installs dependencies (scripts/setup.sh), configures and builds everything into build/.
# The CUDA backend is included whenever nvcc is found (e.g. /usr/local/cuda).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
cmake --build build -j "$(nproc)"
