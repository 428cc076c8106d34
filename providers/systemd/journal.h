// The real JournalReader over sd-journal.
#pragma once

#include <string>

#include "providers/systemd/systemd_manager.h"

namespace berth {

class SdJournalReader : public JournalReader {
 public:
  /// `directory` "" = the local journal; else a journal directory (a sandbox's /run/log/journal).
  explicit SdJournalReader(std::string directory = "") : directory_(std::move(directory)) {}
  std::vector<std::string> Tail(const std::string& unit, int lines) override;

 private:
  std::string directory_;
};

}  // namespace berth
