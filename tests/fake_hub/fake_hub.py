#!/usr/bin/python3
"""fake_hub.py - a fake Hugging Face Hub on loopback that speaks the real download protocol.

Python 3 standard library only. Built to section 9 of shared/reference/hf-hub-protocol.md.

  fake_hub.py --repos DIR [--host 127.0.0.1] [--api-port 0] [--cdn-port 0] [--cdn-host H]
              [--lfs-threshold BYTES] [--lfs-pattern GLOB]... [--page-size N] [--page-size-expand N]
              [--token TOKEN]... [--gated ORG/NAME[=TOK,TOK]]... [--private ORG/NAME[=TOK,TOK]]...
              [--gate-api] [--renamed OLD/NAME=NEW/NAME]... [--lfs-redirect-status 302|307]
              [--cdn-url-ttl SECS] [--secret S] [--log FILE] [--fault SPEC]... [--verbose]

Two listeners (HTTP/1.1, keep-alive): the API + /resolve port and the "CDN" port. Once both
listen and every repo is loaded and hashed it prints ONE JSON line on stdout and flushes:
  {"api": "http://127.0.0.1:P1", "cdn": "http://127.0.0.1:P2", "pid": N}
SIGTERM / SIGINT: stop both listeners, exit 0.

Repo folder scheme (--repos DIR), models only, repo ids are ORG/NAME:
  DIR/ORG/NAME/REVDIR/<files...>      one directory per revision (a commit); nested folders allowed
  DIR/ORG/NAME/refs.json              optional:
      {"branches": {"main": "REVDIR", "refs/pr/1": "pr1"},
       "tags": {"v1.0": "REVDIR"},
       "commits": {"REVDIR": "<40 hex>"}}
  Without refs.json every REVDIR is a branch of the same name. Without "commits" a REVDIR's commit
  is sha1("ORG/NAME/REVDIR") (hex). A revision is a branch, a tag or a 40-hex commit (percent-
  encoded revisions such as refs%2Fpr%2F1 are decoded); "HEAD" means the branch "main".
  A file "X.synthetic" holding {"size": N, "seed": S} is served as "X": N deterministic bytes (see
  SyntheticBlob). Its hashes are cached next to it in "X.synthetic.hashes" (keyed by size+seed).
  A file is LFS when size >= --lfs-threshold (default 10000000) or its name matches an LFS pattern
  (*.safetensors, *.bin, *.gguf, plus --lfs-pattern). LFS: ETag/X-Linked-Etag = sha256, 302 to the
  CDN. Regular: ETag = git blob sha1, served with 200 by /resolve.

Routes (API port; repo ids found by the /revision/, /tree/, /paths-info/, /resolve/ markers):
  GET /api/models/REPO[/revision/REV][?blobs=true]   sha, siblings (size, blobId, lfs with blobs)
  GET /api/models/REPO/tree/REV[/PATH]?recursive=&expand=   Link: <abs>; rel="next" pagination
  POST /api/models/REPO/paths-info/REV   form (paths=a&paths=b&expand=) or JSON {paths, expand}
  GET /api/models/REPO/refs, GET /api/whoami-v2
  HEAD|GET /REPO/resolve/REV/FILE   regular: 200/206/416/304 with ETag "<git sha1>", X-Repo-Commit;
      LFS: 302 (--lfs-redirect-status) to CDN/repos/AA/BB/<sha256>?response-content-disposition=
      ..&X-Fake-Origin=..&Expires=<unix>&Key-Pair-Id=..&Signature=<hmac>, X-Linked-Etag, X-Linked-Size
  GET /REPO/raw/REV/FILE (LFS pointer text for LFS files), GET /api/resolve-cache/models/REPO/COMMIT/FILE
  Errors: X-Error-Code, X-Error-Message and {"error": ...} as section 2.4 of the reference.
CDN port: GET|HEAD /repos/AA/BB/<sha256>?...: 200/206/416, Accept-Ranges: bytes, no X-Repo-Commit.
  Authorization header present: 400 (logged as a violation, also on stderr); bad or missing
  signature: 403 AccessDenied; expired: 403 "Request has expired"; S3-style XML bodies.

Access control: --token lists the valid tokens. Any other Bearer token: 401 "Invalid credentials in
Authorization header". --gated REPO: /resolve needs a valid token (all valid tokens have access,
or only the listed ones; others get 403 GatedRepo). --gate-api: the metadata API is gated too.
--private REPO: behaves as missing (401 without token, 404 with a token) except for listed tokens
(or all valid tokens when none is listed). --renamed OLD=NEW: every route of OLD answers 307 with
a path-only Location naming NEW; a mis-cased repo id answers 307 to the canonical id.

Control API (API port, never faulted, never logged, no auth):
  GET  /_fake/log[?since=SEQ][&wait=SECS]
                                request log (JSON list, entries with seq > SEQ), once no request
                                is being answered (waits up to SECS, default 2)
  GET  /_fake/violations        log entries that carry a "violation"
  GET  /_fake/faults            active faults with their remaining counts
  POST /_fake/faults            a fault list, or {"faults": [...], "replace": true|false}; appends
                                unless replace; answers the active list. 400 on a bad fault.
  DELETE /_fake/faults          clear faults
  POST /_fake/reset             clear faults and log (seq restarts at 1), once the requests being
                                answered are done (up to 2 s)
  POST /_fake/reload            rescan --repos
  GET  /_fake/info              {"api", "cdn", "repos": {id: {branches, tags, revisions:
                                {REVDIR: {commit, files: {path: {size, lfs, sha256, oid, etag}}}}}}}

Fault object: {"kind": K, "count": N|null (null = unlimited), "path": GLOB (default "*"),
  "port": "api"|"cdn"|null, "method": "GET"|"HEAD"|...|null, ...kind parameters}.
GLOB is an fnmatch pattern ("*" crosses "/") tried on the decoded request path and, for a CDN
request, also on the origin "/ORG/NAME/resolve/COMMIT/FILE" the signed URL was made for.
Each application to a request consumes one count; of several faults of one kind the first
(in list order) with counts left applies. Kinds:
  rate_limit_429     429 + Retry-After: retry_after (1), RateLimit: "BUCKET";r=0;t=retry_after,
                     RateLimit-Policy: "fixed window";"BUCKET";q=quota (3000);w=300
  fail_5xx           status (503; 500/502/503/504 allowed)
  drop_after_bytes   bytes (0): send that many bytes of a file body then close the connection
  slow               bytes_per_s: throttle a file body
  ignore_range       answer 200 with the full file body despite Range
  (file bodies: /resolve of regular files, the CDN, /raw, /api/resolve-cache; never JSON)
  wrong_bytes        offset (size//2): flip that byte of the file body; consumed only by bodies
                     that contain the offset
  expired_cdn_url    /resolve hands out CDN URLs that expired 60 s ago
  no_repo_commit     /resolve omits X-Repo-Commit (the JFrog proxy bug)
  weak_etag          /resolve sends W/"..." (ETag for regular files, X-Linked-Etag for LFS)
  wrong_linked_size  /resolve sends X-Linked-Size + delta (1)
  resolve_cache_redirect  regular files: 307 to the relative /api/resolve-cache/... URL
  bad_location       /resolve answers 302 with Location: location (default "file:///etc/passwd"),
                     as it is: another scheme (ftp://, file://) or a loop back to /resolve
  bad_commit         /api/models/REPO/revision/REV answers "sha": sha (default a 40-character
                     "../../../../../../../../../../../../../x") instead of the commit
  bad_oid            tree pages: the files matching file (GLOB on the file's path, default "*")
                     get oid (default "../../../x") as their lfs.oid (LFS files) or oid (regular
                     files), and size (any JSON value) as their size when given
  bad_size           tree pages: the files matching file get size (any JSON value, default 2**63)
                     as their size (and lfs.size)
  bad_etag           /resolve sends etag (default "../../../x") as the ETag (regular files) or
                     X-Linked-Etag (LFS files), quoted
  bad_linked_size    /resolve of an LFS file sends X-Linked-Size: size (a string, default "abc")
  huge_body          API answers (revision info, tree pages, /api/... JSON): 200 with a JSON object
                     of bytes (default 300 MiB: a "pad" string) streamed 1 MiB at a time (never
                     built in memory), with its Content-Length: an answer no Hub sends
  link_loop          tree pages: Link rel="next" points back at the page itself (mode "url", the
                     default), or (mode "cursor") at another URL with the same cursor every time,
                     or (mode "next") at the URL next, as it is (file:///etc/passwd, ftp://...)
On the command line, --fault takes the JSON object or "kind,key=value,...", for example
  --fault drop_after_bytes,bytes=1000,count=1,path=*.safetensors

Log entry (GET /_fake/log, --log FILE as JSON lines): {"seq" (arrival order), "time", "port": "api"|"cdn",
  "method", "path" (raw, no query), "query", "host", "status", "range", "authorization": bool,
  "token": null|"valid"|"invalid", "bytes_sent" (body bytes), "faults": [kinds], "dropped": bool,
  "violation": null|"authorization_sent_to_cdn", "user_agent", "headers" (Authorization redacted)}
"""

