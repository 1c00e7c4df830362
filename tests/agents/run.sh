#!/usr/bin/env bash
# Runs the real-agent tests (tests/agents/*.test.mjs, or the FILES given) against a strata binary,
# the agents installed into tests/agents/node_modules from package-lock.json when needed
# (tests/npm_suite.sh); the agents then talk only to a loopback server.
# Usage: run.sh PATH_TO_STRATA [FILE.test.mjs ...]
here="$(cd "$(dirname "$0")" && pwd)"
exec bash "$here/../npm_suite.sh" "$here" "$here" "$@"
