#include "graph/model_file.hpp"
