#include "engine/fleet/fleet_turn.h"

#include <algorithm>
#include <random>
#include <sstream>

#include "core/log.h"
#include "core/read_file.h"
#include "core/untrusted_text.h"
#include "planners/fleet.h"

namespace berth {
namespace {

std::string Seconds(uint64_t ms) {
  std::ostringstream s;
  if (ms % 1000 == 0)
    s << ms / 1000 << "s";
  else
    s << ms << "ms";
  return s.str();
}

std::string HeldWhy(const FleetSpec& f, const std::vector<std::string>& holders) {
  std::string list;
  for (const std::string& h : holders) {
    if (!list.empty()) list += ", ";
    list += h;
  }
  return "all " + std::to_string(f.max_unavailable) + " slot" +
         (f.max_unavailable == 1 ? " is" : "s are") + " held (max_unavailable " +
         std::to_string(f.max_unavailable) + "): by " + list;
}

/// What a waiting host's report says it waits for: earlier waves (the first it waited for:
/// "wave canary goes first"), or a slot; not who holds the slots nor which host or wave is
/// last, which change at every step of the rollout and would have every waiting host write its
/// report each time (and every other one read it). `category`: "wave" or "slot".
std::string WaitingFor(const FleetSpec& f, const std::string& why, std::string* category) {
  if (why.starts_with("wave ")) {
    *category = "wave";
    return why.substr(0, why.find_first_of(":,"));
  }
  *category = "slot";
  return "waiting for a free slot (max_unavailable " + std::to_string(f.max_unavailable) + ")";
}

std::string EtcdDown(const FleetSpec& f, const Status& s) {
  return "fleet " + f.name + ": etcd cannot be reached (" + s.message() +
         "); no service was taken down, the rest of the plan proceeds, and berth tries again";
}

}  // namespace

std::string FleetKey(const FleetSpec& f, const std::string& rest) {
  return f.prefix + f.name + "/" + rest;
}

std::vector<FleetReport> FleetReportsOf(const FleetSpec& f, const std::vector<const EtcdKv*>& kvs,
                                        std::vector<std::string>* warnings) {
  std::string prefix = FleetKey(f, "hosts/");
  std::vector<FleetReport> out;
  for (const EtcdKv* kv : kvs) {
    if (!kv->key.starts_with(prefix)) continue;
    if (kv->too_large) {
      // Someone else's writing: one key cannot stall the fleet. Left out, and named.
      if (warnings)
        warnings->push_back("the fleet report at " + EscapeControl(kv->key) +
                            " is larger than 64 KiB, which no berth writes: it is left out; "
                            "delete it (berth fleet forget -f MANIFEST HOST, or etcdctl del) "
                            "or let its host report again");
      continue;
    }
    auto r = FleetReportFromJson(kv->value, kv->key);
    if (r.ok() && prefix + r->host != kv->key)
      r = Status::Internal("the fleet report at " + EscapeControl(kv->key) +
                           " names another host, " + r->host);
    if (r.ok())
      out.push_back(std::move(r).value());
    else if (warnings)
      warnings->push_back(r.status().message());
  }
  return out;
}

Result<std::vector<FleetReport>> ReadFleetReports(Etcd& etcd, const FleetSpec& f,
                                                  std::vector<std::string>* warnings) {
  auto kvs = etcd.Range(FleetKey(f, "hosts/"), 0, kMaxFleetReportBytes);
  if (!kvs.ok()) return kvs.status();
  std::vector<const EtcdKv*> all;
  for (const EtcdKv& kv : *kvs) all.push_back(&kv);
  return FleetReportsOf(f, all, warnings);
}

Status ForgetFleetHost(Etcd& etcd, const FleetSpec& f, const std::string& host) {
  if (!IsFleetHostName(host))
    return Status::InvalidArgument("'" + EscapeControl(host) +
                                   "' is not a host name (letters, digits, '.', '-', '_')");
  std::string key = FleetKey(f, "hosts/" + host);
  auto before = etcd.Get(key);
  if (!before.ok()) return before.status();
  if (!before->has_value())
    return Status::NotFound("fleet " + f.name + " has no report of " + host + " (" + key + ")");
  return etcd.Delete(key);
}

Result<std::unique_ptr<Etcd>> ConnectFleetEtcd(const FleetSpec& fleet) {
  EtcdOptions o;
  o.endpoints = fleet.endpoints;
  o.ca_file = fleet.ca_file;
  o.cert_file = fleet.cert_file;
  o.key_file = fleet.key_file;
  o.username = fleet.username;
  o.timeout = std::chrono::milliseconds(fleet.request_timeout_ms);
  if (!fleet.password_file.empty()) {
    // Often a link (a mounted secret): followed, but only to a regular file of at most 4 KiB.
    Result<std::string> read =
        ReadRegularFile(fleet.password_file, {.max_bytes = 4096, .follow_links = true});
    if (!read.ok())
      return Status::NotFound("fleet " + fleet.name +
                              ": cannot read the etcd password file: " + read.status().message() +
                              "; no service is taken down until berth can read it");
    std::string password = std::move(read).value();
    while (!password.empty() && (password.back() == '\n' || password.back() == '\r'))
      password.pop_back();
    o.password = password;
  }
  return ConnectEtcd(o);
}

FleetTurn::FleetTurn(const FleetSpec& fleet, Etcd* etcd, FleetTurnOptions options)
    : fleet_(fleet),
      etcd_(etcd),
      o_(std::move(options)),
      clock_(o_.clock ? *o_.clock : RealClock()) {}

FleetTurn::~FleetTurn() { Release(); }

Status FleetTurn::Publish(FleetReport report) { return Write(std::move(report), nullptr); }

bool FleetTurn::SameAsWritten(const FleetReport& report, const std::optional<EtcdKv>& current) {
  if (!current.has_value()) return false;
  auto before = FleetReportFromJson(current->value, current->key);
  if (!before.ok()) return false;
  // Written again once it is old (a sign of life), or when its time is ahead of this clock.
  if (before->updated_unix > report.updated_unix ||
      report.updated_unix - before->updated_unix >= kFleetReportRefreshSeconds)
    return false;
  before->updated_unix = report.updated_unix;
  return FleetReportToJson(*before) == FleetReportToJson(report);
}

Status FleetTurn::Write(FleetReport report, const std::optional<EtcdKv>* current) {
  report.host = o_.host;
  report.wave = WaveName(fleet_, WaveIndex(fleet_, o_.host));
  report.updated_unix = static_cast<int64_t>(clock_.UnixNow());
  if (report.state == kFleetWaiting || report.state == kFleetSwitching) {
    report.services_up = o_.services_up;
    report.services_wanted = o_.services_wanted;
  }
  if (report.digest.empty()) report.digest = o_.digest;
  if (report.berth_version.empty()) report.berth_version = BERTH_VERSION;
  std::string key = FleetKey(fleet_, "hosts/" + o_.host);
  std::optional<EtcdKv> fetched;
  if (!current) {
    auto last = etcd_->Get(key);
    if (last.ok()) fetched = std::move(last).value();  // else: written without comparing
    current = &fetched;
  }
  if (report.state == kFleetConverged && report.start_to_healthy_ms.empty() &&
      report.floor_figures.empty() && current->has_value()) {
    // A pass with nothing to do keeps the figures of the switch that converged on this manifest.
    auto before = FleetReportFromJson((*current)->value, key);
    if (before.ok() && before->digest == report.digest) {
      report.start_to_healthy_ms = before->start_to_healthy_ms;
      report.floor_figures = before->floor_figures;
      report.reference_figures = before->reference_figures;
    }
  }
  if (SameAsWritten(report, *current)) return Status::Ok();
  return etcd_->Put(key, FleetReportToJson(report));
}

Status FleetTurn::ReadView() {
  int64_t revision = 0;
  auto kvs = etcd_->Range(FleetKey(fleet_, ""), 0, kMaxFleetReportBytes, &revision);
  if (!kvs.ok()) return kvs.status();
  view_ = View();
  for (EtcdKv& kv : *kvs) {
    std::string key = kv.key;
    view_.kv.emplace(key, std::move(kv));
    ParseIntoView(key);
  }
  view_.revision = revision;
  view_.read = true;
  watch_.reset();  // a new one from this revision, when needed
  return Status::Ok();
}

bool FleetTurn::WatchView(std::chrono::milliseconds window, std::string* why, bool* changed) {
  *changed = false;
  if (!watch_) {
    auto opened = etcd_->Watch(FleetKey(fleet_, ""), view_.revision + 1, kMaxFleetReportBytes);
    if (!opened.ok()) {
      *why = opened.status().message();
      view_.read = false;
      return false;
    }
    watch_ = std::move(opened).value();
  }
  auto w = watch_->Next(window, o_.stop);
  if (!w.ok()) {
    *why = w.status().message();
    watch_.reset();
    view_.read = false;
    return false;
  }
  *changed = w->changed;
  if (w->compacted) {
    watch_.reset();
    view_.read = false;  // what changed since cannot be told: read again
    return true;
  }
  for (EtcdWatchResult::Event& e : w->events) {
    view_.revision = std::max(view_.revision, e.kv.mod_revision);
    std::string key = e.kv.key;
    if (e.deleted)
      view_.kv.erase(key);
    else
      view_.kv[key] = std::move(e.kv);
    ParseIntoView(key);
  }
  return true;
}

void FleetTurn::ParseIntoView(const std::string& key) {
  if (view_.parsed.erase(key) > 0) view_.reports_stale = true;
  view_.wave.erase(key);
  auto it = view_.kv.find(key);
  if (it == view_.kv.end() || !key.starts_with(FleetKey(fleet_, "hosts/"))) return;
  std::vector<std::string> unread;
  std::vector<FleetReport> one = FleetReportsOf(fleet_, {&it->second}, &unread);
  for (const std::string& w : unread)
    if (warned_.insert(w).second) spdlog::warn("fleet {}: {}", fleet_.name, w);
  if (one.empty()) return;
  view_.wave[key] = WaveIndex(fleet_, one[0].host);
  view_.parsed.emplace(key, std::move(one[0]));
  view_.reports_stale = true;
}

const std::vector<FleetReport>& FleetTurn::ViewReports() {
  if (view_.reports_stale) {
    const size_t mine = WaveIndex(fleet_, o_.host);
    view_.reports.clear();
    for (const auto& [key, r] : view_.parsed)
      if (view_.wave[key] < mine || r.state == kFleetFailed || r.state == kFleetCrashLooping)
        view_.reports.push_back(r);
    view_.reports_stale = false;
  }
  return view_.reports;
}

std::vector<int> FleetTurn::FreeSlots() {
  std::vector<int> free;
  for (int i = 0; i < fleet_.max_unavailable; ++i)
    if (!view_.read || !view_.kv.count(FleetKey(fleet_, "slots/" + std::to_string(i))))
      free.push_back(i);
  return free;
}

int FleetTurn::Contenders() {
  const size_t mine = WaveIndex(fleet_, o_.host);
  int n = 0;
  for (const auto& [key, r] : view_.parsed)
    if (r.host != o_.host && r.state == kFleetWaiting && r.digest == o_.digest &&
        view_.wave[key] == mine)
      ++n;
  return n;
}

Status FleetTurn::TrySlot(const std::vector<int>& slots, bool* got, std::string* why) {
  *got = false;
  if (lease_ == 0) {
    auto lease = etcd_->GrantLease(
        std::chrono::seconds(std::max<uint64_t>(2, (fleet_.lease_ttl_ms + 999) / 1000)));
    if (!lease.ok()) return lease.status();
    lease_ = *lease;
    lease_lost_ = false;
    {
      std::lock_guard<std::mutex> hold(mu_);
      stop_keepalive_ = false;
    }
    keepalive_ = std::thread([this] { KeepAliveLoop(); });
  }
  std::vector<std::string> holders;
  FleetSlot mine{o_.host, o_.digest, static_cast<int64_t>(clock_.UnixNow())};
  for (size_t n = 0; n < slots.size(); ++n) {
    std::string key = FleetKey(fleet_, "slots/" + std::to_string(slots[n]));
    EtcdKv existing;
    auto created = etcd_->CreateIfAbsent(key, FleetSlotToJson(mine), lease_, &existing);
    if (!created.ok() && created.status().code() == Status::Code::kNotFound) {
      // The lease expired meanwhile (etcd unreachable longer than its TTL): a new one next look.
      StopKeepAlive();
      lease_ = 0;
      *why = "this host's lease expired while it waited; asking for a new one";
      return Status::Ok();
    }
    if (!created.ok()) return created.status();
    // An earlier try whose answer was lost may have created it: on our lease, it is ours.
    if (*created || existing.lease == lease_) {
      *got = true;
      slot_key_ = key;
      return Status::Ok();
    }
    auto holder = FleetSlotFromJson(existing.value, key);
    if (holder.ok() && holder->host == o_.host && existing.lease != lease_) {
      // This host's own slot from a berth that died mid-switch: this berth holds the state lock,
      // so that one is gone. Take it over rather than wait for its lease to expire.
      spdlog::warn("fleet {}: {} was held by an earlier berth of this host; taking it over",
                   fleet_.name, key);
      auto deleted = etcd_->DeleteIfLease(key, existing.lease);
      if (!deleted.ok()) return deleted.status();
      --n;  // the same slot again
      continue;
    }
    holders.push_back(holder.ok() ? holder->host : "(unreadable: " + key + ")");
  }
  *why = HeldWhy(fleet_, holders);
  return Status::Ok();
}

std::vector<std::string> FleetTurn::ViewHolders() {
  std::vector<std::string> holders;
  for (const auto& [key, kv] : view_.kv) {
    if (!key.starts_with(FleetKey(fleet_, "slots/"))) continue;
    auto holder = FleetSlotFromJson(kv.value, key);
    holders.push_back(holder.ok() ? holder->host : "(unreadable: " + key + ")");
  }
  return holders;
}

bool FleetTurn::StillHeld(std::string* why) {
  if (!holding_) {
    *why = "this host holds no turn";
    return false;
  }
  if (lease_lost_.load()) {
    *why = "its lease was lost (etcd did not renew it within its TTL)";
    return false;
  }
  auto slot = etcd_->Get(slot_key_);
  if (!slot.ok()) {
    *why = "etcd cannot be reached to check it (" + slot.status().message() + ")";
    return false;
  }
  if (!slot->has_value() || (*slot)->lease != lease_) {
    *why = slot_key_ + " is no longer on this host's lease (it expired)";
    return false;
  }
  return true;
}

Status FleetTurn::Acquire() {
  if (holding_) {
    std::string why;
    if (StillHeld(&why)) return Status::Ok();
    // Another host may hold the slot by now: wait for a turn again, as if never held.
    spdlog::warn("fleet {}: this host's turn is lost: {}; taking it again before going on",
                 fleet_.name, why);
    if (o_.say)
      o_.say("fleet " + fleet_.name + ": this host's turn is lost (" + why +
             "); waiting for a turn again before the next step that takes a service down");
    StopKeepAlive();
    if (lease_ != 0) (void)etcd_->Revoke(lease_);  // best effort: it may be gone already
    lease_ = 0;
    holding_ = false;
    slot_key_.clear();
  }
  Clock::TimePoint deadline = clock_.Now() + std::chrono::milliseconds(fleet_.wait_ms);
  std::string last_why, last_published;
  // Polling: looks again after poll, doubling to 8 × poll while nothing changes.
  std::chrono::milliseconds poll = o_.poll;
  const bool may_watch = o_.watch && etcd_->CanWatch();
  watch_failed_ = false;
  view_ = View();
  // The watch is open only while this host waits.
  struct CloseWatch {
    std::unique_ptr<EtcdWatch>& watch;
    ~CloseWatch() { watch.reset(); }
  } close_watch{watch_};
  std::minstd_rand rng(static_cast<unsigned>(std::hash<std::string>{}(o_.host) ^
                                             static_cast<size_t>(clock_.UnixNow())));
  auto fall_back = [&](const std::string& why) {
    watch_failed_ = true;
    spdlog::warn("fleet {}: watching etcd failed ({}); looking every {} to {} instead", fleet_.name,
                 why, Seconds(o_.poll.count()), Seconds(8 * o_.poll.count()));
    if (o_.say)
      o_.say("fleet " + fleet_.name + ": watching etcd failed (" + why + "); polling instead");
  };
  for (;;) {
    if (o_.stop && o_.stop->load())
      return Status::Unavailable("stopped while waiting for a turn in fleet " + fleet_.name +
                                 "; no service was taken down");
    const bool watching = may_watch && !watch_failed_;
    if (!view_.read) {
      Status s = ReadView();
      if (!s.ok()) return Status::Unavailable(EtcdDown(fleet_, s));
    }
    const std::string mine = FleetKey(fleet_, "hosts/" + o_.host);
    auto publish = [&](const std::string& message) {
      FleetReport r;
      r.state = kFleetWaiting;
      r.message = message;
      auto it = view_.kv.find(mine);
      std::optional<EtcdKv> current;
      if (it != view_.kv.end()) current = it->second;
      Status p = Write(r, view_.read ? &current : nullptr);
      if (!p.ok()) spdlog::warn("fleet {}: could not publish: {}", fleet_.name, p.message());
    };
    FleetTurnVerdict v = MayGoDark(fleet_, o_.host, o_.digest, ViewReports());
    if (v.kind == FleetTurnVerdict::kStop) {
      publish(v.why);
      return Status::FailedPrecondition(v.why);
    }
    std::string why = v.why;
    if (v.kind == FleetTurnVerdict::kGo) {
      std::vector<int> free = watching ? FreeSlots() : std::vector<int>();
      if (!watching)
        for (int i = 0; i < fleet_.max_unavailable; ++i) free.push_back(i);
      if (watching && !free.empty()) {
        // The hosts that see a slot free wait a random pause, watching, before they ask: the
        // first to ask usually gets it, and the rest see it taken instead of asking.
        int others = Contenders();
        if (others > 0) {
          auto most = std::min<int64_t>(kFleetPauseMaxMs, kFleetPauseMsPerHost * others);
          auto until = clock_.Now() + std::chrono::milliseconds(
                                          std::uniform_int_distribution<int64_t>(0, most)(rng));
          std::string failed;
          bool changed = false;
          while (!watch_failed_ && view_.read && !FreeSlots().empty() && clock_.Now() < until &&
                 !(o_.stop && o_.stop->load()))
            if (!WatchView(
                    std::chrono::duration_cast<std::chrono::milliseconds>(until - clock_.Now()),
                    &failed, &changed))
              fall_back(failed);
          if (watch_failed_ || !view_.read) continue;
          // The rollout may have stopped meanwhile, or the slot gone: look again first.
          if (MayGoDark(fleet_, o_.host, o_.digest, ViewReports()).kind != FleetTurnVerdict::kGo)
            continue;
          free = FreeSlots();
        }
      }
      if (!free.empty()) {
        bool got = false;
        Status s = TrySlot(free, &got, &why);
        if (!s.ok()) return Status::Unavailable(EtcdDown(fleet_, s));
        if (got) {
          holding_ = true;
          FleetReport r;
          r.state = kFleetSwitching;
          r.message = "holds " + slot_key_;
          Status p = Publish(r);
          if (!p.ok()) spdlog::warn("fleet {}: could not publish: {}", fleet_.name, p.message());
          if (o_.say) o_.say("fleet " + fleet_.name + ": this host's turn (" + slot_key_ + ")");
          return Status::Ok();
        }
      } else {
        why = HeldWhy(fleet_, ViewHolders());
      }
    }
    if (why != last_why) {
      if (o_.say) o_.say("fleet " + fleet_.name + ": waiting: " + why);
      last_why = why;
      poll = o_.poll;
    }
    // Watching, the report says what the host waits for, coarsely; polling, every reason.
    std::string category = why;
    std::string waiting_for = watching ? WaitingFor(fleet_, why, &category) : why;
    if (category != last_published) {
      publish(waiting_for);
      last_published = category;
    }
    if (clock_.Now() >= deadline)
      return Status::Unavailable("fleet " + fleet_.name + ": waited " + Seconds(fleet_.wait_ms) +
                                 " (fleet.wait) for a turn: " + why +
                                 "; no service was taken down, and berth tries again");
    if (watching) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_.Now());
      std::chrono::milliseconds window = std::clamp<std::chrono::milliseconds>(
          left, std::chrono::milliseconds(1), kFleetWatchWindow);
      std::string failed;
      bool changed_now = false;
      if (!WatchView(window, &failed, &changed_now)) {
        fall_back(failed);
      } else if (!changed_now) {
        view_.read = false;  // a quiet window: read the fleet again, in case
      } else if (v.kind == FleetTurnVerdict::kWait) {
        // An earlier wave is on its way: let its changes gather, then take them all at once.
        clock_.SleepUntil(std::min(deadline, clock_.Now() + kFleetWaveLinger));
        bool more = true;
        while (more && !watch_failed_ && view_.read)
          if (!WatchView(std::chrono::milliseconds(0), &failed, &more)) fall_back(failed);
      }
      if (!watch_failed_) continue;
    }
    view_.read = false;
    clock_.SleepUntil(std::min(deadline, clock_.Now() + poll));
    poll = std::min(poll * 2, o_.poll * 8);
  }
}