import argparse
import base64
import fnmatch
import hashlib
import hmac
import json
import os
import re
import secrets
import signal
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MiB = 1 << 20
FIXED_DATE = "2026-01-01T00:00:00.000Z"
DEFAULT_LFS_PATTERNS = ["*.safetensors", "*.bin", "*.gguf"]
FAULT_KINDS = {
    "rate_limit_429", "fail_5xx", "drop_after_bytes", "slow", "ignore_range", "wrong_bytes",
    "expired_cdn_url", "no_repo_commit", "weak_etag", "wrong_linked_size", "resolve_cache_redirect",
    "bad_location", "bad_commit", "bad_oid", "bad_size", "bad_etag", "bad_linked_size", "link_loop",
    "huge_body",
}
BODY_FAULTS = ("drop_after_bytes", "slow")


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lfs_pointer(sha256, size):
    return ("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n" % (sha256, size)).encode()


def truthy(value):
    return value is not None and value.strip().lower() in ("1", "true", "yes", "on")


# ---------------------------------------------------------------------------------------------
# Blobs: the bytes of one file.


class DiskBlob:
    """A plain file, read at startup to hash it, then streamed from disk."""

    def __init__(self, path):
        self.path = path
        self.size = os.path.getsize(path)
        h256 = hashlib.sha256()
        h1 = hashlib.sha1(b"blob %d\0" % self.size)
        with open(path, "rb") as f:
            while True:
                b = f.read(MiB)
                if not b:
                    break
                h256.update(b)
                h1.update(b)
        self.sha256 = h256.hexdigest()
        self.git_sha1 = h1.hexdigest()

    def pieces(self, start, end):
        with open(self.path, "rb") as f:
            f.seek(start)
            left = end - start
            while left > 0:
                b = f.read(min(MiB, left))
                if not b:
                    raise IOError("%s shrank while serving it" % self.path)
                left -= len(b)
                yield b


class SyntheticBlob:
    """N pseudo-random bytes from a seed, generated on the fly.

    BLOCK = SHAKE-256("berth-fake-hub:" + str(seed)) truncated to 1 MiB. Chunk i (bytes
    [i MiB, (i+1) MiB)) is BLOCK rotated left by (i * 40503) % 1 MiB bytes, with its first
    8 bytes replaced by i as a big-endian uint64, so no two chunks are equal. The file is the
    concatenation of chunks, cut at N bytes.
    """

    def __init__(self, size, seed, cache_path=None, need_git_sha1=True):
        self.size = int(size)
        self.seed = seed
        if self.size < 0:
            raise ValueError("negative size")
        block = hashlib.shake_256(b"berth-fake-hub:" + str(seed).encode()).digest(MiB)
        self.block2 = block + block
        self.git_sha1 = None  # only regular (non-LFS) files need it; skipped for LFS (saves ~1.4 s/GiB)
        if cache_path and os.path.exists(cache_path):
            try:
                with open(cache_path) as f:
                    c = json.load(f)
                if c.get("size") == self.size and c.get("seed") == seed and c.get("generator") == 1 and \
                        (c.get("git_sha1") or not need_git_sha1):
                    self.sha256, self.git_sha1 = c["sha256"], c.get("git_sha1")
                    return
            except (OSError, ValueError, KeyError):
                pass
        h256 = hashlib.sha256()
        h1 = hashlib.sha1(b"blob %d\0" % self.size) if need_git_sha1 else None
        for b in self.pieces(0, self.size):
            h256.update(b)
            if h1:
                h1.update(b)
        self.sha256 = h256.hexdigest()
        self.git_sha1 = h1.hexdigest() if h1 else None
        if cache_path:
            try:
                tmp = cache_path + ".tmp%d" % os.getpid()
                with open(tmp, "w") as f:
                    json.dump({"size": self.size, "seed": seed, "generator": 1, "sha256": self.sha256,
                               "git_sha1": self.git_sha1}, f)
                os.replace(tmp, cache_path)
            except OSError as e:
                print("fake_hub: cannot cache hashes in %s: %s" % (cache_path, e), file=sys.stderr)

    def chunk(self, i):
        k = (i * 40503) % MiB
        return struct.pack(">Q", i) + self.block2[k + 8:k + MiB]

    def pieces(self, start, end):
        pos = start
        while pos < end:
            i = pos // MiB
            off = pos - i * MiB
            n = min(MiB - off, end - pos)
            c = self.chunk(i)
            yield c[off:off + n] if (off or n != MiB) else c
            pos += n


# ---------------------------------------------------------------------------------------------
# Repos.


class RepoFile:
    def __init__(self, path, blob, lfs):
        self.path = path
        self.blob = blob
        self.size = blob.size
        self.lfs = lfs
        self.sha256 = blob.sha256
        if lfs:
            pointer = lfs_pointer(blob.sha256, blob.size)
            self.oid = git_blob_sha1(pointer)
            self.pointer = pointer
        else:
            self.oid = blob.git_sha1
            self.pointer = None

    @property
    def etag(self):
        return self.sha256 if self.lfs else self.oid


class Revision:
    def __init__(self, dirname, commit, files):
        self.dirname = dirname
        self.commit = commit
        self.files = dict(sorted(files.items()))
        dirs = set()
        for p in self.files:
            parts = p.split("/")
            for n in range(1, len(parts)):
                dirs.add("/".join(parts[:n]))
        self.dirs = sorted(dirs)
        self.tree_oids = {}
        for d in sorted(self.dirs, key=lambda x: -x.count("/")):
            lines = sorted(e for e in self.children(d))
            self.tree_oids[d] = hashlib.sha1(("tree %s\n" % d + "\n".join(lines)).encode()).hexdigest()

    def children(self, d):
        prefix = d + "/" if d else ""
        out = set()
        for p in list(self.files) + self.dirs:
            if p.startswith(prefix) and "/" not in p[len(prefix):] and p != d:
                out.add(p)
        return out


