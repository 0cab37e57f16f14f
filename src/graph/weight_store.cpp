#include "graph/weight_store.hpp"
