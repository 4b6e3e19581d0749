// A weight's rows on the device: which layout they take (the file's, or the type's repacked one, quant.h ABI
// 1.6) and the conversion of the file's bytes into it, shared by weight_load and the expert cache's writes.
#pragma once

#include <cstddef>
#include <memory>

#include "backend_objects.hpp"

namespace strata::cuda {

// A weight of desc's type and shape in its device layout, its device memory taken from the budget (not yet
// written; the budget's message names the weight and the layout) and its host bytes unset.
// file_layout: keep the file's layout even where the backend repacks the type (an expert cache, whose slots are
// refilled while it runs: a repack on the host would cost more than the copy).
std::unique_ptr<strata_weight> device_weight(strata_backend& backend, const strata_weight_desc& desc,
                                             bool file_layout = false);

// rows of the weight's file layout (host_row_bytes each) converted to its device layout (row_bytes each) at to:
// a copy, or the type's repack over the host's cores.
void to_device_layout(const strata_weight& weight, const std::byte* from, std::byte* to, size_t rows);

}  // namespace strata::cuda