class Repo:
    def __init__(self, repo_id, revisions, branches, tags):
        self.id = repo_id
        self.revisions = revisions  # dirname -> Revision
        self.branches = branches  # name -> dirname
        self.tags = tags
        self.by_commit = {r.commit: r for r in revisions.values()}

    def resolve(self, rev):
        if rev == "HEAD":  # the default branch, as the real Hub (huggingface.js modelInfo sends it)
            rev = "main" if "main" in self.branches else (sorted(self.branches) or [None])[0]
        if rev in self.branches:
            return self.revisions.get(self.branches[rev])
        if rev in self.tags:
            return self.revisions.get(self.tags[rev])
        if re.fullmatch(r"[0-9a-f]{40}", rev or ""):
            return self.by_commit.get(rev)
        return None


def load_repos(root, lfs_threshold, lfs_patterns):
    repos = {}
    for org in sorted(os.listdir(root)):
        org_dir = os.path.join(root, org)
        if not os.path.isdir(org_dir):
            continue
        for name in sorted(os.listdir(org_dir)):
            repo_dir = os.path.join(org_dir, name)
            if not os.path.isdir(repo_dir):
                continue
            repo_id = "%s/%s" % (org, name)
            refs = {}
            refs_path = os.path.join(repo_dir, "refs.json")
            if os.path.exists(refs_path):
                with open(refs_path) as f:
                    refs = json.load(f)
            dirnames = sorted(d for d in os.listdir(repo_dir) if os.path.isdir(os.path.join(repo_dir, d)))
            commits = refs.get("commits", {})
            revisions = {}
            for d in dirnames:
                commit = commits.get(d) or hashlib.sha1(("%s/%s" % (repo_id, d)).encode()).hexdigest()
                if not re.fullmatch(r"[0-9a-f]{40}", commit):
                    raise ValueError("%s: commit of %s is not 40 lowercase hex" % (refs_path, d))
                revisions[d] = Revision(d, commit, load_files(os.path.join(repo_dir, d), lfs_threshold,
                                                              lfs_patterns))
            branches = refs.get("branches", {d: d for d in dirnames}) if refs else {d: d for d in dirnames}
            tags = refs.get("tags", {})
            for ref, d in list(branches.items()) + list(tags.items()):
                if d not in revisions:
                    raise ValueError("%s: ref %s names missing directory %s" % (refs_path, ref, d))
            repos[repo_id] = Repo(repo_id, revisions, branches, tags)
    return repos


def is_lfs(rel, size, lfs_threshold, lfs_patterns):
    base = rel.rsplit("/", 1)[-1]
    return size >= lfs_threshold or any(fnmatch.fnmatchcase(base, p) or fnmatch.fnmatchcase(rel, p)
                                        for p in lfs_patterns)


def load_files(rev_dir, lfs_threshold, lfs_patterns):
    files = {}
    for dirpath, dirnames, filenames in os.walk(rev_dir, followlinks=True):
        dirnames.sort()
        for fn in sorted(filenames):
            full = os.path.join(dirpath, fn)
            rel = os.path.relpath(full, rev_dir).replace(os.sep, "/")
            if rel.endswith(".synthetic.hashes") or ".synthetic.hashes.tmp" in rel:
                continue
            if rel.endswith(".synthetic"):
                with open(full) as f:
                    spec = json.load(f)
                rel = rel[:-len(".synthetic")]
                lfs = is_lfs(rel, int(spec["size"]), lfs_threshold, lfs_patterns)
                blob = SyntheticBlob(spec["size"], spec.get("seed", 0), full + ".hashes", need_git_sha1=not lfs)
            else:
                blob = DiskBlob(full)
                lfs = is_lfs(rel, blob.size, lfs_threshold, lfs_patterns)
            files[rel] = RepoFile(rel, blob, lfs)
    return files


# ---------------------------------------------------------------------------------------------
# Faults.


def parse_fault(spec):
    if isinstance(spec, str):
        s = spec.strip()
        if s.startswith("{"):
            spec = json.loads(s)
        else:
            parts = s.split(",")
            spec = {"kind": parts[0]}
            for p in parts[1:]:
                k, _, v = p.partition("=")
                if re.fullmatch(r"-?\d+", v):
                    v = int(v)
                elif re.fullmatch(r"-?\d+\.\d*", v):
                    v = float(v)
                elif v == "null":
                    v = None
                spec[k] = v
    if not isinstance(spec, dict) or spec.get("kind") not in FAULT_KINDS:
        raise ValueError("fault needs a kind among %s: %r" % (sorted(FAULT_KINDS), spec))
    f = dict(spec)
    f.setdefault("count", None)
    f.setdefault("path", "*")
    f.setdefault("port", None)
    f.setdefault("method", None)
    if f["count"] is not None and (not isinstance(f["count"], int) or f["count"] < 0):
        raise ValueError("fault count must be a non-negative integer or null: %r" % spec)
    if f["port"] not in (None, "api", "cdn"):
        raise ValueError("fault port must be api, cdn or null: %r" % spec)
    if f["kind"] == "fail_5xx" and int(f.get("status", 503)) not in (500, 502, 503, 504):
        raise ValueError("fail_5xx status must be 500, 502, 503 or 504")
    if f["kind"] == "slow" and float(f.get("bytes_per_s", 0)) <= 0:
        raise ValueError("slow needs bytes_per_s > 0")
    f["remaining"] = f["count"]
    f["hits"] = 0
    return f


# ---------------------------------------------------------------------------------------------
# The hub state shared by both listeners.


