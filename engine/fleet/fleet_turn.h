// A host's turn to go dark in its fleet (manifest `fleet:`), through etcd:
//
//   <prefix><fleet>/hosts/<host>   this host's FleetReport (no lease: it outlives the process)
//   <prefix><fleet>/slots/<n>      n < max_unavailable: a FleetSlot on the holder's lease
//
// Acquire() waits until the rules allow this host to go dark (planners/fleet.h: no host failed
// this manifest, every earlier wave converged on it), then creates a free slot key in a
// transaction that succeeds only while that key does not exist, on a lease kept alive from a
// thread. Release() revokes the lease, which deletes the slot; a host killed mid-switch loses
// its slot when the lease expires. etcd unreachable: Acquire() fails, nothing goes dark.
//
// Waiting costs etcd little (docs/fleet.md, "Scaling"): the host reads the fleet's keys once,
// then keeps its view by one watch on the fleet's prefix from the revision it read (etcd sends
// each change once to each waiting host), and reads again only after a minute without a change
// or when the watch was compacted away. A slot seen free is asked for after a short random
// pause, watched, so that the hosts that see it free do not all ask at once. A watch that fails
// falls back to reading every 1 to 8 s, and says so. A waiting host's report names what it waits
// for coarsely (the wave, or a slot), so that it is written when that changes, not at every
// change of the fleet.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "core/clock.h"
#include "core/desired.h"
#include "core/fleet_report.h"
#include "core/status.h"
#include "core/turn_seam.h"
#include "providers/etcd/etcd.h"

namespace berth {

struct FleetTurnOptions {
  std::string host;
  std::string digest;      // the manifest's
  Clock* clock = nullptr;  // null: RealClock(); the keep-alive thread paces its renewals on it too
  const std::atomic<bool>* stop = nullptr;      // SIGINT/SIGTERM: stop waiting
  std::function<void(const std::string&)> say;  // one line per change of what it waits for
  std::chrono::milliseconds poll{1000};         // between two looks while polling
  /// Wait by watching etcd (false: poll, as before watches; the fleet simulation compares).
  bool watch = true;
  int services_up = 0, services_wanted = 0;  // as observed before the plan, for the reports
};

/// The longest one watch waits before the host reads the fleet again.
inline constexpr std::chrono::seconds kFleetWatchWindow{60};
/// A host that sees a slot free pauses a random 0 to min(kFleetPauseMaxMs, kFleetPauseMsPerHost ×
/// the hosts of its wave waiting with it) before it asks: the first ask comes about
/// kFleetPauseMsPerHost after the slot freed, and the others see it taken before their pause ends,
/// as long as seeing a change takes etcd and the hosts less than that.
inline constexpr int64_t kFleetPauseMsPerHost = 40;
inline constexpr int64_t kFleetPauseMaxMs = 20000;
/// A host waiting for an earlier wave looks at the changes at most this often (they gather in
/// its watch meanwhile): a wave's hundreds of reports are one look, not hundreds.
inline constexpr std::chrono::milliseconds kFleetWaveLinger{1000};
/// A report whose content did not change is written again only after this long (a sign of
/// life for `berth fleet`), not at every pass.
inline constexpr int64_t kFleetReportRefreshSeconds = 600;

/// Keys of fleet `f`.
std::string FleetKey(const FleetSpec& f, const std::string& rest);

/// Every host's report in fleet `f`; reports berth cannot read are left out with a warning in
/// `warnings` (when not null).
Result<std::vector<FleetReport>> ReadFleetReports(Etcd& etcd, const FleetSpec& f,
                                                  std::vector<std::string>* warnings = nullptr);
/// The same, of keys already read (those under <prefix><fleet>/hosts/; others are skipped).
std::vector<FleetReport> FleetReportsOf(const FleetSpec& f, const std::vector<const EtcdKv*>& kvs,
                                        std::vector<std::string>* warnings = nullptr);

/// Deletes `host`'s report from fleet `f` (a host that left the fleet, whose stale report keeps
/// a later wave waiting). Its slot, if it holds one, is left to its lease. NotFound when there
/// is no such report.
Status ForgetFleetHost(Etcd& etcd, const FleetSpec& f, const std::string& host);

/// The etcd client for `fleet` (its password read from password_file, trailing newline cut).
Result<std::unique_ptr<Etcd>> ConnectFleetEtcd(const FleetSpec& fleet);

class FleetTurn : public TurnSeam {
 public:
  FleetTurn(const FleetSpec& fleet, Etcd* etcd, FleetTurnOptions options);
  ~FleetTurn();  // Release()
  FleetTurn(const FleetTurn&) = delete;
  FleetTurn& operator=(const FleetTurn&) = delete;

