// check.mjs - the real @huggingface/hub client (pinned in package.json) against berth's fake Hub.
//
//   FAKE_HUB_API=http://127.0.0.1:P FAKE_HUB_TOKEN=tok node check.mjs
//
// Expects the repos of ../make_test_repos.py and a hub started with --page-size 7
// --gated org/gated --token $FAKE_HUB_TOKEN. Expected bytes come from the fake's
// GET /_fake/info (sha256 of every file), so the check proves the client got what the fake meant.
// Exit status 0 when every check passes, 1 on the first mismatch.
import { createHash } from "node:crypto";
import { mkdtemp, readFile, readlink, rm, lstat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  listFiles, downloadFile, downloadFileToCacheDir, snapshotDownload, modelInfo, pathsInfo, scanCacheDir,
} from "@huggingface/hub";

const hubUrl = process.env.FAKE_HUB_API;
const token = process.env.FAKE_HUB_TOKEN;
if (!hubUrl || !token) {
  console.error("check.mjs: set FAKE_HUB_API and FAKE_HUB_TOKEN");
  process.exit(2);
}
console.debug = () => {}; // downloadFileToCacheDir logs every download with console.debug

let passed = 0;
function check(cond, what, detail = "") {
  if (!cond) {
    console.error(`FAIL ${what}${detail ? ": " + detail : ""}`);
    process.exit(1);
  }
  passed++;
  console.log(`ok   ${what}`);
}
const sha256 = (buf) => createHash("sha256").update(buf).digest("hex");
const getJson = async (path) => (await fetch(hubUrl + path)).json();
const log = async () => getJson("/_fake/log");

const info = await getJson("/_fake/info");
const files = (repo, rev = "main") => info.repos[repo].revisions[rev].files;

// 1. listFiles, recursive: every page followed (page size 7 -> many pages).
{
  const seen = [];
  for await (const e of listFiles({ repo: "org/many", recursive: true, hubUrl })) seen.push(e);
  const got = seen.filter((e) => e.type === "file").map((e) => e.path).sort();
  const want = Object.keys(files("org/many")).sort();
  check(JSON.stringify(got) === JSON.stringify(want), `listFiles recursive lists all ${want.length} files`,
    `got ${got.length}`);
  const pages = (await log()).filter((e) => e.path.startsWith("/api/models/org/many/tree/")).length;
  check(pages > 10, `listFiles followed the Link pagination (${pages} pages)`);
  const lfs = seen.find((e) => e.path === "weights/w.bin");
  check(lfs && lfs.lfs && lfs.lfs.oid === files("org/many")["weights/w.bin"].sha256, "tree entry lfs.oid is the sha256");
  const top = [];
  for await (const e of listFiles({ repo: "org/tiny", hubUrl })) top.push(`${e.type}:${e.path}`);
  check(top.includes("directory:sub") && !top.some((p) => p.includes("sub/")), "listFiles non-recursive shows sub/ as a directory");
}

// 2. modelInfo (revision HEAD by default) and pathsInfo.
{
  const m = await modelInfo({ name: "org/tiny", hubUrl, additionalFields: ["sha"] });
  check(m.sha === info.repos["org/tiny"].branches.main, "modelInfo(HEAD).sha is main's commit", m.sha);
  const p = await pathsInfo({ repo: "org/tiny", paths: ["config.json", "model.safetensors", "nope"], expand: true, hubUrl });
  check(p.length === 2 && p[1].lfs.oid === files("org/tiny")["model.safetensors"].sha256 && p[0].lastCommit.id === m.sha,
    "pathsInfo returns existing paths with lfs.oid and lastCommit");
}

