// libcurl's process-wide initialisation, done once for every user (Hub client, downloader,
// health probes) before the first handle is made.
#pragma once

namespace berth {

/// Calls curl_global_init once per process (std::call_once); safe from any thread.
void CurlGlobalInit();

}  // namespace berth