void FleetTurn::KeepAliveLoop() {
  const auto ttl = std::chrono::milliseconds(fleet_.lease_ttl_ms);
  auto last_ok = clock_.Now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!clock_.WaitUntil(lock, cv_, clock_.Now() + ttl / 3, [this] { return stop_keepalive_; })) {
    lock.unlock();
    auto left = etcd_->KeepAlive(lease_);
    auto now = clock_.Now();
    if (left.ok() && *left > 0) {
      last_ok = now;
    } else if ((left.ok() && *left == 0) || now - last_ok > ttl) {
      if (!lease_lost_.exchange(true))
        spdlog::warn("fleet {}: this host's lease is lost ({}); another host may go dark now",
                     fleet_.name, left.ok() ? "it expired" : left.status().message());
    }
    lock.lock();
  }
}

void FleetTurn::StopKeepAlive() {
  if (!keepalive_.joinable()) return;
  {
    std::lock_guard<std::mutex> hold(mu_);
    stop_keepalive_ = true;
  }
  cv_.notify_all();
  keepalive_.join();
}

void FleetTurn::Release() {
  StopKeepAlive();
  if (lease_ != 0) {
    Status s = etcd_->Revoke(lease_);
    if (!s.ok())
      spdlog::warn("fleet {}: could not give back {} ({}); it frees when its lease expires",
                   fleet_.name, slot_key_.empty() ? "the lease" : slot_key_, s.message());
  }
  lease_ = 0;
  holding_ = false;
  slot_key_.clear();
}

