#!/usr/bin/env bash
# Runs the real-agent tests (tests/agents/*.test.mjs, or the FILES given) against a strata binary.
# Installs the agents into tests/agents/node_modules from package-lock.json (npm ci) when one of
# them is missing or not at the locked version; the agents then talk only to a loopback server.
# Usage: run.sh PATH_TO_STRATA [FILE.test.mjs ...]
set -euo pipefail
bin="$(realpath "${1:?usage: run.sh PATH_TO_STRATA [FILE.test.mjs ...]}")"
shift
here="$(cd "$(dirname "$0")" && pwd)"
installed() {  # every dependency of package.json at its version in node_modules
  (cd "$here" && node -e '
    const fs = require("fs");
    const deps = JSON.parse(fs.readFileSync("package.json", "utf8")).dependencies;
    for (const [name, version] of Object.entries(deps)) {
      const file = `node_modules/${name}/package.json`;
      if (!fs.existsSync(file) || JSON.parse(fs.readFileSync(file, "utf8")).version !== version) process.exit(1);
    }')
}
if ! installed; then
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
fi
cd "$here"
if [ $# -eq 0 ]; then set -- *.test.mjs; fi
STRATA_BIN="$bin" exec node --test --test-reporter=spec "$@"
