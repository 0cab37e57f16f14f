#include "backends/cpu/linear.hpp"