  /// Blocks until this host holds a slot (Ok), at most fleet.wait. Errors, after which nothing
  /// may go dark: Unavailable when etcd cannot be reached, the wait ran out or a stop was asked
  /// (retry later); FailedPrecondition when the rollout of this manifest stopped (a host failed
  /// it). Publishes "waiting" and "switching" reports as it goes. Once held, checks that it
  /// still is (the lease alive, the slot key still on it in etcd): Ok at once when so; when not
  /// (the lease expired while the host was dark, so another host may hold the slot now), gives
  /// up the old lease and waits for a turn again exactly as the first time.
  Status Acquire() override;
  /// Whether the slot taken is still this host's (the lease alive, the slot key still on it in
  /// etcd); `why` says why not.
  bool StillHeld(std::string* why) override;
  /// Gives the slot back (revokes the lease) and stops the keep-alive. Idempotent.
  void Release() override;
  bool holding() const { return holding_; }
  /// Whether the lease was lost while holding (etcd unreachable longer than its TTL, or
  /// expired): another host may have gone dark meanwhile.
  bool lease_lost() const { return lease_lost_.load(); }

  /// Writes this host's report (host, wave and updated_unix are filled in here), unless etcd
  /// holds the same report written less than kFleetReportRefreshSeconds ago.
  Status Publish(FleetReport report);

 private:
  /// The fleet's keys as this host last saw them (hosts/ and slots/), at `revision`.
  struct View {
    std::map<std::string, EtcdKv> kv;
    int64_t revision = 0;
    bool read = false;
    /// The reports of `kv`, each parsed once when it changes (key: its host's), and in one list
    /// for the rules, made again when one changed (reports_stale).
    std::map<std::string, FleetReport> parsed;
    std::map<std::string, size_t> wave;  // of each parsed report's host
    /// What the rules need of them (MayGoDark): the reports of earlier waves, and every report
    /// that stops the rollout; not the rest of the fleet.
    std::vector<FleetReport> reports;
    bool reports_stale = true;
  };
  /// Parses the report at `key` (when it is one) into view_.parsed, or drops it.
  void ParseIntoView(const std::string& key);
  Status ReadView();
  /// Waits for a change of the fleet's keys for at most `window` by watch, and applies it to the
  /// view (`changed`: one came). False (and the view unread) when the watch failed: `why` says
  /// how.
  bool WatchView(std::chrono::milliseconds window, std::string* why, bool* changed);
  /// Who holds the slots, as the view has it.
  std::vector<std::string> ViewHolders();
  const std::vector<FleetReport>& ViewReports();
  /// The slots free in the view (all of them when there is no view).
  std::vector<int> FreeSlots();
  /// Hosts of this one's wave whose reports say they wait for this manifest, this one aside.
  int Contenders();
  /// `report` as it would be written; whether `current` (etcd's) already says the same.
  bool SameAsWritten(const FleetReport& report, const std::optional<EtcdKv>& current);
  Status Write(FleetReport report, const std::optional<EtcdKv>* current);
  Status TrySlot(const std::vector<int>& slots, bool* got, std::string* why);
  void KeepAliveLoop();
  void StopKeepAlive();

  const FleetSpec& fleet_;
  Etcd* etcd_;
  FleetTurnOptions o_;
  Clock& clock_;
  int64_t lease_ = 0;
  bool holding_ = false;
  std::string slot_key_;
  std::set<std::string> warned_;  // reports that could not be read, each logged once
  View view_;
  std::unique_ptr<EtcdWatch> watch_;  // open while waiting, from view_.revision + 1
  bool watch_failed_ = false;         // this wait fell back to polling
  std::atomic<bool> lease_lost_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_keepalive_ = false;
  std::thread keepalive_;
};

using EtcdConnector = std::function<Result<std::unique_ptr<Etcd>>(const FleetSpec&)>;

/// One pass's dealings with its fleet: connects to etcd when first needed, takes the turn
/// before the first disruptive step (the executor's TurnSeam) and publishes the host's report at
/// the end.
class FleetPass : public TurnSeam {
 public:
  FleetPass(const FleetSpec& fleet, EtcdConnector connect, FleetTurnOptions options);
  ~FleetPass();
  /// FleetTurn::Acquire, connecting first (a connection error is Unavailable: nothing goes
  /// dark).
  Status Acquire() override;
  bool StillHeld(std::string* why) override;
  void Release() override;
  /// Publishes `report` (host, wave, digest, time filled in); a failure is logged, not fatal.
  void Publish(FleetReport report);

 private:
  Status Connect();
  const FleetSpec& fleet_;
  EtcdConnector connect_;
  FleetTurnOptions options_;
  std::unique_ptr<Etcd> etcd_;
  std::unique_ptr<FleetTurn> turn_;
};

}  // namespace berth
