// Names of error kinds, as shown to users.
#include "core/error.h"

namespace strata {

const char* error_kind_name(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidInput: return "invalid_input";
    case ErrorKind::kNotFound: return "not_found";
    case ErrorKind::kUnsupported: return "unsupported";
    case ErrorKind::kIo: return "io";
    case ErrorKind::kInternal: return "internal";
  }
  return "internal";
}

}  // namespace strata
