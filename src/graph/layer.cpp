#include "graph/layer.hpp"
