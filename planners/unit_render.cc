#include "planners/unit_render.h"

#include <algorithm>
#include <cstdio>
#include <sstream>

#include "engine/core/hash.h"
#include "engine/core/units.h"

namespace berth {
namespace {

std::string FormatDouble(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::string JoinInts(const std::vector<int>& v, const char* sep) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) out += (i ? sep : "") + std::to_string(v[i]);
  return out;
}

std::string Quote(const std::string& text, bool escape_dollar);

// Environment= values: C escapes and %-specifiers apply, $ does not.
std::string QuoteEnvAssignment(const std::string& kv) { return Quote(kv, false); }

const char* DefaultExecutable(EngineKind e) {
  switch (e) {
    case EngineKind::kVllm:
      return "vllm";
    case EngineKind::kSglang:
      return "python3";
    case EngineKind::kLlamaServer:
      return "llama-server";
    case EngineKind::kCommand:
      return "";
  }
  return "";
}

// "…" with C escapes for quotes, backslashes and control characters, % → %% (specifiers), and
// $ → $$ where systemd would expand variables.
std::string Quote(const std::string& text, bool escape_dollar) {
  std::string out = "\"";
  for (unsigned char c : text) {
    switch (c) {
      case '\\':
        out += "\\\\";
        break;
      case '"':
        out += "\\\"";
        break;
      case '%':
        out += "%%";
        break;
      case '$':
        out += escape_dollar ? "$$" : "$";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20 || c == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace

std::string QuoteExecArg(const std::string& arg) { return Quote(arg, true); }

std::vector<std::string> SplitExecLine(const std::string& line) {
  std::vector<std::string> argv;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i >= line.size()) break;
    std::string arg;
    bool quoted = line[i] == '"';
    if (quoted) ++i;
    while (i < line.size()) {
      char c = line[i];
      if (quoted && c == '"') {
        ++i;
        break;
      }
      if (!quoted && (c == ' ' || c == '\t')) break;
      if (c == '\\' && i + 1 < line.size()) {
        char n = line[i + 1];
        i += 2;
        if (n == 'n')
          arg += '\n';
        else if (n == 't')
          arg += '\t';
        else if (n == 'r')
          arg += '\r';
        else if (n == 'x' && i + 1 < line.size()) {
          arg += static_cast<char>(std::stoi(line.substr(i, 2), nullptr, 16));
          i += 2;
        } else
          arg += n;
        continue;
      }
      if ((c == '%' || c == '$') && i + 1 < line.size() && line[i + 1] == c) {
        arg += c;
        i += 2;
        continue;
      }
      arg += c;
      ++i;
    }
    argv.push_back(std::move(arg));
  }
  return argv;
}

std::string ResolveExecutable(const ServiceSpec& s,
                              const std::map<std::string, std::string>& host) {
  if (!s.executable.empty()) return s.executable;
  auto it = host.find(EngineName(s.engine));
  if (it != host.end()) return it->second;
  return DefaultExecutable(s.engine);
}

std::vector<std::string> ServiceArgv(const ServiceSpec& s, const RenderContext& ctx) {
  std::vector<std::string> a;
  std::string port = s.port ? std::to_string(*s.port) : "";
  switch (s.engine) {
    case EngineKind::kVllm:
      a = {ctx.executable,
           "serve",
           ctx.snapshot_path,
           "--served-model-name",
           s.ServedName(),
           "--host",
           s.bind,
           "--port",
           port,
           "--tensor-parallel-size",
           std::to_string(s.vllm.tensor_parallel_size),
           "--pipeline-parallel-size",
           std::to_string(s.vllm.pipeline_parallel_size)};
      if (s.vllm.enable_expert_parallel) a.push_back("--enable-expert-parallel");
      a.insert(a.end(), {"--gpu-memory-utilization", FormatDouble(s.vllm.gpu_memory_utilization)});
      if (s.vllm.max_model_len)
        a.insert(a.end(), {"--max-model-len", std::to_string(*s.vllm.max_model_len)});
      break;
    case EngineKind::kSglang:
      a = {ctx.executable};
      if (ctx.executable == "python3" || ctx.executable.ends_with("/python3"))
        a.insert(a.end(), {"-m", "sglang.launch_server"});
      a.insert(a.end(),
               {"--model-path", ctx.snapshot_path, "--served-model-name", s.ServedName(), "--host",
                s.bind, "--port", port, "--tp-size", std::to_string(s.sglang.tp_size),
                "--mem-fraction-static", FormatDouble(s.sglang.mem_fraction_static)});
      if (s.sglang.context_length)
        a.insert(a.end(), {"--context-length", std::to_string(*s.sglang.context_length)});
      break;
    case EngineKind::kLlamaServer: {
      std::string model = ctx.snapshot_path;
      if (!s.llama.model_file.empty()) model += "/" + s.llama.model_file;
      a = {ctx.executable,
           "--model",
           model,
           "--alias",
           s.ServedName(),
           "--host",
           s.bind,
           "--port",
           port,
           "--n-gpu-layers",
           std::to_string(s.llama.n_gpu_layers)};
      if (s.llama.ctx_size) a.insert(a.end(), {"--ctx-size", std::to_string(*s.llama.ctx_size)});
      break;
    }
    case EngineKind::kCommand:
      a = s.command;
      break;
  }
  a.insert(a.end(), s.args.begin(), s.args.end());
  return a;
}

RenderedUnit RenderUnit(const ServiceSpec& s, const RenderContext& ctx) {
  RenderedUnit r;
  r.name = s.UnitName();
  r.argv = ServiceArgv(s, ctx);
  std::ostringstream b;
  b << "[Unit]\n";
  b << "Description=" << EngineName(s.engine) << " serving " << s.ServedName();
  if (!ctx.model_repo.empty()) b << " (" << ctx.model_repo << ")";
  if (s.port) b << " on port " << *s.port;
  b << "\n";
  b << "After=network-online.target\nWants=network-online.target\n";
  b << "StartLimitIntervalSec=600\nStartLimitBurst=5\n\n";
  b << "[Service]\nType=exec\n";
  b << "ExecStart=";
  for (size_t i = 0; i < r.argv.size(); ++i) b << (i ? " " : "") << QuoteExecArg(r.argv[i]);
  b << "\n";
  if (!s.gpus.empty())
    b << "Environment=" << QuoteEnvAssignment("CUDA_VISIBLE_DEVICES=" + JoinInts(s.gpus, ","))
      << "\n";
  if (!ctx.store.empty()) {
    b << "Environment=" << QuoteEnvAssignment("HF_HUB_OFFLINE=1") << "\n";
    b << "Environment=" << QuoteEnvAssignment("HF_HUB_CACHE=" + ctx.store) << "\n";
  }
  for (const auto& [k, v] : s.env) b << "Environment=" << QuoteEnvAssignment(k + "=" + v) << "\n";
  if (!s.env_file.empty()) b << "EnvironmentFile=" << s.env_file << "\n";
  b << "Restart=on-failure\nRestartSec=10\n";
  // The health gate bounds a start; systemd's own timeout sits just above it.
  b << "TimeoutStartSec=" << FormatDurationMs(s.health.timeout_ms + 60000) << "\n";
  b << "TimeoutStopSec=2min\nKillMode=mixed\n\n";
  b << "[Install]\nWantedBy=multi-user.target\n";
  std::string body = b.str();
  r.spec_hash = Sha256Hex(body);
  r.content = std::string(kUnitMarker) + " " + ctx.berth_version +
              ". Edits are drift: berth rewrites this file.\n" + kSpecHashKey + r.spec_hash + "\n" +
              body;
  return r;
}

namespace {

using Entries = std::vector<std::pair<std::string, std::string>>;  // "Section.Key" -> value

Entries ParseUnit(const std::string& content) {
  Entries out;
  std::istringstream in(content);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
      continue;
    }
    size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    out.emplace_back(section + "." + line.substr(0, eq), line.substr(eq + 1));
  }
  return out;
}

bool Cosmetic(const std::string& key) {
  return key == "Unit.Description" || key == "Unit.Documentation";
}

// "--port 8000 → 8001, +--enable-expert-parallel" from two argv.
std::string DiffArgv(const std::vector<std::string>& a, const std::vector<std::string>& b,
                     bool* only_model_path) {
  auto flags = [](const std::vector<std::string>& v) {
    std::vector<std::pair<std::string, std::string>> f;  // flag -> value ("" for switches)
    std::vector<std::string> positional;
    for (size_t i = 0; i < v.size(); ++i) {
      if (v[i].starts_with("--")) {
        std::string val;
        if (i + 1 < v.size() && !v[i + 1].starts_with("--")) val = v[++i];
        f.emplace_back(v[i - (val.empty() ? 0 : 1)], val);
      } else {
        positional.push_back(v[i]);
      }
    }
    return std::make_pair(f, positional);
  };
  auto [fa, pa] = flags(a);
  auto [fb, pb] = flags(b);
  std::vector<std::string> changes;
  *only_model_path = true;
  if (pa != pb) {
    bool path_only = pa.size() == pb.size();
    for (size_t i = 0; path_only && i < pa.size(); ++i)
      if (pa[i] != pb[i] && pa[i].find("/snapshots/") == std::string::npos) path_only = false;
    if (path_only) {
      for (size_t i = 0; i < pa.size(); ++i)
        if (pa[i] != pb[i]) changes.push_back("model " + pa[i] + " → " + pb[i]);
    } else {
      *only_model_path = false;
      std::string old_s, new_s;
      for (const auto& p : pa) old_s += (old_s.empty() ? "" : " ") + p;
      for (const auto& p : pb) new_s += (new_s.empty() ? "" : " ") + p;
      changes.push_back("command " + old_s + " → " + new_s);
    }
  }
  auto find = [](const auto& v, const std::string& k) -> const std::string* {
    for (const auto& [fk, fv] : v)
      if (fk == k) return &fv;
    return nullptr;
  };
  for (const auto& [k, v] : fb) {
    const std::string* old = find(fa, k);
    if (!old) {
      changes.push_back("+" + k + (v.empty() ? "" : " " + v));
      *only_model_path = false;
    } else if (*old != v) {
      changes.push_back(k + " " + *old + " → " + v);
      *only_model_path = false;
    }
  }
  for (const auto& [k, v] : fa)
    if (!find(fb, k)) {
      changes.push_back("-" + k + (v.empty() ? "" : " " + v));
      *only_model_path = false;
    }
  std::string out;
  for (const auto& c : changes) out += (out.empty() ? "" : ", ") + c;
  return out;
}

}  // namespace

