#include "backends/cpu/elementwise.hpp"
