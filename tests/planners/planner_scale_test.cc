// A host of 300 services, 120 models shared between them, stale revisions and repos berth
// downloaded that no model names any more: the plan must be what each service and model would
// get alone (the planner's lookups go through an index built once per plan; a wrong or stale
// entry shows here as a missing, extra or misattributed step). And the work of a plan grows
// linearly with the host: counted, not timed.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <set>

#include "tests/planners/planner_fixture.h"

namespace berth::testing {
namespace {

// The work this test binary does, counted by the two things a loop over names does at every
// turn: a heap allocation (a string or a vector made) and a comparison of bytes (two names
// compared: std::string's == and <, map and hash-table lookups). A loop over every unit for
// each service shows as quadratic growth of one of them.
std::atomic<uint64_t> g_allocations{0};
std::atomic<uint64_t> g_comparisons{0};

}  // namespace
}  // namespace berth::testing

void* operator new(std::size_t n) {
  berth::testing::g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
// g++ sees this file's new and delete inlined into each other and takes malloc's block for one
// of the library's.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
#pragma GCC diagnostic pop

// Replaces the C library's for the whole binary (the comparisons of std::string end here).
extern "C" int memcmp(const void* a, const void* b, std::size_t n) {
  berth::testing::g_comparisons.fetch_add(1, std::memory_order_relaxed);
  const auto *x = static_cast<const unsigned char*>(a), *y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < n; ++i)
    if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
  return 0;
}

