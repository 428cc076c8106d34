#include "engine/core/plan.h"

namespace berth {

const char* ActionKindName(ActionKind k) {
  switch (k) {
    case ActionKind::kDownload:
      return "download";
    case ActionKind::kRemoveModel:
      return "remove-model";
    case ActionKind::kWriteUnit:
      return "write-unit";
    case ActionKind::kRemoveUnit:
      return "remove-unit";
    case ActionKind::kDaemonReload:
      return "daemon-reload";
    case ActionKind::kStart:
      return "start";
    case ActionKind::kStop:
      return "stop";
    case ActionKind::kRestart:
      return "restart";
    case ActionKind::kWaitHealthy:
      return "wait-healthy";
    case ActionKind::kEnable:
      return "enable";
    case ActionKind::kDisable:
      return "disable";
  }
  return "?";
}

const char* ReasonName(Reason r) {
  switch (r) {
    case Reason::kModelMissing:
      return "model_missing";
    case Reason::kModelPartial:
      return "model_partial";
    case Reason::kRevisionChanged:
      return "revision_changed";
    case Reason::kUnitMissing:
      return "unit_missing";
    case Reason::kUnitChanged:
      return "unit_changed";
    case Reason::kUnitDrift:
      return "unit_drift";
    case Reason::kUnitAdopted:
      return "unit_adopted";
    case Reason::kUnitFilesChanged:
      return "unit_files_changed";
    case Reason::kPendingReload:
      return "pending_reload";
    case Reason::kNotRunning:
      return "not_running";
    case Reason::kFailed:
      return "failed";
    case Reason::kConfigChanged:
      return "config_changed";
    case Reason::kModelUpdated:
      return "model_updated";
    case Reason::kWantedStopped:
      return "wanted_stopped";
    case Reason::kWantedAbsent:
      return "wanted_absent";
    case Reason::kNotInManifest:
      return "not_in_manifest";
    case Reason::kFreesResources:
      return "frees_resources";
    case Reason::kHealthGate:
      return "health_gate";
    case Reason::kNotUsed:
      return "not_used";
    case Reason::kOldRevision:
      return "old_revision";
    case Reason::kNotEnabled:
      return "not_enabled";
  }
  return "?";
}

}  // namespace berth
