#include "providers/systemd/sdbus_manager.h"

#include <spdlog/spdlog.h>
#include <systemd/sd-bus.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <map>

namespace berth {
namespace {

constexpr const char* kDest = "org.freedesktop.systemd1";
constexpr const char* kPath = "/org/freedesktop/systemd1";
constexpr const char* kManager = "org.freedesktop.systemd1.Manager";
constexpr const char* kUnitIface = "org.freedesktop.systemd1.Unit";
constexpr const char* kServiceIface = "org.freedesktop.systemd1.Service";
constexpr uint64_t kCallTimeoutUsec = 60ull * 1000 * 1000;

// RAII for the sd-bus objects berth holds.
struct BusUnref {
  void operator()(sd_bus* b) const { sd_bus_flush_close_unref(b); }
};
struct MsgUnref {
  void operator()(sd_bus_message* m) const { sd_bus_message_unref(m); }
};
struct SlotUnref {
  void operator()(sd_bus_slot* s) const { sd_bus_slot_unref(s); }
};
using BusPtr = std::unique_ptr<sd_bus, BusUnref>;
using MsgPtr = std::unique_ptr<sd_bus_message, MsgUnref>;
using SlotPtr = std::unique_ptr<sd_bus_slot, SlotUnref>;

class BusError {
 public:
  ~BusError() { sd_bus_error_free(&e_); }
  sd_bus_error* get() { return &e_; }
  std::string Describe(int r) const {
    if (e_.message)
      return std::string(e_.message) + (e_.name ? std::string(" (") + e_.name + ")" : "");
    return std::strerror(-r);
  }
  bool Is(const char* name) const { return sd_bus_error_has_name(&e_, name); }

 private:
  sd_bus_error e_ = SD_BUS_ERROR_NULL;
};

Status FromErrno(const std::string& what, int r) {
  return Status::Unavailable(what + ": " + std::strerror(-r));
}

using Clock = std::chrono::steady_clock;

class SdBusManager : public SystemdManager {
 public:
  SdBusManager(BusPtr bus, SdBusOptions options) : bus_(std::move(bus)), opt_(std::move(options)) {}

  Status Init() {
    // JobRemoved carries every job's outcome. The match goes in before Subscribe and before any
    // job is enqueued, so no outcome can be missed (systemd's own recipe).
    sd_bus_slot* slot = nullptr;
    int r =
        sd_bus_match_signal(bus_.get(), &slot, sd_bus_is_bus_client(bus_.get()) ? kDest : nullptr,
                            kPath, kManager, "JobRemoved", &SdBusManager::OnJobRemoved, this);
    if (r < 0) return FromErrno("cannot watch systemd's JobRemoved signal", r);
    slot_.reset(slot);
    BusError err;
    r = sd_bus_call_method(bus_.get(), kDest, kPath, kManager, "Subscribe", err.get(), nullptr, "");
    if (r < 0 && !err.Is("org.freedesktop.systemd1.AlreadySubscribed"))
      return Status::Unavailable("cannot subscribe to systemd's signals: " + err.Describe(r));
    return Status::Ok();
  }

  Result<std::vector<UnitProperties>> GetUnits(const std::vector<std::string>& names) override;
  Status Reload() override;
  Status Start(const std::string& unit, std::chrono::milliseconds timeout) override {
    return RunJob("StartUnit", unit, timeout, /*want_active=*/true);
  }
  Status Stop(const std::string& unit, std::chrono::milliseconds timeout) override {
    return RunJob("StopUnit", unit, timeout, /*want_active=*/false);
  }
  Status Restart(const std::string& unit, std::chrono::milliseconds timeout) override {
    return RunJob("RestartUnit", unit, timeout, /*want_active=*/true);
  }
  Status Enable(const std::string& unit) override;
  Status Disable(const std::string& unit) override;
  Result<std::vector<std::string>> ManagerEnvironment() override {
    BusError err;
    char** strv = nullptr;
    int r = sd_bus_get_property_strv(bus_.get(), kDest, kPath, kManager, "Environment", err.get(),
                                     &strv);
    if (r < 0)
      return Status::Unavailable("cannot read systemd's environment for services: " +
                                 err.Describe(r));
    std::vector<std::string> out;
    for (char** p = strv; p && *p; ++p) {
      out.emplace_back(*p);
      free(*p);
    }
    free(strv);
    return out;
  }

 private:
  static int OnJobRemoved(sd_bus_message* m, void* userdata, sd_bus_error*) {
    auto* self = static_cast<SdBusManager*>(userdata);
    uint32_t id = 0;
    const char *job = nullptr, *unit = nullptr, *result = nullptr;
    if (sd_bus_message_read(m, "uoss", &id, &job, &unit, &result) >= 0 && job && result)
      self->results_[job] = result;
    return 0;
  }

