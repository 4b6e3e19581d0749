// The engine worker's side of `strata serve` (worker_protocol.hpp): runs the requests the supervisor sends on a
// CompletionRunner and sends their text and ends back, and the runner's gauges every half second.
#pragma once

#include "core/server/completion_runner.hpp"

namespace strata::server {

// SIGUSR2 makes the receiving thread print its stack to stderr (a stall report asks each thread in turn): a worker
// installs it before it loads the model, so that a load that hangs can be shown.
void install_stack_printer();

// Says ready, then serves the channel fd until the supervisor closes it (then cancels what is left and returns).
// Throws strata::Error for a channel that breaks.
void serve_supervisor(int fd, CompletionRunner& runner);

}  // namespace strata::server
