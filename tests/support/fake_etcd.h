// An in-memory etcd for fast tests of the fleet logic (engine/fleet/fleet_turn.h): keys,
// leases with their own TTL on the test's clock, the create-if-absent transaction, and a switch
// that makes every call fail as an unreachable etcd does. The real etcd is in the e2e tests.
#pragma once

#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "providers/etcd/etcd.h"

namespace berth::testing {

class FakeEtcd : public Etcd {
 public:
  /// Every call fails with Unavailable while down.
  void SetDown(bool down) {
    std::lock_guard<std::mutex> l(mu_);
    down_ = down;
  }
  /// Claims to watch, but every watch fails as one through a proxy that does not stream.
  void SetBrokenWatch(bool broken) {
    std::lock_guard<std::mutex> l(mu_);
    broken_watch_ = broken;
  }
  bool CanWatch() const override {
    std::lock_guard<std::mutex> l(mu_);
    return broken_watch_;
  }
  Result<std::unique_ptr<EtcdWatch>> Watch(const std::string& prefix, int64_t, size_t) override {
    std::lock_guard<std::mutex> l(mu_);
    calls_.push_back("watch " + prefix);
    return Status::Unavailable("etcd http://etcd-1:2379 watch: the server ended the stream");
  }
  /// Expires `lease` now: its keys are gone.
  void Expire(int64_t lease) {
    std::lock_guard<std::mutex> l(mu_);
    DropLease(lease);
  }
  std::map<std::string, EtcdKv> kv() {
    std::lock_guard<std::mutex> l(mu_);
    return kv_;
  }
  /// The most slot keys ("/slots/") that existed at once.
  int max_slots_held() {
    std::lock_guard<std::mutex> l(mu_);
    return max_slots_;
  }
  std::vector<std::string> calls() {
    std::lock_guard<std::mutex> l(mu_);
    return calls_;
  }

  Result<std::vector<EtcdKv>> Range(const std::string& prefix, int64_t limit = 0,
                                    size_t max_value_bytes = 0,
                                    int64_t* revision = nullptr) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("range " + prefix); !s.ok()) return s;
    if (revision) *revision = revision_;
    std::vector<EtcdKv> out;
    for (const auto& [k, v] : kv_)
      if (k.starts_with(prefix) && (limit == 0 || static_cast<int64_t>(out.size()) < limit)) {
        out.push_back(v);
        if (max_value_bytes > 0 && v.value.size() > max_value_bytes) {
          out.back().value.clear();
          out.back().too_large = true;
        }
      }
    return out;
  }
  Result<std::optional<EtcdKv>> Get(const std::string& key) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("get " + key); !s.ok()) return s;
    auto it = kv_.find(key);
    if (it == kv_.end()) return std::optional<EtcdKv>();
    return std::optional<EtcdKv>(it->second);
  }
  Status Put(const std::string& key, const std::string& value, int64_t lease = 0) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("put " + key); !s.ok()) return s;
    if (lease != 0 && !leases_.count(lease)) return Status::NotFound("lease not found");
    Store(key, value, lease);
    return Status::Ok();
  }
  Result<bool> CreateIfAbsent(const std::string& key, const std::string& value, int64_t lease,
                              EtcdKv* existing = nullptr) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("create " + key); !s.ok()) return s;
    if (lease != 0 && !leases_.count(lease)) return Status::NotFound("lease not found");
    auto it = kv_.find(key);
    if (it != kv_.end()) {
      if (existing) *existing = it->second;
      return false;
    }
    Store(key, value, lease);
    return true;
  }
  Result<bool> DeleteIfLease(const std::string& key, int64_t lease) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("delete-if-lease " + key); !s.ok()) return s;
    auto it = kv_.find(key);
    if (it == kv_.end() || it->second.lease != lease) return false;
    kv_.erase(it);
    return true;
  }
  Status Delete(const std::string& key) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("delete " + key); !s.ok()) return s;
    kv_.erase(key);
    return Status::Ok();
  }
  Result<int64_t> GrantLease(std::chrono::seconds ttl) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("grant"); !s.ok()) return s;
    int64_t id = ++next_lease_;
    leases_[id] = ttl.count();
    return id;
  }
  Result<int64_t> KeepAlive(int64_t lease) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("keepalive"); !s.ok()) return s;
    auto it = leases_.find(lease);
    return it == leases_.end() ? 0 : it->second;
  }
  Status Revoke(int64_t lease) override {
    std::lock_guard<std::mutex> l(mu_);
    if (auto s = Call("revoke"); !s.ok()) return s;
    DropLease(lease);
    return Status::Ok();
  }

 private:
  Status Call(const std::string& what) {
    calls_.push_back(what);
    if (down_) return Status::Unavailable("http://etcd-1:2379: connection refused");
    return Status::Ok();
  }
  void Store(const std::string& key, const std::string& value, int64_t lease) {
    EtcdKv& e = kv_[key];
    ++revision_;
    if (e.create_revision == 0) e.create_revision = revision_;
    e.key = key;
    e.value = value;
    e.mod_revision = revision_;
    ++e.version;
    e.lease = lease;
    int slots = 0;
    for (const auto& [k, v] : kv_)
      if (k.find("/slots/") != std::string::npos) ++slots;
    max_slots_ = std::max(max_slots_, slots);
  }
  void DropLease(int64_t lease) {
    leases_.erase(lease);
    std::erase_if(kv_, [&](const auto& e) { return e.second.lease == lease; });
  }

  mutable std::mutex mu_;
  bool down_ = false;
  bool broken_watch_ = false;
  std::map<std::string, EtcdKv> kv_;
  std::map<int64_t, int64_t> leases_;  // id -> ttl
  int64_t next_lease_ = 100;
  int64_t revision_ = 0;
  int max_slots_ = 0;
  std::vector<std::string> calls_;
};

}  // namespace berth::testing
