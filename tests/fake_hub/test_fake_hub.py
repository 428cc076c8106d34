"""Tests of the fake Hub (fake_hub.py): endpoints, errors, CDN, Range, faults, log. Stdlib unittest.

Run from this folder: /usr/bin/python3 -B -m unittest -v test_fake_hub
"""

import hashlib
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.parse

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import fake_hub  # noqa: E402
import make_test_repos  # noqa: E402

PY = sys.executable or "/usr/bin/python3"
GOOD, OTHER = "hf_good_token", "hf_other_token"
MiB = 1 << 20
BIG_SIZE = 5 * MiB + 12345
REPOS = None  # built once in setUpModule


def setUpModule():
    global REPOS, _tmp
    _tmp = tempfile.mkdtemp(prefix="fake-hub-test-")
    REPOS = os.path.join(_tmp, "repos")
    make_test_repos.build(REPOS, many=100, big_size=BIG_SIZE)


def tearDownModule():
    shutil.rmtree(_tmp, ignore_errors=True)


def git_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def disk(*parts):
    with open(os.path.join(REPOS, *parts), "rb") as f:
        return f.read()


class HubProc:
    """fake_hub.py as a child process; reads its JSON start line."""

    def __init__(self, *args, repos=None):
        self.log_path = os.path.join(_tmp, "log-%d-%d.jsonl" % (os.getpid(), time.monotonic_ns()))
        cmd = [PY, "-B", os.path.join(HERE, "fake_hub.py"), "--repos", repos or REPOS, "--log", self.log_path]
        self.proc = subprocess.Popen(cmd + list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError("fake_hub did not start: " + self.proc.stderr.read())
        self.start = json.loads(line)
        self.api = self.start["api"]
        self.cdn = self.start["cdn"]

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            self.proc.wait(10)
        self.proc.stdout.close()
        self.proc.stderr.close()

    def request(self, method, url, headers=None, body=None, conn=None):
        """One request, redirects NOT followed. url: absolute or a path on the API port."""
        if not url.startswith("http"):
            url = self.api + url
        u = urllib.parse.urlsplit(url)
        own = conn is None
        c = conn or http.client.HTTPConnection(u.hostname, u.port, timeout=20)
        path = u.path + ("?" + u.query if u.query else "")
        c.request(method, path, body=body, headers=headers or {})
        r = c.getresponse()
        try:
            data = r.read()
        except http.client.IncompleteRead as e:
            data = e.partial
            r.incomplete = True
        r.body = data
        if own:
            c.close()
        return r

    def get(self, url, **kw):
        return self.request("GET", url, **kw)

    def head(self, url, **kw):
        return self.request("HEAD", url, **kw)

    def json(self, url, **kw):
        r = self.get(url, **kw)
        assert r.status == 200, (url, r.status, r.body[:300])
        return json.loads(r.body)

    def ctl(self, method, path, obj=None):
        body = json.dumps(obj).encode() if obj is not None else None
        r = self.request(method, "/_fake/" + path, body=body, headers={"Content-Type": "application/json"})
        return r.status, json.loads(r.body)

    def faults(self, *faults):
        st, out = self.ctl("POST", "faults", list(faults))
        assert st == 200, out
        return out

    def log(self):
        return self.ctl("GET", "log")[1]


class FakeHubTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.hub = HubProc("--token", GOOD, "--token", OTHER, "--gated", "org/gated=" + GOOD,
                          "--private", "org/private=" + GOOD, "--renamed", "old/tiny=org/tiny",
                          "--page-size", "7", "--lfs-threshold", "1500")
        cls.info = cls.hub.json("/_fake/info")
        cls.tiny = cls.info["repos"]["org/tiny"]["revisions"]["main"]["files"]

    @classmethod
    def tearDownClass(cls):
        cls.hub.stop()

    def setUp(self):
        self.assertEqual(self.hub.ctl("POST", "reset")[0], 200)

    def assertHubError(self, r, status, code, message_re=None):
        self.assertEqual(r.status, status, r.body[:300])
        self.assertEqual(r.getheader("X-Error-Code"), code)
        if message_re:
            self.assertRegex(r.getheader("X-Error-Message") or "", message_re)
            if r.body:  # HEAD: headers only
                self.assertRegex(json.loads(r.body)["error"], message_re)

    def cdn_url(self, path, **kw):
        r = self.hub.head(path, **kw)
        self.assertEqual(r.status, 302, r.body)
        return r.getheader("Location")

    # -- start-up ---------------------------------------------------------------------------

    def test_start_line(self):
        s = self.hub.start
        self.assertEqual(set(s), {"api", "cdn", "pid"})
        self.assertEqual(s["pid"], self.hub.proc.pid)
        self.assertRegex(s["api"], r"^http://127\.0\.0\.1:\d+$")
        self.assertRegex(s["cdn"], r"^http://127\.0\.0\.1:\d+$")
        self.assertNotEqual(s["api"], s["cdn"])

    # -- repo info ----------------------------------------------------------------------------

    def test_revision_info(self):
        j = self.hub.json("/api/models/org/tiny/revision/main")
        self.assertEqual(j["id"], "org/tiny")
        self.assertEqual(j["sha"], make_test_repos.TINY_MAIN)
        for k in ("private", "gated", "disabled", "lastModified"):
            self.assertIn(k, j)
        self.assertTrue(all(set(s) == {"rfilename"} for s in j["siblings"]))
        self.assertEqual(sorted(s["rfilename"] for s in j["siblings"]), sorted(self.tiny))
        for flag in ("true", "True", "1"):
            j = self.hub.json("/api/models/org/tiny/revision/main?blobs=" + flag)
            sib = {s["rfilename"]: s for s in j["siblings"]}
            cfg = disk("org", "tiny", "main", "config.json")
            self.assertEqual(sib["config.json"], {"rfilename": "config.json", "size": len(cfg), "blobId": git_sha1(cfg)})
            m = sib["model.safetensors"]
            self.assertEqual(m["size"], 3_000_007)
            self.assertEqual(m["lfs"]["sha256"], self.tiny["model.safetensors"]["sha256"])
            pointer = fake_hub.lfs_pointer(m["lfs"]["sha256"], 3_000_007)
            self.assertEqual(m["blobId"], git_sha1(pointer))
            self.assertEqual(m["lfs"]["pointerSize"], len(pointer))

    def test_revisions_branch_tag_commit_pr_head(self):
        for rev, sha in (("main", make_test_repos.TINY_MAIN), ("HEAD", make_test_repos.TINY_MAIN),
                         ("v1.0", make_test_repos.TINY_V1), ("refs%2Fpr%2F1", make_test_repos.TINY_V1),
                         (make_test_repos.TINY_V1, make_test_repos.TINY_V1)):
            self.assertEqual(self.hub.json("/api/models/org/tiny/revision/" + rev)["sha"], sha, rev)
        self.assertEqual(self.hub.json("/api/models/org/tiny")["sha"], make_test_repos.TINY_MAIN)
        r = self.hub.get("/api/models/org/tiny/revision/nope")
        self.assertHubError(r, 404, "RevisionNotFound", "nope")
        r = self.hub.head("/org/tiny/resolve/" + "c" * 40 + "/config.json")
        self.assertHubError(r, 404, "RevisionNotFound")
        # default commit scheme without refs.json: sha1("org/NAME/DIR")
        self.assertEqual(self.hub.json("/api/models/org/many/revision/main")["sha"],
                         hashlib.sha1(b"org/many/main").hexdigest())

    def test_refs(self):
        j = self.hub.json("/api/models/org/tiny/refs")
        self.assertEqual({b["name"]: b["targetCommit"] for b in j["branches"]},
                         {"main": make_test_repos.TINY_MAIN, "refs/pr/1": make_test_repos.TINY_V1})
        self.assertEqual([(t["name"], t["ref"]) for t in j["tags"]], [("v1.0", "refs/tags/v1.0")])

    # -- tree ---------------------------------------------------------------------------------

    def list_all(self, url):
        entries, pages = [], 0
        while url:
            r = self.hub.get(url)
            self.assertEqual(r.status, 200, r.body)
            entries += json.loads(r.body)
            pages += 1
            link = r.getheader("Link")
            url = None
            if link:
                m = re.fullmatch(r'<(http://[^>]+)>; rel="next"', link)
                self.assertTrue(m, link)
                url = m.group(1)
        return entries, pages

    def test_tree_pagination(self):
        for q in ("recursive=true&expand=false", "recursive=True&expand=False"):
            entries, pages = self.list_all("/api/models/org/many/tree/main?" + q)
            files = [e["path"] for e in entries if e["type"] == "file"]
            dirs = [e["path"] for e in entries if e["type"] == "directory"]
            self.assertEqual(len(files), 101)
            self.assertEqual(len(set(files)), 101)
            self.assertIn("files/d03", dirs)
            self.assertEqual(pages, -(-len(entries) // 7))
            self.assertGreater(pages, 10)
        e = {x["path"]: x for x in entries}
        w = disk("org", "many", "main", "weights", "w.bin")
        self.assertEqual(e["weights/w.bin"]["lfs"], {"oid": hashlib.sha256(w).hexdigest(), "size": len(w),
                                                     "pointerSize": len(fake_hub.lfs_pointer(
                                                         hashlib.sha256(w).hexdigest(), len(w)))})
        f = disk("org", "many", "main", "files", "d00", "f001.txt")
        self.assertEqual(e["files/d00/f001.txt"], {"type": "file", "oid": git_sha1(f), "size": len(f),
                                                   "path": "files/d00/f001.txt"})

    def test_tree_non_recursive_subpath_expand(self):
        top = self.hub.json("/api/models/org/tiny/tree/main")
        self.assertIn({"type": "directory", "path": "sub"}, [{"type": t["type"], "path": t["path"]} for t in top])
        self.assertFalse([t for t in top if "/" in t["path"]])
        sub = self.hub.json("/api/models/org/tiny/tree/main/sub%2Fdir?recursive=false")
        self.assertEqual([t["path"] for t in sub], ["sub/dir/tokenizer.json"])
        sub = self.hub.json("/api/models/org/tiny/tree/main/sub?recursive=1&expand=true")
        self.assertEqual([t["path"] for t in sub], ["sub/dir", "sub/dir/tokenizer.json"])
        self.assertEqual(sub[1]["lastCommit"]["id"], make_test_repos.TINY_MAIN)
        self.assertIn("securityFileStatus", sub[1])
        r = self.hub.get("/api/models/org/tiny/tree/main/nope")
        self.assertHubError(r, 404, "EntryNotFound")
        self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_MAIN)

    def test_paths_info(self):
        r = self.hub.request("POST", "/api/models/org/tiny/paths-info/main",
                             body="paths=config.json&paths=sub&paths=nope&expand=False",
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
        j = json.loads(r.body)
        self.assertEqual([(e["type"], e["path"]) for e in j], [("file", "config.json"), ("directory", "sub")])
        self.assertNotIn("lastCommit", j[0])
        r = self.hub.request("POST", "/api/models/org/tiny/paths-info/v1.0",
                             body=json.dumps({"paths": ["config.json"], "expand": True}),
                             headers={"Content-Type": "application/json"})
        j = json.loads(r.body)
        self.assertEqual(j[0]["oid"], git_sha1(disk("org", "tiny", "v1", "config.json")))
        self.assertEqual(j[0]["lastCommit"]["id"], make_test_repos.TINY_V1)

    # -- resolve ------------------------------------------------------------------------------

    def test_resolve_regular(self):
        data = disk("org", "tiny", "main", "config.json")
        for method in ("HEAD", "GET"):
            r = self.hub.request(method, "/org/tiny/resolve/main/config.json", headers={"Accept-Encoding": "identity"})
            self.assertEqual(r.status, 200)
            self.assertEqual(r.getheader("ETag"), '"%s"' % git_sha1(data))
            self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_MAIN)
            self.assertEqual(r.getheader("Content-Length"), str(len(data)))
            self.assertEqual(r.getheader("Accept-Ranges"), "bytes")
            self.assertIsNone(r.getheader("X-Linked-Etag"))
            self.assertIsNone(r.getheader("Content-Encoding"))
            self.assertEqual(r.body, data if method == "GET" else b"")
        r = self.hub.get("/org/tiny/resolve/main/with%20space.txt")
        self.assertEqual(r.body, disk("org", "tiny", "main", "with space.txt"))
        r = self.hub.get("/org/tiny/resolve/" + make_test_repos.TINY_V1 + "/config.json")
        self.assertEqual(r.body, disk("org", "tiny", "v1", "config.json"))
        r = self.hub.get("/org/tiny/resolve/main/config.json", headers={"If-None-Match": '"%s"' % git_sha1(data)})
        self.assertEqual(r.status, 304)

    def test_resolve_regular_ranges(self):
        data = disk("org", "tiny", "main", "README.md")
        url = "/org/tiny/resolve/main/README.md"
        for rng, status, want, crange in (
                ("bytes=2-5", 206, data[2:6], "bytes 2-5/%d" % len(data)),
                ("bytes=4-", 206, data[4:], "bytes 4-%d/%d" % (len(data) - 1, len(data))),
                ("bytes=-3", 206, data[-3:], "bytes %d-%d/%d" % (len(data) - 3, len(data) - 1, len(data))),
                ("bytes=0-99999", 206, data, "bytes 0-%d/%d" % (len(data) - 1, len(data))),
                ("bytes=%d-" % len(data), 416, None, "bytes */%d" % len(data))):
            r = self.hub.get(url, headers={"Range": rng})
            self.assertEqual(r.status, status, rng)
            self.assertEqual(r.getheader("Content-Range"), crange, rng)
            if want is not None:
                self.assertEqual(r.body, want, rng)
                self.assertEqual(r.getheader("Content-Length"), str(len(want)))

    def test_resolve_lfs_redirect(self):
        for name in ("model.safetensors", "blob.dat"):  # by suffix; by --lfs-threshold 1500
            f = self.tiny[name]
            self.assertTrue(f["lfs"])
            for method in ("HEAD", "GET"):
                r = self.hub.request(method, "/org/tiny/resolve/main/" + name, headers={"Authorization": "Bearer " + GOOD})
                self.assertEqual(r.status, 302)
                loc = r.getheader("Location")
                self.assertTrue(loc.startswith(self.hub.cdn + "/"), loc)
                q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(loc).query))
                self.assertGreater(int(q["Expires"]), time.time())
                self.assertRegex(q["Signature"], "^[0-9a-f]{64}$")
                self.assertEqual(r.getheader("X-Linked-Etag"), '"%s"' % f["sha256"])
                self.assertEqual(r.getheader("X-Linked-Size"), str(f["size"]))
                self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_MAIN)
                self.assertNotIn(f["sha256"], r.getheader("ETag"))
                body = ("Found. Redirecting to " + loc).encode()
                self.assertEqual(r.getheader("Content-Length"), str(len(body)))
                self.assertEqual(r.body, body if method == "GET" else b"")
                for h in ("X-Xet-Hash", "Link"):
                    self.assertIsNone(r.getheader(h))
            c = self.hub.get(loc)
            self.assertEqual(c.status, 200)
            self.assertEqual(hashlib.sha256(c.body).hexdigest(), f["sha256"])
            self.assertIsNone(c.getheader("X-Repo-Commit"))
            self.assertIsNone(c.getheader("X-Linked-Etag"))
            self.assertEqual(c.getheader("Accept-Ranges"), "bytes")
            self.assertIn(name, c.getheader("Content-Disposition"))
        self.assertEqual(disk("org", "tiny", "main", "blob.dat"), c.body)

    def test_cdn_ranges_and_refusals(self):
        f = self.tiny["blob.dat"]
        data = disk("org", "tiny", "main", "blob.dat")
        loc = self.cdn_url("/org/tiny/resolve/main/blob.dat")
        r = self.hub.get(loc, headers={"Range": "bytes=100-199"})
        self.assertEqual((r.status, r.getheader("Content-Range"), r.body), (206, "bytes 100-199/2000", data[100:200]))
        r = self.hub.get(loc, headers={"Range": "bytes=2000-"})
        self.assertEqual((r.status, r.getheader("Content-Range")), (416, "bytes */2000"))
        r = self.hub.head(loc)
        self.assertEqual((r.status, r.getheader("Content-Length"), r.body), (200, "2000", b""))
        # Authorization at the CDN: refused, logged as a violation.
        r = self.hub.get(loc, headers={"Authorization": "Bearer " + GOOD})
        self.assertEqual(r.status, 400)
        self.assertIn(b"Authorization", r.body)
        v = self.hub.ctl("GET", "violations")[1]
        self.assertEqual(len(v), 1)
        self.assertEqual((v[0]["port"], v[0]["violation"], v[0]["authorization"]),
                         ("cdn", "authorization_sent_to_cdn", True))
        # Signature tampering.
        r = self.hub.get(loc.replace("Expires=", "Expires=9"))
        self.assertEqual(r.status, 403)
        self.assertIn(b"AccessDenied", r.body)
        r = self.hub.get(loc.split("?")[0])
        self.assertEqual(r.status, 403)
        r = self.hub.get(self.hub.cdn + "/repos/00/00/" + "0" * 64)  # unsigned: denied before lookup, as S3
        self.assertEqual(r.status, 403)
        self.assertEqual(self.hub.get(self.hub.cdn + "/elsewhere").status, 404)
        self.assertEqual(f["size"], len(data))

    def test_keep_alive(self):
        u = urllib.parse.urlsplit(self.hub.api)
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=10)
        for _ in range(3):
            r = self.hub.get("/org/tiny/resolve/main/config.json", conn=c)
            self.assertEqual(r.status, 200)
            self.assertFalse(r.will_close)
        r = self.hub.get("/org/tiny/resolve/main/nope", conn=c)
        self.assertEqual(r.status, 404)
        r = self.hub.head("/org/tiny/resolve/main/model.safetensors", conn=c)
        self.assertEqual(r.status, 302)
        self.assertEqual(self.hub.get("/api/models/org/tiny", conn=c).status, 200)
        c.close()

    # -- errors and auth ----------------------------------------------------------------------

    def test_missing_repo_and_entry(self):
        self.assertHubError(self.hub.get("/api/models/org/nope"), 401, "RepoNotFound")
        self.assertHubError(self.hub.head("/org/nope/resolve/main/x"), 401, "RepoNotFound")
        auth = {"Authorization": "Bearer " + GOOD}
        self.assertHubError(self.hub.get("/api/models/org/nope", headers=auth), 404, "RepoNotFound")
        self.assertHubError(self.hub.head("/org/nope/resolve/main/x", headers=auth), 404, "RepoNotFound")
        r = self.hub.head("/org/tiny/resolve/main/nope.json")
        self.assertHubError(r, 404, "EntryNotFound")
        self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_MAIN)
        r = self.hub.get("/org/tiny/resolve/v1.0/model.safetensors")
        self.assertHubError(r, 404, "EntryNotFound", "Entry not found")
        self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_V1)

    def test_bad_token(self):
        for url in ("/api/models/org/tiny", "/org/tiny/resolve/main/config.json",
                    "/api/models/org/tiny/tree/main"):
            r = self.hub.get(url, headers={"Authorization": "Bearer hf_wrong"})
            self.assertEqual(r.status, 401)
            self.assertEqual(r.getheader("X-Error-Message"), "Invalid credentials in Authorization header")
            self.assertEqual(json.loads(r.body), {"error": "Invalid credentials in Authorization header"})
        self.assertEqual(self.hub.get("/api/whoami-v2", headers={"Authorization": "Bearer " + GOOD}).status, 200)
        self.assertEqual(self.hub.get("/api/whoami-v2").status, 401)
        log = self.hub.log()
        self.assertEqual([e["token"] for e in log[:3]], ["invalid"] * 3)

    def test_gated(self):
        url = "/org/gated/resolve/main/model.safetensors"
        r = self.hub.head(url)
        self.assertHubError(r, 401, "GatedRepo", "Access to model org/gated is restricted.*Please log in")
        r = self.hub.head(url, headers={"Authorization": "Bearer " + OTHER})
        self.assertHubError(r, 403, "GatedRepo", "not in the authorized list")
        r = self.hub.head(url, headers={"Authorization": "Bearer " + GOOD})
        self.assertEqual(r.status, 302)
        c = self.hub.get(r.getheader("Location"))
        self.assertEqual(hashlib.sha256(c.body).hexdigest(), r.getheader("X-Linked-Etag").strip('"'))
        # metadata stays readable (without --gate-api) and says it is gated
        self.assertEqual(self.hub.json("/api/models/org/gated/revision/main")["gated"], "manual")
        self.assertEqual(self.hub.json("/api/models/org/tiny")["gated"], False)

    def test_private(self):
        url = "/org/private/resolve/main/config.json"
        self.assertHubError(self.hub.head(url), 401, "RepoNotFound")
        self.assertHubError(self.hub.head(url, headers={"Authorization": "Bearer " + OTHER}), 404, "RepoNotFound")
        self.assertEqual(self.hub.head(url, headers={"Authorization": "Bearer " + GOOD}).status, 200)
        self.assertHubError(self.hub.get("/api/models/org/private"), 401, "RepoNotFound")
        j = self.hub.json("/api/models/org/private", headers={"Authorization": "Bearer " + GOOD})
        self.assertTrue(j["private"])

    def test_renamed_and_miscased(self):
        r = self.hub.head("/old/tiny/resolve/main/model.safetensors")
        self.assertEqual(r.status, 307)
        self.assertEqual(r.getheader("Location"), "/org/tiny/resolve/main/model.safetensors")
        self.assertIsNone(r.getheader("ETag"))
        r = self.hub.get("/Org/TINY/resolve/main/config.json")
        self.assertEqual((r.status, r.getheader("Location")), (307, "/org/tiny/resolve/main/config.json"))
        r = self.hub.get("/api/models/old/tiny/revision/main?blobs=true")
        self.assertEqual((r.status, r.getheader("Location")), (307, "/api/models/org/tiny/revision/main?blobs=true"))
        self.assertEqual(self.hub.head(r.getheader("Location")).status, 200)

    def test_unknown_routes(self):
        self.assertEqual(self.hub.get("/nothing/here").status, 404)
        self.assertEqual(self.hub.get("/api/datasets/org/tiny").status, 401)
        self.assertEqual(self.hub.request("POST", "/org/tiny/resolve/main/config.json").status, 405)
        self.assertEqual(self.hub.ctl("GET", "nope")[0], 404)
        r = self.hub.get("/org/tiny/raw/main/model.safetensors")
        self.assertEqual(r.body, fake_hub.lfs_pointer(self.tiny["model.safetensors"]["sha256"], 3_000_007))

    # -- faults -------------------------------------------------------------------------------

    def test_fault_rate_limit_429(self):
        self.hub.faults({"kind": "rate_limit_429", "count": 2, "path": "*/resolve/*", "retry_after": 2})
        self.assertEqual(self.hub.get("/api/models/org/tiny").status, 200)  # out of scope
        for _ in range(2):
            r = self.hub.head("/org/tiny/resolve/main/config.json")
            self.assertEqual(r.status, 429)
            self.assertEqual(r.getheader("Retry-After"), "2")
            self.assertEqual(r.getheader("RateLimit"), '"resolvers";r=0;t=2')
            self.assertEqual(r.getheader("RateLimit-Policy"), '"fixed window";"resolvers";q=3000;w=300')
        self.assertEqual(self.hub.head("/org/tiny/resolve/main/config.json").status, 200)
        f = self.hub.ctl("GET", "faults")[1]
        self.assertEqual((f[0]["remaining"], f[0]["hits"]), (0, 2))
        self.assertEqual([e["faults"] for e in self.hub.log()], [[], ["rate_limit_429"], ["rate_limit_429"], []])

    def test_fault_fail_5xx_scoped(self):
        self.hub.faults({"kind": "fail_5xx", "status": 502, "count": 1, "path": "*config.json", "method": "GET"},
                        {"kind": "fail_5xx", "status": 500, "count": 1, "port": "cdn"})
        self.assertEqual(self.hub.head("/org/tiny/resolve/main/config.json").status, 200)  # HEAD not in scope
        self.assertEqual(self.hub.get("/org/tiny/resolve/main/README.md").status, 200)
        self.assertEqual(self.hub.get("/org/tiny/resolve/main/config.json").status, 502)
        self.assertEqual(self.hub.get("/org/tiny/resolve/main/config.json").status, 200)
        loc = self.cdn_url("/org/tiny/resolve/main/blob.dat")
        self.assertEqual(self.hub.get(loc).status, 500)
        self.assertEqual(self.hub.get(loc).status, 200)

    def test_fault_drop_after_bytes(self):
        # glob on the CDN matches the origin /resolve path the URL was signed for
        self.hub.faults({"kind": "drop_after_bytes", "bytes": 1000, "count": 1, "path": "*/model.safetensors"})
        loc = self.cdn_url("/org/tiny/resolve/main/model.safetensors")
        r = self.hub.get(loc)
        self.assertEqual(r.status, 200)
        self.assertEqual(r.getheader("Content-Length"), "3000007")
        self.assertTrue(getattr(r, "incomplete", False))
        self.assertEqual(len(r.body), 1000)
        r = self.hub.get(loc, headers={"Range": "bytes=1000-"})
        self.assertEqual(r.status, 206)
        self.assertEqual(len(r.body), 3_000_007 - 1000)
        e = [x for x in self.hub.log() if x["port"] == "cdn"]
        self.assertEqual((e[0]["dropped"], e[0]["bytes_sent"], e[0]["faults"]), (True, 1000, ["drop_after_bytes"]))
        self.assertEqual((e[1]["dropped"], e[1]["bytes_sent"]), (False, 3_000_007 - 1000))

    def test_fault_ignore_range(self):
        data = disk("org", "tiny", "main", "README.md")
        self.hub.faults({"kind": "ignore_range", "count": 1})
        r = self.hub.get("/org/tiny/resolve/main/README.md", headers={"Range": "bytes=3-"})
        self.assertEqual((r.status, r.body, r.getheader("Content-Range")), (200, data, None))
        r = self.hub.get("/org/tiny/resolve/main/README.md", headers={"Range": "bytes=3-"})
        self.assertEqual((r.status, r.body), (206, data[3:]))

    def test_fault_slow(self):
        self.hub.faults({"kind": "slow", "bytes_per_s": 10000, "port": "cdn"})
        loc = self.cdn_url("/org/tiny/resolve/main/blob.dat")
        t0 = time.monotonic()
        r = self.hub.get(loc)
        self.assertGreaterEqual(time.monotonic() - t0, 0.18)
        self.assertEqual(r.body, disk("org", "tiny", "main", "blob.dat"))

    def test_fault_wrong_bytes(self):
        data = disk("org", "tiny", "main", "blob.dat")
        self.hub.faults({"kind": "wrong_bytes", "count": 1, "offset": 10})
        loc = self.cdn_url("/org/tiny/resolve/main/blob.dat")
        r = self.hub.get(loc, headers={"Range": "bytes=100-"})  # does not contain the byte: not consumed
        self.assertEqual(r.body, data[100:])
        r = self.hub.get(loc)
        self.assertEqual(len(r.body), len(data))
        self.assertEqual([i for i in range(len(data)) if r.body[i] != data[i]], [10])
        self.assertEqual(self.hub.get(loc).body, data)
        self.hub.faults({"kind": "wrong_bytes", "count": 1, "path": "*README.md"})
        readme = disk("org", "tiny", "main", "README.md")
        self.assertNotEqual(self.hub.get("/org/tiny/resolve/main/README.md").body, readme)
        self.assertEqual(self.hub.get("/org/tiny/resolve/main/README.md").body, readme)

    def test_fault_expired_cdn_url(self):
        self.hub.faults({"kind": "expired_cdn_url", "count": 1})
        loc = self.cdn_url("/org/tiny/resolve/main/blob.dat")
        self.assertLess(int(dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(loc).query))["Expires"]), time.time())
        r = self.hub.get(loc)
        self.assertEqual(r.status, 403)
        self.assertIn(b"Request has expired", r.body)
        self.assertEqual(self.hub.get(self.cdn_url("/org/tiny/resolve/main/blob.dat")).status, 200)

    def test_fault_header_lies(self):
        self.hub.faults({"kind": "no_repo_commit", "count": 1}, {"kind": "weak_etag", "count": 2},
                        {"kind": "wrong_linked_size", "count": 1, "delta": -5})
        r = self.hub.head("/org/tiny/resolve/main/config.json")
        self.assertIsNone(r.getheader("X-Repo-Commit"))
        self.assertTrue(r.getheader("ETag").startswith('W/"'))
        r = self.hub.head("/org/tiny/resolve/main/blob.dat")
        self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_MAIN)
        self.assertTrue(r.getheader("X-Linked-Etag").startswith('W/"'))
        self.assertEqual(r.getheader("X-Linked-Size"), "1995")
        r = self.hub.head("/org/tiny/resolve/main/blob.dat")
        self.assertEqual((r.getheader("X-Linked-Size"), r.getheader("X-Linked-Etag")[0]), ("2000", '"'))

    def test_fault_resolve_cache_redirect(self):
        data = disk("org", "tiny", "main", "config.json")
        self.hub.faults({"kind": "resolve_cache_redirect", "count": 1})
        r = self.hub.head("/org/tiny/resolve/main/config.json")
        self.assertEqual(r.status, 307)
        loc = r.getheader("Location")
        self.assertTrue(loc.startswith("/api/resolve-cache/models/org/tiny/%s/config.json?" % make_test_repos.TINY_MAIN))
        self.assertIn("etag=%22" + git_sha1(data), loc)
        r = self.hub.get(loc)
        self.assertEqual((r.status, r.body, r.getheader("ETag")), (200, data, '"%s"' % git_sha1(data)))
        self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_MAIN)

    def test_fault_bad_location(self):
        self.hub.faults({"kind": "bad_location", "count": 1},
                        {"kind": "bad_location", "count": 1, "location": "ftp://127.0.0.1/x"})
        r = self.hub.head("/org/tiny/resolve/main/blob.dat")
        self.assertEqual((r.status, r.getheader("Location")), (302, "file:///etc/passwd"))
        r = self.hub.get("/org/tiny/resolve/main/config.json")
        self.assertEqual((r.status, r.getheader("Location")), (302, "ftp://127.0.0.1/x"))
        self.assertEqual(r.getheader("X-Repo-Commit"), make_test_repos.TINY_MAIN)
        self.assertEqual(self.hub.head("/org/tiny/resolve/main/config.json").status, 200)

    def test_fault_hostile_values(self):
        tree = "/api/models/org/tiny/tree/main?recursive=true"
        self.hub.faults({"kind": "bad_oid", "count": 1, "file": "config.json"},
                        {"kind": "bad_oid", "count": 1, "file": "blob.dat", "oid": "x", "size": 7})
        files = {e["path"]: e for e in json.loads(self.hub.get(tree).body)}
        self.assertEqual(files["config.json"]["oid"], "../../../x")
        self.assertNotEqual(files["README.md"]["oid"], "../../../x")
        files = {e["path"]: e for e in json.loads(self.hub.get(tree).body)}
        self.assertEqual((files["blob.dat"]["lfs"]["oid"], files["blob.dat"]["size"]), ("x", 7))
        self.hub.faults({"kind": "bad_size", "count": 1, "file": "config.json"})
        files = {e["path"]: e for e in json.loads(self.hub.get(tree).body)}
        self.assertEqual(files["config.json"]["size"], 2 ** 63)
        self.hub.faults({"kind": "link_loop", "count": 1})
        r = self.hub.get(tree)
        self.assertIn("/api/models/org/tiny/tree/main?recursive=true>", r.getheader("Link"))
        self.hub.faults({"kind": "link_loop", "count": 1, "mode": "next"})
        self.assertEqual(self.hub.get(tree).getheader("Link"), '<file:///etc/passwd>; rel="next"')
        self.hub.faults({"kind": "bad_etag", "count": 2}, {"kind": "bad_linked_size", "count": 1})
        self.assertEqual(self.hub.head("/org/tiny/resolve/main/config.json").getheader("ETag"), '"../../../x"')
        r = self.hub.head("/org/tiny/resolve/main/blob.dat")
        self.assertEqual((r.getheader("X-Linked-Etag"), r.getheader("X-Linked-Size")), ('"../../../x"', "abc"))
        r = self.hub.head("/org/tiny/resolve/main/blob.dat")
        self.assertEqual(r.getheader("X-Linked-Size"), "2000")

    def test_huge_body(self):
        # Streamed with the Content-Length it says, a JSON document of exactly that many bytes.
        self.hub.faults({"kind": "huge_body", "count": 1, "bytes": 3 * MiB + 5,
                         "path": "/api/models/org/tiny/revision/*"})
        r = self.hub.get("/api/models/org/tiny/revision/main")
        self.assertEqual(r.status, 200)
        self.assertEqual(int(r.getheader("Content-Length")), 3 * MiB + 5)
        self.assertEqual(len(r.body), 3 * MiB + 5)
        self.assertEqual(json.loads(r.body)["sha"], "a" * 40)
        self.assertEqual(self.hub.log()[-1]["faults"], ["huge_body"])
        # Consumed: the next answer is the real one.
        self.assertEqual(self.hub.json("/api/models/org/tiny/revision/main")["sha"], "a" * 39 + "1")

    def test_fault_control_api(self):
        st, out = self.hub.ctl("POST", "faults", [{"kind": "nonsense"}])
        self.assertEqual(st, 400)
        st, out = self.hub.ctl("POST", "faults", {"kind": "fail_5xx", "count": 3})
        self.assertEqual(len(out), 1)
        st, out = self.hub.ctl("POST", "faults", {"faults": [{"kind": "slow", "bytes_per_s": 5}], "replace": True})
        self.assertEqual([f["kind"] for f in out], ["slow"])
        st, out = self.hub.ctl("DELETE", "faults")
        self.assertEqual((st, out, self.hub.ctl("GET", "faults")[1]), (200, [], []))
        self.assertEqual(fake_hub.parse_fault("drop_after_bytes,bytes=10,count=2,path=*.bin")["bytes"], 10)
        with self.assertRaises(ValueError):
            fake_hub.parse_fault("fail_5xx,status=404")

    # -- synthetic big file -------------------------------------------------------------------

    def test_synthetic_big_file(self):
        loc = self.cdn_url("/org/big/resolve/main/model.safetensors")
        f = self.info["repos"]["org/big"]["revisions"]["main"]["files"]["model.safetensors"]
        self.assertEqual(f["size"], BIG_SIZE)
        full = self.hub.get(loc).body
        self.assertEqual(hashlib.sha256(full).hexdigest(), f["sha256"])
        # chunks differ (offset mixed in)
        self.assertNotEqual(full[:MiB], full[MiB:2 * MiB])
        # ranges at arbitrary offsets and across 1 MiB boundaries
        for a, b in ((0, 0), (MiB - 3, MiB + 2), (3 * MiB + 17, 4 * MiB + 100), (BIG_SIZE - 9, BIG_SIZE - 1)):
            r = self.hub.get(loc, headers={"Range": "bytes=%d-%d" % (a, b)})
            self.assertEqual((r.status, r.body), (206, full[a:b + 1]))
        parts = b""
        step = BIG_SIZE // 4 + 1
        for a in range(0, BIG_SIZE, step):
            parts += self.hub.get(loc, headers={"Range": "bytes=%d-%d" % (a, min(a + step, BIG_SIZE) - 1)}).body
        self.assertEqual(hashlib.sha256(parts).hexdigest(), f["sha256"])
        # the hash cache next to the .synthetic file, keyed by size and seed
        cache = os.path.join(REPOS, "org", "big", "main", "model.safetensors.synthetic.hashes")
        with open(cache) as fh:
            c = json.load(fh)
        self.assertEqual((c["size"], c["seed"], c["sha256"]), (BIG_SIZE, 3, f["sha256"]))
        b = fake_hub.SyntheticBlob(BIG_SIZE, 3, cache)
        self.assertEqual(b"".join(b.pieces(5, 2 * MiB + 7)), full[5:2 * MiB + 7])
        self.assertNotIn("model.safetensors.synthetic.hashes", self.tiny)

    # -- log ----------------------------------------------------------------------------------

    def test_log(self):
        self.hub.get("/org/tiny/resolve/main/README.md", headers={"Range": "bytes=0-3", "User-Agent": "t/1"})
        loc = self.cdn_url("/org/tiny/resolve/main/blob.dat", headers={"Authorization": "Bearer " + GOOD})
        self.hub.get(loc)
        log = self.hub.log()
        self.assertEqual([e["seq"] for e in log], [1, 2, 3])
        e = next(x for x in log if x["path"].endswith("README.md"))
        for k in ("time", "port", "method", "path", "query", "host", "status", "range", "authorization", "token",
                  "bytes_sent", "faults", "dropped", "violation", "user_agent", "headers"):
            self.assertIn(k, e)
        self.assertEqual((e["port"], e["method"], e["path"], e["status"], e["range"], e["bytes_sent"],
                          e["authorization"], e["user_agent"]),
                         ("api", "GET", "/org/tiny/resolve/main/README.md", 206, "bytes=0-3", 4, False, "t/1"))
        # A request is logged when its handler ends: the HEAD and the CDN GET may land in
        # either order on a busy machine.
        head = next(x for x in log if x["method"] == "HEAD")
        cdn = next(x for x in log if x["port"] == "cdn")
        self.assertEqual((head["status"], head["authorization"], head["token"]), (302, True, "valid"))
        self.assertEqual(head["headers"]["Authorization"], "<redacted>")
        self.assertEqual((cdn["status"], cdn["bytes_sent"]), (200, 2000))
        self.assertIn("Signature=", cdn["query"])
        self.assertEqual([x["seq"] for x in self.hub.ctl("GET", "log?since=2")[1]], [3])
        with open(self.hub.log_path) as fh:
            lines = [json.loads(x) for x in fh]
        # The file is written as handlers end (an answer is sent before it is logged, so the
        # next request can end first); by sequence number it holds the same entries.
        self.assertEqual(sorted(lines[-3:], key=lambda x: x["seq"]), log)
        self.assertFalse([x for x in log if x["path"].startswith("/_fake/")])


