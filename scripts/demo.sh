#!/usr/bin/env bash
# Builds everything and generates text with a small real model (stories260K from the shared
# fixtures) on the CPU. Extra arguments go to `strata generate`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/build.sh
model="${STRATA_DEMO_MODEL:-../shared/fixtures/models/stories260K/stories260K.gguf}"
exec ./build/strata generate --model "$model" --prompt "Once upon a time" --max-tokens 200 "$@"