  Status RunJob(const char* method, const std::string& unit, std::chrono::milliseconds timeout,
                bool want_active);
  Status ProcessUntil(const std::string& job, Clock::time_point deadline, std::string* result);
  std::string JournalSuffix(const std::string& unit) {
    if (!opt_.journal) return "";
    std::vector<std::string> lines = opt_.journal->Tail(unit, opt_.journal_lines);
    if (lines.empty()) return "\n  (no journal lines for " + unit + ")";
    std::string out = "\n  last journal lines of " + unit + ":";
    for (const auto& l : lines) out += "\n    " + l;
    return out;
  }

  BusPtr bus_;
  SdBusOptions opt_;
  SlotPtr slot_;
  std::map<std::string, std::string> results_;  // job path -> result, as JobRemoved arrives
};

// Reads a{sv} into the fields berth knows; skips the rest.
// Reads one property's variant (the message is positioned at it) into the field for `k`;
// skips properties berth does not read.
int ReadOne(sd_bus_message* m, const std::string& k, UnitProperties* p) {
  int r = 0;
  auto read_string = [&](std::string* out) {
    const char* v = nullptr;
    int rr = sd_bus_message_read(m, "v", "s", &v);
    if (rr >= 0 && v) *out = v;
    return rr;
  };
  if (k == "LoadState")
    r = read_string(&p->load_state);
  else if (k == "ActiveState")
    r = read_string(&p->active_state);
  else if (k == "SubState")
    r = read_string(&p->sub_state);
  else if (k == "FragmentPath")
    r = read_string(&p->fragment_path);
  else if (k == "UnitFileState")
    r = read_string(&p->unit_file_state);
  else if (k == "Result")
    r = read_string(&p->result);
  else if (k == "NeedDaemonReload") {
    int b = 0;
    r = sd_bus_message_read(m, "v", "b", &b);
    p->need_daemon_reload = b != 0;
  } else if (k == "MainPID")
    r = sd_bus_message_read(m, "v", "u", &p->main_pid);
  else if (k == "NRestarts")
    r = sd_bus_message_read(m, "v", "u", &p->n_restarts);
  else if (k == "ExecMainStatus")
    r = sd_bus_message_read(m, "v", "i", &p->exec_main_status);
  else if (k == "ActiveEnterTimestamp")
    r = sd_bus_message_read(m, "v", "t", &p->active_enter_usec);
  else if (k == "InactiveExitTimestampMonotonic")
    r = sd_bus_message_read(m, "v", "t", &p->inactive_exit_monotonic_usec);
  else if (k == "ActiveEnterTimestampMonotonic")
    r = sd_bus_message_read(m, "v", "t", &p->active_enter_monotonic_usec);
  else if (k == "TimeoutStopUSec")
    r = sd_bus_message_read(m, "v", "t", &p->timeout_stop_usec);
  else if (k == "DropInPaths") {
    if ((r = sd_bus_message_enter_container(m, 'v', "as")) < 0) return r;
    char** strv = nullptr;
    if ((r = sd_bus_message_read_strv(m, &strv)) < 0) return r;
    p->drop_in_paths.clear();
    for (char** s = strv; s && *s; ++s) {
      p->drop_in_paths.emplace_back(*s);
      free(*s);
    }
    free(strv);
    r = sd_bus_message_exit_container(m);
  } else if (k == "InvocationID") {
    if ((r = sd_bus_message_enter_container(m, 'v', "ay")) < 0) return r;
    const void* data = nullptr;
    size_t size = 0;
    if ((r = sd_bus_message_read_array(m, 'y', &data, &size)) < 0) return r;
    static const char kHex[] = "0123456789abcdef";
    p->invocation_id.clear();
    for (size_t i = 0; i < size; ++i) {
      unsigned char c = static_cast<const unsigned char*>(data)[i];
      p->invocation_id += kHex[c >> 4];
      p->invocation_id += kHex[c & 15];
    }
    r = sd_bus_message_exit_container(m);
  } else {
    r = sd_bus_message_skip(m, "v");
  }
  return r;
}

// The properties berth reads beyond what ListUnitsByNames returns: asked one by one (a GetAll
// of .Service alone returns some 300 properties; berth needs 13 in all).
struct WantedProperty {
  const char* iface;
  const char* name;
};
constexpr WantedProperty kWanted[] = {{kUnitIface, "FragmentPath"},
                                      {kUnitIface, "DropInPaths"},
                                      {kUnitIface, "NeedDaemonReload"},
                                      {kUnitIface, "UnitFileState"},
                                      {kUnitIface, "InvocationID"},
                                      {kServiceIface, "MainPID"},
                                      {kServiceIface, "NRestarts"},
                                      {kServiceIface, "Result"},
                                      {kServiceIface, "ExecMainStatus"},
                                      {kUnitIface, "ActiveEnterTimestamp"},
                                      {kServiceIface, "TimeoutStopUSec"},
                                      {kUnitIface, "InactiveExitTimestampMonotonic"},
                                      {kUnitIface, "ActiveEnterTimestampMonotonic"}};

Result<std::vector<UnitProperties>> SdBusManager::GetUnits(const std::vector<std::string>& names) {
  std::vector<UnitProperties> out(names.size());
  for (size_t i = 0; i < names.size(); ++i) out[i].name = names[i];
  if (names.empty()) return out;

  // Round trip 1: ListUnitsByNames loads every named unit and gives its object path.
  sd_bus_message* raw = nullptr;
  int r =
      sd_bus_message_new_method_call(bus_.get(), &raw, kDest, kPath, kManager, "ListUnitsByNames");
  if (r < 0) return FromErrno("cannot build a D-Bus call", r);
  MsgPtr call(raw);
  std::vector<const char*> cnames;
  for (const auto& n : names) cnames.push_back(n.c_str());
  cnames.push_back(nullptr);
  r = sd_bus_message_append_strv(call.get(), const_cast<char**>(cnames.data()));
  if (r < 0) return FromErrno("cannot build a D-Bus call", r);
  BusError err;
  sd_bus_message* reply_raw = nullptr;
  r = sd_bus_call(bus_.get(), call.get(), kCallTimeoutUsec, err.get(), &reply_raw);
  if (r < 0) return Status::Unavailable("systemd ListUnitsByNames failed: " + err.Describe(r));
  MsgPtr reply(reply_raw);
  std::map<std::string, std::string> paths;  // unit name -> object path
  r = sd_bus_message_enter_container(reply.get(), 'a', "(ssssssouso)");
  while (r >= 0 && (r = sd_bus_message_enter_container(reply.get(), 'r', "ssssssouso")) > 0) {
    const char *id, *desc, *load, *active, *sub, *following, *path, *jtype, *jpath;
    uint32_t jid;
    r = sd_bus_message_read(reply.get(), "ssssssouso", &id, &desc, &load, &active, &sub, &following,
                            &path, &jid, &jtype, &jpath);
    if (r < 0) break;
    paths[id] = path;
    for (auto& p : out)
      if (p.name == id) {
        p.load_state = load;
        p.active_state = active;
        p.sub_state = sub;
      }
    r = sd_bus_message_exit_container(reply.get());
  }
  if (r < 0) return FromErrno("cannot read systemd's unit list", r);

  // Round trip 2: the wanted properties of every loaded unit, all calls in flight at once.
  struct Pending {
    UnitProperties* props;
    const char* name;
    MsgPtr reply;
    bool failed = false;  // an error reply (the unit went away meanwhile)
  };
  std::vector<std::unique_ptr<Pending>> pending;
  std::vector<SlotPtr> slots;
  auto on_reply = [](sd_bus_message* m, void* userdata, sd_bus_error*) -> int {
    auto* p = static_cast<Pending*>(userdata);
    if (sd_bus_message_is_method_error(m, nullptr))
      p->failed = true;
    else
      p->reply.reset(sd_bus_message_ref(m));
    return 0;
  };
  for (auto& p : out) {
    auto it = paths.find(p.name);
    if (it == paths.end() || p.load_state == "not-found") continue;
    for (const WantedProperty& w : kWanted) {
      auto pend = std::make_unique<Pending>();
      pend->props = &p;
      pend->name = w.name;
      sd_bus_slot* slot = nullptr;
      r = sd_bus_call_method_async(bus_.get(), &slot, kDest, it->second.c_str(),
                                   "org.freedesktop.DBus.Properties", "Get", on_reply, pend.get(),
                                   "ss", w.iface, w.name);
      if (r < 0) return FromErrno("cannot ask systemd for " + p.name + "'s properties", r);
      slots.emplace_back(slot);
      pending.push_back(std::move(pend));
    }
  }
  Clock::time_point deadline = Clock::now() + std::chrono::seconds(60);
  size_t answered = 0;
  for (;;) {
    r = sd_bus_process(bus_.get(), nullptr);
    if (r < 0) return FromErrno("lost the connection to systemd", r);
    if (r > 0) continue;
    while (answered < pending.size() && (pending[answered]->reply || pending[answered]->failed))
      ++answered;
    if (answered == pending.size()) break;
    if (Clock::now() > deadline) return Status::Unavailable("systemd did not answer within 60 s");
    r = sd_bus_wait(bus_.get(), 100000);
    if (r < 0 && r != -EINTR) return FromErrno("lost the connection to systemd", r);
  }
  for (auto& p : pending) {
    if (!p->reply) continue;  // a unit unloaded meanwhile: keep the list's states
    r = ReadOne(p->reply.get(), p->name, p->props);
    if (r < 0) return FromErrno("cannot read " + p->props->name + "'s " + p->name, r);
  }
  return out;
}

Status SdBusManager::Reload() {
  BusError err;
  // The reply comes once the reload has finished.
  int r = sd_bus_call_method(bus_.get(), kDest, kPath, kManager, "Reload", err.get(), nullptr, "");
  if (r < 0)
    return Status::Unavailable("systemd daemon-reload failed: " + err.Describe(r) +
                               "; unit files on disk are not yet what systemd runs");
  return Status::Ok();
}

// Reads EnableUnitFiles' and DisableUnitFiles' a(sss) changes: (type, link, target).
int ReadChanges(sd_bus_message* m, std::vector<std::string>* changes) {
  int r = sd_bus_message_enter_container(m, 'a', "(sss)");
  if (r < 0) return r;
  const char *type = nullptr, *link = nullptr, *target = nullptr;
  while ((r = sd_bus_message_read(m, "(sss)", &type, &link, &target)) > 0)
    changes->push_back(std::string(type ? type : "") + " " + (link ? link : ""));
  if (r < 0) return r;
  return sd_bus_message_exit_container(m);
}

Status SdBusManager::Enable(const std::string& unit) {
  const char* names[] = {unit.c_str(), nullptr};
  sd_bus_message* raw = nullptr;
  int r =
      sd_bus_message_new_method_call(bus_.get(), &raw, kDest, kPath, kManager, "EnableUnitFiles");
  if (r < 0) return FromErrno("cannot build a D-Bus call", r);
  MsgPtr call(raw);
  r = sd_bus_message_append_strv(call.get(), const_cast<char**>(names));
  if (r >= 0) r = sd_bus_message_append(call.get(), "bb", 0, 0);  // runtime=false, force=false
  if (r < 0) return FromErrno("cannot build a D-Bus call", r);
  BusError err;
  sd_bus_message* reply_raw = nullptr;
  r = sd_bus_call(bus_.get(), call.get(), kCallTimeoutUsec, err.get(), &reply_raw);
  if (r < 0)
    return Status::FailedPrecondition("systemd refused to enable " + unit + ": " + err.Describe(r) +
                                      "; it will not start at boot");
  MsgPtr reply(reply_raw);
  int carries_install_info = 0;
  std::vector<std::string> changes;
  r = sd_bus_message_read(reply.get(), "b", &carries_install_info);
  if (r >= 0) r = ReadChanges(reply.get(), &changes);
  if (r < 0) return FromErrno("cannot read systemd's answer to enabling " + unit, r);
  if (!carries_install_info)
    return Status::FailedPrecondition(unit + " has no [Install] section, so systemd cannot " +
                                      "enable it; it starts at boot only if another unit wants it");
  for (const auto& c : changes) spdlog::info("enable {}: {}", unit, c);
  // UnitFileState is cached by systemd until a reload (systemctl enable reloads too).
  return Reload();
}

Status SdBusManager::Disable(const std::string& unit) {
  const char* names[] = {unit.c_str(), nullptr};
  sd_bus_message* raw = nullptr;
  int r =
      sd_bus_message_new_method_call(bus_.get(), &raw, kDest, kPath, kManager, "DisableUnitFiles");
  if (r < 0) return FromErrno("cannot build a D-Bus call", r);
  MsgPtr call(raw);
  r = sd_bus_message_append_strv(call.get(), const_cast<char**>(names));
  if (r >= 0) r = sd_bus_message_append(call.get(), "b", 0);  // runtime=false
  if (r < 0) return FromErrno("cannot build a D-Bus call", r);
  BusError err;
  sd_bus_message* reply_raw = nullptr;
  r = sd_bus_call(bus_.get(), call.get(), kCallTimeoutUsec, err.get(), &reply_raw);
  if (r < 0)
    return Status::FailedPrecondition("systemd refused to disable " + unit + ": " +
                                      err.Describe(r) + "; a reboot may still start it");
  MsgPtr reply(reply_raw);
  std::vector<std::string> changes;
  r = ReadChanges(reply.get(), &changes);
  if (r < 0) return FromErrno("cannot read systemd's answer to disabling " + unit, r);
  for (const auto& c : changes) spdlog::info("disable {}: {}", unit, c);
  return Reload();
}

Status SdBusManager::ProcessUntil(const std::string& job, Clock::time_point deadline,
                                  std::string* result) {
  for (;;) {
    auto it = results_.find(job);
    if (it != results_.end()) {
      *result = it->second;
      results_.erase(it);
      return Status::Ok();
    }
    int r = sd_bus_process(bus_.get(), nullptr);
    if (r < 0) return FromErrno("lost the connection to systemd while waiting for a job", r);
    if (r > 0) continue;
    auto now = Clock::now();
    if (now >= deadline) return Status::Unavailable("timeout");
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline - now).count();
    r = sd_bus_wait(bus_.get(), static_cast<uint64_t>(std::min<int64_t>(left, 200000)));
    if (r < 0 && r != -EINTR) return FromErrno("lost the connection to systemd", r);
  }
}

Status SdBusManager::RunJob(const char* method, const std::string& unit,
                            std::chrono::milliseconds timeout, bool want_active) {
  Clock::time_point deadline = Clock::now() + timeout;
  std::string verb =
      want_active ? (std::string(method) == "RestartUnit" ? "restart" : "start") : "stop";
  BusError err;
  sd_bus_message* reply_raw = nullptr;
  int r = sd_bus_call_method(bus_.get(), kDest, kPath, kManager, method, err.get(), &reply_raw,
                             "ss", unit.c_str(), "replace");
  if (r < 0)
    return Status::FailedPrecondition("systemd refused to " + verb + " " + unit + ": " +
                                      err.Describe(r) + JournalSuffix(unit));
  MsgPtr reply(reply_raw);
  const char* job = nullptr;
  r = sd_bus_message_read(reply.get(), "o", &job);
  if (r < 0 || !job) return FromErrno("cannot read the job of " + unit, r);
  std::string job_path = job;
  std::string result;
  Status s = ProcessUntil(job_path, deadline, &result);
  if (!s.ok()) {
    if (s.message() == "timeout") {
      // Give up on our job so it does not linger: cancel by stopping (start) or leave (stop).
      if (want_active) {
        BusError ignored;
        sd_bus_call_method(bus_.get(), kDest, kPath, kManager, "StopUnit", ignored.get(), nullptr,
                           "ss", unit.c_str(), "replace");
      }
      return Status::Unavailable(
          unit + " did not " + verb + " within " + std::to_string(timeout.count() / 1000) + " s" +
          (want_active ? "; berth stopped it again" : "") + JournalSuffix(unit));
    }
    return s;
  }
  // A done job does not mean running: read the unit's state back.
  auto props = GetUnits({unit});
  if (!props.ok()) return props.status();
  const UnitProperties& p = (*props)[0];
  bool active =
      p.active_state == "active" || p.active_state == "reloading" || p.active_state == "activating";
  if (result == "done" && active == want_active) return Status::Ok();
  if (result == "done" && !want_active && p.active_state == "failed") return Status::Ok();
  std::string state = p.active_state + "/" + p.sub_state;
  if (!p.result.empty() && p.result != "success") state += ", Result=" + p.result;
  if (p.exec_main_status != 0) state += ", exit status " + std::to_string(p.exec_main_status);
  return Status::FailedPrecondition(unit + ": " + verb + " job " + result + ", unit is now " +
                                    state + JournalSuffix(unit));
}

}  // namespace

Result<std::unique_ptr<SystemdManager>> ConnectSystemd(const SdBusOptions& options) {
  sd_bus* raw = nullptr;
  int r;
  std::string where;
  if (options.address.empty()) {
    r = sd_bus_open_system(&raw);
    const char* env = std::getenv("DBUS_SYSTEM_BUS_ADDRESS");
    where = env ? std::string("the system bus at ") + env : "the system bus";
  } else {
    where = options.address;
    r = sd_bus_new(&raw);
    if (r >= 0) r = sd_bus_set_address(raw, options.address.c_str());
    if (r >= 0) r = sd_bus_set_bus_client(raw, 1);
    if (r >= 0) r = sd_bus_start(raw);
  }
  BusPtr bus(raw);
  if (r < 0)
    return Status::Unavailable("cannot connect to systemd over " + where + ": " +
                               std::strerror(-r) +
                               "; is systemd running and are you root? Nothing was changed");
  auto mgr = std::make_unique<SdBusManager>(std::move(bus), options);
  BERTH_RETURN_IF_ERROR(mgr->Init());
  return std::unique_ptr<SystemdManager>(std::move(mgr));
}

}  // namespace berth
