#include "graph/graph.hpp"
