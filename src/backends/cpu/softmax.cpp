#include "backends/cpu/softmax.hpp"
