// The structs behind the opaque C handles.
#pragma once

#include "runtime/model.hpp"

struct fdnn_model {
  fusednn::Model model;
};

struct fdnn_context {
  fusednn::Context context;
};
