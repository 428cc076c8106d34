// interop.mjs - berth's store and @huggingface/hub's cache are the same thing.
//
//   FAKE_HUB_API=http://127.0.0.1:P BERTH_STORE=DIR COMMIT=<40 hex> node interop.mjs
//
// DIR holds org/tiny as `berth pull` wrote it. The client must read it as its own cache:
// scanCacheDir sees the repo, its revision and its ref; downloadFileToCacheDir of a pinned
// commit returns berth's files while the Hub answers every request with 500.
import { createHash } from "node:crypto";
import { readFile } from "node:fs/promises";
import { downloadFileToCacheDir, scanCacheDir } from "@huggingface/hub";

const hubUrl = process.env.FAKE_HUB_API;
const cacheDir = process.env.BERTH_STORE;
const commit = process.env.COMMIT;
console.debug = () => {};
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
const info = await (await fetch(hubUrl + "/_fake/info")).json();
const files = info.repos["org/tiny"].revisions["main"].files;

const scan = await scanCacheDir(cacheDir);
const repo = scan.repos.find((r) => r.id.name === "org/tiny");
check(repo !== undefined, "scanCacheDir finds org/tiny in berth's store");
check(scan.warnings.length === 0, "scanCacheDir has no warnings about berth's store",
  JSON.stringify(scan.warnings.map(String)));
const rev = repo.revisions.find((r) => r.commitOid === commit);
check(rev !== undefined, `scanCacheDir finds revision ${commit.slice(0, 8)}...`);
check(rev.refs.includes("main"), "scanCacheDir reads berth's refs/main");
// It lists the snapshot's top-level files (it does not descend into sub-folders).
const top = Object.keys(files).filter((p) => !p.includes("/")).length;
check(rev.files.length === top, `scanCacheDir sees berth's ${top} top-level files`);

// The Hub fails everything now: only the cache can answer.
await fetch(hubUrl + "/_fake/faults", {
  method: "POST",
  body: JSON.stringify({ kind: "fail_5xx", status: 500, count: null }),
});
for (const path of ["config.json", "model.safetensors", "sub/dir/tokenizer.json"]) {
  const p = await downloadFileToCacheDir({ repo: "org/tiny", path, revision: commit, hubUrl, cacheDir });
  const want = files[path].sha256;
  check(sha256(await readFile(p)) === want, `downloadFileToCacheDir serves ${path} from berth's store, offline`);
}
await fetch(hubUrl + "/_fake/faults", { method: "DELETE" });
console.log(`interop: ${passed} checks passed`);
