#include "graph/weight_directory.hpp"