namespace berth::testing {
namespace {

constexpr int kServices = 300;
constexpr int kRunning = 280;  // svc-280..299 are stopped: they use models 100..119 alone
constexpr int kModels = 120;
constexpr int kUsedModels = 100;
constexpr int kGone = 30;
constexpr uint64_t kGiB = 1ull << 30;

// A 40-hex commit of model `k`, generation `gen` (0: what the units run now).
std::string Commit(int k, int gen) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%010d%010d%020d", k, gen + 10, 7);
  return buf;
}
std::string Name(const char* prefix, int i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%s-%03d", prefix, i);
  return buf;
}
std::string Repo(int k) { return "org/" + Name("m", k); }
int ModelOf(int service) {
  return service < kRunning ? service % kUsedModels : kUsedModels + (service - kRunning);
}

// What `got` has that `want` lacks ("+") and what it lacks ("-"), one a line.
template <typename Container>
std::string Difference(const Container& got, const Container& want) {
  std::set<std::string> g, w;
  for (const auto& x : got) g.insert(::testing::PrintToString(x));
  for (const auto& x : want) w.insert(::testing::PrintToString(x));
  std::string out;
  for (const auto& x : g)
    if (!w.count(x)) out += "+ " + x + "\n";
  for (const auto& x : w)
    if (!g.count(x)) out += "- " + x + "\n";
  return out;
}

class PlannerScaleTest : public PlannerTest {
 protected:
  void AddService(int i) {
    ServiceSpec& s = Vllm(Name("svc", i), Name("m", ModelOf(i)), {i % 8}, 20000 + i, 0.002);
    s.state = i < kRunning ? ServiceState::kRunning : ServiceState::kStopped;
  }
  void AddRevision(const std::string& repo, const std::string& commit) {
    InStore(repo, commit, 2 * kGiB, true, {});
  }
};

TEST_F(PlannerScaleTest, ThreeHundredServicesPlanAsEachWouldAlone) {
  Gpus(8, 1024 * kGiB);
  d.host.keep_revisions = 1;
  for (int k = 0; k < kModels; ++k) {
    ModelSpec& m = Model(Name("m", k), Repo(k), 2 * kGiB);
    m.revision = Commit(k, 0);
    m.keep = k < kUsedModels;  // the models of the stopped services only: keep: false
  }
  // The even services run, converged, every model at generation 0.
  for (int k = 0; k < kModels; ++k) AddRevision(Repo(k), Commit(k, 0));
  for (int i = 0; i < kServices; i += 2) AddService(i);
  Converge();

  // Now: the odd services join; models k % 3 == 0 carry two older revisions berth downloaded
  // (the newer kept for a rollback, the older removed), k % 3 == 1 move to generation 1 (a
  // download; generation 0 stays for a rollback; their running services restart), k % 3 == 2
  // are gone from the store (a download of the same commit). Repos org/gone-* were berth's
  // and no model names them.
  for (int i = 1; i < kServices; i += 2) AddService(i);
  o.store.repos.clear();
  o.state.models.clear();
  for (int k = 0; k < kModels; ++k) {
    if (k % 3 == 0) {
      AddRevision(Repo(k), Commit(k, -2));
      AddRevision(Repo(k), Commit(k, -1));
      AddRevision(Repo(k), Commit(k, 0));
    } else if (k % 3 == 1) {
      AddRevision(Repo(k), Commit(k, 0));
      d.models[Name("m", k)].revision = Commit(k, 1);
    }
  }
  for (int j = 0; j < kGone; ++j) AddRevision("org/" + Name("gone", j), Commit(1000 + j, 0));

  // What each model and service would get alone.
  std::map<std::string, std::string> want_downloads;      // address -> commit
  std::set<std::pair<std::string, std::string>> want_rm;  // (repo, commit)
  std::set<std::string> want_starts, want_restarts;
  for (int k = 0; k < kModels; ++k) {
    const bool used = k < kUsedModels;
    if (used && k % 3 == 1) want_downloads["model/" + Name("m", k)] = Commit(k, 1);
    if (used && k % 3 == 2) want_downloads["model/" + Name("m", k)] = Commit(k, 0);
    if (k % 3 == 0) want_rm.insert({Repo(k), Commit(k, -2)});
    if (!used && k % 3 == 0) {
      want_rm.insert({Repo(k), Commit(k, -1)});
      want_rm.insert({Repo(k), Commit(k, 0)});
    }
    if (!used && k % 3 == 1) want_rm.insert({Repo(k), Commit(k, 0)});
  }
  for (int j = 0; j < kGone; ++j) want_rm.insert({"org/" + Name("gone", j), Commit(1000 + j, 0)});
  for (int i = 0; i < kRunning; ++i) {
    if (i % 2 == 1) want_starts.insert("service/" + Name("svc", i));
    if (i % 2 == 0 && ModelOf(i) % 3 == 1) want_restarts.insert("service/" + Name("svc", i));
  }

  Plan p = PlanNow();
  ASSERT_FALSE(p.blocked()) << Problems(p);
  std::map<std::string, std::string> downloads;
  std::set<std::pair<std::string, std::string>> removals;
  std::set<std::string> starts, restarts, stops;
  for (const Action& a : p.actions) {
    if (a.kind == ActionKind::kDownload) {
      EXPECT_TRUE(downloads.emplace(a.address, a.As<DownloadStep>().commit).second) << a.address;
      EXPECT_EQ(a.As<DownloadStep>().repo_id, "org/" + a.address.substr(6)) << a.address;
    }
    if (a.kind == ActionKind::kRemoveModel) {
      EXPECT_TRUE(
          removals.insert({a.As<RemoveModelStep>().repo_id, a.As<RemoveModelStep>().commit}).second)
          << a.address << " removed twice";
    }
    if (a.kind == ActionKind::kStart) starts.insert(a.address);
    if (a.kind == ActionKind::kRestart) restarts.insert(a.address);
    if (a.kind == ActionKind::kStop) stops.insert(a.address);
  }
  EXPECT_EQ(downloads, want_downloads) << Difference(downloads, want_downloads);
  EXPECT_EQ(removals, want_rm) << Difference(removals, want_rm);
  EXPECT_EQ(starts, want_starts) << Difference(starts, want_starts);
  EXPECT_EQ(restarts, want_restarts) << Difference(restarts, want_restarts);
  EXPECT_TRUE(stops.empty()) << ::testing::PrintToString(stops);
  // Never the revision a running service is to serve, nor the one kept for its rollback.
  for (int i = 0; i < kRunning; ++i) {
    int k = ModelOf(i);
    const std::string wanted = k % 3 == 1 ? Commit(k, 1) : Commit(k, 0);
    EXPECT_FALSE(removals.count({Repo(k), wanted})) << Name("svc", i) << " serves it";
    if (k % 3 == 0) {
      EXPECT_FALSE(removals.count({Repo(k), Commit(k, -1)})) << "kept for rollback";
    }
    if (k % 3 == 1) {
      EXPECT_FALSE(removals.count({Repo(k), Commit(k, 0)})) << "kept for rollback";
    }
  }
  // Each new service's unit names its own model's snapshot, at the commit it is to serve.
  for (const Action& a : p.actions) {
    if (a.kind != ActionKind::kWriteUnit) continue;
    int i = std::stoi(a.unit.substr(4, 3));
    int k = ModelOf(i);
    const std::string commit = k % 3 == 1 ? Commit(k, 1) : Commit(k, 0);
    EXPECT_NE(
        a.As<UnitFileStep>().content.find("models--org--" + Name("m", k) + "/snapshots/" + commit),
        std::string::npos)
        << a.unit;
  }

  // Acted out, the host then needs nothing more.
  Converge();
}

// N and 4N services, each on its own model; the even ones converged, the odd ones new (a
// download, a unit, an engine check, a start, a health gate each). Planning 4N must cost at
// most 6x what N costs, in allocations and in comparisons alike (linear is 4x; a scan of
// every unit or step for each service, ~16x).
TEST_F(PlannerScaleTest, FourTimesTheServicesIsAtMostSixTimesTheWork) {
  const Desired empty_d = d;
  const Observed empty_o = o;
  auto work = [&](int n) {
    d = empty_d;
    o = empty_o;
    Gpus(8, 1024 * kGiB);
    for (int i = 0; i < n; ++i) {
      Model(Name("m", i), Repo(i), 2 * kGiB).revision = Commit(i, 0);
      if (i % 2 == 0) AddRevision(Repo(i), Commit(i, 0));
    }
    for (int i = 0; i < n; i += 2) Vllm(Name("svc", i), Name("m", i), {i % 8}, 20000 + i, 0.001);
    Converge();
    for (int i = 1; i < n; i += 2) Vllm(Name("svc", i), Name("m", i), {i % 8}, 20000 + i, 0.001);
    g_allocations = 0;
    g_comparisons = 0;
    Plan p = PlanNow();
    std::pair<double, double> counted(static_cast<double>(g_allocations.load()),
                                      static_cast<double>(g_comparisons.load()));
    EXPECT_FALSE(p.blocked()) << Problems(p);
    EXPECT_EQ(std::count_if(p.actions.begin(), p.actions.end(),
                            [](const Action& a) { return a.kind == ActionKind::kStart; }),
              n / 2);
    return counted;
  };
  const int n = 150;
  auto [alloc_n, cmp_n] = work(n);
  auto [alloc_4n, cmp_4n] = work(4 * n);
  EXPECT_LT(alloc_4n / alloc_n, 6.0)
      << alloc_n << " allocations for " << n << " services, " << alloc_4n << " for " << 4 * n;
  EXPECT_LT(cmp_4n / cmp_n, 6.0) << cmp_n << " comparisons for " << n << " services, " << cmp_4n
                                 << " for " << 4 * n;
  std::printf(
      "planning %d -> %d services: allocations %.0f -> %.0f (%.2fx), comparisons %.0f -> "
      "%.0f (%.2fx)\n",
      n, 4 * n, alloc_n, alloc_4n, alloc_4n / alloc_n, cmp_n, cmp_4n, cmp_4n / cmp_n);
}

}  // namespace
}  // namespace berth::testing
