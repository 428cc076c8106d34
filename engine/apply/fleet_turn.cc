#include "engine/apply/fleet_turn.h"

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

std::string EtcdDown(const FleetSpec& f, const Status& s) {
  return "fleet " + f.name + ": etcd cannot be reached (" + s.message() +
         "); no service was taken down, the rest of the plan proceeds, and berth tries again";
}

}  // namespace

std::string FleetKey(const FleetSpec& f, const std::string& rest) {
  return f.prefix + f.name + "/" + rest;
}

Result<std::vector<FleetReport>> ReadFleetReports(Etcd& etcd, const FleetSpec& f,
                                                  std::vector<std::string>* warnings) {
  std::string prefix = FleetKey(f, "hosts/");
  auto kvs = etcd.Range(prefix, 0, kMaxFleetReportBytes);
  if (!kvs.ok()) return kvs.status();
  std::vector<FleetReport> out;
  for (const EtcdKv& kv : *kvs) {
    if (kv.too_large) {
      // Someone else's writing: one key cannot stall the fleet. Left out, and named.
      if (warnings)
        warnings->push_back("the fleet report at " + EscapeControl(kv.key) +
                            " is larger than 64 KiB, which no berth writes: it is left out; "
                            "delete it (berth fleet forget -f MANIFEST HOST, or etcdctl del) "
                            "or let its host report again");
      continue;
    }
    auto r = FleetReportFromJson(kv.value, kv.key);
    if (r.ok() && prefix + r->host != kv.key)
      r = Status::Internal("the fleet report at " + EscapeControl(kv.key) +
                           " names another host, " + r->host);
    if (r.ok())
      out.push_back(std::move(r).value());
    else if (warnings)
      warnings->push_back(r.status().message());
  }
  return out;
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

Status FleetTurn::Publish(FleetReport report) {
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
  if (report.state == kFleetConverged && report.start_to_healthy_ms.empty() &&
      report.floor_figures.empty()) {
    // A pass with nothing to do keeps the figures of the switch that converged on this manifest.
    auto last = etcd_->Get(key);
    if (last.ok() && last->has_value()) {
      auto before = FleetReportFromJson((*last)->value, key);
      if (before.ok() && before->digest == report.digest) {
        report.start_to_healthy_ms = before->start_to_healthy_ms;
        report.floor_figures = before->floor_figures;
        report.reference_figures = before->reference_figures;
      }
    }
  }
  return etcd_->Put(key, FleetReportToJson(report));
}

Status FleetTurn::TrySlot(bool* got, std::string* why) {
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
  for (int i = 0; i < fleet_.max_unavailable; ++i) {
    std::string key = FleetKey(fleet_, "slots/" + std::to_string(i));
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
      --i;  // the same slot again
      continue;
    }
    holders.push_back(holder.ok() ? holder->host : "(unreadable: " + key + ")");
  }
  std::string list;
  for (const std::string& h : holders) list += (list.empty() ? "" : ", ") + h;
  *why = "all " + std::to_string(fleet_.max_unavailable) + " slot" +
         (fleet_.max_unavailable == 1 ? " is" : "s are") + " held (max_unavailable " +
         std::to_string(fleet_.max_unavailable) + "): by " + list;
  return Status::Ok();
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
  std::string last_why;
  // Looks again after poll, doubling to 8 × poll while nothing changes (docs/fleet.md, scaling).
  std::chrono::milliseconds poll = o_.poll;
  for (;;) {
    if (o_.stop && o_.stop->load())
      return Status::Unavailable("stopped while waiting for a turn in fleet " + fleet_.name +
                                 "; no service was taken down");
    std::vector<std::string> unread;
    auto reports = ReadFleetReports(*etcd_, fleet_, &unread);
    if (!reports.ok()) return Status::Unavailable(EtcdDown(fleet_, reports.status()));
    for (const std::string& w : unread)
      if (warned_.insert(w).second) spdlog::warn("fleet {}: {}", fleet_.name, w);
    FleetTurnVerdict v = MayGoDark(fleet_, o_.host, o_.digest, *reports);
    if (v.kind == FleetTurnVerdict::kStop) {
      FleetReport r;
      r.state = kFleetWaiting;
      r.message = v.why;
      (void)Publish(r);
      return Status::FailedPrecondition(v.why);
    }
    std::string why = v.why;
    if (v.kind == FleetTurnVerdict::kGo) {
      bool got = false;
      Status s = TrySlot(&got, &why);
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
    }
    if (why != last_why) {
      if (o_.say) o_.say("fleet " + fleet_.name + ": waiting: " + why);
      FleetReport r;
      r.state = kFleetWaiting;
      r.message = why;
      (void)Publish(r);
      last_why = why;
      poll = o_.poll;
    }
    if (clock_.Now() >= deadline)
      return Status::Unavailable("fleet " + fleet_.name + ": waited " + Seconds(fleet_.wait_ms) +
                                 " (fleet.wait) for a turn: " + why +
                                 "; no service was taken down, and berth tries again");
    clock_.SleepUntil(std::min(deadline, clock_.Now() + poll));
    poll = std::min(poll * 2, o_.poll * 8);
  }
}

void FleetTurn::KeepAliveLoop() {
  const auto ttl = std::chrono::milliseconds(fleet_.lease_ttl_ms);
  auto last_ok = std::chrono::steady_clock::now();
  std::unique_lock<std::mutex> lock(mu_);
  while (!cv_.wait_for(lock, ttl / 3, [this] { return stop_keepalive_; })) {
    lock.unlock();
    auto left = etcd_->KeepAlive(lease_);
    auto now = std::chrono::steady_clock::now();
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
