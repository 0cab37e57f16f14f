#include "backends/cpu/layer_norm.hpp"
