#!/usr/bin/env python3
"""The Hugging Face cache tree that huggingface_hub.snapshot_download writes for strata's fake hub.

It serves the fake repositories of tests/fixtures/hub/fake_hub.json on 127.0.0.1 through the hub's
routes and headers (the C++ mock in tests/hub/mock_hub.cpp serves the same ones), has
huggingface_hub.snapshot_download fetch each of the fixture's pulls (the same files, at the same
revision, in the same order as `strata pull`) into a temporary HF_HOME, and prints a listing of the
cache tree: one line per entry under each models--*/ folder's blobs/, refs/ and snapshots/, sorted
by path ("<path>/" a folder, "<path> -> <target>" a symlink, "<path> <size>" a file, a ref's
contents after its size). HubCache.TreeMatchesHuggingfaceHub makes the same listing of the tree
strata pull writes and compares the two.

Run it where huggingface_hub is installed (nothing else is needed; no request leaves the machine):

  python3 tools/hub_listing.py -o tests/fixtures/hub/snapshot_download_listing.txt

and commit the file. `--serve` only runs the mock hub, for trying strata by hand:

  python3 tools/hub_listing.py --serve 8765 &
  HF_ENDPOINT=http://127.0.0.1:8765 build/strata pull strata-test/tiny-model
"""

import argparse
import hashlib
import json
import os
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlsplit

FIXTURE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "hub",
                       "fake_hub.json")


def git_blob_id(data: bytes) -> str:
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def lfs_pointer(data: bytes) -> bytes:
    return b"version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (
        sha256(data).encode(), len(data))


class FakeHub:
    def __init__(self, fixture):
        self.repos = {r["id"]: r for r in fixture["repos"]}
        for repo in self.repos.values():
            for f in repo["files"]:
                f["bytes"] = f["content"].encode("utf-8")
        self.blobs = {sha256(f["bytes"]): f for r in self.repos.values() for f in r["files"]
                      if f.get("lfs")}

    def commit(self, repo, revision):
        if revision == repo["commit"] or revision in repo["revisions"]:
            return repo["commit"]
        return None


def make_handler(hub: FakeHub):
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args):
            pass

        def reply(self, status, headers=(), body=b"", head=False):
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            if not head:
                self.wfile.write(body)
            self.close_connection = True

        def error(self, status, code, message, extra=(), head=False):
            headers = [("Content-Type", "application/json"), ("X-Error-Message", message)]
            if code:
                headers.append(("X-Error-Code", code))
            self.reply(status, headers + list(extra), json.dumps({"error": message}).encode(), head)

        def body(self, f, headers, head):
            data = f["bytes"]
            headers = list(headers) + [("Accept-Ranges", "bytes")]
            rng = self.headers.get("Range", "")
            if rng.startswith("bytes="):
                first, _, last = rng[6:].partition("-")
                first = int(first)
                last = min(int(last), len(data) - 1) if last else len(data) - 1
                if first >= len(data):
                    return self.error(416, "", "range not satisfiable",
                                      [("Content-Range", "bytes */%d" % len(data))], head)
                headers.append(("Content-Range", "bytes %d-%d/%d" % (first, last, len(data))))
                return self.reply(206, headers, data[first:last + 1], head)
            self.reply(200, headers, data, head)

        def route(self, head):
            path = urlsplit(self.path).path
            parts = [unquote(p) for p in path.split("/")[1:]]
            endpoint = "http://%s:%d" % self.server.server_address[:2]
            if len(parts) == 2 and parts[0] == "lfs-blobs" and parts[1] in hub.blobs:
                return self.body(hub.blobs[parts[1]], [("ETag", '"%s"' % parts[1])], head)
            if len(parts) < 4:
                return self.error(404, "", "no such route on the mock hub", head=head)
            api = parts[0] == "api" and parts[1] == "models"
            repo_id = "/".join(parts[2:4] if api else parts[0:2])
            verb = 4 if api else 2
            repo = hub.repos.get(repo_id)
            if repo is None:
                return self.error(404, "RepoNotFound", "Repository not found", head=head)
            if len(parts) <= verb + 1:
                return self.error(404, "", "no such route on the mock hub", head=head)
            commit = hub.commit(repo, parts[verb + 1])
            if commit is None:
                return self.error(404, "RevisionNotFound", "Invalid rev id: " + parts[verb + 1],
                                  head=head)
            if api and parts[verb] == "revision":
                siblings = []
                for f in repo["files"]:
                    s = {"rfilename": f["path"], "size": len(f["bytes"])}
                    if f.get("lfs"):
                        pointer = lfs_pointer(f["bytes"])
                        s["blobId"] = git_blob_id(pointer)
                        s["lfs"] = {"sha256": sha256(f["bytes"]), "size": len(f["bytes"]),
                                    "pointerSize": len(pointer)}
                    else:
                        s["blobId"] = git_blob_id(f["bytes"])
                    siblings.append(s)
                info = {"id": repo_id, "modelId": repo_id, "sha": commit, "private": False,
                        "gated": False, "disabled": False, "siblings": siblings}
                return self.reply(200, [("Content-Type", "application/json")],
                                  json.dumps(info).encode(), head)
            if api and parts[verb] == "tree":  # newer huggingface_hub lists the files this way
                entries, folders = [], set()
                for f in repo["files"]:
                    folder = os.path.dirname(f["path"])
                    while folder and folder not in folders:
                        folders.add(folder)
                        entries.append({"type": "directory", "oid": git_blob_id(folder.encode()),
                                        "size": 0, "path": folder})
                        folder = os.path.dirname(folder)
                    e = {"type": "file", "path": f["path"], "size": len(f["bytes"])}
                    if f.get("lfs"):
                        pointer = lfs_pointer(f["bytes"])
                        e["oid"] = git_blob_id(pointer)
                        e["lfs"] = {"oid": sha256(f["bytes"]), "size": len(f["bytes"]),
                                    "pointerSize": len(pointer)}
                    else:
                        e["oid"] = git_blob_id(f["bytes"])
                    entries.append(e)
                return self.reply(200, [("Content-Type", "application/json")],
                                  json.dumps(entries).encode(), head)
            if not api and parts[verb] == "resolve" and len(parts) > verb + 2:
                name = "/".join(parts[verb + 2:])
                f = next((f for f in repo["files"] if f["path"] == name), None)
                if f is None:
                    return self.error(404, "EntryNotFound", "Entry not found",
                                      [("X-Repo-Commit", commit)], head)
                if f.get("lfs"):
                    sha = sha256(f["bytes"])
                    # On another host name, as the hub sends LFS files to its CDN: huggingface_hub
                    # follows a redirect to its own host when it reads a file's metadata.
                    location = "http://localhost:%d/lfs-blobs/%s" % (self.server.server_address[1], sha)
                    return self.reply(302, [("Location", location), ("X-Repo-Commit", commit),
                                            ("X-Linked-Etag", '"%s"' % sha),
                                            ("X-Linked-Size", str(len(f["bytes"]))),
                                            ("ETag", '"%s"' % git_blob_id(lfs_pointer(f["bytes"])))],
                                      ("Found. Redirecting to " + location).encode(), head)
                return self.body(f, [("X-Repo-Commit", commit),
                                     ("ETag", '"%s"' % git_blob_id(f["bytes"]))], head)
            return self.error(404, "", "no such route on the mock hub", head=head)

        def do_GET(self):
            self.route(head=False)

        def do_HEAD(self):
            self.route(head=True)

    return Handler


