#include "backends/cpu/pool2d.hpp"
