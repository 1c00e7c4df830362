#!/usr/bin/env bash
# Builds everything (scripts/build.sh installs the dependencies with apt) and starts the
# OpenAI-compatible server on the built-in model (models/strata-demo) at http://127.0.0.1:8080.
# Extra arguments go to `strata serve` (e.g. --model PATH, --port N, --api-key KEY).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
exec ./build/strata serve --port "${STRATA_PORT:-8080}" "$@"
