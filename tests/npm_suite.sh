#!/usr/bin/env bash
# Runs node test files against a strata binary, installing the npm packages of PACKAGE_DIR from its
# package-lock.json (npm ci) first when one of them is missing or not at the locked version.
# Usage: npm_suite.sh PACKAGE_DIR TEST_DIR PATH_TO_STRATA [FILE.test.mjs ...] (none: every
# *.test.mjs of TEST_DIR)
set -euo pipefail
packages="$(cd "${1:?usage: npm_suite.sh PACKAGE_DIR TEST_DIR PATH_TO_STRATA [FILE ...]}" && pwd)"
tests="$(cd "${2:?}" && pwd)"
bin="$(realpath "${3:?}")"
shift 3
installed() {  # every dependency of package.json at its version in node_modules
  (cd "$packages" && node -e '
    const fs = require("fs");
    const deps = JSON.parse(fs.readFileSync("package.json", "utf8")).dependencies;
    for (const [name, version] of Object.entries(deps)) {
      const file = `node_modules/${name}/package.json`;
      if (!fs.existsSync(file) || JSON.parse(fs.readFileSync(file, "utf8")).version !== version) process.exit(1);
    }')
}
if ! installed; then
  (cd "$packages" && npm ci --no-audit --no-fund --loglevel=error)
fi
cd "$tests"
if [ $# -eq 0 ]; then set -- *.test.mjs; fi
STRATA_BIN="$bin" exec node --test --test-reporter=spec "$@"