// 3. downloadFile: a regular file (200 from /resolve) and an LFS file (302 to the CDN port).
for (const [repo, path, tok] of [["org/tiny", "config.json"], ["org/tiny", "with space.txt"], ["org/tiny", "model.safetensors"],
                                  ["org/gated", "model.safetensors", token]]) {
  const blob = await downloadFile({ repo, path, hubUrl, accessToken: tok });
  const buf = Buffer.from(await blob.arrayBuffer());
  const want = files(repo)[path];
  check(buf.length === want.size && sha256(buf) === want.sha256,
    `downloadFile ${repo}/${path} (${want.lfs ? "LFS" : "regular"}, ${want.size} B${tok ? ", with token" : ""}) sha256 matches`);
}
{
  const cdn = (await log()).filter((e) => e.port === "cdn" && e.status >= 200 && e.status < 300);
  check(cdn.length >= 2, `LFS bytes came from the CDN port (${cdn.length} CDN requests)`);
  const v = await getJson("/_fake/violations");
  check(v.length === 0, "no Authorization header reached the CDN", JSON.stringify(v));
}

// 4. downloadFileToCacheDir + snapshotDownload write the HF cache layout; bytes and names match.
{
  const cacheDir = await mkdtemp(join(tmpdir(), "fake-hub-npm-"));
  try {
    const commit = info.repos["org/tiny"].branches.main;
    const p = await downloadFileToCacheDir({ repo: "org/tiny", path: "model.safetensors", hubUrl, cacheDir });
    const want = files("org/tiny")["model.safetensors"];
    check(sha256(await readFile(p)) === want.sha256, "downloadFileToCacheDir LFS file sha256 matches");
    check(p.endsWith(join("models--org--tiny", "snapshots", commit, "model.safetensors")) &&
      (await readlink(p)).endsWith("blobs/" + want.sha256), "cache pointer is snapshots/<commit>/, blob named by sha256");
    const snap = await snapshotDownload({ repo: "org/tiny", hubUrl, cacheDir });
    for (const [path, f] of Object.entries(files("org/tiny"))) {
      const st = await lstat(join(snap, path));
      check(st.isSymbolicLink() && sha256(await readFile(join(snap, path))) === f.sha256,
        `snapshotDownload ${path} matches (blob ${f.etag.slice(0, 8)}...)`);
    }
    const ref = await readFile(join(cacheDir, "models--org--tiny", "refs", "main"), "utf8");
    check(ref === commit, "refs/main holds the commit, no newline");
    const scan = await scanCacheDir(cacheDir);
    const repo = scan.repos.find((r) => r.id.name === "org/tiny");
    const rev = repo?.revisions.find((r) => r.commitOid === commit);
    // scanSnapshotDir does not descend into sub-folders: it sees the top-level files only.
    const top = Object.keys(files("org/tiny")).filter((p) => !p.includes("/")).length;
    check(rev && rev.refs.includes("main") && rev.files.length === top && scan.warnings.length === 0,
      `scanCacheDir reads the cache: revision ${commit.slice(0, 8)}... ref main, ${top} top-level files`,
      JSON.stringify({ refs: rev?.refs, files: rev?.files.length, warnings: scan.warnings.map(String) }));
  } finally {
    await rm(cacheDir, { recursive: true, force: true });
  }
}

// 5. Errors the client maps: missing entry -> null, gated without token -> error.
{
  const none = await downloadFile({ repo: "org/tiny", path: "nope.json", hubUrl });
  check(none === null, "downloadFile of a missing file returns null (404 EntryNotFound)");
  let err = null;
  try { await downloadFile({ repo: "org/gated", path: "config.json", hubUrl }); } catch (e) { err = e; }
  check(err && err.statusCode === 401, "gated repo without a token: 401", String(err));
  err = null;
  try { await downloadFile({ repo: "org/tiny", path: "config.json", hubUrl, accessToken: "hf_wrong_token" }); } catch (e) { err = e; }
  check(err && err.statusCode === 401 && /Invalid credentials/.test(err.message), "wrong token: 401 Invalid credentials", String(err));
}

console.log(`npm check: ${passed} checks passed`);
