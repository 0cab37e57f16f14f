// SPDX-License-Identifier: Apache-2.0

/*
 * Runs a model bundle through an installed libfusednn and compares its output with PyTorch's: the
 * consumer that tests/package/test_deb.sh builds against the files of the .deb packages alone.
 *
 *   golden_check MODEL INPUT EXPECTED BATCH [DEVICE]
 *
 * MODEL is a bundle (tests/fixtures/golden/<name>/model.safetensors); INPUT and EXPECTED hold
 * BATCH samples of raw little-endian float32 values (the fixture's input_b<N> and output_b<N>,
 * which PyTorch computed). The check is the golden test's: the largest difference, divided by the
 * largest magnitude of the expected output, is at most 1e-5. DEVICE is cpu (the default), cuda or
 * auto: the model's fdnn_model_options::device. Prints the library version, the number of CUDA
 * devices the library sees, the device the model runs on, the shapes and the error; a call that
 * fails prints its status and the library's message. Exits 0 when the check passes, 1 when it
 * fails or a call fails, 2 on a usage error.
 */
#include <fusednn/fusednn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const double kTolerance = 1e-5;

/* Reads the whole of path as float32 values into a new buffer; NULL (with a message) on error. */
static float* read_floats(const char* path, long* count) {
  FILE* file = fopen(path, "rb");
  if (file == NULL) {
    fprintf(stderr, "golden_check: cannot open %s\n", path);
    return NULL;
  }
  float* values = NULL;
  long bytes = -1;
  if (fseek(file, 0, SEEK_END) == 0) bytes = ftell(file);
  if (bytes <= 0 || bytes % (long)sizeof(float) != 0 || fseek(file, 0, SEEK_SET) != 0) {
    fprintf(stderr, "golden_check: %s is empty or not a whole number of float32 values\n", path);
  } else {
    values = malloc((size_t)bytes);
    if (values == NULL || fread(values, 1, (size_t)bytes, file) != (size_t)bytes) {
      fprintf(stderr, "golden_check: cannot read %s\n", path);
      free(values);
      values = NULL;
    } else {
      *count = bytes / (long)sizeof(float);
    }
  }
  fclose(file);
  return values;
}

static long shape_elements(const fdnn_shape* shape) {
  long elements = 1;
  for (int32_t i = 0; i < shape->rank; ++i) elements *= (long)shape->dims[i];
  return elements;
}

static int fail_call(const char* call, fdnn_status status) {
  fprintf(stderr, "golden_check: %s returned %s: %s\n", call, fdnn_status_string(status),
          fdnn_last_error_message());
  return 1;
}

static int check(fdnn_model* model, const float* input, long input_count, const float* expected,
                 long expected_count, long batch) {
  fdnn_shape input_shape;
  fdnn_shape output_shape;
  fdnn_status status = fdnn_model_input_shape(model, &input_shape);
  if (status == FDNN_STATUS_OK) status = fdnn_model_output_shape(model, &output_shape);
  if (status != FDNN_STATUS_OK) return fail_call("fdnn_model_input/output_shape", status);
  long per_input = shape_elements(&input_shape);
  long per_output = shape_elements(&output_shape);
  printf("per sample: %ld inputs, %ld outputs; batch %ld\n", per_input, per_output, batch);
  if (input_count != batch * per_input || expected_count != batch * per_output) {
    fprintf(stderr,
            "golden_check: the files hold %ld inputs and %ld outputs, not %ld and %ld for batch "
            "%ld\n",
            input_count, expected_count, batch * per_input, batch * per_output, batch);
    return 1;
  }

  float* output = malloc((size_t)expected_count * sizeof(float));
  if (output == NULL) return 1;
  for (long i = 0; i < expected_count; ++i) output[i] = NAN; /* a value never written fails */
  status = fdnn_model_run(model, batch, input, (size_t)input_count, output, (size_t)expected_count);
  if (status != FDNN_STATUS_OK) {
    free(output);
    return fail_call("fdnn_model_run", status);
  }

  double worst = 0.0;
  double scale = 0.0;
  int finite = 1;
  for (long i = 0; i < expected_count; ++i) {
    double difference = fabs((double)output[i] - (double)expected[i]);
    finite &= isfinite(output[i]) != 0;
    if (difference > worst) worst = difference;
    if (fabs((double)expected[i]) > scale) scale = fabs((double)expected[i]);
  }
  free(output);
  double error = worst / (scale > 1e-30 ? scale : 1e-30);
  printf("largest difference %.3g, relative to the output's scale %.3g (tolerance %.0e)\n", worst,
         error, kTolerance);
  if (!finite || !(error <= kTolerance)) {
    fprintf(stderr, "golden_check: FAIL: the output differs from PyTorch's\n");
    return 1;
  }
  return 0;
}

/* The device named by text (cpu, cuda or auto); 0 when it names none. */
static int parse_device(const char* text, fdnn_device* device) {
  if (strcmp(text, "cpu") == 0) {
    *device = FDNN_DEVICE_CPU;
  } else if (strcmp(text, "cuda") == 0) {
    *device = FDNN_DEVICE_CUDA;
  } else if (strcmp(text, "auto") == 0) {
    *device = FDNN_DEVICE_AUTO;
  } else {
    return 0;
  }
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 5 && argc != 6) {
    fprintf(stderr, "usage: golden_check MODEL INPUT EXPECTED BATCH [cpu|cuda|auto]\n");
    return 2;
  }
  fdnn_device device = FDNN_DEVICE_CPU;
  if (argc == 6 && !parse_device(argv[5], &device)) {
    fprintf(stderr, "golden_check: DEVICE must be cpu, cuda or auto, not '%s'\n", argv[5]);
    return 2;
  }
  char* end = NULL;
  long batch = strtol(argv[4], &end, 10);
  if (end == argv[4] || *end != '\0' || batch < 1 || batch > 4096) {
    fprintf(stderr, "golden_check: BATCH must be 1 to 4096, not '%s'\n", argv[4]);
    return 2;
  }
  printf("fusednn %s\n", fdnn_version_string());
  int32_t gpus = 0;
  fdnn_status count_status = fdnn_cuda_device_count(&gpus);
  if (count_status != FDNN_STATUS_OK) return fail_call("fdnn_cuda_device_count", count_status);
  printf("CUDA devices: %d\n", (int)gpus);

  long input_count = 0;
  long expected_count = 0;
  float* input = read_floats(argv[2], &input_count);
  float* expected = input ? read_floats(argv[3], &expected_count) : NULL;
  if (expected == NULL) {
    free(input);
    return 1;
  }

  fdnn_model_options options;
  fdnn_status status = fdnn_model_options_init(&options, sizeof options);
  fdnn_model* model = NULL;
  int result = 1;
  if (status != FDNN_STATUS_OK) {
    fail_call("fdnn_model_options_init", status);
  } else {
    options.device = device;
    options.max_batch = batch;
    status = fdnn_model_create_from_file(argv[1], &options, &model);
    fdnn_device used = FDNN_DEVICE_AUTO;
    if (status != FDNN_STATUS_OK) {
      fail_call("fdnn_model_create_from_file", status);
    } else if ((status = fdnn_model_device(model, &used)) != FDNN_STATUS_OK) {
      fail_call("fdnn_model_device", status);
    } else {
      printf("device: %s\n", used == FDNN_DEVICE_CUDA ? "cuda" : "cpu");
      result = check(model, input, input_count, expected, expected_count, batch);
    }
  }
  fdnn_model_destroy(model);
  free(input);
  free(expected);
  if (result == 0) printf("PASS: golden_check %s\n", argv[1]);
  return result;
}