FleetPass::FleetPass(const FleetSpec& fleet, EtcdConnector connect, FleetTurnOptions options)
    : fleet_(fleet), connect_(std::move(connect)), options_(std::move(options)) {}

FleetPass::~FleetPass() { Release(); }

Status FleetPass::Connect() {
  if (turn_) return Status::Ok();
  if (!IsFleetHostName(options_.host))
    return Status::FailedPrecondition(
        "fleet " + fleet_.name + ": this host's name '" + options_.host +
        "' cannot name it in etcd (letters, digits, '.', '-', '_'); no service is taken down");
  if (!connect_)
    return Status::Unavailable(EtcdDown(fleet_, Status::Unavailable("no etcd client here")));
  auto etcd = connect_(fleet_);
  if (!etcd.ok()) return Status::Unavailable(EtcdDown(fleet_, etcd.status()));
  etcd_ = std::move(etcd).value();
  turn_ = std::make_unique<FleetTurn>(fleet_, etcd_.get(), options_);
  return Status::Ok();
}

Status FleetPass::Acquire() {
  BERTH_RETURN_IF_ERROR(Connect());
  return turn_->Acquire();
}

bool FleetPass::StillHeld(std::string* why) {
  if (turn_ && turn_->holding()) return turn_->StillHeld(why);
  *why = "this host holds no turn";
  return false;
}

void FleetPass::Release() {
  if (turn_) turn_->Release();
}

void FleetPass::Publish(FleetReport report) {
  Status s = Connect();
  if (s.ok()) s = turn_->Publish(std::move(report));
  if (!s.ok())
    spdlog::warn("fleet {}: could not publish this host's report: {}", fleet_.name, s.message());
}

}  // namespace berth
