#include "graph/spec_parser.hpp"
