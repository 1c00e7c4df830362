#!/usr/bin/env bash
# Runs the OpenAI SDK integration tests (tests/server/js/*.test.mjs) against a strata binary.
# Installs the SDK into tests/server/node_modules from package-lock.json when it is missing; the
# tests themselves use only loopback. Usage: run.sh PATH_TO_STRATA
set -euo pipefail
bin="$(realpath "${1:?usage: run.sh PATH_TO_STRATA}")"
here="$(cd "$(dirname "$0")" && pwd)"
if [ ! -f "$here/../node_modules/openai/package.json" ]; then
  (cd "$here/.." && npm ci --no-audit --no-fund --loglevel=error)
fi
cd "$here"
STRATA_BIN="$bin" exec node --test --test-reporter=spec *.test.mjs
