// berth: declarative model serving on GPU hosts. See README.md and DESIGN.md.
#include <signal.h>
#include <CLI/CLI.hpp>

#include <atomic>
#include <iostream>

#include "core/log.h"
#include "engine/cli/berth_build_version.h"
#include "engine/cli/cli_docs.h"
#include "engine/cli/commands.h"
#include "engine/loop/signals.h"

namespace {

std::atomic<bool> g_stop{false};

// SIGINT/SIGTERM: finish the current action, then stop; a second signal kills as usual.
void InstallStopHandlers() {
  struct sigaction sa {};
  sa.sa_handler = [](int) { g_stop.store(true); };
  sa.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

// The common flags (README): --state-dir, --bus and --nvml-library, on every command. A command
// that reads berth's records, systemd or the GPUs declares the flag itself and honours it; to
// every other command this adds it, accepted (so one set of flags works with every command), and
// its --help says the command has no use for it.
struct UnusedFlags {
  std::string state_dir, bus, nvml_library;
};

void AddCommonFlags(CLI::App* cmd, UnusedFlags* unused) {
  std::string name = cmd->get_name();
  if (const CLI::App* parent = cmd->get_parent(); parent && parent->get_parent())
    name = parent->get_name() + " " + name;  // berth fleet status
  const std::string ignored = " (accepted as a common flag; berth " + name + " does not use it)";
  auto add = [&](const char* flag, std::string* spare, const char* what) {
    if (cmd->get_option_no_throw(flag) == nullptr) cmd->add_option(flag, *spare, what + ignored);
  };
  add("--state-dir", &unused->state_dir, "berth's records");
  add("--bus", &unused->bus, "D-Bus address of systemd's bus");
  add("--nvml-library", &unused->nvml_library, "NVML library to load");
}

}  // namespace

int main(int argc, char** argv) {
  // The on-demand units' helpers, not commands for people: no CLI11, no logging set up.
  if (argc > 1 && (std::string_view(argv[1]) == "__wait-healthy" ||
                   std::string_view(argv[1]) == "__wake-proxy"))
    return berth::RunHiddenCommand(argc, argv, std::cerr);
  CLI::App app{"berth: declarative model serving on GPU hosts"};
  app.set_version_flag("--version", std::string("berth ") + kBerthBuildVersion);
  app.require_subcommand(1);
  // Global flags (--log-level) are accepted after the subcommand too: every subcommand made
  // below inherits this and hands what it does not know to the top level.
  app.fallthrough();

  std::string validate_path;
  auto* validate =
      app.add_subcommand("validate", "check manifests; every problem with file:line:col");
  validate->add_option("-f,--file", validate_path, "manifest file or folder")->required();

  berth::PlanCommand plan_cmd;
  auto* plan = app.add_subcommand("plan", "show what berth would change, in order, with reasons");
  plan->add_option("-f,--file", plan_cmd.manifest_path, "manifest file or folder")->required();
  plan->add_option("--observed", plan_cmd.observed_path,
                   "plan against a saved observation (berth observe -o json) instead of this host");
  plan->add_option("-o,--output", plan_cmd.format, "text or json")->capture_default_str();
  plan->add_option("--bus", plan_cmd.host.bus_address, "D-Bus address of systemd's bus");
  plan->add_option("--nvml-library", plan_cmd.host.nvml_library, "NVML library to load");
  plan->add_option("--out", plan_cmd.out_path, "save the plan for berth apply FILE");
  plan->add_option("--state-dir", plan_cmd.state_dir, "berth's records (default /var/lib/berth)");
  plan->add_flag("--detailed-exitcode", plan_cmd.detailed_exitcode,
                 "exit 0 nothing to do, 1 error, 2 changes, 3 blocked");
  plan->add_flag("--diff", plan_cmd.diff,
                 "show every unit file change as a unified diff (adopted and hand-edited units "
                 "always show theirs)");

  std::string render_path, render_observed, render_service;
  auto* render = app.add_subcommand("render", "print the unit files berth would write");
  render->add_option("-f,--file", render_path, "manifest file or folder")->required();
  render->add_option("--observed", render_observed, "saved observation, to pin model commits");
  render->add_option("service", render_service, "only this service");

  berth::ApplyCommand apply_cmd;
  auto* apply = app.add_subcommand("apply", "observe, plan, confirm and carry out the plan");
  apply->add_option("-f,--file", apply_cmd.manifest_path, "manifest file or folder");
  apply->add_option("plan", apply_cmd.saved_plan, "a plan saved by berth plan --out FILE");
  apply->add_option("--state-dir", apply_cmd.state_dir, "berth's records (default /var/lib/berth)");
  apply->add_option("--lock-timeout", apply_cmd.lock_timeout_s,
                    "seconds to wait for another apply (default 0)");
  apply->add_option("--max-age", apply_cmd.max_age_s,
                    "refuse a saved plan older than this many seconds (default: any age)");
  apply->add_flag("-y,--yes", apply_cmd.yes, "do not ask for confirmation");
  apply->add_flag("--diff", apply_cmd.diff,
                  "show every unit file change as a unified diff (adopted and hand-edited units "
                  "always show theirs)");
  apply->add_flag("--retry", apply_cmd.retry,
                  "run this manifest's change again although its last apply failed after taking "
                  "a service down (otherwise berth holds it until the manifest changes)");
  apply->add_option("--bus", apply_cmd.host.bus_address, "D-Bus address of systemd's bus");
  apply->add_option("--journal-dir", apply_cmd.host.journal_dir, "journal directory to read");
  apply->add_option("--nvml-library", apply_cmd.host.nvml_library, "NVML library to load");

  std::string observe_path, observe_format = "text";
  berth::HostAccess observe_host;
  auto* observe = app.add_subcommand("observe", "what berth sees on this host");
  observe->add_option("-f,--file", observe_path, "manifest: which units and store to observe");
  observe->add_option("-o,--output", observe_format, "text or json")->capture_default_str();
  observe->add_option("--bus", observe_host.bus_address, "D-Bus address of systemd's bus");
  observe->add_option("--nvml-library", observe_host.nvml_library, "NVML library to load");
  observe->add_option("--state-dir", observe_host.state_dir,
                      "berth's records (default /var/lib/berth)");

  berth::PullCommand pull_cmd;
  auto* pull = app.add_subcommand("pull", "one model into the store, outside any manifest");
  pull->add_option("source", pull_cmd.source, "hf://org/name[@revision]")->required();
  pull->add_option("--store", pull_cmd.store,
                   "HF cache dir (default: HF_HUB_CACHE or HF_HOME/hub)");
  pull->add_option("--include", pull_cmd.include, "only files matching this glob (repeatable)");
  pull->add_option("--exclude", pull_cmd.exclude, "skip files matching this glob (repeatable)");
  pull->add_option("--connections", pull_cmd.connections, "parallel connections (default 32)");

  std::string verify_source, verify_store, verify_manifest;
  auto* verify = app.add_subcommand(
      "verify", "re-hash models in the store: hf://org/name[@rev], or the manifest's (-f) models");
  verify->add_option("model", verify_source,
                     "hf://org/name[@revision], or a model name of the manifest (default: all)");
  verify->add_option("-f,--file", verify_manifest, "manifest whose models to verify");
  verify->add_option("--store", verify_store, "HF cache dir");

  berth::ReconcileCommand reconcile_cmd;
  bool reconcile_apply = false;
  auto* reconcile = app.add_subcommand(
      "reconcile", "the loop: plan and apply every interval; sd_notify, metrics, SIGHUP re-reads");
  reconcile->add_option("-f,--file", reconcile_cmd.manifest_path, "manifest file or folder")
      ->required();
  reconcile->add_option("--interval", reconcile_cmd.interval, "between passes while all is well")
      ->capture_default_str();
  reconcile
      ->add_option("--jitter", reconcile_cmd.jitter,
                   "spread each wait by ± this (N% of the interval, or a duration)")
      ->capture_default_str();
  reconcile->add_flag("--once", reconcile_cmd.once,
                      "one pass, exit with apply's exit code (for a systemd timer)");
  auto* reconcile_apply_flag =
      reconcile->add_flag("--apply", reconcile_apply, "apply what the plan says (the default)");
  reconcile
      ->add_flag("--plan-only", reconcile_cmd.plan_only,
                 "only plan and report pending changes; change nothing")
      ->excludes(reconcile_apply_flag);
  reconcile->add_option("--state-dir", reconcile_cmd.state_dir,
                        "berth's records (default /var/lib/berth)");
  reconcile->add_option("--metrics", reconcile_cmd.metrics_path,
                        "write Prometheus metrics to this file (node_exporter textfile)");
  reconcile->add_option("--lock-timeout", reconcile_cmd.lock_timeout_s,
                        "seconds to wait for another apply (default 0)");
  reconcile->add_option("--bus", reconcile_cmd.host.bus_address, "D-Bus address of systemd's bus");
  reconcile->add_option("--journal-dir", reconcile_cmd.host.journal_dir,
                        "journal directory to read");
  reconcile->add_option("--nvml-library", reconcile_cmd.host.nvml_library, "NVML library to load");

  berth::LockCommand lock_cmd;
  auto* lock = app.add_subcommand(
      "lock", "pin each model's branch or tag to its commit on the Hub, in berth.lock");
  lock->add_option("-f,--file", lock_cmd.manifest_path,
                   "manifest file or folder; berth.lock sits beside it")
      ->capture_default_str();
  lock->add_flag("--update", lock_cmd.update,
                 "re-resolve pinned models too: all, or the models named");
  lock->add_option("models", lock_cmd.models, "with --update: only these models");

  berth::TuneCommand tune_cmd;
  auto* tune = app.add_subcommand(
      "tune",
      "try a service's candidate configurations, each switched to, gated and measured; "
      "keep the best as a manifest patch");
  tune->add_option("tunefile", tune_cmd.tune_file,
                   "the tune file: service, candidates, load, "
                   "objective")
      ->required();
  tune->add_option("-f,--file", tune_cmd.manifest_path, "manifest that declares the service")
      ->required();
  tune->add_flag("--plan", tune_cmd.plan_only,
                 "list every candidate with its feasibility and dark time; change nothing");
  tune->add_flag("--resume", tune_cmd.resume, "skip candidates an earlier sweep measured");
  tune->add_flag("--keep-winner", tune_cmd.keep_winner,
                 "end on the best candidate instead of the declared configuration");
  tune->add_option("-o,--output", tune_cmd.format, "text or json")->capture_default_str();
  tune->add_option("--state-dir", tune_cmd.state_dir, "berth's records (default /var/lib/berth)");
  tune->add_option("--lock-timeout", tune_cmd.lock_timeout_s,
                   "seconds to wait for another apply (default 0)");
  tune->add_option("--bus", tune_cmd.host.bus_address, "D-Bus address of systemd's bus");
  tune->add_option("--journal-dir", tune_cmd.host.journal_dir, "journal directory to read");
  tune->add_option("--nvml-library", tune_cmd.host.nvml_library, "NVML library to load");

  berth::BenchCommand bench_cmd;
  auto* bench = app.add_subcommand(
      "bench", "measure a service with streamed completions (tok/s, TTFT, ITL); --compare");
  bench->add_option("service", bench_cmd.services,
                    "the service to measure (with --compare: only these services)");
  bench->add_option("-f,--file", bench_cmd.manifest_path, "manifest that declares the service");
  bench->add_option("--concurrency", bench_cmd.concurrency, "streams, one level after another")
      ->capture_default_str();
  bench->add_option("--duration", bench_cmd.duration, "how long to measure each level")
      ->capture_default_str();
  bench->add_option("--num-prompts", bench_cmd.num_prompts,
                    "send this many requests per level, then stop (instead of --duration)");
  bench->add_option("--request-rate", bench_cmd.request_rate,
                    "requests per second, Poisson arrivals, at most --concurrency in flight "
                    "(default inf: each stream sends again at once)");
  bench->add_option("--seed", bench_cmd.seed, "seed of the --request-rate arrivals")
      ->capture_default_str();
  bench->add_option("--warmup", bench_cmd.warmup,
                    "before measuring each level: N requests, or a duration such as 10s");
  bench->add_option("--goodput", bench_cmd.goodput,
                    "limits of a good request, e.g. ttft:500,tpot:50,e2el:20000 (ms): goodput is "
                    "finished requests within all of them, per second");
  bench->add_option("--prompt-tokens", bench_cmd.prompt_tokens, "made-up prompt length, in words")
      ->capture_default_str();
  bench->add_option("--max-tokens", bench_cmd.max_tokens, "output tokens per request")
      ->capture_default_str();
  bench
      ->add_option("--gather-us", bench_cmd.gather_us,
                   "microseconds a wake-up waits for more streams' tokens before reading them "
                   "(each keeps the kernel's receive time; 0: read each as it comes)")
      ->check(CLI::Range(0, 100000))
      ->capture_default_str();
  bench->add_flag("--chat", bench_cmd.chat, "use /v1/chat/completions (default /v1/completions)");
  bench->add_option("--host", bench_cmd.host,
                    "connect to this address (default: from the service's bind, loopback)");
  bench->add_option("-o,--output", bench_cmd.format, "text or json")->capture_default_str();
  bench->add_flag("--compare", bench_cmd.compare,
                  "print the recorded results side by side: one column per service, model and "
                  "commit");
  bool bench_no_save = false;
  bench->add_flag("--no-save", bench_no_save, "do not record the results in the state dir");
  bench->add_option("--state-dir", bench_cmd.state_dir, "berth's records (default /var/lib/berth)");

  berth::StatusCommand status_cmd;
  auto* status = app.add_subcommand(
      "status", "what runs now: services (state, model, commit, health, since) and models");
  status->add_option("-f,--file", status_cmd.manifest_path, "manifest file or folder")->required();
  status->add_option("--state-dir", status_cmd.state_dir,
                     "berth's records (default /var/lib/berth)");
  status->add_option("-o,--output", status_cmd.format, "text or json")->capture_default_str();
  status->add_option("--bus", status_cmd.host.bus_address, "D-Bus address of systemd's bus");
  status->add_option("--nvml-library", status_cmd.host.nvml_library, "NVML library to load");
  bool status_no_probe = false;
  status->add_flag("--no-probe", status_no_probe, "do not ask the services' health paths");

  std::string history_state, history_format = "text";
  size_t history_limit = 20;
  auto* history =
      app.add_subcommand("history", "what past applies did: when, manifest, outcome, actions");
  history->add_option("--state-dir", history_state, "berth's records (default /var/lib/berth)");
  history->add_option("-o,--output", history_format, "text or json")->capture_default_str();
  history->add_option("-n,--limit", history_limit, "how many applies, newest first")
      ->capture_default_str();

  std::string fleet_manifest, fleet_format = "text";
  auto* fleet = app.add_subcommand("fleet", "the fleet of hosts that share a manifest (etcd)");
  fleet->require_subcommand(1);
  auto* fleet_status = fleet->add_subcommand(
      "status", "every host of the manifest's fleet: wave, state, manifest, who holds a slot");
  fleet_status->add_option("-f,--file", fleet_manifest, "manifest file or folder")->required();
  fleet_status->add_option("-o,--output", fleet_format, "text or json")->capture_default_str();
  std::string forget_manifest, forget_host;
  auto* fleet_forget = fleet->add_subcommand(
      "forget", "delete the report of a host that left the fleet (a later wave waits for it)");
  fleet_forget->add_option("-f,--file", forget_manifest, "manifest file or folder")->required();
  fleet_forget->add_option("host", forget_host, "the host's name, as fleet status shows it")
      ->required();

  // Every command takes the common flags; those above declare the ones they use.
  UnusedFlags unused;
  for (CLI::App* cmd : {validate, plan, render, apply, observe, pull, verify, reconcile, lock,
                        bench, tune, status, history, fleet_status, fleet_forget})
    AddCommonFlags(cmd, &unused);

  // Written from this tree at build time: berth(1) and the bash completion (engine/cli/cli_docs.h).
  auto* man = app.add_subcommand("__man", "print the berth(1) man page");
  man->group("");  // hidden
  std::string completion_shell;
  auto* completion = app.add_subcommand(
      "completion", "print a shell completion script (source <(berth completion bash))");
  completion->add_option("shell", completion_shell, "the shell: bash")
      ->required()
      ->check(CLI::IsMember({"bash"}));

  std::string log_level;
  app.add_option("--log-level", log_level,
                 "operator logs on stderr: trace, debug, info, warn, error, off (default: "
                 "$BERTH_LOG_LEVEL or warn)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : berth::kExitError;
  }
  berth::InitLogging(log_level);
  if (*man) {
    berth::WriteManPage(app, BERTH_VERSION, std::cout);
    return berth::kExitOk;
  }
  if (*completion) {
    berth::WriteBashCompletion(app, std::cout);
    return berth::kExitOk;
  }
  if (*validate) return berth::RunValidate(validate_path, std::cout, std::cerr);
  if (*plan) return berth::RunPlan(plan_cmd, std::cout, std::cerr);
  if (*lock) {
    if (!lock_cmd.models.empty() && !lock_cmd.update) {
      std::cerr << "berth lock: naming models needs --update (without it, every model without "
                   "an entry is pinned)\n";
      return berth::kExitError;
    }
    return berth::RunLock(lock_cmd, std::cout, std::cerr);
  }
  if (*pull) return berth::RunPull(pull_cmd, std::cout, std::cerr);
  if (*verify) {
    if (verify_source.rfind("hf://", 0) == 0)
      return berth::RunVerify(verify_source, verify_store, std::cout, std::cerr);
    if (verify_manifest.empty()) {
      std::cerr << "berth verify: give hf://org/name[@revision], or -f MANIFEST [MODEL]\n";
      return berth::kExitError;
    }
    return berth::RunVerifyManifest(verify_manifest, verify_source, verify_store, std::cout,
                                    std::cerr);
  }
  if (*apply) {
    if (apply_cmd.manifest_path.empty() == apply_cmd.saved_plan.empty()) {
      std::cerr << "berth apply: give either -f MANIFEST or a saved plan FILE\n";
      return berth::kExitError;
    }
    InstallStopHandlers();
    apply_cmd.stop = &g_stop;
    apply_cmd.at_step = berth::FaultHook();
    return berth::RunApply(apply_cmd, std::cin, std::cout, std::cerr);
  }
  if (*reconcile) {
    berth::LoopSignals signals = berth::InstallLoopSignals();
    reconcile_cmd.stop = signals.stop;
    reconcile_cmd.reload = signals.reload;
    reconcile_cmd.wake_fd = signals.wake_fd;
    reconcile_cmd.at_step = berth::FaultHook();
    return berth::RunReconcile(reconcile_cmd, std::cout, std::cerr);
  }
  if (*bench) {
    InstallStopHandlers();
    bench_cmd.stop = &g_stop;
    bench_cmd.save = !bench_no_save;
    return berth::RunBench(bench_cmd, std::cout, std::cerr);
  }
  if (*tune) {
    InstallStopHandlers();
    tune_cmd.stop = &g_stop;
    tune_cmd.at_step = berth::FaultHook();
    return berth::RunTuneCommand(tune_cmd, std::cout, std::cerr);
  }
  if (*observe)
    return berth::RunObserve(observe_path, observe_format, observe_host, std::cout, std::cerr);
  if (*status) {
    status_cmd.probe = !status_no_probe;
    return berth::RunStatus(status_cmd, std::cout, std::cerr);
  }
  if (*fleet_forget)
    return berth::RunFleetForget(forget_manifest, forget_host, std::cout, std::cerr);
  if (*fleet_status)
    return berth::RunFleetStatus(fleet_manifest, fleet_format, std::cout, std::cerr);
  if (*history)
    return berth::RunHistory(history_state, history_format, history_limit, std::cout, std::cerr);
  if (*render)
    return berth::RunRender(render_path, render_observed, render_service, std::cout, std::cerr);
  return berth::kExitError;
}
