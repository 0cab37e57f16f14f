#include "backends/cpu/channel_affine.hpp"
