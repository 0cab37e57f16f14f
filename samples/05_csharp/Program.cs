// SPDX-License-Identifier: Apache-2.0
// 05_csharp: the FusedNN .NET binding (bindings/csharp), built and run with Mono.
//
// Builds a model from a spec held in a string, sets its weights from arrays, runs it from the
// main thread, from a Context of its own and from four threads at once, and checks every output
// against values worked out by hand:
//
//   fc1 = Linear(3 -> 2)  weight [[1, 2, 3], [-1, 0, 1]]  bias [0.5, -1]
//   ReLU
//   fc2 = Linear(2 -> 2)  weight [[1, 1], [2, -1]]        bias [0, 0.25]
//
//   x = [ 1,  2,  3]: fc1 = [14.5,  1] -> ReLU [14.5, 1] -> fc2 = [15.5, 28.25]
//   x = [-3,  1,  0]: fc1 = [-0.5,  2] -> ReLU [0,    2] -> fc2 = [2,    -1.75]
//   x = [-1, -1, -1]: fc1 = [-5.5, -1] -> ReLU [0,    0] -> fc2 = [0,     0.25]
//
// Failures of the library throw FusedNNException (Status, ErrorMessage); two are caused on
// purpose. Exit code 0 when every check passes, 1 otherwise.
using System;
using System.Linq;
using System.Threading;
using FusedNN;

namespace FusedNNSamples
{
    internal static class Program
    {
        private const string Spec = @"{
  ""fusednn"": 1,
  ""name"": ""hello"",
  ""input"": {""shape"": [3]},
  ""layers"": [
    {""type"": ""Linear"", ""name"": ""fc1"", ""in_features"": 3, ""out_features"": 2},
    {""type"": ""ReLU""},
    {""type"": ""Linear"", ""name"": ""fc2"", ""in_features"": 2, ""out_features"": 2}
  ]
}";

        private static readonly float[] Input = { 1, 2, 3, -3, 1, 0, -1, -1, -1 };
        private static readonly float[] Expected = { 15.5f, 28.25f, 2f, -1.75f, 0f, 0.25f };

        private static int failures;

        private static void CheckOutput(string what, float[] output)
        {
            bool matches = output.Length == Expected.Length &&
                           output.Zip(Expected, (got, want) => Math.Abs(got - want) <= 1e-6f).All(ok => ok);
            Console.WriteLine("{0}: [{1}] {2}", what, string.Join(", ", output), matches ? "ok" : "MISMATCH");
            if (!matches)
            {
                Interlocked.Increment(ref failures);
            }
        }

        // Runs `call`, which must throw FusedNNException with `expected`.
        private static void ExpectError(string what, Status expected, Action call)
        {
            try
            {
                call();
            }
            catch (FusedNNException error)
            {
                Console.WriteLine("{0} -> FusedNNException\n  Status: {1}\n  ErrorMessage: {2}",
                                  what, error.Status, error.ErrorMessage);
                if (error.Status != expected)
                {
                    Console.Error.WriteLine("expected {0}", expected);
                    failures++;
                }
                return;
            }
            Console.Error.WriteLine("{0}: no exception was thrown", what);
            failures++;
        }

        private static int Main()
        {
            Console.WriteLine("fusednn {0} (binding written against {1}), compatible: {2}",
                              FusedNNLibrary.VersionString, FusedNNLibrary.HeaderVersion,
                              FusedNNLibrary.IsCompatible);
            try
            {
                RunSample();
            }
            catch (FusedNNException error)
            {
                // An unexpected failure: the message names what was at fault.
                Console.Error.WriteLine("FAIL: " + error.Message);
                return 1;
            }
            if (failures != 0)
            {
                Console.Error.WriteLine("FAIL: {0} check(s) failed", failures);
                return 1;
            }
            Console.WriteLine("PASS: 05_csharp");
            return 0;
        }

        private static void RunSample()
        {
            ExpectError("Model.FromFile(\"no-such-model.safetensors\")", Status.IoError,
                        () => Model.FromFile("no-such-model.safetensors").Dispose());

            using (var model = Model.FromSpec(Spec, new ModelOptions { MaxBatch = 16, CpuThreads = 1 }))
            {
                // Weights first: SetWeight must not overlap any other call on the model.
                model.SetWeight("fc1.weight", new long[] { 2, 3 }, new float[] { 1, 2, 3, -1, 0, 1 });
                model.SetWeight("fc1.bias", new long[] { 2 }, new float[] { 0.5f, -1 });
                model.SetWeight("fc2.weight", new long[] { 2, 2 }, new float[] { 1, 1, 2, -1 });
                model.SetWeight("fc2.bias", new long[] { 2 }, new float[] { 0, 0.25f });
                model.Validate();

                CheckOutput("Model.Run", model.Run(3, Input));

                using (Context context = model.CreateContext())
                {
                    CheckOutput("Context.Run", context.Run(3, Input));
                }

                // Model.Run may be called from many threads at once.
                var threads = Enumerable.Range(0, 4).Select(index => new Thread(() =>
                {
                    try
                    {
                        CheckOutput("thread " + index, model.Run(3, Input));
                    }
                    catch (FusedNNException error)
                    {
                        Console.Error.WriteLine("thread {0}: {1}", index, error.Message);
                        Interlocked.Increment(ref failures);
                    }
                })).ToList();
                threads.ForEach(thread => thread.Start());
                threads.ForEach(thread => thread.Join());

                // The first run froze the weights.
                ExpectError("SetWeight after the first run", Status.InvalidState,
                            () => model.SetWeight("fc2.bias", new long[] { 2 }, new float[] { 1, 1 }));
            }
        }
    }
}