class Hub:
    def __init__(self, opts):
        self.opts = opts
        self.lock = threading.Lock()
        # Requests being answered: the log is read only once they are recorded, so a client
        # that got its answer and asks for the log right away finds its request in it.
        self.in_flight = 0
        self.idle = threading.Condition(self.lock)
        self.faults = [parse_fault(s) for s in opts.fault]
        self.log = []
        self.seq = 0
        self.secret = (opts.secret or secrets.token_hex(16)).encode()
        self.tokens = set(opts.token)
        self.gated = self._acl(opts.gated)
        self.private = self._acl(opts.private)
        self.renamed = {}
        for r in opts.renamed:
            old, _, new = r.partition("=")
            if not new:
                raise ValueError("--renamed wants OLD/NAME=NEW/NAME: %r" % r)
            self.renamed[old] = new
        self.lfs_patterns = DEFAULT_LFS_PATTERNS + list(opts.lfs_pattern)
        self.log_file = open(opts.log, "a") if opts.log else None
        self.api_base = self.cdn_base = None
        self.reload()

    @staticmethod
    def _acl(items):
        out = {}
        for it in items:
            repo, _, toks = it.partition("=")
            out[repo] = set(t for t in toks.split(",") if t) or None
        return out

    def reload(self):
        repos = load_repos(self.opts.repos, self.opts.lfs_threshold, self.lfs_patterns)
        blobs = {}
        for repo in repos.values():
            for rev in repo.revisions.values():
                for f in rev.files.values():
                    if f.lfs:
                        blobs[f.sha256] = f.blob
        with self.lock:
            self.repos = repos
            self.repos_lower = {k.lower(): k for k in repos}
            self.lfs_blobs = blobs

    def has_access(self, acl, repo_id, token):
        allowed = acl[repo_id]
        return token is not None and token in self.tokens and (allowed is None or token in allowed)

    # faults
    def take_fault(self, kinds, port, method, targets, pred=None):
        with self.lock:
            for f in self.faults:
                if f["kind"] not in kinds:
                    continue
                if f["remaining"] is not None and f["remaining"] <= 0:
                    continue
                if f["port"] and f["port"] != port:
                    continue
                if f["method"] and f["method"].upper() != method:
                    continue
                if not any(fnmatch.fnmatchcase(t, f["path"]) for t in targets):
                    continue
                if pred is not None and not pred(f):
                    continue
                if f["remaining"] is not None:
                    f["remaining"] -= 1
                f["hits"] += 1
                return dict(f)
        return None

    def faults_view(self):
        with self.lock:
            return [dict(f) for f in self.faults]

    def begin(self, entry):
        # The sequence number is given on arrival, so the log lists requests in the order they
        # came (a client's next request comes after the answer to its last), whichever handler
        # thread finishes first.
        with self.lock:
            self.in_flight += 1
            self.seq += 1
            entry["seq"] = self.seq

    def wait_idle(self, timeout=2.0):
        with self.lock:
            self.idle.wait_for(lambda: self.in_flight == 0, timeout)

    def record(self, entry):
        with self.lock:
            self.in_flight = max(0, self.in_flight - 1)
            self.idle.notify_all()
            at = len(self.log)
            while at > 0 and self.log[at - 1]["seq"] > entry["seq"]:
                at -= 1
            self.log.insert(at, entry)
            if self.log_file:
                self.log_file.write(json.dumps(entry) + "\n")
                self.log_file.flush()
        if entry.get("violation"):
            print("fake_hub: VIOLATION %s: %s %s" % (entry["violation"], entry["method"], entry["path"]),
                  file=sys.stderr, flush=True)

    def sign(self, path, params):
        msg = path + "?" + urllib.parse.urlencode(params)
        return hmac.new(self.secret, msg.encode(), hashlib.sha256).hexdigest()

    def info(self):
        repos = {}
        for rid, repo in self.repos.items():
            repos[rid] = {
                "branches": {b: repo.revisions[d].commit for b, d in repo.branches.items()},
                "tags": {t: repo.revisions[d].commit for t, d in repo.tags.items()},
                "revisions": {d: {"commit": r.commit, "files": {
                    p: {"size": f.size, "lfs": f.lfs, "sha256": f.sha256, "oid": f.oid, "etag": f.etag}
                    for p, f in r.files.items()}} for d, r in repo.revisions.items()},
            }
        return {"api": self.api_base, "cdn": self.cdn_base, "repos": repos}


class Done(Exception):
    """A response has been sent; stop routing."""


def parse_range(header, size):
    """None: no usable range (serve 200). "unsat": 416. Else (start, end_exclusive)."""
    if header is None:
        return None
    m = re.fullmatch(r"\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*", header)
    if not m or (m.group(1) == "" and m.group(2) == ""):
        return None  # malformed or multi-range: ignored, like S3
    a, b = m.group(1), m.group(2)
    if a == "":
        k = int(b)
        if k == 0 or size == 0:
            return "unsat"
        return (max(0, size - k), size)
    start = int(a)
    if b != "" and int(b) < start:
        return None
    if start >= size:
        return "unsat"
    end = size if b == "" else min(int(b) + 1, size)
    return (start, end)


