// The JSON form of Observed, written by `berth observe -o json` and read by
// `berth plan --observed FILE`. Versioned: {"format_version": 1, ...}.
//
// {
//   "format_version": 1,
//   "hostname": "gpu-01",
//   "observed_at": "2026-11-30T12:00:00Z",               // informative
//   "store": {"path": "/shared/models", "exists": true,
//             "total_bytes": N, "free_bytes": N,           // of the filesystem (f_bavail)
//             "repos": [{"repo_id": "org/name",
//                        "revisions": [{"commit": "<40 hex>", "refs": ["main"],
//                                       "complete": true, "bytes_present": N,
//                                       "bytes_total": N}]}]},   // bytes_total optional
//   "gpus": {"known": true, "error": "",                   // known=false: no driver/NVML
//            "devices": [{"index": 0, "uuid": "GPU-...", "name": "...",
//                         "memory_total": N, "memory_used": N,
//                         "processes": [{"pid": 1, "used_bytes": N, "unit": "x.service",
//                                        "name": "python3"}]}]},
//   "units": {"known": true,
//             "items": [{"name": "x.service", "load_state": "loaded", "active_state": "active",
//                        "sub_state": "running", "fragment_path": "/etc/systemd/system/x.service",
//                        "content_hash": "<sha256>", "managed": true, "spec_hash": "<sha256>",
//                        "content": "...",   // berth's units; others up to 64 KiB, UTF-8
//                        "main_pid": 1, "need_daemon_reload": false,
//                        "drop_in_paths": [], "unit_file_state": "enabled",
//                        "invocation_id": "<hex>", "n_restarts": 0, "result": "success",
//                        "exec_main_status": 0,
//                        "active_enter_usec": N,  // unix µs; left out when unknown
//                        "timeout_stop_usec": N,  // TimeoutStopUSec; left out when unknown
//                        "last_start_ms": N,      // its last start, as systemd timed it; left
//                                                 // out when unknown (at most a day)
//                        "crash_looping": true,   // left out when false (IsCrashLooping)
//                        "content_note": "..."}]},  // why content is not the file's text;
//                               // left out when it is "", except for a unit that is not
//                               // berth's and has a file but no content (a file that is empty):
//                               // there, left out reads as "not in this observation"
//   "ports": {"known": true,
//             "listening": [{"port": 8000, "address": "0.0.0.0", "pid": 1, "process": "vllm",
//                            "unit": "x.service"}]},
//   "hub": [{"repo_id": "org/name", "revision": "main", "commit": "<40 hex>",
//            "files": [{"path": "config.json", "size": N}]}],
//   "berth_state": {"serial": 3, "lineage": "<uuid>", "units": ["x.service"],
//                   "models": {"org/name": ["<commit>"]},
//                   "learned": {"x.service": {"ports": [8000], "gpu_bytes": {"0": N}}},
//                   "start_times_ms": {"x.service": [38000, 47000]},   // oldest first
//                   "start_invocations": {"x.service": "<hex>"}}  // the last added from systemd
// }
//
// Every key but format_version is optional on input; a missing section reads as empty and
// "known" (say "known": false to mark a section that could not be observed). Byte counts are
// integers. Unknown keys are errors, so a typo cannot silently empty a section.
#pragma once

#include <memory>
#include <string>

#include "core/observed.h"
#include "core/status.h"

namespace berth {

/// Pretty-printed, keys in a stable order: the same Observed gives the same bytes.
std::string ObservedToJson(const Observed& observed);
/// `source` names the input in error messages ("host.json").
Result<Observed> ObservedFromJson(const std::string& text, const std::string& source);

}  // namespace berth
