#!/usr/bin/env bash
# Runs the SDK integration tests (tests/server/js/*.test.mjs, or the FILES given) against a strata
# binary, the SDKs installed into tests/server/node_modules from package-lock.json when needed
# (tests/npm_suite.sh); the tests themselves use only loopback.
# Usage: run.sh PATH_TO_STRATA [FILE.test.mjs ...]
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../../npm_suite.sh" "$here/.." "$here" "$@"
