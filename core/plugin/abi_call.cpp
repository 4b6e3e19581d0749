#include "core/plugin/abi_call.hpp"

namespace strata {

std::string status_name(strata_status status) {
  switch (status) {
    case STRATA_OK:
      return "ok";
    case STRATA_E_INVALID_ARGUMENT:
      return "invalid argument";
    case STRATA_E_UNSUPPORTED:
      return "unsupported";
    case STRATA_E_OUT_OF_MEMORY:
      return "out of memory";
    case STRATA_E_IO:
      return "I/O error";
    case STRATA_E_INTERNAL:
      return "internal error";
    default:
      return "status " + std::to_string(status);
  }
}

}  // namespace strata