class CommandLineTest(unittest.TestCase):
    """Options that need their own hub: --fault, 307 redirects, --gate-api, reload, SIGTERM."""

    def test_cli_faults_307_gate_api_reload_sigterm(self):
        repos = tempfile.mkdtemp(dir=_tmp)
        make_test_repos.write(os.path.join(repos, "org", "a", "main", "m.gguf"), b"GGUF" + bytes(100))
        hub = HubProc("--lfs-redirect-status", "307", "--gated", "org/a", "--gate-api", "--token", GOOD,
                      "--fault", "fail_5xx,count=1,status=503,path=/api/*",
                      "--fault", '{"kind": "rate_limit_429", "count": 1, "port": "cdn"}', repos=repos)
        try:
            auth = {"Authorization": "Bearer " + GOOD}
            self.assertEqual(hub.get("/api/models/org/a", headers=auth).status, 503)
            self.assertEqual(hub.get("/api/models/org/a", headers=auth).status, 200)
            r = hub.get("/api/models/org/a")
            self.assertEqual((r.status, r.getheader("X-Error-Code")), (401, "GatedRepo"))
            r = hub.head("/org/a/resolve/main/m.gguf", headers=auth)
            self.assertEqual(r.status, 307)
            self.assertTrue(r.getheader("Location").startswith(hub.cdn))
            self.assertEqual(hub.get(r.getheader("Location")).status, 429)
            self.assertEqual(hub.get(r.getheader("Location")).body, b"GGUF" + bytes(100))
            make_test_repos.write(os.path.join(repos, "org", "b", "main", "x.txt"), b"x")
            self.assertEqual(hub.get("/org/b/resolve/main/x.txt").status, 401)
            self.assertEqual(hub.ctl("POST", "reload")[0], 200)
            self.assertEqual(hub.get("/org/b/resolve/main/x.txt").body, b"x")
            t0 = time.monotonic()
            hub.proc.send_signal(signal.SIGTERM)
            self.assertEqual(hub.proc.wait(5), 0)
            self.assertLess(time.monotonic() - t0, 30)  # a hang guard, not a speed test
        finally:
            hub.stop()

    def test_bad_repos_dir(self):
        p = subprocess.run([PY, "-B", os.path.join(HERE, "fake_hub.py"), "--repos", os.path.join(_tmp, "missing")],
                           capture_output=True, text=True, timeout=20)
        self.assertEqual(p.returncode, 2)
        self.assertIn("fake_hub:", p.stderr)


if __name__ == "__main__":
    unittest.main()
