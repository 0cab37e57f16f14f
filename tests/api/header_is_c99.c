// SPDX-License-Identifier: Apache-2.0

/* Compiled as strict C99 with -Werror: the public header must stay C-clean. */
#include "fusednn/fusednn.h"

int main(void) {
  fdnn_model_options options;
  if (fdnn_model_options_init(&options, sizeof options) != FDNN_STATUS_OK) return 1;
  return fdnn_version() == FDNN_VERSION_NUMBER && options.struct_size == sizeof options ? 0 : 1;
}