UnitDiff DiffUnits(const std::string& old_content, const std::string& new_content) {
  UnitDiff d;
  Entries a = ParseUnit(old_content), b = ParseUnit(new_content);
  if (UnitBody(old_content) != UnitBody(new_content)) d.changed = true;
  std::vector<std::string> parts;
  bool model_path_only = true;
  auto values = [](const Entries& e, const std::string& key) {
    std::vector<std::string> v;
    for (const auto& [k, val] : e)
      if (k == key) v.push_back(val);
    return v;
  };
  std::vector<std::string> keys;
  for (const auto* e : {&a, &b})
    for (const auto& [k, v] : *e)
      if (std::find(keys.begin(), keys.end(), k) == keys.end()) keys.push_back(k);
  for (const auto& key : keys) {
    auto va = values(a, key), vb = values(b, key);
    if (va == vb) continue;
    d.changed = true;
    if (Cosmetic(key)) {
      parts.push_back(key.substr(key.find('.') + 1) + " changed");
      continue;
    }
    d.needs_restart = true;
    if (key == "Service.ExecStart" && va.size() == 1 && vb.size() == 1) {
      bool only_path = false;
      parts.push_back("ExecStart changed: " +
                      DiffArgv(SplitExecLine(va[0]), SplitExecLine(vb[0]), &only_path));
      model_path_only = model_path_only && only_path;
      continue;
    }
    model_path_only = false;
    std::string name = key.substr(key.find('.') + 1);
    if (key == "Service.Environment") {
      std::vector<std::string> env;
      for (const auto& v : vb)
        if (std::find(va.begin(), va.end(), v) == va.end()) env.push_back("+" + v);
      for (const auto& v : va)
        if (std::find(vb.begin(), vb.end(), v) == vb.end()) env.push_back("-" + v);
      std::string joined;
      for (const auto& e : env) joined += (joined.empty() ? "" : ", ") + e;
      parts.push_back("Environment changed: " + joined);
    } else {
      auto join = [](const std::vector<std::string>& v) {
        std::string s;
        for (const auto& x : v) s += (s.empty() ? "" : " ") + x;
        return s.empty() ? std::string("(unset)") : s;
      };
      parts.push_back(name + " changed: " + join(va) + " → " + join(vb));
    }
  }
  d.only_model_path = d.needs_restart && model_path_only;
  for (const auto& p : parts) d.detail += (d.detail.empty() ? "" : "; ") + p;
  if (d.changed && d.detail.empty()) d.detail = "comments or layout changed";
  return d;
}

}  // namespace berth
