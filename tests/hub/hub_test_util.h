// Shared by the hub tests: options for a mock hub and a scratch cache, and the cache listing that
// tools/hub_listing.py makes of huggingface_hub's tree.
#pragma once

#include <filesystem>
#include <string>

#include "hub/options.h"
#include "mock_hub.h"
#include "test_util.h"

namespace strata::test {

// Options against `hub` with a fresh cache under the build tree; backoffs of milliseconds.
inline hub::HubOptions mock_options(const MockHub& hub, const std::string& scratch_name) {
  hub::HubOptions o;
  o.endpoint = hub.endpoint();
  o.cache_dir = std::filesystem::path(scratch_dir(scratch_name)) / "hub";
  o.backoff_initial_s = 0.01;
  o.backoff_max_s = 0.05;
  o.connect_timeout_s = 5;
  o.stall_timeout_s = 10;
  return o;
}

// The cache tree as text, one line per entry under each models--*/ folder's blobs/, refs/ and
// snapshots/ (huggingface_hub's own extras, .no_exist/ and trees/, and the cache's .locks/ are left
// out), sorted by path: "<path>/" for a folder, "<path> -> <target>" for a symlink (its target as
// written), "<path> <size>" for a file, with the contents of a ref after it. tools/hub_listing.py
// writes the same listing of the tree huggingface_hub.snapshot_download makes.
std::string cache_listing(const std::filesystem::path& cache_dir);

}  // namespace strata::test
