#include "graph/safetensors_file.hpp"
