#!/usr/bin/env bash
# Run on the development machine, from the repository root, before a GPU machine call: downloads the
# Debian packages the GPU image lacks into .devdeps/ (git-ignored), which tools/device_check.sh
# unpacks there. The shared stage script's default list lacks utf8proc, OpenBLAS and Boost (Asio
# and Beast, for the HTTP server), and names cpp-httplib, which strata no longer uses, so this
# names every package strata needs.
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash ../shared/device/stage-debs.sh \
  libboost1.81-dev libpcre2-dev libpcre2-8-0 libxxhash-dev libxxhash0 \
  libtomlplusplus-dev libtomlplusplus3 libspdlog-dev libspdlog1.10 libfmt-dev libfmt9 \
  libutf8proc-dev libutf8proc2 libopenblas-dev libopenblas-pthread-dev libopenblas0-pthread libopenblas0
