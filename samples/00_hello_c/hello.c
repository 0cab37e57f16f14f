// SPDX-License-Identifier: Apache-2.0

/*
 * 00_hello_c: the C API from start to end.
 *
 *   create a model from a JSON spec (model.json), load its weights from a folder of .txt files
 *   (weights/), run a batch of three samples, check the output, destroy the model;
 *   and, on purpose, two bad calls, to show how an error is reported: a status code,
 *   fdnn_status_string() for its name and fdnn_last_error_message() for the detail.
 *
 * The network is small enough to check by hand:
 *
 *   fc1 = Linear(3 -> 2)  weight [[1, 2, 3], [-1, 0, 1]]  bias [0.5, -1]
 *   ReLU
 *   fc2 = Linear(2 -> 2)  weight [[1, 1], [2, -1]]        bias [0, 0.25]
 *
 *   x = [ 1,  2,  3]: fc1 = [14.5,  1] -> ReLU [14.5, 1] -> fc2 = [15.5, 28.25]
 *   x = [-3,  1,  0]: fc1 = [-0.5,  2] -> ReLU [0,    2] -> fc2 = [2,    -1.75]
 *   x = [-1, -1, -1]: fc1 = [-5.5, -1] -> ReLU [0,    0] -> fc2 = [0,     0.25]
 *
 * Usage: hello_c [SAMPLE_DIR]   (the folder holding model.json and weights/; by default the
 * folder this file was built from). Exit status 0 when every check passes, 1 otherwise.
 */
#include <fusednn/fusednn.h>

#include <math.h>
#include <stdio.h>

#ifndef FUSEDNN_SAMPLE_DIR
#define FUSEDNN_SAMPLE_DIR "."
#endif

enum { BATCH = 3, INPUTS = 3, OUTPUTS = 2 };

/* Prints a failed call's status name and this thread's message; returns 1 for `return fail()`. */
static int report_failure(const char* call, fdnn_status status) {
  fprintf(stderr, "FAIL: %s returned %s: %s\n", call, fdnn_status_string(status),
          fdnn_last_error_message());
  return 1;
}

/* The deliberate mistakes: each must fail with the expected status and leave a message. */
static int show_error_handling(fdnn_model* model) {
  int failures = 0;

  /* 1. A file that does not exist: FDNN_STATUS_IO_ERROR, and `missing` is left untouched. */
  fdnn_model* missing = NULL;
  fdnn_status status = fdnn_model_create_from_file("no-such-model.safetensors", NULL, &missing);
  printf("bad call 1: create_from_file(\"no-such-model.safetensors\") -> %s\n  message: %s\n",
         fdnn_status_string(status), fdnn_last_error_message());
  if (status != FDNN_STATUS_IO_ERROR || missing != NULL || fdnn_last_error_message()[0] == '\0') {
    fprintf(stderr, "FAIL: expected FDNN_STATUS_IO_ERROR with a message and no model\n");
    ++failures;
  }
  fdnn_model_destroy(missing); /* NULL is accepted, so cleanup code needs no check */

  /* 2. An output buffer one float too small: refused, and nothing is written. */
  const float input[INPUTS] = {1.0f, 2.0f, 3.0f};
  float output[OUTPUTS] = {-7.0f, -7.0f};
  status = fdnn_model_run(model, 1, input, INPUTS, output, OUTPUTS - 1);
  printf("bad call 2: model_run with room for %d of %d outputs -> %s\n  message: %s\n", OUTPUTS - 1,
         OUTPUTS, fdnn_status_string(status), fdnn_last_error_message());
  if (status != FDNN_STATUS_BUFFER_TOO_SMALL || output[0] != -7.0f) {
    fprintf(stderr, "FAIL: expected FDNN_STATUS_BUFFER_TOO_SMALL and an untouched buffer\n");
    ++failures;
  }
  return failures;
}

int main(int argc, char** argv) {
  const char* sample_dir = argc > 1 ? argv[1] : FUSEDNN_SAMPLE_DIR;
  char spec_path[4096];
  char weights_path[4096];
  snprintf(spec_path, sizeof spec_path, "%s/model.json", sample_dir);
  snprintf(weights_path, sizeof weights_path, "%s/weights", sample_dir);

  printf("fusednn %s (header %d.%d.%d)\n", fdnn_version_string(), FDNN_VERSION_MAJOR,
         FDNN_VERSION_MINOR, FDNN_VERSION_PATCH);
  if (fdnn_version() / 10000 != FDNN_VERSION_MAJOR) {
    fprintf(stderr, "FAIL: the library's ABI major differs from the header's\n");
    return 1;
  }

  /* Options start from the library's defaults; then change what you need. */
  fdnn_model_options options;
  fdnn_status status = fdnn_model_options_init(&options, sizeof options);
  if (status != FDNN_STATUS_OK) return report_failure("fdnn_model_options_init", status);
  options.max_batch = 8;
  options.device = FDNN_DEVICE_CPU;

  fdnn_model* model = NULL;
  status = fdnn_model_create_from_file(spec_path, &options, &model);
  if (status != FDNN_STATUS_OK) return report_failure("fdnn_model_create_from_file", status);

  status = fdnn_model_load_weights(model, weights_path);
  if (status == FDNN_STATUS_OK) status = fdnn_model_validate(model);
  if (status != FDNN_STATUS_OK) {
    report_failure("fdnn_model_load_weights / fdnn_model_validate", status);
    fdnn_model_destroy(model);
    return 1;
  }

  const float input[BATCH * INPUTS] = {1, 2, 3, /**/ -3, 1, 0, /**/ -1, -1, -1};
  const float expected[BATCH * OUTPUTS] = {15.5f, 28.25f, /**/ 2.0f, -1.75f, /**/ 0.0f, 0.25f};
  float output[BATCH * OUTPUTS];
  status = fdnn_model_run(model, BATCH, input, BATCH * INPUTS, output, BATCH * OUTPUTS);
  if (status != FDNN_STATUS_OK) {
    report_failure("fdnn_model_run", status);
    fdnn_model_destroy(model);
    return 1;
  }

  int failures = 0;
  for (int i = 0; i < BATCH; ++i) {
    const float* got = output + i * OUTPUTS;
    const float* want = expected + i * OUTPUTS;
    int ok = fabsf(got[0] - want[0]) <= 1e-6f && fabsf(got[1] - want[1]) <= 1e-6f;
    printf("sample %d: [% g, % g]  expected [% g, % g]  %s\n", i, got[0], got[1], want[0], want[1],
           ok ? "ok" : "MISMATCH");
    failures += !ok;
  }

  failures += show_error_handling(model);
  fdnn_model_destroy(model);

  if (failures) {
    fprintf(stderr, "FAIL: %d check(s) failed\n", failures);
    return 1;
  }
  printf("PASS: 00_hello_c\n");
  return 0;
}
