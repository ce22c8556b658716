// Text-format protos in and out, with parse errors as Status.
#ifndef CAKE_PLANNER_TEXT_PROTO_H_
#define CAKE_PLANNER_TEXT_PROTO_H_

#include <string>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "google/protobuf/message.h"

namespace cake {

// Parses `text` into `out`. InvalidArgumentError "SOURCE:LINE:COL: what" on
// the first error.
absl::Status ParseTextProto(absl::string_view text, absl::string_view source,
                            google::protobuf::Message* out);

absl::StatusOr<std::string> ReadFile(const std::string& path);
// Writes through a temporary file and a rename: a failure leaves no partial
// file behind.
absl::Status WriteFile(const std::string& path, absl::string_view bytes);

}  // namespace cake

#endif  // CAKE_PLANNER_TEXT_PROTO_H_
