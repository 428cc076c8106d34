// Settings of one service written into its manifest file as a minimal text edit: the value at
// each path replaced or its key inserted, every comment, blank line and other entry kept as it
// was. berth tune (issue 40) makes each candidate's manifest and the winner's patch this way.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tune.h"

namespace berth {

/// The manifest file whose `services:` declares `service`: `manifest_path` itself, or one of the
/// *.yaml / *.yml files of the folder `manifest_path` (the files LoadManifests reads). NotFound
/// when none declares it; InvalidArgument when the path or one of its files cannot be listed,
/// read or parsed, or when two files declare it.
Result<std::string> DeclaringFile(const std::string& manifest_path, const std::string& service);

/// `text` (the manifest file `file_name`, named in errors) with each setting's value written at
/// its dotted path under `services.<service>`, in order:
///  - an existing value is replaced where it is written: a scalar, a flow collection, or (its
///    lines replaced by one) a block collection, block scalar or null, a comment on its key's
///    line kept;
///  - a missing key is added to its map: a line at the entries' indentation after the block
///    map's last line of content, or ", key: value" before a flow map's '}'; missing maps on the
///    way are made (a block `a:` line above `  b: value`, or `a: {b: value}` in a flow map).
/// Each value must be one line of YAML flow (8, "x", [0, 1], {method: mtp}) and goes in as
/// written. InvalidArgument, naming the setting and FILE:LINE, for a value that is not, a path
/// through a list, a scalar or an alias, an anchored or tagged value, a key written twice, a
/// multi-document or unparsable file, or overlapping paths; NotFound for an undeclared service.
/// The edited text is parsed again and must hold exactly each value at its path and be the same
/// document elsewhere; Internal, saying what differs, if not.
Result<std::string> SetServiceSettings(std::string_view text, const std::string& file_name,
                                       const std::string& service,
                                       const std::vector<TuneSetting>& settings);

}  // namespace berth
