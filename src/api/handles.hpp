// SPDX-License-Identifier: Apache-2.0
// The structs behind the opaque C handles.
#pragma once

#include "runtime/loaded_model.hpp"
#include "runtime/run_context.hpp"

struct fdnn_model {
  fusednn::LoadedModel model;
};

struct fdnn_context {
  fusednn::RunContext context;
};