def content_disposition(filename):
    base = filename.rsplit("/", 1)[-1]
    return "inline; filename*=UTF-8''%s; filename=\"%s\";" % (urllib.parse.quote(base), base.replace('"', ""))


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fake-hub/1"
    hub = None  # set per listener
    role = None

    def log_message(self, fmt, *args):
        if self.hub.opts.verbose:
            sys.stderr.write("fake_hub[%s]: %s\n" % (self.role, fmt % args))

    def do_GET(self):
        self.dispatch("GET")

    def do_HEAD(self):
        self.dispatch("HEAD")

    def do_POST(self):
        self.dispatch("POST")

    def do_PUT(self):
        self.dispatch("PUT")

    def do_DELETE(self):
        self.dispatch("DELETE")

    # -- plumbing ---------------------------------------------------------------------------

    def dispatch(self, method):
        self.method = method
        raw = self.path
        if raw.startswith("http://") or raw.startswith("https://"):
            raw = "/" + raw.split("/", 3)[3] if raw.count("/") >= 3 else "/"
        self.rawpath, _, self.query = raw.partition("?")
        self.params = urllib.parse.parse_qs(self.query, keep_blank_values=True)
        n = int(self.headers.get("Content-Length") or 0)
        self.req_body = self.rfile.read(n) if n > 0 else b""
        auth = self.headers.get("Authorization")
        self.token = None
        self.token_state = None
        if auth is not None:
            m = re.fullmatch(r"\s*Bearer\s+(\S+)\s*", auth, re.I)
            self.token = m.group(1) if m else None
            self.token_state = "valid" if (self.token and self.token in self.hub.tokens) else "invalid"
        control = self.role == "api" and self.rawpath.startswith("/_fake/")
        hdrs = {k: ("<redacted>" if k.lower() == "authorization" else v) for k, v in self.headers.items()}
        self.entry = {
            "time": time.time(), "port": self.role, "method": method, "path": self.rawpath,
            "query": self.query, "host": self.headers.get("Host"), "status": None,
            "range": self.headers.get("Range"), "authorization": auth is not None,
            "token": self.token_state, "bytes_sent": 0, "faults": [], "dropped": False,
            "violation": None, "user_agent": self.headers.get("User-Agent"), "headers": hdrs,
        }
        if not control:
            self.hub.begin(self.entry)
        try:
            if control:
                self.route_control()
            elif self.role == "api":
                self.route_api()
            else:
                self.route_cdn()
        except Done:
            pass
        except (BrokenPipeError, ConnectionResetError, socket.timeout):
            self.close_connection = True
            self.entry["dropped"] = True
        except Exception as e:  # a bug in the fake: answer 500 and say so
            import traceback
            traceback.print_exc()
            if self.entry["status"] is None:
                try:
                    self.send_json(500, {"error": "fake_hub internal error: %s" % e})
                except Exception:
                    self.close_connection = True
            else:
                self.close_connection = True
        finally:
            if not control:
                self.hub.record(self.entry)

    def start(self, status, headers, length):
        self.send_response(status)
        for k, v in headers:
            self.send_header(k, v)
        self.send_header("Content-Length", str(length))
        self.end_headers()
        self.entry["status"] = status

    def targets(self):
        return [urllib.parse.unquote(self.rawpath)] + getattr(self, "extra_targets", [])

    def body_faults(self):
        if self.method == "HEAD":
            return {}
        out = {}
        for kind in BODY_FAULTS:
            f = self.hub.take_fault((kind,), self.role, self.method, self.targets())
            if f:
                out[kind] = f
                self.entry["faults"].append(kind)
        return out

    def write_body(self, pieces, faults):
        drop = faults.get("drop_after_bytes")
        limit = int(drop.get("bytes", 0)) if drop else None
        slow = faults.get("slow")
        rate = float(slow["bytes_per_s"]) if slow else None
        t0 = time.monotonic()
        sent = 0
        if limit == 0:
            self.drop()
        for piece in pieces:
            if limit is not None and sent + len(piece) >= limit:
                piece = piece[:limit - sent]
            if rate:
                step = max(1, int(rate / 20))
                for i in range(0, len(piece), step):
                    part = piece[i:i + step]
                    delay = (sent + len(part)) / rate - (time.monotonic() - t0)
                    if delay > 0:
                        time.sleep(delay)
                    self.wfile.write(part)
                    sent += len(part)
                    self.entry["bytes_sent"] = sent
            else:
                self.wfile.write(piece)
                sent += len(piece)
                self.entry["bytes_sent"] = sent
            if limit is not None and sent >= limit:
                self.drop()

    def drop(self):
        self.entry["dropped"] = True
        self.close_connection = True
        try:
            self.wfile.flush()
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        raise Done()

    def send_bytes(self, status, body, ctype, headers=()):
        headers = list(headers) + [("Content-Type", ctype)]
        if self.role == "api":
            headers.append(("X-Request-Id", "Root=fake-%d" % threading.get_ident()))
        self.start(status, headers, len(body))
        if self.method != "HEAD" and body:
            self.wfile.write(body)
            self.entry["bytes_sent"] = len(body)
        raise Done()

    def send_huge(self, size):
        """200 with a JSON object of `size` bytes (a long "pad" string), written 1 MiB at a time."""
        head, tail = b'{"sha": "' + b"a" * 40 + b'", "pad": "', b'"}'
        piece = b"x" * MiB

        def pieces():
            left = size - len(head) - len(tail)
            yield head
            while left > 0:
                chunk = piece[:left]
                left -= len(chunk)
                yield chunk
            yield tail

        self.start(200, [("Content-Type", "application/json; charset=utf-8")], size)
        self.write_body(pieces(), {})
        raise Done()

    def send_json(self, status, obj, headers=()):
        self.send_bytes(status, json.dumps(obj).encode(), "application/json; charset=utf-8", headers)

    def hub_error(self, status, code, message, headers=()):
        h = list(headers) + [("X-Error-Message", message)]
        if code:
            h.append(("X-Error-Code", code))
        self.send_json(status, {"error": message}, h)

    def base_url(self):
        host = self.headers.get("Host")
        return "http://" + host if host else self.hub.api_base

    # -- control ----------------------------------------------------------------------------

    def route_control(self):
        hub = self.hub
        p = self.rawpath
        if p in ("/_fake/log", "/_fake/violations") and self.method == "GET":
            # ?wait=SECS: how long to wait for requests still being answered (a client killed
            # mid-download: its connections end when the server next writes to them).
            try:
                wait = min(max(float(self.params.get("wait", ["2"])[0]), 0.0), 120.0)
            except ValueError:
                wait = 2.0
            hub.wait_idle(wait)
        if p == "/_fake/log" and self.method == "GET":
            since = int(self.params.get("since", ["0"])[0])
            with hub.lock:
                entries = [e for e in hub.log if e["seq"] > since]
            self.send_json(200, entries)
        if p == "/_fake/violations" and self.method == "GET":
            with hub.lock:
                entries = [e for e in hub.log if e.get("violation")]
            self.send_json(200, entries)
        if p == "/_fake/faults" and self.method == "GET":
            self.send_json(200, hub.faults_view())
        if p == "/_fake/faults" and self.method == "DELETE":
            with hub.lock:
                hub.faults = []
            self.send_json(200, [])
        if p == "/_fake/faults" and self.method == "POST":
            try:
                body = json.loads(self.req_body or b"[]")
                replace = False
                if isinstance(body, dict) and "faults" in body:
                    replace = bool(body.get("replace", False))
                    body = body["faults"]
                elif isinstance(body, dict):
                    body = [body]
                new = [parse_fault(f) for f in body]
            except (ValueError, TypeError, AttributeError) as e:
                self.send_json(400, {"error": str(e)})
            with hub.lock:
                hub.faults = new if replace else hub.faults + new
            self.send_json(200, hub.faults_view())
        if p == "/_fake/reset" and self.method == "POST":
            # A request still being answered (its client already has the body) would be logged
            # after the reset, into the next test's log: let it finish first.
            hub.wait_idle(2.0)
            with hub.lock:
                hub.faults = []
                hub.log = []
                hub.seq = 0
            self.send_json(200, {"ok": True})
        if p == "/_fake/reload" and self.method == "POST":
            try:
                hub.reload()
            except (OSError, ValueError) as e:
                self.send_json(500, {"error": str(e)})
            self.send_json(200, {"ok": True, "repos": sorted(hub.repos)})
        if p == "/_fake/info" and self.method == "GET":
            self.send_json(200, hub.info())
        self.send_json(404, {"error": "unknown control endpoint %s %s" % (self.method, p)})

    # -- API port ---------------------------------------------------------------------------

    def status_faults(self, bucket):
        f = self.hub.take_fault(("rate_limit_429", "fail_5xx"), self.role, self.method, self.targets())
        if not f:
            return
        self.entry["faults"].append(f["kind"])
        if f["kind"] == "rate_limit_429":
            ra = int(f.get("retry_after", 1))
            b = f.get("bucket", bucket)
            q = int(f.get("quota", 3000))
            self.hub_error(429, None, "You have been rate-limited; you can retry this action in about %d seconds. "
                           "Please log in or use your HF access token to increase your rate limits." % ra,
                           [("Retry-After", str(ra)), ("RateLimit", '"%s";r=0;t=%d' % (b, ra)),
                            ("RateLimit-Policy", '"fixed window";"%s";q=%d;w=300' % (b, q))])
        status = int(f.get("status", 503))
        msg = {500: "Internal Error - We're working hard to fix this as soon as possible!",
               502: "Bad Gateway", 503: "Service Unavailable", 504: "Gateway Timeout"}[status]
        self.send_bytes(status, msg.encode(), "text/plain; charset=utf-8")

    def route_api(self):
        p = self.rawpath
        if p.startswith("/api/"):
            bucket = "api"
        elif "/resolve/" in p:
            bucket = "resolvers"
        else:
            bucket = "pages"
        self.status_faults(bucket)
        if p.startswith("/api/"):
            huge = self.hub.take_fault(("huge_body",), "api", self.method, self.targets())
            if huge:
                self.entry["faults"].append("huge_body")
                self.send_huge(int(huge.get("bytes", 300 << 20)))
        if self.token_state == "invalid":
            self.hub_error(401, None, "Invalid credentials in Authorization header")
        if p == "/api/whoami-v2":
            if self.token_state != "valid":
                self.hub_error(401, None, "Invalid credentials in Authorization header")
            self.send_json(200, {"type": "user", "name": "fake-user", "fullname": "Fake User",
                                 "auth": {"type": "access_token", "accessToken": {"role": "read"}}})
        if p.startswith("/api/resolve-cache/models/"):
            self.route_resolve_cache()
        if p.startswith("/api/models/"):
            self.route_models(p[len("/api/models/"):])
        if p.startswith("/api/datasets/") or p.startswith("/api/spaces/"):
            self.repo_missing()
        for marker, fn in (("/resolve/", self.route_resolve), ("/raw/", self.route_raw)):
            i = p.find(marker)
            if i > 1:
                repo_raw, rest = p[1:i], p[i + len(marker):]
                rev_raw, _, file_raw = rest.partition("/")
                fn(repo_raw, urllib.parse.unquote(rev_raw), urllib.parse.unquote(file_raw))
        self.hub_error(404, None, "Sorry, we can't find the page you are looking for.")

    def repo_missing(self):
        if self.token_state == "valid":
            self.hub_error(404, "RepoNotFound", "Repository not found")
        self.hub_error(401, "RepoNotFound", "Invalid username or password.")

    def access_repo(self, repo_raw, gate):
        """The Repo, or a response: 307 for renamed / mis-cased ids, RepoNotFound, GatedRepo."""
        hub = self.hub
        repo_id = urllib.parse.unquote(repo_raw).strip("/")
        canonical = hub.renamed.get(repo_id)
        if canonical is None and repo_id not in hub.repos and repo_id.lower() in hub.repos_lower:
            canonical = hub.repos_lower[repo_id.lower()]
        if canonical is not None:
            loc = self.rawpath.replace("/" + repo_raw, "/" + canonical, 1) + ("?" + self.query if self.query else "")
            self.send_bytes(307, ("Temporary Redirect. Redirecting to %s" % loc).encode(),
                            "text/plain; charset=utf-8", [("Location", loc)])
        repo = hub.repos.get(repo_id)
        if repo is None or (repo_id in hub.private and not hub.has_access(hub.private, repo_id, self.token)):
            self.repo_missing()
        if repo_id in hub.gated and (gate or hub.opts.gate_api) and \
                not hub.has_access(hub.gated, repo_id, self.token):
            if self.token_state != "valid":
                self.hub_error(401, "GatedRepo", "Access to model %s is restricted. You must have access to it and "
                               "be authenticated to access it. Please log in." % repo_id)
            self.hub_error(403, "GatedRepo", "Access to model %s is restricted and you are not in the authorized "
                           "list. Visit %s/%s to ask for access." % (repo_id, self.base_url(), repo_id))
        return repo

    def revision(self, repo, rev):
        r = repo.resolve(rev)
        if r is None:
            self.hub_error(404, "RevisionNotFound", "Invalid rev id: %s" % rev)
        return r

    def route_models(self, after):
        cands = []
        for marker in ("/revision/", "/tree/", "/paths-info/", "/refs"):
            i = after.find(marker)
            if i > 0 and (marker != "/refs" or after[i:] in ("/refs", "/refs/")):
                cands.append((i, marker))
        if not cands:
            if self.method not in ("GET", "HEAD"):
                self.hub_error(405, None, "Method not allowed")
            repo = self.access_repo(after, gate=False)
            rev = self.revision(repo, "main")
            self.send_model_info(repo, rev)
        i, marker = min(cands)
        repo = self.access_repo(after[:i], gate=False)
        rest = after[i + len(marker):]
        if marker == "/refs":
            self.send_json(200, {
                "branches": [{"name": b, "ref": "refs/heads/" + b, "targetCommit": repo.revisions[d].commit}
                             for b, d in sorted(repo.branches.items())],
                "tags": [{"name": t, "ref": "refs/tags/" + t, "targetCommit": repo.revisions[d].commit}
                         for t, d in sorted(repo.tags.items())],
                "converts": []})
        rev_raw, _, path_raw = rest.partition("/")
        rev = self.revision(repo, urllib.parse.unquote(rev_raw))
        path = urllib.parse.unquote(path_raw).strip("/")
        if marker == "/revision/":
            self.send_model_info(repo, rev)
        if marker == "/tree/":
            self.send_tree(repo, rev, path)
        if marker == "/paths-info/":
            if self.method != "POST":
                self.hub_error(405, None, "Method not allowed")
            self.send_paths_info(repo, rev)

    def send_model_info(self, repo, rev):
        blobs = truthy((self.params.get("blobs") or [None])[0])
        siblings = []
        for f in rev.files.values():
            s = {"rfilename": f.path}
            if blobs:
                s["size"] = f.size
                s["blobId"] = f.oid
                if f.lfs:
                    s["lfs"] = {"size": f.size, "sha256": f.sha256, "pointerSize": len(f.pointer)}
            siblings.append(s)
        gated = "manual" if repo.id in self.hub.gated else False
        sha = rev.commit
        bad = self.hub.take_fault(("bad_commit",), "api", self.method, self.targets())
        if bad:
            sha = bad.get("sha", "../../../../../../../../../../../../../x")
        self.send_json(200, {
            "_id": hashlib.sha1(repo.id.encode()).hexdigest()[:24], "id": repo.id, "modelId": repo.id,
            "author": repo.id.split("/")[0], "sha": sha, "lastModified": FIXED_DATE,
            "createdAt": FIXED_DATE, "private": repo.id in self.hub.private, "gated": gated,
            "disabled": False, "downloads": 0, "likes": 0, "tags": [], "library_name": "transformers",
            "siblings": siblings, "spaces": [],
            "usedStorage": sum(f.size for f in rev.files.values())})

    def entry_json(self, rev, path, expand):
        if path in rev.files:
            f = rev.files[path]
            e = {"type": "file", "oid": f.oid, "size": f.size, "path": path}
            if f.lfs:
                e["lfs"] = {"oid": f.sha256, "size": f.size, "pointerSize": len(f.pointer)}
            if expand:
                e["lastCommit"] = {"id": rev.commit, "title": "Upload folder using huggingface_hub",
                                   "date": FIXED_DATE}
                e["securityFileStatus"] = {"status": "safe", "avScan": {"status": "safe", "virusNames": None},
                                           "pickleImportScan": {"status": "unscanned", "pickleImports": []}}
            return e
        e = {"type": "directory", "oid": rev.tree_oids[path], "size": 0, "path": path}
        if expand:
            e["lastCommit"] = {"id": rev.commit, "title": "Upload folder using huggingface_hub", "date": FIXED_DATE}
        return e

    def send_tree(self, repo, rev, path):
        recursive = truthy((self.params.get("recursive") or [None])[0])
        expand = truthy((self.params.get("expand") or [None])[0])
        if path and path not in rev.dirs:
            self.hub_error(404, "EntryNotFound", "%s does not exist on \"%s\"" % (path, rev.commit),
                           [("X-Repo-Commit", rev.commit)])
        prefix = path + "/" if path else ""
        if recursive:
            paths = [p for p in list(rev.files) + rev.dirs if p.startswith(prefix) and p != path]
        else:
            paths = list(rev.children(path))
        paths.sort()
        size = self.hub.opts.page_size_expand if expand else self.hub.opts.page_size
        cursor = (self.params.get("cursor") or [None])[0]
        offset = 0
        if cursor:
            try:
                offset = int(json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))["offset"])
            except (ValueError, KeyError, TypeError):
                self.hub_error(400, None, "Invalid cursor")
        page = [self.entry_json(rev, p, expand) for p in paths[offset:offset + size]]
        headers = []
        for kind in ("bad_oid", "bad_size"):
            bad = self.hub.take_fault((kind,), "api", self.method, self.targets())
            if not bad:
                continue
            self.entry["faults"].append(kind)
            for e in page:
                if e["type"] != "file" or not fnmatch.fnmatchcase(e["path"], bad.get("file", "*")):
                    continue
                if kind == "bad_oid":
                    (e["lfs"] if "lfs" in e else e)["oid"] = bad.get("oid", "../../../x")
                    if "size" in bad:
                        e["size"] = bad["size"]
                        if "lfs" in e:
                            e["lfs"]["size"] = bad["size"]
                else:
                    e["size"] = bad.get("size", 2 ** 63)
                    if "lfs" in e:
                        e["lfs"]["size"] = e["size"]
        loop = self.hub.take_fault(("link_loop",), "api", self.method, self.targets())
        if loop:
            self.entry["faults"].append("link_loop")
            if loop.get("mode") == "next":
                url = loop.get("next", "file:///etc/passwd")
            elif loop.get("mode", "url") == "cursor":
                q = [(k, v) for k, vs in self.params.items() if k not in ("cursor", "n") for v in vs]
                same = base64.urlsafe_b64encode(json.dumps({"offset": 0}).encode()).decode().rstrip("=")
                q += [("cursor", same), ("n", str(loop["hits"]))]
                url = "%s%s?%s" % (self.base_url(), self.rawpath, urllib.parse.urlencode(q))
            else:
                url = "%s%s%s" % (self.base_url(), self.rawpath, "?" + self.query if self.query else "")
            headers.append(("Link", '<%s>; rel="next"' % url))
            self.send_json(200, page, headers)
        if offset + size < len(paths):
            nxt = base64.urlsafe_b64encode(json.dumps({"offset": offset + size}).encode()).decode().rstrip("=")
            q = [(k, v) for k, vs in self.params.items() if k != "cursor" for v in vs] + [("cursor", nxt)]
            headers.append(("Link", '<%s%s?%s>; rel="next"' % (self.base_url(), self.rawpath,
                                                                 urllib.parse.urlencode(q))))
        self.send_json(200, page, headers)

    def send_paths_info(self, repo, rev):
        ctype = (self.headers.get("Content-Type") or "").lower()
        try:
            if "json" in ctype:
                body = json.loads(self.req_body or b"{}")
                paths = body.get("paths") or []
                expand = bool(body.get("expand"))
            else:
                form = urllib.parse.parse_qs(self.req_body.decode(), keep_blank_values=True)
                paths = form.get("paths", [])
                expand = truthy((form.get("expand") or [None])[0])
        except (ValueError, AttributeError):
            self.hub_error(400, None, "Invalid body")
        out = []
        for p in paths:
            p = str(p).strip("/")
            if p in rev.files or p in rev.tree_oids:
                out.append(self.entry_json(rev, p, expand))
        self.send_json(200, out)

    def file_or_404(self, rev, path):
        f = rev.files.get(path)
        if f is None:
            self.hub_error(404, "EntryNotFound", "Entry not found", [("X-Repo-Commit", rev.commit)])
        return f

    def route_raw(self, repo_raw, rev_name, path):
        if self.method not in ("GET", "HEAD"):
            self.hub_error(405, None, "Method not allowed")
        repo = self.access_repo(repo_raw, gate=True)
        rev = self.revision(repo, rev_name)
        f = self.file_or_404(rev, path)
        if f.lfs:
            self.send_bytes(200, f.pointer, "text/plain; charset=utf-8", [("X-Repo-Commit", rev.commit)])
        self.serve_blob(f.blob, [("X-Repo-Commit", rev.commit), ("ETag", '"%s"' % f.oid)], f.path)

    def route_resolve(self, repo_raw, rev_name, path):
        if self.method not in ("GET", "HEAD"):
            self.hub_error(405, None, "Method not allowed")
        hub = self.hub
        repo = self.access_repo(repo_raw, gate=True)
        rev = self.revision(repo, rev_name)
        f = self.file_or_404(rev, path)
        targets = self.targets()

        def fault(kind):
            x = hub.take_fault((kind,), "api", self.method, targets)
            if x:
                self.entry["faults"].append(kind)
            return x

        bad = fault("bad_location")
        if bad:
            loc = bad.get("location", "file:///etc/passwd")
            self.send_bytes(302, ("Found. Redirecting to %s" % loc).encode(), "text/plain; charset=utf-8",
                            [("Location", loc), ("X-Repo-Commit", rev.commit)])
        headers = []
        if not fault("no_repo_commit"):
            headers.append(("X-Repo-Commit", rev.commit))
        weak = fault("weak_etag")
        bad_etag = fault("bad_etag")
        tag = ('W/"%s"' if weak else '"%s"') % (bad_etag.get("etag", "../../../x") if bad_etag else f.etag)
        headers.append(("Accept-Ranges", "bytes"))
        if f.lfs:
            now = int(time.time())
            expires = now - 60 if fault("expired_cdn_url") else now + hub.opts.cdn_url_ttl
            cdn_path = "/repos/%s/%s/%s" % (f.sha256[:2], f.sha256[2:4], f.sha256)
            params = [("response-content-disposition", content_disposition(f.path)),
                      ("X-Fake-Origin", "/%s/resolve/%s/%s" % (repo.id, rev.commit, f.path)),
                      ("Expires", str(expires)), ("Key-Pair-Id", "K3FAKEHUBKEYPAIR")]
            params.append(("Signature", hub.sign(cdn_path, params)))
            url = hub.cdn_base + cdn_path + "?" + urllib.parse.urlencode(params)
            linked_size = f.size
            wls = fault("wrong_linked_size")
            if wls:
                linked_size += int(wls.get("delta", 1))
            bls = fault("bad_linked_size")
            if bls:
                linked_size = bls.get("size", "abc")
            headers += [("Location", url), ("X-Linked-Etag", tag), ("X-Linked-Size", str(linked_size)),
                        ("ETag", '"%s"' % hashlib.md5(("redirect:" + f.sha256).encode()).hexdigest()),
                        ("Content-Disposition", content_disposition(f.path)), ("Vary", "Origin, Accept")]
            status = hub.opts.lfs_redirect_status
            word = "Found" if status == 302 else "Temporary Redirect"
            self.send_bytes(status, ("%s. Redirecting to %s" % (word, url)).encode(), "text/plain; charset=utf-8",
                            headers)
        if fault("resolve_cache_redirect"):
            loc = "/api/resolve-cache/models/%s/%s/%s?%s=&etag=%s" % (
                repo.id, rev.commit, urllib.parse.quote(f.path),
                urllib.parse.quote("/%s/resolve/%s/%s" % (repo.id, rev_name, f.path), safe=""),
                urllib.parse.quote('"%s"' % f.oid, safe=""))
            self.send_bytes(307, ("Temporary Redirect. Redirecting to %s" % loc).encode(),
                            "text/plain; charset=utf-8", [("Location", loc)])
        headers += [("ETag", tag), ("Content-Disposition", content_disposition(f.path)), ("Vary", "Origin, Accept")]
        inm = self.headers.get("If-None-Match")
        if inm and inm.strip().lstrip("W/").strip('"') == f.etag:
            self.send_bytes(304, b"", "text/plain", headers)
        self.serve_blob(f.blob, headers, f.path)

    def route_resolve_cache(self):
        # /api/resolve-cache/models/ORG/NAME/COMMIT/FILE
        rest = self.rawpath[len("/api/resolve-cache/models/"):]
        m = re.match(r"([^/]+/[^/]+)/([0-9a-f]{40})/(.+)$", rest)
        if not m:
            self.hub_error(404, None, "Sorry, we can't find the page you are looking for.")
        repo = self.access_repo(m.group(1), gate=True)
        rev = self.revision(repo, m.group(2))
        f = self.file_or_404(rev, urllib.parse.unquote(m.group(3)))
        self.serve_blob(f.blob, [("X-Repo-Commit", rev.commit), ("ETag", '"%s"' % f.etag),
                                 ("Accept-Ranges", "bytes"), ("Content-Disposition", content_disposition(f.path))],
                        f.path)

    def serve_blob(self, blob, headers, name, ctype=None):
        size = blob.size
        if ctype is None:
            ctype = "application/json; charset=utf-8" if name.endswith(".json") else (
                "text/plain; charset=utf-8" if name.endswith((".txt", ".md")) else "application/octet-stream")
        headers = [h for h in headers if h[0] != "Accept-Ranges"] + [("Accept-Ranges", "bytes"),
                                                                     ("Content-Type", ctype)]
        rng = parse_range(self.headers.get("Range"), size)
        if rng is not None and self.method == "GET":
            if self.hub.take_fault(("ignore_range",), self.role, self.method, self.targets()):
                self.entry["faults"].append("ignore_range")
                rng = None
        if rng == "unsat":
            body = (b"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>InvalidRange</Code>"
                    b"<Message>The requested range is not satisfiable</Message></Error>")
            self.start(416, [("Content-Range", "bytes */%d" % size), ("Content-Type", "application/xml")],
                       len(body))
            if self.method != "HEAD":
                self.wfile.write(body)
                self.entry["bytes_sent"] = len(body)
            raise Done()
        if rng is None:
            start, end, status = 0, size, 200
        else:
            start, end = rng
            status = 206
            headers.append(("Content-Range", "bytes %d-%d/%d" % (start, end - 1, size)))
        self.start(status, headers, end - start)
        if self.method == "HEAD" or end == start:
            raise Done()
        pieces = blob.pieces(start, end)
        wrong = self.hub.take_fault(
            ("wrong_bytes",), self.role, self.method, self.targets(),
            pred=lambda f: start <= min(int(f.get("offset", size // 2)), size - 1) < end)
        if wrong:
            self.entry["faults"].append("wrong_bytes")
            pieces = corrupt(pieces, start, min(int(wrong.get("offset", size // 2)), size - 1))
        self.write_body(pieces, self.body_faults())
        raise Done()

    # -- CDN port ---------------------------------------------------------------------------

    def route_cdn(self):
        hub = self.hub
        params = urllib.parse.parse_qsl(self.query, keep_blank_values=True)
        origin = dict(params).get("X-Fake-Origin")
        self.extra_targets = [origin] if origin else []
        if self.headers.get("Authorization") is not None:
            self.entry["violation"] = "authorization_sent_to_cdn"
            self.cdn_error(400, "InvalidArgument", "Only one auth mechanism allowed; only the X-Amz-Algorithm query "
                           "parameter, Signature query string parameter or the Authorization header should be "
                           "specified. (fake_hub: the CDN got an Authorization header: a Hub token must never be "
                           "sent to the CDN)")
        self.status_faults("cdn")
        if self.method not in ("GET", "HEAD"):
            self.cdn_error(405, "MethodNotAllowed", "The specified method is not allowed against this resource.")
        m = re.fullmatch(r"/repos/([0-9a-f]{2})/([0-9a-f]{2})/([0-9a-f]{64})", self.rawpath)
        if not m or m.group(3)[:2] != m.group(1) or m.group(3)[2:4] != m.group(2):
            self.cdn_error(404, "NoSuchKey", "The specified key does not exist.")
        sig = [v for k, v in params if k == "Signature"]
        unsigned = [(k, v) for k, v in params if k != "Signature"]
        if len(sig) != 1 or not hmac.compare_digest(sig[0], hub.sign(self.rawpath, unsigned)):
            self.cdn_error(403, "AccessDenied", "Invalid signature")
        try:
            expires = int(dict(unsigned).get("Expires", "0"))
        except ValueError:
            expires = 0
        if expires < time.time():
            self.cdn_error(403, "AccessDenied", "Request has expired")
        blob = hub.lfs_blobs.get(m.group(3))
        if blob is None:
            self.cdn_error(404, "NoSuchKey", "The specified key does not exist.")
        headers = [("ETag", '"%s"' % hashlib.md5(m.group(3).encode()).hexdigest()),
                   ("Last-Modified", "Thu, 01 Jan 2026 00:00:00 GMT"),
                   ("Cache-Control", "public, max-age=604800, immutable")]
        disp = dict(unsigned).get("response-content-disposition")
        if disp:
            headers.append(("Content-Disposition", disp))
        self.serve_blob(blob, headers, "", ctype="binary/octet-stream")

    def cdn_error(self, status, code, message):
        body = ("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code><Message>%s</Message></Error>"
                % (code, message)).encode()
        self.send_bytes(status, body, "application/xml")


def corrupt(pieces, start, offset):
    pos = start
    for p in pieces:
        if pos <= offset < pos + len(p):
            b = bytearray(p)
            b[offset - pos] ^= 0xFF
            p = bytes(b)
        pos += len(p)
        yield p


class Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128

    def handle_error(self, request, client_address):
        if isinstance(sys.exc_info()[1], (ConnectionError, socket.timeout)):
            return  # a client that hangs up between requests is normal
        super().handle_error(request, client_address)


def make_server(hub, role, host, port):
    handler = type("%sHandler" % role.capitalize(), (Handler,), {"hub": hub, "role": role})
    return Server((host, port), handler)


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Fake Hugging Face Hub for tests (see the module docstring).")
    ap.add_argument("--repos", required=True)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--api-port", type=int, default=0)
    ap.add_argument("--cdn-port", type=int, default=0)
    ap.add_argument("--cdn-host", default=None, help="host name put in CDN URLs (default: --host)")
    ap.add_argument("--lfs-threshold", type=int, default=10_000_000)
    ap.add_argument("--lfs-pattern", action="append", default=[])
    ap.add_argument("--page-size", type=int, default=50)
    ap.add_argument("--page-size-expand", type=int, default=None)
    ap.add_argument("--token", action="append", default=[])
    ap.add_argument("--gated", action="append", default=[])
    ap.add_argument("--private", action="append", default=[])
    ap.add_argument("--gate-api", action="store_true")
    ap.add_argument("--renamed", action="append", default=[])
    ap.add_argument("--lfs-redirect-status", type=int, choices=(302, 307), default=302)
    ap.add_argument("--cdn-url-ttl", type=int, default=3600)
    ap.add_argument("--secret", default=None)
    ap.add_argument("--log", default=None)
    ap.add_argument("--fault", action="append", default=[])
    ap.add_argument("--verbose", action="store_true")
    opts = ap.parse_args(argv)
    if opts.page_size < 1:
        ap.error("--page-size must be >= 1")
    if opts.page_size_expand is None:
        opts.page_size_expand = opts.page_size
    return opts


def main(argv=None):
    opts = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        hub = Hub(opts)
    except (OSError, ValueError, KeyError) as e:
        print("fake_hub: %s" % e, file=sys.stderr)
        return 2
    api = make_server(hub, "api", opts.host, opts.api_port)
    cdn = make_server(hub, "cdn", opts.host, opts.cdn_port)
    hub.api_base = "http://%s:%d" % (opts.host, api.server_address[1])
    hub.cdn_base = "http://%s:%d" % (opts.cdn_host or opts.host, cdn.server_address[1])
    # The handler only appends: Event.set() in a handler deadlocks when the signal lands while
    # the main thread holds the same Event's lock (in Event.wait), and the hub never exits.
    stop = []
    signal.signal(signal.SIGTERM, lambda *a: stop.append(True))
    signal.signal(signal.SIGINT, lambda *a: stop.append(True))
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
               for s in (api, cdn)]
    for t in threads:
        t.start()
    print(json.dumps({"api": hub.api_base, "cdn": hub.cdn_base, "pid": os.getpid()}), flush=True)
    while not stop:
        time.sleep(0.1)
    for s in (api, cdn):
        s.shutdown()
        s.server_close()
    if hub.log_file:
        hub.log_file.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
