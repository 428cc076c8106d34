// Where huggingface_hub finds its endpoint and token; berth reads them the same way.
#include <cstdlib>

#include "core/read_file.h"
#include "providers/hub/hub_types.h"

namespace berth {
namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool EnvTrue(const char* name) {
  std::string v = Env(name);
  for (char& c : v) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return v == "1" || v == "ON" || v == "YES" || v == "TRUE";
}

std::string Clean(std::string token) {
  std::string out;
  for (char c : token)
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') out += c;
  return out;
}

}  // namespace

HubOptions HubOptionsFromEnvironment() {
  HubOptions o;
  std::string endpoint = Env("HF_ENDPOINT");
  if (!endpoint.empty()) o.endpoint = endpoint;
  while (!o.endpoint.empty() && o.endpoint.back() == '/') o.endpoint.pop_back();
  if (EnvTrue("HF_HUB_DISABLE_IMPLICIT_TOKEN")) return o;
  o.token = Clean(Env("HF_TOKEN"));
  if (o.token.empty()) o.token = Clean(Env("HUGGING_FACE_HUB_TOKEN"));
  if (o.token.empty()) {
    std::string path = Env("HF_TOKEN_PATH");
    if (path.empty()) {
      std::string home = Env("HF_HOME");
      if (home.empty()) {
        std::string xdg = Env("XDG_CACHE_HOME");
        home = (xdg.empty() ? Env("HOME") + "/.cache" : xdg) + "/huggingface";
      }
      path = home + "/token";
    }
    // The operator's file (often a link into a secret store): followed, but read only when it
    // is a regular file of at most 64 KiB, without blocking.
    Result<std::string> token =
        ReadRegularFile(path, {.max_bytes = uint64_t{64} << 10, .follow_links = true});
    if (token.ok()) o.token = Clean(*token);
  }
  return o;
}

}  // namespace berth
