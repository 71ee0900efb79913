// dist conformance kit: the suite's "declared" section.
// Everything the capabilities declare has an entry in the table.
#include "absl/strings/str_cat.h"
#include "sdk/conformance/suite.h"

namespace dist::conformance {

void Suite::DeclaredEntries() {
  // Declared == present: a declared operation must have an entry in the table.
  for (int c = 0; c < DIST_COLLECTIVE_COUNT; ++c) {
    const auto coll = static_cast<dist_collective_t>(c);
    if (!Declared(coll)) continue;
    Record(absl::StrCat("declared ", dist_collective_name(coll), " has an entry"), "-", "-", "-",
           comm_.HasOperation(coll)
               ? absl::OkStatus()
               : absl::InternalError("declared in the capabilities, but NULL in the table"));
  }
  if ((plugin_.caps.flags & DIST_CAP_STREAM_WAIT) != 0 && !options_.through_core) {
    Record("declared stream wait has work_wait_stream", "-", "-", "-",
           plugin_.has_work_wait_stream && plugin_.table->work_wait_stream != nullptr
               ? absl::OkStatus()
               : absl::InternalError("DIST_CAP_STREAM_WAIT declared, but work_wait_stream is "
                                     "NULL or beyond the table's struct_size"));
  }
}

}  // namespace dist::conformance
