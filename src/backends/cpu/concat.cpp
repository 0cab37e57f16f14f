#include "backends/cpu/concat.hpp"