def listing(cache):
    """The listing HubCache.TreeMatchesHuggingfaceHub makes (tests/hub/cache_listing.cpp)."""
    lines = []
    for repo in sorted(os.listdir(cache)):
        if not repo.startswith("models--") or not os.path.isdir(os.path.join(cache, repo)):
            continue
        for part in ("blobs", "refs", "snapshots"):
            top = os.path.join(cache, repo, part)
            if os.path.islink(top) or not os.path.isdir(top):
                continue
            rel = lambda p: os.path.relpath(p, cache).replace(os.sep, "/")
            lines.append((rel(top), rel(top) + "/"))
            for folder, dirs, files in os.walk(top):
                for name in dirs + files:
                    p = os.path.join(folder, name)
                    if os.path.islink(p):
                        lines.append((rel(p), "%s -> %s" % (rel(p), os.readlink(p))))
                    elif os.path.isdir(p):
                        lines.append((rel(p), rel(p) + "/"))
                    else:
                        line = "%s %d" % (rel(p), os.path.getsize(p))
                        if part == "refs":
                            with open(p, encoding="utf-8") as f:
                                line += " " + f.read()
                        lines.append((rel(p), line))
    return "".join(line + "\n" for _, line in sorted(lines))


def serve(hub, port):
    server = ThreadingHTTPServer(("127.0.0.1", port), make_handler(hub))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-o", "--output", help="write the listing here instead of stdout")
    parser.add_argument("--serve", type=int, metavar="PORT",
                        help="only serve the mock hub on this port until interrupted")
    args = parser.parse_args()
    with open(FIXTURE, encoding="utf-8") as f:
        fixture = json.load(f)
    hub = FakeHub(fixture)

    if args.serve is not None:
        server = serve(hub, args.serve)
        print("mock hub on http://127.0.0.1:%d" % server.server_address[1], file=sys.stderr)
        try:
            threading.Event().wait()
        except KeyboardInterrupt:
            pass
        return

    server = serve(hub, 0)
    with tempfile.TemporaryDirectory() as home:
        # huggingface_hub reads its variables when imported.
        for name in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE",
                     "HF_HUB_OFFLINE", "HF_HUB_ENABLE_HF_TRANSFER"):
            os.environ.pop(name, None)
        os.environ.update({"HF_ENDPOINT": "http://127.0.0.1:%d" % server.server_address[1],
                           "HF_HOME": home, "HF_HUB_DISABLE_XET": "1",
                           "HF_HUB_DISABLE_TELEMETRY": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"})
        import huggingface_hub

        for pull in fixture["pulls"]:
            huggingface_hub.snapshot_download(repo_id=pull["repo"], revision=pull["revision"],
                                              allow_patterns=pull["files"])
        text = "# tools/hub_listing.py with huggingface_hub %s\n" % huggingface_hub.__version__
        text += listing(os.path.join(home, "hub"))
    server.shutdown()
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main()
