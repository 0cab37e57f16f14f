#include "backends/cpu/conv2d.hpp"
